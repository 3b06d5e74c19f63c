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

use chela_proto::chat::{Block, Message, Role, read_content, write_content};
use chela_proto::json::Writer;
use chela_proto::json::read::{self, Reader as Json, field, object};

use crate::history::{self, Repaired};
use crate::storage::Storage;

/// A message line: `role`, `content` (a string or an array of blocks), `ts` (0 if missing).
/// Read by the pull reader with the rules of the serde derive it replaced: unknown fields
/// skipped, a field given twice refused.
struct LineIn {
    role: Role,
    content: Vec<Block>,
    ts: u64,
}

impl LineIn {
    fn read(text: &[u8]) -> read::Result<LineIn> {
        read::read_all(text, |r| {
            let (mut role, mut content, mut ts, mut seen) = (None, None, 0, 0);
            object(r, |r, key| {
                match key {
                    "role" => role = Some(field(r, &mut seen, 1, Role::read)?),
                    "content" => content = Some(field(r, &mut seen, 2, read_content)?),
                    "ts" => ts = field(r, &mut seen, 4, Json::u64)?,
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            let role = role.ok_or_else(|| r.error("missing field `role`"))?;
            let content = content.ok_or_else(|| r.error("missing field `content`"))?;
            Ok(LineIn { role, content, ts })
        })
    }
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

impl Summary {
    /// A summary line: `kind` must be `"summary"`, `text` is required, the counts are 0 if
    /// missing.
    fn read(text: &[u8]) -> read::Result<Summary> {
        read::read_all(text, |r| {
            let (mut kind, mut text, mut seen) = (false, None, 0);
            let (mut replaces, mut keeps, mut ts) = (0, 0, 0);
            object(r, |r, key| {
                match key {
                    "kind" => {
                        let at = r.offset();
                        if field(r, &mut seen, 1, Json::str)? != "summary" {
                            return Err(read::Error { what: "unknown variant, expected `summary`", offset: at });
                        }
                        kind = true;
                    }
                    "text" => text = Some(field(r, &mut seen, 2, Json::string_owned)?),
                    "replaces" => replaces = field(r, &mut seen, 4, Json::u64)?,
                    "keeps" => keeps = field(r, &mut seen, 8, Json::u64)?,
                    "ts" => ts = field(r, &mut seen, 16, Json::u64)?,
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            if !kind {
                return Err(r.error("missing field `kind`"));
            }
            let text = text.ok_or_else(|| r.error("missing field `text`"))?;
            Ok(Summary { text, replaces, keeps, ts })
        })
    }
}

/// The summary's line, with its `\n`.
pub fn encode_summary(summary: &Summary) -> String {
    let mut out = String::new();
    Writer::new(&mut out)
        .begin_object()
        .field_str("kind", "summary")
        .field_str("text", &summary.text)
        .field_u64("replaces", summary.replaces)
        .field_u64("keeps", summary.keeps)
        .field_u64("ts", summary.ts)
        .end_object();
    out.push('\n');
    out
}

/// Appends `message` as one line (with its `\n`) to `out`.
pub fn encode_line(message: &Message, ts: u64, out: &mut String) {
    let mut w = Writer::new(out);
    w.begin_object().field_str("role", message.role.as_str()).key("content");
    write_content(&message.content, &mut w);
    w.field_u64("ts", ts).end_object();
    out.push('\n');
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
        match LineIn::read(text) {
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
            _ => match Summary::read(text) {
                // Only the newest summary counts; an older one inside its live part was folded into it.
                Ok(s) if self.out.summary.is_none() => {
                    let keeps = s.keeps;
                    self.out.summary = Some(s);
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
        if let Ok(l) = LineIn::read(trim_cr(line.bytes))
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
mod json_tests;
#[cfg(test)]
mod summary_tests;

#[cfg(test)]
mod tests;
