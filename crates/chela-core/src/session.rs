//! Session files: one JSON message per line.
//!
//! ```text
//! {"role":"user","content":"Hello","ts":1738764800}
//! {"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use",...}],"ts":1738764801}
//! ```
//!
//! A message whose content is one text block is written as a string, so simple chats read like
//! MimiClaw's. Writers append a whole turn with one write (see [`encode_turn`]) and must start
//! it on a fresh line: if the file does not end with `\n`, write one first, or the new line
//! would join a torn one.
//!
//! The readers ([`load`] through a [`Storage`], [`parse`] for a text at hand) never fail on
//! content: lines that do not parse (a torn last line after a crash, a bad hand edit) are
//! skipped and counted, and the result is [`history::repair`]ed so it can be sent to a provider
//! as is. [`load`] reads newest first and stops at the byte budget, so a long session costs
//! what its recent part costs.

use alloc::string::String;
use alloc::vec::Vec;
use core::ops::ControlFlow;

use chela_proto::chat::{Block, Message, Role, content_serde};
use serde::{Deserialize, Serialize};

use crate::history::{self, Repaired};
use crate::storage::Storage;

#[derive(Serialize)]
struct LineOut<'a> {
    role: Role,
    #[serde(with = "content_serde")]
    content: &'a [Block],
    ts: u64,
}

#[derive(Deserialize)]
struct LineIn {
    role: Role,
    #[serde(with = "content_serde")]
    content: Vec<Block>,
    #[serde(default)]
    ts: u64,
}

/// Appends `message` as one line (with its `\n`) to `out`.
pub fn encode_line(message: &Message, ts: u64, out: &mut String) {
    let line = LineOut { role: message.role, content: &message.content, ts };
    // Serialising these types cannot fail: every map key is a string.
    if let Ok(s) = serde_json::to_string(&line) {
        out.push_str(&s);
        out.push('\n');
    }
}

/// The lines for a whole turn, to append with one write.
pub fn encode_turn(messages: &[Message], ts: u64) -> String {
    let mut out = String::new();
    for m in messages {
        encode_line(m, ts, &mut out);
    }
    out
}

/// What [`parse`] read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Loaded {
    pub messages: Vec<Message>,
    /// Lines that were not messages (torn or edited by hand).
    pub skipped_lines: usize,
    /// Whether the last line was incomplete (no newline and not a message).
    pub torn_tail: bool,
    /// What repair removed to make the history well-formed.
    pub repaired: Repaired,
    /// Timestamp of the last message, 0 when empty.
    pub last_ts: u64,
    /// The whole file's length in bytes ([`load`] only; [`parse`] leaves it 0).
    pub file_bytes: u64,
}

/// How much of a session [`load`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Request bytes ([`history::bytes`]) the loaded messages may take: whole exchanges are
    /// kept, newest first, while they fit.
    pub bytes: usize,
    /// File bytes to look at, at most, however many lines turn out unreadable.
    pub max_read: u64,
}

/// Loads the newest whole exchanges of session `name` that fit `budget`, reading the file from
/// its end and stopping at the first exchange that does not fit: older lines are neither read
/// nor parsed. Skipped lines are counted as in [`parse`], and the result is repaired.
pub fn load<S: Storage + ?Sized>(storage: &S, name: &str, budget: Budget) -> Result<Loaded, S::Error> {
    let mut out = Loaded::default();
    // Newest first: `kept` holds whole exchanges, `pending` the messages read since the last
    // exchange start (an exchange not yet seen from its beginning).
    let mut kept: Vec<Message> = Vec::new();
    let mut kept_bytes = 0usize;
    let mut pending: Vec<Message> = Vec::new();
    let mut pending_bytes = 0usize;
    let mut looked_at = 0u64;
    let end = storage.read_newest_first(name, &mut |line| {
        looked_at += line.bytes.len() as u64 + 1;
        let text = trim_cr(line.bytes);
        match serde_json::from_slice::<LineIn>(text) {
            Ok(l) if !l.content.is_empty() => {
                if kept.is_empty() && pending.is_empty() {
                    out.last_ts = l.ts;
                }
                let m = Message { role: l.role, content: l.content };
                pending_bytes += m.approx_bytes();
                let starts = history::starts_exchange(&m);
                pending.push(m);
                if kept_bytes + pending_bytes > budget.bytes {
                    // This exchange cannot fit whatever precedes it; it and everything older stay out.
                    pending.clear();
                    return ControlFlow::Break(());
                }
                if starts {
                    kept.append(&mut pending);
                    kept_bytes += core::mem::take(&mut pending_bytes);
                }
            }
            _ if text.iter().all(u8::is_ascii_whitespace) => {}
            _ => {
                out.skipped_lines += 1;
                if !line.terminated {
                    out.torn_tail = true;
                }
            }
        }
        if looked_at >= budget.max_read { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    })?;
    out.file_bytes = end.size;
    out.skipped_lines += end.overlong;
    // Messages older than the oldest exchange start read: not a whole exchange.
    out.repaired.leading = pending.len();
    drop(pending);
    kept.reverse();
    let repaired = history::repair(&mut kept);
    out.repaired.leading += repaired.leading;
    out.repaired.broken_tail = repaired.broken_tail;
    out.messages = kept;
    Ok(out)
}

/// Appends a whole turn to session `name` with one durable append.
pub fn append_turn<S: Storage + ?Sized>(
    storage: &mut S,
    name: &str,
    messages: &[Message],
    ts: u64,
) -> Result<(), S::Error> {
    if messages.is_empty() {
        return Ok(());
    }
    storage.append(name, &encode_turn(messages, ts))
}

fn trim_cr(bytes: &[u8]) -> &[u8] {
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// Reads a session file's text. Never fails; see the module docs.
pub fn parse(text: &str) -> Loaded {
    let mut out = Loaded::default();
    let ends_clean = text.is_empty() || text.ends_with('\n');
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        let is_last = lines.peek().is_none();
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<LineIn>(line) {
            Ok(l) if !l.content.is_empty() => {
                out.last_ts = l.ts;
                out.messages.push(Message { role: l.role, content: l.content });
            }
            _ => {
                out.skipped_lines += 1;
                if is_last && !ends_clean {
                    out.torn_tail = true;
                }
            }
        }
    }
    out.repaired = history::repair(&mut out.messages);
    out
}

#[cfg(test)]
mod crash_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::MemStorage;
    use alloc::vec;
    use chela_proto::chat::Json;
    use proptest::prelude::*;

    pub(super) fn turn() -> Vec<Message> {
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
                content: vec![Block::ToolResult { tool_use_id: "t1".into(), content: "12:00".into(), is_error: false }],
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

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse(&text);
        }
    }
}
