//! The Anthropic Messages API (`POST /v1/messages`), written from Anthropic's documentation:
//! the message object, the SSE event flow, and the error bodies.
//!
//! This is an independent reading of the vendor docs; it deliberately shares no code with
//! `chela-proto`, so a misreading there cannot hide here. Bodies are built as JSON values.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::answer::{Answer, Asked, Failure, Ids, named_event, pieces};
use crate::demo::Conversation;

/// Why a request body is not one the real API would accept, in its words.
pub(crate) fn validate(req: &Value) -> Result<(), String> {
    let Some(obj) = req.as_object() else {
        return Err("The request body must be a JSON object.".into());
    };
    for (field, ok) in [
        ("model", obj.get("model").is_some_and(Value::is_string)),
        ("max_tokens", obj.get("max_tokens").is_some_and(Value::is_u64)),
        ("messages", obj.get("messages").is_some_and(Value::is_array)),
    ] {
        if !ok {
            let what = if obj.contains_key(field) { "Input should be valid" } else { "Field required" };
            return Err(format!("{field}: {what}"));
        }
    }
    Ok(())
}

fn stop_reason(answer: &Answer) -> &'static str {
    if answer.calls.is_empty() { "end_turn" } else { "tool_use" }
}

/// Ids for the answer's tool calls, in order.
fn tool_ids(answer: &Answer, ids: &Ids) -> Vec<String> {
    answer.calls.iter().map(|_| ids.next("toolu_01", 22)).collect()
}

/// The non-streamed message object.
pub(crate) fn message(answer: &Answer, asked: &Asked, ids: &Ids) -> Value {
    let mut content = Vec::new();
    if let Some(text) = &answer.text {
        content.push(json!({"type": "text", "text": text}));
    }
    for (call, id) in answer.calls.iter().zip(tool_ids(answer, ids)) {
        content.push(json!({"type": "tool_use", "id": id, "name": call.name, "input": call.input}));
    }
    json!({
        "id": ids.next("msg_01", 22),
        "type": "message",
        "role": "assistant",
        "model": asked.model,
        "content": content,
        "stop_reason": stop_reason(answer),
        "stop_sequence": null,
        "usage": {"input_tokens": asked.input_tokens, "output_tokens": answer.output_tokens()},
    })
}

fn message_start(asked: &Asked, ids: &Ids) -> Bytes {
    let start = json!({
        "type": "message_start",
        "message": {
            "id": ids.next("msg_01", 22),
            "type": "message",
            "role": "assistant",
            "model": asked.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": asked.input_tokens, "output_tokens": 1},
        },
    });
    named_event("message_start", &start)
}

/// The streamed answer: `message_start`, `ping`, each content block as start / deltas / stop,
/// `message_delta` with the stop reason and usage, then `message_stop`.
pub(crate) fn events(answer: &Answer, asked: &Asked, ids: &Ids) -> Vec<Bytes> {
    let mut out = vec![message_start(asked, ids), named_event("ping", &json!({"type": "ping"}))];
    let mut index = 0;
    if let Some(text) = &answer.text {
        out.push(block_start(index, &json!({"type": "text", "text": ""})));
        for piece in pieces(text) {
            out.push(block_delta(index, &json!({"type": "text_delta", "text": piece})));
        }
        out.push(block_stop(index));
        index += 1;
    }
    for (call, id) in answer.calls.iter().zip(tool_ids(answer, ids)) {
        out.push(block_start(index, &json!({"type": "tool_use", "id": id, "name": call.name, "input": {}})));
        // The real API opens every tool input with an empty partial_json.
        out.push(block_delta(index, &json!({"type": "input_json_delta", "partial_json": ""})));
        let input = call.input.to_string();
        for piece in pieces(&input) {
            out.push(block_delta(index, &json!({"type": "input_json_delta", "partial_json": piece})));
        }
        out.push(block_stop(index));
        index += 1;
    }
    let delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(answer), "stop_sequence": null},
        "usage": {"output_tokens": answer.output_tokens()},
    });
    out.push(named_event("message_delta", &delta));
    out.push(named_event("message_stop", &json!({"type": "message_stop"})));
    out
}

fn block_start(index: usize, block: &Value) -> Bytes {
    named_event("content_block_start", &json!({"type": "content_block_start", "index": index, "content_block": block}))
}

fn block_delta(index: usize, delta: &Value) -> Bytes {
    named_event("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

fn block_stop(index: usize) -> Bytes {
    named_event("content_block_stop", &json!({"type": "content_block_stop", "index": index}))
}

/// A well-formed start, then an event whose data is cut-off JSON, then a proper end: the
/// broken event is the only thing wrong, so a client that skips it silently is caught.
pub(crate) fn malformed_events(asked: &Asked, ids: &Ids) -> Vec<Bytes> {
    vec![
        message_start(asked, ids),
        Bytes::from_static(
            b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"ty\n\n",
        ),
        named_event("message_stop", &json!({"type": "message_stop"})),
    ]
}

/// The status and Anthropic's error body for a failure.
pub(crate) fn error_for(failure: &Failure, request_id: &str) -> (u16, Value) {
    let (status, kind, message): (u16, &str, String) = match failure {
        Failure::Status(status) => {
            let (kind, message) = status_error(*status);
            (*status, kind, message.into())
        }
        Failure::ContextTooLong => (400, "invalid_request_error", CONTEXT_TOO_LONG.into()),
        Failure::TooLarge => (413, "request_too_large", "Request exceeds the maximum allowed number of bytes.".into()),
        Failure::NotFound { path, .. } => (404, "not_found_error", format!("Not found: {path}")),
        Failure::MethodNotAllowed { method, .. } => {
            (405, "invalid_request_error", format!("Method {method} is not allowed here; use POST."))
        }
        Failure::BadRequest(message) => (400, "invalid_request_error", message.clone()),
        Failure::NoKey => (401, "authentication_error", "x-api-key header is required".into()),
        Failure::WrongKey => (401, "authentication_error", "invalid x-api-key".into()),
        Failure::NoVersion => (400, "invalid_request_error", "anthropic-version: header is required".into()),
    };
    let body = json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id});
    (status, body)
}

/// The documented error type and a message for an HTTP status.
fn status_error(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("invalid_request_error", "There was an issue with the format or content of your request."),
        401 => ("authentication_error", "invalid x-api-key"),
        402 => ("billing_error", "Your credit balance is too low to access the Anthropic API."),
        403 => ("permission_error", "Your API key does not have permission to use the specified resource."),
        404 => ("not_found_error", "The requested resource could not be found."),
        413 => ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        429 => {
            ("rate_limit_error", "This request would exceed your organization's rate limit. Please try again later.")
        }
        504 => ("timeout_error", "Request timed out."),
        529 => ("overloaded_error", "Overloaded"),
        500..=599 => ("api_error", "Internal server error"),
        _ => ("invalid_request_error", "The request was rejected."),
    }
}

const CONTEXT_TOO_LONG: &str = "prompt is too long: 210000 tokens > 200000 maximum";

/// What the demo needs from a request: the last user text, trailing tool results (named via
/// the assistant's `tool_use` blocks) and the offered tools.
pub(crate) fn conversation(req: &Value) -> Conversation {
    let messages = req["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let tools = req["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).map(String::from);
    let mut conv = Conversation { tools: tools.collect(), ..Conversation::default() };
    if let Some(last) = messages.last().filter(|m| m["role"] == "user") {
        for block in last["content"].as_array().into_iter().flatten().filter(|b| b["type"] == "tool_result") {
            let id = block["tool_use_id"].as_str().unwrap_or_default();
            conv.tool_results.push((tool_name(messages, id), text_of(&block["content"])));
        }
    }
    conv.last_user_text = messages.iter().rev().find(|m| m["role"] == "user").map(|m| text_of(&m["content"]));
    conv
}

/// The name of the `tool_use` with this id, or the id when no such block is found.
fn tool_name(messages: &[Value], id: &str) -> String {
    let blocks = messages.iter().rev().filter(|m| m["role"] == "assistant").flat_map(|m| m["content"].as_array());
    let name = blocks.flatten().find(|b| b["type"] == "tool_use" && b["id"] == id).and_then(|b| b["name"].as_str());
    name.unwrap_or(id).to_string()
}

/// Content that is either a string or a list of blocks: the text of its text blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            let texts = blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str());
            texts.collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field_like_the_api() {
        assert_eq!(validate(&json!({"model": "m", "messages": []})), Err("max_tokens: Field required".into()));
        assert_eq!(
            validate(&json!({"model": "m", "max_tokens": "9", "messages": []})),
            Err("max_tokens: Input should be valid".into())
        );
        assert_eq!(validate(&json!([])), Err("The request body must be a JSON object.".into()));
        assert_eq!(validate(&json!({"model": "m", "max_tokens": 9, "messages": []})), Ok(()));
    }

    #[test]
    fn conversation_finds_results_names_and_the_user_text() {
        let req = json!({
            "tools": [{"name": "get_current_time", "input_schema": {}}],
            "messages": [
                {"role": "user", "content": "what time is it"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_current_time", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "noon"}]},
                    {"type": "tool_result", "tool_use_id": "gone", "content": "x"}
                ]}
            ]
        });
        let conv = conversation(&req);
        assert_eq!(conv.tools, vec!["get_current_time"]);
        assert_eq!(conv.tool_results, vec![("get_current_time".into(), "noon".into()), ("gone".into(), "x".into())]);
        assert_eq!(conv.last_user_text.as_deref(), Some(""));
    }
}
