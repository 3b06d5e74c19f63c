//! The OpenAI-compatible endpoint: `POST /v1/chat/completions` (whole or streamed as SSE,
//! exactly as OpenAI frames it: `data: {chunk}\n\n` … `data: [DONE]\n\n`), `POST /v1/responses`
//! and `GET /v1/models` (`chela`; the configured model's name is an alias of it), so any OpenAI
//! client can talk to Chela as if it were a model.
//!
//! A request without a session name is stateless, as OpenAI's are: its `messages` are the
//! conversation, the client's system message is added to Chela's prompt as the caller's
//! instructions, and the turn is archived and closed once answered. A request named by the
//! `user` field or the `X-Chela-Session` header continues Chela's stored session for that name
//! (channel `api`): only the messages after the request's last assistant message are taken.
//! The client's tools are offered beside Chela's; a call to one ends the turn and goes back to
//! the client as `tool_calls`, which it answers in its next request. Every refusal is an
//! OpenAI-shaped error (`{"error":{"message","type","param","code"}}`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use hyper::StatusCode;
use hyper::header::{HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use serde_json::{Value, json};

use crate::daemon::Daemon;
use crate::serve::http::{ApiError, Limits, Resp, json as json_response};

mod chat;
mod request;
mod responses;
mod turn;

/// The one model this endpoint offers.
pub const MODEL: &str = "chela";

/// Numbers the one-shot conversations of this process.
static ONE_SHOT: AtomicU64 = AtomicU64::new(0);

/// `GET /v1/models`: the one model, `chela`. The configured model's name is taken as an alias
/// of it in requests but not listed, so a client's model picker shows one choice.
pub fn models() -> Resp {
    json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "chela"}]}),
    )
}

/// The configured model's name, when it is another than [`MODEL`].
fn alias(daemon: &Daemon) -> Option<String> {
    let cfg = daemon.config();
    let name = cfg.effective(chela_core::config::LLM_MODEL);
    (!name.is_empty() && name != MODEL).then(|| name.to_owned())
}

/// A structured answer is asked of the provider in its request; Anthropic's Messages API has
/// no such field, and an answer merely hoped to be JSON would break a client that parses it.
fn check_format(daemon: &Daemon, format: Option<&chela_proto::chat::Format>) -> Result<(), Refusal> {
    let provider = daemon.config().effective(chela_core::config::LLM_PROVIDER).to_owned();
    if format.is_none() || provider == "openai" {
        return Ok(());
    }
    Err(Refusal::bad_request(
        format!(
            "`response_format` json_object and json_schema are passed to the model provider, and the configured \
             provider ({provider}) does not take them: ask for JSON in the message, or set `llm.provider` to an \
             OpenAI-compatible one"
        ),
        Some("response_format"),
    ))
}

/// An absent `model` is `chela`; any other than `chela` or its alias is not served here.
fn check_model(daemon: &Daemon, model: Option<&str>) -> Result<(), Refusal> {
    match model {
        None | Some(MODEL) => Ok(()),
        Some(m) if alias(daemon).as_deref() == Some(m) => Ok(()),
        Some(m) => Err(Refusal {
            status: StatusCode::NOT_FOUND,
            message: format!(
                "The model `{}` does not exist here: this endpoint serves `{MODEL}` (GET /v1/models lists it).",
                chela_core::text::prefix(m, 100)
            ),
            kind: "invalid_request_error",
            param: Some("model".to_owned()),
            code: Some("model_not_found"),
        }),
    }
}

/// An error as OpenAI sends it, so its clients show the message (`openai.BadRequestError`).
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl Refusal {
    pub fn bad_request(message: impl Into<String>, param: Option<&str>) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(str::to_owned),
            code: None,
        }
    }

    pub fn into_response(self) -> Resp {
        let mut resp = json_response(self.status, &self.body());
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"chela\""));
        }
        resp
    }

    fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Refusal {
        let status = e.status();
        let (kind, code) = match &e {
            ApiError::Unauthorized => ("authentication_error", Some("invalid_api_key")),
            ApiError::Forbidden(_) => ("permission_error", None),
            ApiError::NotFound(_) => ("invalid_request_error", Some("not_found")),
            ApiError::Busy(_) => ("server_error", Some("busy")),
            ApiError::Upstream(_) => ("api_error", Some("upstream_error")),
            ApiError::Internal(_) | ApiError::Timeout(_) => ("server_error", None),
            _ => ("invalid_request_error", None),
        };
        Refusal { status, message: e.to_string(), kind, param: None, code }
    }
}

/// Whether `path` is served by this endpoint, whose refusals take OpenAI's shape.
pub fn is_openai_path(path: &str) -> bool {
    path.starts_with("/v1/")
}

/// A gateway refusal on this endpoint's paths (a token missing, a body too large), in OpenAI's shape.
pub fn refusal_response(e: ApiError) -> Resp {
    Refusal::from(e).into_response()
}

/// `POST /v1/chat/completions`.
pub async fn completions(daemon: &Arc<Daemon>, limits: &Limits, headers: &HeaderMap, body: &[u8]) -> Resp {
    chat::completions(daemon, limits, headers, body).await.unwrap_or_else(Refusal::into_response)
}

/// `POST /v1/responses`.
pub async fn responses(daemon: &Arc<Daemon>, limits: &Limits, headers: &HeaderMap, body: &[u8]) -> Resp {
    responses::create(daemon, limits, headers, body).await.unwrap_or_else(Refusal::into_response)
}

/// The session a request names (`user`, else `X-Chela-Session`), or a new one-shot one.
fn session(user: Option<&str>, headers: &HeaderMap) -> Result<(String, bool), Refusal> {
    let named = match user {
        Some(u) => Some(u.to_owned()),
        None => headers.get("x-chela-session").and_then(|v| v.to_str().ok()).map(str::to_owned),
    };
    match named.filter(|n| !n.is_empty()) {
        Some(id) => {
            chela_proto::gateway::check_chat_id(&id)
                .map_err(|e| Refusal::bad_request(format!("the session name: {e}"), Some("user")))?;
            Ok((id, false))
        }
        None => Ok((format!("once_{}", ONE_SHOT.fetch_add(1, Ordering::Relaxed) + 1), true)),
    }
}

/// A one-shot request's conversation, closed once answered so it leaves no session behind.
struct OneShot {
    daemon: Arc<Daemon>,
    chat: Option<String>,
}

impl OneShot {
    async fn close(self) {
        if let Some(chat) = self.chat
            && let Ok(closed) = self.daemon.hub().close("api", &chat)
        {
            let _ = closed.finish().await;
        }
    }
}

fn sse(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

fn unix_now() -> u64 {
    crate::clock::Clock::system().unix_secs_u64()
}

/// A response id unique in this process.
fn stamp() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{:x}{:04x}", unix_now(), N.fetch_add(1, Ordering::Relaxed))
}
