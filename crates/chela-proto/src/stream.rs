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

/// Bounds on one streamed reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest single SSE event.
    pub max_event_bytes: usize,
    /// Largest reply (all text and tool arguments together).
    pub max_reply_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_event_bytes: 256 * 1024, max_reply_bytes: 1024 * 1024 }
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
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Sse(e) => write!(f, "{e}"),
            StreamError::Malformed(m) => write!(f, "malformed response: {m}"),
            StreamError::Api(e) => write!(f, "provider error {}: {}", e.kind, e.message),
            StreamError::Truncated => f.write_str("the response ended before it was complete"),
            StreamError::TooLarge { limit } => write!(f, "the reply is larger than {limit} bytes"),
        }
    }
}

impl core::error::Error for StreamError {}

impl From<sse::Error> for StreamError {
    fn from(e: sse::Error) -> StreamError {
        StreamError::Sse(e)
    }
}

/// Counts a reply's bytes against [`Limits::max_reply_bytes`].
#[derive(Debug)]
pub(crate) struct Budget {
    used: usize,
    max: usize,
}

impl Budget {
    pub(crate) fn new(limits: Limits) -> Budget {
        Budget { used: 0, max: limits.max_reply_bytes }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<(), StreamError> {
        self.used += n;
        if self.used > self.max {
            return Err(StreamError::TooLarge { limit: self.max });
        }
        Ok(())
    }
}

pub(crate) fn malformed(what: &str, e: &serde_json::Error) -> StreamError {
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
