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
//! The reader ([`parse`]) never fails: lines that do not parse (a torn last line after a crash,
//! a bad hand edit) are skipped and counted, and the result is [`history::repair`]ed so it can be
//! sent to a provider as is.

use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::chat::{Block, Message, Role, content_serde};
use serde::{Deserialize, Serialize};

use crate::history::{self, Repaired};

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
mod tests {
    use super::*;
    use alloc::vec;
    use chela_proto::chat::Json;
    use proptest::prelude::*;

    fn turn() -> Vec<Message> {
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
