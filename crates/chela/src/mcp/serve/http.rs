//! Streamable HTTP at `/mcp` on the gateway. The gateway has already decided who is asking
//! (loopback: anyone on this machine; elsewhere: `gateway.token`) and refused a foreign
//! `Origin` (403) and an oversized body (413); this file speaks the transport:
//!
//! - `POST` one JSON-RPC message (or, before 2025-06-18, a batch). Notifications and
//!   responses get 202 and no body; a request gets its response as `application/json`, or as
//!   one SSE event when the client accepts only `text/event-stream`.
//! - Handshake era: `initialize` opens a session and its id comes back in `Mcp-Session-Id`;
//!   every later request carries it (missing: 400, unknown or expired: 404) and
//!   `MCP-Protocol-Version` (missing: 2025-03-26 is assumed; unknown or not the negotiated
//!   one: 400). At most [`MAX_SESSIONS`] live at once; one unused for [`IDLE`] is dropped.
//!   `DELETE` ends one.
//! - 2026-07-28: no session; each request names its version in `params._meta`, and the
//!   `MCP-Protocol-Version` header, when sent, must agree. Errors carry the HTTP status the
//!   revision gives them (-32022 and invalid params: 400, unknown method: 404).
//! - `GET`: 405, since no server-initiated stream is offered (the served tools' changes are
//!   announced on stdio; HTTP clients of 2026-07-28 re-list after `ttlMs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::Body;
use hyper::header::{ACCEPT, ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use super::{
    INVALID_PARAMS, INVALID_REQUEST, Kind, LEGACY_VERSIONS, MAX_BATCH, METHOD_NOT_FOUND, MODERN, PARSE_ERROR, Server,
    Session, UNSUPPORTED_VERSION, classify, error, meta_version,
};
use crate::daemon::Daemon;
use crate::gateway::{ApiError, Gateway, Resp, full};
use crate::turn::Cancel;

/// Handshake-era sessions kept at once.
pub const MAX_SESSIONS: usize = 64;
/// A session unused this long is forgotten.
pub const IDLE: Duration = Duration::from_secs(30 * 60);

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// The server and its sessions, one per gateway.
pub struct Endpoint {
    server: Server,
    sessions: Mutex<HashMap<String, (Session, Instant)>>,
}

impl Endpoint {
    pub fn new(daemon: Arc<Daemon>) -> Endpoint {
        Endpoint { server: Server::new(daemon), sessions: Mutex::new(HashMap::new()) }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Session, Instant)>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session `id`, if it lives; touching it keeps it alive.
    fn session(&self, id: &str) -> Option<Session> {
        let mut map = self.sessions();
        let now = Instant::now();
        map.retain(|_, (_, used)| now.duration_since(*used) < IDLE);
        map.get_mut(id).map(|(s, used)| {
            *used = now;
            s.clone()
        })
    }

    fn open(&self, session: Session) -> Option<String> {
        let mut map = self.sessions();
        let now = Instant::now();
        map.retain(|_, (_, used)| now.duration_since(*used) < IDLE);
        if map.len() >= MAX_SESSIONS {
            return None;
        }
        let id = new_id()?;
        map.insert(id.clone(), (session, now));
        Some(id)
    }

    fn update(&self, id: &str, session: Session) {
        if let Some(entry) = self.sessions().get_mut(id) {
            entry.0 = session;
        }
    }
}

/// 16 random bytes as hex: visible ASCII, as the transport asks of a session id.
fn new_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Answers one request to `/mcp`.
pub async fn handle<B>(gw: &Arc<Gateway>, mcp: &Endpoint, req: Request<B>) -> Result<Resp, ApiError>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    match parts.method {
        Method::POST => {}
        Method::DELETE => return Ok(delete(mcp, headers)),
        Method::GET => {
            let mut resp = rpc_status(
                StatusCode::METHOD_NOT_ALLOWED,
                &error(Value::Null, INVALID_REQUEST, "this server offers no GET stream; POST requests to /mcp"),
            );
            resp.headers_mut().insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
            return Ok(resp);
        }
        ref m => return Err(ApiError::MethodNotAllowed(format!("{m} is not used on /mcp; POST JSON-RPC messages"))),
    }
    let accept = header(headers, ACCEPT.as_str()).unwrap_or("").to_ascii_lowercase();
    let json_ok = accept.is_empty() || accept.contains("application/json") || accept.contains("*/*");
    if !json_ok && !accept.contains("text/event-stream") {
        return Ok(rpc_status(
            StatusCode::NOT_ACCEPTABLE,
            &error(Value::Null, INVALID_REQUEST, "accept application/json or text/event-stream"),
        ));
    }
    let content_type = header(headers, CONTENT_TYPE.as_str()).unwrap_or("");
    if !content_type.to_ascii_lowercase().starts_with("application/json") {
        return Ok(rpc_status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &error(Value::Null, INVALID_REQUEST, "send the message as Content-Type: application/json"),
        ));
    }
    let body = gw.read_body(body).await?;
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            let e = error(Value::Null, PARSE_ERROR, &format!("the body is not JSON: {e}"));
            return Ok(rpc_status(StatusCode::BAD_REQUEST, &e));
        }
    };
    let header_version = header(headers, VERSION_HEADER);
    if let Some(v) = header_version
        && !LEGACY_VERSIONS.contains(&v)
        && v != MODERN
    {
        let e = error(Value::Null, INVALID_REQUEST, &format!("unsupported MCP-Protocol-Version `{}`", clip(v)));
        return Ok(rpc_status(StatusCode::BAD_REQUEST, &e));
    }
    let sse = !json_ok;
    if let Value::Array(batch) = msg {
        return Ok(batch_reply(mcp, headers, batch, sse).await);
    }
    match classify(msg) {
        Kind::Notification { method, params } => {
            if let Some(id) = header(headers, SESSION_HEADER)
                && let Some(mut s) = mcp.session(id)
            {
                mcp.server.notification(&mut s, &method, &params);
                mcp.update(id, s);
            }
            Ok(accepted())
        }
        Kind::Response => Ok(accepted()),
        Kind::Invalid(e) => Ok(rpc_status(StatusCode::BAD_REQUEST, &e)),
        Kind::Request { id, method, params } if method == "initialize" && meta_version(&params).is_none() => {
            let (reply, session) = mcp.server.initialize(id.clone(), &params);
            let Some(sid) = mcp.open(session) else {
                let e = error(id, INVALID_REQUEST, &format!("{MAX_SESSIONS} MCP sessions are open; end one first"));
                return Ok(rpc_status(StatusCode::SERVICE_UNAVAILABLE, &e));
            };
            let mut resp = reply_response(&reply, sse, StatusCode::OK);
            if let Ok(v) = HeaderValue::from_str(&sid) {
                resp.headers_mut().insert(SESSION_HEADER, v);
            }
            Ok(resp)
        }
        Kind::Request { id, method, params } => {
            let modern = meta_version(&params).is_some() || (method == "server/discover");
            let session = if modern {
                if let (Some(h), Some(m)) = (header_version, meta_version(&params))
                    && h != m
                {
                    let e = error(id, INVALID_PARAMS, "MCP-Protocol-Version and params._meta name different versions");
                    return Ok(rpc_status(StatusCode::BAD_REQUEST, &e));
                }
                Session::default()
            } else {
                match legacy_session(mcp, headers, &id) {
                    Ok(s) => s,
                    Err((status, e)) => return Ok(rpc_status(status, &e)),
                }
            };
            let reply = mcp.server.request(&session, id, &method, params, &Cancel::default()).await;
            let status = if modern { status_of(&reply) } else { StatusCode::OK };
            Ok(reply_response(&reply, sse, status))
        }
    }
}

/// The session a handshake-era request names, with its version header checked.
fn legacy_session(mcp: &Endpoint, headers: &HeaderMap, id: &Value) -> Result<Session, (StatusCode, Value)> {
    let Some(sid) = header(headers, SESSION_HEADER) else {
        let e = error(
            id.clone(),
            INVALID_REQUEST,
            &format!("send `initialize` first and then its Mcp-Session-Id, or use protocol version {MODERN}"),
        );
        return Err((StatusCode::BAD_REQUEST, e));
    };
    let Some(session) = mcp.session(sid) else {
        let e = error(id.clone(), INVALID_REQUEST, "no such session (it ended or expired); initialize again");
        return Err((StatusCode::NOT_FOUND, e));
    };
    // A client that sends no version header is taken to speak 2025-03-26, as the transport
    // says; that is let through, since what the session agreed on decides what it gets.
    let agreed = session.version.as_deref().unwrap_or("");
    if let Some(sent) = header(headers, VERSION_HEADER)
        && sent != agreed
    {
        let e = error(
            id.clone(),
            INVALID_REQUEST,
            &format!("MCP-Protocol-Version `{}` is not the version this session agreed on ({agreed})", clip(sent)),
        );
        return Err((StatusCode::BAD_REQUEST, e));
    }
    Ok(session)
}

async fn batch_reply(mcp: &Endpoint, headers: &HeaderMap, batch: Vec<Value>, sse: bool) -> Resp {
    let session = header(headers, SESSION_HEADER).and_then(|id| mcp.session(id));
    let Some(session) = session.filter(Session::allows_batches) else {
        let e = error(
            Value::Null,
            INVALID_REQUEST,
            "JSON-RPC batches are not accepted here: only sessions of 2024-11-05 or 2025-03-26 may send them",
        );
        return rpc_status(StatusCode::BAD_REQUEST, &e);
    };
    if batch.is_empty() || batch.len() > MAX_BATCH {
        let e = error(Value::Null, INVALID_REQUEST, &format!("a batch holds 1 to {MAX_BATCH} messages"));
        return rpc_status(StatusCode::BAD_REQUEST, &e);
    }
    let mut replies = Vec::new();
    for msg in batch {
        match classify(msg) {
            Kind::Request { id, method, .. } if method == "initialize" => {
                replies.push(error(id, INVALID_REQUEST, "initialize may not be sent in a batch"));
            }
            Kind::Request { id, method, params } => {
                replies.push(mcp.server.request(&session, id, &method, params, &Cancel::default()).await);
            }
            Kind::Notification { .. } | Kind::Response => {}
            Kind::Invalid(e) => replies.push(e),
        }
    }
    if replies.is_empty() {
        return accepted();
    }
    reply_response(&Value::Array(replies), sse, StatusCode::OK)
}

fn delete(mcp: &Endpoint, headers: &HeaderMap) -> Resp {
    let Some(sid) = header(headers, SESSION_HEADER) else {
        return rpc_status(StatusCode::BAD_REQUEST, &error(Value::Null, INVALID_REQUEST, "name the session to end"));
    };
    if mcp.sessions().remove(sid).is_none() {
        return rpc_status(StatusCode::NOT_FOUND, &error(Value::Null, INVALID_REQUEST, "no such session"));
    }
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    resp
}

/// The HTTP status of a stateless reply, as 2026-07-28 gives it.
fn status_of(reply: &Value) -> StatusCode {
    match reply.pointer("/error/code").and_then(Value::as_i64) {
        Some(PARSE_ERROR | INVALID_REQUEST | INVALID_PARAMS | UNSUPPORTED_VERSION) => StatusCode::BAD_REQUEST,
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn accepted() -> Resp {
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() = StatusCode::ACCEPTED;
    resp
}

fn rpc_status(status: StatusCode, body: &Value) -> Resp {
    crate::gateway::json(status, body)
}

/// A reply as JSON, or as one SSE event for a client that accepts only a stream.
fn reply_response(reply: &Value, sse: bool, status: StatusCode) -> Resp {
    if !sse {
        return rpc_status(status, reply);
    }
    let mut resp = Response::new(full(format!("event: message\ndata: {reply}\n\n")));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// At most 64 characters of a client's text, for an error message.
fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}
