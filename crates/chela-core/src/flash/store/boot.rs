//! The boot scan: sector headers first (formatting blank sectors, erasing dirty ones), then the
//! records of the sectors in the log, oldest first, into the index.

use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

use super::super::crc::crc32;
use super::super::{Flash, WORD};
use super::{
    Entry, Error, FREE, FlashStore, Key, Kind, MAX_KEY_IDS, REC_HDR, SECTOR_HDR, SECTOR_MAGIC, Sector, State, align,
    body_crc, le, parse_header,
};

impl<F: Flash> FlashStore<F> {
    /// Reads the partition and rebuilds the store's state: see the module docs.
    pub(super) fn boot(&mut self) -> Result<(), Error<F::Error>> {
        let count = self.flash.sector_count();
        // Pass 1: sector headers.
        let mut dirty = Vec::new();
        let mut blank = Vec::new();
        let mut used = Vec::new();
        let mut count_lost = Vec::new();
        for s in 0..count {
            self.read_sector(s)?;
            let b = &self.scratch;
            let good = b[..4] == SECTOR_MAGIC && crc32(&b[..8]) == le(&b[8..12]);
            let (seq, not_seq) = (le(&b[16..20]), le(&b[20..24]));
            let erases = if good { le(&b[4..8]) } else { 0 };
            let state = if good && seq == FREE && not_seq == FREE && b[SECTOR_HDR as usize..].iter().all(|&x| x == 0xFF)
            {
                State::Free
            } else if seq != FREE && seq == !not_seq {
                // In the log. A rotted magic or erase count costs only the count.
                if !good {
                    count_lost.push(s);
                }
                used.push((seq, s));
                State::Used { seq, wp: SECTOR_HDR, closed: true }
            } else if b.iter().all(|&x| x == 0xFF) {
                blank.push(s);
                State::Free
            } else {
                dirty.push(s);
                State::Free
            };
            self.sectors.push(Sector { erases, state });
        }
        // A sector whose count was lost takes the highest known one, so it is not favoured.
        let known = self.sectors.iter().map(|s| s.erases).max().unwrap_or(0);
        for &s in &count_lost {
            self.sectors[s as usize].erases = known;
        }
        for &s in &blank {
            self.sectors[s as usize].erases = known;
            self.write_sector_header(s)?;
        }
        for &s in &dirty {
            self.sectors[s as usize].erases = known;
            self.erase(s)?;
            self.repaired += 1;
        }
        // Pass 2: records, oldest sector first.
        used.sort_unstable();
        let mut max_seq = None::<u32>;
        let mut found: Vec<Entry> = Vec::new();
        for &(sseq, s) in &used {
            self.next_sector_seq = self.next_sector_seq.max(sseq.wrapping_add(1));
            self.read_sector(s)?;
            let (wp, closed) = self.scan_sector(s, &mut found, &mut max_seq);
            self.sectors[s as usize].state = State::Used { seq: sseq, wp, closed };
        }
        self.next_seq = max_seq.map_or(0, |m| m.wrapping_add(1));
        // No free sector: a reclaim was cut before it retired the oldest sector, so the newest
        // holds only copies of records still in the oldest. Erase it to get the spare back.
        if self.free_count() == 0
            && let Some(&(_, newest)) = used.last()
        {
            let newest = newest as u16;
            let copied = |e: &Entry| found.iter().any(|o| o.seq == e.seq && o.sector != newest);
            if found.iter().all(|e| e.sector != newest || copied(e)) {
                found.retain(|e| e.sector != newest);
                used.pop();
                self.erase(u32::from(newest))?;
                self.repaired += 1;
            }
        }
        // The same record twice: a reclaim was cut after copying it. Keep the newer copy.
        let sector_seq = |s: u16| match self.sectors[usize::from(s)].state {
            State::Used { seq, .. } => seq,
            State::Free => 0,
        };
        // Sorted in place: at boot the store holds the records once (16 bytes each).
        found.sort_unstable_by_key(|e| (e.seq, core::cmp::Reverse(sector_seq(e.sector))));
        found.dedup_by_key(|e| e.seq);
        // The newest replacement of each key kills everything before it.
        let mut last_replace = vec![None::<u32>; self.keys.len()];
        for e in &found {
            if e.kind() == Kind::Replace {
                last_replace[usize::from(e.key())] = Some(e.seq);
            }
        }
        found.retain(|e| last_replace[usize::from(e.key())].is_none_or(|r| e.seq >= r));
        found.shrink_to_fit();
        for e in &found {
            let k = usize::from(e.key());
            let key = &mut self.keys[k];
            key.next_ord = key.next_ord.max(e.ord.saturating_add(1));
            key.records += 1;
            key.bytes += usize::from(e.len);
        }
        self.index = found;
        for key in &mut self.keys {
            key.next_ord = key.next_ord.max(1);
        }
        // Appends go on in the newest sector if nothing damaged its tail.
        self.active = used.last().and_then(|&(_, s)| match self.sectors[s as usize].state {
            State::Used { closed: false, .. } => u16::try_from(s).ok(),
            _ => None,
        });
        Ok(())
    }

    fn read_sector(&mut self, s: u32) -> Result<(), Error<F::Error>> {
        self.flash.read(s * self.sector_size, &mut self.scratch).map_err(Error::Flash)
    }

    /// Scans the sector in `scratch`; returns the write position and whether the space after
    /// it is unusable (not erased).
    fn scan_sector(&mut self, s: u32, found: &mut Vec<Entry>, max_seq: &mut Option<u32>) -> (u32, bool) {
        let ss = self.sector_size as usize;
        let mut off = SECTOR_HDR as usize;
        let mut end = off;
        let mut in_garbage = false;
        while off + REC_HDR as usize <= ss {
            let h = &self.scratch[off..off + REC_HDR as usize];
            if self.scratch[off..].iter().all(|&b| b == 0xFF) {
                break;
            }
            let Some(hdr) = parse_header(h) else {
                if !in_garbage {
                    self.corrupt += 1;
                    in_garbage = true;
                }
                off += WORD as usize;
                continue;
            };
            let size = align(REC_HDR + (hdr.key_len + hdr.len) as u32) as usize;
            if off + size > ss {
                if !in_garbage {
                    self.corrupt += 1;
                    in_garbage = true;
                }
                off += WORD as usize;
                continue;
            }
            in_garbage = false;
            *max_seq = Some(max_seq.map_or(hdr.seq, |m| m.max(hdr.seq)));
            let body = off + REC_HDR as usize;
            let key = &self.scratch[body..body + hdr.key_len];
            let payload = &self.scratch[body + hdr.key_len..body + hdr.key_len + hdr.len];
            let name = core::str::from_utf8(key).ok().filter(|k| !k.is_empty());
            let good = body_crc(key, payload) == hdr.dcrc;
            match name.filter(|_| good).map(ToString::to_string).and_then(|n| self.intern(&n)) {
                Some(key) => {
                    found.push(Entry {
                        seq: hdr.seq,
                        sector: s as u16,
                        offset: off as u16,
                        key_kind: Entry::pack(key, hdr.kind),
                        ord: hdr.ord,
                        len: hdr.len as u16,
                    });
                }
                _ => self.corrupt += 1,
            }
            off += size;
            end = off;
        }
        let closed = self.scratch[end..].iter().any(|&b| b != 0xFF);
        (end as u32, closed)
    }

    /// The id of key `name`, added if new (boot: only the id space bounds it).
    fn intern(&mut self, name: &str) -> Option<u16> {
        if let Some(i) = self.keys.iter().position(|k| k.name == name) {
            return u16::try_from(i).ok();
        }
        if self.keys.len() >= MAX_KEY_IDS {
            return None;
        }
        let id = self.keys.len() as u16;
        self.keys.push(Key { name: name.to_string(), next_ord: 1, records: 0, bytes: 0 });
        Some(id)
    }
}
