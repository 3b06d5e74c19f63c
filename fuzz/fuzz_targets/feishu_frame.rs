//! The Feishu long connection's decoders, fed outside bytes: the pbbp2 `Frame` decoder (what it
//! accepts must re-encode to a frame that decodes the same), the multi-part joiner (bounded
//! whatever parts arrive), and the WebSocket decoder the frames come through (the same messages
//! for any split, and never more held than one bounded frame).
#![no_main]

use chela_proto::feishu::frame::Frame;
use chela_proto::feishu::parts::{PartLimits, Reassembler};
use chela_proto::websocket::{Decoder, Role};
use libfuzzer_sys::fuzz_target;

const MAX_FRAME: usize = 2048;
const SMALL_PARTS: PartLimits = PartLimits { max_parts: 8, max_bytes: 256, max_messages: 4, ttl_ms: 50 };

fn messages(pieces: &[&[u8]], max: usize) -> (Vec<chela_proto::websocket::Message>, bool) {
    let mut d = Decoder::new(Role::Client, max);
    let mut out = Vec::new();
    for piece in pieces {
        d.handle_bytes(piece);
        loop {
            match d.poll_message() {
                Ok(Some(m)) => out.push(m),
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
        assert!(d.held() <= max + 14 + piece.len(), "the WebSocket decoder holds {} bytes", d.held());
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = Frame::decode(data, MAX_FRAME) {
        let again = Frame::decode(&frame.to_bytes(), usize::MAX).expect("a decoded frame re-encodes to a valid frame");
        assert_eq!(again, frame, "a frame changed through encode and decode");
        // Its parts, as the host would feed them, stay within the joiner's bounds.
        let mut r = Reassembler::new(SMALL_PARTS);
        let id = frame.header("message_id").unwrap_or("");
        let sum = frame.header_int("sum").unwrap_or(1);
        for (now, seq) in (0..frame.headers.len() as u64).enumerate() {
            let _ = r.handle_part(id, sum, seq, &frame.payload, now as u64 * 10);
            assert!(r.held() <= SMALL_PARTS.max_bytes && r.pending() <= SMALL_PARTS.max_messages);
        }
    }

    let whole = messages(&[data], 512);
    let split = messages(&chela_fuzz::chunks(data), 512);
    assert_eq!(whole, split, "splitting the WebSocket stream changed its messages");
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    assert_eq!(whole, messages(&bytes, 512), "feeding the WebSocket stream byte by byte changed its messages");
});
