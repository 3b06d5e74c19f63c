//! The chip's WebSocket gateway on port 18789: MimiClaw's chat protocol, with the host's
//! message types and token rule (`chela_proto::gateway`), sans-IO so the host tests drive it.
//!
//! A connection starts as an HTTP upgrade ([`upgrade`]): `GET /` or `/ws`, version 13, and the
//! gateway token as `Authorization: Bearer …` or `?token=` (MimiClaw has none; here a token is
//! required, and with none set nobody is let in). Then [`Conn::feed`] takes the bytes read and
//! says what to do: run a turn, send a frame, close. [`request`] also takes `POST /ota` with the
//! same token: a signed update as the body (`chela_chip::ota` checks it).
//!
//! Bounded: the request head is at most [`MAX_HEAD`] bytes, a message (joined frames) at most
//! [`MAX_MESSAGE`], [`MAX_CLIENTS`] connections (the firmware's task pool: a fifth is not
//! accepted), and each connection has at most one
//! turn waiting: the chip runs one turn at a time, so a client that sends again before its
//! answer gets an `error` event instead of a queue.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::gateway::{ClientMessage, bearer, check_chat_id, event, query_param, token_matches};
use chela_proto::websocket::{Decoder, Message, Role, WsError, encode};

/// MimiClaw's port.
pub const PORT: u16 = 18789;
/// MimiClaw allows 4 clients.
pub const MAX_CLIENTS: usize = 4;
/// The longest upgrade request head (request line and headers).
pub const MAX_HEAD: usize = 2048;
/// The longest message a client may send, however many frames it comes in.
pub const MAX_MESSAGE: usize = 4096;

/// The longest chat id here: it names a session in the flash store, whose keys are short
/// (`chela_core::flash::MAX_KEY`), after the `ws_` prefix.
pub const MAX_CHAT_ID: usize = 48;

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Where the request head ends (after its blank line), once it has; an error (the answer to
/// send before closing) when it is longer than [`MAX_HEAD`] without ending.
pub fn head_end(buf: &[u8]) -> Result<Option<usize>, String> {
    match buf.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) if i + 4 <= MAX_HEAD => Ok(Some(i + 4)),
        Some(_) => Err(refusal(431, "the request head is too large")),
        None if buf.len() >= MAX_HEAD => Err(refusal(431, "the request head is too large")),
        None => Ok(None),
    }
}

/// The largest update `POST /ota` takes: an app slot of the 4 MB layout (the update's own
/// header then names its exact length, checked against the slot).
pub const MAX_UPDATE: usize = 0x1F_0000;

/// What a connection to the gateway asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// A chat: send this `101 Switching Protocols` answer, then speak frames ([`Conn`]).
    Chat(String),
    /// `POST /ota` with the token: an update file of `len` bytes follows as the body (after
    /// `100 Continue` when the client waits for one).
    Update { len: usize, expect_continue: bool },
    /// The setup page (`chela_chip::portal`, which asks for the token itself): `GET /` without
    /// a WebSocket upgrade, or `POST /save`.
    Setup,
}

/// Answers a whole request head: a WebSocket upgrade ([`upgrade`]) or an update pushed with
/// `POST /ota`; `Err` with the HTTP answer that refuses it.
pub fn request(head: &[u8], token: &str) -> Result<Request, String> {
    let upgrading = head.split(|&b| b == b'\n').skip(1).any(|line| {
        let line = line.trim_ascii();
        line.len() > 8 && line[..8].eq_ignore_ascii_case(b"upgrade:")
    });
    let line = head.split(|&b| b == b'\r').next().unwrap_or(&[]);
    let mut words = line.split(|&b| b == b' ');
    let (method, target) = (words.next().unwrap_or(&[]), words.next().unwrap_or(&[]));
    let path = target.split(|&b| b == b'?').next().unwrap_or(&[]);
    match (method, path) {
        (b"GET", b"/") if !upgrading => return Ok(Request::Setup),
        (b"POST", b"/save") => return Ok(Request::Setup),
        _ => {}
    }
    if !head.starts_with(b"POST ") {
        return upgrade(head, token).map(Request::Chat);
    }
    let text = core::str::from_utf8(head).map_err(|_| refusal(400, "the request is not text"))?;
    let line = text.split("\r\n").next().unwrap_or("");
    let mut parts = line.split(' ').skip(1);
    let (target, version) = (parts.next().unwrap_or(""), parts.next());
    if !version.is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(refusal(400, "not an HTTP/1 request"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/ota" {
        return Err(refusal(404, "updates are posted to /ota; the chat is a WebSocket on / and /ws"));
    }
    let headers = || text.split("\r\n").skip(1).filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim(), v.trim()));
    let header = |name: &str| headers().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v);
    origin_ok(header("origin"), header("host"))?;
    let given = header("authorization").and_then(bearer).map(String::from).or_else(|| query_param(query, "token"));
    if !given.is_some_and(|g| token_matches(&g, token)) {
        return Err(refusal(401, "an update needs the gateway token (Authorization: Bearer … or ?token=)"));
    }
    if header("transfer-encoding").is_some() {
        return Err(refusal(411, "send the update with a Content-Length, not chunked"));
    }
    let mut lengths = headers().filter(|(k, _)| k.eq_ignore_ascii_case("content-length")).map(|(_, v)| v.parse());
    let len: usize = match (lengths.next(), lengths.next()) {
        (Some(Ok(n)), None) => n,
        (None, _) => return Err(refusal(411, "send the update with a Content-Length")),
        _ => return Err(refusal(400, "one Content-Length, a number")),
    };
    if len > MAX_UPDATE {
        return Err(refusal(413, "the update is larger than an app slot"));
    }
    let expect_continue = header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    Ok(Request::Update { len, expect_continue })
}

/// A page from elsewhere in the browser must not drive the chip with a token it learnt.
fn origin_ok(origin: Option<&str>, host: Option<&str>) -> Result<(), String> {
    if let (Some(origin), Some(host)) = (origin, host) {
        let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        if !rest.is_some_and(|r| r.eq_ignore_ascii_case(host)) {
            return Err(refusal(403, "a page from another origin may not use this gateway"));
        }
    }
    Ok(())
}

/// The answer to `POST /ota` once the body is in: `200` when the update was taken (the chip
/// restarts into it next), else why it was refused.
pub fn update_answer(result: Result<usize, &str>) -> String {
    match result {
        Ok(slot) => answer(200, &format!("update taken: slot {slot} boots next, on trial; restarting")),
        Err(why) => answer(422, &format!("update refused: {why}")),
    }
}

/// Answers a whole request head: `Ok` with the `101 Switching Protocols` answer when it is a
/// WebSocket upgrade with the right token, else `Err` with the HTTP answer that refuses it (the
/// connection is closed after either error).
pub fn upgrade(head: &[u8], token: &str) -> Result<String, String> {
    let text = core::str::from_utf8(head).map_err(|_| refusal(400, "the request is not text"))?;
    let mut lines = text.split("\r\n");
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (method, target, version) = (parts.next(), parts.next().unwrap_or(""), parts.next());
    if method != Some("GET") || !version.is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(refusal(400, "a WebSocket is opened with GET … HTTP/1.1"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/" && path != "/ws" {
        return Err(refusal(404, "the chat is on / and /ws"));
    }
    let header = |name: &str| {
        text.split("\r\n").skip(1).find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
    };
    let has = |name: &str, word: &str| {
        header(name).is_some_and(|v| v.split(',').any(|w| w.trim().eq_ignore_ascii_case(word)))
    };
    if !has("upgrade", "websocket") || !has("connection", "upgrade") {
        return Err(refusal(426, "this port speaks WebSocket only"));
    }
    origin_ok(header("origin"), header("host"))?;
    let given = header("authorization").and_then(bearer).map(String::from).or_else(|| query_param(query, "token"));
    if !given.is_some_and(|g| token_matches(&g, token)) {
        return Err(refusal(401, "this gateway needs its token (Authorization: Bearer … or ?token=)"));
    }
    if header("sec-websocket-version") != Some("13") {
        return Err(refusal(400, "only WebSocket version 13 is spoken here"));
    }
    let key =
        header("sec-websocket-key").filter(|k| k.len() == 24).ok_or_else(|| refusal(400, "a bad Sec-WebSocket-Key"))?;
    Ok(format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    ))
}

/// An HTTP answer that refuses, then closes.
pub fn refusal(status: u16, why: &str) -> String {
    answer(status, why)
}

/// A plain-text HTTP answer, then the connection closes.
pub fn answer(status: u16, why: &str) -> String {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        411 => "Length Required",
        413 => "Payload Too Large",
        422 => "Unprocessable Content",
        426 => "Upgrade Required",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let auth = if status == 401 { "WWW-Authenticate: Bearer realm=\"chela\"\r\n" } else { "" };
    format!(
        "HTTP/1.1 {status} {reason}\r\n{auth}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}\n",
        why.len() + 1
    )
}

/// `Sec-WebSocket-Accept` for a client's key (RFC 6455 §4.2.2).
pub fn accept_key(key: &str) -> String {
    let mut input = Vec::with_capacity(key.len() + GUID.len());
    input.extend_from_slice(key.as_bytes());
    input.extend_from_slice(GUID.as_bytes());
    base64(&sha1(&input))
}

/// What the board does after [`Conn::feed`].
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Run a turn in `chat_id`'s session; answer with [`Conn::answer`].
    Turn { chat_id: String, content: String },
    /// Write these bytes (a frame).
    Send(Vec<u8>),
    /// Write these bytes (a close frame, possibly empty), then close the socket.
    Close(Vec<u8>),
}

/// One upgraded connection.
pub struct Conn {
    decoder: Decoder,
    /// Where a message without a `chat_id` goes: the last one named on this connection, else
    /// its own random `ws_<16 hex digits>` (as on the host: a client connecting after a
    /// restart cannot land in an earlier client's chat by its number).
    own_chat: String,
    /// The chat a turn was asked for and not yet answered.
    waiting: Option<String>,
    closed: bool,
}

impl Conn {
    /// `random` (from the hardware RNG) names the connection's own chat, `ws_<16 hex digits>`,
    /// for messages without a `chat_id` until one is named.
    pub fn new(random: [u8; 8]) -> Conn {
        Conn {
            decoder: Decoder::new(Role::Server, MAX_MESSAGE),
            own_chat: format!("ws_{:016x}", u64::from_be_bytes(random)),
            waiting: None,
            closed: false,
        }
    }

    /// The chat the connection is in: the last one named on it, else its own. A scheduled job
    /// made in that chat pushes its answer here ([`Chats`]).
    pub fn chat(&self) -> &str {
        &self.own_chat
    }

    /// Whether a turn was asked for and not answered yet.
    pub fn waiting(&self) -> Option<&str> {
        self.waiting.as_deref()
    }

    /// Takes bytes read from the socket; appends what to do to `out`. After a `Close` action,
    /// further bytes are ignored.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Action>) {
        if self.closed {
            return;
        }
        self.decoder.handle_bytes(bytes);
        loop {
            match self.decoder.poll_message() {
                Ok(None) => return,
                Ok(Some(Message::Text(text))) => out.push(self.on_text(&text)),
                Ok(Some(Message::Binary(_))) => {
                    out.push(text_frame(&event("error", "send messages as text frames holding JSON", "")))
                }
                Ok(Some(Message::Ping(p))) => out.push(Action::Send(frame(&Message::Pong(p)))),
                Ok(Some(Message::Pong(_))) => {}
                Ok(Some(Message::Close(..))) => return self.close(1000, "", out),
                Err(e) => {
                    let code = match e {
                        WsError::TooLarge { .. } => 1009,
                        WsError::NotUtf8 => 1007,
                        _ => 1002,
                    };
                    return self.close(code, &format!("{e}"), out);
                }
            }
        }
    }

    fn close(&mut self, code: u16, reason: &str, out: &mut Vec<Action>) {
        self.closed = true;
        // A close reason is at most 123 bytes (a control frame's payload is at most 125).
        let reason = chela_core::text::prefix(reason, 123);
        out.push(Action::Close(frame(&Message::Close(code, String::from(reason)))));
    }

    fn on_text(&mut self, text: &str) -> Action {
        let msg = match ClientMessage::read(text) {
            Ok(m) => m,
            Err(_) => {
                let why = "the message is not the expected JSON; send {\"type\":\"message\",\"content\":\"…\"}";
                return text_frame(&event("error", why, ""));
            }
        };
        let chat = match msg.chat_id.filter(|c| !c.is_empty()) {
            Some(c) => match check_chat_id(&c) {
                Ok(()) if c.len() <= MAX_CHAT_ID => c,
                Ok(()) => {
                    return text_frame(&event(
                        "error",
                        &format!("a chat_id here has at most {MAX_CHAT_ID} characters"),
                        "",
                    ));
                }
                Err(e) => return text_frame(&event("error", &e, "")),
            },
            None => self.own_chat.clone(),
        };
        if msg.kind != "message" {
            let kind = chela_core::text::prefix(&msg.kind, 40);
            return text_frame(&event(
                "error",
                &format!("unknown message type `{kind}`; only \"message\" is understood"),
                &chat,
            ));
        }
        if msg.content.trim().is_empty() {
            return text_frame(&event("error", "the message is empty", &chat));
        }
        if self.waiting.is_some() {
            let why = "this device answers one message at a time; send this one once the answer has come";
            return text_frame(&event("error", why, &chat));
        }
        // A named chat sticks: later messages without one go on in it (MimiClaw's rule).
        self.own_chat.clone_from(&chat);
        self.waiting = Some(chat.clone());
        Action::Turn { chat_id: chat, content: msg.content }
    }

    /// The frame that answers the waiting turn: `response` for an answer, `error` when the turn
    /// failed. `None` when no turn was waiting.
    pub fn answer(&mut self, result: Result<&str, &str>) -> Option<Vec<u8>> {
        let chat = self.waiting.take()?;
        Some(answer_frame(&chat, result))
    }
}

/// The frame that carries a turn's answer in `chat` (`response`), or why it failed (`error`):
/// a client's own turn, or a scheduled job's pushed to the chat's clients.
pub fn answer_frame(chat: &str, result: Result<&str, &str>) -> Vec<u8> {
    let (kind, text) = match result {
        Ok(t) => ("response", t),
        Err(e) => ("error", e),
    };
    frame(&Message::Text(event(kind, text, chat)))
}

/// Answers held for a chat whose clients were gone, at most: the newest kept.
pub const HELD_ANSWERS: usize = 2;
/// Their frames' bytes, at most, together (heap held while nobody collects them).
pub const HELD_BYTES: usize = 8 * 1024;

/// Which chat each client slot's connection is in ([`Conn::chat`]), with the connection's
/// serial: where a scheduled job made in a gateway chat pushes its answer. Only the clients of
/// that chat get it; a connection that ended or moved to another chat gets nothing more of it.
///
/// An answer no client took (its asker closed the socket before it came, its write failed, or
/// no client was in a job's chat) is held ([`Chats::hold`]) for the next connection in its chat,
/// which gets it before anything else ([`Chats::set`]), once: what a user reconnecting to a chat
/// expects, as the answer is in the chat's session. Bounded ([`HELD_ANSWERS`], [`HELD_BYTES`],
/// the oldest dropped first) and in RAM only: after a restart it is in the session alone.
#[derive(Debug)]
pub struct Chats {
    slots: [Option<(u32, String)>; MAX_CLIENTS],
    /// Undelivered answers, oldest first: the chat and the frame.
    held: Vec<(String, Vec<u8>)>,
}

impl Chats {
    pub const fn new() -> Chats {
        Chats { slots: [const { None }; MAX_CLIENTS], held: Vec::new() }
    }

    /// Connection `serial` of `slot` is in `chat` now: the answers held for that chat, oldest
    /// first, are handed over (to be sent before anything else; no other connection gets them).
    pub fn set(&mut self, slot: usize, serial: u32, chat: &str) -> Vec<Vec<u8>> {
        let Some(entry) = self.slots.get_mut(slot) else { return Vec::new() };
        if !entry.as_ref().is_some_and(|(s, c)| *s == serial && c == chat) {
            *entry = Some((serial, String::from(chat)));
        }
        if !self.held.iter().any(|(c, _)| c == chat) {
            return Vec::new();
        }
        let (mine, rest) = core::mem::take(&mut self.held).into_iter().partition(|(c, _)| c == chat);
        self.held = rest;
        mine.into_iter().map(|(_, frame)| frame).collect::<Vec<_>>()
    }

    /// Whether connection `serial` of `slot` is still open (a turn's answer can reach it).
    pub fn live(&self, slot: usize, serial: u32) -> bool {
        self.slots.get(slot).is_some_and(|e| e.as_ref().is_some_and(|(s, _)| *s == serial))
    }

    /// Holds `frame`, an answer in `chat` that no client took, for the next connection in that
    /// chat; the oldest held answers make room. `false` (nothing held) for a frame over
    /// [`HELD_BYTES`] by itself.
    pub fn hold(&mut self, chat: &str, frame: Vec<u8>) -> bool {
        if frame.len() > HELD_BYTES {
            return false;
        }
        let mut bytes: usize = self.held.iter().map(|(_, f)| f.len()).sum();
        while !self.held.is_empty() && (self.held.len() >= HELD_ANSWERS || bytes + frame.len() > HELD_BYTES) {
            bytes -= self.held.remove(0).1.len();
        }
        self.held.push((String::from(chat), frame));
        true
    }

    /// Connection `serial` of `slot` ended (a later connection of the slot keeps its entry).
    pub fn clear(&mut self, slot: usize, serial: u32) {
        if let Some(entry) = self.slots.get_mut(slot)
            && entry.as_ref().is_some_and(|(s, _)| *s == serial)
        {
            *entry = None;
        }
    }

    /// The slots and serials of the connections in `chat`.
    pub fn of(&self, chat: &str) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        for (slot, entry) in self.slots.iter().enumerate() {
            if let Some((serial, c)) = entry
                && c == chat
            {
                out.push((slot, *serial));
            }
        }
        out
    }
}

impl Default for Chats {
    fn default() -> Chats {
        Chats::new()
    }
}

fn text_frame(event: &str) -> Action {
    Action::Send(frame(&Message::Text(String::from(event))))
}

/// A server's frame (unmasked) for `message`.
pub fn frame(message: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    encode(message, None, &mut out);
    out
}

/// SHA-1, for the accept key only (RFC 3174); the rounds in a loop, for size.
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let bits = (data.len() as u64).wrapping_mul(8);
    let mut msg = Vec::with_capacity(data.len() + 72);
    msg.extend_from_slice(data);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i / 20 {
                0 => ((b & c) | (!b & d), 0x5A82_7999),
                1 => (b ^ c ^ d, 0x6ED9_EBA1),
                2 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, x) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_and_base64_vectors() {
        let hex = |d: [u8; 20]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(sha1(b"abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(hex(sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        assert_eq!(hex(sha1(long)), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
