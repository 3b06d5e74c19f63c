//! The chip's Feishu connection fed outside bytes: the open API's answers (endpoint, token), the
//! endpoint's URL, the WebSocket handshake answer, and the long connection's byte stream split
//! by the input. No panic; the bytes held stay within one bounded frame and the part joiner's
//! bound; a sender outside the allowlist never gets a turn.
#![no_main]

use chela_chip::feishu::conn::{self, Action, Conn, MAX_FRAME_BYTES, PARTS};
use chela_chip::feishu::{Access, ClientConfig, parse_endpoint, parse_token};
use chela_fuzz::chunks;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_endpoint(data);
    let _ = parse_token(data);
    if let Ok(text) = core::str::from_utf8(data) {
        if let Ok(url) = conn::parse_url(text) {
            assert!(url.path.starts_with('/') && !url.host.is_empty());
        }
    }
    if let Ok(Some(n)) = conn::handshake_answer(data, "dGhlIHNhbXBsZSBub25jZQ==") {
        assert!(n <= data.len() && n <= conn::MAX_HEAD_BYTES + 3);
    }
    let mut c = Conn::new(7, ClientConfig::default(), 0, 1);
    let mut config = ClientConfig::default();
    config.update_from(data);
    let nobody = Access::default();
    let mut out = Vec::new();
    for (i, piece) in chunks(data).into_iter().enumerate() {
        c.feed(piece, i as u64 * 10, &nobody, &mut out);
        assert!(c.held() <= MAX_FRAME_BYTES + 14 + PARTS.max_bytes + piece.len(), "held {}", c.held());
        let _ = c.poll(i as u64 * 1000);
    }
    assert!(!out.iter().any(|a| matches!(a, Action::Turn(_))), "a turn for a sender nobody allowed");
});
