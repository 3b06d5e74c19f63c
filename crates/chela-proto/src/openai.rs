//! OpenAI Chat Completions, as spoken by OpenAI and the servers that copy it (DeepSeek, Qwen,
//! OpenRouter, Ollama, vLLM, llama.cpp): `POST {base_url}/chat/completions`.
//!
//! The base URL follows the official SDK: it includes `/v1` (`https://api.openai.com/v1`); the
//! client appends [`PATH`]. Header: `authorization: Bearer <key>`.
//!
//! Mapping from the neutral model: the system prompt is the first message; an assistant
//! message's tool uses become `tool_calls` with their input as the `arguments` string; each tool
//! result becomes a `tool` message (errors are prefixed with `Error: `, the format has no flag);
//! a tool's images, which a `tool` message cannot hold, follow in a `user` message.
//!
//! Servers vary; the decoder accepts what the common ones send: arguments as a string or as an
//! object, tool-call deltas without an `index` or `id`, `content: null`, a missing `[DONE]`.

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::chat::{
    ArgError, Block, Format, Reply, Request, Role, StopReason, ToolChoice, Update, Usage, tool_use_block,
};
use crate::error::ApiError;
use crate::json::{Sink, Writer};
use crate::sse;
use crate::stream::{Accumulate, Budget, Limits, StreamError, malformed};

/// Appended to the base URL.
pub const PATH: &str = "/chat/completions";

/// Where servers differ in what they accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialect {
    /// OpenAI's own API wants `max_completion_tokens` (its newer models refuse `max_tokens`);
    /// the compatible servers (vLLM, llama.cpp, Ollama, DeepSeek…) know `max_tokens`.
    pub max_tokens_field: &'static str,
}

impl Dialect {
    /// What compatible servers accept.
    pub const COMPATIBLE: Dialect = Dialect { max_tokens_field: "max_tokens" };
    /// What `api.openai.com` wants.
    pub const OPENAI: Dialect = Dialect { max_tokens_field: "max_completion_tokens" };
}

/// Encodes `req` as a Chat Completions request body for a compatible server.
pub fn write_request<S: Sink + ?Sized>(req: &Request<'_>, sink: &mut S) {
    write_request_for(req, Dialect::COMPATIBLE, sink);
}

/// Encodes `req` as a Chat Completions request body in `dialect`.
pub fn write_request_for<S: Sink + ?Sized>(req: &Request<'_>, dialect: Dialect, sink: &mut S) {
    let mut w = Writer::new(sink);
    w.begin_object();
    w.field_str("model", req.model);
    w.field_u64(dialect.max_tokens_field, u64::from(req.max_tokens));
    if let Some(key) = req.cache.key {
        w.field_str("prompt_cache_key", key);
    }
    // Tools before the messages, the system prompt's stable part first among these: what a
    // prompt cache can reuse leads the body, byte for byte the same from turn to turn.
    if !req.tools.is_empty() {
        w.key("tools").begin_array();
        for t in req.tools {
            w.begin_object().field_str("type", "function").key("function").begin_object();
            w.field_str("name", t.name).field_str("description", t.description);
            w.field_raw("parameters", t.input_schema);
            w.end_object().end_object();
        }
        w.end_array();
    }
    w.key("messages").begin_array();
    if !req.system.is_empty() {
        w.begin_object().field_str("role", "system").field_str("content", req.system).end_object();
    }
    for m in req.messages {
        match m.role {
            Role::User => write_user(&mut w, &m.content),
            Role::Assistant => write_assistant(&mut w, &m.content),
        }
    }
    w.end_array();
    if !req.tools.is_empty() {
        w.field_str(
            "tool_choice",
            match req.tool_choice {
                ToolChoice::Auto => "auto",
                ToolChoice::None => "none",
            },
        );
    }
    if let Some(format) = req.format {
        write_format(&mut w, format);
    }
    if req.stream {
        w.field_bool("stream", true);
        w.field_raw("stream_options", r#"{"include_usage":true}"#);
    }
    w.end_object();
}

/// `response_format` as OpenAI's API takes it.
fn write_format<S: Sink + ?Sized>(w: &mut Writer<'_, S>, format: &Format) {
    w.key("response_format").begin_object();
    match format {
        Format::JsonObject => {
            w.field_str("type", "json_object");
        }
        Format::JsonSchema { name, description, schema, strict } => {
            w.field_str("type", "json_schema").key("json_schema").begin_object();
            w.field_str("name", name);
            if let Some(d) = description {
                w.field_str("description", d);
            }
            if let Some(s) = schema {
                w.field_raw("schema", s);
            }
            if let Some(strict) = strict {
                w.field_bool("strict", *strict);
            }
            w.end_object();
        }
    }
    w.end_object();
}

fn write_user<S: Sink + ?Sized>(w: &mut Writer<'_, S>, blocks: &[Block]) {
    // Tool results must directly follow the assistant message that asked for them.
    for b in blocks {
        if let Block::ToolResult { tool_use_id, content, is_error, .. } = b {
            w.begin_object().field_str("role", "tool").field_str("tool_call_id", tool_use_id);
            if *is_error {
                w.key("content").string_parts(&["Error: ", content]);
            } else {
                w.field_str("content", content);
            }
            w.end_object();
        }
    }
    // A `tool` message's content is text only in Chat Completions, so a tool's images travel
    // in a `user` message after all the tool messages, each series introduced by a text part
    // naming the call it came from; the person's own text and images follow in the same message.
    let tool_images = || {
        blocks.iter().filter_map(|b| match b {
            Block::ToolResult { tool_use_id, images, .. } if !images.is_empty() => Some((tool_use_id, images)),
            _ => None,
        })
    };
    let rest = || blocks.iter().filter(|b| matches!(b, Block::Text { .. } | Block::Image { .. }));
    let has_tool_images = tool_images().next().is_some();
    match rest().count() {
        0 if !has_tool_images => {}
        1 if !has_tool_images && matches!(rest().next(), Some(Block::Text { .. })) => {
            if let Some(Block::Text { text }) = rest().next() {
                w.begin_object().field_str("role", "user").field_str("content", text).end_object();
            }
        }
        _ => {
            w.begin_object().field_str("role", "user").key("content").begin_array();
            for (id, images) in tool_images() {
                w.begin_object().field_str("type", "text");
                w.key("text").string_parts(&["The image(s) the tool call ", id, " returned:"]);
                w.end_object();
                for image in images.as_slice() {
                    write_image_url(w, &image.media_type, &image.data);
                }
            }
            for b in rest() {
                match b {
                    Block::Text { text } => {
                        w.begin_object().field_str("type", "text").field_str("text", text).end_object();
                    }
                    Block::Image { media_type, data } => write_image_url(w, media_type, data),
                    _ => {}
                }
            }
            w.end_array().end_object();
        }
    }
}

/// An `image_url` part with the image inline as a `data:` URL.
fn write_image_url<S: Sink + ?Sized>(w: &mut Writer<'_, S>, media_type: &str, data: &str) {
    w.begin_object().field_str("type", "image_url").key("image_url").begin_object();
    w.key("url").string_parts(&["data:", media_type, ";base64,", data]);
    w.end_object().end_object();
}

fn write_assistant<S: Sink + ?Sized>(w: &mut Writer<'_, S>, blocks: &[Block]) {
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let has_calls = blocks.iter().any(|b| matches!(b, Block::ToolUse { .. }));
    w.begin_object().field_str("role", "assistant");
    if texts.iter().all(|t| t.is_empty()) && has_calls {
        w.key("content").null();
    } else {
        w.key("content").string_parts(&texts);
    }
    if has_calls {
        w.key("tool_calls").begin_array();
        for b in blocks {
            if let Block::ToolUse { id, name, input } = b {
                w.begin_object().field_str("id", id).field_str("type", "function").key("function").begin_object();
                w.field_str("name", name).field_str("arguments", input.as_str());
                w.end_object().end_object();
            }
        }
        w.end_array();
    }
    w.end_object();
}

// The wire types and their readers (the pull reader, not serde: `wire.rs`).
mod wire;

use wire::{WireChunk, WireCompletion, WireFunction, WireToolCall};

/// The text of `arguments`: a JSON string's contents, or an object sent as-is (Ollama does that).
fn arguments_text(raw: Option<&str>) -> Result<Cow<'_, str>, crate::json::read::Error> {
    let Some(text) = raw else {
        return Ok(Cow::Borrowed(""));
    };
    if text.starts_with('"') {
        crate::json::read::read_all(text.as_bytes(), crate::json::read::Reader::str)
    } else if text == "null" {
        Ok(Cow::Borrowed(""))
    } else {
        Ok(Cow::Borrowed(text))
    }
}

/// Parses a non-streamed Chat Completions response within [`Limits::HOST`].
pub fn parse_response(body: &[u8]) -> Result<Reply, StreamError> {
    parse_response_within(body, Limits::HOST)
}

/// Parses a non-streamed Chat Completions response, counting its calls as the stream decoder does.
pub fn parse_response_within(body: &[u8], limits: Limits) -> Result<Reply, StreamError> {
    if let Some(api) = ApiError::parse(body) {
        return Err(StreamError::Api(api));
    }
    let c = WireCompletion::read(body).map_err(|e| malformed("chat completion", &e))?;
    let Some(choice) = c.choices.into_iter().next() else {
        return Err(StreamError::Malformed("a chat completion without choices".into()));
    };
    let mut content = Vec::new();
    let mut arg_errors = Vec::new();
    let mut budget = Budget::new(limits);
    if let Some(text) = choice.message.content
        && !text.is_empty()
    {
        budget.block(false)?;
        budget.take(text.len())?;
        content.push(Block::Text { text });
    }
    for (i, tc) in choice.message.tool_calls.unwrap_or_default().into_iter().enumerate() {
        budget.block(true)?;
        let f = tc.function.unwrap_or(WireFunction { name: None, arguments: None });
        let args = arguments_text(f.arguments).map_err(|e| malformed("tool call arguments", &e))?;
        budget.take(args.len())?;
        let id = tc.id.filter(|s| !s.is_empty()).unwrap_or_else(|| format!("call_{i}"));
        content.push(tool_use_block(id, f.name.unwrap_or_default(), &args, &mut arg_errors));
    }
    Ok(Reply {
        content,
        stop_reason: StopReason::from_wire(choice.finish_reason.as_deref().unwrap_or("stop")),
        usage: c.usage.map(|u| u.neutral()).unwrap_or_default(),
        arg_errors,
    })
}

#[derive(Debug)]
struct PartialCall {
    id: String,
    name: String,
    args: String,
}

/// Folds Chat Completions chunks into a [`Reply`].
#[derive(Debug)]
pub struct Accumulator {
    text: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
    budget: Budget,
    max_calls: usize,
}

impl Accumulator {
    pub fn new(limits: Limits) -> Accumulator {
        Accumulator {
            text: String::new(),
            calls: Vec::new(),
            finish_reason: None,
            usage: Usage::default(),
            done: false,
            budget: Budget::new(limits),
            max_calls: limits.max_tool_calls,
        }
    }

    fn tool_delta(&mut self, tc: WireToolCall<'_>, on_update: &mut dyn FnMut(Update<'_>)) -> Result<(), StreamError> {
        // Without an index, a new id starts a new call and anything else continues the last one.
        let index = tc.index.unwrap_or_else(|| match (&tc.id, self.calls.last()) {
            (Some(id), Some(last)) if !id.is_empty() && *id != last.id => self.calls.len(),
            (_, None) => 0,
            _ => self.calls.len() - 1,
        });
        // An index far beyond the calls seen is a broken stream, not a reason to allocate.
        if index > self.calls.len() + 64 {
            return Err(StreamError::Malformed(format!("tool call index {index} out of order")));
        }
        if index >= self.max_calls {
            return Err(StreamError::TooMany { what: "tool calls", limit: self.max_calls });
        }
        while self.calls.len() <= index {
            let n = self.calls.len();
            // Each call is a block: an empty one still costs its place in the reply.
            self.budget.block(true)?;
            self.calls.push(PartialCall { id: format!("call_{n}"), name: String::new(), args: String::new() });
        }
        let f = tc.function.unwrap_or(WireFunction { name: None, arguments: None });
        let args = arguments_text(f.arguments).map_err(|e| malformed("tool call arguments", &e))?;
        self.budget.take(args.len())?;
        let call = &mut self.calls[index];
        if let Some(id) = tc.id
            && !id.is_empty()
        {
            call.id = id;
        }
        self.budget.push(&mut call.args, &args);
        if let Some(name) = f.name
            && !name.is_empty()
            && call.name.is_empty()
        {
            call.name = name;
            on_update(Update::ToolUseStart { id: &call.id, name: &call.name });
        }
        Ok(())
    }
}

impl Accumulate for Accumulator {
    fn handle_event(&mut self, event: &sse::Event, on_update: &mut dyn FnMut(Update<'_>)) -> Result<(), StreamError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk = WireChunk::read(data.as_bytes()).map_err(|e| malformed("stream chunk", &e))?;
        if chunk.error {
            let api = ApiError::parse(data.as_bytes()).unwrap_or_else(|| ApiError::from_text(data));
            return Err(StreamError::Api(api));
        }
        if let Some(u) = &chunk.usage {
            self.usage = u.neutral();
        }
        for choice in chunk.choices {
            if choice.index != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content
                    && !text.is_empty()
                {
                    if self.text.is_empty() {
                        self.budget.block(false)?;
                    }
                    self.budget.take(text.len())?;
                    self.budget.push(&mut self.text, &text);
                    on_update(Update::Text(&text));
                }
                for tc in delta.tool_calls.unwrap_or_default() {
                    self.tool_delta(tc, on_update)?;
                }
            }
            if let Some(r) = choice.finish_reason {
                self.finish_reason = Some(r);
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Reply, StreamError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(StreamError::Truncated);
        }
        let mut content = Vec::with_capacity(1 + self.calls.len());
        if !self.text.is_empty() {
            content.push(Block::Text { text: self.text });
        }
        let mut arg_errors: Vec<ArgError> = Vec::new();
        for c in self.calls {
            content.push(tool_use_block(c.id, c.name, &c.args, &mut arg_errors));
        }
        Ok(Reply {
            content,
            stop_reason: StopReason::from_wire(self.finish_reason.as_deref().unwrap_or("stop")),
            usage: self.usage,
            arg_errors,
        })
    }
}

/// SSE parsing plus the Chat Completions accumulator.
pub type StreamDecoder = crate::stream::Decoder<Accumulator>;

impl StreamDecoder {
    pub fn new(limits: Limits) -> StreamDecoder {
        crate::stream::Decoder::with(Accumulator::new(limits), limits)
    }
}

#[cfg(test)]
mod tests;
