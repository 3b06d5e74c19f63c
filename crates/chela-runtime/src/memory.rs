//! The memory files in the workspace, and the system prompt built from them.
//!
//! `SOUL.md`, `AGENTS.md`, `USER.md` and `MEMORY.md` sit at the top of the workspace; daily
//! notes are `memory/YYYY-MM-DD.md`, dated in the person's time zone; structured entries are
//! `memory/entries.jsonl`. Defaults are written on first run and never over a person's edits.

use std::io;
use std::path::{Path, PathBuf};

use chela_core::cap::{Registry, Scope};
use chela_core::config as keys;
use chela_core::memory::{AGENTS_DEFAULT, Entries, MEMORY_DEFAULT, SOUL_DEFAULT, USER_DEFAULT};
use chela_core::prompt::{self, Bounds, Inputs, TurnContext};
use chela_core::zone::Zone;

use crate::config::Config;
use crate::localtime::{Date, Local};
use crate::workspace::{Replace, Workspace, open_dir, read_bounded, write_atomic, write_atomic_at};

#[cfg(feature = "memory")]
pub mod embed;
#[cfg(feature = "memory")]
pub mod engine;
#[cfg(feature = "memory")]
pub mod fuse;
#[cfg(feature = "memory")]
pub mod index;
#[cfg(feature = "memory")]
mod sessions;
#[cfg(feature = "memory")]
mod spelling;
#[cfg(feature = "memory")]
mod terms;

/// The memory files and what a fresh workspace gets.
pub const FILES: [(&str, &str); 4] = [
    ("SOUL.md", SOUL_DEFAULT),
    ("AGENTS.md", AGENTS_DEFAULT),
    ("USER.md", USER_DEFAULT),
    ("MEMORY.md", MEMORY_DEFAULT),
];

/// Memory files are read up to this size; the prompt bounds cut them much shorter.
const MAX_FILE: u64 = 1024 * 1024;

pub fn memory_dir(ws: &Workspace) -> PathBuf {
    ws.root().join("memory")
}

pub fn entries_path(ws: &Workspace) -> PathBuf {
    memory_dir(ws).join("entries.jsonl")
}

pub fn daily_path(ws: &Workspace, date: Date) -> PathBuf {
    memory_dir(ws).join(format!("{date}.md"))
}

/// Writes the default memory files that are missing, and `HEARTBEAT.md` (whose comment says
/// how the heartbeat reads it). Returns the names written.
pub fn ensure_defaults(ws: &Workspace) -> io::Result<Vec<&'static str>> {
    std::fs::create_dir_all(memory_dir(ws))?;
    let mut written = Vec::new();
    let heartbeat = ("HEARTBEAT.md", chela_core::heartbeat::HEARTBEAT_DEFAULT);
    for (name, text) in FILES.into_iter().chain([heartbeat]) {
        if create_if_missing(&ws.root().join(name), text.as_bytes())? {
            written.push(name);
        }
    }
    Ok(written)
}

/// Creates `path` with `bytes` unless it exists, atomically: the file appears whole or not at
/// all, and a file that appeared meanwhile (a person's edit) is left alone.
fn create_if_missing(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    if path.exists() {
        return Ok(false);
    }
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => (open_dir(dir)?, name),
        _ => return Err(io::Error::new(io::ErrorKind::InvalidInput, "no file name")),
    };
    // The kernel refuses the rename if the name exists meanwhile; a plain rename would replace it.
    match write_atomic_at(&dir, name, bytes, Replace::No) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

fn read_text(path: &Path) -> String {
    match read_bounded(path, MAX_FILE) {
        Ok(t) => t.unwrap_or_default(),
        Err(e) => format!("({} could not be read: {e})", path.display()),
    }
}

/// The newest entries rendered for the prompt, at most `max` bytes. The file is in order of
/// change, so it is read from its end, newest first, and reading stops at the bound: the cost
/// stays the same however much is remembered.
pub fn recent_entries(ws: &Workspace, max: usize) -> String {
    let shown = crate::storage::FileStorage::for_file(&entries_path(ws))
        .and_then(|(storage, name)| chela_core::memory::render_newest(&storage, &name, max));
    shown.unwrap_or_else(|e| format!("(memory/entries.jsonl could not be read: {e})"))
}

/// An entries line longer than this is skipped unread: an entry holds at most 2,000 bytes of
/// content, so such a line was not written by Chela, and it must not take any amount of memory.
pub const MAX_ENTRY_LINE: usize = 64 * 1024;

/// Loads the structured entries, streaming the file a line at a time (its size has no limit:
/// years of memory); unreadable and over-long lines are skipped (and logged).
pub fn load_entries(ws: &Workspace) -> io::Result<Entries> {
    use std::io::{BufRead, Read};
    use std::os::unix::fs::OpenOptionsExt;
    let path = entries_path(ws);
    // O_NONBLOCK: a FIFO put in the file's place would otherwise block the read forever.
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Entries::default()),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!("{} is not a regular file", path.display())));
    }
    let mut reader = io::BufReader::new(file);
    let mut lines: Vec<String> = Vec::new();
    let mut too_long = 0;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut reader).take(MAX_ENTRY_LINE as u64 + 1).read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') && n > MAX_ENTRY_LINE {
            reader.skip_until(b'\n')?;
            too_long += 1;
            continue;
        }
        lines.push(String::from_utf8_lossy(&buf).into_owned());
    }
    let mut ids = std::collections::HashSet::new();
    let (entries, skipped) = Entries::parse_lines(lines.iter().map(|l| l.trim_end_matches(['\n', '\r'])), |_, id| {
        !ids.insert(id.to_owned())
    });
    if skipped + too_long > 0 {
        chela_log::warn!("{}: skipped {} unreadable line(s)", path.display(), skipped + too_long);
    }
    Ok(entries)
}

/// Changes the structured entries: under the entries lock, loads the file, applies `change`
/// and, if it succeeds, writes the file back atomically. Concurrent changes (several tool
/// calls, several processes) are applied one after the other, none lost, and ids stay unique
/// because each is derived from the content read under the lock.
pub fn update_entries<T, E: From<io::Error>>(
    ws: &Workspace,
    change: impl FnOnce(&mut Entries) -> Result<T, E>,
) -> Result<T, E> {
    update_entries_then(ws, change, |_, _, _| {})
}

/// [`update_entries`], then `then` with the entries as written, the change's answer and the
/// file's metadata from before the change (`None`: there was no file), still under the lock:
/// what keeps a derived copy (the index) in step with the file.
pub fn update_entries_then<T, E: From<io::Error>>(
    ws: &Workspace,
    change: impl FnOnce(&mut Entries) -> Result<T, E>,
    then: impl FnOnce(&Entries, &T, Option<&std::fs::Metadata>),
) -> Result<T, E> {
    let path = entries_path(ws);
    std::fs::create_dir_all(memory_dir(ws))?;
    crate::lock::with_file_lock(&path, || {
        let before = std::fs::symlink_metadata(&path).ok();
        let mut entries = load_entries(ws)?;
        let out = change(&mut entries)?;
        write_atomic(&path, entries.to_jsonl().as_bytes())?;
        then(&entries, &out, before.as_ref());
        Ok(out)
    })
}

/// The last `days` daily notes up to `today`, oldest first, each under a `## date` heading.
pub fn recent_daily(ws: &Workspace, today: Date, days: i64) -> String {
    let mut out = String::new();
    for back in (0..days).rev() {
        let date = today.days_before(back);
        let path = daily_path(ws, date);
        if !path.exists() {
            continue;
        }
        let text = read_text(&path);
        // The file's own `# date` heading is replaced by ours.
        let body = text.trim_start().strip_prefix(&format!("# {date}")).unwrap_or(&text).trim();
        if body.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!("### {date}\n{body}"));
    }
    out
}

/// Builds the system prompt for a turn on `channel` / `chat_id` at `now`, its stable part first.
pub fn system_prompt(
    ws: &Workspace,
    cfg: &Config,
    registry: &Registry,
    tz: &Zone,
    now: i64,
    channel: &str,
    chat_id: &str,
) -> prompt::System {
    let read = |name: &str| read_text(&ws.root().join(name));
    let (soul, agents, user, memory) = (read("SOUL.md"), read("AGENTS.md"), read("USER.md"), read("MEMORY.md"));
    let bounds = bounds(cfg);
    let entries = recent_entries(ws, bounds.entries);
    let z = Local::at(tz, now);
    let daily = recent_daily(ws, z.date(), cfg.int(keys::MEMORY_RECENT_DAYS));
    let guidance = registry.guidance_for(Scope::default());
    let local_time = z.rfc3339();
    let weekday = z.weekday();
    let inputs = Inputs {
        soul: &soul,
        agents: &agents,
        user: &user,
        memory: &memory,
        entries: &entries,
        daily: &daily,
        tool_guidance: &guidance,
        context: TurnContext { channel, chat_id, local_time: &local_time, weekday, timezone: tz.name() },
    };
    prompt::build_system(&inputs, &bounds)
}

fn bounds(cfg: &Config) -> Bounds {
    Bounds {
        soul: cfg.usize(keys::PROMPT_SOUL_BYTES),
        agents: cfg.usize(keys::PROMPT_AGENTS_BYTES),
        user: cfg.usize(keys::PROMPT_USER_BYTES),
        memory: cfg.usize(keys::PROMPT_MEMORY_BYTES),
        entries: cfg.usize(keys::PROMPT_ENTRIES_BYTES),
        daily: cfg.usize(keys::PROMPT_DAILY_BYTES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().to_path_buf())).unwrap();
        ws.ensure().unwrap();
        (dir, ws)
    }

    #[test]
    fn defaults_are_written_once_and_edits_are_kept() {
        let (_d, ws) = ws();
        assert_eq!(ensure_defaults(&ws).unwrap(), ["SOUL.md", "AGENTS.md", "USER.md", "MEMORY.md", "HEARTBEAT.md"]);
        std::fs::write(ws.root().join("SOUL.md"), "I am a pirate.").unwrap();
        std::fs::remove_file(ws.root().join("USER.md")).unwrap();
        assert_eq!(ensure_defaults(&ws).unwrap(), ["USER.md"]);
        assert_eq!(std::fs::read_to_string(ws.root().join("SOUL.md")).unwrap(), "I am a pirate.");
        let leftovers: Vec<_> = std::fs::read_dir(ws.root())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn the_prompt_reads_only_the_newest_entries() {
        let (_d, ws) = ws();
        let mut e = Entries::default();
        for i in 0..500u64 {
            e.store(&format!("fact number {i} {}", "x".repeat(100)), &[], "", i).unwrap();
        }
        e.update("m3", "an old fact, changed just now", None, 1000).unwrap();
        write_atomic(&entries_path(&ws), e.to_jsonl().as_bytes()).unwrap();
        let shown = recent_entries(&ws, 1024);
        assert!(shown.len() <= 1024 && shown.lines().count() >= 5, "{shown}");
        assert!(shown.ends_with("[m3] an old fact, changed just now"), "{shown}");
        assert!(shown.contains("fact number 499") && !shown.contains("fact number 400 "), "{shown}");
        assert_eq!(shown, e.render(1024), "the same as rendering the whole file");
    }
}
