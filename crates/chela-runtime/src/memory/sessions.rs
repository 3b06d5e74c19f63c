//! Past conversations in the memory index (`memory.index_sessions`, off by default): the session
//! files `sessions/*.jsonl` and their archive `sessions/archive/*.jsonl`, cut into pieces that
//! `memory_search` returns as `sessions/<file>:<lines>: snippet`, like the notes.
//!
//! Only what the person and Chela wrote is indexed, the text blocks of user and assistant
//! messages. Tool calls and tool results never are: they carry what files, web pages and APIs
//! returned (tokens, keys, whole documents), which the person never said and which a search
//! from another chat must not turn up. Summary lines are left out too: they restate turns that
//! are indexed themselves.
//!
//! Off by default because it makes every conversation's words findable from any conversation
//! (a family group chat could search a private one). Turned off, the next `memory_search`
//! drops the conversations from the index.
//!
//! The files are outside input (what people typed, and whatever wrote the files): each is read
//! as a stream, bounded in bytes per file and per line; a line that is not a message (torn,
//! corrupt, over-long, a summary) is skipped and still counted, so line numbers stay the file's.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;

/// The folder of the session files, relative to the workspace.
pub const DIR: &str = "sessions";

/// Bytes read from one session file: a live file is rotated past 4 MiB, so this reads the
/// whole of every file Chela wrote. (Small in the unit tests, which check the bound.)
pub const MAX_FILE_BYTES: u64 = if cfg!(test) { 16 * 1024 } else { 8 * 1024 * 1024 };

/// A longer line (a huge tool result) is skipped without being held in memory. (Small in the
/// unit tests, below the file bound, so that both are checked.)
const MAX_LINE_BYTES: u64 = if cfg!(test) { 4 * 1024 } else { 1024 * 1024 };

/// Session files indexed at most, the last by name; folder entries looked at, at most.
const MAX_FILES: usize = if cfg!(test) { 4 } else { 10_000 };
const MAX_SCAN: usize = 100_000;

/// A piece ends after this many message lines or about this many bytes; each of its messages'
/// text is cut to this many bytes.
const PIECE_LINES: usize = 12;
const PIECE_BYTES: usize = 1500;

/// Whether an index source path is a session file.
pub fn is_session(rel: &str) -> bool {
    rel.starts_with("sessions/")
}

/// The session files under `root`, as paths relative to it, live ones and archived ones. The
/// folders' listing is bounded; only names ending in `.jsonl` count, dot files never.
pub fn list(root: &Path) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for sub in [DIR.to_owned(), format!("{DIR}/archive")] {
        let list = match std::fs::read_dir(root.join(&sub)) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for item in list.take(MAX_SCAN) {
            let name = item?.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(".jsonl") && !name.starts_with('.') {
                names.push(format!("{sub}/{name}"));
            }
        }
        out.extend(names);
    }
    chela_infra::sort::sort_by(&mut out, Ord::cmp);
    let first = out.len().saturating_sub(MAX_FILES);
    Ok(out.split_off(first))
}

/// One line of a session file, as far as the index cares: other fields (`ts`, a summary's
/// `kind`) are skipped unread.
#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<RawBlock>),
}

/// A content block: only a text block's `text` is kept; a tool result's `content` and a tool
/// call's `input` are never read into a field.
#[derive(Deserialize)]
struct RawBlock {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

/// The searchable pieces of a session file: `(first line, last line, text)`, lines counted from
/// 1. A new piece starts where the person speaks, so a piece is an exchange or part of one.
pub fn pieces(file: &File) -> io::Result<Vec<(u32, u32, String)>> {
    let mut reader = BufReader::new(file.take(MAX_FILE_BYTES));
    let mut out = Vec::new();
    let mut cur: Option<(u32, u32, String, usize)> = None;
    let mut buf = Vec::new();
    let mut no: u32 = 0;
    loop {
        buf.clear();
        let n = (&mut reader).take(MAX_LINE_BYTES + 1).read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        no = no.saturating_add(1);
        if buf.last() != Some(&b'\n') && n as u64 > MAX_LINE_BYTES {
            reader.skip_until(b'\n')?;
            continue;
        }
        let Some((who, text)) = message_text(&buf) else { continue };
        let full = cur.as_ref().is_some_and(|(_, _, t, lines)| *lines >= PIECE_LINES || t.len() >= PIECE_BYTES);
        if who == "Person" || full {
            out.extend(cur.take().map(|(first, last, text, _)| (first, last, text)));
        }
        let line = format!("{who}: {}", clip(&text, PIECE_BYTES));
        match cur.as_mut() {
            Some((_, last, t, lines)) => {
                *last = no;
                *lines += 1;
                t.push('\n');
                t.push_str(&line);
            }
            None => cur = Some((no, no, line, 1)),
        }
    }
    out.extend(cur.map(|(first, last, text, _)| (first, last, text)));
    Ok(out)
}

/// Who wrote a message line and its text, or `None` for anything else: not JSON, not a
/// message, or a message with no text (tool calls and results only).
fn message_text(line: &[u8]) -> Option<(&'static str, String)> {
    let line: Line = serde_json::from_slice(line).ok()?;
    let who = match line.role.as_deref()? {
        "user" => "Person",
        "assistant" => "Chela",
        _ => return None,
    };
    let text = match line.content? {
        Content::Text(t) => t,
        Content::Blocks(blocks) => {
            blocks.into_iter().filter(|b| b.kind == "text").filter_map(|b| b.text).collect::<Vec<_>>().join("\n")
        }
    };
    let text = text.trim();
    (!text.is_empty()).then(|| (who, text.to_owned()))
}

/// `text` on one line, at most `max` bytes, cut at a character boundary.
fn clip(text: &str, max: usize) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.len() <= max {
        return one;
    }
    let cut = (0..=max).rev().find(|&c| one.is_char_boundary(c)).unwrap_or(0);
    format!("{}…", &one[..cut])
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
