//! The memory index: the engine's segments (`super::engine`) over the memory files, so recall
//! and search stay fast however much is remembered.
//!
//! The plain files stay the truth (`memory/entries.jsonl`, `MEMORY.md`, the notes
//! `memory/*.md`); the index (the folder `state/memory-index/`) is derived from them and may be
//! deleted at any time. Each file's stamp (inode, size, modification time in nanoseconds) is
//! recorded in the manifest with the documents made from it, in the same atomic write; before
//! every search [`Index::refresh`] compares the stamps with the files and re-reads the ones that
//! changed, were added or went away, so edits by hand or by the file tools are seen by the next
//! search. A stamp is recorded only when the file did not change while it was read. An index
//! that fails a check (a damaged file, another version) is started afresh and built again.
//!
//! The memory tools keep the entries' documents current themselves ([`Index::entries_changed`]),
//! under the entries lock, and only when the index reflected the file as it was before their
//! change; otherwise the next refresh reads the file again. A SIGKILL mid-write loses that
//! write and nothing else (`super::engine::store`): documents and stamps always agree, so an
//! interrupted build is finished by the next refresh, never trusted half-done.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chela_core::memory::{Entries, Entry, render_line};
use chela_infra::sort::sort_by;

use super::engine::codec::{Reader, damaged, is_damaged, put_str, put_u64, put_varint};
use super::engine::manifest::Table;
use super::engine::query::staged;
use super::engine::store::{Hit, Store, Writer};
use super::sessions;
use super::spelling;
use super::terms::for_index;

#[path = "index_query.rs"]
mod query;
use crate::workspace::Workspace;

/// The index folder, in the workspace's `state/` folder (which the file tools cannot reach).
pub const INDEX_DIR: &str = "memory-index";

/// The SQLite index earlier versions kept; removed when found.
const OLD_INDEX_FILE: &str = "memory.sqlite";

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

pub fn index_path(ws: &Workspace) -> PathBuf {
    ws.root().join(crate::authority::STATE_DIR).join(INDEX_DIR)
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

/// An open index. Cheap to open (the manifest and the segments' footers); open one per call.
pub struct Index {
    store: Store,
    root: PathBuf,
    dir: PathBuf,
    /// Whether past conversations are indexed ([`Index::include_sessions`]); `None`: left as
    /// they are.
    sessions: Option<bool>,
}

impl Index {
    /// Opens the index of `ws`, creating it when missing and starting afresh when it is
    /// damaged or of another version.
    pub fn open(ws: &Workspace) -> io::Result<Index> {
        let dir = index_path(ws);
        if !dir.is_dir() {
            crate::workspace::create_private_dir(&dir)?;
            remove_old_index(ws.root());
        }
        let store = match Store::open(&dir) {
            Ok(s) => s,
            Err(e) if is_damaged(&e) => {
                chela_log::warn!("{}: {e}; building it again", dir.display());
                Store::reset(&dir)?;
                Store::open(&dir)?
            }
            Err(e) => return Err(e),
        };
        Ok(Index { store, root: ws.root().to_path_buf(), dir, sessions: None })
    }

    /// Whether the next refreshes index the session files (`memory.index_sessions`): `true` reads
    /// them in, `false` drops them. Without a call they are left as they are, so a caller that
    /// does not know the setting neither adds nor drops them.
    pub fn include_sessions(&mut self, on: bool) {
        self.sessions = Some(on);
    }

    fn reopen(&mut self) -> io::Result<()> {
        self.store = Store::open(&self.dir)?;
        Ok(())
    }

    /// Runs `f`; if the index turns out damaged, starts it afresh, builds it again from the
    /// files and runs `f` once more. A damaged index never answers.
    fn retrying<T>(&mut self, mut f: impl FnMut(&mut Index) -> io::Result<T>) -> io::Result<T> {
        match f(self) {
            Err(e) if is_damaged(&e) => {
                chela_log::warn!("{}: {e}; building it again", self.dir.display());
                Store::reset(&self.dir)?;
                self.reopen()?;
                self.refresh()?;
                f(self)
            }
            other => other,
        }
    }

    /// Runs `f` on a writer under the index's lock and opens the result; a damaged manifest
    /// starts the index afresh first.
    pub(super) fn write<T>(&mut self, mut f: impl FnMut(&mut Writer, &Path) -> io::Result<T>) -> io::Result<T> {
        let root = self.root.clone();
        let out = match Store::write(&self.dir, |w| f(w, &root)) {
            Err(e) if is_damaged(&e) => {
                chela_log::warn!("{}: {e}; building it again", self.dir.display());
                Store::reset(&self.dir)?;
                Store::write(&self.dir, |w| f(w, &root))?
            }
            other => other?,
        };
        self.reopen()?;
        Ok(out)
    }

    /// Brings the index up to date with the files: reads again every file whose stamp changed,
    /// drops the ones that went away. All of it in one write.
    pub fn refresh(&mut self) -> io::Result<Refreshed> {
        let on_disk = self.sources_on_disk()?;
        let sessions = self.sessions;
        let stale = |known: &HashMap<String, String>| {
            let kept = |k: &str| sessions.is_none() && sessions::is_session(k);
            on_disk.iter().any(|(rel, stamp)| known.get(rel) != Some(stamp))
                || known.keys().any(|k| !on_disk.contains_key(k) && !kept(k))
        };
        if !stale(&known_sources(&self.store)) {
            return Ok(Refreshed::default());
        }
        self.write(|w, root| {
            // Read again under the lock: another process may have done the work meanwhile.
            let known: HashMap<String, String> =
                w.manifest().sources.iter().map(|s| (s.path.clone(), s.stamp.clone())).collect();
            let mut done = Refreshed::default();
            let mut changed: Vec<&String> =
                on_disk.iter().filter(|(rel, stamp)| known.get(*rel) != Some(*stamp)).map(|(r, _)| r).collect();
            sort_by(&mut changed, Ord::cmp);
            for rel in changed {
                let (entries, chunks) = read_source(w, root, rel)?;
                done.files += 1;
                done.entries += entries;
                done.chunks += chunks;
            }
            let kept = |k: &str| sessions.is_none() && sessions::is_session(k);
            for rel in known.keys().filter(|k| !on_disk.contains_key(*k) && !kept(k)) {
                w.drop_source(rel);
                done.files += 1;
            }
            Ok(done)
        })
    }

    /// Forgets everything and reads every file again.
    pub fn rebuild(ws: &Workspace) -> io::Result<Refreshed> {
        let mut ix = Index::open(ws)?;
        ix.write(|w, _| {
            let all: Vec<String> = w.manifest().sources.iter().map(|s| s.path.clone()).collect();
            for rel in &all {
                w.drop_source(rel);
            }
            Ok(())
        })?;
        ix.refresh()
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
        self.write(|w, _| {
            let known = w.manifest().source(ENTRIES_SOURCE).map(|s| s.stamp.clone());
            if known.is_none() || known.as_deref() != before {
                return Ok(false);
            }
            for id in removed.iter().copied().chain(upserted.iter().map(|e| e.id.as_str())) {
                if let Some(doc) = w.find_key(Table::Entries, id)? {
                    w.remove(ENTRIES_SOURCE, doc)?;
                }
            }
            for e in upserted {
                add_entry(w, e)?;
            }
            w.set_stamp(ENTRIES_SOURCE, after);
            Ok(true)
        })
    }

    /// The entries matching `query`, best first (BM25; a tag counts twice a word of the text),
    /// at most `max` (and [`MAX_RESULTS`]). See [`query`] for how the query is searched.
    pub fn recall(&mut self, query: &str, max: usize) -> io::Result<Vec<EntryHit>> {
        let max = max.clamp(1, MAX_RESULTS);
        self.retrying(|ix| {
            let hits = staged(&ix.store, Table::Entries, query, max)?;
            let mut found = Vec::with_capacity(hits.len());
            for h in hits {
                found.push((h.score, ix.entry(h.doc)?.ok_or_else(|| damaged("a match that is not live"))?));
            }
            // Ties: the entry changed last first.
            sort_by(&mut found, |a, b| a.0.total_cmp(&b.0).then(b.1.1.cmp(&a.1.1)));
            Ok(found.into_iter().map(|(_, (hit, _))| hit).collect())
        })
    }

    /// The note chunks (`MEMORY.md`, `memory/*.md`) matching `query`, best first, at most
    /// `max` (and [`MAX_RESULTS`]), each with a snippet of at most [`SNIPPET_BYTES`].
    pub fn search(&mut self, query: &str, max: usize) -> io::Result<Vec<NoteHit>> {
        let max = max.clamp(1, MAX_RESULTS);
        self.retrying(|ix| {
            let hits: Vec<Hit> = staged(&ix.store, Table::Chunks, query, max)?;
            let mut found = Vec::with_capacity(hits.len());
            for h in hits {
                let (path, first, last, text) = ix.chunk(h.doc)?.ok_or_else(|| damaged("a match that is not live"))?;
                found.push((h.score, NoteHit { path, first, last, snippet: snippet(&text) }));
            }
            // Ties: the later file (by name, so the newer note) first.
            sort_by(&mut found, |a, b| a.0.total_cmp(&b.0).then(b.1.path.cmp(&a.1.path)));
            Ok(found.into_iter().map(|(_, hit)| hit).collect())
        })
    }

    /// The open store, for the vectors kept beside the documents (`embed`, `fuse`).
    pub(super) fn store(&self) -> &Store {
        &self.store
    }

    /// Entry `doc` (live) and when it changed.
    pub(super) fn entry(&self, doc: u64) -> io::Result<Option<(EntryHit, u64)>> {
        self.store.stored(Table::Entries, doc)?.map(|b| decode_entry(&b)).transpose()
    }

    /// Chunk `doc` (live): its path, lines and text.
    pub(super) fn chunk(&self, doc: u64) -> io::Result<Option<(String, u32, u32, String)>> {
        self.store.stored(Table::Chunks, doc)?.map(|b| decode_chunk(&b)).transpose()
    }

    /// How many entries and note chunks the index holds.
    pub fn counts(&self) -> io::Result<(u64, u64)> {
        Ok((self.store.totals(Table::Entries).docs, self.store.totals(Table::Chunks).docs))
    }
}

/// The sources the store knows, with their stamps.
fn known_sources(store: &Store) -> HashMap<String, String> {
    store.manifest().sources.iter().map(|s| (s.path.clone(), s.stamp.clone())).collect()
}

/// Removes the SQLite index of earlier versions and its journals; missing ones are fine.
fn remove_old_index(root: &Path) {
    let old = root.join(crate::authority::STATE_DIR).join(OLD_INDEX_FILE);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = old.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
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

/// Reads one file into the index, replacing its documents, and records its stamp unless it
/// changed while it was read. Returns the entries and chunks indexed.
fn read_source(w: &mut Writer, root: &Path, rel: &str) -> io::Result<(usize, usize)> {
    let path = root.join(rel);
    let Some(file) = open_regular(&path)? else {
        w.drop_source(rel);
        return Ok((0, 0));
    };
    let before = stamp(&file.metadata()?);
    let table = if rel == ENTRIES_SOURCE { Table::Entries } else { Table::Chunks };
    w.reset_source(rel, "", table);
    let counts = if rel == ENTRIES_SOURCE {
        (insert_entries(w, file)?, 0)
    } else if sessions::is_session(rel) {
        (0, insert_pieces(w, rel, sessions::pieces(&file)?)?)
    } else {
        let mut text = Vec::new();
        (&file).take(MAX_NOTE_BYTES).read_to_end(&mut text)?;
        (0, insert_pieces(w, rel, chunks(&String::from_utf8_lossy(&text)))?)
    };
    // The stamp of what was read: if the file changed meanwhile (renamed over, appended),
    // no stamp is kept and the next refresh reads it again.
    let after = std::fs::symlink_metadata(&path).map(|m| stamp(&m)).ok();
    if after.as_deref() == Some(before.as_str()) {
        w.set_stamp(rel, &before);
    }
    Ok(counts)
}

/// Streams `entries.jsonl` into the index: one line at a time, each bounded, so the file's
/// size bounds nothing but the time it takes. Unreadable and repeated lines are skipped, as
/// [`Entries::parse`] does.
fn insert_entries(w: &mut Writer, file: File) -> io::Result<usize> {
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
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
            if seen.insert(e.id.clone()) {
                add_entry(w, e)?;
            }
        }
    }
    Ok(seen.len())
}

/// An entry as its document: content and tags indexed (tags weigh twice), the id its key.
fn add_entry(w: &mut Writer, e: &Entry) -> io::Result<()> {
    let tags = e.tags.join(" ");
    for word in spelling::words(&e.content).chain(spelling::words(&tags)) {
        w.add_word(Table::Entries, &word);
    }
    let mut stored = Vec::new();
    put_str(&mut stored, &e.id);
    put_str(&mut stored, &render_line(e));
    put_str(&mut stored, &e.content);
    put_u64(&mut stored, e.updated);
    w.add(ENTRIES_SOURCE, &e.id, &[&for_index(&e.content), &for_index(&tags)], &stored)?;
    Ok(())
}

fn decode_entry(b: &[u8]) -> io::Result<(EntryHit, u64)> {
    let mut r = Reader::new(b);
    let hit = EntryHit { id: r.str()?.to_owned(), line: r.str()?.to_owned(), content: r.str()?.to_owned() };
    Ok((hit, r.u64()?))
}

fn insert_pieces(w: &mut Writer, rel: &str, pieces: impl IntoIterator<Item = (u32, u32, String)>) -> io::Result<usize> {
    let mut n = 0;
    for (first, last, chunk) in pieces {
        for word in spelling::words(&chunk) {
            w.add_word(Table::Chunks, &word);
        }
        let mut stored = Vec::new();
        put_str(&mut stored, rel);
        put_varint(&mut stored, u64::from(first));
        put_varint(&mut stored, u64::from(last));
        put_str(&mut stored, &chunk);
        w.add(rel, "", &[&for_index(&chunk)], &stored)?;
        n += 1;
    }
    Ok(n)
}

fn decode_chunk(b: &[u8]) -> io::Result<(String, u32, u32, String)> {
    let mut r = Reader::new(b);
    let path = r.str()?.to_owned();
    let line = |r: &mut Reader<'_>| u32::try_from(r.varint()?).map_err(|_| damaged("a line number out of range"));
    let (first, last) = (line(&mut r)?, line(&mut r)?);
    Ok((path, first, last, r.str()?.to_owned()))
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
