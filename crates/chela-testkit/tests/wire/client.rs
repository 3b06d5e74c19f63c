//! A plain HTTP/1.1 client for the tests (hyper over a tokio `TcpStream`), and small helpers
//! for building requests in either API and reading SSE bodies.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderMap;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

/// A response, with the body bytes that arrived and the error that ended the body, if any.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub body_error: Option<String>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn json(&self) -> Value {
        assert_eq!(self.body_error, None, "the body ended with an error");
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("UTF-8 body")
    }

    /// The SSE events of the body: `(event name, data)`.
    pub fn events(&self) -> Vec<(Option<String>, String)> {
        sse_events(self.text())
    }

    /// The data of each event, parsed as JSON.
    pub fn event_json(&self) -> Vec<Value> {
        self.events().iter().map(|(_, data)| serde_json::from_str(data).unwrap()).collect()
    }
}

/// Splits an SSE body into `(event name, data)` pairs, asserting every event is complete.
pub fn sse_events(text: &str) -> Vec<(Option<String>, String)> {
    assert!(text.is_empty() || text.ends_with("\n\n"), "the stream ends mid-event: {text:?}");
    let mut out = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.is_empty()) {
        let mut name = None;
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                name = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push(v);
            } else {
                panic!("unexpected SSE line {line:?}");
            }
        }
        out.push((name, data.join("\n")));
    }
    out
}

/// Sends one request on a fresh connection and reads the whole response.
pub async fn send(addr: SocketAddr, method: Method, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Reply {
    let mut response = start(addr, method, path, headers, body).await;
    let mut reply = Reply {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: Vec::new(),
        body_error: None,
    };
    loop {
        match response.body_mut().frame().await {
            None => break,
            Some(Ok(frame)) => reply.body.extend_from_slice(frame.data_ref().map_or(&[][..], |d| &d[..])),
            Some(Err(e)) => {
                reply.body_error = Some(e.to_string());
                break;
            }
        }
    }
    reply
}

/// Sends a request and returns the response as soon as its head arrives.
pub async fn start(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> hyper::Response<hyper::body::Incoming> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(async move {
        // The connection's own error shows up in the response or body below.
        let _ = conn.await;
    });
    let mut req = Request::builder().method(method).uri(path).header("host", addr.to_string());
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    sender.send_request(req).await.expect("response head")
}

/// The two APIs, with a valid request for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAi,
}

pub const BOTH: [Api; 2] = [Api::Anthropic, Api::OpenAi];

impl Api {
    pub fn path(self) -> &'static str {
        match self {
            Api::Anthropic => "/v1/messages",
            Api::OpenAi => "/v1/chat/completions",
        }
    }

    /// The auth headers a real client sends with `key`.
    pub fn headers(self, key: &str) -> Vec<(String, String)> {
        match self {
            Api::Anthropic => vec![("x-api-key".into(), key.into()), ("anthropic-version".into(), "2023-06-01".into())],
            Api::OpenAi => vec![("authorization".into(), format!("Bearer {key}"))],
        }
    }

    /// A minimal valid request saying `text`.
    pub fn request(self, text: &str, stream: bool) -> Value {
        match self {
            Api::Anthropic => json!({
                "model": "claude-test", "max_tokens": 256, "stream": stream,
                "messages": [{"role": "user", "content": text}]
            }),
            Api::OpenAi => json!({
                "model": "gpt-test", "stream": stream,
                "messages": [{"role": "user", "content": text}]
            }),
        }
    }

    /// Posts `body` to this API's path with a test key.
    pub async fn post(self, addr: SocketAddr, body: &Value) -> Reply {
        let headers = self.headers("sk-test");
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        send(addr, Method::POST, self.path(), &headers, body.to_string().into_bytes()).await
    }

    /// Posts a minimal request.
    pub async fn ask(self, addr: SocketAddr, stream: bool) -> Reply {
        self.post(addr, &self.request("hello", stream)).await
    }
}
