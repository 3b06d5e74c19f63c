//! Cron expressions: parsing and the next matching wall-clock time, and the next firing instant
//! in a zone.
//!
//! Five fields (`minute hour day-of-month month day-of-week`) or six (a `second` field first).
//! Each field is `*`, a number or name, a range `a-b`, a step `*/n`, `a-b/n` or `a/n`, or a
//! comma list of those. Months take `JAN`–`DEC`, weekdays `SUN`–`SAT` and 0–7 (0 and 7 are
//! Sunday); `?` means `*` in the day fields. `@yearly`, `@annually`, `@monthly`, `@weekly`,
//! `@daily`, `@midnight` and `@hourly` are accepted.
//!
//! Days follow Vixie cron: when both day-of-month and day-of-week are restricted (neither starts
//! with `*` or `?`), a day matches if EITHER matches; otherwise both must.
//!
//! In a zone, a wall-clock time the clocks skip fires at the first instant after the skip, and
//! one they show twice fires once, the first time.

use alloc::format;
use alloc::string::String;
use core::fmt;

use crate::zone::civil::{self, DateTime, MAX_YEAR, SECS_PER_DAY, days_from_civil, days_in_month};
use crate::zone::{LocalResult, Zone};

/// The longest expression accepted.
pub const MAX_CRON_LEN: usize = 256;
/// How far ahead the search looks for a matching day: 28 years is the period of the calendar's
/// weekdays and leap years, so an expression that matches nothing in that span never matches.
const SEARCH_DAYS: i64 = 28 * 366;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    days: u32,
    /// Bits 1..=12.
    months: u16,
    /// Bits 0..=6, Sunday = 0.
    weekdays: u8,
    /// Vixie's rule: both day fields restricted means either may match.
    days_or: bool,
}

/// A cron expression that could not be parsed; `field` names the field that was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronError {
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} field: {}", self.field, self.message)
    }
}

impl core::error::Error for CronError {}

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    /// Names for the values from `name_base` up.
    names: &'static [&'static str],
    name_base: u32,
    /// `?` stands for `*` (the day fields only).
    question: bool,
}

const SECOND: FieldSpec = FieldSpec { name: "second", min: 0, max: 59, names: &[], name_base: 0, question: false };
const MINUTE: FieldSpec = FieldSpec { name: "minute", min: 0, max: 59, names: &[], name_base: 0, question: false };
const HOUR: FieldSpec = FieldSpec { name: "hour", min: 0, max: 23, names: &[], name_base: 0, question: false };
const DAY: FieldSpec = FieldSpec { name: "day-of-month", min: 1, max: 31, names: &[], name_base: 0, question: true };
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
    name_base: 1,
    question: false,
};
// 7 is Sunday too; folded into bit 0 after parsing.
const WEEKDAY: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    name_base: 0,
    question: true,
};

fn err(field: &'static str, message: String) -> CronError {
    CronError { field, message }
}

impl FieldSpec {
    fn value(&self, text: &str) -> Result<u32, CronError> {
        if let Some(i) = self.names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
            return Ok(i as u32 + self.name_base);
        }
        let n: u32 = if !text.is_empty() && text.len() <= 4 && text.bytes().all(|b| b.is_ascii_digit()) {
            text.parse().unwrap_or(u32::MAX)
        } else {
            let hint = if self.names.is_empty() { String::new() } else { format!(" or a name like {}", self.names[0]) };
            return Err(err(self.name, format!("{text:?} is not a number{hint}")));
        };
        if n < self.min || n > self.max {
            return Err(err(self.name, format!("{n} is out of range {}-{}", self.min, self.max)));
        }
        Ok(n)
    }

    /// The bit set of one field, and whether it was unrestricted (`*` or `?`).
    fn parse(&self, text: &str) -> Result<(u64, bool), CronError> {
        if text == "?" && !self.question {
            return Err(err(self.name, String::from("`?` is only allowed in the day-of-month and day-of-week fields")));
        }
        let star = text.starts_with('*') || text == "?";
        let mut bits = 0u64;
        for part in text.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => {
                    let step: u32 =
                        s.parse().ok().filter(|&s| s > 0 && s <= self.max.max(1)).ok_or_else(|| {
                            err(self.name, format!("step {s:?} must be a number from 1 to {}", self.max))
                        })?;
                    (r, step)
                }
                None => (part, 1),
            };
            let (lo, hi) = if range == "*" || (range == "?" && self.question) {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(a)?, self.value(b)?);
                if a > b {
                    return Err(err(self.name, format!("range {range} runs backwards")));
                }
                (a, b)
            } else {
                let a = self.value(range)?;
                // `a/n` means from a to the end of the field, stepping n.
                (a, if part.contains('/') { self.max } else { a })
            };
            let mut v = lo;
            while v <= hi {
                bits |= 1 << v;
                v += step;
            }
        }
        Ok((bits, star))
    }
}

impl Cron {
    pub fn parse(expr: &str) -> Result<Cron, CronError> {
        if expr.len() > MAX_CRON_LEN {
            return Err(err("expression", String::from("longer than 256 bytes")));
        }
        let expr = expr.trim();
        let expanded = match expr.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            s if s.starts_with('@') => {
                return Err(err(
                    "expression",
                    format!("unknown shorthand {expr:?} (known: @yearly, @monthly, @weekly, @daily, @hourly)"),
                ));
            }
            _ => expr,
        };
        let fields: heapless_fields::Fields<'_> = heapless_fields::split(expanded)?;
        let (sec_text, rest) = match fields.len {
            5 => ("0", &fields.items[..5]),
            6 => (fields.items[0], &fields.items[1..6]),
            n => {
                return Err(err(
                    "expression",
                    format!(
                        "has {n} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (with seconds first)"
                    ),
                ));
            }
        };
        let (seconds, _) = SECOND.parse(sec_text)?;
        let (minutes, _) = MINUTE.parse(rest[0])?;
        let (hours, _) = HOUR.parse(rest[1])?;
        let (days, day_star) = DAY.parse(rest[2])?;
        let (months, _) = MONTH.parse(rest[3])?;
        let (mut weekdays, wd_star) = WEEKDAY.parse(rest[4])?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & 0x7f;
        }
        let cron = Cron {
            seconds,
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: weekdays as u8,
            days_or: !day_star && !wd_star,
        };
        // With day-of-month alone deciding, `0 0 30 2 *` would never fire: say so now.
        if !cron.days_or {
            let longest =
                (1..=12u8).filter(|m| cron.months & (1 << m) != 0).map(|m| days_in_month(2024, m)).max().unwrap_or(0);
            if cron.days.trailing_zeros() > u32::from(longest) {
                return Err(err(
                    "day-of-month",
                    format!("day {} never occurs in the months chosen", cron.days.trailing_zeros()),
                ));
            }
        }
        Ok(cron)
    }

    fn day_matches(&self, days: i64, day: u8) -> bool {
        let dom = self.days & (1 << day) != 0;
        let dow = self.weekdays & (1 << civil::weekday(days)) != 0;
        if self.days_or { dom || dow } else { dom && dow }
    }

    /// The first wall-clock reading strictly after `local` (local seconds) that matches, or
    /// `None` if none does before year 9999.
    pub fn next_local(&self, local: i64) -> Option<i64> {
        if !(civil::min_seconds()..civil::max_seconds()).contains(&local) {
            return None;
        }
        let start = DateTime::from_seconds(local + 1);
        let mut days = days_from_civil(start.year, start.month, start.day);
        let (mut h0, mut m0, mut s0) = (u32::from(start.hour), u32::from(start.minute), u32::from(start.second));
        let last_day = days + SEARCH_DAYS;
        while days <= last_day {
            let (y, mo, d) = civil::civil_from_days(days);
            if y > MAX_YEAR {
                return None;
            }
            if self.months & (1 << mo) == 0 {
                // Jump to the first day of the next month.
                days += i64::from(days_in_month(y, mo) - d) + 1;
                (h0, m0, s0) = (0, 0, 0);
                continue;
            }
            if self.day_matches(days, d)
                && let Some(secs) = self.time_from(h0, m0, s0)
            {
                return Some(days * SECS_PER_DAY + i64::from(secs));
            }
            days += 1;
            (h0, m0, s0) = (0, 0, 0);
        }
        None
    }

    /// The first matching time of day at or after h:m:s, in seconds after midnight.
    fn time_from(&self, h0: u32, m0: u32, s0: u32) -> Option<u32> {
        let mut h = next_bit(u64::from(self.hours), h0)?;
        loop {
            let mut m = next_bit(self.minutes, if h == h0 { m0 } else { 0 });
            while let Some(min) = m {
                let s_from = if h == h0 && min == m0 { s0 } else { 0 };
                if let Some(s) = next_bit(self.seconds, s_from) {
                    return Some(h * 3600 + min * 60 + s);
                }
                m = next_bit(self.minutes, min + 1);
            }
            h = next_bit(u64::from(self.hours), h + 1)?;
        }
    }

    /// The first instant strictly after `now` at which this expression fires in `zone`.
    pub fn next_fire(&self, now: i64, zone: &Zone) -> Option<i64> {
        if !(civil::min_seconds()..civil::max_seconds()).contains(&now) {
            return None;
        }
        let mut local = zone.to_local(now);
        // Each step moves to a later wall-clock reading; readings in a fold whose first showing
        // has passed are skipped, so a fold costs at most its length in matches.
        loop {
            local = self.next_local(local)?;
            let at = match zone.resolve(local) {
                LocalResult::Unique(at) | LocalResult::Gap { at, .. } | LocalResult::Fold { earlier: at, .. } => at,
            };
            if at > now {
                return Some(at);
            }
        }
    }
}

fn next_bit(bits: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = bits >> from;
    (rest != 0).then(|| from + rest.trailing_zeros())
}

/// Splitting on whitespace into at most six fields without allocating.
mod heapless_fields {
    use super::{CronError, err};
    use alloc::format;

    pub struct Fields<'a> {
        pub items: [&'a str; 6],
        pub len: usize,
    }

    pub fn split(expr: &str) -> Result<Fields<'_>, CronError> {
        let mut f = Fields { items: [""; 6], len: 0 };
        for (i, part) in expr.split_ascii_whitespace().enumerate() {
            if i >= 6 {
                let n = expr.split_ascii_whitespace().count();
                return Err(err(
                    "expression",
                    format!(
                        "has {n} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (with seconds first)"
                    ),
                ));
            }
            f.items[i] = part;
            f.len = i + 1;
        }
        Ok(f)
    }
}
