//! The OpenAI-compatible endpoint: `POST /v1/chat/completions` (whole or streamed as SSE,
//! exactly as OpenAI frames it: `data: {chunk}\n\n` … `data: [DONE]\n\n`) and `GET /v1/models`
//! (one model, `chela`), so any OpenAI client can talk to Chela as if it were a model.
//!
//! Chela keeps the conversation, not the client: the last user message is the turn's input
//! and the rest of `messages` is not replayed. The session is named by the `user` field or the
//! `X-Chela-Session` header (channel `api`); without either the request is a one-shot
//! conversation, archived and closed once answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use chela_core::agent::{ToolCall, ToolResult};
use chela_proto::chat::Message;
use http_body_util::BodyExt;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::daemon::{Answer, BoxFuture, Conversed, Daemon, Incoming, Reply, Waiter};
use crate::serve::http::{ApiError, Limits, Resp, json as json_response};
use crate::serve::stream::ChannelBody;
use crate::turn::{Cancel, Observer, Quiet, TurnEnd};

/// The one model this endpoint offers.
pub const MODEL: &str = "chela";

/// Numbers the one-shot conversations of this process.
static ONE_SHOT: AtomicU64 = AtomicU64::new(0);

#[derive(Deserialize)]
struct ChatRequest {
    messages: Vec<RequestMessage>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize)]
struct RequestMessage {
    role: String,
    #[serde(default)]
    content: Value,
}

pub fn models() -> Resp {
    json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "chela"}]}),
    )
}

/// The text of a message's `content`: a string, or the text parts of an array.
fn content_text(content: &Value) -> Result<String, ApiError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => text.push_str(part.get("text").and_then(Value::as_str).unwrap_or("")),
                    Some(other) => {
                        return Err(ApiError::BadRequest(format!(
                            "content parts of type `{other}` are not accepted here; send text parts"
                        )));
                    }
                    None => return Err(ApiError::BadRequest("each content part needs a `type`".to_owned())),
                }
            }
            Ok(text)
        }
        _ => Err(ApiError::BadRequest("the last user message has no text content".to_owned())),
    }
}

pub async fn completions(
    daemon: &Arc<Daemon>,
    limits: &Limits,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Resp, ApiError> {
    let req: ChatRequest = serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the request is not a chat completion request ({e}); send {{\"model\":\"chela\",\"messages\":[{{\"role\":\"user\",\"content\":\"…\"}}]}}"
        ))
    })?;
    let last = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .ok_or_else(|| ApiError::BadRequest("`messages` has no message with role `user`".to_owned()))?;
    let text = content_text(&last.content)?;
    if text.trim().is_empty() {
        return Err(ApiError::BadRequest("the last user message is empty".to_owned()));
    }
    let named = match req.user.filter(|u| !u.is_empty()) {
        Some(u) => Some(u),
        None => headers.get("x-chela-session").and_then(|v| v.to_str().ok()).map(str::to_owned),
    };
    let (chat, one_shot) = match named {
        Some(id) => {
            super::ws::check_chat_id(&id).map_err(|e| ApiError::BadRequest(format!("the session name: {e}")))?;
            (id, false)
        }
        None => (format!("once_{}", ONE_SHOT.fetch_add(1, Ordering::Relaxed) + 1), true),
    };
    let id = format!("chatcmpl-{}", chat_stamp());
    let created = unix_now();
    let (tx, rx) = mpsc::channel::<Bytes>(limits.outbound.max(2));
    let cut = Cancel::default();
    let observer: Box<dyn Observer + Send> = if req.stream {
        Box::new(SseObserver { tx: tx.clone(), id: id.clone(), created, cut: cut.clone() })
    } else {
        Box::new(Quiet)
    };
    let incoming = Incoming {
        channel: "api".to_owned(),
        chat_id: chat.clone(),
        sender: "owner".to_owned(),
        user: Message::user_text(text),
        cancel: Cancel::default(),
    };
    let close = OneShot { daemon: Arc::clone(daemon), chat: one_shot.then_some(chat) };
    if !req.stream {
        let (reply, answer) = Waiter::new();
        let conversed = daemon.converse(incoming, observer, Box::new(reply));
        let answer = answer.await;
        close.close().await;
        let answer = match (conversed, answer) {
            (Conversed::Queued, Ok(a)) => a,
            (_, Ok(a)) => return Err(ApiError::Busy(a.text)),
            (_, Err(_)) => return Err(ApiError::Forbidden("this client may not talk to Chela".to_owned())),
        };
        if !answer.is_done() {
            return Err(ApiError::Upstream(answer.text));
        }
        let usage = match &answer.end {
            Some(Ok(TurnEnd::Done(o))) => o.usage,
            _ => Default::default(),
        };
        let (input, output) = (usage.input_tokens, usage.output_tokens);
        return Ok(json_response(
            StatusCode::OK,
            &json!({
                "id": id, "object": "chat.completion", "created": created, "model": MODEL,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
            }),
        ));
    }
    let (said_tx, said) = oneshot::channel();
    let reply = SseEnd { tx: tx.clone(), id: id.clone(), created, cut, close, said: Some(said_tx) };
    match daemon.converse(incoming, observer, Box::new(reply)) {
        Conversed::Queued => {}
        Conversed::Said => {
            let text = said.await.unwrap_or_else(|_| "Chela did not answer".to_owned());
            return Err(ApiError::Busy(text));
        }
        Conversed::Dropped => return Err(ApiError::Forbidden("this client may not talk to Chela".to_owned())),
    }
    // The role first, as OpenAI does; the observer streams the text; the end comes last.
    let _ = tx.try_send(sse(&chunk(&id, created, json!({"role": "assistant", "content": ""}), None)));
    let mut resp = Response::new(ChannelBody(rx).boxed());
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
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

/// Ends a streamed answer: the last chunk (or the error) and `[DONE]`. The daemon's own
/// sentence (busy, stopping) goes back to the handler instead, which answers with a status.
struct SseEnd {
    tx: mpsc::Sender<Bytes>,
    id: String,
    created: u64,
    /// Set by the observer once a chunk was dropped.
    cut: Cancel,
    close: OneShot,
    said: Option<oneshot::Sender<String>>,
}

impl Reply for SseEnd {
    fn send(mut self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if answer.end.is_none() {
                if let Some(said) = self.said.take() {
                    let _ = said.send(answer.text);
                }
                return;
            }
            let SseEnd { tx, id, created, cut, close, .. } = *self;
            close.close().await;
            if cut.is_cancelled() {
                // Part of the answer was lost: end the stream without `[DONE]`, so the client
                // sees it broke off rather than taking a shortened answer as whole.
                return;
            }
            let last = if answer.is_done() {
                chunk(&id, created, json!({}), Some("stop"))
            } else {
                json!({"error": {"message": answer.text, "type": "chela_error"}})
            };
            // Waiting here is bounded by the client: hyper stops reading the queue when it is
            // gone, and then the send fails.
            let _ = tokio::time::timeout(Duration::from_secs(30), async {
                let _ = tx.send(sse(&last)).await;
                let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
            })
            .await;
        })
    }
}

fn chunk(id: &str, created: u64, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": id, "object": "chat.completion.chunk", "created": created, "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

fn sse(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

fn unix_now() -> u64 {
    crate::clock::Clock::system().unix_secs_u64()
}

/// A response id unique in this process.
fn chat_stamp() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{:x}{:04x}", unix_now(), N.fetch_add(1, Ordering::Relaxed))
}

/// Streams the answer's text as chunks. A client that lets [`Limits::outbound`] chunks
/// pile up unread gets no more of them (the stream is cut: it then ends without `[DONE]`).
struct SseObserver {
    tx: mpsc::Sender<Bytes>,
    id: String,
    created: u64,
    /// Set once a chunk was dropped, so no later one arrives out of order.
    cut: Cancel,
}

impl Observer for SseObserver {
    fn text(&mut self, text: &str) {
        if self.cut.is_cancelled() {
            return;
        }
        let data = sse(&chunk(&self.id, self.created, json!({"content": text}), None));
        if self.tx.try_send(data).is_err() {
            self.cut.cancel();
        }
    }

    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
}
