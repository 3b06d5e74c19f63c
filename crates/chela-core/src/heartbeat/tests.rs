use super::*;
use crate::zone::DateTime;
use alloc::string::ToString;

#[test]
fn actionable_lines() {
    let text = "# Heartbeat\n\n## Today\n- [x] water the plants\n  - [X] done too\n- [ ] call mum\nCheck the oven\n* [x] star box done\n+ [ ] plus box\n   \n### notes\n-[x]tight\n";
    assert_eq!(actionable_items(text), ["- [ ] call mum", "Check the oven", "+ [ ] plus box"]);
    assert!(actionable_items("# only\n\n- [x] done\n").is_empty());
    assert!(actionable_items("").is_empty());
}

#[test]
fn comments_are_no_items_and_the_default_file_has_none() {
    assert!(actionable_items(HEARTBEAT_DEFAULT).is_empty(), "a fresh file asks for nothing");
    let text = "<!-- one line -->\n- [ ] a\n<!--\n- [ ] hidden\n-->\n- [ ] b\n<!-- open\nstill hidden\nend -->\nc\n";
    assert_eq!(actionable_items(text), ["- [ ] a", "- [ ] b", "c"]);
    // An unclosed comment hides the rest, as it does in any Markdown viewer.
    assert_eq!(actionable_items("x\n<!--\ny\n"), ["x"]);
    assert_eq!(
        actionable_items(&alloc::format!("{HEARTBEAT_DEFAULT}- [ ] water the plants\n")),
        ["- [ ] water the plants"]
    );
}

#[test]
fn actionable_items_are_bounded() {
    let many = "do it\n".repeat(10_000);
    assert_eq!(actionable_items(&many).len(), MAX_ITEMS);
    let long = "é".repeat(2000);
    assert_eq!(actionable_items(&long)[0].chars().count(), MAX_ITEM_LEN);
}

fn at(zone: &Zone, h: u8, m: u8) -> i64 {
    match zone.resolve(DateTime::new(2026, 7, 1, h, m, 0).unwrap().to_seconds()) {
        crate::zone::LocalResult::Unique(t) => t,
        other => panic!("{other:?}"),
    }
}

#[test]
fn window_in_the_users_zone() {
    let berlin = Zone::from_posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
    let day = ActiveHours::parse("08:00-22:00").unwrap();
    assert!(!day.contains(at(&berlin, 7, 59), &berlin));
    assert!(day.contains(at(&berlin, 8, 0), &berlin));
    assert!(day.contains(at(&berlin, 21, 59), &berlin));
    assert!(!day.contains(at(&berlin, 22, 0), &berlin));
    // 08:00 in Berlin summer is 06:00 UTC: outside the same window read in UTC.
    assert!(!day.contains(at(&berlin, 8, 0), &Zone::utc()));
}

#[test]
fn window_across_midnight_and_all_day() {
    let z = Zone::utc();
    let night = ActiveHours::parse("22:00-06:30").unwrap();
    assert!(night.contains(at(&z, 23, 0), &z));
    assert!(night.contains(at(&z, 0, 0), &z));
    assert!(night.contains(at(&z, 6, 29), &z));
    assert!(!night.contains(at(&z, 6, 30), &z));
    assert!(!night.contains(at(&z, 12, 0), &z));
    let all = ActiveHours::parse("00:00-24:00").unwrap();
    assert_eq!(all, ActiveHours::ALWAYS);
    assert!(all.contains(at(&z, 13, 0), &z));
}

#[test]
fn bad_windows_name_the_setting() {
    for bad in [
        "",
        "8-22",
        "08:00",
        "08:00-25:00",
        "24:00-08:00",
        "08:60-09:00",
        "aa:bb-cc:dd",
        "08:00-22:00-23:00",
        "123:00-01:00",
    ] {
        let err = ActiveHours::parse(bad).unwrap_err().to_string();
        assert!(err.starts_with("heartbeat.active_hours:"), "{bad:?}: {err}");
    }
    assert_eq!(ActiveHours::parse(" 9:30 - 17:00 ").unwrap(), ActiveHours { start: 570, end: 1020 });
}
