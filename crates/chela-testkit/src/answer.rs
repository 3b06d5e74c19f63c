//! What the fake model says, before a wire format dresses it: text and tool calls, plus the
//! small helpers both formats share (ids, token estimates, splitting text into stream pieces).

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::script::ToolCall;

/// A model answer in neither wire format.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Answer {
    /// Text before any tool calls; `None` means no text block at all.
    pub text: Option<String>,
    pub calls: Vec<ToolCall>,
}

impl Answer {
    pub fn text(text: impl Into<String>) -> Answer {
        Answer { text: Some(text.into()), calls: Vec::new() }
    }

    /// A rough, deterministic output token count: about four bytes a token, as a real
    /// tokenizer gives for English.
    pub fn output_tokens(&self) -> u64 {
        let text = self.text.as_ref().map_or(0, String::len);
        let calls: usize = self.calls.iter().map(|c| c.name.len() + c.input.to_string().len()).sum();
        tokens(text + calls)
    }
}

/// Why the fake answers with an error, in neither wire format; each format renders it as its
/// vendor documents.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Failure {
    /// A scripted error status.
    Status(u16),
    ContextTooLong,
    /// The body is over the size limit.
    TooLarge,
    NotFound {
        method: String,
        path: String,
    },
    MethodNotAllowed {
        method: String,
        path: String,
    },
    /// The body is not a request the API accepts; the message says why.
    BadRequest(String),
    /// No key where one is expected.
    NoKey,
    WrongKey,
    /// Anthropic only: the `anthropic-version` header is missing.
    NoVersion,
}

/// What a response echoes or depends on from its request.
#[derive(Clone, Debug)]
pub(crate) struct Asked {
    pub model: String,
    pub stream: bool,
    /// OpenAI's `stream_options.include_usage`.
    pub include_usage: bool,
    pub input_tokens: u64,
}

/// The input token estimate for a request body of `len` bytes.
pub(crate) fn tokens(len: usize) -> u64 {
    (len as u64).div_ceil(4).max(1)
}

/// Ids for messages and tool calls, unique within one server.
#[derive(Debug, Default)]
pub(crate) struct Ids(AtomicU64);

impl Ids {
    /// `prefix` then a zero-padded counter of `width` digits, e.g. `toolu_01000…0007`.
    pub fn next(&self, prefix: &str, width: usize) -> String {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{prefix}{n:0width$}")
    }
}

/// Longest streamed piece, in chars. Real streams send a few tokens per delta; long texts
/// therefore become many events, which is what a client must cope with.
const MAX_PIECE_CHARS: usize = 24;

/// Splits `s` into several pieces on char boundaries: at least three when it has three
/// chars, none of them longer than [`MAX_PIECE_CHARS`]. Empty text gives no pieces.
pub(crate) fn pieces(s: &str) -> Vec<&str> {
    let chars = s.chars().count();
    let per = chars.div_ceil(3).clamp(1, MAX_PIECE_CHARS);
    let mut out = Vec::with_capacity(chars.div_ceil(per));
    let mut start = 0;
    let mut count = 0;
    for (i, _) in s.char_indices() {
        if count == per {
            out.push(&s[start..i]);
            start = i;
            count = 0;
        }
        count += 1;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// The demo's tool call input, and what scripted calls default to.
pub(crate) fn empty_input() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Seconds since the Unix epoch, for OpenAI's `created`.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// An SSE event with a name (Anthropic's style).
pub(crate) fn named_event(name: &str, data: &Value) -> bytes::Bytes {
    bytes::Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// An SSE event with data only (OpenAI's style).
pub(crate) fn data_event(data: &str) -> bytes::Bytes {
    bytes::Bytes::from(format!("data: {data}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_rejoin_to_the_text_and_are_several() {
        for s in ["Hello, world!", "abc", "héllo wörld ✓ ok", &"long text ".repeat(40)] {
            let p = pieces(s);
            assert_eq!(p.concat(), s);
            assert!(p.len() >= 3, "{s:?} gave {p:?}");
            assert!(p.iter().all(|x| !x.is_empty() && x.chars().count() <= MAX_PIECE_CHARS));
        }
        assert_eq!(pieces("{}"), vec!["{", "}"]);
        assert!(pieces("").is_empty());
    }

    #[test]
    fn ids_are_unique_and_padded() {
        let ids = Ids::default();
        assert_eq!(ids.next("toolu_01", 4), "toolu_010001");
        assert_eq!(ids.next("call_", 4), "call_0002");
    }
}
