//! The response body: frames sent in order, with an optional pause between them and an
//! optional abrupt end.
//!
//! No task is spawned per response: the pauses are timers polled by hyper as it writes the
//! body, so when the client goes away (hyper notices EOF on a busy connection) or the server
//! shuts down (its runtime is dropped) the body is dropped with its connection and nothing is
//! left running.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

/// How a body ends once its frames are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Normally: the last chunk (or the full `Content-Length`) is sent.
    Clean,
    /// Abruptly: hyper closes the connection without finishing the message, so the client
    /// sees a body error rather than a short but clean body.
    Cut,
}

pub(crate) struct ReplyBody {
    frames: VecDeque<Bytes>,
    /// Frames made on demand after `frames`: for floods and endless streams, which would not
    /// fit in memory made up front.
    more: Option<Box<dyn Iterator<Item = Bytes> + Send + Sync>>,
    gap: Duration,
    pause: Option<Pin<Box<Sleep>>>,
    end: End,
    exact_len: Option<u64>,
    /// Whether hyper has had its chance to flush before a cut (see `poll_frame`).
    flushed: bool,
}

impl ReplyBody {
    /// A whole body, sent at once with a `Content-Length`.
    pub fn full(bytes: impl Into<Bytes>) -> ReplyBody {
        let bytes = bytes.into();
        let len = bytes.len() as u64;
        ReplyBody { exact_len: Some(len), ..ReplyBody::frames(vec![bytes], 0, End::Clean) }
    }

    /// A stream of events with `gap_ms` between them, sent chunked.
    pub fn events(frames: Vec<Bytes>, gap_ms: u64) -> ReplyBody {
        ReplyBody::frames(frames, gap_ms, End::Clean)
    }

    /// Sends `frames` (with `gap_ms` between them), then cuts the connection. The caller sets
    /// any `Content-Length` header it wants the client to expect.
    pub fn cut_after(frames: Vec<Bytes>, gap_ms: u64) -> ReplyBody {
        ReplyBody::frames(frames, gap_ms, End::Cut)
    }

    /// Frames made by `more` as hyper asks for them (with `gap_ms` between them), sent
    /// chunked; endless if `more` is.
    pub fn lazy(more: impl Iterator<Item = Bytes> + Send + Sync + 'static, gap_ms: u64) -> ReplyBody {
        ReplyBody { more: Some(Box::new(more)), ..ReplyBody::frames(Vec::new(), gap_ms, End::Clean) }
    }

    fn frames(frames: Vec<Bytes>, gap_ms: u64, end: End) -> ReplyBody {
        ReplyBody {
            more: None,
            frames: frames.into(),
            gap: Duration::from_millis(gap_ms),
            pause: None,
            end,
            exact_len: None,
            flushed: false,
        }
    }
}

/// The error a cut body ends with; hyper answers it by closing the connection.
#[derive(Debug)]
pub(crate) struct Cut;

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the script cut this response short")
    }
}

impl std::error::Error for Cut {}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Cut;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Cut>>> {
        let this = self.get_mut();
        if let Some(pause) = &mut this.pause {
            ready!(pause.as_mut().poll(cx));
            this.pause = None;
        }
        if this.frames.is_empty()
            && let Some(more) = &mut this.more
        {
            match more.next() {
                Some(frame) => this.frames.push_back(frame),
                None => this.more = None,
            }
        }
        if let Some(frame) = this.frames.pop_front() {
            if !this.gap.is_zero() && (!this.frames.is_empty() || this.more.is_some()) {
                this.pause = Some(Box::pin(tokio::time::sleep(this.gap)));
            }
            return Poll::Ready(Some(Ok(Frame::data(frame))));
        }
        match this.end {
            End::Clean => Poll::Ready(None),
            // hyper flushes its write buffer only when the body is pending, and drops the
            // connection at once on a body error. Pending once first, so the frames before the
            // cut reach the socket.
            End::Cut if !this.flushed => {
                this.flushed = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            End::Cut => Poll::Ready(Some(Err(Cut))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.end == End::Clean && self.frames.is_empty() && self.more.is_none() && self.pause.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.exact_len.map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
