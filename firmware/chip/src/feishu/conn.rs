//! One long connection, without IO: the WebSocket handshake's request and its answer checked,
//! then bytes in, frames and turns out.
//!
//! Every data frame is acknowledged (parts, unknown types and refused senders too), as the
//! official SDKs do: an unacknowledged frame comes again. A ping control frame goes out every
//! `PingInterval`; the server's pong may carry a new `ClientConfig`. A connection the server has
//! not spoken on for three ping intervals is dead and closed. Bounded: one WebSocket message and
//! one frame by [`MAX_FRAME_BYTES`], events split in parts by [`PARTS`], remembered event ids by
//! [`SEEN`].

use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::feishu::event::{Envelope, parse_envelope};
use chela_proto::feishu::frame::{Frame, METHOD_CONTROL, METHOD_DATA};
use chela_proto::feishu::parts::{PartLimits, Reassembler};
use chela_proto::websocket::{self, Decoder, Message, Role};

use super::{Access, ClientConfig};

/// Largest WebSocket message (one frame) read: a text event is one to three kilobytes, and the
/// chip takes messages of at most 4 KiB of text (whose JSON, escaped twice, fits here).
pub const MAX_FRAME_BYTES: usize = 12 * 1024;
/// The most heap the handling of one frame takes at its peak (the decoder's message, the frame,
/// the event's strings, the ack): a few copies of a frame. Held by `tests/feishu.rs`
/// (`the_heap_an_event_takes_is_bounded_and_measured`: 59,867 B for the largest frame); the
/// firmware leaves this much room before it connects.
pub const PEAK_HEAP_BYTES: usize = 5 * MAX_FRAME_BYTES;
/// Events split in parts: a few parts, one event's worth of bytes, two events at once.
pub const PARTS: PartLimits = PartLimits { max_parts: 8, max_bytes: MAX_FRAME_BYTES, max_messages: 2, ttl_ms: 5_000 };
/// Event ids remembered, so an event Feishu sends again is not answered twice.
pub const SEEN: usize = 16;
/// Largest handshake answer head.
pub const MAX_HEAD_BYTES: usize = 4 * 1024;
/// Silence (in ping intervals) after which the connection is taken for dead.
const DEAD_AFTER_PINGS: u64 = 3;

/// A `ws://` or `wss://` URL as the endpoint hands it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsUrl {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// The path with its query, as the request line carries it.
    pub path: String,
    /// The `service_id` of the query, which pings carry.
    pub service: i32,
}

/// Reads the endpoint's URL.
pub fn parse_url(raw: &str) -> Result<WsUrl, String> {
    let (tls, rest) = match (raw.strip_prefix("wss://"), raw.strip_prefix("ws://")) {
        (Some(r), _) => (true, r),
        (None, Some(r)) => (false, r),
        _ => return Err("Feishu handed out a long-connection URL that is not ws:// or wss://".into()),
    };
    let bad = || String::from("Feishu's long-connection URL is not valid");
    if raw.len() > 1024 || raw.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(bad());
    }
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad())?),
        None => (authority, if tls { 443 } else { 80 }),
    };
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-') {
        return Err(bad());
    }
    let path = match path {
        "" => String::from("/"),
        p if p.starts_with('?') => alloc::format!("/{p}"),
        p => String::from(p),
    };
    let query = path.split_once('?').map_or("", |(_, q)| q);
    let service = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("service_id="))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| String::from("Feishu's long-connection URL has no service_id"))?;
    Ok(WsUrl { tls, host: host.into(), port, path, service })
}

/// The opening handshake's request for `url` with the client's `key` (16 random bytes, base64).
pub fn handshake_request(url: &WsUrl, key: &str) -> String {
    let default = if url.tls { 443 } else { 80 };
    let host = if url.port == default { url.host.clone() } else { alloc::format!("{}:{}", url.host, url.port) };
    alloc::format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
        url.path
    )
}

/// Checks the handshake answer read so far: `Ok(None)` while its head is incomplete,
/// `Ok(Some(n))` once it is a good `101` whose head is `n` bytes long (what follows is frames).
pub fn handshake_answer(buf: &[u8], key: &str) -> Result<Option<usize>, String> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4) else {
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(alloc::format!("Feishu's WebSocket handshake answer is over {MAX_HEAD_BYTES} bytes"));
        }
        return Ok(None);
    };
    let head = core::str::from_utf8(&buf[..end]).map_err(|_| String::from("Feishu's handshake answer is not text"))?;
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).unwrap_or("");
    let header = |name: &str| {
        head.split("\r\n")
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    };
    if status != "101" {
        // Feishu says why in `handshake-msg` (an expired URL, too many connections).
        let why = header("handshake-msg").map(|m| chela_core::text::prefix(m, 200)).unwrap_or("no reason given");
        return Err(alloc::format!("Feishu refused the long connection ({status}: {why})"));
    }
    if header("sec-websocket-accept") != Some(crate::gateway::accept_key(key).as_str()) {
        return Err("the long connection's server did not complete the WebSocket handshake properly".into());
    }
    Ok(Some(end))
}

/// One message to run a turn for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    pub sender: String,
    pub chat_id: String,
    pub text: String,
    /// Sent in the sender's direct chat with the bot (`chat_type` `p2p`), not a group.
    pub direct: bool,
}

/// What the board does after [`Conn::feed`] or [`Conn::poll`].
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Write these bytes (a WebSocket frame).
    Send(Vec<u8>),
    /// Run a turn and send its reply to the chat (through the API, not this socket).
    Turn(Incoming),
    /// Dropped, with why (for the console): garbage, a refused sender, a duplicate.
    Dropped(String),
    /// Close the socket and reconnect later, with why.
    Close(String),
}

/// One open long connection.
pub struct Conn {
    decoder: Decoder,
    parts: Reassembler,
    seen: Vec<String>,
    service: i32,
    config: ClientConfig,
    next_ping_ms: u64,
    heard_ms: u64,
    mask: u64,
    closed: bool,
}

impl Conn {
    /// After the handshake: `service` from the URL, `config` from the endpoint, `random` seeds
    /// the masks a client puts on its frames.
    pub fn new(service: i32, config: ClientConfig, now_ms: u64, random: u64) -> Conn {
        Conn {
            decoder: Decoder::new(Role::Client, MAX_FRAME_BYTES),
            parts: Reassembler::new(PARTS),
            seen: Vec::with_capacity(SEEN),
            service,
            config,
            // The first ping goes at once, as the SDKs send it: its pong brings the config.
            next_ping_ms: now_ms,
            heard_ms: now_ms,
            mask: random | 1,
            closed: false,
        }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// When [`poll`](Conn::poll) next has something to do.
    pub fn next_ping_ms(&self) -> u64 {
        self.next_ping_ms
    }

    /// Bytes held: the decoder's message and unfinished parts.
    pub fn held(&self) -> usize {
        self.decoder.held() + self.parts.held()
    }

    fn frame(&mut self, message: &Message) -> Vec<u8> {
        // xorshift: masks need not be secret from the server, only unpredictable to scripts in
        // between (RFC 6455 §10.3), and a new one per frame.
        self.mask ^= self.mask << 13;
        self.mask ^= self.mask >> 7;
        self.mask ^= self.mask << 17;
        let mut out = Vec::new();
        websocket::encode(message, Some((self.mask as u32).to_le_bytes()), &mut out);
        out
    }

    /// A ping when one is due, or a close when the server has been silent too long.
    pub fn poll(&mut self, now_ms: u64) -> Option<Action> {
        if self.closed {
            return None;
        }
        let ping_ms = self.config.ping_ms();
        if now_ms.saturating_sub(self.heard_ms) >= DEAD_AFTER_PINGS * ping_ms {
            self.closed = true;
            return Some(Action::Close(alloc::format!(
                "Feishu's long connection was silent for {} s",
                now_ms.saturating_sub(self.heard_ms) / 1000
            )));
        }
        if now_ms < self.next_ping_ms {
            return None;
        }
        self.next_ping_ms = now_ms + ping_ms;
        let bytes = Frame::ping(self.service).to_bytes();
        Some(Action::Send(self.frame(&Message::Binary(bytes))))
    }

    /// Takes bytes read from the socket; what they call for goes to `out`, in order.
    pub fn feed(&mut self, bytes: &[u8], now_ms: u64, access: &Access, out: &mut Vec<Action>) {
        if self.closed {
            return;
        }
        self.decoder.handle_bytes(bytes);
        loop {
            let message = match self.decoder.poll_message() {
                Ok(Some(m)) => m,
                Ok(None) => return,
                Err(e) => {
                    // The stream is unusable past a bad frame: close, reconnect.
                    self.closed = true;
                    return out.push(Action::Close(alloc::format!("{e}")));
                }
            };
            self.heard_ms = now_ms;
            match message {
                Message::Binary(b) => self.on_frame(b, now_ms, access, out),
                Message::Ping(p) => {
                    let pong = self.frame(&Message::Pong(p));
                    out.push(Action::Send(pong));
                }
                Message::Pong(_) => {}
                Message::Text(_) => out.push(Action::Dropped("a text message on the long connection".into())),
                Message::Close(code, _) => {
                    self.closed = true;
                    let close = self.frame(&Message::Close(code, String::new()));
                    out.push(Action::Send(close));
                    return out.push(Action::Close(alloc::format!("Feishu closed the long connection ({code})")));
                }
            }
        }
    }

    fn on_frame(&mut self, bytes: Vec<u8>, now_ms: u64, access: &Access, out: &mut Vec<Action>) {
        let frame = Frame::decode(&bytes, MAX_FRAME_BYTES);
        // The message's bytes go before the event is read: one copy of a large frame fewer.
        drop(bytes);
        let frame = match frame {
            Ok(f) => f,
            Err(e) => return out.push(Action::Dropped(alloc::format!("{e}"))),
        };
        match frame.method {
            METHOD_CONTROL => {
                if frame.header("type") == Some("pong") && !frame.payload.is_empty() {
                    self.config.update_from(&frame.payload);
                }
            }
            METHOD_DATA => {
                // Acknowledged first, whatever it holds: the turn it may start takes seconds.
                let ack = frame.ack(0).to_bytes();
                let ack = self.frame(&Message::Binary(ack));
                out.push(Action::Send(ack));
                if frame.header("type") != Some("event") {
                    return;
                }
                let id = frame.header("message_id").unwrap_or_default();
                let sum = frame.header_int("sum").unwrap_or(1);
                let seq = frame.header_int("seq").unwrap_or(0);
                if sum <= 1 && seq == 0 {
                    // Whole already (the usual case): not copied into the joiner.
                    return self.on_event(frame.payload, access, out);
                }
                match self.parts.handle_part(id, sum, seq, &frame.payload, now_ms) {
                    Ok(Some(payload)) => self.on_event(payload, access, out),
                    Ok(None) => {}
                    Err(e) => out.push(Action::Dropped(alloc::format!("{e}"))),
                }
            }
            m => out.push(Action::Dropped(alloc::format!("a frame of method {m}"))),
        }
    }

    fn on_event(&mut self, payload: Vec<u8>, access: &Access, out: &mut Vec<Action>) {
        let event = parse_envelope(&payload);
        // Gone before the text is made from the event: one copy of a large event fewer.
        drop(payload);
        let m = match event {
            Ok(Envelope::Message(m)) => m,
            Ok(Envelope::Other { event_type, .. }) => {
                let shown = chela_core::text::prefix(&event_type, 64);
                return out.push(Action::Dropped(alloc::format!("a {shown} event")));
            }
            Ok(Envelope::UrlVerification { .. }) => return out.push(Action::Dropped("a URL check".into())),
            Err(e) => return out.push(Action::Dropped(alloc::format!("{e}"))),
        };
        if self.seen.contains(&m.event_id) {
            return out.push(Action::Dropped("an event delivered again".into()));
        }
        if self.seen.len() == SEEN {
            self.seen.remove(0);
        }
        self.seen.push(m.event_id.clone());
        // Nothing of an unknown sender's is shown or answered: not its text, not its id.
        if !access.admits(&m.sender) || m.sender_type == "app" {
            return out.push(Action::Dropped("a message from a sender not in feishu_allow".into()));
        }
        // In a group, only what names someone (the bot, since its own id is not asked for).
        if m.chat_type == "group" && !m.mentions_bot(None) {
            return out.push(Action::Dropped("a group message that does not mention the bot".into()));
        }
        match m.text(None) {
            Some(text) if !text.is_empty() => {
                let direct = m.chat_type == "p2p";
                out.push(Action::Turn(Incoming { sender: m.sender, chat_id: m.chat_id, text, direct }));
            }
            _ => out.push(Action::Dropped(alloc::format!(
                "a {} message (only text is read)",
                chela_core::text::prefix(&m.message_type, 32)
            ))),
        }
    }
}
