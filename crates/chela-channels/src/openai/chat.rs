//! `POST /v1/chat/completions`: one Chela turn per request, answered whole or streamed as
//! OpenAI's chunks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chela_core::agent::{ToolCall, ToolResult};
use chela_proto::chat::{StopReason, Usage};
use http_body_util::BodyExt;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::{MODEL, OneShot, Refusal, check_format, check_model, request, session, sse, stamp, unix_now};
use crate::daemon::{Answer, BoxFuture, Conversed, Daemon, Incoming, Reply, Waiter};
use crate::serve::http::{ApiError, Limits, Resp, json as json_response};
use crate::serve::stream::ChannelBody;
use crate::turn::{Cancel, ClientTurn, Observer, TurnEnd};

pub async fn completions(
    daemon: &Arc<Daemon>,
    limits: &Limits,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Resp, Refusal> {
    let mut req = request::chat(body)?;
    check_model(daemon, req.model.as_deref())?;
    check_format(daemon, req.format.as_ref())?;
    let (chat, one_shot) = session(req.user_field.as_deref(), headers)?;
    // A named session keeps its own history: only the request's new messages are taken.
    let client = ClientTurn {
        history: if one_shot { Some(req.stateless_history()?) } else { None },
        instructions: req.instructions,
        tools: req.tools,
        format: req.format,
    };
    let id = format!("chatcmpl-{}", stamp());
    let created = unix_now();
    let incoming = Incoming {
        channel: "api".to_owned(),
        chat_id: chat.clone(),
        sender: "owner".to_owned(),
        user: req.user,
        cancel: Cancel::default(),
    };
    let close = OneShot { daemon: Arc::clone(daemon), chat: one_shot.then_some(chat) };
    let handed = Arc::new(Mutex::new(Vec::new()));
    if !req.stream {
        let observer = Box::new(Collect(Arc::clone(&handed)));
        let (reply, answer) = Waiter::new();
        let conversed = daemon.converse_with(incoming, Some(Box::new(client)), observer, Box::new(reply));
        let answer = answer.await;
        close.close().await;
        let answer = match (conversed, answer) {
            (Conversed::Queued, Ok(a)) => a,
            (_, Ok(a)) => return Err(ApiError::Busy(a.text).into()),
            (_, Err(_)) => return Err(ApiError::Forbidden("this client may not talk to Chela".to_owned()).into()),
        };
        let Some(Ok(TurnEnd::Done(outcome))) = &answer.end else {
            return Err(ApiError::Upstream(answer.text).into());
        };
        let calls = std::mem::take(&mut *handed.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let mut message = json!({"role": "assistant", "content": answer.text});
        if !calls.is_empty() {
            if answer.text.is_empty() {
                message["content"] = Value::Null;
            }
            message["tool_calls"] = Value::Array(calls.iter().map(|c| tool_call(c, None)).collect());
        }
        return Ok(json_response(
            StatusCode::OK,
            &json!({
                "id": id, "object": "chat.completion", "created": created, "model": MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(&outcome.stop_reason)}],
                "usage": usage(outcome.usage),
            }),
        ));
    }
    let (tx, rx) = mpsc::channel::<Bytes>(limits.outbound.max(2));
    let cut = Cancel::default();
    let observer = Box::new(SseObserver { tx: tx.clone(), id: id.clone(), created, cut: cut.clone() });
    let (said_tx, said) = oneshot::channel();
    let reply = SseEnd {
        tx: tx.clone(),
        id: id.clone(),
        created,
        cut,
        close,
        include_usage: req.include_usage,
        said: Some(said_tx),
    };
    match daemon.converse_with(incoming, Some(Box::new(client)), observer, Box::new(reply)) {
        Conversed::Queued => {}
        Conversed::Said => {
            let text = said.await.unwrap_or_else(|_| "Chela did not answer".to_owned());
            return Err(ApiError::Busy(text).into());
        }
        Conversed::Dropped => return Err(ApiError::Forbidden("this client may not talk to Chela".to_owned()).into()),
    }
    // The role first, as OpenAI does; the observer streams the text; the end comes last.
    let _ = tx.try_send(sse(&chunk(&id, created, json!({"role": "assistant", "content": ""}), None)));
    let mut resp = Response::new(ChannelBody(rx).boxed());
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}

pub(super) fn finish_reason(stop: &StopReason) -> &'static str {
    match stop {
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
        _ => "stop",
    }
}

/// The provider's token counts, summed over the turn's model calls.
pub(super) fn usage(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens(),
        "completion_tokens": u.output_tokens,
        "total_tokens": u.prompt_tokens() + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
    })
}

/// A call handed back to the client, as OpenAI writes it (`index` only in a stream's delta).
fn tool_call(call: &ToolCall, index: Option<usize>) -> Value {
    let mut v =
        json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.input.as_str()}});
    if let Some(i) = index {
        v["index"] = json!(i);
    }
    v
}

/// Keeps the calls handed back to the client, for an answer sent whole.
struct Collect(Arc<Mutex<Vec<ToolCall>>>);

impl Observer for Collect {
    fn text(&mut self, _: &str) {}
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
    fn handed_back(&mut self, calls: &[ToolCall]) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(calls);
    }
}

/// Ends a streamed answer: the last chunk (or the error), the usage if asked for, and `[DONE]`.
/// The daemon's own sentence (busy, stopping) goes back to the handler instead, which answers
/// with a status.
struct SseEnd {
    tx: mpsc::Sender<Bytes>,
    id: String,
    created: u64,
    /// Set by the observer once a chunk was dropped.
    cut: Cancel,
    close: OneShot,
    include_usage: bool,
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
            let SseEnd { tx, id, created, cut, close, include_usage, .. } = *self;
            close.close().await;
            if cut.is_cancelled() {
                // Part of the answer was lost: end the stream without `[DONE]`, so the client
                // sees it broke off rather than taking a shortened answer as whole.
                return;
            }
            let mut last = vec![];
            match &answer.end {
                Some(Ok(TurnEnd::Done(o))) => {
                    last.push(chunk(&id, created, json!({}), Some(finish_reason(&o.stop_reason))));
                    if include_usage {
                        last.push(json!({
                            "id": id, "object": "chat.completion.chunk", "created": created, "model": MODEL,
                            "choices": [], "usage": usage(o.usage),
                        }));
                    }
                }
                _ => last.push(json!({"error": {"message": answer.text, "type": "api_error", "param": null, "code": "upstream_error"}})),
            }
            // Waiting here is bounded by the client: hyper stops reading the queue when it is
            // gone, and then the send fails.
            let _ = tokio::time::timeout(Duration::from_secs(30), async {
                for v in &last {
                    let _ = tx.send(sse(v)).await;
                }
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

/// Streams the answer's text as chunks. A client that lets [`Limits::outbound`] chunks
/// pile up unread gets no more of them (the stream is cut: it then ends without `[DONE]`).
struct SseObserver {
    tx: mpsc::Sender<Bytes>,
    id: String,
    created: u64,
    /// Set once a chunk was dropped, so no later one arrives out of order.
    cut: Cancel,
}

impl SseObserver {
    fn send(&mut self, delta: Value) {
        if self.cut.is_cancelled() {
            return;
        }
        if self.tx.try_send(sse(&chunk(&self.id, self.created, delta, None))).is_err() {
            self.cut.cancel();
        }
    }
}

impl Observer for SseObserver {
    fn text(&mut self, text: &str) {
        self.send(json!({"content": text}));
    }

    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}

    fn handed_back(&mut self, calls: &[ToolCall]) {
        let calls: Vec<Value> = calls.iter().enumerate().map(|(i, c)| tool_call(c, Some(i))).collect();
        self.send(json!({"tool_calls": calls}));
    }
}
