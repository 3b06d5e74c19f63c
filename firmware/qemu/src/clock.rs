//! The fake clock: time moves only when the driver advances it, so the run is the same every time.

use alloc::format;
use alloc::string::String;

/// Unix seconds at boot: 2026-11-30T11:25:20Z, a Monday.
const BOOT_UNIX: u64 = 1_796_037_920;

#[derive(Debug, Default)]
pub struct Clock {
    ms: u64,
}

impl Clock {
    /// Milliseconds since boot: the monotonic time the core's exchange takes.
    pub fn now_ms(&self) -> u64 {
        self.ms
    }

    pub fn advance(&mut self, ms: u64) {
        self.ms += ms;
    }

    /// Unix seconds, as SNTP would give them.
    pub fn unix(&self) -> u64 {
        BOOT_UNIX + self.ms / 1000
    }

    /// ISO 8601 in UTC and the weekday.
    pub fn utc(&self) -> (String, &'static str) {
        let secs = self.unix();
        let days = secs / 86_400;
        let rem = secs % 86_400;
        let (y, m, d) = civil_from_days(days as i64);
        const WEEKDAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];
        let iso = format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00", rem / 3600, rem % 3600 / 60, rem % 60);
        (iso, WEEKDAYS[(days % 7) as usize])
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}
