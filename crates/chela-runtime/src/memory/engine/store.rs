//! The index on disk: a private folder holding the [`manifest`](super::manifest) and the
//! segment files it names, and the searches over them.
//!
//! Writers take the folder's lock ([`crate::lock`]), one at a time across threads and
//! processes; each [`Store::write`] reads the manifest afresh under the lock, writes its new
//! segments (temp file, fsync, rename, never over an existing name), then replaces the
//! manifest the same way, then removes the segment files no manifest names any more. Readers
//! take no lock: [`Store::open`] reads the manifest and opens every segment it names, and an
//! open segment stays readable after a writer deletes it. If a segment is gone between the
//! two (a merge finished meanwhile), the open starts over from the new manifest.
//!
//! A SIGKILL at any point loses at most the write under way: before the manifest's rename the
//! old manifest still names the old segments (the new segment file is an orphan the next write
//! removes); after it, the new state is whole.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chela_infra::sort::sort_by_key;

use super::bm25::{Totals, idf, score, weighted};
use super::codec::damaged;
use super::manifest::{self, Manifest, Run, SegmentRef, Source, Table, VectorsRef};
use super::segment::{Builder, Doc, MAX_COLUMNS, Posting, Segment};
use super::vectors::{self, Record, View};
use crate::workspace::{Replace, create_private_dir, open_dir, sweep_stale_temps, write_atomic, write_atomic_at};

pub const MANIFEST: &str = "MANIFEST";

/// Segments of one table beyond which a write merges them into one.
pub const MAX_SEGMENTS: usize = 8;

/// Documents of a full segment: a write that adds more starts another, so a build holds at most
/// this many documents' postings in memory (a million entries in one segment took 0.96 GB), and
/// merges leave full segments alone. (Small in the unit tests, which check both.)
pub const SEGMENT_DOCS: u32 = if cfg!(test) { 1024 } else { 100_000 };

/// Times an open starts over because a segment went away under it.
const OPEN_TRIES: usize = 8;

/// A search: groups of alternative terms (stemmed, as [`super::tokens`] makes them).
pub struct Query<'a> {
    pub groups: &'a [Vec<String>],
    /// Every group must match (else any term of any group).
    pub every: bool,
    /// Each column's weight.
    pub weights: &'a [f64],
    /// Only the newest this many matches are scored.
    pub max_scored: usize,
    /// Results returned at most, best first.
    pub max: usize,
}

/// A document found, with its BM25 score (lower is better).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub doc: u64,
    pub score: f64,
}

/// An open index: the manifest read and every segment it names open.
pub struct Store {
    manifest: Manifest,
    /// Sorted by first document.
    segments: Vec<(SegmentRef, Segment)>,
    /// The vectors file, opened with the segments.
    vectors: Option<File>,
}

fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST)
}

/// Opens a file of the index for reading, never through a link nor waiting on a FIFO.
fn open_file(path: &Path) -> io::Result<File> {
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
    let f = OpenOptions::new().read(true).custom_flags(flags.bits() as i32).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(damaged("an index file that is not a file"));
    }
    Ok(f)
}

/// The manifest in `dir`, or an empty one when there is none yet.
fn read_manifest(dir: &Path) -> io::Result<Manifest> {
    let f = match open_file(&manifest_path(dir)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Manifest::default()),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.take(manifest::MAX_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    Manifest::decode(&bytes)
}

impl Store {
    /// Opens the index in `dir`, empty when it has none yet.
    pub fn open(dir: &Path) -> io::Result<Store> {
        let mut tries = 0;
        loop {
            let manifest = read_manifest(dir)?;
            match Store::open_segments(dir, manifest) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && tries + 1 < OPEN_TRIES => tries += 1,
                other => return other,
            }
        }
    }

    fn open_segments(dir: &Path, manifest: Manifest) -> io::Result<Store> {
        let mut segments = Vec::with_capacity(manifest.segments.len());
        for r in &manifest.segments {
            let seg = Segment::open(open_file(&dir.join(r.file_name()))?)?;
            let n = u64::from(seg.len());
            if seg.columns() != r.table.columns() || n > r.end - r.first {
                return Err(damaged("a segment that is not the one the manifest names"));
            }
            if n > 0 {
                let ends = [seg.doc_numbers(0, 1)?[0], seg.doc_numbers(seg.len() - 1, seg.len())?[0]];
                if ends[0] < r.first || ends[1] >= r.end {
                    return Err(damaged("a segment whose documents lie outside its range"));
                }
            }
            segments.push((r.clone(), seg));
        }
        sort_by_key(&mut segments, |(r, _)| r.first);
        let vectors = match manifest.vectors {
            Some(v) => {
                let f = open_file(&dir.join(v.file_name()))?;
                if f.metadata()?.len() < v.len {
                    return Err(damaged("a vectors file shorter than its manifest says"));
                }
                Some(f)
            }
            None => None,
        };
        Ok(Store { manifest, segments, vectors })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// N and the summed lengths of `table`'s live documents.
    pub fn totals(&self, table: Table) -> Totals {
        let runs = self.manifest.runs(table);
        Totals { docs: runs.iter().map(|r| r.end - r.start).sum(), terms: runs.iter().map(|r| r.terms).sum() }
    }

    /// The segment of `table` holding document `doc`, with its place in `segments`.
    fn segment_of(&self, table: Table, doc: u64) -> Option<usize> {
        self.segments.iter().rposition(|(r, _)| r.table == table && r.first <= doc && doc < r.end)
    }

    /// What was stored with `doc`, if it is live.
    pub fn stored(&self, table: Table, doc: u64) -> io::Result<Option<Vec<u8>>> {
        if !is_live(&self.manifest.runs(table), doc) {
            return Ok(None);
        }
        let Some(i) = self.segment_of(table, doc) else { return Err(damaged("a live document in no segment")) };
        let seg = &self.segments[i].1;
        match seg.ordinal(doc)? {
            Some(ord) => seg.stored(ord).map(Some),
            None => Err(damaged("a live document missing from its segment")),
        }
    }

    /// The live documents of `table` holding `term`, by increasing number, with their segment,
    /// ordinal and counts.
    fn postings(&self, table: Table, runs: &[Run], term: &str) -> io::Result<Vec<(u64, usize, Posting)>> {
        let mut out = Vec::new();
        for (i, (r, seg)) in self.segments.iter().enumerate() {
            if r.table != table {
                continue;
            }
            let Some(t) = seg.find(term)? else { continue };
            let list = seg.postings(&t)?;
            let (Some(lo), Some(hi)) = (list.first().map(|p| p.ord), list.last().map(|p| p.ord)) else { continue };
            let docs = seg.doc_numbers(lo, hi + 1)?;
            for p in list {
                let doc = docs[(p.ord - lo) as usize];
                if is_live(runs, doc) {
                    out.push((doc, i, p));
                }
            }
        }
        Ok(out)
    }

    /// The live document of `table` whose key is `key` (an entry's id), the newest if several.
    pub fn find_key(&self, table: Table, key: &str) -> io::Result<Option<u64>> {
        let runs = self.manifest.runs(table);
        for (r, seg) in self.segments.iter().rev() {
            if r.table != table {
                continue;
            }
            if let Some(ord) = seg.find_key(key)? {
                let doc = seg.doc_numbers(ord, ord + 1)?[0];
                if is_live(&runs, doc) {
                    return Ok(Some(doc));
                }
            }
        }
        Ok(None)
    }

    /// The live documents of `table` after `after`, in order, at most `limit` (a sweep over
    /// every document, such as the embeddings pass).
    pub fn live_docs(&self, table: Table, after: Option<u64>, limit: usize) -> Vec<u64> {
        let mut out = Vec::new();
        let from = after.map_or(0, |a| a + 1);
        for run in self.manifest.runs(table) {
            let mut d = run.start.max(from);
            while d < run.end && out.len() < limit {
                out.push(d);
                d += 1;
            }
            if out.len() == limit {
                break;
            }
        }
        out
    }

    /// Calls `f` with every committed vector record, in the order they were added (a later
    /// record of one document replaces an earlier one).
    pub fn each_vector(&self, f: impl FnMut(&View<'_>)) -> io::Result<()> {
        match (&self.vectors, self.manifest.vectors) {
            (Some(file), Some(v)) => vectors::scan(At { file, pos: 0 }, v.len, f),
            _ => Ok(()),
        }
    }

    /// Whether `doc` of `table` is live.
    pub fn is_live(&self, table: Table, doc: u64) -> bool {
        is_live(&self.manifest.runs(table), doc)
    }

    /// Whether any live document of `table` holds `term`: a dictionary lookup per segment,
    /// and a walk of the postings only in a segment that holds dead documents.
    pub fn contains(&self, table: Table, term: &str) -> io::Result<bool> {
        let runs = self.manifest.runs(table);
        for (r, seg) in &self.segments {
            if r.table != table {
                continue;
            }
            let Some(t) = seg.find(term)? else { continue };
            let live: u64 = runs.iter().map(|x| x.end.min(r.end).saturating_sub(x.start.max(r.first))).sum();
            if live == u64::from(seg.len()) {
                return Ok(true);
            }
            let list = seg.postings(&t)?;
            let (Some(lo), Some(hi)) = (list.first().map(|p| p.ord), list.last().map(|p| p.ord)) else { continue };
            let docs = seg.doc_numbers(lo, hi + 1)?;
            if list.iter().any(|p| is_live(&runs, docs[(p.ord - lo) as usize])) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The documents of `table` matching `q`, best first, at most `q.max`; ties by document
    /// number, oldest first.
    pub fn search(&self, table: Table, q: &Query<'_>) -> io::Result<Vec<Hit>> {
        let totals = self.totals(table);
        if totals.docs == 0 || q.groups.iter().all(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let runs = self.manifest.runs(table);
        let mut lists: HashMap<&str, Vec<(u64, usize, Posting)>> = HashMap::new();
        for term in q.groups.iter().flatten() {
            if !lists.contains_key(term.as_str()) {
                lists.insert(term, self.postings(table, &runs, term)?);
            }
        }
        let docs_of = |terms: &[String]| -> Vec<u64> {
            if let [one] = terms {
                // One term's list is sorted and without repeats already.
                return lists[one.as_str()].iter().map(|(doc, ..)| *doc).collect();
            }
            let mut d: Vec<u64> = terms.iter().flat_map(|t| lists[t.as_str()].iter().map(|(doc, ..)| *doc)).collect();
            d.sort_unstable();
            d.dedup();
            d
        };
        let mut matched = if q.every {
            // From the rarest group: each step keeps only what the next group holds too.
            let mut sets: Vec<Vec<u64>> = q.groups.iter().filter(|g| !g.is_empty()).map(|g| docs_of(g)).collect();
            sort_by_key(&mut sets, Vec::len);
            let mut sets = sets.into_iter();
            let mut acc = sets.next().unwrap_or_default();
            for d in sets {
                acc.retain(|x| d.binary_search(x).is_ok());
            }
            acc
        } else {
            let all: Vec<String> = q.groups.iter().flatten().cloned().collect();
            docs_of(&all)
        };
        // The newest matches only.
        let cut = matched.len().saturating_sub(q.max_scored);
        matched.drain(..cut);
        let phrases: Vec<&[(u64, usize, Posting)]> =
            q.groups.iter().flatten().map(|t| &lists[t.as_str()][..]).collect();
        let idfs: Vec<f64> = phrases.iter().map(|l| idf(totals.docs, l.len() as u64)).collect();
        let lengths = self.lengths_of(&matched, &phrases)?;
        let avgdl = totals.avgdl();
        let mut hits: Vec<Hit> = matched
            .iter()
            .zip(&lengths)
            .map(|(doc, len)| {
                let freqs: Vec<f64> = phrases
                    .iter()
                    .map(|l| match l.binary_search_by_key(doc, |(d, ..)| *d) {
                        Ok(i) => weighted(&l[i].2.tf[..], &q.weights[..q.weights.len().min(MAX_COLUMNS)]),
                        Err(_) => 0.0,
                    })
                    .collect();
                Hit { doc: *doc, score: score(&idfs, &freqs, *len, avgdl) }
            })
            .collect();
        hits.sort_unstable_by(|a, b| a.score.total_cmp(&b.score).then(a.doc.cmp(&b.doc)));
        hits.truncate(q.max);
        Ok(hits)
    }

    /// The lengths of `docs` (each in some phrase's list), read per segment as one range.
    fn lengths_of(&self, docs: &[u64], phrases: &[&[(u64, usize, Posting)]]) -> io::Result<Vec<u32>> {
        let place = |doc: &u64| -> io::Result<(usize, u32)> {
            phrases
                .iter()
                .find_map(|l| l.binary_search_by_key(doc, |(d, ..)| *d).ok().map(|i| (l[i].1, l[i].2.ord)))
                .ok_or_else(|| damaged("a match in no list"))
        };
        let places = docs.iter().map(place).collect::<io::Result<Vec<(usize, u32)>>>()?;
        let mut span: HashMap<usize, (u32, u32)> = HashMap::new();
        for (seg, ord) in &places {
            let s = span.entry(*seg).or_insert((*ord, *ord));
            *s = (s.0.min(*ord), s.1.max(*ord));
        }
        let mut read: HashMap<usize, (u32, Vec<u32>)> = HashMap::new();
        for (seg, (lo, hi)) in span {
            read.insert(seg, (lo, self.segments[seg].1.lengths(lo, hi + 1)?));
        }
        Ok(places
            .iter()
            .map(|(seg, ord)| {
                let (lo, l) = &read[seg];
                l[(ord - lo) as usize]
            })
            .collect())
    }

    /// Which of `wanted` are surface words of any segment (either table): one pass over each
    /// segment's word list, no word copied unless wanted.
    pub fn known_words(&self, wanted: &HashSet<String>) -> io::Result<HashSet<String>> {
        let mut out = HashSet::new();
        if wanted.is_empty() {
            return Ok(out);
        }
        for (_, seg) in &self.segments {
            seg.each_word(|w| {
                if wanted.contains(w) && !out.contains(w) {
                    out.insert(w.to_owned());
                }
            })?;
        }
        Ok(out)
    }

    /// Every surface word of `table`'s segments (spelling corrections), dead documents'
    /// included until a merge.
    pub fn words(&self, table: Table) -> io::Result<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        for (r, seg) in &self.segments {
            if r.table == table {
                out.extend(seg.words()?);
            }
        }
        Ok(out)
    }

    /// Starts the index in `dir` afresh (a damaged one): under the lock, an empty manifest
    /// whose numbers lie above every file's on disk, so a reader still holding the old manifest
    /// never opens a new file under an old name; then every other file is removed.
    pub fn reset(dir: &Path) -> io::Result<()> {
        if !dir.is_dir() {
            create_private_dir(dir)?;
        }
        crate::lock::with_file_lock(&manifest_path(dir), || {
            let mut next = 0u64;
            for item in std::fs::read_dir(dir)?.flatten().take(100_000) {
                let name = item.file_name();
                let Some(hex) = name.to_str().and_then(|n| n.strip_prefix("seg-").or_else(|| n.strip_prefix("vec-")))
                else {
                    continue;
                };
                if let Ok(id) = u64::from_str_radix(hex, 16) {
                    next = next.max(id.saturating_add(1));
                }
            }
            let w = Writer {
                dir: dir.to_path_buf(),
                manifest: Manifest { next_segment: next, ..Manifest::default() },
                open: HashMap::new(),
                added: HashMap::new(),
                added_keys: HashMap::new(),
            };
            w.commit()
        })
    }

    /// Runs `f` with a writer over the index in `dir` under its lock, then commits what it did.
    /// An error from `f` commits nothing.
    pub fn write<T>(dir: &Path, f: impl FnOnce(&mut Writer) -> io::Result<T>) -> io::Result<T> {
        if !dir.is_dir() {
            create_private_dir(dir)?;
        }
        crate::lock::with_file_lock(&manifest_path(dir), || {
            let mut w = Writer {
                dir: dir.to_path_buf(),
                manifest: read_manifest(dir)?,
                open: HashMap::new(),
                added: HashMap::new(),
                added_keys: HashMap::new(),
            };
            // A writer killed before its manifest left a segment under a number the manifest
            // will give again.
            w.remove_orphans();
            let out = f(&mut w)?;
            w.commit()?;
            Ok(out)
        })
    }
}

/// Reads a file from a position of its own (`pread`), so every scan starts at the start
/// whatever scans came before.
struct At<'a> {
    file: &'a File,
    pos: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = std::os::unix::fs::FileExt::read_at(self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Called between the new segments' renames and the manifest's (the SIGKILL test).
#[cfg(test)]
static BEFORE_MANIFEST: std::sync::Mutex<Option<fn()>> = std::sync::Mutex::new(None);

/// Whether `doc` lies in one of `runs` (sorted by start).
fn is_live(runs: &[Run], doc: u64) -> bool {
    let i = runs.partition_point(|r| r.start <= doc);
    i > 0 && doc < runs[i - 1].end
}

/// Changes to the index, made by [`Store::write`]: sources replaced, dropped, documents added.
pub struct Writer {
    dir: PathBuf,
    manifest: Manifest,
    /// The segment being built for each table, with its first document number.
    open: HashMap<Table, (Builder, u64)>,
    /// The lengths of the documents this write added.
    added: HashMap<u64, u32>,
    /// The keys of the documents this write added.
    added_keys: HashMap<(Table, String), u64>,
}

impl Writer {
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    fn source_mut(&mut self, path: &str) -> Option<&mut Source> {
        let i = self.manifest.sources.binary_search_by(|s| s.path.as_str().cmp(path)).ok()?;
        Some(&mut self.manifest.sources[i])
    }

    /// Forgets `path` and its documents.
    pub fn drop_source(&mut self, path: &str) {
        self.manifest.sources.retain(|s| s.path != path);
    }

    /// Starts `path` afresh in `table`, without documents, its stamp `stamp` (empty: read it
    /// again next time).
    pub fn reset_source(&mut self, path: &str, stamp: &str, table: Table) {
        let fresh = Source { path: path.to_owned(), stamp: stamp.to_owned(), table, runs: Vec::new() };
        match self.manifest.sources.binary_search_by(|s| s.path.as_str().cmp(path)) {
            Ok(i) => self.manifest.sources[i] = fresh,
            Err(i) => self.manifest.sources.insert(i, fresh),
        }
    }

    /// Records `stamp` for `path`, which must have been started.
    pub fn set_stamp(&mut self, path: &str, stamp: &str) {
        if let Some(s) = self.source_mut(path) {
            s.stamp = stamp.to_owned();
        }
    }

    /// Adds a document to `path` (started with [`Writer::reset_source`]) with its key (`""`:
    /// none); returns its number.
    pub fn add(&mut self, path: &str, key: &str, columns: &[&str], stored: &[u8]) -> io::Result<u64> {
        let table = self.manifest.source(path).map(|s| s.table).ok_or_else(|| io::Error::other("no such source"))?;
        let doc = self.manifest.next_doc;
        let (b, first) = self.open.entry(table).or_insert_with(|| (Builder::new(table.columns()), doc));
        let first = *first;
        let len = b.add(&Doc { doc, columns, stored })?;
        b.add_key(b.len() - 1, key);
        let full = b.len() >= SEGMENT_DOCS;
        let terms = u64::from(len);
        self.added.insert(doc, len);
        if !key.is_empty() {
            self.added_keys.insert((table, key.to_owned()), doc);
        }
        self.manifest.next_doc += 1;
        let s = self.source_mut(path).expect("checked above");
        match s.runs.last_mut() {
            // A run never spans two segments: one written earlier is extended by a new one.
            Some(r) if r.end == doc && r.start >= first => {
                r.end += 1;
                r.terms += terms;
            }
            _ => s.runs.push(Run { start: doc, end: doc + 1, terms }),
        }
        if full {
            // Written now, named by the manifest at the commit; an orphan if the write dies.
            self.flush(&open_dir(&self.dir)?, table)?;
        }
        Ok(doc)
    }

    /// Writes `table`'s open segment, if any, and lists it in the manifest being made.
    fn flush(&mut self, dir: &std::os::fd::OwnedFd, table: Table) -> io::Result<()> {
        let Some((b, _)) = self.open.remove(&table) else { return Ok(()) };
        let id = self.manifest.next_segment;
        self.manifest.next_segment += 1;
        // The documents of the two tables interleave within one write: each segment covers
        // its own table's first to last. A segment of words only claims a number of its own.
        let (first, end) = match b.doc_range() {
            Some((first, last)) => (first, last + 1),
            None => {
                self.manifest.next_doc += 1;
                (self.manifest.next_doc - 1, self.manifest.next_doc)
            }
        };
        write_atomic_at(dir, manifest::file_name(id).as_ref(), &b.finish(), Replace::No)?;
        self.manifest.segments.push(SegmentRef { id, table, first, end });
        Ok(())
    }

    /// The live document of `table` whose key is `key`, this write's own additions included.
    pub fn find_key(&self, table: Table, key: &str) -> io::Result<Option<u64>> {
        let runs = self.manifest.runs(table);
        if let Some(doc) = self.added_keys.get(&(table, key.to_owned()))
            && is_live(&runs, *doc)
        {
            return Ok(Some(*doc));
        }
        let mut refs: Vec<&SegmentRef> = self.manifest.segments.iter().filter(|s| s.table == table).collect();
        sort_by_key(&mut refs, |s| std::cmp::Reverse(s.first));
        for r in refs {
            let seg = Segment::open(open_file(&self.dir.join(r.file_name()))?)?;
            if let Some(ord) = seg.find_key(key)? {
                let doc = seg.doc_numbers(ord, ord + 1)?[0];
                if is_live(&runs, doc) {
                    return Ok(Some(doc));
                }
            }
        }
        Ok(None)
    }

    /// Takes document `doc` out of `path`'s live documents (an entry forgotten or replaced).
    pub fn remove(&mut self, path: &str, doc: u64) -> io::Result<()> {
        let Some(src) = self.manifest.source(path) else { return Ok(()) };
        let Some(i) = src.runs.iter().position(|r| r.start <= doc && doc < r.end) else { return Ok(()) };
        let table = src.table;
        let len = match self.added.get(&doc) {
            Some(l) => *l,
            None => self.length_on_disk(table, doc)?,
        };
        let s = self.source_mut(path).expect("found above");
        let r = s.runs[i];
        let mut parts = Vec::new();
        if r.start < doc {
            parts.push(Run { start: r.start, end: doc, terms: 0 });
        }
        if doc + 1 < r.end {
            parts.push(Run { start: doc + 1, end: r.end, terms: 0 });
        }
        // The run's summed length is split by reading the smaller part's lengths.
        let rest = r.terms.saturating_sub(u64::from(len));
        if let [a, b] = parts.as_slice() {
            let (small, big) = if a.end - a.start <= b.end - b.start { (0, 1) } else { (1, 0) };
            let p = parts[small];
            let mut t = 0u64;
            for d in p.start..p.end {
                t += u64::from(match self.added.get(&d) {
                    Some(l) => *l,
                    None => self.length_on_disk(table, d)?,
                });
            }
            parts[small].terms = t;
            parts[big].terms = rest.saturating_sub(t);
        } else if let [a] = parts.as_mut_slice() {
            a.terms = rest;
        }
        let s = self.source_mut(path).expect("found above");
        s.runs.splice(i..=i, parts);
        Ok(())
    }

    /// The length of `doc`, read from the segment on disk holding it.
    fn length_on_disk(&self, table: Table, doc: u64) -> io::Result<u32> {
        let r = self
            .manifest
            .segments
            .iter()
            .find(|s| s.table == table && s.first <= doc && doc < s.end)
            .ok_or_else(|| damaged("a live document in no segment"))?;
        let seg = Segment::open(open_file(&self.dir.join(r.file_name()))?)?;
        let ord = seg.ordinal(doc)?.ok_or_else(|| damaged("a live document missing from its segment"))?;
        Ok(seg.lengths(ord, ord + 1)?[0])
    }

    /// Appends vector records, after cutting off whatever a killed append left past the
    /// committed length.
    pub fn append_vectors(&mut self, records: &[Record]) -> io::Result<()> {
        use std::io::Write;
        if records.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        for r in records {
            vectors::encode(r, &mut bytes)?;
        }
        let v = match self.manifest.vectors {
            Some(v) => v,
            None => {
                let v = VectorsRef { id: self.manifest.next_segment, len: 0 };
                self.manifest.next_segment += 1;
                v
            }
        };
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(self.dir.join(v.file_name()))?;
        f.set_len(v.len)?;
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(v.len))?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        self.manifest.vectors = Some(VectorsRef { id: v.id, len: v.len + bytes.len() as u64 });
        Ok(())
    }

    /// Writes a new vectors file holding the records `keep` keeps (the last of each
    /// document's), and switches to it; the old one is removed after the manifest.
    pub fn rewrite_vectors(&mut self, mut keep: impl FnMut(&View<'_>) -> bool) -> io::Result<()> {
        let Some(v) = self.manifest.vectors else { return Ok(()) };
        let f = open_file(&self.dir.join(v.file_name()))?;
        let mut last: HashMap<(u8, u64), Record> = HashMap::new();
        let mut order: Vec<(u8, u64)> = Vec::new();
        vectors::scan(At { file: &f, pos: 0 }, v.len, |r| {
            if keep(r) {
                let key = (r.kind, r.doc);
                if last.insert(key, r.to_record()).is_none() {
                    order.push(key);
                }
            } else {
                last.remove(&(r.kind, r.doc));
            }
        })?;
        let mut bytes = Vec::new();
        for key in &order {
            if let Some(r) = last.get(key) {
                vectors::encode(r, &mut bytes)?;
            }
        }
        let id = self.manifest.next_segment;
        self.manifest.next_segment += 1;
        let new = VectorsRef { id, len: bytes.len() as u64 };
        write_atomic_at(&open_dir(&self.dir)?, new.file_name().as_ref(), &bytes, Replace::No)?;
        self.manifest.vectors = Some(new);
        Ok(())
    }

    /// Keeps `word` for `table`'s spelling corrections.
    pub fn add_word(&mut self, table: Table, word: &str) {
        let doc = self.manifest.next_doc;
        self.open.entry(table).or_insert_with(|| (Builder::new(table.columns()), doc)).0.add_word(word);
    }

    /// Writes the new segments, merges a table's segments when there are too many, replaces
    /// the manifest, removes what no manifest names.
    fn commit(mut self) -> io::Result<()> {
        let dir = open_dir(&self.dir)?;
        let mut tables: Vec<Table> = self.open.keys().copied().collect();
        sort_by_key(&mut tables, |t| *t as u8);
        for table in tables {
            self.flush(&dir, table)?;
        }
        #[cfg(test)]
        if let Some(hook) = *BEFORE_MANIFEST.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            hook();
        }
        self.drop_dead_segments();
        for table in [Table::Entries, Table::Chunks] {
            self.compact(&dir, table)?;
        }
        write_atomic(&manifest_path(&self.dir), &self.manifest.encode())?;
        self.remove_orphans();
        Ok(())
    }

    /// Forgets segments none of whose documents is live.
    fn drop_dead_segments(&mut self) {
        let m = &self.manifest;
        let keep: Vec<SegmentRef> = m
            .segments
            .iter()
            .filter(|s| m.runs(s.table).iter().any(|r| r.start < s.end && s.first < r.end))
            .cloned()
            .collect();
        self.manifest.segments = keep;
    }

    /// Keeps `table`'s segments few and mostly live, never rewriting much at once: a segment
    /// more than half dead is rewritten alone; the segments after the last full one
    /// ([`SEGMENT_DOCS`]), when more than [`MAX_SEGMENTS`], are merged into one. Full segments
    /// are otherwise left alone, so storing one entry among a million rewrites little.
    fn compact(&mut self, dir: &std::os::fd::OwnedFd, table: Table) -> io::Result<()> {
        let runs = self.manifest.runs(table);
        let mut refs: Vec<SegmentRef> = self.manifest.segments.iter().filter(|s| s.table == table).cloned().collect();
        sort_by_key(&mut refs, |s| s.first);
        let mut lens = Vec::with_capacity(refs.len());
        for r in &refs {
            lens.push(Segment::open(open_file(&self.dir.join(r.file_name()))?)?.len());
        }
        let live_in = |r: &SegmentRef| -> u64 {
            runs.iter().map(|x| x.end.min(r.end).saturating_sub(x.start.max(r.first))).sum()
        };
        let mut rewrote = false;
        for (r, len) in refs.iter().zip(&lens) {
            if live_in(r) * 2 < u64::from(*len) {
                self.merge(dir, table, std::slice::from_ref(r))?;
                rewrote = true;
            }
        }
        // After a rewrite the list is stale: the next write merges.
        let tail = lens.iter().rposition(|l| *l >= SEGMENT_DOCS).map_or(0, |i| i + 1);
        if !rewrote && refs.len() - tail > MAX_SEGMENTS {
            self.merge(dir, table, &refs[tail..])?;
        }
        Ok(())
    }

    /// Rewrites the live documents of `refs` (segments of `table`, in document order, one after
    /// another) into one segment: postings copied with new ordinals, dead documents left out,
    /// nothing tokenized again.
    fn merge(&mut self, dir: &std::os::fd::OwnedFd, table: Table, refs: &[SegmentRef]) -> io::Result<()> {
        if refs.is_empty() {
            return Ok(());
        }
        let runs = self.manifest.runs(table);
        let mut segs = Vec::with_capacity(refs.len());
        for r in refs {
            segs.push(Segment::open(open_file(&self.dir.join(r.file_name()))?)?);
        }
        let mut b = Builder::new(table.columns());
        // Old ordinal to new, per segment; None: dead.
        let mut maps: Vec<Vec<Option<u32>>> = Vec::with_capacity(segs.len());
        for seg in &segs {
            let docs = seg.doc_numbers(0, seg.len())?;
            let lengths = seg.lengths(0, seg.len())?;
            let mut map = Vec::with_capacity(docs.len());
            for (ord, doc) in docs.iter().enumerate() {
                if is_live(&runs, *doc) {
                    map.push(Some(b.add_raw(*doc, lengths[ord], &seg.stored(ord as u32)?)?));
                } else {
                    map.push(None);
                }
            }
            for (key, ord) in seg.keys()? {
                if let Some(Some(new)) = map.get(ord as usize) {
                    b.add_key(*new, &key);
                }
            }
            maps.push(map);
            for w in seg.words()? {
                b.add_word(&w);
            }
        }
        let mut terms: BTreeSet<String> = BTreeSet::new();
        let mut each: Vec<Vec<(String, super::segment::Term)>> = Vec::with_capacity(segs.len());
        for seg in &segs {
            let t = seg.terms()?;
            terms.extend(t.iter().map(|(s, _)| s.clone()));
            each.push(t);
        }
        for term in &terms {
            for (i, seg) in segs.iter().enumerate() {
                if let Ok(at) = each[i].binary_search_by(|(s, _)| s.as_str().cmp(term)) {
                    for p in seg.postings(&each[i][at].1)? {
                        if let Some(ord) = maps[i][p.ord as usize] {
                            b.add_posting(term, ord, p.tf);
                        }
                    }
                }
            }
        }
        let id = self.manifest.next_segment;
        self.manifest.next_segment += 1;
        write_atomic_at(dir, manifest::file_name(id).as_ref(), &b.finish(), Replace::No)?;
        let first = refs.first().map_or(0, |r| r.first);
        let end = refs.last().map_or(0, |r| r.end);
        let merged: BTreeSet<u64> = refs.iter().map(|r| r.id).collect();
        self.manifest.segments.retain(|s| !merged.contains(&s.id));
        self.manifest.segments.push(SegmentRef { id, table, first, end });
        Ok(())
    }

    /// Removes segment files the manifest does not name (merged away, or left by a writer
    /// killed before its manifest) and temp files of dead writers.
    fn remove_orphans(&self) {
        let mut named: BTreeSet<String> = self.manifest.segments.iter().map(SegmentRef::file_name).collect();
        named.extend(self.manifest.vectors.map(|v| v.file_name()));
        if let Ok(list) = std::fs::read_dir(&self.dir) {
            for item in list.flatten().take(100_000) {
                let name = item.file_name();
                let Some(name) = name.to_str() else { continue };
                if (name.starts_with("seg-") || name.starts_with("vec-")) && !named.contains(name) {
                    let _ = std::fs::remove_file(item.path());
                }
            }
        }
        sweep_stale_temps(&self.dir);
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
