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

proptest::proptest! {
    /// The answer is written by the JSON writer, byte for byte what the serde derive wrote.
    #[test]
    fn the_answer_is_what_the_serde_derive_wrote(now in -10_000_000_000i64..10_000_000_000, offset in -50_400i32..50_400, name in "[A-Za-z/_\"\\\\]{1,12}") {
        #[derive(serde::Serialize)]
        struct Answer<'a> {
            iso: &'a str,
            unix: i64,
            timezone: &'a str,
            weekday: &'a str,
        }
        let zone = Zone::fixed(&name, offset);
        let ours = describe(now, &zone);
        let v: serde_json::Value = serde_json::from_str(&ours).unwrap();
        let theirs = serde_json::to_string(&Answer {
            iso: v["iso"].as_str().unwrap(),
            unix: now,
            timezone: zone.name(),
            weekday: v["weekday"].as_str().unwrap(),
        })
        .unwrap();
        proptest::prop_assert_eq!(ours, theirs);
    }
}
