//! One model call as a value you step: no socket, no clock.
//!
//! [`Exchange`] owns everything about a call to a provider that is not IO: the URL path and
//! headers per wire format (and which OpenAI dialect a server speaks), the retry policy with
//! backoff and jitter, the rule that an answer which already showed text is not retried, the
//! `retry-after` headers, turning a status and body into a typed [`ModelError`], choosing the
//! stream decoder, the idle and overall deadlines, and the reply bounds. The host driver (tokio
//! and hyper) and the firmware driver (embassy) do only the sending, the reading and the waiting.
//!
//! # Calling order
//!
//! ```text
//! let mut ex = Exchange::new(endpoint, options, now, seed);
//! loop {
//!     ex.start(now);                         // before every attempt, the first included
//!     if ex.wants_input() {
//!         send ex.head() and the body (Endpoint::write_body into any Sink);
//!         then, until !ex.wants_input():
//!             ex.handle_head(status, headers, now)      once the response head is in
//!             ex.handle_body(bytes, now, on_update)     for every piece of the body
//!             ex.handle_end(now, on_update)             when the body ended cleanly
//!             ex.handle_net_error(failure, now)         when the network failed
//!             ex.handle_timeout(now)                    at ex.poll_timeout(), if nothing came
//!     }
//!     match ex.poll_outcome() {
//!         Some(Outcome::Reply(r)) => done,
//!         Some(Outcome::Failed(e)) => tell the person (ModelError::explain),
//!         Some(Outcome::RetryAt(t)) => wait until t (or a cancel), then loop,
//!         None => a driver bug: the attempt is not over yet.
//!     }
//! }
//! ```
//!
//! Time is a plain monotonic count of milliseconds chosen by the driver (e.g. since the
//! process started); only differences matter. Cancelling is the driver dropping the exchange.

mod error;
#[cfg(test)]
mod tests;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use chela_proto::chat::{Block, Reply, Request, ToolSpec, Update};
use chela_proto::error::{ApiError, classify};
use chela_proto::json::Sink;
use chela_proto::stream::{Limits, StreamError};
use chela_proto::{anthropic, openai};

pub use error::{Context, ModelError};

use crate::agent::ModelCall;
use crate::retry::{Backoff, parse_retry_after};

/// The two wire formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Anthropic,
    OpenAi,
}

/// Where and how to call: the provider's address and the request's fixed parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub kind: Kind,
    /// Without a trailing slash: `https://api.anthropic.com`, `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// Empty for local servers that need none.
    pub api_key: String,
    pub model: String,
    pub max_tokens: u32,
    /// Ask for a streamed answer.
    pub stream: bool,
}

impl Endpoint {
    /// The full URL a request goes to.
    pub fn url(&self) -> String {
        let path = match self.kind {
            Kind::Anthropic => anthropic::PATH,
            Kind::OpenAi => openai::PATH,
        };
        format!("{}{path}", self.base_url)
    }

    /// OpenAI's own API takes `max_completion_tokens`; compatible servers take `max_tokens`.
    pub fn openai_dialect(&self) -> openai::Dialect {
        if self.base_url.starts_with("https://api.openai.com") {
            openai::Dialect::OPENAI
        } else {
            openai::Dialect::COMPATIBLE
        }
    }

    /// Encodes the request body for `call` into `sink` (a `String`, a `json::Counter` for the
    /// length, or a `json::Window` to send it in fixed pieces).
    pub fn write_body<S: Sink + ?Sized>(&self, call: &ModelCall<'_>, tools: &[ToolSpec<'_>], sink: &mut S) {
        let req = Request {
            model: &self.model,
            max_tokens: self.max_tokens,
            system: call.system,
            messages: call.messages,
            tools,
            tool_choice: call.tool_choice,
            stream: self.stream,
            cache: call.cache,
            format: call.format,
        };
        match self.kind {
            Kind::Anthropic => anthropic::write_request(&req, sink),
            Kind::OpenAi => openai::write_request_for(&req, self.openai_dialect(), sink),
        }
    }

    /// The request head: the URL and every header but `host`, `user-agent` and the length.
    /// The key is in it: show it only masked.
    pub fn head(&self) -> Head {
        let mut headers: Vec<(&'static str, String)> = Vec::with_capacity(4);
        headers.push(("content-type", "application/json".into()));
        if self.stream {
            headers.push(("accept", "text/event-stream".into()));
        }
        match self.kind {
            Kind::Anthropic => {
                headers.push(("anthropic-version", chela_proto::ANTHROPIC_VERSION.into()));
                if !self.api_key.is_empty() {
                    headers.push(("x-api-key", self.api_key.clone()));
                }
            }
            Kind::OpenAi => {
                if !self.api_key.is_empty() {
                    headers.push(("authorization", format!("Bearer {}", self.api_key)));
                }
            }
        }
        Head { url: self.url(), headers }
    }
}

/// A `POST` to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
}

/// How long and how large one call may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub backoff: Backoff,
    /// Longest silence: before the response head, and between body pieces.
    pub idle: Duration,
    /// The whole call, retries and waits included: a server that sends pings forever still ends.
    pub deadline: Duration,
    /// Bounds on the decoded reply.
    pub limits: Limits,
    /// Largest whole (not streamed) body read.
    pub max_body_bytes: usize,
    /// Largest error body read; the rest is not downloaded.
    pub max_error_bytes: usize,
}

impl Options {
    /// For the chip: its reply limits, and whole bodies no larger than a reply at that bound in
    /// its JSON envelope. Refusing a body at the bound must fit the turn's heap: the body's last
    /// growth holds the old and the new buffer at once (measured on the emulator:
    /// docs/BENCHMARKS.md, "The emulator turn"; at 128 KiB it exhausted a 112 KiB heap).
    pub const CHIP: Options = Options {
        backoff: Backoff {
            max_retries: 4,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        },
        idle: Duration::from_secs(120),
        deadline: Duration::from_secs(600),
        limits: Limits::CHIP,
        max_body_bytes: 40 * 1024,
        max_error_bytes: 4 * 1024,
    };
    /// For the host: wider reply limits and bodies.
    pub const HOST: Options =
        Options { limits: Limits::HOST, max_body_bytes: 8 * 1024 * 1024, max_error_bytes: 64 * 1024, ..Options::CHIP };
}

impl Default for Options {
    fn default() -> Options {
        Options::CHIP
    }
}

/// How a network failure bears on what to do next; the driver sorts its own errors into these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetFailure {
    /// The name did not resolve, or nothing accepted the connection: fail at once.
    Unreachable(String),
    /// Reset, dropped, timed out before the answer: worth retrying.
    Transient(String),
    /// Will fail the same way again (TLS, a bad URL, the guard).
    Fatal(String),
}

/// What one call came to.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Reply(Reply),
    /// Wait until this time, then [`Exchange::start`] the next attempt.
    RetryAt(u64),
    Failed(ModelError),
}

enum Decoder {
    Anthropic(anthropic::StreamDecoder),
    OpenAi(openai::StreamDecoder),
}

enum Phase {
    /// Between attempts (or before the first).
    Idle,
    /// Request sent; waiting for the response head.
    Head { since: u64 },
    /// Reading a streamed answer.
    Stream { decoder: Decoder, last: u64 },
    /// Reading a whole JSON answer.
    Whole { body: Vec<u8>, last: u64 },
    /// Reading an error body.
    Error { status: u16, retry_after: Option<Duration>, body: Vec<u8>, last: u64 },
    /// The attempt is over; [`Exchange::poll_outcome`] hands this out.
    Over(Outcome),
    /// Waiting to retry.
    Waiting { until: u64 },
    /// The outcome was taken.
    Finished,
}

/// One model call. See the module docs for the calling order.
pub struct Exchange {
    endpoint: Endpoint,
    options: Options,
    phase: Phase,
    /// Absolute time the whole call must end by.
    deadline: u64,
    retries: u32,
    /// Whether this attempt showed text to the person.
    shown: bool,
    seed: u64,
    last_failure: Option<ModelError>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Exchange {
    /// A call starting at `now`. `seed` spreads the retry jitter: give each call a different
    /// one (the driver has the randomness; the exchange has none).
    pub fn new(endpoint: Endpoint, options: Options, now: u64, seed: u64) -> Exchange {
        Exchange {
            endpoint,
            deadline: now.saturating_add(ms(options.deadline)),
            options,
            phase: Phase::Idle,
            retries: 0,
            shown: false,
            seed,
            last_failure: None,
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// What to send: the same for every attempt.
    pub fn head(&self) -> Head {
        self.endpoint.head()
    }

    /// Begins an attempt: the driver sends the request next. Past the deadline, the call is
    /// over instead (then [`Exchange::wants_input`] is false).
    pub fn start(&mut self, now: u64) {
        if !matches!(self.phase, Phase::Idle | Phase::Waiting { .. }) {
            return;
        }
        self.shown = false;
        self.phase = Phase::Head { since: now };
        self.check_deadline(now);
    }

    /// Whether the current attempt still reads the network.
    pub fn wants_input(&self) -> bool {
        matches!(self.phase, Phase::Head { .. } | Phase::Stream { .. } | Phase::Whole { .. } | Phase::Error { .. })
    }

    /// When to call [`Exchange::handle_timeout`] if nothing else happens first.
    pub fn poll_timeout(&self) -> Option<u64> {
        let idle = ms(self.options.idle);
        let quiet_since = match &self.phase {
            Phase::Head { since } => *since,
            Phase::Stream { last, .. } | Phase::Whole { last, .. } | Phase::Error { last, .. } => *last,
            Phase::Waiting { until } => return Some(*until),
            Phase::Idle | Phase::Over(_) | Phase::Finished => return None,
        };
        Some(quiet_since.saturating_add(idle).min(self.deadline))
    }

    /// The response head arrived. `headers` are (lower- or any-case name, value) pairs.
    pub fn handle_head(&mut self, status: u16, headers: &[(&str, &str)], now: u64) {
        if !matches!(self.phase, Phase::Head { .. }) {
            return;
        }
        let header = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v);
        if status != 200 {
            let retry_after = parse_retry_after(header("retry-after"), header("retry-after-ms"));
            self.phase = Phase::Error { status, retry_after, body: Vec::new(), last: now };
            return;
        }
        let sse = header("content-type").is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        self.phase = if sse {
            let limits = self.options.limits;
            let decoder = match self.endpoint.kind {
                Kind::Anthropic => Decoder::Anthropic(anthropic::StreamDecoder::new(limits)),
                Kind::OpenAi => Decoder::OpenAi(openai::StreamDecoder::new(limits)),
            };
            Phase::Stream { decoder, last: now }
        } else {
            // Some compatible servers ignore `stream: true`; a whole JSON body is fine too. Its
            // buffer is taken at once up to 64 KiB, which on the chip is the whole bound: growing
            // it by doubling would leave the freed smaller buffers as holes too small for the next
            // one, and a body at the bound would not find room in the chip's heap.
            let body = Vec::with_capacity(self.options.max_body_bytes.min(64 * 1024));
            Phase::Whole { body, last: now }
        };
    }

    /// A piece of the body. Text for live display goes to `on_update`. The work done is
    /// proportional to `bytes`, so a driver that yields between pieces stays responsive.
    pub fn handle_body(&mut self, bytes: &[u8], now: u64, on_update: &mut dyn FnMut(Update<'_>)) {
        let shown = &mut self.shown;
        let failed = match &mut self.phase {
            Phase::Stream { decoder, last } => {
                *last = now;
                let mut track = |u: Update<'_>| {
                    // Only text reaches the person; a tool call that started is not shown yet.
                    *shown |= matches!(u, Update::Text(_));
                    on_update(u);
                };
                let r = match decoder {
                    Decoder::Anthropic(d) => d.handle_bytes(bytes, &mut track),
                    Decoder::OpenAi(d) => d.handle_bytes(bytes, &mut track),
                };
                r.err().map(ModelError::from_stream)
            }
            Phase::Whole { body, last } => {
                *last = now;
                let max = self.options.max_body_bytes;
                if body.len() + bytes.len() > max {
                    Some(ModelError::TooLarge(format!("the response body is larger than {max} bytes")))
                } else {
                    // Past the first buffer (the host only): doubling, but never past the bound.
                    let needed = body.len() + bytes.len();
                    if needed > body.capacity() {
                        body.reserve_exact(needed.max(body.capacity().saturating_mul(2).min(max)) - body.len());
                    }
                    body.extend_from_slice(bytes);
                    None
                }
            }
            Phase::Error { body, last, .. } => {
                *last = now;
                let room = self.options.max_error_bytes - body.len();
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
                // Enough of it to explain; the rest is not worth downloading.
                if body.len() == self.options.max_error_bytes {
                    self.finish_error(now);
                }
                None
            }
            _ => None,
        };
        if let Some(e) = failed {
            self.fail(e, now);
        } else {
            self.check_deadline(now);
        }
    }

    /// The body ended cleanly. The text of a whole (not streamed) reply goes to `on_update`
    /// now, as it would have streamed.
    pub fn handle_end(&mut self, now: u64, on_update: &mut dyn FnMut(Update<'_>)) {
        match core::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Stream { decoder, .. } => {
                let r = match decoder {
                    Decoder::Anthropic(d) => d.finish(),
                    Decoder::OpenAi(d) => d.finish(),
                };
                match r {
                    Ok(reply) => self.phase = Phase::Over(Outcome::Reply(reply)),
                    Err(e) => self.fail(ModelError::from_stream(e), now),
                }
            }
            Phase::Whole { body, .. } => {
                let limits = self.options.limits;
                let r = match self.endpoint.kind {
                    Kind::Anthropic => anthropic::parse_response_within(&body, limits),
                    Kind::OpenAi => openai::parse_response_within(&body, limits),
                };
                match r {
                    Ok(reply) => {
                        for text in Exchange::reply_text(&reply) {
                            on_update(Update::Text(text));
                        }
                        self.phase = Phase::Over(Outcome::Reply(reply));
                    }
                    Err(e) => self.fail(ModelError::from_stream(e), now),
                }
            }
            phase @ Phase::Error { .. } => {
                self.phase = phase;
                self.finish_error(now);
            }
            other => self.phase = other,
        }
    }

    /// The text blocks of a reply.
    pub fn reply_text(reply: &Reply) -> impl Iterator<Item = &str> {
        reply.content.iter().filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
    }

    /// The network failed during the attempt.
    pub fn handle_net_error(&mut self, failure: NetFailure, now: u64) {
        if !self.wants_input() {
            return;
        }
        match failure {
            NetFailure::Unreachable(reason) => {
                self.fail_final(ModelError::Unreachable { url: self.endpoint.url(), reason });
            }
            // Retried unless text was shown (see `fail`).
            NetFailure::Transient(reason) => self.fail(ModelError::Network { reason, retries: 0 }, now),
            NetFailure::Fatal(reason) => self.fail_final(ModelError::Network { reason, retries: 0 }),
        }
    }

    /// Time passed: fails the attempt past its idle gap, or the call past its deadline.
    pub fn handle_timeout(&mut self, now: u64) {
        if self.check_deadline(now) {
            return;
        }
        let idle = self.options.idle;
        let quiet = match &self.phase {
            Phase::Head { since } => Some((*since, true)),
            Phase::Stream { last, .. } | Phase::Whole { last, .. } | Phase::Error { last, .. } => Some((*last, false)),
            _ => None,
        };
        if let Some((since, before_answer)) = quiet
            && now.saturating_sub(since) >= ms(idle)
        {
            let secs = idle.as_secs();
            if before_answer {
                self.fail(ModelError::Network { reason: format!("no answer within {secs} s"), retries: 0 }, now);
            } else {
                let e = ModelError::Network {
                    reason: format!("the server stopped sending the response for {secs} s (idle timeout)"),
                    retries: 0,
                };
                self.fail_final(e);
            }
        }
    }

    /// How the attempt ended, once it has. `None` while it is still reading.
    pub fn poll_outcome(&mut self) -> Option<Outcome> {
        if !matches!(self.phase, Phase::Over(_)) {
            return None;
        }
        match core::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Over(Outcome::RetryAt(t)) => {
                self.phase = Phase::Waiting { until: t };
                Some(Outcome::RetryAt(t))
            }
            Phase::Over(o) => Some(o),
            _ => None,
        }
    }

    /// What failed the attempt that a [`Outcome::RetryAt`] follows, for the log.
    pub fn last_failure(&self) -> Option<&ModelError> {
        self.last_failure.as_ref()
    }

    /// Retries made so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Past the deadline, ends the call; says whether it did.
    fn check_deadline(&mut self, now: u64) -> bool {
        if now < self.deadline || !self.wants_input() {
            return false;
        }
        self.fail_final(ModelError::Timeout { after: self.options.deadline });
        true
    }

    fn finish_error(&mut self, now: u64) {
        let Phase::Error { status, retry_after, body, .. } = core::mem::replace(&mut self.phase, Phase::Finished)
        else {
            return;
        };
        let api = ApiError::parse(&body);
        let class = classify(status, api.as_ref());
        let message = match api {
            Some(a) if !a.message.is_empty() => a.message,
            _ => crate::text::prefix(String::from_utf8_lossy(&body).trim(), 300).to_string(),
        };
        self.fail(ModelError::from_class(class, Some(status), message, retry_after), now);
    }

    /// Ends the attempt with `e`: a retry when it is worth one and time allows, else the call.
    fn fail(&mut self, e: ModelError, now: u64) {
        let wait = if e.is_transient() && !self.shown {
            let jitter = unit(self.seed, self.retries);
            self.options.backoff.delay(self.retries, e.retry_after(), jitter)
        } else {
            None
        };
        match wait.map(|d| now.saturating_add(ms(d))) {
            // A retry that would start past the deadline is not worth waiting for.
            Some(t) if t < self.deadline => {
                self.retries += 1;
                self.last_failure = Some(e);
                self.phase = Phase::Over(Outcome::RetryAt(t));
            }
            _ => self.fail_final(e),
        }
    }

    fn fail_final(&mut self, e: ModelError) {
        let e = e.settle(self.retries, self.shown);
        self.phase = Phase::Over(Outcome::Failed(e));
    }
}

/// A number in [0, 1) from `seed` and `n`: splitmix64, so nearby seeds spread apart.
fn unit(seed: u64, n: u32) -> f64 {
    let mut z = seed.wrapping_add(u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // The top 53 bits fill an f64 mantissa exactly.
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl From<StreamError> for ModelError {
    fn from(e: StreamError) -> ModelError {
        ModelError::from_stream(e)
    }
}
