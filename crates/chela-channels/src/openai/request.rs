//! A Chat Completions request read into what a Chela turn takes: the client's conversation
//! (as Chela's messages), its instructions, its tools and the options that shape the answer.
//! Everything the endpoint cannot honour is refused here, before anything reaches the model.

use chela_proto::chat::{Block, Format, Message, Role, parse_tool_input};
use serde_json::{Map, Value};

use super::Refusal;
use crate::turn::ClientTool;

/// Messages one request may carry: far more than any client's window, and a bound on the work
/// of reading them.
pub const MAX_MESSAGES: usize = 2048;
/// Tools one request may offer.
pub const MAX_TOOLS: usize = 128;
/// Tool calls one assistant message may carry.
const MAX_CALLS: usize = 128;
/// Bytes of a `response_format` schema (as compact JSON) and of its description: the schema
/// goes to the provider with every model call of the turn.
pub const MAX_SCHEMA: usize = 64 * 1024;
const MAX_SCHEMA_DESCRIPTION: usize = 4096;

/// Parameters read elsewhere or that only tune how an answer is sampled: Chela answers with its
/// own model settings, so they are accepted and left aside.
const IGNORED: &[&str] = &[
    "model",
    "user",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "metadata",
    "store",
    "service_tier",
    "parallel_tool_calls",
    "reasoning_effort",
    "prompt_cache_key",
    "safety_identifier",
    "verbosity",
];

/// A Chat Completions request, read and checked.
#[derive(Debug, PartialEq)]
pub struct Chat {
    /// The client's conversation before its last message, as Chela's messages.
    pub history: Vec<Message>,
    /// The turn's input: the messages after the last assistant message, in one user message
    /// (the tool results first, then the text).
    pub user: Message,
    /// The system (and developer) messages, joined.
    pub instructions: Option<String>,
    pub tools: Vec<ClientTool>,
    pub stream: bool,
    pub include_usage: bool,
    pub user_field: Option<String>,
    pub model: Option<String>,
    /// `response_format`, unless it asks for text.
    pub format: Option<Format>,
}

impl Chat {
    /// The history of a stateless request, which the vendors take only from a user message on.
    pub fn stateless_history(&mut self) -> Result<Vec<Message>, Refusal> {
        if self.history.first().is_some_and(|m| m.role == Role::Assistant) {
            return Err(bad("the conversation must start with a user message, not the assistant's", "messages"));
        }
        Ok(std::mem::take(&mut self.history))
    }
}

fn bad(message: impl Into<String>, param: &str) -> Refusal {
    Refusal::bad_request(message, Some(param))
}

/// Reads a `POST /v1/chat/completions` body.
pub fn chat(body: &[u8]) -> Result<Chat, Refusal> {
    let req: Map<String, Value> = serde_json::from_slice(body).map_err(|e| {
        Refusal::bad_request(
            format!(
                "the request is not a chat completion request ({e}); send {{\"model\":\"chela\",\"messages\":[{{\"role\":\"user\",\"content\":\"…\"}}]}}"
            ),
            None,
        )
    })?;
    check_params(&req)?;
    let stream = match req.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("`stream` must be true or false", "stream")),
    };
    let include_usage = match req.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => o.get("include_usage").and_then(Value::as_bool).unwrap_or(false),
        Some(_) => return Err(bad("`stream_options` must be an object", "stream_options")),
    };
    let user_field = optional_string(&req, "user")?;
    let model = optional_string(&req, "model")?;
    let tools = match req.get("tool_choice").and_then(Value::as_str) {
        // The client wants no call to its tools: the model is not shown them.
        Some("none") => Vec::new(),
        _ => tools(req.get("tools"))?,
    };
    let Some(Value::Array(messages)) = req.get("messages") else {
        return Err(bad("`messages` must be an array of messages", "messages"));
    };
    if messages.len() > MAX_MESSAGES {
        return Err(bad(
            format!("`messages` has {} messages; at most {MAX_MESSAGES} are taken in one request", messages.len()),
            "messages",
        ));
    }
    let format = response_format(req.get("response_format"))?;
    let (instructions, conversation) = conversation(messages)?;
    let mut conversation = conversation;
    let user = match conversation.pop() {
        Some(m) if m.role == Role::User => m,
        Some(_) => {
            return Err(bad(
                "the last message is the assistant's: end `messages` with a user or tool message to answer",
                "messages",
            ));
        }
        None => return Err(bad("`messages` has no message with role `user`", "messages")),
    };
    if !user.has_tool_results() && user.text().trim().is_empty() {
        return Err(bad("the last user message is empty", "messages"));
    }
    Ok(Chat { history: conversation, user, instructions, tools, stream, include_usage, user_field, model, format })
}

fn optional_string(req: &Map<String, Value>, key: &str) -> Result<Option<String>, Refusal> {
    match req.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
        Some(_) => Err(bad(format!("`{key}` must be a string"), key)),
    }
}

/// Refuses what would change the answer in a way Chela cannot give, and what it does not know.
fn check_params(req: &Map<String, Value>) -> Result<(), Refusal> {
    for (key, value) in req {
        let refused = match key.as_str() {
            "messages" | "tools" | "tool_choice" => continue,
            k if IGNORED.contains(&k) => continue,
            "n" if value.is_null() || value.as_u64() == Some(1) => continue,
            "n" => "Chela gives one answer per request: `n` must be 1",
            "response_format" => continue,
            "logprobs" if value.is_null() || value == &Value::Bool(false) => continue,
            "top_logprobs" | "stop" | "logit_bias" | "prediction" | "audio" | "web_search_options"
                if value.is_null() =>
            {
                continue;
            }
            "modalities" if value.as_array().is_some_and(|m| m.iter().all(|x| x == "text")) => continue,
            "logprobs" | "top_logprobs" => "Chela's endpoint gives no log probabilities",
            "stop" => "Chela's endpoint does not take stop sequences",
            "logit_bias" if value.as_object().is_some_and(Map::is_empty) => continue,
            "logit_bias" => "Chela's endpoint does not take `logit_bias`",
            "functions" | "function_call" => "the legacy `functions` are not taken: send `tools`",
            "modalities" | "audio" => "Chela's endpoint answers in text only",
            "prediction" | "web_search_options" => "Chela's endpoint does not take this parameter",
            _ => {
                return Err(bad(format!("Unrecognized request argument supplied: {key}"), key));
            }
        };
        return Err(bad(format!("{refused} (parameter `{key}`)"), key));
    }
    if let Some(choice) = req.get("tool_choice")
        && !matches!(choice.as_str(), Some("auto" | "none"))
        && !choice.is_null()
    {
        return Err(bad(
            "`tool_choice` may be \"auto\" or \"none\": Chela's model decides whether to call a tool",
            "tool_choice",
        ));
    }
    Ok(())
}

/// `response_format`: text (`None`), any JSON object, or JSON following a named schema, as
/// OpenAI's API takes them.
pub(super) fn response_format(value: Option<&Value>) -> Result<Option<Format>, Refusal> {
    const PARAM: &str = "response_format";
    let value = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(v @ Value::Object(_)) => v,
        Some(_) => return Err(bad("`response_format` must be an object", PARAM)),
    };
    match value.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Format::JsonObject)),
        Some("json_schema") => {
            let Some(Value::Object(js)) = value.get("json_schema") else {
                return Err(bad("a json_schema `response_format` needs `json_schema` as an object", PARAM));
            };
            let name = js.get("name").and_then(Value::as_str).unwrap_or("");
            if !good_tool_name(name) {
                return Err(bad(
                    format!("the json_schema name {name:?} is not 1 to 64 letters, digits, `_` or `-`"),
                    PARAM,
                ));
            }
            let description = match js.get("description") {
                None | Some(Value::Null) => None,
                Some(Value::String(d)) if d.len() <= MAX_SCHEMA_DESCRIPTION => Some(d.clone()),
                Some(Value::String(_)) => {
                    return Err(bad(
                        format!("the json_schema description is over {MAX_SCHEMA_DESCRIPTION} bytes"),
                        PARAM,
                    ));
                }
                Some(_) => return Err(bad("the json_schema description must be a string", PARAM)),
            };
            let schema = match js.get("schema") {
                None | Some(Value::Null) => None,
                Some(s @ Value::Object(_)) => {
                    let text = s.to_string();
                    if text.len() > MAX_SCHEMA {
                        return Err(bad(format!("the json_schema schema is over {MAX_SCHEMA} bytes"), PARAM));
                    }
                    Some(text)
                }
                Some(_) => return Err(bad("the json_schema schema must be a JSON Schema object", PARAM)),
            };
            let strict = match js.get("strict") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(_) => return Err(bad("the json_schema `strict` must be true or false", PARAM)),
            };
            Ok(Some(Format::JsonSchema { name: name.to_owned(), description, schema, strict }))
        }
        _ => Err(bad("`response_format` type must be text, json_object or json_schema", PARAM)),
    }
}

/// Whether `name` is a function name OpenAI accepts: what the vendors accept too.
fn good_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn tools(value: Option<&Value>) -> Result<Vec<ClientTool>, Refusal> {
    let list = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(bad("`tools` must be an array", "tools")),
    };
    if list.len() > MAX_TOOLS {
        return Err(bad(format!("`tools` has {} tools; at most {MAX_TOOLS} are taken", list.len()), "tools"));
    }
    let mut out: Vec<ClientTool> = Vec::with_capacity(list.len());
    for tool in list {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(bad("each of `tools` must be {\"type\":\"function\",\"function\":{…}}", "tools"));
        }
        let f = tool.get("function").unwrap_or(&Value::Null);
        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
        if !good_tool_name(name) {
            return Err(bad(format!("the tool name {name:?} is not 1 to 64 letters, digits, `_` or `-`"), "tools"));
        }
        if out.iter().any(|t| t.name == name) {
            return Err(bad(format!("the tool `{name}` is offered twice"), "tools"));
        }
        let schema = match f.get("parameters") {
            None | Some(Value::Null) => "{\"type\":\"object\",\"properties\":{}}".to_owned(),
            Some(p @ Value::Object(_)) => p.to_string(),
            Some(_) => return Err(bad(format!("the parameters of `{name}` must be a JSON Schema object"), "tools")),
        };
        let description = match f.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(d)) => d.clone(),
            Some(_) => return Err(bad(format!("the description of `{name}` must be a string"), "tools")),
        };
        out.push(ClientTool { name: name.to_owned(), description, input_schema: schema });
    }
    Ok(out)
}

/// The text of a message's `content`: a string, or its text parts joined by a newline.
pub fn content_text(content: &Value, at: usize) -> Result<String, Refusal> {
    let param = format!("messages[{at}].content");
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut texts = Vec::with_capacity(parts.len());
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text" | "refusal" | "input_text" | "output_text") => {
                        let key = if part.get("type") == Some(&Value::from("refusal")) { "refusal" } else { "text" };
                        match part.get(key) {
                            Some(Value::String(t)) => texts.push(t.as_str()),
                            _ => return Err(bad(format!("a text part needs `{key}` as a string"), &param)),
                        }
                    }
                    Some(other) => {
                        return Err(bad(
                            format!("content parts of type `{other}` are not accepted here; send text parts"),
                            &param,
                        ));
                    }
                    None => return Err(bad("each content part needs a `type`", &param)),
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(bad("`content` must be a string or an array of text parts", &param)),
    }
}

/// The client's messages as Chela's: system messages become the instructions; user text and
/// tool results between two assistant messages become one user message; each tool result must
/// answer a call of the assistant message before it, and every call must be answered before
/// the next assistant message.
fn conversation(messages: &[Value]) -> Result<(Option<String>, Vec<Message>), Refusal> {
    let mut instructions: Vec<String> = Vec::new();
    let mut out: Vec<Message> = Vec::new();
    // The calls of the last assistant message still unanswered, and those it had.
    let mut asked: Vec<String> = Vec::new();
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let content = m.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                let text = content_text(content, i)?;
                if !text.trim().is_empty() {
                    instructions.push(text);
                }
            }
            "user" => {
                let text = content_text(content, i)?;
                if !text.is_empty() {
                    push_user(&mut out, Block::text(text));
                }
            }
            "tool" => {
                let Some(id) = m.get("tool_call_id").and_then(Value::as_str) else {
                    return Err(bad("a tool message needs `tool_call_id`", &format!("messages[{i}].tool_call_id")));
                };
                if !asked.iter().any(|a| a == id) {
                    return Err(bad(
                        format!("the tool message answers `{id}`, which no assistant message before it called"),
                        &format!("messages[{i}].tool_call_id"),
                    ));
                }
                if !open.iter().any(|a| a == id) {
                    return Err(bad(
                        format!("the call `{id}` is answered twice"),
                        &format!("messages[{i}].tool_call_id"),
                    ));
                }
                open.retain(|a| a != id);
                push_user(&mut out, Block::tool_result(id, content_text(content, i)?, false));
            }
            "assistant" => {
                if let Some(id) = open.first() {
                    return Err(bad(
                        format!("the call `{id}` has no tool message answering it before the next assistant message"),
                        &format!("messages[{i}]"),
                    ));
                }
                let mut blocks = Vec::new();
                let text = content_text(content, i)?;
                if !text.is_empty() {
                    blocks.push(Block::text(text));
                }
                asked.clear();
                for call in tool_calls(m.get("tool_calls"), i)? {
                    if let Block::ToolUse { id, .. } = &call {
                        asked.push(id.clone());
                    }
                    blocks.push(call);
                }
                open.clone_from(&asked);
                if blocks.is_empty() {
                    // An empty assistant message says nothing: the conversation reads the same without it.
                    continue;
                }
                match out.last_mut() {
                    Some(last) if last.role == Role::Assistant && last.tool_use_ids().next().is_none() => {
                        last.content.extend(blocks);
                    }
                    _ => out.push(Message { role: Role::Assistant, content: blocks }),
                }
            }
            "" => return Err(bad("each message needs a `role`", &format!("messages[{i}].role"))),
            other => {
                return Err(bad(
                    format!("the role `{other}` is not one of system, developer, user, assistant, tool"),
                    &format!("messages[{i}].role"),
                ));
            }
        }
    }
    if let Some(id) = open.first() {
        return Err(bad(format!("the call `{id}` has no tool message answering it"), "messages"));
    }
    let instructions = (!instructions.is_empty()).then(|| instructions.join("\n\n"));
    Ok((instructions, out))
}

/// Adds `block` to the user message being gathered, tool results before the text.
fn push_user(out: &mut Vec<Message>, block: Block) {
    match out.last_mut() {
        Some(last) if last.role == Role::User => {
            if matches!(block, Block::ToolResult { .. }) {
                let at = last.content.iter().position(|b| !matches!(b, Block::ToolResult { .. }));
                last.content.insert(at.unwrap_or(last.content.len()), block);
            } else {
                last.content.push(block);
            }
        }
        _ => out.push(Message { role: Role::User, content: vec![block] }),
    }
}

fn tool_calls(value: Option<&Value>, at: usize) -> Result<Vec<Block>, Refusal> {
    let param = format!("messages[{at}].tool_calls");
    let list = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) if list.len() <= MAX_CALLS => list,
        Some(Value::Array(_)) => return Err(bad(format!("at most {MAX_CALLS} tool calls per message"), &param)),
        Some(_) => return Err(bad("`tool_calls` must be an array", &param)),
    };
    let mut out = Vec::with_capacity(list.len());
    for call in list {
        let id = call.get("id").and_then(Value::as_str).filter(|s| !s.is_empty() && s.len() <= 256);
        let f = call.get("function").unwrap_or(&Value::Null);
        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
        let (Some(id), true) = (id, good_tool_name(name)) else {
            return Err(bad("each tool call needs an `id` and a `function.name`", &param));
        };
        let args = f.get("arguments").and_then(Value::as_str).unwrap_or("");
        let input = parse_tool_input(args)
            .map_err(|_| bad(format!("the arguments of the call `{id}` are not a JSON object"), &param))?;
        out.push(Block::ToolUse { id: id.to_owned(), name: name.to_owned(), input });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
