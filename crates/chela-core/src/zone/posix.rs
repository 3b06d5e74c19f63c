//! POSIX TZ rule strings (`CET-1CEST,M3.5.0,M10.5.0/3`), as in the footer of a TZif file and as
//! a chip can carry one in its config instead of the zone database.
//!
//! Grammar (POSIX.1-2017 §8.3 with the RFC 8536 §3.3.1 extensions: hours up to 167 and negative
//! transition times): `std offset [dst [offset] [,start[/time],end[/time]]]`. Offsets are west
//! of Greenwich in the string; [`PosixTz`] stores them east of it, as UTC offsets are usually
//! written.

use alloc::string::String;

use super::ZoneError;
use super::civil::{SECS_PER_DAY, days_from_civil, days_in_month, is_leap, weekday};

/// The longest TZ string accepted. Real ones are under 60 bytes.
pub const MAX_POSIX_TZ_LEN: usize = 128;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PosixTz {
    pub std_abbr: String,
    /// Seconds east of UTC during standard time.
    pub std_offset: i32,
    pub dst: Option<Dst>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dst {
    pub abbr: String,
    /// Seconds east of UTC during daylight saving time.
    pub offset: i32,
    pub start: RuleDate,
    /// Seconds after local (standard) midnight of the start day.
    pub start_time: i32,
    pub end: RuleDate,
    /// Seconds after local (daylight) midnight of the end day.
    pub end_time: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleDate {
    /// `Jn`: day 1..=365, February 29 never counted.
    Julian1(u16),
    /// `n`: day 0..=365, February 29 counted in leap years.
    Julian0(u16),
    /// `Mm.w.d`: day `d` (0 = Sunday) of week `w` (1..=5, 5 = last) of month `m`.
    MonthWeekDay { month: u8, week: u8, weekday: u8 },
}

impl RuleDate {
    /// Day number (since 1970-01-01) of this rule's day in `year`.
    fn day(self, year: i32) -> i64 {
        let jan1 = days_from_civil(year, 1, 1);
        match self {
            RuleDate::Julian1(n) => {
                let n = i64::from(n);
                jan1 + n - 1 + i64::from(is_leap(year) && n >= 60)
            }
            RuleDate::Julian0(n) => jan1 + i64::from(n),
            RuleDate::MonthWeekDay { month, week, weekday: wd } => {
                let first = days_from_civil(year, month, 1);
                let shift = (i64::from(wd) - i64::from(weekday(first))).rem_euclid(7);
                let mut day = first + shift + 7 * (i64::from(week) - 1);
                let last = first + i64::from(days_in_month(year, month)) - 1;
                while day > last {
                    day -= 7;
                }
                day
            }
        }
    }
}

impl PosixTz {
    /// Parses a TZ string. Errors say what was expected and where.
    pub fn parse(s: &str) -> Result<PosixTz, ZoneError> {
        if s.len() > MAX_POSIX_TZ_LEN {
            return Err(ZoneError::posix(s, 0, "longer than 128 bytes"));
        }
        let mut p = Parser { s, pos: 0 };
        let std_abbr = p.abbr()?;
        let std_offset = -p.offset(24, "the standard time offset (like `-1` or `+5:30`)")?;
        if p.done() {
            return Ok(PosixTz { std_abbr, std_offset, dst: None });
        }
        let dst_abbr = p.abbr()?;
        let dst_offset = if p.peek().is_some_and(|c| c != b',') {
            -p.offset(24, "the daylight saving offset")?
        } else {
            std_offset + 3600
        };
        // Without a rule, POSIX leaves the dates to the implementation; like glibc and tzcode we
        // use the United States' rule.
        let (start, start_time, end, end_time) = if p.done() {
            let us_start = RuleDate::MonthWeekDay { month: 3, week: 2, weekday: 0 };
            let us_end = RuleDate::MonthWeekDay { month: 11, week: 1, weekday: 0 };
            (us_start, 7200, us_end, 7200)
        } else {
            p.expect(b',', "`,` before the daylight saving start rule")?;
            let start = p.rule_date()?;
            let start_time = p.rule_time()?;
            p.expect(b',', "`,` before the daylight saving end rule")?;
            let end = p.rule_date()?;
            let end_time = p.rule_time()?;
            (start, start_time, end, end_time)
        };
        if !p.done() {
            return Err(ZoneError::posix(s, p.pos, "unexpected text after the end rule"));
        }
        let dst = Dst { abbr: dst_abbr, offset: dst_offset, start, start_time, end, end_time };
        Ok(PosixTz { std_abbr, std_offset, dst: Some(dst) })
    }

    /// The UTC offset (seconds east) in force at the instant `utc`.
    pub fn offset_at(&self, utc: i64) -> i32 {
        let Some(dst) = &self.dst else { return self.std_offset };
        let local = utc + i64::from(self.std_offset);
        let year = super::civil::civil_from_days(local.div_euclid(SECS_PER_DAY)).0;
        let (start, end) = self.transitions(dst, year);
        let in_dst = if start <= end { start <= utc && utc < end } else { !(end <= utc && utc < start) };
        if in_dst { dst.offset } else { self.std_offset }
    }

    /// The UTC instants daylight saving time starts and ends in `year`.
    fn transitions(&self, dst: &Dst, year: i32) -> (i64, i64) {
        let start = dst.start.day(year) * SECS_PER_DAY + i64::from(dst.start_time) - i64::from(self.std_offset);
        let end = dst.end.day(year) * SECS_PER_DAY + i64::from(dst.end_time) - i64::from(dst.offset);
        (start, end)
    }
}

struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn done(&self) -> bool {
        self.pos == self.s.len()
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), ZoneError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(ZoneError::posix(self.s, self.pos, what))
        }
    }

    /// `CET` (three or more letters) or `<+0530>` (letters, digits, `+`, `-`).
    fn abbr(&mut self) -> Result<String, ZoneError> {
        let start = self.pos;
        let bytes = self.s.as_bytes();
        let (text, end) = if self.peek() == Some(b'<') {
            let open = self.pos + 1;
            let mut i = open;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'+' || bytes[i] == b'-') {
                i += 1;
            }
            if bytes.get(i) != Some(&b'>') {
                return Err(ZoneError::posix(self.s, i, "`>` closing a quoted zone abbreviation"));
            }
            (&self.s[open..i], i + 1)
        } else {
            let mut i = self.pos;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            (&self.s[start..i], i)
        };
        if text.len() < 3 {
            return Err(ZoneError::posix(
                self.s,
                start,
                "a zone abbreviation of at least three letters (like `CET` or `<+0530>`)",
            ));
        }
        self.pos = end;
        Ok(String::from(text))
    }

    fn number(&mut self, max: u32, what: &str) -> Result<u32, ZoneError> {
        let start = self.pos;
        let mut n: u32 = 0;
        while let Some(c) = self.peek().filter(u8::is_ascii_digit) {
            n = n.saturating_mul(10).saturating_add(u32::from(c - b'0'));
            self.pos += 1;
        }
        if self.pos == start || self.pos - start > 3 || n > max {
            return Err(ZoneError::posix(self.s, start, what));
        }
        Ok(n)
    }

    /// `[+-]hh[:mm[:ss]]` in seconds, as written (west positive for offsets).
    fn offset(&mut self, max_hours: u32, what: &str) -> Result<i32, ZoneError> {
        let sign = match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                -1
            }
            Some(b'+') => {
                self.pos += 1;
                1
            }
            _ => 1,
        };
        let hours = self.number(max_hours, what)?;
        let mut secs = hours * 3600;
        if self.peek() == Some(b':') {
            self.pos += 1;
            secs += self.number(59, what)? * 60;
            if self.peek() == Some(b':') {
                self.pos += 1;
                secs += self.number(59, what)?;
            }
        }
        Ok(sign * secs as i32)
    }

    fn rule_date(&mut self) -> Result<RuleDate, ZoneError> {
        match self.peek() {
            Some(b'J') => {
                self.pos += 1;
                let start = self.pos;
                let n = self.number(365, "a Julian day 1-365 after `J`")?;
                if n == 0 {
                    return Err(ZoneError::posix(self.s, start, "a Julian day 1-365 after `J`"));
                }
                Ok(RuleDate::Julian1(n as u16))
            }
            Some(b'M') => {
                self.pos += 1;
                let start = self.pos;
                let month = self.number(12, "a month 1-12 after `M`")?;
                self.expect(b'.', "`.` after the month in `Mm.w.d`")?;
                let week = self.number(5, "a week 1-5 in `Mm.w.d`")?;
                self.expect(b'.', "`.` after the week in `Mm.w.d`")?;
                let wd = self.number(6, "a weekday 0-6 (0 = Sunday) in `Mm.w.d`")?;
                if month == 0 || week == 0 {
                    return Err(ZoneError::posix(self.s, start, "`Mm.w.d` with month 1-12 and week 1-5"));
                }
                Ok(RuleDate::MonthWeekDay { month: month as u8, week: week as u8, weekday: wd as u8 })
            }
            _ => Ok(RuleDate::Julian0(self.number(365, "a rule date (`Jn`, `n` or `Mm.w.d`)")? as u16)),
        }
    }

    fn rule_time(&mut self) -> Result<i32, ZoneError> {
        if self.peek() == Some(b'/') {
            self.pos += 1;
            self.offset(167, "a transition time `/[+-]hh[:mm[:ss]]` with hours up to 167")
        } else {
            Ok(7200)
        }
    }
}

#[cfg(test)]
mod tests;
