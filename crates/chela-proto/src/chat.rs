//! The provider-neutral conversation model that both wire formats encode and decode.
//!
//! Its block vocabulary follows Anthropic's (text, image, tool_use, tool_result) because it is
//! the richer of the two; [`crate::openai`] maps it onto messages, `tool_calls` and `tool`
//! messages. The same types are the lines of a session file, so they serialise to plain JSON a
//! person can read: a message whose content is one text block is written as a string.

use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::json::read;

mod json;
pub use json::{read_content, write_content};

/// Who said a message. Tool results travel in `user` messages, as Anthropic has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One valid JSON value, kept as its text (tool inputs, tool schemas).
#[derive(Clone)]
pub struct Json(Box<str>);

impl Json {
    /// Parses `text`; it must be exactly one JSON value (white space around it is dropped).
    pub fn parse(text: &str) -> Result<Json, read::Error> {
        read::read_all(text.as_bytes(), Json::read)
    }

    /// `{}`.
    pub fn empty_object() -> Json {
        // "{}" is valid JSON.
        Json::parse("{}").unwrap_or_else(|_| unreachable_json())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cold]
fn unreachable_json() -> Json {
    panic!("a JSON literal failed to parse")
}

impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        self.as_str() == other.as_str()
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Only serde's writers come here (the session lines and request bodies use the writer);
        // serde_json takes verbatim text only as a `RawValue`.
        let raw = RawValue::from_string(String::from(&*self.0)).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

/// The serde impls of the chat types read their value's text with the pull reader: one parser
/// for host and chip. Only serde_json's deserializers can hand over the text.
fn from_raw<'de, D: Deserializer<'de>, T>(
    d: D,
    read: impl FnOnce(&mut read::Reader<'_>) -> read::Result<T>,
) -> Result<T, D::Error> {
    let raw = Box::<RawValue>::deserialize(d)?;
    read::read_all(raw.get().as_bytes(), read).map_err(serde::de::Error::custom)
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        from_raw(d, Json::read)
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Role, D::Error> {
        from_raw(d, Role::read)
    }
}

/// A piece of a message.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    /// A base64-encoded image.
    Image {
        media_type: String,
        data: String,
    },
    /// The model asks for a tool to run.
    ToolUse {
        id: String,
        name: String,
        input: Json,
    },
    /// What a tool returned, answering the `ToolUse` with the same id: its text, and the
    /// images it returned beside it (an MCP server's screenshot), in that order.
    ToolResult {
        /// A `Box<str>`, not a `String`: with the images beside it the block still fits in 64 bytes.
        tool_use_id: Box<str>,
        content: String,
        #[serde(skip_serializing_if = "Images::is_empty")]
        images: Images,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
    },
}

/// An image as both wire formats take it: base64 text and its media type (`image/png`). The
/// same two fields as [`Block::Image`], which a person's photo uses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Image {
    pub media_type: String,
    /// Standard base64, no line breaks.
    pub data: String,
}

impl Image {
    /// The decoded size, from the base64 length (padding aside): what a person would call
    /// the image's size.
    pub fn byte_len(&self) -> usize {
        let pad = self.data.bytes().rev().take_while(|&b| b == b'=').count().min(2);
        (self.data.len() / 4 * 3).saturating_sub(pad)
    }

    /// What stands for the image where it is not sent: `[image: image/png, 1.2 KiB]`.
    pub fn placeholder(&self) -> String {
        placeholder(&self.media_type, self.byte_len())
    }
}

/// `[image: TYPE, SIZE]`, the note that stands for an image the model is not shown.
pub fn placeholder(media_type: &str, bytes: usize) -> String {
    alloc::format!("[image: {media_type}, {}]", size_words(bytes))
}

/// A size as a person reads it: `512 B`, `1.2 KiB`, `5.5 MiB` (tenths cut, not rounded).
pub fn size_words(bytes: usize) -> String {
    if bytes < 1024 {
        alloc::format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        alloc::format!("{}.{} KiB", bytes / 1024, bytes % 1024 * 10 / 1024)
    } else {
        alloc::format!("{}.{} MiB", bytes >> 20, ((bytes & 0xF_FFFF) * 10) >> 20)
    }
}

/// The images of a tool result, usually none. One thin pointer, so a [`Block`] stays 64 bytes:
/// the chip holds its history as blocks (docs/BENCHMARKS.md §2) and never has images.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
// A `Box<[Image]>` would be a fat pointer and make every block 8 bytes larger.
#[allow(clippy::box_collection)]
pub struct Images(Option<Box<Vec<Image>>>);

impl Images {
    pub const fn none() -> Images {
        Images(None)
    }

    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|v| v.is_empty())
    }

    pub fn as_slice(&self) -> &[Image] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Takes the images out, leaving none.
    pub fn take(&mut self) -> Vec<Image> {
        self.0.take().map(|b| *b).unwrap_or_default()
    }

    /// Encoded (base64) bytes of all the images.
    pub fn data_bytes(&self) -> usize {
        self.as_slice().iter().map(|i| i.media_type.len() + i.data.len()).sum()
    }
}

impl From<Vec<Image>> for Images {
    fn from(v: Vec<Image>) -> Images {
        if v.is_empty() { Images(None) } else { Images(Some(Box::new(v))) }
    }
}

impl Serialize for Images {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Image {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Image, D::Error> {
        from_raw(d, Image::read)
    }
}

impl<'de> Deserialize<'de> for Images {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Images, D::Error> {
        from_raw(d, Images::read)
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Block, D::Error> {
        from_raw(d, Block::read)
    }
}

// serde's `skip_serializing_if` takes a `&T`.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_false(b: &bool) -> bool {
    !*b
}

impl Block {
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text { text: text.into() }
    }

    /// Bytes this block adds to a request, roughly: the history budget is counted with it.
    pub fn approx_bytes(&self) -> usize {
        const OVERHEAD: usize = 24;
        OVERHEAD
            + match self {
                Block::Text { text } => text.len(),
                Block::Image { media_type, data } => media_type.len() + data.len(),
                Block::ToolUse { id, name, input } => id.len() + name.len() + input.as_str().len(),
                Block::ToolResult { tool_use_id, content, images, .. } => {
                    tool_use_id.len() + content.len() + images.as_slice().len() * IMAGE_COST
                }
            }
    }

    /// A tool result with text only.
    pub fn tool_result(tool_use_id: impl Into<String>, content: impl Into<String>, is_error: bool) -> Block {
        Block::ToolResult {
            tool_use_id: tool_use_id.into().into_boxed_str(),
            content: content.into(),
            images: Images::none(),
            is_error,
        }
    }
}

/// What one tool-result image counts for in the history budget. The budget stands for the
/// model's context, and an image costs tokens by its pixels, not its base64 length: about
/// 1,600 tokens at most for an image the vendors do not scale down, some 6 KB of text.
pub const IMAGE_COST: usize = 6 * 1024;

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Message {
        Message { role: Role::User, content: alloc::vec![Block::text(text)] }
    }

    pub fn assistant_text(text: impl Into<String>) -> Message {
        Message { role: Role::Assistant, content: alloc::vec![Block::text(text)] }
    }

    /// All text blocks joined, without separators.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for b in &self.content {
            if let Block::Text { text } = b {
                out.push_str(text);
            }
        }
        out
    }

    pub fn approx_bytes(&self) -> usize {
        8 + self.content.iter().map(Block::approx_bytes).sum::<usize>()
    }

    /// Whether this message carries tool results (and so is not something the person said).
    pub fn has_tool_results(&self) -> bool {
        self.content.iter().any(|b| matches!(b, Block::ToolResult { .. }))
    }

    /// Replaces the images of this message's tool results with notes in their text
    /// (`[image: image/png, 1.2 KiB]`); returns whether there were any. What a session file
    /// keeps: an image is shown to the model in the turn its tool returned it, and no line of
    /// history carries it for ever after.
    pub fn tool_images_to_notes(&mut self) -> bool {
        let mut any = false;
        for b in &mut self.content {
            if let Block::ToolResult { content, images, .. } = b {
                for image in images.take() {
                    any = true;
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(&image.placeholder());
                }
            }
        }
        any
    }

    /// Replaces every image of this message (a person's photo, a tool's image) with a note:
    /// for a model that takes text only.
    pub fn images_to_notes(&mut self) {
        self.tool_images_to_notes();
        for b in &mut self.content {
            if let Block::Image { media_type, data } = b {
                let image = Image { media_type: core::mem::take(media_type), data: core::mem::take(data) };
                *b = Block::Text { text: image.placeholder() };
            }
        }
    }

    /// Ids of the tool calls in this message.
    pub fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }
}

/// Serde helpers for message content: one text block is a plain string, anything else an array
/// ([`read_content`] and [`write_content`] without serde).
pub mod content_serde {
    use super::*;

    pub fn serialize<S: Serializer>(blocks: &[Block], s: S) -> Result<S::Ok, S::Error> {
        match blocks {
            [Block::Text { text }] => s.serialize_str(text),
            _ => blocks.serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Block>, D::Error> {
        from_raw(d, read_content)
    }
}

/// A tool as the model is told about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolSpec<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// A JSON Schema object, as JSON text.
    pub input_schema: &'a str,
}

/// Whether the model may call tools in this request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must answer in text (used for the last round when the tool budget is spent).
    None,
}

/// Everything one model call needs, borrowed from the agent run.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec<'a>],
    pub tool_choice: ToolChoice,
    pub stream: bool,
    /// Where the request's stable prefix ends, for the provider's prompt cache.
    pub cache: Cache<'a>,
    /// The shape the answer must take; `None`: free text. Only the OpenAI wire carries it.
    pub format: Option<&'a Format>,
}

/// A structured answer a client asked for, as OpenAI's `response_format` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// Any JSON object.
    JsonObject,
    /// JSON following a schema.
    JsonSchema {
        name: String,
        description: Option<String>,
        /// A JSON Schema object, as JSON text.
        schema: Option<String>,
        strict: Option<bool>,
    },
}

/// What a request tells the provider's prompt cache. The default marks nothing and sends no
/// key: the request is as it was before caching.
///
/// A prompt cache reuses the work for a request's longest prefix seen before, so what stays the
/// same from call to call (tools, the stable part of the system prompt, earlier history) comes
/// first and what changes (time, channel, recent notes, the new message) after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cache<'a> {
    /// Put Anthropic `cache_control` breakpoints on the last tool, the stable system block and
    /// the last message of the history before this turn.
    pub mark: bool,
    /// Bytes at the start of `system` that stay the same from turn to turn; the rest changes.
    /// On a character boundary; 0 when nothing is known to be stable.
    pub system_stable: usize,
    /// Index in `messages` of the last message before this turn's person's message, if any.
    pub history_end: Option<usize>,
    /// OpenAI's `prompt_cache_key`: routes a session's calls to the same cache. Only for
    /// providers known to accept the field.
    pub key: Option<&'a str>,
}

impl Cache<'_> {
    /// `system` split into its stable part and the rest; all of it is "rest" when no stable
    /// length is known or it does not fall on a character boundary.
    pub fn split_system<'s>(&self, system: &'s str) -> (&'s str, &'s str) {
        match system.split_at_checked(self.system_stable) {
            Some(parts) if self.system_stable > 0 => parts,
            _ => ("", system),
        }
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    Refusal,
    /// A reason this version does not know, kept verbatim.
    Other(String),
}

impl StopReason {
    /// Maps Anthropic's `stop_reason` and OpenAI's `finish_reason` values.
    pub fn from_wire(s: &str) -> StopReason {
        match s {
            "end_turn" | "stop" => StopReason::EndTurn,
            "tool_use" | "tool_calls" | "function_call" => StopReason::ToolUse,
            "max_tokens" | "length" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            "refusal" | "content_filter" => StopReason::Refusal,
            other => StopReason::Other(other.to_owned()),
        }
    }
}

/// Token counts as the provider reported them, in Anthropic's convention: the three input
/// counts do not overlap, so each is priced once. (OpenAI's `prompt_tokens` includes its
/// `cached_tokens`; the decoder subtracts them.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens neither read from nor written to the prompt cache: full price.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache (Anthropic `cache_read_input_tokens`, OpenAI
    /// `prompt_tokens_details.cached_tokens`): the cheap ones.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic `cache_creation_input_tokens`;
    /// OpenAI-compatible servers cache without saying so, and report 0).
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Every input token, cached or not: what the request weighed.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.cache_read_tokens).saturating_add(self.cache_write_tokens)
    }

    /// Adds `other`'s counts (a turn sums its model calls).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(other.cache_write_tokens);
    }
}

/// A tool call whose arguments were not valid JSON. The call is kept in the reply with `{}` as
/// its input, so history stays well-formed; the agent answers it with an error instead of
/// running the tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError {
    pub tool_use_id: String,
    pub raw: String,
}

/// What the model answered: text and tool calls, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub content: Vec<Block>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    pub arg_errors: Vec<ArgError>,
}

impl Reply {
    pub fn into_message(self) -> Message {
        Message { role: Role::Assistant, content: self.content }
    }

    pub fn has_tool_use(&self) -> bool {
        self.content.iter().any(|b| matches!(b, Block::ToolUse { .. }))
    }
}

/// Progress while a reply streams in, for showing it live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update<'a> {
    /// More answer text.
    Text(&'a str),
    /// The model started a tool call.
    ToolUseStart { id: &'a str, name: &'a str },
    /// The call failed in a way worth retrying (`why`); it is made again in `wait_ms`.
    Retrying { why: &'a str, wait_ms: u64 },
}

/// Tool-call arguments that are not a JSON object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotAnObject;

/// Turns tool-call arguments text into a [`Json`] object. Empty text (what some local models
/// send for a call without arguments) is `{}`.
pub fn parse_tool_input(raw: &str) -> Result<Json, NotAnObject> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(Json::empty_object());
    }
    match Json::parse(trimmed) {
        Ok(j) if j.as_str().starts_with('{') => Ok(j),
        _ => Err(NotAnObject),
    }
}

/// Builds a [`Reply`]'s tool-use block from raw arguments, recording bad arguments.
pub(crate) fn tool_use_block(id: String, name: String, raw_args: &str, errors: &mut Vec<ArgError>) -> Block {
    let input = match parse_tool_input(raw_args) {
        Ok(j) => j,
        Err(NotAnObject) => {
            errors.push(ArgError { tool_use_id: id.clone(), raw: raw_args.to_owned() });
            Json::empty_object()
        }
    };
    Block::ToolUse { id, name, input }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Line {
        role: Role,
        #[serde(with = "content_serde")]
        content: Vec<Block>,
    }

    #[test]
    fn single_text_content_is_a_plain_string() {
        let line = Line { role: Role::User, content: alloc::vec![Block::text("hi \"you\"")] };
        let s = serde_json::to_string(&line).unwrap();
        assert_eq!(s, r#"{"role":"user","content":"hi \"you\""}"#);
        assert_eq!(serde_json::from_str::<Line>(&s).unwrap(), line);
    }

    #[test]
    fn block_content_round_trips_with_raw_input() {
        let line = Line {
            role: Role::Assistant,
            content: alloc::vec![
                Block::text("checking"),
                Block::ToolUse {
                    id: "t1".into(),
                    name: "get_current_time".into(),
                    input: Json::parse(r#"{"zone":"UTC"}"#).unwrap()
                },
            ],
        };
        let s = serde_json::to_string(&line).unwrap();
        assert!(s.contains(r#""input":{"zone":"UTC"}"#), "{s}");
        assert_eq!(serde_json::from_str::<Line>(&s).unwrap(), line);
        let err = Block::ToolResult {
            tool_use_id: "t1".into(),
            content: "boom".into(),
            images: Default::default(),
            is_error: true,
        };
        let s = serde_json::to_string(&err).unwrap();
        assert_eq!(s, r#"{"type":"tool_result","tool_use_id":"t1","content":"boom","is_error":true}"#);
        let ok = Block::ToolResult {
            tool_use_id: "t1".into(),
            content: "x".into(),
            images: Default::default(),
            is_error: false,
        };
        assert!(!serde_json::to_string(&ok).unwrap().contains("is_error"));
    }

    #[test]
    fn tool_input_parsing_accepts_empty_and_rejects_non_objects() {
        assert_eq!(parse_tool_input("").unwrap().as_str(), "{}");
        assert_eq!(parse_tool_input("  {\"a\":1} ").unwrap().as_str(), "{\"a\":1}");
        assert!(parse_tool_input("{\"a\":").is_err());
        assert!(parse_tool_input("[1]").is_err());
        assert!(parse_tool_input("\"s\"").is_err());
    }

    #[test]
    fn stop_reasons_map_from_both_vocabularies() {
        assert_eq!(StopReason::from_wire("tool_calls"), StopReason::ToolUse);
        assert_eq!(StopReason::from_wire("tool_use"), StopReason::ToolUse);
        assert_eq!(StopReason::from_wire("length"), StopReason::MaxTokens);
        assert_eq!(StopReason::from_wire("stop"), StopReason::EndTurn);
        assert_eq!(StopReason::from_wire("pause_turn"), StopReason::Other("pause_turn".into()));
    }

    #[test]
    fn a_block_stays_64_bytes_with_tool_images() {
        // The chip holds its history as blocks; images must not make every block larger.
        assert!(core::mem::size_of::<Block>() <= 64, "{}", core::mem::size_of::<Block>());
    }

    #[test]
    fn tool_images_round_trip_and_old_lines_still_load() {
        let with = Block::ToolResult {
            tool_use_id: "t1".into(),
            content: "shot".into(),
            images: alloc::vec![Image { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() }].into(),
            is_error: false,
        };
        let s = serde_json::to_string(&with).unwrap();
        assert_eq!(
            s,
            r#"{"type":"tool_result","tool_use_id":"t1","content":"shot","images":[{"media_type":"image/png","data":"iVBORw0KGgo="}]}"#
        );
        assert_eq!(serde_json::from_str::<Block>(&s).unwrap(), with);
        // A line written before tool results had images.
        let old: Block = serde_json::from_str(r#"{"type":"tool_result","tool_use_id":"t1","content":"x"}"#).unwrap();
        assert_eq!(old, Block::tool_result("t1", "x", false));
        assert!(!serde_json::to_string(&old).unwrap().contains("images"));
        // An image without its data is refused, not taken as empty.
        assert!(
            serde_json::from_str::<Block>(
                r#"{"type":"tool_result","tool_use_id":"t","content":"","images":[{"media_type":"image/png"}]}"#
            )
            .is_err()
        );
    }

    #[test]
    fn notes_stand_for_images_with_their_type_and_size() {
        let img = |n: usize| Image { media_type: "image/png".into(), data: "A".repeat(n) };
        assert_eq!(img(8).byte_len(), 6);
        assert_eq!(Image { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() }.byte_len(), 8);
        assert_eq!(img(8).placeholder(), "[image: image/png, 6 B]");
        assert_eq!(img(1640).placeholder(), "[image: image/png, 1.2 KiB]");
        assert_eq!(placeholder("image/jpeg", 5 * 1024 * 1024 + 512 * 1024), "[image: image/jpeg, 5.5 MiB]");

        let mut m = Message {
            role: Role::User,
            content: alloc::vec![
                Block::ToolResult {
                    tool_use_id: "a".into(),
                    content: "seen".into(),
                    images: alloc::vec![img(8), img(1640)].into(),
                    is_error: false
                },
                Block::ToolResult {
                    tool_use_id: "b".into(),
                    content: String::new(),
                    images: alloc::vec![img(4)].into(),
                    is_error: false
                },
                Block::Image { media_type: "image/jpeg".into(), data: "/9j/4A==".into() },
            ],
        };
        let mut text_only = m.clone();
        assert!(m.tool_images_to_notes());
        assert!(!m.tool_images_to_notes(), "nothing left to replace");
        assert_eq!(
            m.content[0],
            Block::tool_result("a", "seen\n[image: image/png, 6 B]\n[image: image/png, 1.2 KiB]", false)
        );
        assert_eq!(m.content[1], Block::tool_result("b", "[image: image/png, 3 B]", false));
        assert!(matches!(m.content[2], Block::Image { .. }), "a person's photo is not a tool's image");
        text_only.images_to_notes();
        assert_eq!(text_only.content[2], Block::text("[image: image/jpeg, 4 B]"));
        assert_eq!(text_only.content[0], m.content[0]);
    }

    #[test]
    fn a_tool_image_counts_for_its_cost_not_its_length() {
        let big = Image { media_type: "image/png".into(), data: "A".repeat(1 << 20) };
        let b = Block::ToolResult {
            tool_use_id: "t".into(),
            content: "x".into(),
            images: alloc::vec![big].into(),
            is_error: false,
        };
        assert!(b.approx_bytes() < IMAGE_COST + 64, "{}", b.approx_bytes());
        assert!(b.approx_bytes() > IMAGE_COST);
    }
}
