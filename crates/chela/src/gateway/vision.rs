//! `POST /mcp/vision/explain`: where a xiaozhi device's camera tool posts a photo and a
//! question (xiaozhi's vision URL). The body is `multipart/form-data` with a `question` field and
//! a `file` part (the photo, image/jpeg); the headers are `Authorization: Bearer <token>`,
//! `Device-Id` and `Client-Id`. The token is the one Chela put in the device's MCP
//! `initialize` (`capabilities.vision.token`, see [`crate::devices::DeviceState::vision_token`]):
//! per device, checked against the device store, gone when the device is revoked.
//!
//! The answer is what the firmware's Python peers expect: `{"success":true,"action":"RESPONSE",
//! "response":"…"}`, or `{"success":false,"message":"…"}` with a fitting status. The body is read
//! within `tools.max_image_bytes` plus room for the form; the image goes to the configured
//! model through [`crate::vision::describe_image`].

use bytes::Bytes;
use chela_core::config as keys;
use http_body_util::{BodyExt, Limited};
use hyper::body::Body;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use hyper::{Method, StatusCode};
use serde_json::json;

use super::{Gateway, Resp};
use crate::devices::{Devices, normalize_id};
use crate::vision::{VisionError, describe_image};

/// The path the device is told (`capabilities.vision.url`).
pub const PATH: &str = "/mcp/vision/explain";
/// Bytes the form may add around the image (boundaries, part headers, the question).
const FORM_SLACK: usize = 16 * 1024;

/// A refusal as the device reads it.
fn fail(status: StatusCode, message: impl Into<String>) -> Resp {
    super::json(status, &json!({"success": false, "message": message.into()}))
}

/// Answers one request to [`PATH`].
pub async fn explain<B>(gw: &std::sync::Arc<Gateway>, method: &Method, headers: &HeaderMap, body: B) -> Resp
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if method != Method::POST {
        return fail(StatusCode::METHOD_NOT_ALLOWED, "the camera posts its photo here with POST");
    }
    let cfg = gw.daemon.config();
    if !cfg.bool(keys::XIAOZHI_ENABLED) {
        return fail(StatusCode::NOT_FOUND, "xiaozhi devices are off here (xiaozhi.enabled = false)");
    }
    let get = |name| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or("");
    let Some(token) = get(AUTHORIZATION.as_str()).strip_prefix("Bearer ").map(str::trim).filter(|t| !t.is_empty())
    else {
        return fail(StatusCode::UNAUTHORIZED, "the request needs `Authorization: Bearer <token>` (the vision token)");
    };
    let Some(id) = normalize_id(get("device-id")) else {
        return fail(StatusCode::BAD_REQUEST, "the Device-Id header is missing or not a MAC address");
    };
    let store = Devices::open(gw.daemon.workspace());
    let (token, who) = (token.to_owned(), id.clone());
    let ok = crate::tasks::blocking(move || store.load().map(|s| s.vision_token_ok(&who, &token)))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(false);
    if !ok {
        return fail(
            StatusCode::UNAUTHORIZED,
            "the vision token is not this device's (approve the device, reconnect it)",
        );
    }
    let max_image = usize::try_from(cfg.int(keys::TOOLS_MAX_IMAGE_BYTES)).unwrap_or(0);
    let limit = max_image + FORM_SLACK;
    let collect = Limited::new(body, limit).collect();
    let body = match tokio::time::timeout(gw.limits.body_timeout, collect).await {
        Err(_) => return fail(StatusCode::REQUEST_TIMEOUT, "the photo did not arrive in time"),
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            return fail(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the photo is over {max_image} bytes, the most sent to the model (tools.max_image_bytes)"),
            );
        }
        Ok(Err(e)) => return fail(StatusCode::BAD_REQUEST, format!("the request body could not be read: {e}")),
    };
    let Some(boundary) = boundary(get(CONTENT_TYPE.as_str())) else {
        return fail(StatusCode::UNSUPPORTED_MEDIA_TYPE, "the body must be multipart/form-data with a boundary");
    };
    let form = match parse_form(&body, &boundary) {
        Ok(f) => f,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let Some(question) = form.question else {
        return fail(StatusCode::BAD_REQUEST, "the form has no `question` field");
    };
    let Some((mime, image)) = form.file else { return fail(StatusCode::BAD_REQUEST, "the form has no `file` part") };
    let app = match gw.daemon.app() {
        Ok(a) => a,
        Err(e) => return fail(StatusCode::SERVICE_UNAVAILABLE, e),
    };
    let question = String::from_utf8_lossy(&question).into_owned();
    // A part type the models do not take is left for the bytes to speak (and be refused).
    let mime = if mime.starts_with("image/") { mime } else { String::new() };
    match describe_image(&app.provider, &app.base.cfg, &image, &mime, &question).await {
        Ok(text) => {
            chela_log::info!(device = id, "xiaozhi: a photo was described");
            super::json(StatusCode::OK, &json!({"success": true, "action": "RESPONSE", "response": text}))
        }
        Err(VisionError::Refused(m)) => fail(StatusCode::UNPROCESSABLE_ENTITY, m),
        Err(VisionError::Model(m)) => fail(StatusCode::BAD_GATEWAY, m),
    }
}

/// The boundary of a `multipart/form-data` content type.
fn boundary(content_type: &str) -> Option<String> {
    let mut parts = content_type.split(';');
    if !parts.next()?.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        let v = v.trim().trim_matches('"');
        (k.trim().eq_ignore_ascii_case("boundary") && !v.is_empty() && v.len() <= 200).then(|| v.to_owned())
    })
}

/// The fields this endpoint reads from a form.
#[derive(Debug, Default, PartialEq)]
struct Form {
    question: Option<Vec<u8>>,
    /// The part's content type and bytes.
    file: Option<(String, Vec<u8>)>,
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|i| i + from)
}

/// Reads a whole `multipart/form-data` body (RFC 7578): the `question` and `file` parts.
fn parse_form(body: &[u8], boundary: &str) -> Result<Form, String> {
    let delim = format!("--{boundary}");
    let next_delim = format!("\r\n--{boundary}");
    let bad = |why: &str| Err(format!("the multipart body is malformed: {why}"));
    let Some(mut at) = find(body, delim.as_bytes(), 0) else { return bad("no boundary") };
    at += delim.len();
    let mut form = Form::default();
    // Each part costs at least a boundary, so the loop ends; the count bounds it anyway.
    for _ in 0..64 {
        match body.get(at..at + 2) {
            Some(b"--") => return Ok(form),
            Some(b"\r\n") => at += 2,
            _ => return bad("a boundary line does not end"),
        }
        let Some(head_end) = find(body, b"\r\n\r\n", at) else { return bad("a part has no header end") };
        let head = String::from_utf8_lossy(&body[at..head_end]).into_owned();
        let start = head_end + 4;
        let Some(end) = find(body, next_delim.as_bytes(), start) else { return bad("a part does not end") };
        let content = &body[start..end];
        let mut name = String::new();
        let mut ctype = String::new();
        for line in head.split("\r\n") {
            let Some((k, v)) = line.split_once(':') else { continue };
            if k.trim().eq_ignore_ascii_case("content-disposition") {
                name = v
                    .split(';')
                    .find_map(|p| p.trim().strip_prefix("name=").map(|n| n.trim_matches('"').to_owned()))
                    .unwrap_or_default();
            } else if k.trim().eq_ignore_ascii_case("content-type") {
                ctype = v.trim().to_ascii_lowercase();
            }
        }
        match name.as_str() {
            "question" => form.question = Some(content.to_vec()),
            "file" => form.file = Some((ctype, content.to_vec())),
            _ => {}
        }
        at = end + next_delim.len();
    }
    bad("too many parts")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_read_part_by_part() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"question\"\r\n\r\nWhat is it?\r\n--XyZ\r\n\
Content-Disposition: form-data; name=\"file\"; filename=\"camera.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n\xff\xd8\xff\r\n--x\r\n--XyZ--\r\n";
        let f = parse_form(body, "XyZ").unwrap();
        assert_eq!(f.question.as_deref(), Some(&b"What is it?"[..]));
        assert_eq!(f.file, Some(("image/jpeg".into(), b"\xff\xd8\xff\r\n--x".to_vec())));
        assert_eq!(boundary("multipart/form-data; boundary=\"XyZ\""), Some("XyZ".into()));
        assert_eq!(boundary("application/json"), None);
        assert!(parse_form(b"--XyZ\r\nno header end", "XyZ").is_err());
        assert!(parse_form(b"nothing", "XyZ").is_err());
        assert!(parse_form(b"--XyZ\r\nA: b\r\n\r\nnever ends", "XyZ").is_err());
        let many = "--b\r\nX: y\r\n\r\nz\r\n".repeat(100) + "--b--";
        assert!(parse_form(many.as_bytes(), "b").unwrap_err().contains("too many parts"));
    }
}
