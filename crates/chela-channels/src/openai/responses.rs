//! `POST /v1/responses`, the Responses API that newer SDKs and agents default to, with the same
//! semantics as the chat endpoint: the request is read into a Chat Completions request (input
//! items become messages, `instructions` the system message, function tools the tools) and runs
//! one Chela turn; the answer is a `response` object, or its SSE events when streamed.
//! Chela keeps no responses by id: `previous_response_id` is refused, a named session (`user`
//! or `X-Chela-Session`) keeps the conversation instead.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use chela_core::agent::{ToolCall, ToolResult};
use chela_proto::chat::Usage;
use hyper::StatusCode;
use hyper::header::HeaderMap;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::turn::{StreamEnd, Turn, Whole};
use super::{MODEL, Refusal, request, stamp, unix_now};
use crate::daemon::{Answer, BoxFuture, Daemon};
use crate::serve::http::{Limits, Resp, json as json_response};
use crate::turn::{Observer, TurnEnd};

/// Parameters passed on to the chat request as they are, or left aside as the chat endpoint does.
const PASSED: &[&str] = &[
    "model",
    "user",
    "stream",
    "temperature",
    "top_p",
    "metadata",
    "store",
    "service_tier",
    "parallel_tool_calls",
    "prompt_cache_key",
    "safety_identifier",
    "tool_choice",
];

fn bad(message: impl Into<String>, param: &str) -> Refusal {
    Refusal::bad_request(message, Some(param))
}

/// A Responses request as the Chat Completions request with the same meaning.
fn to_chat(body: &[u8]) -> Result<Value, Refusal> {
    let req: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|e| Refusal::bad_request(format!("the request is not a Responses API request ({e})"), None))?;
    let mut chat = Map::new();
    let mut messages = Vec::new();
    for (key, value) in &req {
        match key.as_str() {
            k if PASSED.contains(&k) => {
                chat.insert(key.clone(), value.clone());
            }
            "input" | "instructions" | "tools" => {}
            "max_output_tokens" | "truncation" | "reasoning" => {}
            "include" if value.as_array().is_none_or(Vec::is_empty) => {}
            "previous_response_id" | "conversation" if value.is_null() => {}
            "previous_response_id" | "conversation" => {
                return Err(bad(
                    format!(
                        "Chela keeps no responses by id: send the whole conversation in `input`, or name a session with `user` (parameter `{key}`)"
                    ),
                    key,
                ));
            }
            "text" => {
                if let Some(format) = text_format(value)? {
                    chat.insert("response_format".to_owned(), format);
                }
            }
            "background" if value != &Value::Bool(true) => {}
            _ => return Err(bad(format!("Unrecognized request argument supplied: {key}"), key)),
        }
    }
    if let Some(instructions) = req.get("instructions").filter(|v| !v.is_null()) {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    match req.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            if items.len() > request::MAX_MESSAGES {
                return Err(bad(
                    format!("`input` has {} items; at most {} are taken", items.len(), request::MAX_MESSAGES),
                    "input",
                ));
            }
            for (i, item) in items.iter().enumerate() {
                input_item(item, i, &mut messages)?;
            }
        }
        _ => return Err(bad("`input` must be a string or an array of input items", "input")),
    }
    chat.insert("messages".to_owned(), Value::Array(messages));
    if let Some(tools) = req.get("tools").filter(|v| !v.is_null()) {
        let Some(tools) = tools.as_array() else {
            return Err(bad("`tools` must be an array", "tools"));
        };
        let mut out = Vec::with_capacity(tools.len());
        for t in tools {
            if t.get("type").and_then(Value::as_str) != Some("function") {
                return Err(bad("Chela's endpoint takes tools of type `function` only", "tools"));
            }
            let function =
                json!({"name": t.get("name"), "description": t.get("description"), "parameters": t.get("parameters")});
            out.push(json!({"type": "function", "function": function}));
        }
        chat.insert("tools".to_owned(), Value::Array(out));
    }
    Ok(Value::Object(chat))
}

/// `text.format` as the chat request's `response_format`: the Responses API puts the schema's
/// fields beside its `type`, Chat Completions under `json_schema`.
fn text_format(text: &Value) -> Result<Option<Value>, Refusal> {
    let Some(format) = text.get("format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    let chat = match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            let mut schema = format.as_object().cloned().unwrap_or_default();
            schema.remove("type");
            json!({"type": "json_schema", "json_schema": schema})
        }
        _ => format.clone(),
    };
    // Checked here so that a refusal names the parameter the client sent.
    request::response_format(Some(&chat))
        .map_err(|e| bad(e.message.replace("response_format", "text.format"), "text"))?;
    Ok(Some(chat))
}

/// One input item as chat messages: a message, a function call (merged into the assistant
/// message before it) or a function call's output.
fn input_item(item: &Value, i: usize, messages: &mut Vec<Value>) -> Result<(), Refusal> {
    let param = format!("input[{i}]");
    match item.get("type").and_then(Value::as_str) {
        None | Some("message") => {
            let role = item.get("role").cloned().unwrap_or(Value::Null);
            messages.push(json!({"role": role, "content": item.get("content").cloned().unwrap_or(Value::Null)}));
        }
        Some("function_call") => {
            let call = json!({"id": item.get("call_id"), "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")}});
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    if !last["tool_calls"].is_array() {
                        last["tool_calls"] = json!([]);
                    }
                    if let Some(calls) = last["tool_calls"].as_array_mut() {
                        calls.push(call);
                    }
                }
                _ => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
        }
        Some("function_call_output") => {
            let output = match item.get("output") {
                Some(Value::String(s)) => Value::String(s.clone()),
                Some(parts @ Value::Array(_)) => parts.clone(),
                _ => return Err(bad("a function_call_output needs `output` as a string", &param)),
            };
            messages.push(json!({"role": "tool", "tool_call_id": item.get("call_id"), "content": output}));
        }
        Some(other) => return Err(bad(format!("input items of type `{other}` are not accepted here"), &param)),
    }
    Ok(())
}

/// `POST /v1/responses`.
pub async fn create(daemon: &Arc<Daemon>, limits: &Limits, headers: &HeaderMap, body: &[u8]) -> Result<Resp, Refusal> {
    let chat = to_chat(body)?;
    let turn = Turn::new(daemon, headers, request::chat(chat.to_string().as_bytes())?)?;
    let id = format!("resp_{}", stamp());
    let created = unix_now();
    if !turn.stream {
        let Whole { text, outcome, calls } = turn.whole().await?;
        let mut output = Vec::new();
        if !text.is_empty() {
            output.push(message_item(&format!("msg_{}", stamp()), &text, "completed"));
        }
        output.extend(calls.iter().map(call_item));
        return Ok(json_response(StatusCode::OK, &response(&id, created, "completed", output, Some(outcome.usage))));
    }
    let (tx, rx) = mpsc::channel::<Bytes>(limits.outbound.max(2));
    let state = Arc::new(Mutex::new(Events {
        tx,
        id: id.clone(),
        created,
        seq: 0,
        message: None,
        text: String::new(),
        output: Vec::new(),
        cut: false,
    }));
    let observer = Box::new(Streamed(Arc::clone(&state)));
    let end = End { state: Arc::clone(&state) };
    let first = || {
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        let r = response(&id, created, "in_progress", Vec::new(), None);
        s.emit("response.created", json!({"response": r}));
        s.emit("response.in_progress", json!({"response": r}));
    };
    turn.streamed(rx, observer, Box::new(end), first).await
}

fn response(id: &str, created: u64, status: &str, output: Vec<Value>, usage: Option<Usage>) -> Value {
    json!({
        "id": id, "object": "response", "created_at": created, "status": status, "model": MODEL,
        "output": output, "error": null, "incomplete_details": null, "instructions": null, "metadata": {},
        "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "temperature": null, "top_p": null,
        "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": false,
        "usage": usage.map(|u| json!({
            "input_tokens": u.prompt_tokens(), "output_tokens": u.output_tokens,
            "total_tokens": u.prompt_tokens() + u.output_tokens,
            "input_tokens_details": {"cached_tokens": u.cache_read_tokens}, "output_tokens_details": {"reasoning_tokens": 0},
        })),
    })
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{"type": "output_text", "text": text, "annotations": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
}

fn call_item(call: &ToolCall) -> Value {
    json!({"type": "function_call", "id": format!("fc_{}", call.id), "call_id": call.id, "name": call.name,
        "arguments": call.input.as_str(), "status": "completed"})
}

/// A streamed response's events, in the order the SDK's stream helper rebuilds the response
/// from: every delta after the item and part it belongs to, every item closed before the next.
struct Events {
    tx: mpsc::Sender<Bytes>,
    id: String,
    created: u64,
    seq: u64,
    /// The id of the message item being streamed, once text came.
    message: Option<String>,
    text: String,
    /// The items closed so far.
    output: Vec<Value>,
    /// A client that let [`Limits::outbound`] events pile up unread gets no more of them.
    cut: bool,
}

impl Events {
    fn emit(&mut self, kind: &str, mut data: Value) {
        if self.cut {
            return;
        }
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        if self.tx.try_send(Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))).is_err() {
            self.cut = true;
        }
    }

    fn text(&mut self, delta: &str) {
        let index = self.output.len();
        let id = match &self.message {
            Some(id) => id.clone(),
            None => {
                let id = format!("msg_{}", stamp());
                self.message = Some(id.clone());
                self.emit(
                    "response.output_item.added",
                    json!({"output_index": index, "item": message_item(&id, "", "in_progress")}),
                );
                self.emit(
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
                );
                id
            }
        };
        self.text.push_str(delta);
        self.emit(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": index, "content_index": 0, "delta": delta, "logprobs": []}),
        );
    }

    fn close_message(&mut self) {
        let Some(id) = self.message.take() else {
            return;
        };
        let index = self.output.len();
        let text = std::mem::take(&mut self.text);
        self.emit(
            "response.output_text.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
        );
        self.emit(
            "response.content_part.done",
            json!({"item_id": id, "output_index": index, "content_index": 0,
            "part": {"type": "output_text", "text": text, "annotations": []}}),
        );
        let item = message_item(&id, &text, "completed");
        self.emit("response.output_item.done", json!({"output_index": index, "item": item}));
        self.output.push(item);
    }

    fn call(&mut self, call: &ToolCall) {
        let index = self.output.len();
        let item = call_item(call);
        let mut open = item.clone();
        open["arguments"] = json!("");
        open["status"] = json!("in_progress");
        self.emit("response.output_item.added", json!({"output_index": index, "item": open}));
        self.emit(
            "response.function_call_arguments.delta",
            json!({"item_id": item["id"], "output_index": index, "delta": call.input.as_str()}),
        );
        self.emit(
            "response.function_call_arguments.done",
            json!({"item_id": item["id"], "output_index": index, "arguments": call.input.as_str()}),
        );
        self.emit("response.output_item.done", json!({"output_index": index, "item": item}));
        self.output.push(item);
    }
}

struct Streamed(Arc<Mutex<Events>>);

impl Observer for Streamed {
    fn text(&mut self, text: &str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).text(text);
    }
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
    fn handed_back(&mut self, calls: &[ToolCall]) {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        s.close_message();
        for call in calls {
            s.call(call);
        }
    }
}

/// Ends a streamed response with `response.completed` (or `response.failed`).
struct End {
    state: Arc<Mutex<Events>>,
}

impl StreamEnd for End {
    fn finish(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let End { state } = *self;
            let (tx, last) = {
                let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
                if s.cut {
                    // Part of the answer was lost: end without `response.completed`, so the
                    // client sees it broke off rather than taking a shortened answer as whole.
                    return;
                }
                s.close_message();
                let (kind, status, usage) = match &answer.end {
                    Some(Ok(TurnEnd::Done(o))) => ("response.completed", "completed", Some(o.usage)),
                    _ => ("response.failed", "failed", None),
                };
                let mut r = response(&s.id, s.created, status, s.output.clone(), usage);
                if status == "failed" {
                    r["error"] = json!({"code": "server_error", "message": answer.text});
                }
                let data = json!({"type": kind, "sequence_number": s.seq, "response": r});
                (s.tx.clone(), Bytes::from(format!("event: {kind}\ndata: {data}\n\n")))
            };
            // Bounded by the client: hyper stops reading the queue when it is gone.
            let _ = tokio::time::timeout(Duration::from_secs(30), tx.send(last)).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use chela_proto::chat::Format;

    use super::*;

    #[test]
    fn responses_input_reads_as_the_chat_request_with_the_same_meaning() {
        let body = json!({"model": "chela", "instructions": "Be brief.", "user": "s", "tools": [
            {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}], "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
        ]});
        let chat = to_chat(body.to_string().as_bytes()).unwrap();
        let req = request::chat(chat.to_string().as_bytes()).unwrap();
        assert_eq!(req.instructions.as_deref(), Some("Be brief."));
        assert_eq!(req.user_field.as_deref(), Some("s"));
        assert_eq!(req.tools[0].name, "get_weather");
        assert_eq!(req.history[1].tool_use_ids().collect::<Vec<_>>(), ["c1"]);
        assert!(req.user.has_tool_results());
    }

    #[test]
    fn text_format_reads_as_the_chat_response_format() {
        let read = |format: Value| {
            let body = json!({"input": "x", "text": {"format": format}});
            request::chat(to_chat(body.to_string().as_bytes()).unwrap().to_string().as_bytes()).unwrap().format
        };
        assert_eq!(read(json!({"type": "text"})), None);
        assert_eq!(read(json!({"type": "json_object"})), Some(Format::JsonObject));
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        assert_eq!(
            read(json!({"type": "json_schema", "name": "count", "schema": schema, "strict": true})),
            Some(Format::JsonSchema {
                name: "count".into(),
                description: None,
                schema: Some(schema.to_string()),
                strict: Some(true)
            })
        );
    }

    #[test]
    fn what_chela_cannot_honour_is_refused() {
        for (body, param) in [
            (json!({"input": "x", "previous_response_id": "resp_1"}), "previous_response_id"),
            (json!({"input": "x", "text": {"format": {"type": "json_schema"}}}), "text"),
            (json!({"input": "x", "frob": 1}), "frob"),
            (json!({"input": "x", "text": {"format": {"type": "yaml"}}}), "text"),
            (json!({"input": "x", "text": {"format": {"type": "json_schema", "name": "a b"}}}), "text"),
            (json!({"input": [{"type": "web_search_call"}]}), "input[0]"),
            (json!({"input": 3}), "input"),
            (json!({"input": "x", "tools": [{"type": "web_search"}]}), "tools"),
        ] {
            let e = to_chat(body.to_string().as_bytes()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
        }
    }
}
