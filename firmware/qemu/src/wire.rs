//! The other end of the wire: a scripted model server.
//!
//! On the chip the request leaves through a TLS socket and the answer comes back through it.
//! Here the bytes the driver "sends" land in a fixed receive buffer outside the heap (as the
//! peer's memory would be), each request is checked against the script (the URL, the headers,
//! that the body is exactly `Content-Length` bytes of valid JSON, and the pieces it must
//! contain), and the scripted answer goes back as the recorded SSE bytes of the real wire format,
//! in uneven pieces so SSE lines and UTF-8 split anywhere. It is the emulator's [`Link`].

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_chip::link::{Answer as Sink, BodyWriter, Link, LinkError};
use chela_core::exchange::Head;

use crate::clock::Clock;
use crate::heap;

/// Response pieces as the socket hands them out: uneven, so SSE lines and UTF-8 split anywhere.
const PIECES: [usize; 5] = [1, 7, 64, 300, 29];

/// Bytes of request body taken at a time: the chip's socket write buffer.
const WINDOW: usize = chela_chip::turn::WINDOW;

/// One scripted model call: what the request must carry and the answer to stream back.
#[derive(Debug)]
pub struct Call {
    pub url: &'static str,
    /// Header (name, value) pairs the request must have, exactly.
    pub headers: &'static [(&'static str, &'static str)],
    /// The response's content type: `text/event-stream` for a stream.
    pub content_type: &'static str,
    /// Pieces of JSON text the body must contain.
    pub body_has: &'static [&'static str],
    /// The response body.
    pub answer: Answer,
}

/// A response body.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// A recorded SSE stream.
    Recorded(&'static [u8]),
    /// A server that never stops: `head`, then `event` over and over, until `limit` bytes were
    /// sent (then the body ends, which the decoder must not have let it reach).
    Endless { head: &'static [u8], event: &'static [u8], limit: usize },
}

/// A response body being sent, piece by piece.
#[derive(Debug)]
pub struct Body {
    answer: Answer,
    pos: usize,
}

impl Body {
    pub fn new(answer: Answer) -> Body {
        Body { answer, pos: 0 }
    }

    /// The next piece, at most `n` bytes; `None` once the body is over.
    pub fn next_piece(&mut self, n: usize) -> Option<&'static [u8]> {
        let piece = match self.answer {
            Answer::Recorded(bytes) => &bytes[self.pos.min(bytes.len())..],
            Answer::Endless { limit, .. } if self.pos >= limit => &[],
            Answer::Endless { head, .. } if self.pos < head.len() => &head[self.pos..],
            Answer::Endless { head, event, .. } => &event[(self.pos - head.len()) % event.len()..],
        };
        let piece = &piece[..piece.len().min(n)];
        self.pos += piece.len();
        (!piece.is_empty()).then_some(piece)
    }
}

/// The scripted server. See the module docs.
pub struct Server {
    wire: &'static mut [u8],
    /// Bytes received for the current request.
    len: usize,
    expected_len: usize,
    script: &'static [Call],
    next: usize,
    /// Request bytes received over the whole script.
    pub received: usize,
    /// Largest single request body.
    pub largest: usize,
    clock: Clock,
}

impl Server {
    pub fn new(wire: &'static mut [u8], script: &'static [Call], clock: Clock) -> Server {
        Server { wire, len: 0, expected_len: 0, script, next: 0, received: 0, largest: 0, clock }
    }

    /// Gives the receive buffer back, for the next script.
    pub fn into_wire(self) -> &'static mut [u8] {
        self.wire
    }

    /// Calls of the script not made yet.
    pub fn calls_left(&self) -> usize {
        self.script.len() - self.next
    }

    fn current(&self) -> Result<&'static Call, String> {
        self.script.get(self.next).ok_or_else(|| format!("model call {} is not in the script", self.next + 1))
    }

    /// The request head arrived, with its `Content-Length`.
    pub fn handle_head(&mut self, head: &Head, content_length: usize) -> Result<(), String> {
        let call = self.current()?;
        let n = self.next + 1;
        if head.url != call.url {
            return Err(format!("model call {n}: POST {} (the script expects {})", head.url, call.url));
        }
        for (name, value) in call.headers {
            match head.headers.iter().find(|(h, _)| h.eq_ignore_ascii_case(name)) {
                Some((_, v)) if v == value => {}
                Some((_, v)) => return Err(format!("model call {n}: header {name} is {v:?}, expected {value:?}")),
                None => return Err(format!("model call {n}: header {name} is missing")),
            }
        }
        if content_length > self.wire.len() {
            return Err(format!(
                "model call {n}: a {content_length}-byte body, over the {}-byte buffer",
                self.wire.len()
            ));
        }
        self.len = 0;
        self.expected_len = content_length;
        Ok(())
    }

    /// A piece of the request body.
    pub fn handle_body(&mut self, bytes: &[u8]) -> Result<(), String> {
        let end = self.len + bytes.len();
        if end > self.expected_len {
            return Err(format!("model call {}: more body bytes than the Content-Length", self.next + 1));
        }
        self.wire[self.len..end].copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }

    /// The request is complete: checks it and returns the scripted answer.
    pub fn respond(&mut self) -> Result<(&'static str, Body), String> {
        let call = self.current()?;
        let n = self.next + 1;
        let body = &self.wire[..self.len];
        if self.len != self.expected_len {
            return Err(format!("model call {n}: {} body bytes, Content-Length said {}", self.len, self.expected_len));
        }
        // The peer's parsing is not the chip's memory: keep it out of the turn's peak.
        // A GET (Brave Search) has no body to check.
        let valid = match self.expected_len {
            0 => Ok(()),
            _ => heap::uncounted(|| serde_json::from_slice::<serde::de::IgnoredAny>(body).map(|_| ())),
        };
        if let Err(e) = valid {
            return Err(format!("model call {n}: the body is not valid JSON ({e}): {}", show(body)));
        }
        for piece in call.body_has {
            if !contains(body, piece.as_bytes()) {
                return Err(format!("model call {n}: the body lacks {piece}: {}", show(body)));
            }
        }
        self.received += self.len;
        self.largest = self.largest.max(self.len);
        self.next += 1;
        Ok((call.content_type, Body::new(call.answer)))
    }
}

impl Link for Server {
    async fn post(
        &mut self,
        head: &Head,
        length: usize,
        body: &mut BodyWriter<'_>,
        answer: &mut dyn Sink,
    ) -> Result<(), LinkError> {
        self.handle_head(head, length).map_err(LinkError::Broken)?;
        let mut buf = Vec::with_capacity(WINDOW);
        let mut sent = 0;
        while sent < length {
            buf.clear();
            body(sent, &mut buf);
            if buf.is_empty() {
                return Err(LinkError::Broken(format!("the body encoder stopped at byte {sent} of {length}")));
            }
            self.handle_body(&buf).map_err(LinkError::Broken)?;
            sent += buf.len();
        }
        drop(buf);
        self.answer(answer)
    }

    async fn get(&mut self, head: &Head, answer: &mut dyn Sink) -> Result<(), LinkError> {
        self.handle_head(head, 0).map_err(LinkError::Broken)?;
        self.answer(answer)
    }

    async fn wait_until(&mut self, ms: u64) -> Result<(), LinkError> {
        Err(LinkError::Broken(format!("the model call wants a retry at {ms} ms; the script has none")))
    }
}

impl Server {
    /// Streams the scripted answer to the request just received.
    fn answer(&mut self, answer: &mut dyn Sink) -> Result<(), LinkError> {
        let (content_type, mut reply) = self.respond().map_err(LinkError::Broken)?;
        self.clock.advance(350);
        answer.head(200, &[("content-type", content_type)]);
        for &n in PIECES.iter().cycle() {
            let Some(piece) = reply.next_piece(n) else {
                answer.end();
                break;
            };
            self.clock.advance(3);
            if !answer.body(piece) {
                break;
            }
        }
        Ok(())
    }
}

/// Runs `f` to its end on this single hart: the scripted server never waits, so the future
/// completes on its first poll.
pub fn block_on<T>(f: impl core::future::Future<Output = T>) -> Result<T, String> {
    let mut f = core::pin::pin!(f);
    let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        core::task::Poll::Ready(v) => Ok(v),
        core::task::Poll::Pending => Err("the turn waited on a server that never waits".into()),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// The body for an error message: its first 1,500 bytes.
fn show(body: &[u8]) -> &str {
    let cut = body.len().min(1500);
    match core::str::from_utf8(&body[..cut]) {
        Ok(s) => s,
        Err(e) => core::str::from_utf8(&body[..e.valid_up_to()]).unwrap_or(""),
    }
}
