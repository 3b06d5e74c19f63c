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

/// Who said a message. Tool results travel in `user` messages, as Anthropic has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct Json(Box<RawValue>);

impl Json {
    /// Parses `text`; it must be exactly one JSON value.
    pub fn parse(text: &str) -> Result<Json, serde_json::Error> {
        RawValue::from_string(text.to_owned()).map(Json)
    }

    /// `{}`.
    pub fn empty_object() -> Json {
        // "{}" is valid JSON.
        Json(RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| unreachable_json()))
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

#[cold]
fn unreachable_json() -> Box<RawValue> {
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
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        Box::<RawValue>::deserialize(d).map(Json)
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
    /// What a tool returned, answering the `ToolUse` with the same id.
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
    },
}

// Deserialised through a flat struct: serde buffers internally tagged enums, and a buffered
// `RawValue` (the tool input) cannot be recovered.
#[derive(Deserialize)]
struct BlockRepr {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    media_type: Option<String>,
    data: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Json>,
    tool_use_id: Option<String>,
    content: Option<String>,
    #[serde(default)]
    is_error: bool,
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Block, D::Error> {
        use serde::de::Error;
        let r = BlockRepr::deserialize(d)?;
        let need = |v: Option<String>, field: &'static str| v.ok_or_else(|| D::Error::missing_field(field));
        Ok(match r.kind.as_str() {
            "text" => Block::Text { text: need(r.text, "text")? },
            "image" => Block::Image { media_type: need(r.media_type, "media_type")?, data: need(r.data, "data")? },
            "tool_use" => Block::ToolUse {
                id: need(r.id, "id")?,
                name: need(r.name, "name")?,
                input: r.input.ok_or_else(|| D::Error::missing_field("input"))?,
            },
            "tool_result" => Block::ToolResult {
                tool_use_id: need(r.tool_use_id, "tool_use_id")?,
                content: need(r.content, "content")?,
                is_error: r.is_error,
            },
            other => {
                return Err(D::Error::unknown_variant(other, &["text", "image", "tool_use", "tool_result"]));
            }
        })
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
                Block::ToolResult { tool_use_id, content, .. } => tool_use_id.len() + content.len(),
            }
    }
}

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

    /// Ids of the tool calls in this message.
    pub fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }
}

/// Serde helpers for message content: one text block is a plain string, anything else an array.
pub mod content_serde {
    use super::*;

    use serde::de::{SeqAccess, Visitor};

    struct ContentVisitor;

    impl<'de> Visitor<'de> for ContentVisitor {
        type Value = Vec<Block>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or an array of content blocks")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Vec<Block>, E> {
            Ok(alloc::vec![Block::text(v)])
        }

        fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Vec<Block>, E> {
            Ok(alloc::vec![Block::Text { text: v }])
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Block>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(1).min(64));
            while let Some(b) = seq.next_element::<Block>()? {
                out.push(b);
            }
            Ok(out)
        }
    }

    pub fn serialize<S: Serializer>(blocks: &[Block], s: S) -> Result<S::Ok, S::Error> {
        match blocks {
            [Block::Text { text }] => s.serialize_str(text),
            _ => blocks.serialize(s),
        }
    }

    // Untagged enums buffer their input, which would lose tool inputs; a visitor does not.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Block>, D::Error> {
        d.deserialize_any(ContentVisitor)
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

/// Token counts as the provider reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
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
        let err = Block::ToolResult { tool_use_id: "t1".into(), content: "boom".into(), is_error: true };
        let s = serde_json::to_string(&err).unwrap();
        assert_eq!(s, r#"{"type":"tool_result","tool_use_id":"t1","content":"boom","is_error":true}"#);
        let ok = Block::ToolResult { tool_use_id: "t1".into(), content: "x".into(), is_error: false };
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
}
