//! The Feishu event ids already handled, kept across restarts in `state/feishu_events.log`, so
//! an event posted again (Feishu's own retry, or a captured event replayed) runs no second turn,
//! also after `chela run` was restarted.
//!
//! The file is one id a line, appended and fsync'd before the event is handed on (a crash then
//! loses at most the event itself, never runs it twice). The reader is tolerant: a line cut by
//! a crash, or anything that is not an id, is skipped. Bounded: the newest [`KEEP`] ids are
//! remembered; once the file holds twice that many lines it is rewritten (atomically) with the
//! newest [`KEEP`].

use std::collections::{HashSet, VecDeque};
use std::io;
use std::path::{Path, PathBuf};

use crate::workspace::{
    Replace, Workspace, append_durable, create_private_dir, open_dir, read_bounded, write_atomic_at,
};

/// The file's name, in the workspace's `state/` folder.
pub const FILE: &str = "feishu_events.log";
/// Event ids remembered.
pub const KEEP: usize = 4096;
/// Longest id taken; Feishu's are 32 hex digits. A longer one is refused, never stored.
pub const MAX_ID_BYTES: usize = 128;
/// Largest file read: twice [`KEEP`] lines of the longest ids, and some.
const MAX_FILE_BYTES: u64 = (2 * KEEP as u64 + 1) * (MAX_ID_BYTES as u64 + 1);

/// The ids seen, newest last, and where they are kept.
pub struct Seen {
    path: PathBuf,
    order: VecDeque<String>,
    set: HashSet<String>,
    /// Lines in the file now (the rewrite's trigger).
    lines: usize,
    /// Ids remembered: [`KEEP`], fewer in tests.
    keep: usize,
}

/// Whether `id` can be an event id: printable ASCII without spaces, at most [`MAX_ID_BYTES`].
fn well_formed(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID_BYTES && id.bytes().all(|b| b.is_ascii_graphic())
}

/// What [`Seen::first`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// New: recorded, hand the event on.
    First,
    /// Handled before (in this run or an earlier one).
    Again,
    /// Not an id Feishu sends: dropped unrecorded.
    Malformed,
}

impl Seen {
    /// The ids of `ws` as the file has them. An unreadable file is reported and started over:
    /// deduplication then covers this run only, which is what it did before the file existed.
    pub fn open(ws: &Workspace) -> Seen {
        Seen::keeping(ws, KEEP)
    }

    fn keeping(ws: &Workspace, keep: usize) -> Seen {
        let path = ws.root().join("state").join(FILE);
        let text = match read_bounded(&path, MAX_FILE_BYTES) {
            Ok(text) => text.unwrap_or_default(),
            Err(e) => {
                chela_log::warn!(
                    "cannot read {}: {e}; Feishu events seen before this start are forgotten",
                    path.display()
                );
                String::new()
            }
        };
        let mut seen = Seen { path, order: VecDeque::new(), set: HashSet::new(), lines: 0, keep };
        for id in text.lines() {
            seen.lines += 1;
            if well_formed(id) {
                seen.remember(id);
            }
        }
        seen
    }

    fn remember(&mut self, id: &str) {
        if !self.set.insert(id.to_owned()) {
            return;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > self.keep
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
    }

    /// Decides about event `id` and, when it is new, records it on disk first.
    pub fn first(&mut self, id: &str) -> Verdict {
        if !well_formed(id) {
            return Verdict::Malformed;
        }
        if self.set.contains(id) {
            return Verdict::Again;
        }
        self.remember(id);
        if let Err(e) = self.append(id) {
            // Still handled once in this run; only a restart could show it again.
            chela_log::warn!("cannot record Feishu event {id} in {}: {e}", self.path.display());
        }
        Verdict::First
    }

    fn append(&mut self, id: &str) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        if self.lines + 1 >= 2 * self.keep {
            let mut text = String::with_capacity(self.order.len() * 33);
            for kept in &self.order {
                text.push_str(kept);
                text.push('\n');
            }
            write_atomic_at(&open_dir(dir)?, FILE.as_ref(), text.as_bytes(), Replace::Yes)?;
            self.lines = self.order.len();
            return Ok(());
        }
        create_private_dir(dir)?;
        // One write of the whole line, fsync'd; a line cut by a crash is skipped when read.
        append_durable(&self.path, &format!("{id}\n"))?;
        self.lines += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A small bound, so the test rewrites the file a few times without thousands of fsyncs.
    const KEPT: usize = 16;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().to_owned())).unwrap();
        (dir, ws)
    }

    #[test]
    fn ids_survive_a_restart_within_the_bound_and_a_cut_line_is_skipped() {
        let (_d, ws) = ws();
        let mut seen = Seen::keeping(&ws, KEPT);
        assert_eq!(seen.first("e0"), Verdict::First);
        assert_eq!(seen.first("e0"), Verdict::Again);
        assert_eq!(seen.first("bad id\n"), Verdict::Malformed);
        assert_eq!(seen.first(&"x".repeat(MAX_ID_BYTES + 1)), Verdict::Malformed);
        // A crash cut the last append short: the fragment is only an id that was never sent.
        let path = ws.root().join("state").join(FILE);
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"e1\ne2\xff\xfe").unwrap();
        drop(f);
        let mut again = Seen::keeping(&ws, KEPT);
        assert_eq!(again.first("e0"), Verdict::Again, "forgotten across the restart");
        assert_eq!(again.first("e1"), Verdict::Again);
        for i in 2..=2 * KEPT + 10 {
            assert_eq!(again.first(&format!("e{i}")), Verdict::First);
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines < 2 * KEPT, "the file was rewritten within its bound: {lines} lines");
        let mut third = Seen::keeping(&ws, KEPT);
        assert_eq!(third.first(&format!("e{}", 2 * KEPT + 10)), Verdict::Again);
        assert_eq!((third.set.len(), third.order.len()), (KEPT, KEPT));
        // The oldest fell out of the bound.
        assert_eq!(third.first("e0"), Verdict::First);
    }
}
