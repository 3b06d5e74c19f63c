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
mod tests;
