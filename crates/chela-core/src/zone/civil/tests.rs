use super::*;
use alloc::string::ToString;

#[test]
fn days_round_trip_across_four_centuries() {
    for days in (-800_000..800_000).step_by(7) {
        let (y, m, d) = civil_from_days(days);
        assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
    }
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
}

#[test]
fn leap_years_and_month_lengths() {
    assert!(is_leap(2024) && is_leap(2000) && !is_leap(1900) && !is_leap(2023));
    assert_eq!(days_in_month(2024, 2), 29);
    assert_eq!(days_in_month(2100, 2), 28);
    assert_eq!(days_in_month(2023, 4), 30);
    assert_eq!(DateTime::new(2023, 2, 29, 0, 0, 0), None);
    assert!(DateTime::new(2024, 2, 29, 23, 59, 59).is_some());
}

#[test]
fn weekdays() {
    assert_eq!(weekday(0), 4); // Thursday
    assert_eq!(weekday(days_from_civil(2024, 2, 29)), 4);
    assert_eq!(weekday(days_from_civil(2026, 12, 2)), 3); // Wednesday
}

#[test]
fn seconds_round_trip() {
    let dt = DateTime::new(2024, 2, 29, 13, 45, 7).unwrap();
    assert_eq!(DateTime::from_seconds(dt.to_seconds()), dt);
    assert_eq!(DateTime::from_seconds(-1).to_string(), "1969-12-31 23:59:59");
}
