//! TZif (RFC 8536, versions 1 to 4) decoding: the bytes of a `/usr/share/zoneinfo` file in, a
//! transition table and the footer rule out.

use alloc::vec::Vec;

use super::ZoneError;
use super::posix::PosixTz;

/// The largest TZif file accepted. The biggest in the 2025 database is under 4 KiB.
pub const MAX_TZIF_LEN: usize = 64 * 1024;
/// The most transitions accepted (the database's busiest zone has a few hundred).
pub const MAX_TRANSITIONS: usize = 4096;

pub(super) struct Decoded {
    /// (instant, offset in force from it on), ascending by instant.
    pub transitions: Vec<(i64, i32)>,
    /// The offset before the first transition.
    pub initial: i32,
    pub footer: Option<PosixTz>,
}

struct Header {
    version: u8,
    isutcnt: usize,
    isstdcnt: usize,
    leapcnt: usize,
    timecnt: usize,
    typecnt: usize,
    charcnt: usize,
}

impl Header {
    fn data_len(&self, time_size: usize) -> usize {
        self.timecnt * time_size
            + self.timecnt
            + self.typecnt * 6
            + self.charcnt
            + self.leapcnt * (time_size + 4)
            + self.isstdcnt
            + self.isutcnt
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ZoneError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(ZoneError::tzif(self.pos, what, "the file ends early"));
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn header(&mut self) -> Result<Header, ZoneError> {
        let at = self.pos;
        let head = self.take(44, "header")?;
        if &head[..4] != b"TZif" {
            return Err(ZoneError::tzif(at, "header", "it does not start with `TZif`; is this a zoneinfo file?"));
        }
        let version = match head[4] {
            0 => 1,
            b'2' => 2,
            b'3' => 3,
            b'4' => 4,
            _ => return Err(ZoneError::tzif(at + 4, "version", "only versions 1 to 4 are known")),
        };
        let count = |i: usize| {
            u32::from_be_bytes([head[20 + 4 * i], head[21 + 4 * i], head[22 + 4 * i], head[23 + 4 * i]]) as usize
        };
        let h = Header {
            version,
            isutcnt: count(0),
            isstdcnt: count(1),
            leapcnt: count(2),
            timecnt: count(3),
            typecnt: count(4),
            charcnt: count(5),
        };
        if h.timecnt > MAX_TRANSITIONS {
            return Err(ZoneError::tzif(at, "timecnt", "more than 4096 transitions"));
        }
        if h.typecnt == 0 || h.typecnt > 256 {
            return Err(ZoneError::tzif(at, "typecnt", "the count of local time types must be 1 to 256"));
        }
        if h.charcnt == 0 || h.charcnt > 256 * 7 {
            return Err(ZoneError::tzif(at, "charcnt", "the abbreviation table must hold 1 to 1792 bytes"));
        }
        if (h.isstdcnt != 0 && h.isstdcnt != h.typecnt) || (h.isutcnt != 0 && h.isutcnt != h.typecnt) {
            return Err(ZoneError::tzif(at, "isstdcnt", "the indicator counts must be 0 or the count of types"));
        }
        if h.leapcnt != 0 {
            // "right/" zones count leap seconds in their instants; schedules run on POSIX time.
            return Err(ZoneError::tzif(
                at,
                "leapcnt",
                "zones with leap seconds (the `right/` tree) are not supported; use the zone of the same name outside `right/`",
            ));
        }
        Ok(h)
    }
}

pub(super) fn decode(bytes: &[u8]) -> Result<Decoded, ZoneError> {
    if bytes.len() > MAX_TZIF_LEN {
        return Err(ZoneError::tzif(0, "file", "larger than 64 KiB"));
    }
    let mut r = Reader { bytes, pos: 0 };
    let v1 = r.header()?;
    let (h, time_size) = if v1.version >= 2 {
        // The version 1 block only serves old readers; skip it for the 64-bit one.
        r.take(v1.data_len(4), "version 1 data block")?;
        let h = r.header()?;
        (h, 8)
    } else {
        (v1, 4)
    };
    let times = r.take(h.timecnt * time_size, "transition times")?;
    let indices = r.take(h.timecnt, "transition types")?;
    let types_raw = r.take(h.typecnt * 6, "local time types")?;
    r.take(h.charcnt + h.isstdcnt + h.isutcnt, "abbreviations and indicators")?;

    let mut offsets = Vec::with_capacity(h.typecnt);
    for (i, t) in types_raw.chunks_exact(6).enumerate() {
        let off = i32::from_be_bytes([t[0], t[1], t[2], t[3]]);
        // RFC 8536: -2^31 is invalid; real offsets lie within about a day.
        if !(-89_999..=93_599).contains(&off) {
            return Err(ZoneError::tzif(r.pos, "utoff", "a UTC offset beyond ±25 hours"));
        }
        if t[4] > 1 || usize::from(t[5]) >= h.charcnt {
            return Err(ZoneError::tzif(r.pos, "local time type", "a bad isdst flag or abbreviation index"));
        }
        let _ = i;
        offsets.push(off);
    }

    let mut transitions = Vec::with_capacity(h.timecnt);
    for (i, &idx) in indices.iter().enumerate() {
        let raw = &times[i * time_size..(i + 1) * time_size];
        let at = if time_size == 8 {
            i64::from_be_bytes([raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]])
        } else {
            i64::from(i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]))
        };
        let Some(&off) = offsets.get(usize::from(idx)) else {
            return Err(ZoneError::tzif(r.pos, "transition types", "a transition names a type that does not exist"));
        };
        if transitions.last().is_some_and(|&(prev, _)| prev >= at) {
            return Err(ZoneError::tzif(r.pos, "transition times", "transition times must ascend"));
        }
        transitions.push((at, off));
    }
    // RFC 8536 §3.2: local time for instants before the first transition is type 0.
    let initial = offsets[0];

    let footer = if h.version >= 2 {
        let at = r.pos;
        let rest = &bytes[r.pos..];
        if rest.first() != Some(&b'\n') {
            return Err(ZoneError::tzif(at, "footer", "it must start with a newline"));
        }
        let Some(len) = rest[1..].iter().position(|&b| b == b'\n') else {
            return Err(ZoneError::tzif(at, "footer", "it must end with a newline"));
        };
        let text =
            core::str::from_utf8(&rest[1..1 + len]).map_err(|_| ZoneError::tzif(at, "footer", "it is not text"))?;
        if text.is_empty() { None } else { Some(PosixTz::parse(text)?) }
    } else {
        None
    };
    Ok(Decoded { transitions, initial, footer })
}
