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
//!
//! A long conversation's oldest turns may be folded into a summary ([`crate::compaction`]),
//! appended as a line of its own kind:
//!
//! ```text
//! {"kind":"summary","text":"Ada asked about …","replaces":12,"keeps":6,"ts":1738765000}
//! ```
//!
//! It stands for every message line before it except the `keeps` newest ones, which stay
//! live. Readers stop there: older lines stay in the file, for the record, but are not read.
//! Readers that predate summaries skip the line as unreadable and load as before.

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

/// The summary that stands for a session's older turns (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub text: String,
    /// Messages folded into it by the compaction that wrote it (those folded before went in
    /// through the summary it replaced).
    pub replaces: u64,
    /// Message lines just before the summary line that it does not stand for.
    pub keeps: u64,
    pub ts: u64,
}

#[derive(Serialize)]
struct SummaryOut<'a> {
    kind: LineKind,
    text: &'a str,
    replaces: u64,
    keeps: u64,
    ts: u64,
}

#[derive(Deserialize)]
struct SummaryIn {
    #[serde(rename = "kind")]
    _kind: LineKind,
    text: String,
    #[serde(default)]
    replaces: u64,
    #[serde(default)]
    keeps: u64,
    #[serde(default)]
    ts: u64,
}

/// The kinds of line that are not messages.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum LineKind {
    Summary,
}

/// The summary's line, with its `\n`.
pub fn encode_summary(summary: &Summary) -> String {
    let line = SummaryOut {
        kind: LineKind::Summary,
        text: &summary.text,
        replaces: summary.replaces,
        keeps: summary.keeps,
        ts: summary.ts,
    };
    let mut out = serde_json::to_string(&line).unwrap_or_default();
    out.push('\n');
    out
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
    /// The newest summary line reached, which stands for the older turns.
    pub summary: Option<Summary>,
    /// Non-blank lines the summary stands for: older summaries among the lines it keeps live,
    /// and ([`parse`] only: [`load`] does not read them) every line older than those.
    pub covered_lines: usize,
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
///
/// A [summary line](Summary) ends the reading too, once the message lines it keeps live have
/// been read: everything older is what it stands for.
pub fn load<S: Storage + ?Sized>(storage: &S, name: &str, budget: Budget) -> Result<Loaded, S::Error> {
    let mut reader = Reader::new(budget);
    let end = storage.read_newest_first(name, &mut |line| reader.line(line.bytes, line.terminated))?;
    let mut out = reader.finish();
    out.file_bytes = end.size;
    out.skipped_lines += end.overlong;
    Ok(out)
}

/// Reads lines newest first for [`load`] and [`parse`], so both follow one set of rules.
struct Reader {
    out: Loaded,
    budget: Budget,
    /// Newest first: `kept` holds whole exchanges, `pending` the messages read since the last
    /// exchange start (an exchange not yet seen from its beginning).
    kept: Vec<Message>,
    kept_bytes: usize,
    pending: Vec<Message>,
    pending_bytes: usize,
    looked_at: u64,
    /// Once a summary was read: the message lines before it that are still live.
    live_left: Option<u64>,
}

impl Reader {
    fn new(budget: Budget) -> Reader {
        Reader {
            out: Loaded::default(),
            budget,
            kept: Vec::new(),
            kept_bytes: 0,
            pending: Vec::new(),
            pending_bytes: 0,
            looked_at: 0,
            live_left: None,
        }
    }

    /// Takes the next older line; `Break` when nothing older is wanted.
    fn line(&mut self, bytes: &[u8], terminated: bool) -> ControlFlow<()> {
        self.looked_at += bytes.len() as u64 + 1;
        let text = trim_cr(bytes);
        match serde_json::from_slice::<LineIn>(text) {
            Ok(l) if !l.content.is_empty() => {
                if self.kept.is_empty() && self.pending.is_empty() {
                    self.out.last_ts = l.ts;
                }
                let m = Message { role: l.role, content: l.content };
                self.pending_bytes += m.approx_bytes();
                let starts = history::starts_exchange(&m);
                self.pending.push(m);
                if self.kept_bytes + self.pending_bytes > self.budget.bytes {
                    // This exchange cannot fit whatever precedes it; it and everything older stay out.
                    self.pending.clear();
                    return ControlFlow::Break(());
                }
                if starts {
                    self.kept.append(&mut self.pending);
                    self.kept_bytes += core::mem::take(&mut self.pending_bytes);
                }
                if let Some(left) = &mut self.live_left {
                    *left -= 1;
                    if *left == 0 {
                        return ControlFlow::Break(());
                    }
                }
            }
            _ if is_blank(text) => {}
            _ => match serde_json::from_slice::<SummaryIn>(text) {
                // Only the newest summary counts; an older one inside its live part was folded into it.
                Ok(s) if self.out.summary.is_none() => {
                    let keeps = s.keeps;
                    self.out.summary = Some(Summary { text: s.text, replaces: s.replaces, keeps, ts: s.ts });
                    if keeps == 0 {
                        return ControlFlow::Break(());
                    }
                    self.live_left = Some(keeps);
                }
                Ok(_) => self.out.covered_lines += 1,
                Err(_) => {
                    self.out.skipped_lines += 1;
                    if !terminated {
                        self.out.torn_tail = true;
                    }
                }
            },
        }
        if self.looked_at >= self.budget.max_read { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    }

    fn finish(self) -> Loaded {
        let Reader { mut out, mut kept, pending, .. } = self;
        // Messages older than the oldest exchange start read: not a whole exchange.
        out.repaired.leading = pending.len();
        drop(pending);
        kept.reverse();
        let repaired = history::repair(&mut kept);
        out.repaired.leading += repaired.leading;
        out.repaired.broken_tail = repaired.broken_tail;
        out.messages = kept;
        out
    }
}

/// Whether a line holds nothing but white space (and is not worth a count).
fn is_blank(text: &[u8]) -> bool {
    core::str::from_utf8(text).is_ok_and(|s| s.trim().is_empty())
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

/// Appends `summary`'s line to session `name` with one durable append. `summary.keeps` must
/// count the live message lines before it, as [`live_lines`] does.
pub fn append_summary<S: Storage + ?Sized>(storage: &mut S, name: &str, summary: &Summary) -> Result<(), S::Error> {
    storage.append(name, &encode_summary(summary))
}

/// How many message lines at the end of session `name` hold `live`, the newest messages of a
/// history loaded from it (and appended to since): the `keeps` of a summary appended now.
/// Lines between them that are not in `live` (a turn that repair left out) are counted too;
/// they stay live and repair leaves them out again. `None` when the file's end does not hold
/// `live` within `max_read` bytes (the file was changed or started over meanwhile).
pub fn live_lines<S: Storage + ?Sized>(
    storage: &S,
    name: &str,
    live: &[Message],
    max_read: u64,
) -> Result<Option<u64>, S::Error> {
    if live.is_empty() {
        return Ok(Some(0));
    }
    let mut left = live.len();
    let (mut lines, mut looked_at) = (0u64, 0u64);
    let mut found = false;
    storage.read_newest_first(name, &mut |line| {
        looked_at += line.bytes.len() as u64 + 1;
        if let Ok(l) = serde_json::from_slice::<LineIn>(trim_cr(line.bytes))
            && !l.content.is_empty()
        {
            lines += 1;
            if l.role == live[left - 1].role && l.content == live[left - 1].content {
                left -= 1;
                if left == 0 {
                    found = true;
                    return ControlFlow::Break(());
                }
            }
        }
        if looked_at >= max_read { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    })?;
    Ok(found.then_some(lines))
}

fn trim_cr(bytes: &[u8]) -> &[u8] {
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// Reads a session file's text. Never fails; see the module docs. It follows [`load`]'s rules
/// with no budget: the same messages, counts and summary; lines older than what a summary
/// stands for are only counted, in [`Loaded::covered_lines`].
pub fn parse(text: &str) -> Loaded {
    const ALL: Budget = Budget { bytes: usize::MAX, max_read: u64::MAX };
    let mut reader = Reader::new(ALL);
    // Newest first: the piece after the last `\n` is the unterminated last line, if any.
    let mut lines = text.rsplit('\n');
    let mut stopped = match lines.next() {
        Some(last) if !last.is_empty() => reader.line(last.as_bytes(), false).is_break(),
        _ => false,
    };
    while !stopped && let Some(line) = lines.next() {
        stopped = reader.line(line.as_bytes(), true).is_break();
    }
    let covered = lines.filter(|l| !is_blank(trim_cr(l.as_bytes()))).count();
    let out = reader.finish();
    Loaded { covered_lines: out.covered_lines + covered, ..out }
}

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod summary_tests;

#[cfg(test)]
mod tests {
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
    fn any_turn(k: usize) -> impl Strategy<Value = Vec<Message>> {
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
}
