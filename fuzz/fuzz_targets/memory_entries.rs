//! Memory entries (`memory/entries.jsonl`): every line is an entry or counted as skipped, what
//! loads writes back and loads unchanged, and the prompt rendering keeps its byte bound.
#![no_main]

use chela_core::memory::Entries;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (entries, skipped) = Entries::parse(&text);
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(entries.len() + skipped, lines, "every non-blank line is an entry or a skipped line");

    let jsonl = entries.to_jsonl();
    let (back, skipped_back) = Entries::parse(&jsonl);
    assert_eq!(skipped_back, 0, "a written entry did not load: {jsonl}");
    assert_eq!(back, entries, "entries changed on a write and a read");

    let newest = entries.newest(usize::MAX, None);
    assert_eq!(newest.len(), entries.len());
    for w in newest.windows(2) {
        assert!(w[0].updated >= w[1].updated, "newest() is not newest first");
    }
    for max in [0, 16, text.len() / 2, text.len()] {
        let r = entries.render(max);
        assert!(r.len() <= max, "render({max}) gave {} bytes", r.len());
    }
    // Recall with the file's own words: scored hits only, best first, at most what was asked.
    let query: String = text.chars().take(64).collect();
    let hits = entries.recall(&query, 5);
    assert!(hits.len() <= 5);
    for w in hits.windows(2) {
        assert!(w[0].0 >= w[1].0, "recall is not best first");
    }
    assert!(hits.iter().all(|(score, _)| *score > 0));
});
