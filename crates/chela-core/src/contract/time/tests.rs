use super::*;

#[test]
fn iso_with_the_zones_offset_and_the_weekday() {
    let t = 1_796_037_920; // 2026-11-30T11:25:20Z, a Monday
    let out: serde_json::Value = serde_json::from_str(&describe(t, &Zone::utc())).unwrap();
    assert_eq!(out["iso"], "2026-11-30T11:25:20+00:00");
    assert_eq!(out["unix"], 1_796_037_920);
    assert_eq!(out["weekday"], "Monday");
    let out: serde_json::Value = serde_json::from_str(&describe(t, &Zone::fixed("X", -(5 * 3600 + 1800)))).unwrap();
    assert_eq!(out["iso"], "2026-11-30T05:55:20-05:30");
    let out: serde_json::Value = serde_json::from_str(&describe(0, &Zone::fixed("Y", 14 * 3600))).unwrap();
    assert_eq!(out["iso"], "1970-01-01T14:00:00+14:00");
    assert_eq!(out["weekday"], "Thursday");
    assert_eq!(out["timezone"], "Y");
}
