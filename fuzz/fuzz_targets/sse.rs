//! The Server-Sent Events parser, fed the same bytes whole, in input-driven pieces and one byte
//! at a time: the events must be the same, and what comes out must follow the format's rules.
#![no_main]

use chela_proto::sse::{Error, Event, Parser};
use libfuzzer_sys::fuzz_target;

/// Far above libFuzzer's input size, so the bound never trips and any split must agree.
const LARGE: usize = 1 << 20;
/// Small enough for fuzz inputs to trip it.
const SMALL: usize = 64;

fn events(pieces: &[&[u8]], max: usize) -> (Vec<Event>, Option<Error>) {
    let mut p = Parser::new(max);
    let mut out = Vec::new();
    for piece in pieces {
        p.handle_bytes(piece);
        loop {
            match p.poll_event() {
                Ok(Some(ev)) => out.push(ev),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
        // The bound is on what the parser holds: an unfinished line past it is an error.
        assert!(p.pending_bytes() <= max, "the parser holds {} bytes, over its bound {max}", p.pending_bytes());
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    let (whole, err) = events(&[data], LARGE);
    assert_eq!(err, None, "no input this small can exceed {LARGE} bytes");
    let (pieces, _) = events(&chela_fuzz::chunks(data), LARGE);
    assert_eq!(whole, pieces, "splitting the stream changed its events");
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    let (one_by_one, _) = events(&bytes, LARGE);
    assert_eq!(whole, one_by_one, "feeding the stream byte by byte changed its events");
    for ev in &whole {
        // Lines end at \r or \n, so neither can be inside a field; data lines are joined by \n.
        assert!(!ev.event.contains(['\r', '\n']), "an event name spans lines: {ev:?}");
        assert!(!ev.data.contains('\r'), "event data keeps a line end: {ev:?}");
    }

    // With a small bound the stream may be refused, but where and why must not depend on the
    // split either; and fed one byte at a time (so the parser holds partial lines) what it holds
    // and what it dispatches stay within the bound.
    let small = events(&bytes, SMALL);
    assert_eq!(small, events(&[data], SMALL), "splitting the stream changed where the bound refused it");
    assert_eq!(
        small,
        events(&chela_fuzz::chunks(data), SMALL),
        "splitting the stream changed where the bound refused it"
    );
    for ev in &small.0 {
        assert!(ev.data.len() <= SMALL, "an event of {} bytes passed a bound of {SMALL}", ev.data.len());
    }
});
