//! The Anthropic Messages API: `POST {base_url}/v1/messages`.
//!
//! The base URL follows the official SDKs: without `/v1` (`https://api.anthropic.com`); the
//! client appends [`PATH`]. Headers: `x-api-key`, `anthropic-version: 2023-06-01`,
//! `content-type: application/json`.

use alloc::string::String;
use alloc::vec::Vec;

use crate::chat::{ArgError, Block, Json, Reply, Request, StopReason, ToolChoice, Update, Usage, tool_use_block};
use crate::error::ApiError;
use crate::json::{Sink, Writer};
use crate::sse;
use crate::stream::{Accumulate, Budget, Limits, StreamError, malformed};

/// Appended to the base URL.
pub const PATH: &str = "/v1/messages";

/// The breakpoint Anthropic's prompt cache takes: the prefix up to the block it is on is cached
/// for five minutes, refreshed by every read.
const EPHEMERAL: &str = r#"{"type":"ephemeral"}"#;

/// Encodes `req` as a Messages API request body.
///
/// With [`Cache::mark`](crate::chat::Cache) on, `cache_control` breakpoints go (in the order the
/// API reads the prefix: tools, system, messages) on the last tool, the stable system block and
/// the last message of the history before this turn: three of the API's four. Tools come first
/// in the body too, so the body's own prefix stays byte-stable.
///
/// `req.format` is not written: the Messages API has no `response_format`, so whoever takes one
/// from a client refuses it before a request to Anthropic is made.
pub fn write_request<S: Sink + ?Sized>(req: &Request<'_>, sink: &mut S) {
    let cache = req.cache;
    let mut w = Writer::new(sink);
    w.begin_object();
    w.field_str("model", req.model);
    w.field_u64("max_tokens", u64::from(req.max_tokens));
    if !req.tools.is_empty() {
        w.key("tools").begin_array();
        for (i, t) in req.tools.iter().enumerate() {
            w.begin_object();
            w.field_str("name", t.name);
            w.field_str("description", t.description);
            w.field_raw("input_schema", t.input_schema);
            if cache.mark && i + 1 == req.tools.len() {
                w.field_raw("cache_control", EPHEMERAL);
            }
            w.end_object();
        }
        w.end_array();
    }
    match cache.split_system(req.system) {
        ("", "") => {}
        (stable, rest) if cache.mark && !stable.is_empty() => {
            w.key("system").begin_array();
            w.begin_object().field_str("type", "text").field_str("text", stable);
            w.field_raw("cache_control", EPHEMERAL).end_object();
            if !rest.is_empty() {
                w.begin_object().field_str("type", "text").field_str("text", rest).end_object();
            }
            w.end_array();
        }
        _ => {
            w.field_str("system", req.system);
        }
    }
    w.key("messages").begin_array();
    for (i, m) in req.messages.iter().enumerate() {
        // The same message in every call of the turn, so the turn's later calls (after tool
        // rounds) read the history from the cache; a mark on the newest message would move
        // with every call and be written more often than read.
        let marked = cache.mark && Some(i) == cache.history_end;
        w.begin_object();
        w.field_str("role", m.role.as_str());
        w.key("content");
        match m.content.as_slice() {
            [Block::Text { text }] if !marked || text.is_empty() => {
                w.string(text);
            }
            blocks => {
                // The breakpoint goes on the last block that is written (empty text is not).
                let at = if marked { blocks.iter().rposition(|b| !is_empty_text(b)) } else { None };
                w.begin_array();
                for (j, b) in blocks.iter().enumerate() {
                    write_block(&mut w, b, Some(j) == at);
                }
                w.end_array();
            }
        }
        w.end_object();
    }
    w.end_array();
    if !req.tools.is_empty() {
        let choice = match req.tool_choice {
            ToolChoice::Auto => r#"{"type":"auto"}"#,
            ToolChoice::None => r#"{"type":"none"}"#,
        };
        w.field_raw("tool_choice", choice);
    }
    if req.stream {
        w.field_bool("stream", true);
    }
    w.end_object();
}

fn is_empty_text(b: &Block) -> bool {
    matches!(b, Block::Text { text } if text.is_empty())
}

/// Writes one block; `breakpoint` adds a `cache_control` to it.
fn write_block<S: Sink + ?Sized>(w: &mut Writer<'_, S>, b: &Block, breakpoint: bool) {
    match b {
        // The API rejects empty text blocks; an empty one carries nothing anyway.
        Block::Text { text } if text.is_empty() => return,
        Block::Text { text } => {
            w.begin_object().field_str("type", "text").field_str("text", text);
        }
        Block::Image { media_type, data } => {
            write_image(w, media_type, data, breakpoint);
            return;
        }
        Block::ToolUse { id, name, input } => {
            w.begin_object().field_str("type", "tool_use").field_str("id", id).field_str("name", name);
            w.field_raw("input", input.as_str());
        }
        Block::ToolResult { tool_use_id, content, images, is_error } => {
            w.begin_object().field_str("type", "tool_result").field_str("tool_use_id", tool_use_id);
            if images.is_empty() {
                w.field_str("content", content);
            } else {
                // With images, `content` is a list of text and image blocks, the text first.
                w.key("content").begin_array();
                if !content.is_empty() {
                    w.begin_object().field_str("type", "text").field_str("text", content).end_object();
                }
                for image in images.as_slice() {
                    write_image(w, &image.media_type, &image.data, false);
                }
                w.end_array();
            }
            if *is_error {
                w.field_bool("is_error", true);
            }
        }
    }
    if breakpoint {
        w.field_raw("cache_control", EPHEMERAL);
    }
    w.end_object();
}

fn write_image<S: Sink + ?Sized>(w: &mut Writer<'_, S>, media_type: &str, data: &str, breakpoint: bool) {
    w.begin_object().field_str("type", "image").key("source").begin_object();
    w.field_str("type", "base64").field_str("media_type", media_type).field_str("data", data);
    w.end_object();
    if breakpoint {
        w.field_raw("cache_control", EPHEMERAL);
    }
    w.end_object();
}

#[derive(Default, Debug, PartialEq)]
struct WireUsage {
    input_tokens: u64,
    output_tokens: u64,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    fn neutral(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_input_tokens.unwrap_or(0),
            cache_write_tokens: self.cache_creation_input_tokens.unwrap_or(0),
        }
    }
}

/// Why a whole (non-streamed) body could not be read.
pub type DecodeError = StreamError;

/// Parses a non-streamed Messages API response within [`Limits::HOST`].
pub fn parse_response(body: &[u8]) -> Result<Reply, DecodeError> {
    parse_response_within(body, Limits::HOST)
}

/// Parses a non-streamed Messages API response, counting its blocks as the stream decoder does.
pub fn parse_response_within(body: &[u8], limits: Limits) -> Result<Reply, DecodeError> {
    if let Some(api) = ApiError::parse(body) {
        return Err(StreamError::Api(api));
    }
    let m = WireMessage::read(body).map_err(|e| malformed("message", &e))?;
    let mut budget = Budget::new(limits);
    let mut content = Vec::new();
    for b in m.content {
        budget.block(b.kind == "tool_use")?;
        budget.take(b.text.as_ref().map_or(0, String::len))?;
        match b.kind.as_str() {
            "text" => content.push(Block::Text { text: b.text.unwrap_or_default() }),
            "tool_use" => content.push(Block::ToolUse {
                id: b.id.unwrap_or_default(),
                name: b.name.unwrap_or_default(),
                input: match b.input {
                    Some(raw) => Json::parse(raw).map_err(|e| malformed("tool input", &e))?,
                    None => Json::empty_object(),
                },
            }),
            _ => {}
        }
    }
    Ok(Reply {
        content,
        stop_reason: StopReason::from_wire(m.stop_reason.as_deref().unwrap_or("end_turn")),
        usage: m.usage.neutral(),
        arg_errors: Vec::new(),
    })
}

// The stream's events, read by the pull reader (`wire.rs`): one small reader per type instead
// of a serde visitor each, which is what the chip's image has room for.
use wire::{WireError, WireEvent, WireMessage};

mod wire;

#[derive(Debug)]
enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// A block kind Chela does not use (thinking, server tools).
    Skip,
}

/// Folds Messages API stream events into a [`Reply`].
#[derive(Debug)]
pub struct Accumulator {
    blocks: Vec<Partial>,
    stop_reason: Option<String>,
    usage: Usage,
    stopped: bool,
    budget: Budget,
    max_blocks: usize,
}

impl Accumulator {
    pub fn new(limits: Limits) -> Accumulator {
        Accumulator {
            blocks: Vec::new(),
            stop_reason: None,
            usage: Usage::default(),
            stopped: false,
            budget: Budget::new(limits),
            max_blocks: limits.max_blocks,
        }
    }

    /// The block a `content_block_start` at `index` opens; only starts create blocks, so the
    /// block count bounds the vector.
    fn slot(&mut self, index: usize) -> Result<&mut Partial, StreamError> {
        // A block index far beyond what was started is a broken stream, not a reason to allocate.
        if index > self.blocks.len() + 64 {
            return Err(StreamError::Malformed(alloc::format!("content block index {index} out of order")));
        }
        if index >= self.max_blocks {
            return Err(StreamError::TooMany { what: "content blocks", limit: self.max_blocks });
        }
        while self.blocks.len() <= index {
            self.blocks.push(Partial::Skip);
        }
        Ok(&mut self.blocks[index])
    }
}

impl Accumulate for Accumulator {
    fn handle_event(&mut self, event: &sse::Event, on_update: &mut dyn FnMut(Update<'_>)) -> Result<(), StreamError> {
        let ev = WireEvent::read(event.data.as_bytes()).map_err(|e| malformed("stream event", &e))?;
        match ev.kind.as_ref() {
            "message_start" => {
                if let Some(m) = ev.message {
                    self.usage = m.usage.neutral();
                }
            }
            "content_block_start" => {
                let Some(b) = ev.content_block else {
                    return Err(StreamError::Malformed("content_block_start without content_block".into()));
                };
                // Every start counts, empty or not: a flood of empty blocks is what this bounds.
                self.budget.block(b.kind == "tool_use")?;
                let partial = match b.kind.as_ref() {
                    "text" => {
                        let text = b.text.unwrap_or_default();
                        self.budget.take(text.len())?;
                        Partial::Text(text)
                    }
                    "tool_use" => {
                        let id = b.id.unwrap_or_default();
                        let name = b.name.unwrap_or_default();
                        on_update(Update::ToolUseStart { id: &id, name: &name });
                        Partial::ToolUse { id, name, json: String::new() }
                    }
                    _ => Partial::Skip,
                };
                *self.slot(ev.index)? = partial;
            }
            "content_block_delta" => {
                let Some(d) = ev.delta else { return Ok(()) };
                match d.kind.as_deref() {
                    Some("text_delta") => {
                        let text = d.text.unwrap_or_default();
                        self.budget.take(text.len())?;
                        if let Some(Partial::Text(buf)) = self.blocks.get_mut(ev.index) {
                            self.budget.push(buf, &text);
                            on_update(Update::Text(&text));
                        }
                    }
                    Some("input_json_delta") => {
                        let part = d.partial_json.unwrap_or_default();
                        self.budget.take(part.len())?;
                        if let Some(Partial::ToolUse { json, .. }) = self.blocks.get_mut(ev.index) {
                            self.budget.push(json, &part);
                        }
                    }
                    // thinking_delta, signature_delta, citations: not used by Chela.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(d) = ev.delta
                    && let Some(r) = d.stop_reason
                {
                    self.stop_reason = Some(r);
                }
                if let Some(u) = ev.usage {
                    if let Some(o) = u.output_tokens {
                        self.usage.output_tokens = o;
                    }
                    if let Some(i) = u.input_tokens {
                        self.usage.input_tokens = i;
                    }
                    if let Some(c) = u.cache_read_input_tokens {
                        self.usage.cache_read_tokens = c;
                    }
                    if let Some(c) = u.cache_creation_input_tokens {
                        self.usage.cache_write_tokens = c;
                    }
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let e = ev.error.unwrap_or(WireError { kind: String::new(), message: String::new() });
                return Err(StreamError::Api(ApiError { kind: e.kind, code: String::new(), message: e.message }));
            }
            // ping, content_block_stop and event types added after this was written.
            _ => {}
        }
        Ok(())
    }

    fn finish(self) -> Result<Reply, StreamError> {
        if !self.stopped {
            return Err(StreamError::Truncated);
        }
        let mut arg_errors: Vec<ArgError> = Vec::new();
        let mut content = Vec::with_capacity(self.blocks.len());
        for p in self.blocks {
            match p {
                Partial::Text(text) => content.push(Block::Text { text }),
                Partial::ToolUse { id, name, json } => content.push(tool_use_block(id, name, &json, &mut arg_errors)),
                Partial::Skip => {}
            }
        }
        Ok(Reply {
            content,
            stop_reason: StopReason::from_wire(self.stop_reason.as_deref().unwrap_or("end_turn")),
            usage: self.usage,
            arg_errors,
        })
    }
}

/// SSE parsing plus the Messages API accumulator.
pub type StreamDecoder = crate::stream::Decoder<Accumulator>;

impl StreamDecoder {
    pub fn new(limits: Limits) -> StreamDecoder {
        crate::stream::Decoder::with(Accumulator::new(limits), limits)
    }
}

#[cfg(test)]
mod tests;
