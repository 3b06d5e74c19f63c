//! The audio datagrams of xiaozhi's MQTT + UDP transport, fed outside bytes: what parses
//! rebuilds to the same header from its own nonce and fields; and the uplink sequence window,
//! fed the input as big-endian sequence numbers, only ever moves forward, by at most its jump
//! bound, counting exactly the sequences it skipped.
#![no_main]

use chela_proto::xiaozhi::udp::{self, MAX_JUMP, Verdict, Window};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((h, payload)) = udp::parse(data) {
        assert_eq!(payload.len() + udp::HEADER, data.len());
        let mut nonce = [0u8; udp::HEADER];
        nonce.copy_from_slice(&data[..udp::HEADER]);
        let rebuilt = udp::header(&nonce, payload.len(), h.timestamp, h.sequence).expect("a parsed length fits");
        assert_eq!(&rebuilt[..], &data[..udp::HEADER]);
    }
    let mut w = Window::default();
    let mut lost = 0u64;
    for chunk in data.chunks_exact(4) {
        let s = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        let before = w.last();
        match w.check(s) {
            Verdict::Accept { lost: l } => {
                assert!(s > before && s - before <= MAX_JUMP);
                lost += u64::from(l);
                w.commit(s);
                assert_eq!(w.last(), s);
            }
            Verdict::Old => {
                assert!(s <= before);
                w.commit(s);
                assert_eq!(w.last(), before, "a refused sequence moves nothing");
            }
            Verdict::TooFar => {
                assert!(s - before > MAX_JUMP);
                w.commit(s);
                assert_eq!(w.last(), before, "a refused sequence moves nothing");
            }
        }
    }
    assert_eq!(w.lost, lost);
});
