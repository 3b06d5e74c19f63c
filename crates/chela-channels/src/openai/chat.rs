//! `POST /v1/chat/completions`: one Chela turn per request, answered whole or streamed as
//! OpenAI's chunks.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chela_core::agent::{ToolCall, ToolResult};
use chela_proto::chat::{StopReason, Usage};
use hyper::StatusCode;
use hyper::header::HeaderMap;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::turn::{StreamEnd, Turn, Whole};
use super::{MODEL, Refusal, request, sse, stamp, unix_now};
use crate::daemon::{Answer, BoxFuture, Daemon};
use crate::serve::http::{Limits, Resp, json as json_response};
use crate::turn::{Cancel, Observer, TurnEnd};

pub async fn completions(
    daemon: &Arc<Daemon>,
    limits: &Limits,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Resp, Refusal> {
    let turn = Turn::new(daemon, headers, request::chat(body)?)?;
    let id = format!("chatcmpl-{}", stamp());
    let created = unix_now();
    if !turn.stream {
        let Whole { text, outcome, calls } = turn.whole().await?;
        let mut message = json!({"role": "assistant", "content": text});
        if !calls.is_empty() {
            if text.is_empty() {
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
    let end = SseEnd { tx: tx.clone(), id: id.clone(), created, cut, include_usage: turn.include_usage };
    // The role first, as OpenAI does; the observer streams the text; the end comes last.
    let first = || {
        let _ = tx.try_send(sse(&chunk(&id, created, json!({"role": "assistant", "content": ""}), None)));
    };
    turn.streamed(rx, observer, Box::new(end), first).await
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

/// Ends a streamed answer: the last chunk (or the error), the usage if asked for, and `[DONE]`.
struct SseEnd {
    tx: mpsc::Sender<Bytes>,
    id: String,
    created: u64,
    /// Set by the observer once a chunk was dropped.
    cut: Cancel,
    include_usage: bool,
}

impl StreamEnd for SseEnd {
    fn finish(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let SseEnd { tx, id, created, cut, include_usage } = *self;
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
