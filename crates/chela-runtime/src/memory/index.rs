//! The memory index: SQLite FTS5 over the memory files, so recall and search stay fast however
//! much is remembered.
//!
//! The plain files stay the truth (`memory/entries.jsonl`, `MEMORY.md`, the notes
//! `memory/*.md`); the index (`state/memory.sqlite`) is derived from them and may be deleted at
//! any time. Each file's stamp (inode, size, modification time in nanoseconds) is recorded with
//! the rows made from it, in the same transaction; before every search [`Index::refresh`]
//! compares the stamps with the files and re-reads the ones that changed, were added or went
//! away, so edits by hand or by the file tools are seen by the next search. A stamp is
//! recorded only when the file did not change while it was read. An index that cannot be
//! opened, has another schema or turns out corrupt is deleted and built again.
//!
//! The memory tools keep the entries' rows current themselves ([`Index::entries_changed`]),
//! under the entries lock, and only when the index reflected the file as it was before their
//! change; otherwise the next refresh reads the file again. A SIGKILL mid-write loses the open
//! transaction and nothing else: rows and stamps always agree, so an interrupted build is
//! finished by the next refresh, never trusted half-done.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chela_core::memory::{Entries, Entry, render_line};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::sessions;
use super::spelling::{self, Vocabulary};
use super::terms::{for_index, match_any, query_words};
use query::Table;

#[path = "index_query.rs"]
mod query;
use crate::workspace::Workspace;

/// The index file, in the workspace's `state/` folder (which the file tools cannot reach).
pub const INDEX_FILE: &str = "memory.sqlite";

/// Every write takes SQLite's write lock at its start (BEGIN IMMEDIATE), so a writer that has to
/// wait for another waits (the busy timeout) instead of failing with "database is locked" when a
/// read transaction cannot be upgraded under WAL.
const WRITE: rusqlite::TransactionBehavior = rusqlite::TransactionBehavior::Immediate;

/// Bumped when the tables change: an index of another version is rebuilt.
const SCHEMA_VERSION: &str = "2";

/// An entries line longer than this is skipped: an entry holds at most 2,000 bytes of content
/// and a few tags, so such a line was not written by Chela and reading it whole could take any
/// amount of memory.
const MAX_LINE_BYTES: u64 = 64 * 1024;

/// Bytes read from one note: a note bigger than this is indexed up to here.
const MAX_NOTE_BYTES: u64 = 4 * 1024 * 1024;

/// Notes indexed at most: 20,000 days is more than 54 years of daily notes. (Five in the unit
/// tests, which check the bound.)
const MAX_NOTES: usize = if cfg!(test) { 5 } else { 20_000 };

/// Folder entries of `memory/` looked at, at most.
const MAX_NOTE_SCAN: usize = 100_000;

/// A note chunk ends after this many lines or bytes even without a blank line or a new item.
const CHUNK_LINES: usize = 20;
const CHUNK_BYTES: usize = 1500;

/// Bytes of a chunk shown as a search result's snippet.
pub const SNIPPET_BYTES: usize = 300;

/// The most results one call returns.
pub const MAX_RESULTS: usize = 50;

pub const ENTRIES_SOURCE: &str = "memory/entries.jsonl";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources(path TEXT PRIMARY KEY, stamp TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries(rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, line TEXT NOT NULL,
    content TEXT NOT NULL, updated INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS chunks(rowid INTEGER PRIMARY KEY, path TEXT NOT NULL, first INTEGER NOT NULL,
    last INTEGER NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(content, tags, content='', contentless_delete=1,
    tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, content='', contentless_delete=1,
    tokenize='porter unicode61 remove_diacritics 2');
";

fn sql(e: rusqlite::Error) -> io::Error {
    io::Error::other(format!("memory index: {e}"))
}

/// Whether `e` says the database file itself is damaged or not a database.
fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
}

pub fn index_path(ws: &Workspace) -> PathBuf {
    ws.root().join(crate::authority::STATE_DIR).join(INDEX_FILE)
}

/// A file's identity and version: a changed stamp means the file must be read again.
pub fn stamp(meta: &std::fs::Metadata) -> String {
    format!("{}:{}:{}.{}", meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec())
}

/// A remembered fact found by [`Index::recall`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryHit {
    pub id: String,
    /// The entry as one line: `[m3] content (tags: a, b)`.
    pub line: String,
    pub content: String,
}

/// A note chunk found by [`Index::search`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteHit {
    /// Relative to the workspace: `MEMORY.md`, `memory/2026-11-30.md`.
    pub path: String,
    /// Lines, counted from 1, both included.
    pub first: u32,
    pub last: u32,
    pub snippet: String,
}

/// What a refresh or rebuild read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// Files read again (changed, new) or dropped (gone).
    pub files: usize,
    pub entries: usize,
    pub chunks: usize,
}

/// An open index. Cheap to open (one file, no scan); open one per call.
pub struct Index {
    db: Connection,
    root: PathBuf,
    path: PathBuf,
    /// Whether past conversations are indexed ([`Index::include_sessions`]); `None`: left as
    /// they are.
    sessions: Option<bool>,
}

impl Index {
    /// Opens the index of `ws`, creating it when missing and starting afresh when it is
    /// damaged or of another version.
    pub fn open(ws: &Workspace) -> io::Result<Index> {
        let path = index_path(ws);
        match Index::open_at(ws.root(), &path) {
            Ok(ix) => Ok(ix),
            Err(e) => {
                tracing::warn!("{}: {e}; building it again", path.display());
                remove_index_files(&path)?;
                Index::open_at(ws.root(), &path)
            }
        }
    }

    fn open_at(root: &Path, path: &Path) -> io::Result<Index> {
        if let Some(dir) = path.parent()
            && !dir.is_dir()
        {
            crate::workspace::create_private_dir(dir)?;
        }
        // Created here with mode 0600 before SQLite sees it; SQLite gives its journal files the
        // database's mode.
        std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
        let db = Connection::open(path).map_err(sql)?;
        db.busy_timeout(crate::lock::LOCK_WAIT).map_err(sql)?;
        // WAL: searches read while a refresh writes. synchronous=NORMAL: a power cut may lose the
        // last commit, which only makes the index older; rows and stamps still agree.
        db.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(())).map_err(sql)?;
        db.pragma_update(None, "synchronous", "NORMAL").map_err(sql)?;
        let version: Option<String> = match db.query_row("SELECT value FROM meta WHERE key='version'", [], |r| r.get(0))
        {
            Ok(v) => Some(v),
            Err(rusqlite::Error::QueryReturnedNoRows) => None,
            // No meta table yet: a new file.
            Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table") => None,
            Err(e) => return Err(sql(e)),
        };
        match version.as_deref() {
            Some(SCHEMA_VERSION) => {}
            Some(other) => return Err(io::Error::other(format!("index version {other}, not {SCHEMA_VERSION}"))),
            None => {
                db.execute_batch(SCHEMA).map_err(sql)?;
                db.execute_batch(spelling::SCHEMA).map_err(sql)?;
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('version', ?1)", [SCHEMA_VERSION])
                    .map_err(sql)?;
            }
        }
        Ok(Index { db, root: root.to_path_buf(), path: path.to_path_buf(), sessions: None })
    }

    /// Whether the next refreshes index the session files (`memory.index_sessions`): `true` reads
    /// them in, `false` drops them. Without a call they are left as they are, so a caller that
    /// does not know the setting neither adds nor drops them.
    pub fn include_sessions(&mut self, on: bool) {
        self.sessions = Some(on);
    }

    /// Runs `f`; if the database turns out damaged, deletes it, builds it again from the files
    /// and runs `f` once more. A damaged index never answers.
    fn retrying<T>(&mut self, mut f: impl FnMut(&mut Index) -> Result<T, rusqlite::Error>) -> io::Result<T> {
        match f(self) {
            Ok(v) => Ok(v),
            Err(e) if is_corrupt(&e) => {
                tracing::warn!("{}: {e}; building it again", self.path.display());
                let fresh = {
                    remove_index_files(&self.path)?;
                    Index::open_at(&self.root, &self.path)?
                };
                *self = Index { sessions: self.sessions, ..fresh };
                self.refresh()?;
                f(self).map_err(sql)
            }
            Err(e) => Err(sql(e)),
        }
    }

    /// Brings the index up to date with the files: reads again every file whose stamp changed,
    /// drops the ones that went away.
    pub fn refresh(&mut self) -> io::Result<Refreshed> {
        let on_disk = self.sources_on_disk()?;
        let known: HashMap<String, String> = match self.known_sources() {
            Ok(k) => k,
            Err(e) if is_corrupt(&e) => {
                remove_index_files(&self.path)?;
                *self = Index { sessions: self.sessions, ..Index::open_at(&self.root, &self.path)? };
                HashMap::new()
            }
            Err(e) => return Err(sql(e)),
        };
        let mut done = Refreshed::default();
        for (rel, stamp) in &on_disk {
            if known.get(rel) != Some(stamp) {
                let (entries, chunks) = self.read_source(rel)?;
                done.files += 1;
                done.entries += entries;
                done.chunks += chunks;
            }
        }
        let kept = |k: &str| self.sessions.is_none() && sessions::is_session(k);
        for rel in known.keys().filter(|k| !on_disk.contains_key(*k) && !kept(k)) {
            let tx = self.db.transaction_with_behavior(WRITE).map_err(sql)?;
            drop_source(&tx, rel).map_err(sql)?;
            tx.commit().map_err(sql)?;
            done.files += 1;
        }
        Ok(done)
    }

    /// Forgets everything and reads every file again. The rows are deleted, not the file:
    /// another process may have the index open, and SQLite removes a database's journal by
    /// name when it closes, which would take a new file's journal with it.
    pub fn rebuild(ws: &Workspace) -> io::Result<Refreshed> {
        let mut ix = Index::open(ws)?;
        ix.retrying(|ix| {
            let tx = ix.db.transaction_with_behavior(WRITE)?;
            tx.execute_batch(
                "DELETE FROM sources; DELETE FROM entries; DELETE FROM chunks; DELETE FROM words; \
                 INSERT INTO entries_fts(entries_fts) VALUES('delete-all'); \
                 INSERT INTO chunks_fts(chunks_fts) VALUES('delete-all');",
            )?;
            tx.commit()
        })?;
        ix.refresh()
    }

    fn known_sources(&self) -> Result<HashMap<String, String>, rusqlite::Error> {
        let mut st = self.db.prepare("SELECT path, stamp FROM sources")?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        rows.collect()
    }

    /// The files the index is made from, with their stamps.
    fn sources_on_disk(&self) -> io::Result<HashMap<String, String>> {
        let mut out = HashMap::new();
        let mut add = |rel: String| -> io::Result<()> {
            match std::fs::symlink_metadata(self.root.join(&rel)) {
                Ok(m) if m.is_file() => {
                    out.insert(rel, stamp(&m));
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            }
        };
        add(ENTRIES_SOURCE.to_owned())?;
        add("MEMORY.md".to_owned())?;
        if self.sessions == Some(true) {
            sessions::list(&self.root)?.into_iter().try_for_each(&mut add)?;
        }
        let dir = self.root.join("memory");
        let list = match std::fs::read_dir(&dir) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        let mut names: Vec<String> = Vec::new();
        // The folder is writable by the file tools, which the model drives: its listing is
        // bounded, and the newest notes (names sort by date) are the ones kept.
        for item in list.take(MAX_NOTE_SCAN) {
            let name = item?.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(".md") && !name.starts_with('.') {
                names.push(name.to_owned());
            }
        }
        chela_infra::sort::sort_by(&mut names, Ord::cmp);
        let first = names.len().saturating_sub(MAX_NOTES);
        for name in &names[first..] {
            add(format!("memory/{name}"))?;
        }
        Ok(out)
    }

    /// Reads one file into the index, replacing its rows, and records its stamp unless it
    /// changed while it was read. Returns the entries and chunks indexed.
    fn read_source(&mut self, rel: &str) -> io::Result<(usize, usize)> {
        let path = self.root.join(rel);
        let file = match open_regular(&path)? {
            Some(f) => f,
            None => {
                let tx = self.db.transaction_with_behavior(WRITE).map_err(sql)?;
                drop_source(&tx, rel).map_err(sql)?;
                tx.commit().map_err(sql)?;
                return Ok((0, 0));
            }
        };
        let before = stamp(&file.metadata()?);
        let tx = self.db.transaction_with_behavior(WRITE).map_err(sql)?;
        drop_source(&tx, rel).map_err(sql)?;
        let counts = if rel == ENTRIES_SOURCE {
            (insert_entries(&tx, file)?, 0)
        } else if sessions::is_session(rel) {
            (0, insert_pieces(&tx, rel, sessions::pieces(&file)?).map_err(sql)?)
        } else {
            let mut text = Vec::new();
            (&file).take(MAX_NOTE_BYTES).read_to_end(&mut text)?;
            (0, insert_chunks(&tx, rel, &String::from_utf8_lossy(&text)).map_err(sql)?)
        };
        // The stamp of what was read: if the file changed meanwhile (renamed over, appended),
        // no stamp is kept and the next refresh reads it again.
        let after = std::fs::symlink_metadata(&path).map(|m| stamp(&m)).ok();
        if after.as_deref() == Some(before.as_str()) {
            tx.execute("INSERT OR REPLACE INTO sources(path, stamp) VALUES (?1, ?2)", params![rel, before])
                .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(counts)
    }

    /// Called under the entries lock after `memory/entries.jsonl` was rewritten by a tool: if
    /// the index held the file as it was before (`before`, its stamp then), applies the change
    /// (`upserted` entries written, `removed` ids gone) and records the new stamp, so the next
    /// search need not read the whole file. Otherwise leaves the index stale for the next
    /// refresh to read.
    pub fn entries_changed(
        &mut self,
        before: Option<&str>,
        after: &str,
        upserted: &[&Entry],
        removed: &[&str],
    ) -> io::Result<bool> {
        let tx = self.db.transaction_with_behavior(WRITE).map_err(sql)?;
        let known: Option<String> = tx
            .query_row("SELECT stamp FROM sources WHERE path = ?1", [ENTRIES_SOURCE], |r| r.get(0))
            .optional()
            .map_err(sql)?;
        if known.is_none() || known.as_deref() != before {
            return Ok(false);
        }
        for id in removed.iter().copied().chain(upserted.iter().map(|e| e.id.as_str())) {
            delete_entry(&tx, id).map_err(sql)?;
        }
        let mut words = Vocabulary::default();
        for e in upserted {
            insert_entry(&tx, e, &mut words).map_err(sql)?;
        }
        tx.execute("UPDATE sources SET stamp = ?2 WHERE path = ?1", params![ENTRIES_SOURCE, after]).map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(true)
    }

    /// The entries matching `query`, best first (BM25; a tag counts twice a word of the text),
    /// at most `max` (and [`MAX_RESULTS`]). See [`query`] for how the query is searched.
    pub fn recall(&mut self, query: &str, max: usize) -> io::Result<Vec<EntryHit>> {
        let max = max.clamp(1, MAX_RESULTS) as i64;
        self.staged(Table::Entries, query, |ix, m, after| ix.recall_matching(m, max, after))
    }

    fn recall_matching(&mut self, m: &str, max: i64, after: i64) -> io::Result<Vec<EntryHit>> {
        self.retrying(|ix| {
            let mut st = ix.db.prepare_cached(
                "SELECT e.id, e.line, e.content FROM (SELECT rowid, bm25(entries_fts, 1.0, 2.0) AS score \
                 FROM entries_fts WHERE entries_fts MATCH ?1 AND rowid > ?3 ORDER BY score LIMIT ?2) AS f \
                 JOIN entries AS e ON e.rowid = f.rowid ORDER BY f.score, e.updated DESC",
            )?;
            let rows = st.query_map(params![m, max, after], |r| {
                Ok(EntryHit { id: r.get(0)?, line: r.get(1)?, content: r.get(2)? })
            })?;
            rows.collect()
        })
    }

    /// The note chunks (`MEMORY.md`, `memory/*.md`) matching `query`, best first, at most
    /// `max` (and [`MAX_RESULTS`]), each with a snippet of at most [`SNIPPET_BYTES`].
    pub fn search(&mut self, query: &str, max: usize) -> io::Result<Vec<NoteHit>> {
        let max = max.clamp(1, MAX_RESULTS) as i64;
        self.staged(Table::Chunks, query, |ix, m, after| ix.search_matching(m, max, after))
    }

    fn search_matching(&mut self, m: &str, max: i64, after: i64) -> io::Result<Vec<NoteHit>> {
        self.retrying(|ix| {
            let mut st = ix.db.prepare_cached(
                "SELECT c.path, c.first, c.last, c.text FROM (SELECT rowid, bm25(chunks_fts) AS score \
                 FROM chunks_fts WHERE chunks_fts MATCH ?1 AND rowid > ?3 ORDER BY score LIMIT ?2) AS f \
                 JOIN chunks AS c ON c.rowid = f.rowid ORDER BY f.score, c.path DESC",
            )?;
            let rows = st.query_map(params![m, max, after], |r| {
                let text: String = r.get(3)?;
                Ok(NoteHit { path: r.get(0)?, first: r.get(1)?, last: r.get(2)?, snippet: snippet(&text) })
            })?;
            rows.collect()
        })
    }

    /// The connection, for the vectors kept beside the rows (`embed`).
    pub(super) fn db(&self) -> &Connection {
        &self.db
    }

    pub(super) fn db_mut(&mut self) -> &mut Connection {
        &mut self.db
    }

    /// How many entries and note chunks the index holds.
    pub fn counts(&self) -> io::Result<(u64, u64)> {
        let count = |t: &str| self.db.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get::<_, u64>(0));
        Ok((count("entries").map_err(sql)?, count("chunks").map_err(sql)?))
    }
}

/// Deletes the index and its journal files; missing ones are fine.
fn remove_index_files(path: &Path) -> io::Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::remove_file(PathBuf::from(p)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Opens a regular file for reading without following a link or waiting on a FIFO; `None`
/// when it is missing or not a regular file.
fn open_regular(path: &Path) -> io::Result<Option<File>> {
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
    match std::fs::OpenOptions::new().read(true).custom_flags(flags.bits() as i32).open(path) {
        Ok(f) if f.metadata()?.is_file() => Ok(Some(f)),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        // ELOOP: a link where a memory file should be is not followed.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Ok(None),
        Err(e) => Err(e),
    }
}

fn drop_source(tx: &Transaction<'_>, rel: &str) -> Result<(), rusqlite::Error> {
    if rel == ENTRIES_SOURCE {
        tx.execute("INSERT INTO entries_fts(entries_fts) VALUES('delete-all')", [])?;
        tx.execute("DELETE FROM entries", [])?;
    } else {
        tx.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE path = ?1)", [rel])?;
        tx.execute("DELETE FROM chunks WHERE path = ?1", [rel])?;
    }
    tx.execute("DELETE FROM sources WHERE path = ?1", [rel])?;
    Ok(())
}

/// Streams `entries.jsonl` into the index: one line at a time, each bounded, so the file's
/// size bounds nothing but the time it takes. Unreadable and repeated lines are skipped, as
/// [`Entries::parse`] does.
fn insert_entries(tx: &Transaction<'_>, file: File) -> io::Result<usize> {
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let mut n = 0;
    let mut words = Vocabulary::default();
    loop {
        line.clear();
        let read = (&mut reader).take(MAX_LINE_BYTES + 1).read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        if line.last() != Some(&b'\n') && read as u64 > MAX_LINE_BYTES {
            // Skip the rest of the over-long line.
            reader.skip_until(b'\n')?;
            continue;
        }
        let Ok(text) = std::str::from_utf8(&line) else { continue };
        let (one, _) = Entries::parse(text);
        if let Some(e) = one.iter().next() {
            // The first line with an id wins, as in the file's parse.
            let taken: bool = tx
                .query_row("SELECT EXISTS(SELECT 1 FROM entries WHERE id = ?1)", [&e.id], |r| r.get(0))
                .map_err(sql)?;
            if !taken {
                insert_entry(tx, e, &mut words).map_err(sql)?;
                n += 1;
            }
        }
    }
    Ok(n)
}

fn insert_entry(tx: &Transaction<'_>, e: &Entry, words: &mut Vocabulary) -> Result<(), rusqlite::Error> {
    words.add(tx, &e.content)?;
    words.add(tx, &e.tags.join(" "))?;
    tx.prepare_cached("INSERT INTO entries(id, line, content, updated) VALUES (?1, ?2, ?3, ?4)")?.execute(params![
        e.id,
        render_line(e),
        e.content,
        e.updated as i64
    ])?;
    let rowid = tx.last_insert_rowid();
    tx.prepare_cached("INSERT INTO entries_fts(rowid, content, tags) VALUES (?1, ?2, ?3)")?.execute(params![
        rowid,
        for_index(&e.content),
        for_index(&e.tags.join(" "))
    ])?;
    Ok(())
}

fn delete_entry(tx: &Transaction<'_>, id: &str) -> Result<(), rusqlite::Error> {
    let rowid: Option<i64> = tx.query_row("SELECT rowid FROM entries WHERE id = ?1", [id], |r| r.get(0)).optional()?;
    if let Some(rowid) = rowid {
        tx.execute("DELETE FROM entries_fts WHERE rowid = ?1", [rowid])?;
        tx.execute("DELETE FROM entries WHERE rowid = ?1", [rowid])?;
    }
    Ok(())
}

fn insert_chunks(tx: &Transaction<'_>, rel: &str, text: &str) -> Result<usize, rusqlite::Error> {
    insert_pieces(tx, rel, chunks(text))
}

fn insert_pieces(
    tx: &Transaction<'_>,
    rel: &str,
    pieces: impl IntoIterator<Item = (u32, u32, String)>,
) -> Result<usize, rusqlite::Error> {
    let mut n = 0;
    let mut words = Vocabulary::default();
    for (first, last, chunk) in pieces {
        words.add(tx, &chunk)?;
        tx.prepare_cached("INSERT INTO chunks(path, first, last, text) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![rel, first, last, chunk])?;
        let rowid = tx.last_insert_rowid();
        tx.prepare_cached("INSERT INTO chunks_fts(rowid, text) VALUES (?1, ?2)")?
            .execute(params![rowid, for_index(&chunk)])?;
        n += 1;
    }
    Ok(n)
}

/// A note cut into the pieces a search returns: a new piece starts at a heading, at a list
/// item that is not indented, and after a blank line; a piece holds at most [`CHUNK_LINES`]
/// lines and about [`CHUNK_BYTES`] bytes. Lines are counted from 1.
pub fn chunks(text: &str) -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(u32, u32, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let starts = line.starts_with('#') || line.starts_with("- ") || line.starts_with("* ");
        let full =
            cur.as_ref().is_some_and(|(first, _, t)| (no - first) as usize >= CHUNK_LINES || t.len() >= CHUNK_BYTES);
        if line.trim().is_empty() || starts || full {
            out.extend(cur.take());
        }
        if line.trim().is_empty() {
            continue;
        }
        match cur.as_mut() {
            Some((_, last, t)) => {
                *last = no;
                t.push('\n');
                t.push_str(line);
            }
            None => cur = Some((no, no, line.to_owned())),
        }
    }
    out.extend(cur);
    out
}

/// The first [`SNIPPET_BYTES`] of a chunk, cut at a character boundary, on one line.
pub(super) fn snippet(text: &str) -> String {
    let one_line = text.split('\n').map(str::trim).collect::<Vec<_>>().join(" ");
    if one_line.len() <= SNIPPET_BYTES {
        return one_line;
    }
    let cut = (0..=SNIPPET_BYTES).rev().find(|&c| one_line.is_char_boundary(c)).unwrap_or(0);
    format!("{}…", &one_line[..cut])
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
