//! Turning a streamed response body into a [`Reply`], whatever the wire format.
//!
//! [`Decoder`] owns an SSE parser and a format's [`Accumulate`] implementation. Feed it body
//! bytes with [`Decoder::handle_bytes`] as they arrive (updates for live display go to the
//! callback), then call [`Decoder::finish`] when the body ends.

use alloc::string::String;
use core::fmt;

use crate::chat::{Reply, Update};
use crate::error::ApiError;
use crate::sse;

/// Bounds on one reply, streamed or whole.
///
/// A hostile or broken server must stay a bounded cost: the reply bound counts every content
/// block (a fixed [`BLOCK_OVERHEAD`] each, on top of its text), so two million empty blocks
/// cost as much as two million bytes of text, and the block and tool-call counts have their own
/// caps. [`Limits::default`] is sized for the chip ([`Limits::CHIP`]); the host raises them
/// ([`Limits::HOST`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest single SSE event.
    pub max_event_bytes: usize,
    /// Largest reply: all text and tool arguments together, plus [`BLOCK_OVERHEAD`] per block.
    pub max_reply_bytes: usize,
    /// Most content blocks (text, tool calls, and kinds Chela skips) in one reply.
    pub max_blocks: usize,
    /// Most tool calls in one reply.
    pub max_tool_calls: usize,
}

/// What each content block costs against [`Limits::max_reply_bytes`], whatever its text: about
/// what a block takes in memory once decoded (its `String`s and enum tag).
pub const BLOCK_OVERHEAD: usize = 64;

impl Limits {
    /// For an ESP32-C3 (400 KiB of RAM): a 16 KiB event holds any real delta; 32 KiB of reply
    /// is a long answer (eight Telegram messages), and refusing a longer one must fit the turn's
    /// heap: the text's last growth holds the old and the new buffer at once, up to twice the
    /// bound (measured on the emulator: docs/BENCHMARKS.md, "The emulator turn"); 16 tool
    /// calls is twice what one step runs (`agent.max_calls_per_step`); 32 blocks leaves room for
    /// thinking and server-tool blocks around them.
    pub const CHIP: Limits =
        Limits { max_event_bytes: 16 * 1024, max_reply_bytes: 32 * 1024, max_blocks: 32, max_tool_calls: 16 };
    /// For a host with memory to spare: what real providers send, with a wide margin.
    pub const HOST: Limits =
        Limits { max_event_bytes: 256 * 1024, max_reply_bytes: 1024 * 1024, max_blocks: 256, max_tool_calls: 64 };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::CHIP
    }
}

/// Why a response could not be turned into a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamError {
    Sse(sse::Error),
    /// An event or body was not the JSON the format promises.
    Malformed(String),
    /// The provider reported an error in the stream.
    Api(ApiError),
    /// The body ended before the format's end marker.
    Truncated,
    /// The reply grew past [`Limits::max_reply_bytes`].
    TooLarge {
        limit: usize,
    },
    /// The reply has more content blocks or tool calls than [`Limits`] allows; `what` names
    /// which ("content blocks", "tool calls").
    TooMany {
        what: &'static str,
        limit: usize,
    },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Sse(e) => write!(f, "{e}"),
            StreamError::Malformed(m) => write!(f, "malformed response: {m}"),
            StreamError::Api(e) => write!(f, "provider error {}: {}", e.kind, e.message),
            StreamError::Truncated => f.write_str("the response ended before it was complete"),
            StreamError::TooLarge { limit } => write!(f, "the reply is larger than {limit} bytes"),
            StreamError::TooMany { what, limit } => write!(f, "the reply has more than {limit} {what}"),
        }
    }
}

impl core::error::Error for StreamError {}

impl From<sse::Error> for StreamError {
    fn from(e: sse::Error) -> StreamError {
        StreamError::Sse(e)
    }
}

/// Counts a reply's bytes, blocks and tool calls against its [`Limits`].
#[derive(Debug)]
pub(crate) struct Budget {
    used: usize,
    blocks: usize,
    calls: usize,
    limits: Limits,
}

impl Budget {
    pub(crate) fn new(limits: Limits) -> Budget {
        Budget { used: 0, blocks: 0, calls: 0, limits }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<(), StreamError> {
        self.used = self.used.saturating_add(n);
        if self.used > self.limits.max_reply_bytes {
            return Err(StreamError::TooLarge { limit: self.limits.max_reply_bytes });
        }
        Ok(())
    }

    /// Appends `piece` (already [`take`](Budget::take)n) to a block's text. Its capacity grows by
    /// doubling, as `String`'s does, but never past the reply bound unless the text itself does:
    /// an allocator without in-place growth (the chip's) holds the old and the new buffer at once
    /// while it copies, so a doubling past the bound would make refusing an endless reply cost
    /// up to three times the bound instead of two.
    pub(crate) fn push(&self, buf: &mut String, piece: &str) {
        let needed = buf.len() + piece.len();
        if needed > buf.capacity() {
            let grown = buf.capacity().saturating_mul(2).min(self.limits.max_reply_bytes);
            buf.reserve_exact(needed.max(grown) - buf.len());
        }
        buf.push_str(piece);
    }

    /// Counts one more content block (and one more tool call when `tool_call`).
    pub(crate) fn block(&mut self, tool_call: bool) -> Result<(), StreamError> {
        self.blocks += 1;
        if self.blocks > self.limits.max_blocks {
            return Err(StreamError::TooMany { what: "content blocks", limit: self.limits.max_blocks });
        }
        if tool_call {
            self.calls += 1;
            if self.calls > self.limits.max_tool_calls {
                return Err(StreamError::TooMany { what: "tool calls", limit: self.limits.max_tool_calls });
            }
        }
        self.take(BLOCK_OVERHEAD)
    }
}

pub(crate) fn malformed(what: &str, e: &dyn core::fmt::Display) -> StreamError {
    StreamError::Malformed(alloc::format!("{what}: {e}"))
}

/// A wire format's stream state: folds events into a reply.
pub trait Accumulate {
    /// Handles one SSE event, reporting progress through `on_update`.
    fn handle_event(&mut self, event: &sse::Event, on_update: &mut dyn FnMut(Update<'_>)) -> Result<(), StreamError>;
    /// The reply, once the body has ended.
    fn finish(self) -> Result<Reply, StreamError>;
}

/// SSE parsing plus a format's accumulator.
#[derive(Debug)]
pub struct Decoder<A> {
    sse: sse::Parser,
    acc: A,
}

impl<A: Accumulate> Decoder<A> {
    pub fn with(acc: A, limits: Limits) -> Decoder<A> {
        Decoder { sse: sse::Parser::new(limits.max_event_bytes), acc }
    }

    /// Feeds body bytes; any split is fine.
    pub fn handle_bytes(&mut self, bytes: &[u8], on_update: &mut dyn FnMut(Update<'_>)) -> Result<(), StreamError> {
        self.sse.handle_bytes(bytes);
        while let Some(ev) = self.sse.poll_event()? {
            self.acc.handle_event(&ev, on_update)?;
        }
        Ok(())
    }

    /// The reply, once the body has ended.
    pub fn finish(self) -> Result<Reply, StreamError> {
        self.acc.finish()
    }
}
