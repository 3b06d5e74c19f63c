//! The [`Storage`] contract as tests: one suite every implementation must pass. The in-memory
//! model runs it in this crate; the host's file storage runs it in `crates/chela`.
//!
//! Each check takes a factory for an empty storage and panics with a message on a breach.

use alloc::string::String;
use alloc::vec::Vec;
use core::ops::ControlFlow;

use super::{ReadEnd, Storage};

/// Runs every check.
pub fn check_all<S: Storage>(mut fresh: impl FnMut() -> S) {
    appended_lines_come_back_newest_first(fresh());
    reading_stops_when_told_and_reads_little(fresh());
    replace_gives_exactly_the_new_bytes(fresh());
    a_torn_last_line_is_handed_unterminated_and_appends_start_fresh(fresh());
    a_missing_file_reads_as_empty(fresh());
    append_takes_whole_lines_only(fresh());
    long_lines_come_back_whole(fresh());
}

/// All lines of `name`, newest first, with their `terminated` flag.
pub fn read_all<S: Storage>(s: &S, name: &str) -> (Vec<(String, bool)>, ReadEnd) {
    let mut out = Vec::new();
    let end = s
        .read_newest_first(name, &mut |l| {
            out.push((String::from_utf8_lossy(l.bytes).into_owned(), l.terminated));
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|e| panic!("reading {name} failed: {e}"));
    (out, end)
}

fn lines(v: &[(String, bool)]) -> Vec<&str> {
    v.iter().map(|(l, _)| l.as_str()).collect()
}

pub fn appended_lines_come_back_newest_first<S: Storage>(mut s: S) {
    s.append("a.jsonl", "one\n").expect("append");
    s.append("a.jsonl", "two\nthree\n").expect("append");
    s.append("b.jsonl", "other\n").expect("append");
    let (got, end) = read_all(&s, "a.jsonl");
    assert_eq!(lines(&got), ["three", "two", "one"]);
    assert!(got.iter().all(|(_, t)| *t), "every appended line is terminated");
    assert_eq!(end.size, 14);
    assert!(!end.stopped);
    assert_eq!(lines(&read_all(&s, "b.jsonl").0), ["other"], "files are independent");
}

pub fn reading_stops_when_told_and_reads_little<S: Storage>(mut s: S) {
    let mut text = String::new();
    for i in 0..4000 {
        text.push_str(&alloc::format!("line {i:05} {}\n", "x".repeat(120)));
    }
    s.append("big", &text).expect("append");
    let mut seen = Vec::new();
    let end = s
        .read_newest_first("big", &mut |l| {
            seen.push(String::from_utf8_lossy(l.bytes).into_owned());
            if seen.len() == 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        })
        .expect("read");
    assert_eq!(seen.len(), 3, "no line after Break");
    assert!(seen[2].starts_with("line 03997 "), "{}", seen[2]);
    assert!(end.stopped);
    assert!(end.read <= end.size / 8, "read {} of {} bytes for three lines", end.read, end.size);
}

pub fn replace_gives_exactly_the_new_bytes<S: Storage>(mut s: S) {
    s.replace("c", b"first\nversion\n").expect("replace");
    assert_eq!(lines(&read_all(&s, "c").0), ["version", "first"]);
    s.append("c", "more\n").expect("append");
    s.replace("c", b"second\n").expect("replace");
    let (got, end) = read_all(&s, "c");
    assert_eq!(lines(&got), ["second"]);
    assert_eq!(end.size, 7);
    s.replace("c", b"").expect("replace with nothing");
    assert_eq!(read_all(&s, "c"), (Vec::new(), ReadEnd::default()));
}

pub fn a_torn_last_line_is_handed_unterminated_and_appends_start_fresh<S: Storage>(mut s: S) {
    s.replace("t", b"a\nb\n{\"tor").expect("replace");
    let (got, _) = read_all(&s, "t");
    assert_eq!(got[0], (String::from("{\"tor"), false));
    assert_eq!(got[1], (String::from("b"), true));
    s.append("t", "c\n").expect("append");
    let (got, _) = read_all(&s, "t");
    assert_eq!(lines(&got), ["c", "{\"tor", "b", "a"], "the new line did not join the torn one");
    assert!(got.iter().all(|(_, t)| *t));
}

pub fn a_missing_file_reads_as_empty<S: Storage>(s: S) {
    assert_eq!(read_all(&s, "none"), (Vec::new(), ReadEnd::default()));
}

pub fn append_takes_whole_lines_only<S: Storage>(mut s: S) {
    assert!(s.append("p", "no newline").is_err(), "a partial line must be refused");
    assert!(s.append("p", "").is_err(), "nothing is not a line");
    assert_eq!(read_all(&s, "p").0, Vec::new(), "a refused append writes nothing");
}

pub fn long_lines_come_back_whole<S: Storage>(mut s: S) {
    let long = "L".repeat(200_000);
    s.append("l", &alloc::format!("short\n{long}\nend\n")).expect("append");
    let (got, end) = read_all(&s, "l");
    assert_eq!(lines(&got), ["end", long.as_str(), "short"]);
    assert_eq!(end.overlong, 0);
}
