//! The wall clock in the person's zone, as prompts, tools and daily notes show it.
//!
//! The zone maths is `chela_core::zone` (TZif files and POSIX rules), read from the system's tz
//! database by [`crate::tzdb::load_zone`]; this module only picks the zone and formats
//! readings. It replaces a general date library: Chela needs "now, in this zone" as RFC 3339,
//! the weekday, the date and `HH:MM`, and nothing else.

use std::fmt;
use std::sync::Arc;

use chela_core::zone::{DateTime, Zone, civil};

/// A zone shared by every turn and tool call: cloning it is a reference count.
pub type Tz = Arc<Zone>;

/// The zone named in the config (an IANA name), or the system's (`TZ`, then `/etc/localtime`)
/// when the name is empty. A zone that cannot be read falls back to UTC with a warning: config
/// values were checked when loaded, so this is a tz database that went away.
pub fn zone(name: &str) -> Tz {
    let loaded = if name.is_empty() { crate::tzdb::load_zone("") } else { crate::tzdb::named_zone(name) };
    Arc::new(loaded.unwrap_or_else(|e| {
        chela_log::warn!("times are shown in UTC: {e:#}");
        Zone::utc()
    }))
}

/// The reading of one instant in one zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Local {
    pub time: DateTime,
    /// Seconds east of UTC.
    pub offset: i32,
    days: i64,
}

impl Local {
    /// The reading of `utc` (Unix seconds) in `zone`.
    pub fn at(zone: &Zone, utc: i64) -> Local {
        let offset = zone.offset_at(utc);
        let local = utc + i64::from(offset);
        Local { time: DateTime::from_seconds(local), offset, days: local.div_euclid(civil::SECS_PER_DAY) }
    }

    pub fn date(&self) -> Date {
        Date { days: self.days }
    }

    /// RFC 3339 with the zone's offset: `2026-11-30T19:25:20+08:00`.
    pub fn rfc3339(&self) -> String {
        let t = &self.time;
        format!("{}T{:02}:{:02}:{:02}{}", self.date(), t.hour, t.minute, t.second, Offset(self.offset))
    }

    /// `HH:MM`.
    pub fn hour_minute(&self) -> String {
        format!("{:02}:{:02}", self.time.hour, self.time.minute)
    }

    /// The English name of the day: `Monday`.
    pub fn weekday(&self) -> &'static str {
        const NAMES: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
        NAMES[usize::from(civil::weekday(self.days))]
    }
}

/// `+08:00`, `-05:00`, `+05:45`; seconds only when the offset has them (old local mean times).
struct Offset(i32);

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { '-' } else { '+' };
        let s = self.0.unsigned_abs();
        write!(f, "{sign}{:02}:{:02}", s / 3600, s / 60 % 60)?;
        if !s.is_multiple_of(60) {
            write!(f, ":{:02}", s % 60)?;
        }
        Ok(())
    }
}

/// A calendar day, shown and parsed as `YYYY-MM-DD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    /// Days since 1970-01-01.
    days: i64,
}

impl Date {
    /// The day `n` days before this one.
    #[must_use]
    pub fn days_before(self, n: i64) -> Date {
        Date { days: self.days - n }
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = civil::civil_from_days(self.days);
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

impl std::str::FromStr for Date {
    type Err = String;

    fn from_str(s: &str) -> Result<Date, String> {
        let bad = || format!("{s:?} is not a date like 2026-11-30");
        let mut parts = s.splitn(3, '-');
        let mut num = || parts.next().filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        let (y, m, d) = (num().ok_or_else(bad)?, num().ok_or_else(bad)?, num().ok_or_else(bad)?);
        let (y, m, d) = (y.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?, d.parse().map_err(|_| bad())?);
        DateTime::new(y, m, d, 0, 0, 0).ok_or_else(bad)?;
        Ok(Date { days: civil::days_from_civil(y, m, d) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_in_zones_with_and_without_dst() {
        // 2026-11-30T11:25:20Z, a Monday.
        let t = 1_796_037_920;
        let shanghai = crate::tzdb::load_zone("Asia/Shanghai").unwrap();
        let l = Local::at(&shanghai, t);
        assert_eq!(l.rfc3339(), "2026-11-30T19:25:20+08:00");
        assert_eq!((l.weekday(), l.hour_minute()), ("Monday", "19:25".to_owned()));
        let ny = crate::tzdb::load_zone("America/New_York").unwrap();
        assert_eq!(Local::at(&ny, t).rfc3339(), "2026-11-30T06:25:20-05:00");
        // Summer time, a half-hour zone and a date line crossing.
        assert_eq!(Local::at(&ny, 1_782_000_000).rfc3339(), "2026-06-20T20:00:00-04:00");
        let kolkata = crate::tzdb::load_zone("Asia/Kolkata").unwrap();
        assert_eq!(Local::at(&kolkata, t).rfc3339(), "2026-11-30T16:55:20+05:30");
        let utc = Zone::utc();
        assert_eq!(Local::at(&utc, 0).rfc3339(), "1970-01-01T00:00:00+00:00");
        assert_eq!(Local::at(&utc, 0).weekday(), "Thursday");
        assert_eq!(Local::at(&utc, -1).date().to_string(), "1969-12-31");
        assert_eq!(Offset(-(3600 + 75)).to_string(), "-01:01:15");
    }

    #[test]
    fn dates_parse_show_and_count_back() {
        let d: Date = "2026-03-01".parse().unwrap();
        assert_eq!(d.days_before(1).to_string(), "2026-02-28");
        assert_eq!("2024-03-01".parse::<Date>().unwrap().days_before(1).to_string(), "2024-02-29");
        assert_eq!(d.days_before(-31).to_string(), "2026-04-01");
        for bad in ["", "2026-02-30", "2026-13-01", "2026-1", "x-01-01", "2026-01-01-01", "+2026-01-01"] {
            assert!(bad.parse::<Date>().is_err(), "{bad:?}");
        }
    }
}
