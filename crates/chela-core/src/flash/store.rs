//! [`FlashStore`]: the log-structured record store. Layout, boot scan, appends and reclaim.
//!
//! Sector layout (all integers little endian):
//!
//! ```text
//! 0..4   magic "CHF1"          4..8   erase count        8..12  CRC-32 of 0..8
//! 12..16 0xFF (reserved)       16..20 sector sequence    20..24 !sequence
//! 24..   records, each starting on a 4-byte boundary
//! ```
//!
//! A sector with a good header and sequence `0xFFFF_FFFF` twice is free; one with
//! `seq == !(!seq)` is in the log (its place is its sequence); any other state is dirty and is
//! erased at boot. Before a reclaimed sector is erased its `!sequence` is programmed to 0 (it
//! is retired), so a cut during the erase can never make its old records count again.
//!
//! Record layout:
//!
//! ```text
//! 0..2 magic FE C5   2 kind   3 key length   4..6 payload length   6..8 zero
//! 8..12 record sequence       12..16 ordinal within the key
//! 16..20 CRC-32 of key and payload           20..24 CRC-32 of 0..20
//! 24.. key, payload, padding to 4 bytes (0xFF)
//! ```
//!
//! The header has its own CRC so a record whose payload was torn or rotted can be stepped over
//! by its (checked) length; a header that fails is searched past, four bytes at a time, for
//! the next good header. `0xFE` never occurs in UTF-8, so text payloads cannot fake one.

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::ops::ControlFlow;

use super::crc::{crc32, update};
use super::{Flash, WORD};

mod boot;

const SECTOR_MAGIC: [u8; 4] = *b"CHF1";
const SECTOR_HDR: u32 = 24;
const REC_MAGIC: [u8; 2] = [0xFE, 0xC5];
const REC_HDR: u32 = 24;
const FREE: u32 = 0xFFFF_FFFF;

/// Longest key (session or file name) in bytes.
pub const MAX_KEY: usize = 64;

/// What a record is, which decides what happens to it when its sector is reclaimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A session line: dropped (and counted) when its sector is the oldest and space is needed.
    Line,
    /// A kept entry (memory): copied forward, never dropped.
    Entry,
    /// The key's whole content from now on: earlier records of the key are dead. Kept while it
    /// is the newest replacement; an empty one (a clear) is dropped once its sector is reclaimed.
    Replace,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Line => 1,
            Kind::Entry => 2,
            Kind::Replace => 3,
        }
    }

    fn from_code(c: u8) -> Option<Kind> {
        match c {
            1 => Some(Kind::Line),
            2 => Some(Kind::Entry),
            3 => Some(Kind::Replace),
            _ => None,
        }
    }
}

/// Read order for [`FlashStore::read`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    OldestFirst,
    NewestFirst,
}

/// One live record handed to a reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub kind: Kind,
    /// The store-wide sequence number: later records have larger ones.
    pub seq: u32,
    pub payload: &'a [u8],
}

/// Bounds and policy chosen by the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Distinct keys with live records; a new key beyond it is refused.
    pub max_keys: usize,
    /// Names whose lines, appended through the [`Storage`](crate::storage::Storage) contract,
    /// are kept entries (never dropped); every other name's lines are session lines.
    pub kept: &'static [&'static str],
}

impl Default for Limits {
    /// 64 keys; the memory files are kept.
    fn default() -> Limits {
        Limits { max_keys: 64, kept: &["entries.jsonl", "MEMORY.md"] }
    }
}

/// Why a [`FlashStore`] call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error<E> {
    /// The flash failed (a power cut, a bus error). The store's view may be stale: drop it and
    /// [`open`](FlashStore::open) again.
    Flash(E),
    /// The partition cannot hold a store: fewer than 2 sectors, or a sector size outside
    /// 256..=65,536 or not a multiple of 4.
    Geometry { sector_size: u32, sectors: u32 },
    /// A record must fit in one sector: `len` payload bytes were given, `max` fit with this key.
    RecordTooBig { len: usize, max: usize },
    /// Keys are 1 to [`MAX_KEY`] bytes.
    BadKey { len: usize },
    /// Already `max` keys hold records.
    TooManyKeys { max: usize },
    /// [`Storage::append`](crate::storage::Storage::append) was given something that is not
    /// whole lines (empty, or not ending in `\n`).
    NotWholeLines,
    /// No free sector is left to move records into, which only damage the boot could not
    /// repair leaves. Nothing is lost, but nothing more can be written: erase the partition.
    NoSpare,
    /// Kept records (entries and replacements) would pass half of the partition; the rest is
    /// room for session lines and for moving records. Delete entries to make room.
    Full { kept: usize, limit: usize },
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Flash(e) => write!(f, "flash error: {e}"),
            Error::Geometry { sector_size, sectors } => write!(
                f,
                "a flash store needs at least 2 sectors of 256 to 65536 bytes (a multiple of 4); \
                 this partition has {sectors} of {sector_size}"
            ),
            Error::RecordTooBig { len, max } => {
                write!(f, "a record of {len} bytes does not fit in a flash sector (at most {max})")
            }
            Error::NoSpare => f.write_str(
                "the flash store has no free sector to reclaim into (damaged partition); \
                 reset it to write again",
            ),
            Error::NotWholeLines => f.write_str("append takes whole lines ending in a newline"),
            Error::BadKey { len } => write!(f, "a flash key is 1 to {MAX_KEY} bytes, not {len}"),
            Error::TooManyKeys { max } => write!(f, "the flash store already holds {max} keys"),
            Error::Full { kept, limit } => write!(
                f,
                "flash is full: kept records would take {kept} bytes, over the {limit} allowed; \
                 delete memory entries to make room"
            ),
        }
    }
}

/// Per-key figures, for `session_list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyStats {
    pub key: String,
    /// Live records.
    pub records: usize,
    /// Their payload bytes.
    pub bytes: usize,
    /// Lines of this key dropped to make room before its oldest live record. It is read from
    /// the records' ordinals, so a reboot gives the same figure; a key whose records are all
    /// gone is not listed.
    pub dropped: u32,
}

/// Whole-store figures, for `heap_info`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub sectors: u32,
    pub sector_size: u32,
    pub free_sectors: u32,
    /// Live records and the flash bytes they take (headers and padding included).
    pub records: usize,
    pub record_bytes: usize,
    /// Bytes taken by kept records (entries, replacements), against `kept_limit`.
    pub kept_bytes: usize,
    pub kept_limit: usize,
    /// Session lines dropped to make room since the store was opened, over all keys.
    pub dropped: u64,
    /// Damaged records or stretches skipped by the boot scan, and by moves since.
    pub corrupt: u32,
    /// Dirty sectors erased at boot (torn erases, torn headers, retired sectors).
    pub repaired: u32,
    pub min_erases: u32,
    pub max_erases: u32,
    /// RAM the index and key table hold (what the store costs the heap).
    pub ram_bytes: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Used { seq: u32, wp: u32, closed: bool },
}

#[derive(Clone, Copy, Debug)]
struct Sector {
    erases: u32,
    state: State,
}

/// One live record: where it is and what the store needs to know without reading it.
#[derive(Clone, Copy, Debug)]
struct Entry {
    seq: u32,
    sector: u16,
    /// Offset in the sector; sectors are at most 64 KiB.
    offset: u16,
    /// The key's id in the low 14 bits, the kind's code in the top 2: 16 bytes a record.
    key_kind: u16,
    /// Position among the key's records since its last replacement (which is 0); the first
    /// live one tells how many lines before it were dropped.
    ord: u32,
    len: u16,
}

const KEY_BITS: u16 = 14;
/// Key ids fit in 14 bits.
const MAX_KEY_IDS: usize = 1 << KEY_BITS;

impl Entry {
    fn key(&self) -> u16 {
        self.key_kind & ((1 << KEY_BITS) - 1)
    }

    fn kind(&self) -> Kind {
        Kind::from_code((self.key_kind >> KEY_BITS) as u8).unwrap_or(Kind::Line)
    }

    fn pack(key: u16, kind: Kind) -> u16 {
        key | (u16::from(kind.code()) << KEY_BITS)
    }
}

#[derive(Clone, Debug)]
struct Key {
    name: String,
    next_ord: u32,
    records: usize,
    bytes: usize,
}

struct Header {
    kind: Kind,
    key_len: usize,
    len: usize,
    seq: u32,
    ord: u32,
    dcrc: u32,
}

fn le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn align(n: u32) -> u32 {
    n.div_ceil(WORD) * WORD
}

fn parse_header(h: &[u8]) -> Option<Header> {
    if h[..2] != REC_MAGIC || crc32(&h[..20]) != le(&h[20..24]) {
        return None;
    }
    Some(Header {
        kind: Kind::from_code(h[2])?,
        key_len: usize::from(h[3]),
        len: usize::from(u16::from_le_bytes([h[4], h[5]])),
        seq: le(&h[8..12]),
        ord: le(&h[12..16]),
        dcrc: le(&h[16..20]),
    })
}

fn body_crc(key: &[u8], payload: &[u8]) -> u32 {
    !update(update(!0, key), payload)
}

/// See the module docs. `F` is the partition; the store owns it.
pub struct FlashStore<F: Flash> {
    flash: F,
    sector_size: u32,
    sectors: Vec<Sector>,
    /// Live records in sequence order.
    index: Vec<Entry>,
    keys: Vec<Key>,
    limits: Limits,
    active: Option<u16>,
    next_seq: u32,
    next_sector_seq: u32,
    corrupt: u32,
    repaired: u32,
    dropped: u64,
    /// Reused for building and moving records; at most one sector.
    scratch: Vec<u8>,
}

impl<F: Flash> fmt::Debug for FlashStore<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlashStore").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl<F: Flash> FlashStore<F> {
    /// Scans the partition and rebuilds the index: the boot. Blank partitions are formatted,
    /// dirty sectors (a cut erase or header, a retired sector) erased, damaged records skipped
    /// and counted. Holds one sector in RAM while it scans.
    pub fn open(flash: F) -> Result<FlashStore<F>, Error<F::Error>> {
        FlashStore::open_with(flash, Limits::default())
    }

    /// [`open`](FlashStore::open) with other bounds.
    pub fn open_with(flash: F, limits: Limits) -> Result<FlashStore<F>, Error<F::Error>> {
        let sector_size = flash.sector_size();
        let count = flash.sector_count();
        if count < 2
            || count > u32::from(u16::MAX)
            || !(256..=65_536).contains(&sector_size)
            || !sector_size.is_multiple_of(WORD)
        {
            return Err(Error::Geometry { sector_size, sectors: count });
        }
        let mut store = FlashStore {
            flash,
            sector_size,
            sectors: Vec::with_capacity(count as usize),
            index: Vec::new(),
            keys: Vec::new(),
            limits,
            active: None,
            next_seq: 0,
            next_sector_seq: 0,
            corrupt: 0,
            repaired: 0,
            dropped: 0,
            scratch: vec![0; sector_size as usize],
        };
        store.boot()?;
        store.scratch = Vec::new();
        Ok(store)
    }

    /// Gives the flash back (to simulate a reboot in tests: open it again).
    pub fn into_flash(self) -> F {
        self.flash
    }

    /// The flash, for inspection.
    pub fn flash(&self) -> &F {
        &self.flash
    }

    /// Bytes record `e` takes on flash: header, key, payload, padding to a word.
    fn rec_size(&self, e: &Entry) -> usize {
        let key = self.keys[usize::from(e.key())].name.len();
        align(REC_HDR + (key + usize::from(e.len)) as u32) as usize
    }

    /// The largest payload a record with a key of `key_len` bytes can carry.
    pub fn max_payload(&self, key_len: usize) -> usize {
        let room = (self.sector_size - SECTOR_HDR - REC_HDR) as usize;
        room.saturating_sub(key_len).min(usize::from(u16::MAX))
    }

    /// The bounds and policy the store was opened with.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The byte size `key` has as a file (see `files.rs`), from the index and at most one
    /// byte read.
    pub(super) fn content_size(&self, key: &str) -> Result<u64, Error<F::Error>> {
        let Some(k) = self.keys.iter().position(|k| k.name == key) else {
            return Ok(0);
        };
        let mut size = 0u64;
        let mut replaced = None;
        let mut after = false;
        for e in self.index.iter().filter(|e| usize::from(e.key()) == k) {
            if e.kind() == Kind::Replace {
                replaced = Some(*e);
                size += u64::from(e.len);
            } else {
                after |= replaced.is_some();
                size += u64::from(e.len) + 1;
            }
        }
        if let Some(r) = replaced.filter(|r| after && r.len > 0) {
            let mut last = [0u8];
            let at = u32::from(r.sector) * self.sector_size
                + u32::from(r.offset)
                + REC_HDR
                + key.len() as u32
                + u32::from(r.len)
                - 1;
            self.flash.read(at, &mut last).map_err(Error::Flash)?;
            size += u64::from(last[0] != b'\n');
        }
        Ok(size)
    }

    fn write_sector_header(&mut self, s: u32) -> Result<(), Error<F::Error>> {
        let mut h = [0xFFu8; 16];
        h[..4].copy_from_slice(&SECTOR_MAGIC);
        h[4..8].copy_from_slice(&self.sectors[s as usize].erases.to_le_bytes());
        let crc = crc32(&h[..8]);
        h[8..12].copy_from_slice(&crc.to_le_bytes());
        self.flash.program(s * self.sector_size, &h).map_err(Error::Flash)?;
        self.sectors[s as usize].state = State::Free;
        Ok(())
    }

    /// Erases sector `s`, counts it, and writes its free header.
    fn erase(&mut self, s: u32) -> Result<(), Error<F::Error>> {
        self.flash.erase(s).map_err(Error::Flash)?;
        let sector = &mut self.sectors[s as usize];
        sector.erases = sector.erases.saturating_add(1);
        self.write_sector_header(s)
    }

    /// Puts free sector `s` at the head of the log.
    fn open_sector(&mut self, s: u16) -> Result<(), Error<F::Error>> {
        let seq = self.next_sector_seq;
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&seq.to_le_bytes());
        b[4..].copy_from_slice(&(!seq).to_le_bytes());
        self.flash.program(u32::from(s) * self.sector_size + 16, &b).map_err(Error::Flash)?;
        self.next_sector_seq = seq.wrapping_add(1);
        self.sectors[usize::from(s)].state = State::Used { seq, wp: SECTOR_HDR, closed: false };
        self.active = Some(s);
        Ok(())
    }

    /// The free sector erased least often (the lowest number among equals).
    fn pick_free(&self) -> Option<u16> {
        (0..self.sectors.len())
            .filter(|&i| self.sectors[i].state == State::Free)
            .min_by_key(|&i| (self.sectors[i].erases, i))
            .map(|i| i as u16)
    }

    fn free_count(&self) -> usize {
        self.sectors.iter().filter(|s| s.state == State::Free).count()
    }

    fn room(&self, s: u16) -> u32 {
        match self.sectors[usize::from(s)].state {
            State::Used { wp, closed: false, .. } => self.sector_size - wp,
            _ => 0,
        }
    }

    /// Bytes of records that a reclaim must copy forward.
    fn kept_bytes(&self) -> usize {
        self.index.iter().filter(|e| keeps(e)).map(|e| self.rec_size(e)).sum()
    }

    fn kept_limit(&self) -> usize {
        (self.sectors.len() - 1) * (self.sector_size - SECTOR_HDR) as usize / 2
    }

    /// Bytes a record of `len` payload bytes under `key` takes on flash.
    pub(super) fn record_size(&self, key: &str, len: usize) -> usize {
        align(REC_HDR + (key.len() + len) as u32) as usize
    }

    /// Refuses `more` bytes of kept records if they would pass the kept limit.
    pub(super) fn check_kept(&self, more: usize) -> Result<(), Error<F::Error>> {
        let kept = self.kept_bytes() + more;
        let limit = self.kept_limit();
        if kept > limit { Err(Error::Full { kept, limit }) } else { Ok(()) }
    }

    /// Appends a session line to `key`. Durable when it returns `Ok`.
    pub fn append_line(&mut self, key: &str, payload: &[u8]) -> Result<(), Error<F::Error>> {
        self.write(key, Kind::Line, payload)
    }

    /// Appends a kept entry to `key`. Durable when it returns `Ok`.
    pub fn append_entry(&mut self, key: &str, payload: &[u8]) -> Result<(), Error<F::Error>> {
        self.write(key, Kind::Entry, payload)
    }

    /// Makes `payload` the whole content of `key`, atomically: a reader sees the old records
    /// or this one. An empty payload clears the key.
    pub fn replace(&mut self, key: &str, payload: &[u8]) -> Result<(), Error<F::Error>> {
        self.write(key, Kind::Replace, payload)
    }

    fn key_for_write(&mut self, key: &str) -> Result<u16, Error<F::Error>> {
        if key.is_empty() || key.len() > MAX_KEY {
            return Err(Error::BadKey { len: key.len() });
        }
        if let Some(i) = self.keys.iter().position(|k| k.name == key) {
            return Ok(i as u16);
        }
        let live = self.keys.iter().filter(|k| k.records > 0).count();
        if live >= self.limits.max_keys.min(MAX_KEY_IDS) {
            return Err(Error::TooManyKeys { max: self.limits.max_keys });
        }
        let fresh = Key { name: key.to_string(), next_ord: 1, records: 0, bytes: 0 };
        // Reuse the slot of a key with nothing left, so the table stays bounded.
        if let Some(i) = self.keys.iter().position(|k| k.records == 0) {
            self.keys[i] = fresh;
            return Ok(i as u16);
        }
        if self.keys.len() >= MAX_KEY_IDS {
            return Err(Error::TooManyKeys { max: MAX_KEY_IDS });
        }
        self.keys.push(fresh);
        Ok((self.keys.len() - 1) as u16)
    }

    fn write(&mut self, key: &str, kind: Kind, payload: &[u8]) -> Result<(), Error<F::Error>> {
        if key.is_empty() || key.len() > MAX_KEY {
            return Err(Error::BadKey { len: key.len() });
        }
        let max = self.max_payload(key.len());
        if payload.len() > max {
            return Err(Error::RecordTooBig { len: payload.len(), max });
        }
        let size = align(REC_HDR + (key.len() + payload.len()) as u32);
        if kind != Kind::Line {
            self.check_kept(size as usize)?;
        }
        let k = self.key_for_write(key)?;
        let s = self.make_room(size)?;
        let ord = if kind == Kind::Replace { 0 } else { self.keys[usize::from(k)].next_ord };
        let seq = self.next_seq;
        let mut rec = core::mem::take(&mut self.scratch);
        rec.clear();
        rec.extend_from_slice(&REC_MAGIC);
        rec.push(kind.code());
        rec.push(key.len() as u8);
        rec.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        rec.extend_from_slice(&[0, 0]);
        rec.extend_from_slice(&seq.to_le_bytes());
        rec.extend_from_slice(&ord.to_le_bytes());
        rec.extend_from_slice(&body_crc(key.as_bytes(), payload).to_le_bytes());
        let hcrc = crc32(&rec[..20]);
        rec.extend_from_slice(&hcrc.to_le_bytes());
        rec.extend_from_slice(key.as_bytes());
        rec.extend_from_slice(payload);
        rec.resize(size as usize, 0xFF);
        let done = self.program_record(s, &rec);
        self.scratch = rec;
        let offset = done?;
        self.next_seq = seq.wrapping_add(1);
        if kind == Kind::Replace {
            self.index.retain(|e| e.key() != k);
            let key = &mut self.keys[usize::from(k)];
            key.records = 0;
            key.bytes = 0;
            key.next_ord = 1;
        } else {
            self.keys[usize::from(k)].next_ord += 1;
        }
        let key = &mut self.keys[usize::from(k)];
        key.records += 1;
        key.bytes += payload.len();
        self.index.push(Entry {
            seq,
            sector: s,
            offset,
            key_kind: Entry::pack(k, kind),
            ord,
            len: payload.len() as u16,
        });
        Ok(())
    }

    /// Programs a whole record at the write position of sector `s`; returns its offset. A
    /// failed program closes the sector (its tail is unknown now).
    fn program_record(&mut self, s: u16, rec: &[u8]) -> Result<u16, Error<F::Error>> {
        let State::Used { seq, wp, .. } = self.sectors[usize::from(s)].state else {
            unreachable!("records go to sectors in the log")
        };
        let at = u32::from(s) * self.sector_size + wp;
        if let Err(e) = self.flash.program(at, rec) {
            self.sectors[usize::from(s)].state = State::Used { seq, wp, closed: true };
            if self.active == Some(s) {
                self.active = None;
            }
            return Err(Error::Flash(e));
        }
        self.sectors[usize::from(s)].state = State::Used { seq, wp: wp + rec.len() as u32, closed: false };
        Ok(wp as u16)
    }

    /// A sector in the log with `size` bytes of room, reclaiming the oldest sectors if needed.
    fn make_room(&mut self, size: u32) -> Result<u16, Error<F::Error>> {
        // Every pass either finds room or reclaims one sector; after a whole round every line
        // is gone and the kept records (at most half the space) are packed, so room exists.
        for _ in 0..=2 * self.sectors.len() {
            if let Some(a) = self.active
                && self.room(a) >= size
            {
                return Ok(a);
            }
            if self.free_count() > 1 {
                if let Some(a) = self.active {
                    self.close(a);
                }
                let s = self.pick_free().expect("a free sector was counted");
                self.open_sector(s)?;
                continue;
            }
            let oldest = self.oldest().expect("a full store has sectors in the log");
            let need: u32 =
                self.index.iter().filter(|e| e.sector == oldest && keeps(e)).map(|e| self.rec_size(e) as u32).sum();
            match self.active {
                // Pack the oldest sector's kept records into the room left here, so kept
                // records spread over many sectors come together.
                Some(a) if a != oldest && self.room(a) >= need => self.reclaim(oldest, a)?,
                _ => {
                    if let Some(a) = self.active {
                        self.close(a);
                    }
                    let Some(spare) = self.pick_free() else {
                        // Only after damage the boot could not undo; refuse rather than lose records.
                        return Err(Error::NoSpare);
                    };
                    self.open_sector(spare)?;
                    self.reclaim(oldest, spare)?;
                }
            }
        }
        let limit = self.kept_limit();
        Err(Error::Full { kept: self.kept_bytes(), limit })
    }

    fn close(&mut self, s: u16) {
        if let State::Used { seq, wp, .. } = self.sectors[usize::from(s)].state {
            self.sectors[usize::from(s)].state = State::Used { seq, wp, closed: true };
        }
        self.active = None;
    }

    /// The sector at the tail of the log.
    fn oldest(&self) -> Option<u16> {
        (0..self.sectors.len())
            .filter_map(|i| match self.sectors[i].state {
                State::Used { seq, .. } => Some((seq, i as u16)),
                State::Free => None,
            })
            .min()
            .map(|(_, s)| s)
    }

    /// Moves sector `oldest`'s kept records into `dest` (which has room for them), drops its
    /// lines (counting them), retires and erases it.
    fn reclaim(&mut self, oldest: u16, dest: u16) -> Result<(), Error<F::Error>> {
        let spare = dest;
        let mut moved = core::mem::take(&mut self.scratch);
        let mut i = 0;
        while i < self.index.len() {
            let e = self.index[i];
            if e.sector != oldest {
                i += 1;
                continue;
            }
            let k = usize::from(e.key());
            if keeps(&e) {
                moved.resize(self.rec_size(&e), 0);
                let at = u32::from(oldest) * self.sector_size + u32::from(e.offset);
                if let Err(err) = self.flash.read(at, &mut moved) {
                    self.scratch = moved;
                    return Err(Error::Flash(err));
                }
                if record_is_whole(&moved) {
                    match self.program_record(spare, &moved) {
                        Ok(offset) => {
                            self.index[i].sector = spare;
                            self.index[i].offset = offset;
                            i += 1;
                            continue;
                        }
                        Err(err) => {
                            self.scratch = moved;
                            return Err(err);
                        }
                    }
                }
                // Rotted since boot: never copy damage forward.
                self.corrupt += 1;
            } else if e.kind() == Kind::Line {
                self.dropped += 1;
            }
            let key = &mut self.keys[k];
            key.records -= 1;
            key.bytes -= usize::from(e.len);
            self.index.remove(i);
        }
        self.scratch = moved;
        // A key with no ordinals left restarts at 1, as a reboot would see it.
        let mut counted = vec![false; self.keys.len()];
        for e in self.index.iter().filter(|e| e.kind() != Kind::Replace) {
            counted[usize::from(e.key())] = true;
        }
        for (key, counted) in self.keys.iter_mut().zip(counted) {
            if !counted {
                key.next_ord = 1;
            }
        }
        // Retire before erasing: a cut erase must not bring the old records back.
        let at = u32::from(oldest) * self.sector_size + 20;
        self.flash.program(at, &[0; 4]).map_err(Error::Flash)?;
        self.erase(u32::from(oldest))
    }

    /// Hands `key`'s live records to `visit` in `order` until it returns `Break`. Reads one
    /// record at a time (at most one sector of RAM).
    pub fn read(
        &self,
        key: &str,
        order: Order,
        visit: &mut dyn FnMut(Record<'_>) -> ControlFlow<()>,
    ) -> Result<(), Error<F::Error>> {
        let Some(k) = self.keys.iter().position(|k| k.name == key && k.records > 0) else {
            return Ok(());
        };
        let mut buf = Vec::new();
        let mut each = |e: &Entry| -> Result<ControlFlow<()>, Error<F::Error>> {
            if usize::from(e.key()) != k {
                return Ok(ControlFlow::Continue(()));
            }
            buf.resize(self.rec_size(e), 0);
            let at = u32::from(e.sector) * self.sector_size + u32::from(e.offset);
            self.flash.read(at, &mut buf).map_err(Error::Flash)?;
            let start = REC_HDR as usize + key.len();
            let payload = &buf[start..start + usize::from(e.len)];
            if !record_is_whole(&buf) {
                // Rotted since boot: skipped, as the boot scan would.
                return Ok(ControlFlow::Continue(()));
            }
            Ok(visit(Record { kind: e.kind(), seq: e.seq, payload }))
        };
        match order {
            Order::OldestFirst => {
                for e in &self.index {
                    if each(e)?.is_break() {
                        break;
                    }
                }
            }
            Order::NewestFirst => {
                for e in self.index.iter().rev() {
                    if each(e)?.is_break() {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Figures for every key with live records.
    pub fn keys(&self) -> Vec<KeyStats> {
        let mut first_ord = vec![None::<u32>; self.keys.len()];
        for e in self.index.iter().filter(|e| e.kind() != Kind::Replace) {
            first_ord[usize::from(e.key())].get_or_insert(e.ord);
        }
        self.keys
            .iter()
            .zip(first_ord)
            .filter(|(k, _)| k.records > 0)
            .map(|(k, first)| KeyStats {
                key: k.name.clone(),
                records: k.records,
                bytes: k.bytes,
                // Ordinals start at 1 after a replacement (or none).
                dropped: first.map_or(0, |o| o.saturating_sub(1)),
            })
            .collect()
    }

    /// Figures for the whole store.
    pub fn stats(&self) -> Stats {
        Stats {
            sectors: self.sectors.len() as u32,
            sector_size: self.sector_size,
            free_sectors: self.free_count() as u32,
            records: self.index.len(),
            record_bytes: self.index.iter().map(|e| self.rec_size(e)).sum(),
            kept_bytes: self.kept_bytes(),
            kept_limit: self.kept_limit(),
            dropped: self.dropped,
            corrupt: self.corrupt,
            repaired: self.repaired,
            min_erases: self.sectors.iter().map(|s| s.erases).min().unwrap_or(0),
            max_erases: self.sectors.iter().map(|s| s.erases).max().unwrap_or(0),
            ram_bytes: self.index.capacity() * core::mem::size_of::<Entry>()
                + self.sectors.capacity() * core::mem::size_of::<Sector>()
                + self.keys.iter().map(|k| k.name.capacity() + core::mem::size_of::<Key>()).sum::<usize>()
                + self.scratch.capacity(),
        }
    }
}

/// Whether a reclaim copies the record forward: kept entries and replacements with content;
/// session lines and clears are dropped.
fn keeps(e: &Entry) -> bool {
    match e.kind() {
        Kind::Line => false,
        Kind::Replace => e.len > 0,
        Kind::Entry => true,
    }
}

/// True when `rec` (a whole record as read from flash) passes both CRCs.
fn record_is_whole(rec: &[u8]) -> bool {
    let Some(h) = rec.get(..REC_HDR as usize).and_then(parse_header) else {
        return false;
    };
    let body = REC_HDR as usize;
    match rec.get(body..body + h.key_len + h.len) {
        Some(b) => body_crc(&b[..h.key_len], &b[h.key_len..]) == h.dcrc,
        None => false,
    }
}
