//! One immutable segment file: a batch of documents with their term dictionary and postings,
//! written once (temp file, fsync, rename) and then only read.
//!
//! # Layout
//!
//! The file is a data region cut into pages of [`PAGE`] bytes, then one checksum per page,
//! then a fixed footer (the counts, where each section lies, the checksum of the page sums and
//! the footer's own checksum). Every read goes through the pages it touches, each checked
//! against its sum, so a flipped bit anywhere is an error, found where it is read; opening
//! reads the footer and the page sums only, so a segment of a million documents opens in a
//! fraction of a millisecond. The data region holds these sections, each addressed by ordinal
//! (a document's place in the segment, from 0):
//!
//! | section | content |
//! |---|---|
//! | `DOCS` | the document numbers, `u64` each, strictly increasing |
//! | `LENGTHS` | each document's length in terms (all columns), `u32` |
//! | `STORED_ENDS` | where each stored record ends in `STORED`, `u64` |
//! | `STORED` | the records the caller keeps with each document (an entry's line, a chunk's text) |
//! | `TERM_INDEX` | per term, sorted: where its bytes end in `TERMS` (`u32`), where its postings end in `POSTINGS` (`u64`), its document count (`u32`) |
//! | `TERMS` | the terms' bytes, one after the other |
//! | `POSTINGS` | per term: per document holding it, the ordinal's gap from the one before (varint) and its count in each column (varints) |
//! | `WORDS` | the surface words for spelling corrections, sorted: varint length and bytes each |
//! | `KEY_INDEX` | per key, sorted: where its bytes end in `KEYS` (`u32`), its document's ordinal (`u32`) |
//! | `KEYS` | the keys' bytes (an entry's id, so a change to one entry finds its document) |
//!
//! Every value read is checked against what it may be (an ordinal below the count, an offset
//! inside its section, gaps that increase): a damaged or hostile file is an error, never a
//! panic, and no allocation is sized by a number from the file beyond the file's own length.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::codec::{Reader, checksum, damaged, put_u32, put_u64, put_varint};
use super::tokens::each_term;

/// Bytes per checked page.
pub const PAGE: usize = 4096;

const MAGIC: &[u8; 8] = b"CHELASEG";

/// Bumped when the layout changes: a segment of another format is not read.
pub const FORMAT: u32 = 1;

/// The most columns a document has (an entry: its content and its tags).
pub const MAX_COLUMNS: usize = 2;

/// The most bytes one read takes: a postings list or a stored record larger than this is
/// refused rather than read. A term found in every one of ten million documents takes about
/// 30 MB.
const MAX_READ: u64 = 64 * 1024 * 1024;

const SECTIONS: usize = 10;
const DOCS: usize = 0;
const LENGTHS: usize = 1;
const STORED_ENDS: usize = 2;
const STORED: usize = 3;
const TERM_INDEX: usize = 4;
const TERMS: usize = 5;
const POSTINGS: usize = 6;
const WORDS: usize = 7;
const KEY_INDEX: usize = 8;
const KEYS: usize = 9;

const TERM_ENTRY: u64 = 16;
const KEY_ENTRY: u64 = 8;
const FOOTER: u64 = 32 + 16 * SECTIONS as u64 + 24;

/// One document to write: its number, its columns' text, and what is kept with it.
pub struct Doc<'a> {
    pub doc: u64,
    pub columns: &'a [&'a str],
    pub stored: &'a [u8],
}

/// A term's occurrences in one document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posting {
    pub ord: u32,
    /// Occurrences in each column; the unused ones are 0.
    pub tf: [u32; MAX_COLUMNS],
}

struct TermAcc {
    last: Option<u32>,
    df: u32,
    bytes: Vec<u8>,
}

/// Builds a segment's bytes from documents given in increasing document number.
pub struct Builder {
    columns: usize,
    docs: Vec<u8>,
    lengths: Vec<u8>,
    stored_ends: Vec<u8>,
    stored: Vec<u8>,
    terms: HashMap<String, TermAcc>,
    words: BTreeSet<String>,
    keys: Vec<(String, u32)>,
    count: u32,
    first_doc: Option<u64>,
    last_doc: Option<u64>,
}

impl Builder {
    /// A segment whose documents have `columns` columns (1 or [`MAX_COLUMNS`]).
    pub fn new(columns: usize) -> Builder {
        assert!((1..=MAX_COLUMNS).contains(&columns), "a segment has 1 or 2 columns");
        Builder {
            columns,
            docs: Vec::new(),
            lengths: Vec::new(),
            stored_ends: Vec::new(),
            stored: Vec::new(),
            terms: HashMap::new(),
            words: BTreeSet::new(),
            keys: Vec::new(),
            count: 0,
            first_doc: None,
            last_doc: None,
        }
    }

    pub fn len(&self) -> u32 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The numbers of the first and the last document added.
    pub fn doc_range(&self) -> Option<(u64, u64)> {
        self.first_doc.zip(self.last_doc)
    }

    /// Adds a document; its number must be above the last one's and it must have this
    /// segment's columns. Returns its length in terms.
    pub fn add(&mut self, d: &Doc<'_>) -> io::Result<u32> {
        if d.columns.len() != self.columns || self.last_doc.is_some_and(|l| d.doc <= l) || self.count == u32::MAX {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "segment documents out of order"));
        }
        let mut tf: HashMap<String, [u32; MAX_COLUMNS]> = HashMap::new();
        let mut len: u32 = 0;
        for (col, text) in d.columns.iter().enumerate() {
            each_term(text, |t| {
                len = len.saturating_add(1);
                let counts = match tf.get_mut(t) {
                    Some(c) => c,
                    None => tf.entry(t.to_owned()).or_default(),
                };
                counts[col] = counts[col].saturating_add(1);
            });
        }
        let ord = self.add_raw(d.doc, len, d.stored)?;
        for (term, counts) in tf {
            self.add_posting(&term, ord, counts);
        }
        Ok(len)
    }

    /// Adds a document whose terms come separately ([`Builder::add_posting`]), as a merge
    /// does: its number, length and record. Returns its ordinal.
    pub fn add_raw(&mut self, doc: u64, len: u32, stored: &[u8]) -> io::Result<u32> {
        if self.last_doc.is_some_and(|l| doc <= l) || self.count == u32::MAX {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "segment documents out of order"));
        }
        put_u64(&mut self.docs, doc);
        put_u32(&mut self.lengths, len);
        self.stored.extend_from_slice(stored);
        put_u64(&mut self.stored_ends, self.stored.len() as u64);
        self.count += 1;
        self.first_doc.get_or_insert(doc);
        self.last_doc = Some(doc);
        Ok(self.count - 1)
    }

    /// Records `term` in ordinal `ord` (added with [`Builder::add_raw`]) with its counts; for
    /// one term, ordinals must come in increasing order (a smaller one is ignored).
    pub fn add_posting(&mut self, term: &str, ord: u32, tf: [u32; MAX_COLUMNS]) {
        let acc = match self.terms.get_mut(term) {
            Some(a) => a,
            None => {
                self.terms.entry(term.to_owned()).or_insert_with(|| TermAcc { last: None, df: 0, bytes: Vec::new() })
            }
        };
        if ord >= self.count || acc.last.is_some_and(|l| ord <= l) || tf[..self.columns].iter().all(|c| *c == 0) {
            return;
        }
        put_varint(&mut acc.bytes, u64::from(ord - acc.last.map_or(0, |l| l + 1)));
        for c in &tf[..self.columns] {
            put_varint(&mut acc.bytes, u64::from(*c));
        }
        acc.last = Some(ord);
        acc.df += 1;
    }

    /// Gives ordinal `ord` the key `key` (unique within the segment; a repeat is ignored).
    pub fn add_key(&mut self, ord: u32, key: &str) {
        if ord < self.count && !key.is_empty() && key.len() <= u32::MAX as usize {
            self.keys.push((key.to_owned(), ord));
        }
    }

    /// Keeps `word` for spelling corrections.
    pub fn add_word(&mut self, word: &str) {
        if !self.words.contains(word) {
            self.words.insert(word.to_owned());
        }
    }

    /// The segment file's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        // The first key given wins, as the first line of an id wins in the entries file.
        self.keys.sort_by(|a, b| a.0.cmp(&b.0));
        self.keys.dedup_by(|a, b| a.0 == b.0);
        let (mut key_index, mut key_bytes) = (Vec::new(), Vec::new());
        for (k, ord) in &self.keys {
            key_bytes.extend_from_slice(k.as_bytes());
            put_u32(&mut key_index, key_bytes.len() as u32);
            put_u32(&mut key_index, *ord);
        }
        let mut terms: Vec<(String, TermAcc)> = self.terms.into_iter().collect();
        terms.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let (mut index, mut term_bytes, mut postings) = (Vec::new(), Vec::new(), Vec::new());
        for (term, acc) in &terms {
            term_bytes.extend_from_slice(term.as_bytes());
            postings.extend_from_slice(&acc.bytes);
            put_u32(&mut index, term_bytes.len() as u32);
            put_u64(&mut index, postings.len() as u64);
            put_u32(&mut index, acc.df);
        }
        let mut words = Vec::new();
        for w in &self.words {
            put_varint(&mut words, w.len() as u64);
            words.extend_from_slice(w.as_bytes());
        }
        let sections: [&[u8]; SECTIONS] = [
            &self.docs,
            &self.lengths,
            &self.stored_ends,
            &self.stored,
            &index,
            &term_bytes,
            &postings,
            &words,
            &key_index,
            &key_bytes,
        ];
        let mut out = Vec::with_capacity(sections.iter().map(|s| s.len()).sum::<usize>() + 4096);
        let mut table = Vec::new();
        for s in sections {
            put_u64(&mut table, out.len() as u64);
            put_u64(&mut table, s.len() as u64);
            out.extend_from_slice(s);
        }
        let data_len = out.len() as u64;
        let mut sums = Vec::new();
        for page in out.chunks(PAGE) {
            put_u64(&mut sums, checksum(page));
        }
        let sums_sum = checksum(&sums);
        out.extend_from_slice(&sums);
        let footer_at = out.len();
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, FORMAT);
        out.push(self.columns as u8);
        out.extend_from_slice(&[0; 3]);
        put_u32(&mut out, self.count);
        put_u32(&mut out, terms.len() as u32);
        put_u32(&mut out, self.words.len() as u32);
        put_u32(&mut out, self.keys.len() as u32);
        out.extend_from_slice(&table);
        put_u64(&mut out, data_len);
        put_u64(&mut out, sums_sum);
        let footer_sum = checksum(&out[footer_at..]);
        put_u64(&mut out, footer_sum);
        debug_assert_eq!((out.len() - footer_at) as u64, FOOTER);
        out
    }
}

/// Where a segment's bytes are: a file read with `pread`, or bytes in memory (tests).
enum Source {
    File(File),
    Memory(Vec<u8>),
}

impl Source {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        match self {
            Source::File(f) => f.read_exact_at(buf, off).map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof { damaged("a segment shorter than it says") } else { e }
            }),
            Source::Memory(m) => {
                let at = usize::try_from(off).map_err(|_| damaged("an offset out of range"))?;
                let src = at.checked_add(buf.len()).and_then(|end| m.get(at..end));
                buf.copy_from_slice(src.ok_or_else(|| damaged("a read past the end"))?);
                Ok(())
            }
        }
    }
}

/// A term found in a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    /// Documents of this segment holding it.
    pub df: u32,
    start: u64,
    end: u64,
}

/// An open segment. Holds its file open: a segment deleted meanwhile (merged away) stays
/// readable until this is dropped.
pub struct Segment {
    src: Source,
    columns: usize,
    docs: u32,
    terms: u32,
    words: u32,
    keys: u32,
    sections: [(u64, u64); SECTIONS],
    data_len: u64,
    sums: Vec<u64>,
    /// The first document's number when the numbers run without a gap (a segment as first
    /// written): then a document's number is this plus its ordinal and `DOCS` is not read.
    base: Option<u64>,
}

impl Segment {
    pub fn open(file: File) -> io::Result<Segment> {
        let len = file.metadata()?.len();
        Segment::from_source(Source::File(file), len)
    }

    /// A segment from bytes in memory (tests, the fuzz target).
    pub fn from_bytes(bytes: Vec<u8>) -> io::Result<Segment> {
        let len = bytes.len() as u64;
        Segment::from_source(Source::Memory(bytes), len)
    }

    fn from_source(src: Source, file_len: u64) -> io::Result<Segment> {
        if file_len < FOOTER {
            return Err(damaged("a segment shorter than its footer"));
        }
        let mut footer = vec![0u8; FOOTER as usize];
        src.read_exact_at(&mut footer, file_len - FOOTER)?;
        let (body, sum) = footer.split_at(FOOTER as usize - 8);
        if checksum(body) != Reader::new(sum).u64()? {
            return Err(damaged("a segment footer that fails its checksum"));
        }
        let mut r = Reader::new(body);
        if r.bytes(8)? != MAGIC {
            return Err(damaged("not a segment"));
        }
        let format = r.u32()?;
        if format != FORMAT {
            return Err(damaged(&format!("a segment of format {format}, not {FORMAT}")));
        }
        let columns = usize::from(r.u8()?);
        r.bytes(3)?;
        let (docs, terms, words, keys) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        let mut sections = [(0u64, 0u64); SECTIONS];
        for s in &mut sections {
            *s = (r.u64()?, r.u64()?);
        }
        let data_len = r.u64()?;
        let sums_sum = r.u64()?;
        let pages = data_len.div_ceil(PAGE as u64);
        if !(1..=MAX_COLUMNS).contains(&columns)
            || data_len.checked_add(pages * 8).and_then(|n| n.checked_add(FOOTER)) != Some(file_len)
        {
            return Err(damaged("a segment whose sizes disagree"));
        }
        let mut sums_bytes = vec![0u8; (pages * 8) as usize];
        src.read_exact_at(&mut sums_bytes, data_len)?;
        if checksum(&sums_bytes) != sums_sum {
            return Err(damaged("segment page sums that fail their checksum"));
        }
        let mut r = Reader::new(&sums_bytes);
        let sums = (0..pages).map(|_| r.u64()).collect::<io::Result<Vec<u64>>>()?;
        // The sections follow one another from the start of the data region to its end.
        let mut at = 0u64;
        for (off, len) in sections {
            if off != at {
                return Err(damaged("segment sections out of place"));
            }
            at = off.checked_add(len).ok_or_else(|| damaged("a section out of range"))?;
        }
        let n = u64::from(docs);
        let fixed = [
            (DOCS, n * 8),
            (LENGTHS, n * 4),
            (STORED_ENDS, n * 8),
            (TERM_INDEX, u64::from(terms) * TERM_ENTRY),
            (KEY_INDEX, u64::from(keys) * KEY_ENTRY),
        ];
        if at != data_len || fixed.iter().any(|(s, want)| sections[*s].1 != *want) {
            return Err(damaged("segment sections of the wrong size"));
        }
        let mut seg = Segment { src, columns, docs, terms, words, keys, sections, data_len, sums, base: None };
        if docs > 0 {
            let first = seg.doc_numbers(0, 1)?[0];
            let last = seg.doc_numbers(docs - 1, docs)?[0];
            // Strictly increasing numbers whose ends are `docs - 1` apart have no gap.
            if last.checked_sub(first) == Some(u64::from(docs - 1)) {
                seg.base = Some(first);
            }
        }
        Ok(seg)
    }

    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Documents in the segment.
    pub fn len(&self) -> u32 {
        self.docs
    }

    pub fn is_empty(&self) -> bool {
        self.docs == 0
    }

    /// `len` bytes of the data region from `off`, each page they touch checked.
    fn read(&self, off: u64, len: u64) -> io::Result<Vec<u8>> {
        if len > MAX_READ || off.checked_add(len).is_none_or(|end| end > self.data_len) {
            return Err(damaged("a read out of range"));
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        let first = off / PAGE as u64;
        let last = (off + len - 1) / PAGE as u64;
        let start = first * PAGE as u64;
        let end = ((last + 1) * PAGE as u64).min(self.data_len);
        let mut buf = vec![0u8; (end - start) as usize];
        self.src.read_exact_at(&mut buf, start)?;
        for (i, page) in buf.chunks(PAGE).enumerate() {
            if checksum(page) != self.sums[first as usize + i] {
                return Err(damaged("a segment page that fails its checksum"));
            }
        }
        let from = (off - start) as usize;
        buf.truncate(from + len as usize);
        buf.drain(..from);
        Ok(buf)
    }

    /// `len` bytes of section `s` from `off` within it.
    fn read_in(&self, s: usize, off: u64, len: u64) -> io::Result<Vec<u8>> {
        let (base, size) = self.sections[s];
        if off.checked_add(len).is_none_or(|end| end > size) {
            return Err(damaged("a read past its section"));
        }
        self.read(base + off, len)
    }

    fn fixed(&self, s: usize, width: u64, from: u32, to: u32) -> io::Result<Vec<u8>> {
        if from > to || to > self.docs {
            return Err(damaged("ordinals out of range"));
        }
        self.read_in(s, u64::from(from) * width, u64::from(to - from) * width)
    }

    /// The document numbers of ordinals `from..to`; checked to increase.
    pub fn doc_numbers(&self, from: u32, to: u32) -> io::Result<Vec<u64>> {
        if let Some(base) = self.base {
            if from > to || to > self.docs {
                return Err(damaged("ordinals out of range"));
            }
            return Ok((from..to).map(|o| base + u64::from(o)).collect());
        }
        let bytes = self.fixed(DOCS, 8, from, to)?;
        let mut r = Reader::new(&bytes);
        let out = (from..to).map(|_| r.u64()).collect::<io::Result<Vec<u64>>>()?;
        if out.windows(2).any(|w| w[0] >= w[1]) {
            return Err(damaged("segment document numbers out of order"));
        }
        Ok(out)
    }

    /// The lengths in terms of ordinals `from..to`.
    pub fn lengths(&self, from: u32, to: u32) -> io::Result<Vec<u32>> {
        let bytes = self.fixed(LENGTHS, 4, from, to)?;
        let mut r = Reader::new(&bytes);
        (from..to).map(|_| r.u32()).collect()
    }

    /// The ordinal of document number `doc`, if this segment holds it.
    pub fn ordinal(&self, doc: u64) -> io::Result<Option<u32>> {
        if let Some(base) = self.base {
            return Ok(doc.checked_sub(base).filter(|o| *o < u64::from(self.docs)).map(|o| o as u32));
        }
        let (mut lo, mut hi) = (0u32, self.docs);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = self.doc_numbers(mid, mid + 1)?[0];
            match at.cmp(&doc) {
                std::cmp::Ordering::Equal => return Ok(Some(mid)),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        Ok(None)
    }

    /// What was stored with ordinal `ord`.
    pub fn stored(&self, ord: u32) -> io::Result<Vec<u8>> {
        let from = ord.saturating_sub(1);
        let ends = self.fixed(STORED_ENDS, 8, from, ord.checked_add(1).ok_or_else(|| damaged("an ordinal"))?)?;
        let mut r = Reader::new(&ends);
        let start = if ord == 0 { 0 } else { r.u64()? };
        let end = r.u64()?;
        if start > end {
            return Err(damaged("a stored record that ends before it starts"));
        }
        self.read_in(STORED, start, end - start)
    }

    /// Term `i` of the dictionary: its bytes and postings' place.
    fn term_at(&self, i: u32) -> io::Result<(Vec<u8>, Term)> {
        let from = u64::from(i.saturating_sub(1)) * TERM_ENTRY;
        let n = if i == 0 { 1 } else { 2 };
        let bytes = self.read_in(TERM_INDEX, from, n * TERM_ENTRY)?;
        let mut r = Reader::new(&bytes);
        let (t0, p0) = if i == 0 {
            (0, 0)
        } else {
            let (t, p) = (r.u32()?, r.u64()?);
            r.u32()?;
            (t, p)
        };
        let (t1, p1, df) = (r.u32()?, r.u64()?, r.u32()?);
        if t0 > t1 || p0 > p1 || df == 0 || df > self.docs {
            return Err(damaged("a term entry out of range"));
        }
        let term = self.read_in(TERMS, u64::from(t0), u64::from(t1 - t0))?;
        Ok((term, Term { df, start: p0, end: p1 }))
    }

    /// `term` in this segment's dictionary, if it is there.
    pub fn find(&self, term: &str) -> io::Result<Option<Term>> {
        let (mut lo, mut hi) = (0u32, self.terms);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (bytes, t) = self.term_at(mid)?;
            match bytes.as_slice().cmp(term.as_bytes()) {
                std::cmp::Ordering::Equal => return Ok(Some(t)),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        Ok(None)
    }

    /// Every term of the dictionary, in order (merging, checks).
    pub fn terms(&self) -> io::Result<Vec<(String, Term)>> {
        (0..self.terms)
            .map(|i| {
                let (b, t) = self.term_at(i)?;
                Ok((String::from_utf8(b).map_err(|_| damaged("a term that is not UTF-8"))?, t))
            })
            .collect()
    }

    /// The postings of `t`, by increasing ordinal, each checked.
    pub fn postings(&self, t: &Term) -> io::Result<Vec<Posting>> {
        let bytes = self.read_in(POSTINGS, t.start, t.end - t.start)?;
        let mut r = Reader::new(&bytes);
        let mut out = Vec::with_capacity((t.df as usize).min(bytes.len()));
        let mut next: u64 = 0;
        while !r.is_done() {
            let ord = next.checked_add(r.varint()?).filter(|o| *o < u64::from(self.docs));
            let ord = ord.ok_or_else(|| damaged("a posting past the last document"))? as u32;
            let mut tf = [0u32; MAX_COLUMNS];
            for c in &mut tf[..self.columns] {
                *c = u32::try_from(r.varint()?).map_err(|_| damaged("a term count out of range"))?;
            }
            if tf.iter().all(|c| *c == 0) {
                return Err(damaged("a posting with no occurrence"));
            }
            out.push(Posting { ord, tf });
            next = u64::from(ord) + 1;
        }
        if out.len() != t.df as usize {
            return Err(damaged("a postings list of another length than its count"));
        }
        Ok(out)
    }

    /// Key `i` and its ordinal.
    fn key_at(&self, i: u32) -> io::Result<(Vec<u8>, u32)> {
        let from = u64::from(i.saturating_sub(1)) * KEY_ENTRY;
        let n = if i == 0 { 1 } else { 2 };
        let bytes = self.read_in(KEY_INDEX, from, n * KEY_ENTRY)?;
        let mut r = Reader::new(&bytes);
        let k0 = if i == 0 {
            0
        } else {
            let k = r.u32()?;
            r.u32()?;
            k
        };
        let (k1, ord) = (r.u32()?, r.u32()?);
        if k0 >= k1 || ord >= self.docs {
            return Err(damaged("a key entry out of range"));
        }
        Ok((self.read_in(KEYS, u64::from(k0), u64::from(k1 - k0))?, ord))
    }

    /// The ordinal whose key is `key`.
    pub fn find_key(&self, key: &str) -> io::Result<Option<u32>> {
        let (mut lo, mut hi) = (0u32, self.keys);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (bytes, ord) = self.key_at(mid)?;
            match bytes.as_slice().cmp(key.as_bytes()) {
                std::cmp::Ordering::Equal => return Ok(Some(ord)),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        Ok(None)
    }

    /// Every key with its ordinal, sorted (merging).
    pub fn keys(&self) -> io::Result<Vec<(String, u32)>> {
        (0..self.keys)
            .map(|i| {
                let (b, o) = self.key_at(i)?;
                Ok((String::from_utf8(b).map_err(|_| damaged("a key that is not UTF-8"))?, o))
            })
            .collect()
    }

    /// The surface words kept for spelling corrections, sorted.
    pub fn words(&self) -> io::Result<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        self.each_word(|w| out.push(w.to_owned()))?;
        Ok(out)
    }

    /// Calls `f` with each surface word, in order, without a copy of any (a spelling lookup
    /// checks a few hundred candidates against every word of every segment).
    pub fn each_word(&self, mut f: impl FnMut(&str)) -> io::Result<()> {
        let bytes = self.read_in(WORDS, 0, self.sections[WORDS].1)?;
        let mut r = Reader::new(&bytes);
        let mut last: Option<&str> = None;
        let mut n = 0u64;
        while !r.is_done() {
            let w = r.str()?;
            if last.is_some_and(|l| l >= w) {
                return Err(damaged("segment words out of order"));
            }
            f(w);
            last = Some(w);
            n += 1;
        }
        if n != u64::from(self.words) {
            return Err(damaged("a word list of another length than its count"));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
