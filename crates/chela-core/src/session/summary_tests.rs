//! Summary lines: how they are written, read back by both readers, and tolerated when torn.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::chat::Message;
use proptest::prelude::*;

use super::tests::turn;
use super::{
    Budget, LineIn, Loaded, Summary, append_summary, append_turn, encode_summary, encode_turn, live_lines, load, parse,
};
use crate::history;
use crate::storage::Storage;
use crate::storage::mem::MemStorage;

const ALL: Budget = Budget { bytes: usize::MAX, max_read: u64::MAX };

fn summary(text: &str, keeps: u64) -> Summary {
    Summary { text: text.into(), replaces: 8, keeps, ts: 42 }
}

fn numbered(k: u64) -> Vec<Message> {
    alloc::vec![Message::user_text(format!("question {k}")), Message::assistant_text(format!("answer {k}"))]
}

fn text_of(s: &MemStorage) -> String {
    String::from_utf8(s.contents("s").unwrap().to_vec()).unwrap()
}

#[test]
fn the_line_is_plain_json_that_old_readers_skip() {
    let line = encode_summary(&summary("Ada likes \"tea\".\nAnd cake.", 4));
    assert_eq!(
        line,
        "{\"kind\":\"summary\",\"text\":\"Ada likes \\\"tea\\\".\\nAnd cake.\",\"replaces\":8,\"keeps\":4,\"ts\":42}\n"
    );
    assert_eq!(line.lines().count(), 1);
    // A reader that knows only messages (every release before summaries) fails to read it,
    // and such a reader skips and counts a line it cannot read.
    assert!(LineIn::read(line.trim_end().as_bytes()).is_err());
}

#[test]
fn a_summary_keeps_the_lines_it_names_live_and_stands_for_the_rest() {
    let mut s = MemStorage::new();
    for k in 0..4 {
        append_turn(&mut s, "s", &numbered(k), k).unwrap();
    }
    // Turns 0 and 1 folded; turns 2 and 3 (four message lines) stay live.
    append_summary(&mut s, "s", &summary("Turns 0 and 1.", 4)).unwrap();
    append_turn(&mut s, "s", &numbered(4), 4).unwrap();
    let loaded = load(&s, "s", ALL).unwrap();
    let expected: Vec<Message> = (2..5).flat_map(numbered).collect();
    assert_eq!(loaded.messages, expected);
    assert_eq!(loaded.summary, Some(summary("Turns 0 and 1.", 4)));
    assert_eq!(loaded.skipped_lines, 0);
    assert_eq!(loaded.last_ts, 4);
    let text = text_of(&s);
    assert_eq!(loaded, Loaded { file_bytes: text.len() as u64, covered_lines: 0, ..parse(&text) });
    assert_eq!(parse(&text).covered_lines, 4, "the folded turns are still in the file");
}

#[test]
fn older_lines_are_not_read_past_the_summary() {
    let mut s = MemStorage::new();
    // Junk older than the summary would be counted if it were read.
    s.append("s", &(0..500).map(|i| format!("not a message {i}\n")).collect::<String>()).unwrap();
    append_summary(&mut s, "s", &summary("Everything before.", 0)).unwrap();
    append_turn(&mut s, "s", &turn(), 1).unwrap();
    let loaded = load(&s, "s", ALL).unwrap();
    assert_eq!(loaded.messages, turn());
    assert_eq!(loaded.skipped_lines, 0);
    assert_eq!(loaded.summary.unwrap().text, "Everything before.");
    assert_eq!(parse(&text_of(&s)).covered_lines, 500);
}

#[test]
fn only_the_newest_summary_counts() {
    let mut s = MemStorage::new();
    append_turn(&mut s, "s", &numbered(0), 0).unwrap();
    append_summary(&mut s, "s", &summary("old", 2)).unwrap();
    append_turn(&mut s, "s", &numbered(1), 1).unwrap();
    // The new summary keeps turns 0 and 1 live, across the old summary line.
    append_summary(&mut s, "s", &summary("new", 4)).unwrap();
    let loaded = load(&s, "s", ALL).unwrap();
    assert_eq!(loaded.summary.unwrap().text, "new");
    assert_eq!(loaded.messages, [numbered(0), numbered(1)].concat());
    let parsed = parse(&text_of(&s));
    assert_eq!(parsed.summary.unwrap().text, "new");
    assert_eq!(parsed.covered_lines, 1, "the old summary line is counted as covered");
    assert_eq!(load(&s, "s", ALL).unwrap().covered_lines, 1);
}

#[test]
fn a_torn_summary_line_is_skipped_and_the_session_loads_as_before() {
    let mut s = MemStorage::new();
    for k in 0..3 {
        append_turn(&mut s, "s", &numbered(k), k).unwrap();
    }
    let before = load(&s, "s", ALL).unwrap();
    let line = encode_summary(&summary("Cut short.", 2));
    let mut text = text_of(&s);
    text.push_str(&line[..line.len() / 2]);
    s.replace("s", text.as_bytes()).unwrap();
    let loaded = load(&s, "s", ALL).unwrap();
    assert_eq!(loaded.messages, before.messages);
    assert_eq!(loaded.summary, None);
    assert!(loaded.torn_tail);
    assert_eq!(loaded.skipped_lines, 1);
    // The next turn starts on a fresh line; the torn summary stays skipped in the middle.
    append_turn(&mut s, "s", &numbered(3), 3).unwrap();
    let again = load(&s, "s", ALL).unwrap();
    assert_eq!(again.messages, (0..4).flat_map(numbered).collect::<Vec<_>>());
    assert!(!again.torn_tail);
}

#[test]
fn live_lines_counts_from_the_end_to_the_kept_messages_with_what_repair_dropped() {
    let mut s = MemStorage::new();
    append_turn(&mut s, "s", &numbered(0), 0).unwrap();
    append_turn(&mut s, "s", &numbered(1), 1).unwrap();
    // A question a crash left unanswered: repair drops it on load, but it is a line.
    append_turn(&mut s, "s", &[Message::user_text("lost")], 2).unwrap();
    append_turn(&mut s, "s", &numbered(2), 3).unwrap();
    let history = load(&s, "s", ALL).unwrap().messages;
    assert_eq!(history.len(), 6);
    let live = &history[2..];
    assert_eq!(live_lines(&s, "s", live, u64::MAX).unwrap(), Some(5));
    assert_eq!(live_lines(&s, "s", &[], u64::MAX).unwrap(), Some(0));
    assert_eq!(live_lines(&s, "s", &numbered(9), u64::MAX).unwrap(), None, "not in the file");
    assert_eq!(live_lines(&s, "s", live, 10).unwrap(), None, "not within the bytes looked at");
    append_summary(&mut s, "s", &summary("Turn 0.", 5)).unwrap();
    assert_eq!(load(&s, "s", ALL).unwrap().messages, live);
}

#[test]
fn a_summary_out_of_the_budget_is_not_reached() {
    let mut s = MemStorage::new();
    append_turn(&mut s, "s", &numbered(0), 0).unwrap();
    append_summary(&mut s, "s", &summary("Far back.", 0)).unwrap();
    for k in 1..20 {
        append_turn(&mut s, "s", &numbered(k), k).unwrap();
    }
    let per_turn = history::bytes(&numbered(10));
    let loaded = load(&s, "s", Budget { bytes: per_turn * 3, max_read: u64::MAX }).unwrap();
    assert_eq!(loaded.messages.len(), 6);
    assert_eq!(loaded.summary, None);
}

proptest! {
    /// A session of `n` turns, folded before turn `fold` (a summary keeping the rest live),
    /// then `more` turns: both readers load the live turns and the summary; the folded turns
    /// are covered, not lost from the file.
    #[test]
    fn any_fold_of_a_session_loads_the_live_turns_and_the_summary(
        n in 1u64..8, fold in any::<proptest::sample::Index>(), more in 0u64..3, text in "[a-z \"\\\\\n😀]{1,40}",
    ) {
        let fold = fold.index(n as usize) as u64;
        let mut s = MemStorage::new();
        for k in 0..n {
            append_turn(&mut s, "s", &turn_n(k), k).unwrap();
        }
        let history = load(&s, "s", ALL).unwrap().messages;
        let live = &history[(fold as usize) * 4..];
        let keeps = live_lines(&s, "s", live, u64::MAX).unwrap().unwrap();
        prop_assert_eq!(keeps, live.len() as u64);
        let sum = Summary { text: text.clone(), replaces: fold * 4, keeps, ts: n };
        append_summary(&mut s, "s", &sum).unwrap();
        for k in n..n + more {
            append_turn(&mut s, "s", &turn_n(k), k).unwrap();
        }
        let expected: Vec<Message> = (fold..n + more).flat_map(turn_n).collect();
        let loaded = load(&s, "s", ALL).unwrap();
        prop_assert_eq!(&loaded.messages, &expected);
        prop_assert_eq!(loaded.summary.as_ref(), Some(&sum));
        let all = text_of(&s);
        let parsed = parse(&all);
        prop_assert_eq!(parsed.covered_lines, (fold * 4) as usize);
        prop_assert_eq!(Loaded { covered_lines: 0, file_bytes: all.len() as u64, ..parsed }, loaded);
    }
}

/// [`turn`] with ids and texts of its own, so turns are told apart.
fn turn_n(k: u64) -> Vec<Message> {
    let text =
        encode_turn(&turn(), k).replace("t1", &format!("t1_{k}")).replace("What time", &format!("({k}) What time"));
    parse(&text).messages
}

/// A line of a session file that summaries, hand edits and crashes may have made.
fn any_line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u64..4, 0usize..4).prop_map(|(k, i)| {
            let mut l = String::new();
            super::encode_line(&turn_n(k)[i], k, &mut l);
            l
        }),
        2 => (0u64..6, "[a-z\"\\\n]{0,8}").prop_map(|(keeps, text)| encode_summary(&Summary { text, replaces: 1, keeps, ts: 9 })),
        1 => Just(String::from("{\"kind\":\"summary\",\"text\":\"to\n")),
        1 => Just(String::from("not json\n")),
        1 => Just(String::from(" \r\n")),
    ]
}

proptest! {
    /// What the `session_lines` fuzz target checks, over files mixing messages, summaries and
    /// junk: every non-blank line is accounted for once, and what loads writes back (summary
    /// first) and loads again the same.
    #[test]
    fn every_line_is_accounted_for_and_what_loads_writes_back(lines in proptest::collection::vec(any_line(), 0..24), cut in 0usize..40) {
        let mut text = lines.concat();
        // Sometimes torn at the end.
        let cut = (0..=cut.min(text.len())).rev().find(|&c| text.is_char_boundary(text.len() - c)).unwrap_or(0);
        text.truncate(text.len() - cut);
        let loaded = parse(&text);
        let non_blank = text.split('\n').filter(|l| !l.trim_end_matches('\r').trim().is_empty()).count();
        let accounted = loaded.messages.len() + loaded.skipped_lines + loaded.repaired.leading + loaded.repaired.broken_tail
            + usize::from(loaded.summary.is_some()) + loaded.covered_lines;
        prop_assert_eq!(accounted, non_blank, "{:?}", loaded);
        let mut s = MemStorage::new();
        s.replace("s", text.as_bytes()).unwrap();
        // Loading reads the same, but not the covered lines older than the summary's live part.
        let through_storage = load(&s, "s", ALL).unwrap();
        prop_assert!(through_storage.covered_lines <= loaded.covered_lines);
        prop_assert_eq!(
            Loaded { covered_lines: 0, file_bytes: 0, ..through_storage },
            Loaded { covered_lines: 0, ..loaded.clone() }
        );
        let head = loaded.summary.as_ref().map(|s| Summary { keeps: 0, ..s.clone() });
        let written = head.as_ref().map(encode_summary).unwrap_or_default() + &encode_turn(&loaded.messages, loaded.last_ts);
        let again = parse(&written);
        prop_assert_eq!(&again.messages, &loaded.messages);
        prop_assert_eq!(again.summary, head);
        prop_assert_eq!((again.covered_lines, again.skipped_lines, again.torn_tail), (0, 0, false));
        prop_assert_eq!(again.repaired, history::Repaired::default());
    }
}
