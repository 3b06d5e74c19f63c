//! Time zones without `std`: IANA zones from TZif bytes, POSIX TZ rule strings, fixed offsets.
//!
//! What it is: the maths from an instant (seconds since the Unix epoch, UTC) to the wall clock
//! of a zone and back, including the wall-clock times a DST change skips ([`LocalResult::Gap`])
//! or repeats ([`LocalResult::Fold`]).
//!
//! What it is not: it reads no file. The host reads `/usr/share/zoneinfo/<name>` and passes the
//! bytes to [`Zone::from_tzif`]; the chip can carry a POSIX TZ string and use
//! [`Zone::from_posix`]. Instants are POSIX seconds; leap-second zones are refused.

pub mod civil;
pub mod posix;
mod tzif;

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

pub use civil::DateTime;
pub use posix::PosixTz;

/// The longest zone name accepted (the database's longest is 32 bytes).
pub const MAX_ZONE_NAME_LEN: usize = 64;

/// A time zone: a transition table (from TZif data) followed by a rule (the TZif footer, or a
/// POSIX TZ string alone), or a fixed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zone {
    name: String,
    /// (instant, offset east of UTC in force from it on), strictly ascending.
    transitions: Vec<(i64, i32)>,
    /// Offset before the first transition, or always when there is neither table nor rule.
    initial: i32,
    /// Applies after the last transition.
    rule: Option<PosixTz>,
}

/// Where a wall-clock reading lands in a zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalResult {
    /// One instant shows this reading.
    Unique(i64),
    /// The clocks skipped this reading; `at` is the first instant after the skip (the
    /// transition itself).
    Gap { at: i64, before: i32, after: i32 },
    /// The clocks showed this reading twice: first at `earlier`, again at `later`.
    Fold { earlier: i64, later: i64 },
}

/// A zone that could not be read. Messages say which part was wrong and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZoneError {
    /// A TZif file that is not valid; `at` is the byte offset.
    Tzif { at: usize, part: &'static str, problem: &'static str },
    /// A POSIX TZ string that is not valid; `at` is the byte offset.
    Posix { text: String, at: usize, expected: String },
    /// A zone name that cannot be an IANA name.
    Name { name: String, problem: &'static str },
}

impl ZoneError {
    fn tzif(at: usize, part: &'static str, problem: &'static str) -> ZoneError {
        ZoneError::Tzif { at, part, problem }
    }

    fn posix(text: &str, at: usize, expected: &str) -> ZoneError {
        let mut shown: String = text.chars().take(64).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        ZoneError::Posix { text: shown, at, expected: expected.to_string() }
    }
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneError::Tzif { at, part, problem } => {
                write!(f, "bad zoneinfo (TZif) data at byte {at}, in the {part}: {problem}")
            }
            ZoneError::Posix { text, at, expected } => {
                write!(f, "bad POSIX TZ string {text:?} at byte {at}: expected {expected}")
            }
            ZoneError::Name { name, problem } => write!(f, "bad time zone name {name:?}: {problem}"),
        }
    }
}

impl core::error::Error for ZoneError {}

/// Checks that `name` can be an IANA zone name (`Europe/Berlin`, `Etc/GMT+5`, `UTC`) and is
/// safe to join under a zoneinfo directory: no empty, `.` or `..` part, no leading `/`, only
/// letters, digits and `_ + - /`.
pub fn check_zone_name(name: &str) -> Result<(), ZoneError> {
    let bad = |problem| Err(ZoneError::Name { name: name.chars().take(80).collect(), problem });
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_ZONE_NAME_LEN {
        return bad("longer than 64 bytes");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-' | b'/')) {
        return bad("IANA names hold only letters, digits, `_`, `+`, `-` and `/` (like `Europe/Berlin`)");
    }
    if name.split('/').any(|part| part.is_empty() || part.starts_with('.') || part.starts_with('-')) {
        return bad("every part between `/` must be a name (like `America/New_York`)");
    }
    if !name.as_bytes()[0].is_ascii_alphabetic() {
        return bad("it must start with a letter");
    }
    Ok(())
}

impl Zone {
    /// Coordinated Universal Time.
    pub fn utc() -> Zone {
        Zone::fixed("UTC", 0)
    }

    /// A zone that is always `offset` seconds east of UTC.
    pub fn fixed(name: &str, offset: i32) -> Zone {
        Zone { name: name.to_string(), transitions: Vec::new(), initial: offset, rule: None }
    }

    /// A zone from TZif bytes (RFC 8536, versions 1 to 4), named `name`.
    pub fn from_tzif(name: &str, bytes: &[u8]) -> Result<Zone, ZoneError> {
        let d = tzif::decode(bytes)?;
        Ok(Zone { name: name.to_string(), transitions: d.transitions, initial: d.initial, rule: d.footer })
    }

    /// A zone from a POSIX TZ rule string, such as `CET-1CEST,M3.5.0,M10.5.0/3`.
    pub fn from_posix(tz: &str) -> Result<Zone, ZoneError> {
        let rule = PosixTz::parse(tz)?;
        Ok(Zone { name: tz.to_string(), transitions: Vec::new(), initial: rule.std_offset, rule: Some(rule) })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The offset (seconds east of UTC) in force at the instant `utc`.
    pub fn offset_at(&self, utc: i64) -> i32 {
        let after = self.transitions.partition_point(|&(at, _)| at <= utc);
        match (after, &self.rule) {
            (0, _) if !self.transitions.is_empty() => self.initial,
            (n, Some(rule)) if n == self.transitions.len() => rule.offset_at(utc),
            (0, None) => self.initial,
            (n, _) => self.transitions[n - 1].1,
        }
    }

    /// The wall-clock reading at the instant `utc`, as local seconds.
    pub fn to_local(&self, utc: i64) -> i64 {
        utc + i64::from(self.offset_at(utc))
    }

    /// The instants that show the wall-clock reading `local` (local seconds).
    pub fn resolve(&self, local: i64) -> LocalResult {
        // Zones change at most once in two days (the database's closest pair is weeks apart),
        // and offsets lie within ±26 hours, so the offsets either side of a two-day window are
        // the only candidates.
        const WINDOW: i64 = 2 * civil::SECS_PER_DAY;
        let a = self.offset_at(local - WINDOW);
        let b = self.offset_at(local + WINDOW);
        let fits = |o: i32| self.offset_at(local - i64::from(o)) == o;
        match (fits(a), fits(b)) {
            (true, true) if a != b => {
                let (x, y) = (local - i64::from(a), local - i64::from(b));
                LocalResult::Fold { earlier: x.min(y), later: x.max(y) }
            }
            (true, _) => LocalResult::Unique(local - i64::from(a)),
            (false, true) => LocalResult::Unique(local - i64::from(b)),
            (false, false) => {
                // The clocks jumped from `a` to `b` (b > a) at an instant T with
                // local - b < T <= local - a; find T by bisection.
                let (mut lo, mut hi) = (local - i64::from(a.max(b)), local - i64::from(a.min(b)));
                let start = self.offset_at(lo);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if self.offset_at(mid) == start { lo = mid } else { hi = mid }
                }
                LocalResult::Gap { at: hi, before: start, after: self.offset_at(hi) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn local(y: i32, mo: u8, d: u8, h: u8, mi: u8) -> i64 {
        DateTime::new(y, mo, d, h, mi, 0).unwrap().to_seconds()
    }

    #[test]
    fn posix_zone_resolves_gap_fold_and_unique() {
        let z = Zone::from_posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        // 29 March 2026 02:30 does not exist in Berlin: the clocks go 02:00 -> 03:00 at 01:00 UTC.
        let gap = z.resolve(local(2026, 3, 29, 2, 30));
        assert_eq!(gap, LocalResult::Gap { at: local(2026, 3, 29, 1, 0), before: 3600, after: 7200 });
        // 25 October 2026 02:30 happens twice: 00:30 UTC (CEST) and 01:30 UTC (CET).
        let fold = z.resolve(local(2026, 10, 25, 2, 30));
        assert_eq!(fold, LocalResult::Fold { earlier: local(2026, 10, 25, 0, 30), later: local(2026, 10, 25, 1, 30) });
        assert_eq!(z.resolve(local(2026, 7, 1, 12, 0)), LocalResult::Unique(local(2026, 7, 1, 10, 0)));
        assert_eq!(z.to_local(local(2026, 7, 1, 10, 0)), local(2026, 7, 1, 12, 0));
    }

    #[test]
    fn fixed_and_utc() {
        let z = Zone::fixed("+0530", 19_800);
        assert_eq!(z.resolve(19_800), LocalResult::Unique(0));
        assert_eq!(Zone::utc().offset_at(123), 0);
    }

    /// A hand-built version 1 file: one transition at t=1000 from +1h to +2h.
    fn v1_file() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"TZif\0");
        b.extend_from_slice(&[0; 15]);
        for n in [0u32, 0, 0, 1, 2, 8] {
            b.extend_from_slice(&n.to_be_bytes());
        }
        b.extend_from_slice(&1000i32.to_be_bytes());
        b.push(1);
        b.extend_from_slice(&3600i32.to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&7200i32.to_be_bytes());
        b.extend_from_slice(&[1, 4]);
        b.extend_from_slice(b"AAA\0BBB\0");
        b
    }

    #[test]
    fn tzif_version_1() {
        let z = Zone::from_tzif("Test/One", &v1_file()).unwrap();
        assert_eq!(z.offset_at(999), 3600);
        assert_eq!(z.offset_at(1000), 7200);
        assert_eq!(z.offset_at(i64::MAX / 2), 7200);
        assert_eq!(z.name(), "Test/One");
    }

    #[test]
    fn tzif_version_2_with_footer() {
        // v1 block (as above), then a v2 header and 64-bit block, then the footer.
        let v1 = v1_file();
        let mut b = v1.clone();
        b[4] = b'2';
        let mut v2 = Vec::new();
        v2.extend_from_slice(&v1[..44]);
        v2[4] = b'2';
        v2.extend_from_slice(&1000i64.to_be_bytes());
        v2.extend_from_slice(&v1[48..]);
        b.extend_from_slice(&v2);
        b.extend_from_slice(b"\nCET-1CEST,M3.5.0,M10.5.0/3\n");
        let z = Zone::from_tzif("Test/Two", &b).unwrap();
        assert_eq!(z.offset_at(999), 3600);
        // After the table the footer decides: January is winter time.
        assert_eq!(z.offset_at(local(2030, 1, 15, 0, 0)), 3600);
        assert_eq!(z.offset_at(local(2030, 7, 15, 0, 0)), 7200);
    }

    #[test]
    fn bad_tzif_is_refused_with_a_reason() {
        let good = v1_file();
        let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
        cases.push((b"not a zone".to_vec(), "ends early"));
        cases.push(([b"TZXX".as_slice(), &good[4..]].concat(), "`TZif`"));
        let mut v = good.clone();
        v[4] = b'9';
        cases.push((v, "versions 1 to 4"));
        cases.push((good[..good.len() - 3].to_vec(), "ends early"));
        let mut many = good.clone();
        many[32..36].copy_from_slice(&100_000u32.to_be_bytes());
        cases.push((many, "4096"));
        let mut bad_idx = good.clone();
        bad_idx[48] = 7;
        cases.push((bad_idx, "does not exist"));
        let mut leap = good.clone();
        leap[28..32].copy_from_slice(&1u32.to_be_bytes());
        cases.push((leap, "leap seconds"));
        let mut huge_off = good.clone();
        huge_off[49..53].copy_from_slice(&i32::MIN.to_be_bytes());
        cases.push((huge_off, "±25 hours"));
        cases.push((alloc::vec![0u8; MAX_ZONE_NAME_LEN * 2000], "64 KiB"));
        let mut v2_no_footer = good.clone();
        v2_no_footer[4] = b'2';
        cases.push((v2_no_footer, "ends early"));
        for (bytes, want) in cases {
            let err = Zone::from_tzif("X", &bytes).unwrap_err().to_string();
            assert!(err.contains(want), "want {want:?} in {err}");
        }
    }

    #[test]
    fn zone_names() {
        for ok in ["Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "UTC", "America/Port-au-Prince"] {
            check_zone_name(ok).unwrap();
        }
        for bad in [
            "",
            "/etc/passwd",
            "Europe/../../etc",
            "Europe//Berlin",
            "Europe/Berlin/",
            "Eu rope",
            "..",
            "-x",
            &"A".repeat(65),
        ] {
            assert!(check_zone_name(bad).is_err(), "{bad:?}");
        }
    }
}
