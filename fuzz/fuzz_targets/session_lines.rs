//! Session files (`sessions/*.jsonl`): every line is kept, skipped, repaired away or stands
//! for what a summary covers, never lost without a count; what loads (summary included) is
//! well-formed enough to write back and load again unchanged.
#![no_main]

use chela_core::history::Repaired;
use chela_core::session::{Summary, encode_summary, encode_turn, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let loaded = parse(&text);

    let lines = text.split('\n').filter(|l| !l.trim_end_matches('\r').trim().is_empty()).count();
    let accounted = loaded.messages.len()
        + loaded.skipped_lines
        + loaded.repaired.leading
        + loaded.repaired.broken_tail
        + usize::from(loaded.summary.is_some())
        + loaded.covered_lines;
    assert_eq!(
        accounted, lines,
        "every non-blank line is a message, a skipped line, a repaired one, the summary or covered by it: {loaded:?}"
    );
    if loaded.torn_tail {
        assert!(
            !text.ends_with('\n') && loaded.skipped_lines >= 1,
            "a torn tail is a skipped last line without its newline"
        );
    }

    // What was loaded is what a writer appends: written back (a summary first, standing for
    // nothing older, as rotation writes it), it loads the same, with nothing skipped or repaired.
    let ts = loaded.last_ts;
    let head = loaded.summary.as_ref().map(|s| Summary { keeps: 0, ..s.clone() });
    let written = head.as_ref().map(encode_summary).unwrap_or_default() + &encode_turn(&loaded.messages, ts);
    let again = parse(&written);
    assert_eq!(again.messages, loaded.messages, "messages changed on a write and a read");
    assert_eq!(again.summary, head, "the summary changed on a write and a read");
    assert_eq!(again.covered_lines, 0);
    assert_eq!(again.skipped_lines, 0);
    assert!(!again.torn_tail);
    assert_eq!(again.repaired, Repaired::default(), "a loaded history needed repair a second time");
    assert_eq!(again.last_ts, if loaded.messages.is_empty() { 0 } else { ts });
});
