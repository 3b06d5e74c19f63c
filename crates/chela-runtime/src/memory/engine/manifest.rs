//! The manifest: which segments make the index, which documents of them are live, and each
//! source file's stamp. Replaced whole and atomically (temp file, fsync, rename, fsync of the
//! folder) after the segments it names are on disk, so a reader sees the index before a write
//! or after it, never between; a writer killed before the rename leaves at most a segment file
//! that no manifest names, which the next write removes.
//!
//! Live documents are not a deleted set: each source owns runs of document numbers (a file read
//! in gets one run; an entry added later, another), and a document is live while a run holds
//! it. Dropping a source drops its runs; its documents stay in their segments, dead, until a
//! merge leaves them out. Each run carries its documents' total length, so BM25's N and avgdl
//! come from the manifest alone.

use std::io;

use chela_infra::sort::sort_by_key;

use super::codec::{Reader, checksum, damaged, put_str, put_u32, put_u64, put_varint};

const MAGIC: &[u8; 8] = b"CHELAMAN";

/// Bumped when the layout changes (or the segments' [`super::segment::FORMAT`]): an index of
/// another version is deleted and built again.
pub const VERSION: u32 = 1;

/// The most bytes a manifest may have: 30,000 sources with a few runs each take about 3 MB.
pub const MAX_BYTES: usize = 64 * 1024 * 1024;

/// The two tables: entries (content, tags) and note chunks (text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    Entries = 0,
    Chunks = 1,
}

impl Table {
    fn from_u8(v: u8) -> io::Result<Table> {
        match v {
            0 => Ok(Table::Entries),
            1 => Ok(Table::Chunks),
            _ => Err(damaged("an unknown table")),
        }
    }

    pub fn columns(self) -> usize {
        match self {
            Table::Entries => 2,
            Table::Chunks => 1,
        }
    }
}

/// A segment file of the index and the document numbers it covers (`first..end`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentRef {
    pub id: u64,
    pub table: Table,
    pub first: u64,
    pub end: u64,
}

impl SegmentRef {
    pub fn file_name(&self) -> String {
        file_name(self.id)
    }
}

/// The file name of segment `id`.
pub fn file_name(id: u64) -> String {
    format!("seg-{id:016x}")
}

/// The vectors file in force: its number and its committed length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorsRef {
    pub id: u64,
    pub len: u64,
}

impl VectorsRef {
    pub fn file_name(&self) -> String {
        format!("vec-{:016x}", self.id)
    }
}

/// Live documents `start..end` of one source, `terms` their lengths summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start: u64,
    pub end: u64,
    pub terms: u64,
}

/// A file the index is made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Relative to the workspace.
    pub path: String,
    /// The file's stamp when it was read; empty when it changed while read (read it again).
    pub stamp: String,
    pub table: Table,
    pub runs: Vec<Run>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub next_doc: u64,
    /// The number the next segment or vectors file gets.
    pub next_segment: u64,
    pub segments: Vec<SegmentRef>,
    /// The vectors file ([`super::vectors`]) and how many of its bytes are committed: a
    /// reader reads no further, a writer cuts anything after (a killed append) before its own.
    pub vectors: Option<VectorsRef>,
    /// Sorted by path.
    pub sources: Vec<Source>,
}

impl Manifest {
    pub fn source(&self, path: &str) -> Option<&Source> {
        self.sources.binary_search_by(|s| s.path.as_str().cmp(path)).ok().map(|i| &self.sources[i])
    }

    /// The live runs of `table`, sorted by start.
    pub fn runs(&self, table: Table) -> Vec<Run> {
        let mut out: Vec<Run> =
            self.sources.iter().filter(|s| s.table == table).flat_map(|s| s.runs.iter().copied()).collect();
        // Per stored document and per search: the standard sort, not the shared cold one.
        out.sort_unstable_by_key(|r| r.start);
        out
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, VERSION);
        put_u64(&mut out, self.next_doc);
        put_u64(&mut out, self.next_segment);
        put_varint(&mut out, self.segments.len() as u64);
        for s in &self.segments {
            put_varint(&mut out, s.id);
            out.push(s.table as u8);
            put_varint(&mut out, s.first);
            put_varint(&mut out, s.end - s.first);
        }
        match self.vectors {
            None => put_varint(&mut out, 0),
            Some(v) => {
                put_varint(&mut out, v.id + 1);
                put_varint(&mut out, v.len);
            }
        }
        put_varint(&mut out, self.sources.len() as u64);
        for s in &self.sources {
            put_str(&mut out, &s.path);
            put_str(&mut out, &s.stamp);
            out.push(s.table as u8);
            put_varint(&mut out, s.runs.len() as u64);
            for r in &s.runs {
                put_varint(&mut out, r.start);
                put_varint(&mut out, r.end - r.start);
                put_varint(&mut out, r.terms);
            }
        }
        let sum = checksum(&out);
        put_u64(&mut out, sum);
        out
    }

    /// A manifest from its bytes, every value checked: its checksum, the version, that runs
    /// and segments lie below `next_doc` and do not overlap, that sources are sorted.
    pub fn decode(bytes: &[u8]) -> io::Result<Manifest> {
        if bytes.len() < 8 + 4 + 8 || bytes.len() > MAX_BYTES {
            return Err(damaged("a manifest of the wrong size"));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        if checksum(body) != Reader::new(sum).u64()? {
            return Err(damaged("a manifest that fails its checksum"));
        }
        let mut r = Reader::new(body);
        if r.bytes(8)? != MAGIC {
            return Err(damaged("not a manifest"));
        }
        let version = r.u32()?;
        if version != VERSION {
            return Err(damaged(&format!("an index of version {version}, not {VERSION}")));
        }
        let next_doc = r.u64()?;
        let next_segment = r.u64()?;
        let range = |r: &mut Reader<'_>| -> io::Result<(u64, u64)> {
            let start = r.varint()?;
            let end = start.checked_add(r.varint()?).filter(|e| *e > start && *e <= next_doc);
            Ok((start, end.ok_or_else(|| damaged("a document range out of bounds"))?))
        };
        let n = r.count(r.left())?;
        let mut segments = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.varint()?;
            let table = Table::from_u8(r.u8()?)?;
            let (first, end) = range(&mut r)?;
            if id >= next_segment || segments.iter().any(|s: &SegmentRef| s.id == id) {
                return Err(damaged("a segment number out of place"));
            }
            segments.push(SegmentRef { id, table, first, end });
        }
        let vectors = match r.varint()? {
            0 => None,
            id => {
                let id = id - 1;
                if id >= next_segment || segments.iter().any(|s: &SegmentRef| s.id == id) {
                    return Err(damaged("a vectors file number out of place"));
                }
                Some(VectorsRef { id, len: r.varint()? })
            }
        };
        let n = r.count(r.left())?;
        let mut sources: Vec<Source> = Vec::with_capacity(n);
        for _ in 0..n {
            let path = r.str()?.to_owned();
            let stamp = r.str()?.to_owned();
            let table = Table::from_u8(r.u8()?)?;
            if sources.last().is_some_and(|l| l.path >= path) {
                return Err(damaged("manifest sources out of order"));
            }
            let k = r.count(r.left())?;
            let mut runs = Vec::with_capacity(k);
            for _ in 0..k {
                let (start, end) = range(&mut r)?;
                runs.push(Run { start, end, terms: r.varint()? });
            }
            sources.push(Source { path, stamp, table, runs });
        }
        if !r.is_done() {
            return Err(damaged("bytes after the manifest"));
        }
        let m = Manifest { next_doc, next_segment, segments, vectors, sources };
        // Per table: no two segments cover one document; no two runs hold one; every run
        // inside a segment. (The two tables' documents interleave.)
        for table in [Table::Entries, Table::Chunks] {
            let mut segs: Vec<&SegmentRef> = m.segments.iter().filter(|s| s.table == table).collect();
            sort_by_key(&mut segs, |s| s.first);
            if segs.windows(2).any(|w| w[0].end > w[1].first) {
                return Err(damaged("segments that overlap"));
            }
            let runs = m.runs(table);
            if runs.windows(2).any(|w| w[0].end > w[1].start) {
                return Err(damaged("runs that overlap"));
            }
            for run in &runs {
                // The segment starting last at or before the run must hold all of it.
                let i = segs.partition_point(|s| s.first <= run.start);
                let held = i > 0 && run.end <= segs[i - 1].end;
                if !held {
                    return Err(damaged("a run outside every segment"));
                }
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample() -> Manifest {
        Manifest {
            next_doc: 40,
            next_segment: 4,
            segments: vec![
                SegmentRef { id: 0, table: Table::Entries, first: 0, end: 20 },
                SegmentRef { id: 2, table: Table::Chunks, first: 20, end: 40 },
            ],
            vectors: Some(VectorsRef { id: 3, len: 1234 }),
            sources: vec![
                Source {
                    path: "MEMORY.md".into(),
                    stamp: "1:2:3.4".into(),
                    table: Table::Chunks,
                    runs: vec![Run { start: 20, end: 25, terms: 90 }],
                },
                Source {
                    path: "memory/entries.jsonl".into(),
                    stamp: String::new(),
                    table: Table::Entries,
                    runs: vec![Run { start: 0, end: 10, terms: 70 }, Run { start: 12, end: 13, terms: 4 }],
                },
            ],
        }
    }

    #[test]
    fn a_manifest_round_trips_and_every_flipped_bit_is_refused() {
        let m = sample();
        let bytes = m.encode();
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
        assert_eq!(m.runs(Table::Entries).len(), 2);
        assert_eq!(m.source("MEMORY.md").unwrap().runs[0].terms, 90);
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[i] ^= 1 << bit;
                assert!(Manifest::decode(&bad).is_err(), "byte {i} bit {bit}");
            }
        }
        for n in 0..bytes.len() {
            assert!(Manifest::decode(&bytes[..n]).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn inconsistent_manifests_are_refused_even_with_a_good_checksum() {
        let mut m = sample();
        m.sources[1].runs[1] = Run { start: 5, end: 13, terms: 1 };
        assert!(Manifest::decode(&m.encode()).is_err(), "runs overlap");
        let mut m = sample();
        m.sources[0].runs[0] = Run { start: 30, end: 41, terms: 1 };
        assert!(Manifest::decode(&m.encode()).is_err(), "past next_doc");
        let mut m = sample();
        m.sources[0].runs[0] = Run { start: 5, end: 6, terms: 1 };
        assert!(Manifest::decode(&m.encode()).is_err(), "a chunk run in the entries segment");
        let mut m = sample();
        m.sources.swap(0, 1);
        assert!(Manifest::decode(&m.encode()).is_err(), "sources out of order");
        let mut m = sample();
        m.segments[1].id = 7;
        assert!(Manifest::decode(&m.encode()).is_err(), "a segment number never given");
        let mut m = sample();
        m.vectors = Some(VectorsRef { id: 2, len: 1 });
        assert!(Manifest::decode(&m.encode()).is_err(), "vectors under a segment's number");
        let mut m = sample();
        m.vectors = None;
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        let mut other = sample().encode();
        other[8] = 9;
        let n = other.len() - 8;
        let sum = checksum(&other[..n]);
        other[n..].copy_from_slice(&sum.to_le_bytes());
        let e = Manifest::decode(&other).unwrap_err();
        assert!(e.to_string().contains("version"), "{e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Manifest::decode(&bytes);
        }

        /// Bytes after a valid header, sealed with a valid checksum: the parser's own checks
        /// must hold without the checksum's help.
        #[test]
        fn sealed_garbage_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut bytes = sample().encode();
            bytes.truncate(8 + 4 + 16);
            bytes.extend_from_slice(&tail);
            let sum = checksum(&bytes);
            bytes.extend_from_slice(&sum.to_le_bytes());
            let _ = Manifest::decode(&bytes);
        }
    }
}
