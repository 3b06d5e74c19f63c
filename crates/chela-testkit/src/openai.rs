//! The OpenAI Chat Completions API (`POST /v1/chat/completions`), written from OpenAI's
//! documentation: the `chat.completion` object, the `chat.completion.chunk` stream ending in
//! `data: [DONE]`, and the error bodies.
//!
//! Like the Anthropic module, this shares no code with `chela-proto` on purpose.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::answer::{Answer, Asked, Failure, Ids, data_event, pieces, unix_now};
use crate::demo::Conversation;

/// Why a request body is not one the real API would accept, in its words.
pub(crate) fn validate(req: &Value) -> Result<(), String> {
    let Some(obj) = req.as_object() else {
        return Err("Invalid type for request body: expected an object.".into());
    };
    for (field, ok) in [
        ("model", obj.get("model").is_some_and(Value::is_string)),
        ("messages", obj.get("messages").is_some_and(Value::is_array)),
    ] {
        if !ok {
            return Err(if obj.contains_key(field) {
                format!("Invalid type for '{field}'.")
            } else {
                format!("Missing required parameter: '{field}'.")
            });
        }
    }
    Ok(())
}

fn finish_reason(answer: &Answer) -> &'static str {
    if answer.calls.is_empty() { "stop" } else { "tool_calls" }
}

fn tool_ids(answer: &Answer, ids: &Ids) -> Vec<String> {
    answer.calls.iter().map(|_| ids.next("call_", 24)).collect()
}

fn usage(answer: &Answer, asked: &Asked) -> Value {
    let out = answer.output_tokens();
    json!({"prompt_tokens": asked.input_tokens, "completion_tokens": out, "total_tokens": asked.input_tokens + out})
}

/// The non-streamed `chat.completion` object.
pub(crate) fn completion(answer: &Answer, asked: &Asked, ids: &Ids) -> Value {
    let mut message = json!({"role": "assistant", "content": answer.text, "refusal": null});
    if !answer.calls.is_empty() {
        let calls: Vec<Value> = answer
            .calls
            .iter()
            .zip(tool_ids(answer, ids))
            .map(|(call, id)| {
                json!({"id": id, "type": "function", "function": {"name": call.name, "arguments": call.input.to_string()}})
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": ids.next("chatcmpl-", 29),
        "object": "chat.completion",
        "created": unix_now(),
        "model": asked.model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(answer)}],
        "usage": usage(answer, asked),
    })
}

/// Builds the chunks of one streamed completion; they share an id and a creation time.
struct Chunks<'a> {
    id: String,
    created: u64,
    asked: &'a Asked,
}

impl Chunks<'_> {
    fn base(&self) -> Value {
        let mut chunk = json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.asked.model});
        // Documented: with include_usage, every chunk but the last carries `"usage": null`.
        if self.asked.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    fn delta(&self, delta: &Value, finish_reason: Option<&str>) -> Bytes {
        let mut chunk = self.base();
        chunk["choices"] = json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]);
        data_event(&chunk.to_string())
    }

    fn first(&self) -> Bytes {
        self.delta(&json!({"role": "assistant", "content": ""}), None)
    }
}

/// The streamed answer: a role delta, content pieces, tool call deltas, a finish chunk, the
/// usage chunk when asked for, then `[DONE]`.
pub(crate) fn events(answer: &Answer, asked: &Asked, ids: &Ids) -> Vec<Bytes> {
    let chunks = Chunks { id: ids.next("chatcmpl-", 29), created: unix_now(), asked };
    let mut out = vec![chunks.first()];
    for piece in answer.text.as_deref().map(pieces).unwrap_or_default() {
        out.push(chunks.delta(&json!({"content": piece}), None));
    }
    for (index, (call, id)) in answer.calls.iter().zip(tool_ids(answer, ids)).enumerate() {
        let head =
            json!({"index": index, "id": id, "type": "function", "function": {"name": call.name, "arguments": ""}});
        out.push(chunks.delta(&json!({"tool_calls": [head]}), None));
        let arguments = call.input.to_string();
        for piece in pieces(&arguments) {
            let more = json!({"index": index, "function": {"arguments": piece}});
            out.push(chunks.delta(&json!({"tool_calls": [more]}), None));
        }
    }
    out.push(chunks.delta(&json!({}), Some(finish_reason(answer))));
    if asked.include_usage {
        let mut last = chunks.base();
        last["choices"] = json!([]);
        last["usage"] = usage(answer, asked);
        out.push(data_event(&last.to_string()));
    }
    out.push(data_event("[DONE]"));
    out
}

/// A proper first chunk, a chunk whose data is cut-off JSON, then `[DONE]`: the broken chunk
/// is the only thing wrong, so a client that skips it silently is caught.
pub(crate) fn malformed_events(asked: &Asked, ids: &Ids) -> Vec<Bytes> {
    let chunks = Chunks { id: ids.next("chatcmpl-", 29), created: unix_now(), asked };
    vec![
        chunks.first(),
        Bytes::from_static(
            b"data: {\"id\":\"chatcmpl-x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"cont\n\n",
        ),
        data_event("[DONE]"),
    ]
}

/// The status and OpenAI's error body for a failure.
pub(crate) fn error_for(failure: &Failure) -> (u16, Value) {
    let invalid = "invalid_request_error";
    let (status, message, kind, param, code): (u16, String, &str, Option<&str>, Option<&str>) = match failure {
        Failure::Status(status) => {
            let (message, kind, code) = status_error(*status);
            (*status, message.into(), kind, None, code)
        }
        Failure::ContextTooLong => {
            (400, CONTEXT_TOO_LONG.into(), invalid, Some("messages"), Some("context_length_exceeded"))
        }
        Failure::TooLarge => (413, "Request exceeds the maximum allowed number of bytes.".into(), invalid, None, None),
        // What the real API says for an unknown path.
        Failure::NotFound { method, path } => (404, format!("Invalid URL ({method} {path})"), invalid, None, None),
        Failure::MethodNotAllowed { method, path } => {
            (405, format!("Invalid method ({method} {path})"), invalid, None, None)
        }
        Failure::BadRequest(message) => (400, message.clone(), invalid, None, None),
        Failure::NoKey => (401, NO_KEY.into(), invalid, None, None),
        Failure::WrongKey | Failure::NoVersion => {
            let (message, kind, code) = status_error(401);
            (401, message.into(), kind, None, code)
        }
    };
    (status, json!({"error": {"message": message, "type": kind, "param": param, "code": code}}))
}

const NO_KEY: &str = "You didn't provide an API key. You need to provide your API key in an Authorization header \
     using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";

/// The documented `(message, type, code)` for an HTTP status.
fn status_error(status: u16) -> (&'static str, &'static str, Option<&'static str>) {
    match status {
        401 => (
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
        403 => ("You are not allowed to access this resource.", "invalid_request_error", None),
        404 => ("The requested resource could not be found.", "invalid_request_error", None),
        413 => ("Request exceeds the maximum allowed number of bytes.", "invalid_request_error", None),
        429 => ("Rate limit reached for requests. Please try again later.", "requests", Some("rate_limit_exceeded")),
        503 | 529 => ("The engine is currently overloaded, please try again later.", "server_error", None),
        500..=599 => ("The server had an error while processing your request. Sorry about that!", "server_error", None),
        _ => ("The request was rejected.", "invalid_request_error", None),
    }
}

const CONTEXT_TOO_LONG: &str = "This model's maximum context length is 128000 tokens. However, your messages \
     resulted in 210000 tokens. Please reduce the length of the messages.";

/// What the demo needs from a request: the last user text, the `tool` messages that end the
/// conversation (named via the assistant's `tool_calls`) and the offered tools.
pub(crate) fn conversation(req: &Value) -> Conversation {
    let messages = req["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let tools = req["tools"].as_array().into_iter().flatten();
    let mut conv = Conversation {
        tools: tools.filter_map(|t| t["function"]["name"].as_str()).map(String::from).collect(),
        ..Conversation::default()
    };
    let trailing = messages.iter().rev().take_while(|m| m["role"] == "tool").count();
    for m in &messages[messages.len() - trailing..] {
        let id = m["tool_call_id"].as_str().unwrap_or_default();
        conv.tool_results.push((tool_name(messages, id), text_of(&m["content"])));
    }
    conv.last_user_text = messages.iter().rev().find(|m| m["role"] == "user").map(|m| text_of(&m["content"]));
    conv
}

fn tool_name(messages: &[Value], id: &str) -> String {
    let calls = messages.iter().rev().filter(|m| m["role"] == "assistant").flat_map(|m| m["tool_calls"].as_array());
    let name = calls.flatten().find(|c| c["id"] == id).and_then(|c| c["function"]["name"].as_str());
    name.unwrap_or(id).to_string()
}

/// Content that is either a string or a list of parts: the text of its text parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let texts = parts.iter().filter(|p| p["type"] == "text").filter_map(|p| p["text"].as_str());
            texts.collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_parameter_like_the_api() {
        assert_eq!(validate(&json!({"model": "m"})), Err("Missing required parameter: 'messages'.".into()));
        assert_eq!(validate(&json!({"model": 1, "messages": []})), Err("Invalid type for 'model'.".into()));
        assert_eq!(validate(&json!({"model": "m", "messages": []})), Ok(()));
    }

    #[test]
    fn conversation_reads_trailing_tool_messages_and_parts() {
        let req = json!({
            "tools": [{"type": "function", "function": {"name": "get_current_time", "parameters": {}}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "what"}, {"type": "text", "text": "time"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "noon"}
            ]
        });
        let conv = conversation(&req);
        assert_eq!(conv.tools, vec!["get_current_time"]);
        assert_eq!(conv.tool_results, vec![("get_current_time".into(), "noon".into())]);
        assert_eq!(conv.last_user_text.as_deref(), Some("what\ntime"));
    }
}
