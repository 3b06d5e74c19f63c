//! The `http` group: `http_request`, an HTTP call the model makes to a public address.
//!
//! Loopback, private, link-local and other non-public targets are refused unless
//! `http.allow_private = true`: the model must not become a way into the LAN or to cloud
//! metadata services. Every resolved address is checked and the connection goes to the checked
//! one, so a DNS answer cannot change between check and use. The response body is cut to
//! `http.max_response_bytes`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use chela_core::config as keys;
use hyper::http::Method;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};
use crate::net::{Guard, NetError, Request};
use crate::read_args;

pub fn group() -> Group {
    Group::new("http", "Make HTTP requests to public web addresses.")
        .guidance("HTTP: http_request fetches a URL or calls a web API; private and local addresses are refused.")
        .with(HttpRequest)
}

/// Headers returned to the model at most, and the longest value kept.
const MAX_HEADERS: usize = 40;
const MAX_HEADER_VALUE: usize = 300;
/// Largest request body the model may send.
const MAX_REQUEST_BODY: usize = 1024 * 1024;

pub struct HttpRequest;

pub struct RequestArgs {
    url: String,
    method: Option<String>,
    headers: BTreeMap<String, String>,
    body: Option<String>,
    timeout_secs: Option<u64>,
}

read_args!(RequestArgs { url: need, method: opt, headers: or_default, body: opt, timeout_secs: opt });

impl Tool for HttpRequest {
    const NAME: &'static str = "http_request";
    const DESCRIPTION: &'static str = "HTTP request to a public URL. Returns status, headers and body (cut when long).";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"url":{"type":"string"},"method":{"type":"string","enum":["GET","POST","PUT","PATCH","DELETE","HEAD"]},"headers":{"type":"object","additionalProperties":{"type":"string"}},"body":{"type":"string"},"timeout_secs":{"type":"integer"}},"required":["url"]}"#;
    type Args = RequestArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: RequestArgs) -> ToolResult {
        let method = match a.method.as_deref().unwrap_or("GET").to_ascii_uppercase().as_str() {
            "GET" => Method::GET,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "PATCH" => Method::PATCH,
            "DELETE" => Method::DELETE,
            "HEAD" => Method::HEAD,
            other => {
                return Err(ToolError::invalid_args(format!(
                    "Method `{other}` is not supported: use GET, POST, PUT, PATCH, DELETE or HEAD."
                )));
            }
        };
        let body = a.body.unwrap_or_default();
        if body.len() > MAX_REQUEST_BODY {
            return Err(ToolError::invalid_args(format!("The request body is over {MAX_REQUEST_BODY} bytes.")));
        }
        let max_secs = ctx.cfg.int(keys::HTTP_TIMEOUT_SECS).unsigned_abs();
        let timeout = Duration::from_secs(a.timeout_secs.unwrap_or(max_secs).clamp(1, max_secs));
        let guard = if ctx.cfg.bool(keys::HTTP_ALLOW_PRIVATE) { Guard::AllowAll } else { Guard::PublicOnly };
        let req = Request {
            method: method.clone(),
            url: a.url.trim().to_owned(),
            headers: a.headers.into_iter().collect(),
            body: Bytes::from(body),
            timeout,
            guard,
        };
        let resp = ctx.http.send(req).await.map_err(|e| explain(&e, &a.url))?;
        let limit = ctx.cfg.usize(keys::HTTP_MAX_RESPONSE_BYTES);
        let status = resp.status;
        let mut headers = serde_json::Map::new();
        for (name, value) in resp.headers.iter().take(MAX_HEADERS) {
            let v = String::from_utf8_lossy(value.as_bytes());
            headers.insert(name.as_str().to_owned(), chela_core::text::prefix(&v, MAX_HEADER_VALUE).into());
        }
        let (bytes, more) = if method == Method::HEAD {
            (Bytes::new(), false)
        } else {
            resp.bytes_truncated(limit, timeout).await.map_err(|e| explain(&e, &a.url))?
        };
        let body = match std::str::from_utf8(&bytes) {
            Ok(text) => text.to_owned(),
            // A cut can land inside a character; keep the whole ones.
            Err(e) if more && e.error_len().is_none() => {
                String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
            }
            Err(_) => format!("({} bytes of binary data, not shown)", bytes.len()),
        };
        let mut out = serde_json::json!({"status": status, "headers": headers, "body": body});
        if more {
            out["truncated"] = format!("the body was cut at {limit} bytes (http.max_response_bytes)").into();
        }
        Ok(out.to_string())
    }
}

fn explain(e: &NetError, url: &str) -> ToolError {
    match e {
        NetError::Refused { .. } => ToolError::refused(format!(
            "{e}. Requests to local and private addresses are refused; the user can allow them with \
             `chela config set http.allow_private true`."
        )),
        _ => ToolError::new(format!("The request to {url} failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Fixture;
    use crate::tools::testing::serve;

    async fn request(fx: &Fixture, args: serde_json::Value) -> ToolResult {
        fx.call(HttpRequest, args).await
    }

    #[tokio::test]
    async fn private_targets_are_refused_by_default() {
        let (url, seen) = serve(|_| (200, vec![], "secret".to_owned())).await;
        let fx = Fixture::new(&[]);
        for target in [
            url.clone(),
            url.replace("127.0.0.1", "localhost"),
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "http://[::1]:9/".to_owned(),
            "http://10.0.0.1/".to_owned(),
        ] {
            let e = request(&fx, serde_json::json!({"url": target})).await.unwrap_err();
            assert!(e.0.contains("http.allow_private"), "{target}: {e}");
            assert_eq!(e.kind(), crate::tools::ToolErrorKind::Refused, "{target}");
        }
        assert!(seen.lock().unwrap().is_empty(), "nothing reached the server");
        let e = request(&fx, serde_json::json!({"url": "ftp://example.com/"})).await.unwrap_err();
        assert!(!e.0.is_empty());
        let e = request(&fx, serde_json::json!({"url": "https://example.com/", "method": "TRACE"})).await.unwrap_err();
        assert!(e.0.contains("TRACE"), "{e}");
    }

    #[tokio::test]
    async fn allowed_requests_return_status_headers_and_a_bounded_body() {
        let (url, seen) =
            serve(|s| (201, vec![("x-answer", "42".to_owned())], format!("{} {}", s.method, "é".repeat(1000)))).await;
        let fx = Fixture::new(&[("http.allow_private", "true"), ("http.max_response_bytes", "1025")]);
        let out = request(&fx, serde_json::json!({"url": format!("{url}/things?id=1"), "method": "post", "headers": {"X-Token": "t"}, "body": "{\"a\":1}"})).await.unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], 201);
        assert_eq!(v["headers"]["x-answer"], "42");
        let body = v["body"].as_str().unwrap();
        assert!(body.starts_with("POST éé") && body.len() <= 1025, "{}", body.len());
        assert!(v["truncated"].as_str().unwrap().contains("1025 bytes"));
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].uri, "/things?id=1");
        assert_eq!(seen[0].header("x-token"), Some("t"));
        assert_eq!(seen[0].body, "{\"a\":1}");
    }
}
