//! The network as the turn driver sees it: one HTTPS `POST` whose body the driver writes in
//! windows (or a `GET`) and whose answer it reads in pieces. The board implements it (TLS over WiFi on
//! the chip, a scripted server on the emulator).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use chela_core::exchange::{Head, NetFailure};

/// Why a `POST` did not complete.
#[derive(Debug)]
pub enum LinkError {
    /// The network failed; the core's exchange decides whether to retry.
    Net(NetFailure),
    /// The link itself is broken (a scripted peer that saw the wrong request): the run stops.
    Broken(String),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Net(NetFailure::Unreachable(s) | NetFailure::Transient(s) | NetFailure::Fatal(s)) => {
                f.write_str(s)
            }
            LinkError::Broken(s) => f.write_str(s),
        }
    }
}

/// Where a response goes as it arrives.
pub trait Answer {
    /// The status and the headers the exchange reads (`content-type`, `retry-after`).
    fn head(&mut self, status: u16, headers: &[(&str, &str)]);
    /// A piece of the body; `false` once no more is wanted (the answer is over or refused).
    fn body(&mut self, bytes: &[u8]) -> bool;
    /// The body ended.
    fn end(&mut self);
}

/// A whole answer kept in memory up to `limit` bytes; past it the exchange stops and `over` says so.
pub struct Collected {
    pub status: u16,
    pub body: Vec<u8>,
    pub over: bool,
    limit: usize,
}

impl Collected {
    pub fn up_to(limit: usize) -> Collected {
        Collected { status: 0, body: Vec::new(), over: false, limit }
    }
}

impl Answer for Collected {
    fn head(&mut self, status: u16, _: &[(&str, &str)]) {
        self.status = status;
    }

    fn body(&mut self, bytes: &[u8]) -> bool {
        if self.body.len() + bytes.len() > self.limit {
            self.over = true;
            return false;
        }
        self.body.extend_from_slice(bytes);
        true
    }

    fn end(&mut self) {}
}

/// Writes the body bytes from `offset` on into the buffer (at most one window; an empty
/// buffer means the body is over).
pub type BodyWriter<'a> = dyn FnMut(usize, &mut Vec<u8>) + 'a;

/// One HTTPS exchange at a time. See the module docs.
#[allow(async_fn_in_trait)] // used with concrete types only; no Send bound wanted on one core
pub trait Link {
    /// Sends `POST head.url` with `head.headers` and a `length`-byte body taken from `body`,
    /// then hands the response to `answer` until it stops wanting more or the body ends.
    async fn post(
        &mut self,
        head: &Head,
        length: usize,
        body: &mut BodyWriter<'_>,
        answer: &mut dyn Answer,
    ) -> Result<(), LinkError>;

    /// Sends `GET head.url` with `head.headers`, then hands the response to `answer` as
    /// [`post`](Link::post) does (`web_search` through Brave Search).
    async fn get(&mut self, head: &Head, answer: &mut dyn Answer) -> Result<(), LinkError>;

    /// Waits until `ms` (the board's `now_ms`) before a retry.
    async fn wait_until(&mut self, ms: u64) -> Result<(), LinkError>;
}
