use super::*;
use alloc::string::ToString;

fn local(y: i32, mo: u8, d: u8, h: u8, mi: u8) -> i64 {
    DateTime::new(y, mo, d, h, mi, 0).unwrap().to_seconds()
}

#[test]
fn posix_zone_resolves_gap_fold_and_unique() {
    let z = Zone::from_posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
    // 29 March 2026 02:30 does not exist in Berlin: the clocks go 02:00 -> 03:00 at 01:00 UTC.
    let gap = z.resolve(local(2026, 3, 29, 2, 30));
    assert_eq!(gap, LocalResult::Gap { at: local(2026, 3, 29, 1, 0), before: 3600, after: 7200 });
    // 25 October 2026 02:30 happens twice: 00:30 UTC (CEST) and 01:30 UTC (CET).
    let fold = z.resolve(local(2026, 10, 25, 2, 30));
    assert_eq!(fold, LocalResult::Fold { earlier: local(2026, 10, 25, 0, 30), later: local(2026, 10, 25, 1, 30) });
    assert_eq!(z.resolve(local(2026, 7, 1, 12, 0)), LocalResult::Unique(local(2026, 7, 1, 10, 0)));
    assert_eq!(z.to_local(local(2026, 7, 1, 10, 0)), local(2026, 7, 1, 12, 0));
}

#[test]
fn fixed_and_utc() {
    let z = Zone::fixed("+0530", 19_800);
    assert_eq!(z.resolve(19_800), LocalResult::Unique(0));
    assert_eq!(Zone::utc().offset_at(123), 0);
}

/// A hand-built version 1 file: one transition at t=1000 from +1h to +2h.
fn v1_file() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"TZif\0");
    b.extend_from_slice(&[0; 15]);
    for n in [0u32, 0, 0, 1, 2, 8] {
        b.extend_from_slice(&n.to_be_bytes());
    }
    b.extend_from_slice(&1000i32.to_be_bytes());
    b.push(1);
    b.extend_from_slice(&3600i32.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&7200i32.to_be_bytes());
    b.extend_from_slice(&[1, 4]);
    b.extend_from_slice(b"AAA\0BBB\0");
    b
}

#[test]
fn tzif_version_1() {
    let z = Zone::from_tzif("Test/One", &v1_file()).unwrap();
    assert_eq!(z.offset_at(999), 3600);
    assert_eq!(z.offset_at(1000), 7200);
    assert_eq!(z.offset_at(i64::MAX / 2), 7200);
    assert_eq!(z.name(), "Test/One");
}

#[test]
fn tzif_version_2_with_footer() {
    // v1 block (as above), then a v2 header and 64-bit block, then the footer.
    let v1 = v1_file();
    let mut b = v1.clone();
    b[4] = b'2';
    let mut v2 = Vec::new();
    v2.extend_from_slice(&v1[..44]);
    v2[4] = b'2';
    v2.extend_from_slice(&1000i64.to_be_bytes());
    v2.extend_from_slice(&v1[48..]);
    b.extend_from_slice(&v2);
    b.extend_from_slice(b"\nCET-1CEST,M3.5.0,M10.5.0/3\n");
    let z = Zone::from_tzif("Test/Two", &b).unwrap();
    assert_eq!(z.offset_at(999), 3600);
    // After the table the footer decides: January is winter time.
    assert_eq!(z.offset_at(local(2030, 1, 15, 0, 0)), 3600);
    assert_eq!(z.offset_at(local(2030, 7, 15, 0, 0)), 7200);
}

#[test]
fn bad_tzif_is_refused_with_a_reason() {
    let good = v1_file();
    let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
    cases.push((b"not a zone".to_vec(), "ends early"));
    cases.push(([b"TZXX".as_slice(), &good[4..]].concat(), "`TZif`"));
    let mut v = good.clone();
    v[4] = b'9';
    cases.push((v, "versions 1 to 4"));
    cases.push((good[..good.len() - 3].to_vec(), "ends early"));
    let mut many = good.clone();
    many[32..36].copy_from_slice(&100_000u32.to_be_bytes());
    cases.push((many, "4096"));
    let mut bad_idx = good.clone();
    bad_idx[48] = 7;
    cases.push((bad_idx, "does not exist"));
    let mut leap = good.clone();
    leap[28..32].copy_from_slice(&1u32.to_be_bytes());
    cases.push((leap, "leap seconds"));
    let mut huge_off = good.clone();
    huge_off[49..53].copy_from_slice(&i32::MIN.to_be_bytes());
    cases.push((huge_off, "±25 hours"));
    cases.push((alloc::vec![0u8; MAX_ZONE_NAME_LEN * 2000], "64 KiB"));
    let mut v2_no_footer = good.clone();
    v2_no_footer[4] = b'2';
    cases.push((v2_no_footer, "ends early"));
    for (bytes, want) in cases {
        let err = Zone::from_tzif("X", &bytes).unwrap_err().to_string();
        assert!(err.contains(want), "want {want:?} in {err}");
    }
}

#[test]
fn zone_names() {
    for ok in ["Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "UTC", "America/Port-au-Prince"] {
        check_zone_name(ok).unwrap();
    }
    for bad in [
        "",
        "/etc/passwd",
        "Europe/../../etc",
        "Europe//Berlin",
        "Europe/Berlin/",
        "Eu rope",
        "..",
        "-x",
        &"A".repeat(65),
    ] {
        assert!(check_zone_name(bad).is_err(), "{bad:?}");
    }
}
