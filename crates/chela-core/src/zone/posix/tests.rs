use super::*;
use crate::zone::civil::DateTime;
use alloc::string::ToString;

fn utc(y: i32, mo: u8, d: u8, h: u8, mi: u8) -> i64 {
    DateTime::new(y, mo, d, h, mi, 0).unwrap().to_seconds()
}

#[test]
fn berlin_rule() {
    let tz = PosixTz::parse("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
    assert_eq!(tz.std_offset, 3600);
    let dst = tz.dst.as_ref().unwrap();
    assert_eq!(dst.offset, 7200);
    // 2026: DST from 29 March 01:00 UTC to 25 October 01:00 UTC.
    assert_eq!(tz.offset_at(utc(2026, 3, 29, 0, 59)), 3600);
    assert_eq!(tz.offset_at(utc(2026, 3, 29, 1, 0)), 7200);
    assert_eq!(tz.offset_at(utc(2026, 10, 25, 0, 59)), 7200);
    assert_eq!(tz.offset_at(utc(2026, 10, 25, 1, 0)), 3600);
    assert_eq!(tz.offset_at(utc(2026, 1, 1, 0, 0)), 3600);
}

#[test]
fn southern_half_hour_rule() {
    let tz = PosixTz::parse("<+1030>-10:30<+11>-11,M10.1.0,M4.1.0").unwrap();
    assert_eq!(tz.std_abbr, "+1030");
    assert_eq!(tz.std_offset, 37_800);
    // In force over New Year, out in the middle of the year.
    assert_eq!(tz.offset_at(utc(2026, 1, 1, 0, 0)), 39_600);
    assert_eq!(tz.offset_at(utc(2026, 7, 1, 0, 0)), 37_800);
    // Ends 5 April 2026 02:00 local DST = 4 April 15:00 UTC.
    assert_eq!(tz.offset_at(utc(2026, 4, 4, 14, 59)), 39_600);
    assert_eq!(tz.offset_at(utc(2026, 4, 4, 15, 0)), 37_800);
}

#[test]
fn defaults_and_forms() {
    let tz = PosixTz::parse("EST5EDT").unwrap();
    assert_eq!(tz.std_offset, -18_000);
    let dst = tz.dst.unwrap();
    assert_eq!(dst.offset, -14_400);
    assert_eq!(dst.start, RuleDate::MonthWeekDay { month: 3, week: 2, weekday: 0 });
    assert_eq!(PosixTz::parse("UTC0").unwrap().std_offset, 0);
    assert_eq!(PosixTz::parse("<+0545>-5:45").unwrap().std_offset, 20_700);
    let j = PosixTz::parse("XXX3YYY,J60/-1,300/167").unwrap().dst.unwrap();
    assert_eq!(
        (j.start, j.start_time, j.end, j.end_time),
        (RuleDate::Julian1(60), -3600, RuleDate::Julian0(300), 167 * 3600)
    );
    // J60 is 1 March every year; 59 (zero-based) is 29 February in leap years.
    assert_eq!(RuleDate::Julian1(60).day(2024), days_from_civil(2024, 3, 1));
    assert_eq!(RuleDate::Julian0(59).day(2024), days_from_civil(2024, 2, 29));
    assert_eq!(RuleDate::MonthWeekDay { month: 2, week: 5, weekday: 4 }.day(2024), days_from_civil(2024, 2, 29));
}

#[test]
fn bad_strings_say_what_was_expected() {
    for (s, want) in [
        ("", "abbreviation"),
        ("CE-1", "abbreviation"),
        ("CET", "standard time offset"),
        ("CET-1CEST,M13.5.0,M10.5.0", "month 1-12"),
        ("CET-1CEST,M3.6.0,M10.5.0", "week 1-5"),
        ("CET-1CEST,M3.5.7,M10.5.0", "weekday 0-6"),
        ("CET-1CEST,M3.5.0", "end rule"),
        ("CET-1CEST,M3.5.0,M10.5.0/168", "hours up to 167"),
        ("CET-1CEST,M3.5.0,M10.5.0x", "unexpected text"),
        ("CET-25", "standard time offset"),
        ("<+05", "closing"),
        ("CET-1CEST,J0,J365", "Julian day"),
    ] {
        let err = PosixTz::parse(s).unwrap_err().to_string();
        assert!(err.contains(want), "{s:?}: {err}");
    }
    let long = "A".repeat(200);
    assert!(PosixTz::parse(&long).unwrap_err().to_string().contains("longer than"));
}
