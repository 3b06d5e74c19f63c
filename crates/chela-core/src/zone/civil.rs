//! Proleptic Gregorian calendar arithmetic on seconds, without a clock or a time zone.
//!
//! "Local seconds" are a wall-clock reading written as if it were UTC: seconds since
//! 1970-01-01 00:00 on the same calendar. A [`super::Zone`] turns them into instants.

use core::fmt;

pub const SECS_PER_DAY: i64 = 86_400;

/// The smallest and largest year the schedule maths works in. Outside it, next-fire answers
/// `None` instead of overflowing.
pub const MIN_YEAR: i32 = 1;
pub const MAX_YEAR: i32 = 9999;

/// The first second of year [`MIN_YEAR`], in local seconds.
pub fn min_seconds() -> i64 {
    days_from_civil(MIN_YEAR, 1, 1) * SECS_PER_DAY
}

/// The last second of year [`MAX_YEAR`], in local seconds.
pub fn max_seconds() -> i64 {
    days_from_civil(MAX_YEAR, 12, 31) * SECS_PER_DAY + SECS_PER_DAY - 1
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i32, month: u8, day: u8) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day number (the inverse of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month, day)
}

pub fn is_leap(year: i32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

pub fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Day of the week of a day number: 0 = Sunday … 6 = Saturday (1970-01-01 was a Thursday).
pub fn weekday(days: i64) -> u8 {
    (days + 4).rem_euclid(7) as u8
}

/// A wall-clock date and time, to the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    pub year: i32,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl DateTime {
    /// The reading of `secs` local seconds.
    pub fn from_seconds(secs: i64) -> DateTime {
        let days = secs.div_euclid(SECS_PER_DAY);
        let rem = secs.rem_euclid(SECS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        DateTime { year, month, day, hour: (rem / 3600) as u8, minute: (rem / 60 % 60) as u8, second: (rem % 60) as u8 }
    }

    /// Local seconds of this reading. Fields out of range carry over (the 32nd of January is
    /// the 1st of February); callers that need validation use [`DateTime::new`].
    pub fn to_seconds(self) -> i64 {
        days_from_civil(self.year, self.month, self.day) * SECS_PER_DAY
            + i64::from(self.hour) * 3600
            + i64::from(self.minute) * 60
            + i64::from(self.second)
    }

    /// A validated reading.
    pub fn new(year: i32, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> Option<DateTime> {
        let ok = (MIN_YEAR..=MAX_YEAR).contains(&year)
            && (1..=12).contains(&month)
            && day >= 1
            && day <= days_in_month(year, month)
            && hour < 24
            && minute < 60
            && second < 60;
        ok.then_some(DateTime { year, month, day, hour, minute, second })
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

#[cfg(test)]
mod tests;
