//! The MQTT side of a xiaozhi device connection (`chela::channels::xiaozhi::mqtt_wire::Wire`), fed outside
//! bytes after an optional valid CONNECT: the same events whole, in the input's own pieces and
//! byte by byte; CONNECT only ever first; nothing after DISCONNECT or a close; the buffer never
//! holds more than one packet and the bytes of one read.
#![no_main]

use chela::channels::xiaozhi::mqtt_wire::{Event, MAX_PACKET, Wire};
use libfuzzer_sys::fuzz_target;

fn run(chunks: &[&[u8]]) -> Vec<Event> {
    let mut w = Wire::default();
    let mut out = Vec::new();
    for c in chunks {
        w.buffer().extend_from_slice(c);
        while let Some(e) = w.event() {
            out.push(e);
        }
        assert!(w.held() <= MAX_PACKET + 5 + c.len());
    }
    out
}

/// A CONNECT of MQTT 3.1.1 with client id "c", so most inputs reach the session's rules.
const CONNECT: &[u8] = &[0x10, 13, 0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 60, 0, 1, b'c'];

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let mut input = if first & 1 == 1 { CONNECT.to_vec() } else { Vec::new() };
    input.extend_from_slice(rest);
    let whole = run(&[&input]);
    // The input's own pieces: cut wherever a byte is 0xFF.
    let pieces: Vec<&[u8]> = input.split_inclusive(|b| *b == 0xFF).collect();
    assert_eq!(run(&pieces), whole);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run(&bytes), whole);
    if let Some(end) = whole.iter().position(|e| matches!(e, Event::Gone | Event::Close(..))) {
        assert_eq!(end, whole.len() - 1, "nothing after the end");
    }
    assert!(whole.iter().skip(1).all(|e| !matches!(e, Event::Connect(_))), "CONNECT only first");
});
