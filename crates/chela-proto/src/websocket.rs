//! WebSocket framing (RFC 6455 §5), sans-IO: frames encoded into a buffer, and a decoder fed
//! bytes as they arrive that yields whole messages.
//!
//! The handshake (an HTTP upgrade) and the socket belong to the host. Driving the decoder: call
//! [`Decoder::handle_bytes`] with what was read, then [`Decoder::poll_message`] until it returns
//! `Ok(None)`. Fragmented messages are joined; control frames may arrive between fragments, as the
//! RFC allows.
//!
//! Bounded: a message (joined fragments) longer than `max_message_bytes` is an error, found from
//! the frame header before its payload is buffered, so the decoder never holds more than one
//! message and one frame header. Frames a peer in the given role must not send (masked frames to
//! a client, unmasked ones to a server, reserved bits, unknown opcodes, long or fragmented
//! control frames) are errors; the connection should then be closed.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// One whole message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// The close code (1005 when none was sent) and reason.
    Close(u16, String),
}

/// Which end of the connection the decoder reads for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Reads what a server sends: frames must be unmasked.
    Client,
    /// Reads what a client sends: frames must be masked.
    Server,
}

/// Why the byte stream is not (acceptable) WebSocket.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WsError {
    /// A message longer than the decoder's bound.
    TooLarge { limit: usize },
    /// A frame that breaks RFC 6455 for this role.
    Protocol { reason: &'static str },
    /// A text message or close reason that is not UTF-8.
    NotUtf8,
}

impl fmt::Display for WsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WsError::TooLarge { limit } => write!(f, "a WebSocket message is larger than {limit} bytes"),
            WsError::Protocol { reason } => write!(f, "the WebSocket peer broke the protocol: {reason}"),
            WsError::NotUtf8 => f.write_str("a WebSocket text message is not UTF-8"),
        }
    }
}

impl core::error::Error for WsError {}

/// Appends one final frame carrying `message` to `out`, masked with `mask` when given (a client
/// must mask every frame; a server must not).
pub fn encode(message: &Message, mask: Option<[u8; 4]>, out: &mut Vec<u8>) {
    let mut close_body;
    let (opcode, payload): (u8, &[u8]) = match message {
        Message::Text(t) => (OP_TEXT, t.as_bytes()),
        Message::Binary(b) => (OP_BINARY, b),
        Message::Ping(b) => (OP_PING, b),
        Message::Pong(b) => (OP_PONG, b),
        Message::Close(code, reason) => {
            close_body = code.to_be_bytes().to_vec();
            close_body.extend_from_slice(reason.as_bytes());
            (OP_CLOSE, &close_body)
        }
    };
    out.push(0x80 | opcode);
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let start = out.len();
    if let Some(key) = mask {
        out.extend_from_slice(&key);
    }
    let body = out.len();
    out.extend_from_slice(payload);
    if let Some(key) = mask {
        apply_mask(&mut out[body..], key);
    }
    debug_assert!(out.len() - start >= payload.len());
}

fn apply_mask(bytes: &mut [u8], key: [u8; 4]) {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

/// The decoder state. See the module docs for the calling order.
#[derive(Debug)]
pub struct Decoder {
    role: Role,
    max_message_bytes: usize,
    buf: Vec<u8>,
    /// The opcode and joined payload of an unfinished fragmented message.
    partial: Option<(u8, Vec<u8>)>,
    failed: Option<WsError>,
}

impl Decoder {
    pub fn new(role: Role, max_message_bytes: usize) -> Decoder {
        Decoder { role, max_message_bytes, buf: Vec::new(), partial: None, failed: None }
    }

    /// Bytes held: the unparsed input and an unfinished fragmented message.
    pub fn held(&self) -> usize {
        self.buf.len() + self.partial.as_ref().map_or(0, |(_, p)| p.len())
    }

    /// Adds bytes read from the socket. After an error they are dropped: the stream is dead.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next whole message, `Ok(None)` when more bytes are needed. After an error every call
    /// returns the same error.
    pub fn poll_message(&mut self) -> Result<Option<Message>, WsError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let out = self.next();
        if let Err(e) = &out {
            self.failed = Some(e.clone());
            self.buf = Vec::new();
            self.partial = None;
        }
        out
    }

    fn next(&mut self) -> Result<Option<Message>, WsError> {
        loop {
            let Some(head) = self.header()? else { return Ok(None) };
            if self.buf.len() < head.header_len + head.len {
                // The payload length was checked against the bound in `header`, so waiting for it
                // holds at most one bounded frame.
                return Ok(None);
            }
            let mut payload: Vec<u8> = self.buf[head.header_len..head.header_len + head.len].to_vec();
            self.buf.drain(..head.header_len + head.len);
            if let Some(key) = head.mask {
                apply_mask(&mut payload, key);
            }
            if head.opcode >= OP_CLOSE {
                return control(head.opcode, payload).map(Some);
            }
            let (opcode, data) = match (head.opcode, self.partial.take()) {
                (OP_CONTINUATION, Some((op, mut data))) => {
                    data.extend_from_slice(&payload);
                    (op, data)
                }
                (OP_CONTINUATION, None) => return Err(proto("a continuation frame without a message to continue")),
                (_, Some(_)) => return Err(proto("a new message began inside a fragmented one")),
                (op, None) => (op, payload),
            };
            if !head.fin {
                self.partial = Some((opcode, data));
                continue;
            }
            return Ok(Some(match opcode {
                OP_TEXT => Message::Text(String::from_utf8(data).map_err(|_| WsError::NotUtf8)?),
                _ => Message::Binary(data),
            }));
        }
    }

    fn header(&self) -> Result<Option<Head>, WsError> {
        let b = &self.buf;
        if b.len() < 2 {
            return Ok(None);
        }
        let fin = b[0] & 0x80 != 0;
        if b[0] & 0x70 != 0 {
            return Err(proto("reserved bits are set without an extension"));
        }
        let opcode = b[0] & 0x0f;
        if !matches!(opcode, OP_CONTINUATION | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG) {
            return Err(proto("an unknown opcode"));
        }
        let masked = b[1] & 0x80 != 0;
        if masked != (self.role == Role::Server) {
            return Err(proto(if masked { "a server sent a masked frame" } else { "a client sent an unmasked frame" }));
        }
        let (len, mut header_len) = match b[1] & 0x7f {
            126 if b.len() < 4 => return Ok(None),
            126 => (u64::from(u16::from_be_bytes([b[2], b[3]])), 4),
            127 if b.len() < 10 => return Ok(None),
            127 => (u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]), 10),
            n => (u64::from(n), 2),
        };
        if opcode >= OP_CLOSE && (len > 125 || !fin) {
            return Err(proto("a control frame is fragmented or longer than 125 bytes"));
        }
        let joined = self.partial.as_ref().map_or(0, |(_, p)| p.len() as u64);
        if len.saturating_add(joined) > self.max_message_bytes as u64 {
            return Err(WsError::TooLarge { limit: self.max_message_bytes });
        }
        let mask = if masked {
            if b.len() < header_len + 4 {
                return Ok(None);
            }
            let key = [b[header_len], b[header_len + 1], b[header_len + 2], b[header_len + 3]];
            header_len += 4;
            Some(key)
        } else {
            None
        };
        Ok(Some(Head { fin, opcode, mask, len: len as usize, header_len }))
    }
}

struct Head {
    fin: bool,
    opcode: u8,
    mask: Option<[u8; 4]>,
    len: usize,
    header_len: usize,
}

fn proto(reason: &'static str) -> WsError {
    WsError::Protocol { reason }
}

fn control(opcode: u8, payload: Vec<u8>) -> Result<Message, WsError> {
    Ok(match opcode {
        OP_PING => Message::Ping(payload),
        OP_PONG => Message::Pong(payload),
        _ => match payload.len() {
            0 => Message::Close(1005, String::new()),
            1 => return Err(proto("a close frame with a one-byte body")),
            _ => {
                let code = u16::from_be_bytes([payload[0], payload[1]]);
                let reason = String::from_utf8(payload[2..].to_vec()).map_err(|_| WsError::NotUtf8)?;
                Message::Close(code, reason)
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    fn decode_all(role: Role, bytes: &[u8], step: usize, max: usize) -> Result<Vec<Message>, WsError> {
        let mut d = Decoder::new(role, max);
        let mut out = Vec::new();
        for piece in bytes.chunks(step.max(1)) {
            d.handle_bytes(piece);
            while let Some(m) = d.poll_message()? {
                out.push(m);
            }
        }
        Ok(out)
    }

    #[test]
    fn the_rfc_examples_decode() {
        // RFC 6455 §5.7: an unmasked "Hello", a masked "Hello", a fragmented "Hel"+"lo".
        let hello = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        assert_eq!(decode_all(Role::Client, &hello, 1, 64).unwrap(), vec![Message::Text("Hello".into())]);
        let masked = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
        assert_eq!(decode_all(Role::Server, &masked, 3, 64).unwrap(), vec![Message::Text("Hello".into())]);
        let fragmented = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x89, 0x00, 0x80, 0x02, 0x6c, 0x6f];
        assert_eq!(
            decode_all(Role::Client, &fragmented, 2, 64).unwrap(),
            vec![Message::Ping(vec![]), Message::Text("Hello".into())]
        );
        let mut out = Vec::new();
        encode(&Message::Text("Hello".into()), Some([0x37, 0xfa, 0x21, 0x3d]), &mut out);
        assert_eq!(out, masked);
    }

    #[test]
    fn oversize_and_forbidden_frames_are_refused_from_the_header() {
        // A 2^63-byte frame is refused from its 10-byte header alone.
        let mut huge = vec![0x82, 0x7f];
        huge.extend_from_slice(&(1u64 << 63).to_be_bytes());
        assert_eq!(decode_all(Role::Client, &huge, 64, 1024), Err(WsError::TooLarge { limit: 1024 }));
        // Fragments that together pass the bound.
        let mut frags = Vec::new();
        for _ in 0..3 {
            frags.extend_from_slice(&[0x00, 100]);
            frags.extend_from_slice(&[0; 100]);
        }
        frags[0] = 0x02;
        assert_eq!(decode_all(Role::Client, &frags, 7, 250), Err(WsError::TooLarge { limit: 250 }));
        assert!(matches!(decode_all(Role::Client, &[0x81, 0x80, 0, 0, 0, 0], 1, 64), Err(WsError::Protocol { .. })));
        assert!(matches!(decode_all(Role::Server, &[0x81, 0x00], 1, 64), Err(WsError::Protocol { .. })));
        assert!(matches!(decode_all(Role::Client, &[0xc1, 0x00], 1, 64), Err(WsError::Protocol { .. })));
        assert!(matches!(decode_all(Role::Client, &[0x09, 0x00], 1, 64), Err(WsError::Protocol { .. })));
        assert!(matches!(decode_all(Role::Client, &[0x80, 0x00], 1, 64), Err(WsError::Protocol { .. })));
        assert_eq!(decode_all(Role::Client, &[0x81, 0x01, 0xff], 1, 64), Err(WsError::NotUtf8));
    }

    fn any_message() -> impl Strategy<Value = Message> {
        prop_oneof![
            "\\PC{0,40}".prop_map(Message::Text),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Message::Binary),
            proptest::collection::vec(any::<u8>(), 0..125).prop_map(Message::Ping),
            proptest::collection::vec(any::<u8>(), 0..125).prop_map(Message::Pong),
            (1000u16..5000, "[a-z ]{0,20}").prop_map(|(c, r)| Message::Close(c, r)),
        ]
    }

    proptest! {
        #[test]
        fn messages_survive_encoding_in_either_direction_and_any_split(
            msgs in proptest::collection::vec(any_message(), 0..6),
            step in 1usize..40,
            mask in any::<[u8; 4]>(),
        ) {
            let (mut to_client, mut to_server) = (Vec::new(), Vec::new());
            for m in &msgs {
                encode(m, None, &mut to_client);
                encode(m, Some(mask), &mut to_server);
            }
            prop_assert_eq!(&decode_all(Role::Client, &to_client, step, 1024).unwrap(), &msgs);
            prop_assert_eq!(&decode_all(Role::Server, &to_server, step, 1024).unwrap(), &msgs);
        }

        #[test]
        fn garbage_is_bounded(bytes in proptest::collection::vec(any::<u8>(), 0..512), step in 1usize..64) {
            let mut d = Decoder::new(Role::Client, 100);
            for piece in bytes.chunks(step) {
                d.handle_bytes(piece);
                while let Ok(Some(_)) = d.poll_message() {}
                // One bounded frame plus its header, plus one unread piece.
                prop_assert!(d.held() <= 100 + 14 + step);
            }
        }
    }
}
