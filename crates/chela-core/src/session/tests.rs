use super::*;
use crate::history::Repaired;
use crate::storage::mem::MemStorage;
use alloc::vec;
use chela_proto::chat::Json;
use proptest::prelude::*;

pub(crate) fn turn() -> Vec<Message> {
    vec![
        Message::user_text("What time is it?"),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::text("Checking."),
                Block::ToolUse {
                    id: "t1".into(),
                    name: "get_current_time".into(),
                    input: Json::parse(r#"{"zone":"Asia/Shanghai"}"#).unwrap(),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "t1".into(),
                content: "12:00".into(),
                images: Default::default(),
                is_error: false,
            }],
        },
        Message::assistant_text("Noon.\nLunch?"),
    ]
}

#[test]
fn lines_look_like_mimiclaw_for_plain_text() {
    let mut s = String::new();
    encode_line(&Message::user_text("Hello"), 1738764800, &mut s);
    assert_eq!(s, "{\"role\":\"user\",\"content\":\"Hello\",\"ts\":1738764800}\n");
}

#[test]
fn a_turn_round_trips() {
    let text = encode_turn(&turn(), 7);
    assert_eq!(text.lines().count(), 4);
    let loaded = parse(&text);
    assert_eq!(loaded.messages, turn());
    assert_eq!(loaded.skipped_lines, 0);
    assert_eq!(loaded.last_ts, 7);
    assert!(!loaded.torn_tail);
}

#[test]
fn a_torn_last_line_is_skipped() {
    let mut text = encode_turn(&turn(), 1);
    text.push_str(&encode_turn(&turn()[..2], 2));
    // Cut the second turn inside its assistant line.
    text.truncate(text.len() - 20);
    let loaded = parse(&text);
    assert!(loaded.torn_tail);
    assert_eq!(loaded.skipped_lines, 1);
    // The second turn's question has no answer, so repair drops it too.
    assert_eq!(loaded.messages, turn());
}

#[test]
fn bad_lines_in_the_middle_are_skipped_not_fatal() {
    let t = encode_turn(&turn(), 1);
    let text = alloc::format!(
        "not json\n{t}{{\"role\":\"robot\",\"content\":\"x\"}}\n\n{}",
        encode_turn(&[Message::user_text("a"), Message::assistant_text("b")], 3)
    );
    let loaded = parse(&text);
    assert_eq!(loaded.skipped_lines, 2);
    assert_eq!(loaded.messages.len(), 6);
    assert!(!loaded.torn_tail);
}

#[test]
fn questions_left_unanswered_by_crashes_are_all_dropped() {
    // The person asked, Chela crashed before answering, they asked again, it crashed again.
    let mut text = encode_turn(&turn(), 1);
    text.push_str(&encode_turn(&[Message::user_text("again?")], 2));
    text.push_str(&encode_turn(&[Message::user_text("hello?")], 3));
    let loaded = parse(&text);
    assert_eq!(loaded.messages, turn(), "a history must end with an answer");
    assert_eq!(loaded.repaired.broken_tail, 2);
    assert_eq!(parse(&encode_turn(&loaded.messages, 4)).messages, loaded.messages);
}

#[test]
fn crlf_files_and_a_missing_final_newline_are_fine() {
    let text = encode_turn(&turn(), 1).replace('\n', "\r\n");
    assert_eq!(parse(&text).messages, turn());
    let text = encode_turn(&turn(), 1);
    assert_eq!(parse(text.trim_end()).messages, turn());
}

const ALL: Budget = Budget { bytes: usize::MAX, max_read: u64::MAX };

#[test]
fn loading_through_storage_equals_parsing_the_whole_file() {
    let mut s = MemStorage::new();
    for i in 0..5 {
        append_turn(&mut s, "s", &turn(), i).unwrap();
    }
    let text = String::from_utf8(s.contents("s").unwrap().to_vec()).unwrap();
    let mut torn = text.clone();
    torn.push_str(&encode_turn(&turn()[..2], 9)[..30]);
    for t in [text, torn] {
        s.replace("s", t.as_bytes()).unwrap();
        let loaded = load(&s, "s", ALL).unwrap();
        assert_eq!(loaded, Loaded { file_bytes: t.len() as u64, ..parse(&t) });
    }
    assert_eq!(load(&s, "none", ALL).unwrap(), Loaded::default());
}

#[test]
fn loading_stops_at_the_budget_without_parsing_older_lines() {
    let mut s = MemStorage::new();
    // Old lines that would be counted as skipped if they were parsed.
    let junk: String = (0..2000).map(|i| alloc::format!("not a message {i}\n")).collect();
    s.append("s", &junk).unwrap();
    for i in 0..50 {
        append_turn(&mut s, "s", &turn(), i).unwrap();
    }
    let whole = parse(core::str::from_utf8(s.contents("s").unwrap()).unwrap());
    let per_turn = history::bytes(&turn());
    let budget = Budget { bytes: 3 * per_turn + per_turn / 2, max_read: u64::MAX };
    let loaded = load(&s, "s", budget).unwrap();
    assert_eq!(loaded.messages.len(), 12, "three whole turns fit, the fourth does not");
    assert_eq!(loaded.messages[..], whole.messages[whole.messages.len() - 12..]);
    assert!(history::starts_exchange(&loaded.messages[0]));
    assert_eq!(loaded.skipped_lines, 0, "the old lines were not read");
    assert_eq!(loaded.last_ts, 49);
    assert_eq!(loaded.file_bytes, s.contents("s").unwrap().len() as u64);
    // However unreadable the file, reading stops at `max_read`.
    let mut j = MemStorage::new();
    j.append("j", &junk).unwrap();
    let loaded = load(&j, "j", Budget { bytes: usize::MAX, max_read: 1000 }).unwrap();
    assert!(loaded.skipped_lines < 100, "{} lines were parsed", loaded.skipped_lines);
}

proptest! {
    #[test]
    fn any_prefix_of_a_file_loads_whole_turns(cut in 0usize..2000) {
        let mut text = String::new();
        for i in 0..3 { text.push_str(&encode_turn(&turn(), i)); }
        let cut = cut.min(text.len());
        let cut = (0..=cut).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
        let loaded = parse(&text[..cut]);
        prop_assert_eq!(loaded.messages.len() % 4, 0);
        let expected = turn();
        for chunk in loaded.messages.chunks(4) { prop_assert_eq!(chunk, expected.as_slice()); }
    }

}

// Structured properties: generate valid sessions (turns with text, tool calls and results,
// unicode and JSON escapes), damage one line, and check exactly what survives. Expected
// results come from a model of the rules written here, turn by turn, not from `repair`.

/// Text with what JSON must escape (quotes, backslashes, line ends, control bytes) and
/// characters of every UTF-8 length.
fn any_text() -> impl Strategy<Value = String> {
    r#"[a-z "\\\n\t\r\x01\x7fé世😀{}\[\]:,]{0,16}"#
}

fn any_input() -> impl Strategy<Value = Json> {
    proptest::collection::btree_map(
        "[a-z_]{1,6}",
        prop_oneof![any::<i64>().prop_map(serde_json::Value::from), any_text().prop_map(serde_json::Value::from)],
        0..4,
    )
    .prop_map(|m| {
        let text = serde_json::to_string(&m.into_iter().collect::<serde_json::Map<_, _>>()).unwrap();
        Json::parse(&text).unwrap()
    })
}

/// A tool result's images: usually none, sometimes one or two (a line written before they
/// existed has none, and one written with them must load the same).
fn any_images() -> impl Strategy<Value = chela_proto::chat::Images> {
    let image = ("image/(png|jpeg|webp)", "[A-Za-z0-9+/]{0,24}={0,2}")
        .prop_map(|(media_type, data)| chela_proto::chat::Image { media_type, data });
    proptest::collection::vec(image, 0..3).prop_map(chela_proto::chat::Images::from)
}

/// One turn: the person's text, 0..3 rounds of tool calls (with text or not) and their
/// results, then the answer. Tool ids are unique across the session.
pub(crate) fn any_turn(k: usize) -> impl Strategy<Value = Vec<Message>> {
    let round = (
        proptest::option::of(any_text()),
        proptest::collection::vec((any_input(), any_text(), any::<bool>(), any_images()), 1..4),
    );
    (any_text(), proptest::collection::vec(round, 0..3), any_text()).prop_map(move |(question, rounds, answer)| {
        let mut turn = vec![Message::user_text(question)];
        for (r, (text, calls)) in rounds.into_iter().enumerate() {
            let mut uses: Vec<Block> = text.into_iter().map(Block::text).collect();
            let mut results = Vec::new();
            for (i, (input, output, is_error, images)) in calls.into_iter().enumerate() {
                let id = alloc::format!("toolu_{k}_{r}_{i}");
                uses.push(Block::ToolUse { id: id.clone(), name: "get_current_time".into(), input });
                results.push(Block::ToolResult { tool_use_id: id.into(), content: output, images, is_error });
            }
            turn.push(Message { role: Role::Assistant, content: uses });
            turn.push(Message { role: Role::User, content: results });
        }
        turn.push(Message::assistant_text(answer));
        turn
    })
}

fn any_session() -> impl Strategy<Value = Vec<Vec<Message>>> {
    (1usize..5).prop_flat_map(|n| (0..n).map(any_turn).collect::<Vec<_>>())
}

fn file_of(turns: &[Vec<Message>]) -> (String, Vec<String>) {
    let mut lines = Vec::new();
    for (k, t) in turns.iter().enumerate() {
        for m in t {
            let mut l = String::new();
            encode_line(m, k as u64 + 1, &mut l);
            lines.push(l);
        }
    }
    (lines.concat(), lines)
}

/// Where line `j` of the file is: (turn, index within the turn).
fn locate(turns: &[Vec<Message>], mut j: usize) -> (usize, usize) {
    for (k, t) in turns.iter().enumerate() {
        if j < t.len() {
            return (k, j);
        }
        j -= t.len();
    }
    unreachable!("line index past the file")
}

/// The session without turn `k`: what a turn whose exchange broke leaves behind.
fn without_turn(turns: &[Vec<Message>], k: usize) -> Vec<Message> {
    turns.iter().enumerate().filter(|(tk, _)| *tk != k).flat_map(|(_, t)| t.iter().cloned()).collect()
}

/// What a session with line `j` lost must load as. A lost opening question merges the turn
/// into the one before (or, for the first turn, leaves answers with no question, which are
/// dropped); any other lost line leaves its turn unfinished or unpaired, and repair drops
/// that turn alone: the turns after it survive.
fn expected_without(turns: &[Vec<Message>], j: usize) -> Vec<Message> {
    let (k, i) = locate(turns, j);
    if i > 0 {
        return without_turn(turns, k);
    }
    if k == 0 {
        return turns[1..].concat();
    }
    turns
        .iter()
        .enumerate()
        .flat_map(|(tk, t)| t.iter().enumerate().filter(move |(ti, _)| (tk, *ti) != (k, 0)).map(|(_, m)| m.clone()))
        .collect()
}

proptest! {
    #[test]
    fn generated_sessions_round_trip_exactly(turns in any_session()) {
        let (text, lines) = file_of(&turns);
        prop_assert_eq!(text.lines().count(), lines.len(), "one message per line, whatever the text holds");
        let loaded = parse(&text);
        prop_assert_eq!(&loaded.messages, &turns.concat());
        prop_assert_eq!(loaded.skipped_lines, 0);
        prop_assert_eq!(loaded.repaired, Repaired::default());
        prop_assert!(!loaded.torn_tail);
        prop_assert_eq!(loaded.last_ts, turns.len() as u64);
        // Windows line ends load the same.
        prop_assert_eq!(parse(&text.replace('\n', "\r\n")).messages, turns.concat());
    }

    #[test]
    fn a_cut_anywhere_keeps_the_whole_turns_before_it(turns in any_session(), at in any::<proptest::sample::Index>()) {
        let (text, lines) = file_of(&turns);
        let cut = (0..=at.index(text.len() + 1)).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
        let loaded = parse(&text[..cut]);
        // A line loads when its text up to (not including) the newline survives.
        let mut end = 0;
        let mut complete = 0;
        let mut torn = false;
        for l in &lines {
            if end + l.len() - 1 <= cut { complete += 1; } else if end < cut { torn = true; }
            end += l.len();
        }
        let mut expected = Vec::new();
        let mut seen = 0;
        for t in &turns {
            if seen + t.len() <= complete { expected.extend(t.iter().cloned()); }
            seen += t.len();
        }
        prop_assert_eq!(&loaded.messages, &expected);
        prop_assert_eq!(loaded.torn_tail, torn);
        prop_assert_eq!(loaded.skipped_lines, usize::from(torn));
    }

    #[test]
    fn a_damaged_line_is_skipped_and_counted_and_the_rest_follows_the_rules(
        turns in any_session(),
        line in any::<proptest::sample::Index>(),
        at in any::<proptest::sample::Index>(),
        how in 0u8..3,
    ) {
        let (_, mut lines) = file_of(&turns);
        let j = line.index(lines.len());
        let l = &lines[j];
        lines[j] = match how {
            // Torn inside (a torn write, then more appended after a newline).
            0 => alloc::format!("{}\n", &l[..(0..=at.index(l.len() - 1)).rev().find(|&c| l.is_char_boundary(c)).unwrap_or(0)]),
            // Edited by hand into something that is not a message.
            1 => "{\"role\":\"robot\",\"content\":\"beep\"}\n".into(),
            _ => "<<<<<<< HEAD\n".into(),
        };
        let loaded = parse(&lines.concat());
        let lost = usize::from(lines[j] != "\n");
        prop_assert_eq!(loaded.skipped_lines, lost);
        prop_assert!(!loaded.torn_tail);
        prop_assert_eq!(&loaded.messages, &expected_without(&turns, j));

        // A garbage line between two lines costs nothing but a count.
        let mut with_garbage = file_of(&turns).1;
        with_garbage.insert(j, "\u{1}not json {\n".into());
        let loaded = parse(&with_garbage.concat());
        prop_assert_eq!(loaded.skipped_lines, 1);
        prop_assert_eq!(loaded.messages, turns.concat());
    }

    #[test]
    fn a_duplicated_line_costs_at_most_its_own_turn(turns in any_session(), line in any::<proptest::sample::Index>()) {
        let (_, mut lines) = file_of(&turns);
        let j = line.index(lines.len());
        lines.insert(j, lines[j].clone());
        let loaded = parse(&lines.concat());
        prop_assert_eq!(loaded.skipped_lines, 0);
        let (k, i) = locate(&turns, j);
        let expected: Vec<Message> = if i == 0 {
            // The first copy of a repeated question is an exchange without an answer: dropped.
            turns.concat()
        } else if i == turns[k].len() - 1 {
            // A repeated answer is still a valid history.
            let mut all = turns.concat();
            all.insert(j, all[j].clone());
            all
        } else {
            // A tool call twice, or its results twice, do not pair up: that turn is dropped.
            without_turn(&turns, k)
        };
        prop_assert_eq!(loaded.messages, expected);
    }

    #[test]
    fn any_flipped_byte_is_a_message_or_one_counted_line(turns in any_session(), at in any::<proptest::sample::Index>(), bit in 0u8..8) {
        let (text, _) = file_of(&turns);
        let mut bytes = text.into_bytes();
        let i = at.index(bytes.len());
        bytes[i] ^= 1 << bit;
        let text = String::from_utf8_lossy(&bytes);
        let loaded = parse(&text);
        let lines = text.split('\n').filter(|l| !l.trim().is_empty()).count();
        // A flip that makes a line end splits one line into two damaged ones; any other
        // flip damages at most the one line it is in.
        let damaged = if bytes[i] == b'\n' { 2 } else { 1 };
        prop_assert!(loaded.skipped_lines <= damaged, "{} lines skipped", loaded.skipped_lines);
        prop_assert_eq!(loaded.messages.len() + loaded.skipped_lines + loaded.repaired.leading + loaded.repaired.broken_tail, lines);
    }
}
