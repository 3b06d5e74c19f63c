//! The zone and schedule maths against the system's tz database and an independent reference
//! (jiff for the calendar and zones, a brute-force cron matcher over the generator's own sets).
//!
//! Needs `/usr/share/zoneinfo` (Debian `tzdata`).

use std::path::{Path, PathBuf};

use chela_core::schedule::Cron;
use chela_core::zone::{DateTime, LocalResult, Zone};
use jiff::Timestamp;
use jiff::tz::{AmbiguousOffset, TimeZone};
use proptest::prelude::*;

const ZONEINFO: &str = "/usr/share/zoneinfo";

fn zone(name: &str) -> (Zone, TimeZone) {
    let bytes = std::fs::read(Path::new(ZONEINFO).join(name)).expect("tzdata is installed");
    (Zone::from_tzif(name, &bytes).unwrap(), TimeZone::get(name).unwrap())
}

fn local_secs(dt: jiff::civil::DateTime) -> i64 {
    DateTime::new(
        dt.year().into(),
        dt.month() as u8,
        dt.day() as u8,
        dt.hour() as u8,
        dt.minute() as u8,
        dt.second() as u8,
    )
    .unwrap()
    .to_seconds()
}

fn civil(local: i64) -> jiff::civil::DateTime {
    let d = DateTime::from_seconds(local);
    jiff::civil::datetime(d.year as i16, d.month as i8, d.day as i8, d.hour as i8, d.minute as i8, d.second as i8, 0)
}

/// jiff's answer for a wall-clock reading, in our terms.
fn reference_resolve(tz: &TimeZone, local: i64) -> LocalResult {
    match tz.to_ambiguous_timestamp(civil(local)).offset() {
        AmbiguousOffset::Unambiguous { offset } => LocalResult::Unique(local - i64::from(offset.seconds())),
        AmbiguousOffset::Gap { before, after } => {
            let from = Timestamp::from_second(local - i64::from(after.seconds())).unwrap();
            let at = tz.following(from).next().unwrap().timestamp().as_second();
            LocalResult::Gap { at, before: before.seconds(), after: after.seconds() }
        }
        AmbiguousOffset::Fold { before, after } => LocalResult::Fold {
            earlier: local - i64::from(before.seconds()),
            later: local - i64::from(after.seconds()),
        },
    }
}

fn zone_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            zone_files(&path, out);
        } else if std::fs::read(&path).is_ok_and(|b| b.starts_with(b"TZif")) {
            out.push(path);
        }
    }
}

/// Every zone in the system database parses, and its offsets agree with jiff's from 1900 to
/// 2100 (past the table's end the footer rule decides). The `right/` tree is refused by name.
#[test]
fn every_system_zone_agrees_with_jiff() {
    let mut files = Vec::new();
    zone_files(Path::new(ZONEINFO), &mut files);
    assert!(files.len() > 300, "expected the tz database in {ZONEINFO}");
    let (start, end) = (
        DateTime::new(1900, 1, 1, 0, 0, 0).unwrap().to_seconds(),
        DateTime::new(2100, 1, 1, 0, 0, 0).unwrap().to_seconds(),
    );
    let mut checked = 0;
    for path in &files {
        let name = path.strip_prefix(ZONEINFO).unwrap().to_str().unwrap();
        let bytes = std::fs::read(path).unwrap();
        if name.starts_with("right/") {
            let err = Zone::from_tzif(name, &bytes).unwrap_err().to_string();
            assert!(err.contains("leap seconds"), "{name}: {err}");
            continue;
        }
        let ours = Zone::from_tzif(name, &bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let theirs = TimeZone::tzif(name, &bytes).unwrap();
        let mut t = start;
        while t < end {
            let want = theirs.to_offset(Timestamp::from_second(t).unwrap()).seconds();
            assert_eq!(ours.offset_at(t), want, "{name} at {t}");
            t += 86_400 * 17 + 3_607;
        }
        checked += 1;
    }
    assert!(checked > 300);
}

/// Gap, fold and unique answers agree with jiff on every wall-clock reading near each
/// transition from 1970 to 2060 in zones with odd DST: Berlin, New York, Lord Howe (half-hour
/// DST), Samoa (skipped a whole day in 2011), Casablanca (DST off during Ramadan).
#[test]
fn resolve_agrees_with_jiff_around_transitions() {
    for name in [
        "Europe/Berlin",
        "America/New_York",
        "Australia/Lord_Howe",
        "Pacific/Apia",
        "Africa/Casablanca",
        "Europe/Dublin",
    ] {
        let (ours, theirs) = zone(name);
        let from = Timestamp::from_second(DateTime::new(1970, 1, 1, 0, 0, 0).unwrap().to_seconds()).unwrap();
        let until = DateTime::new(2060, 1, 1, 0, 0, 0).unwrap().to_seconds();
        let mut n = 0;
        for tr in theirs.following(from) {
            let at = tr.timestamp().as_second();
            if at > until {
                break;
            }
            // Readings around the change as shown before and after it.
            let before = i64::from(theirs.to_offset(Timestamp::from_second(at - 1).unwrap()).seconds());
            let after = i64::from(tr.offset().seconds());
            for base in [at + before, at + after] {
                for d in [-3601, -1800, -1, 0, 1, 900, 1799, 3599, 3600] {
                    let local = base + d;
                    assert_eq!(ours.resolve(local), reference_resolve(&theirs, local), "{name}: {}", civil(local));
                }
            }
            n += 1;
        }
        assert!(n > 20, "{name}: {n} transitions");
    }
}

/// One field as text, and the set of values it stands for.
#[derive(Clone, Debug)]
struct Field {
    text: String,
    set: Vec<u32>,
}

fn field(min: u32, max: u32) -> impl Strategy<Value = Field> {
    let range = move || (min..=max, min..=max).prop_map(|(a, b)| (a.min(b), a.max(b)));
    prop_oneof![
        Just(Field { text: "*".into(), set: (min..=max).collect() }),
        (min..=max).prop_map(|v| Field { text: v.to_string(), set: vec![v] }),
        range().prop_map(|(a, b)| Field { text: format!("{a}-{b}"), set: (a..=b).collect() }),
        (1..=max.min(15))
            .prop_map(move |s| Field { text: format!("*/{s}"), set: (min..=max).step_by(s as usize).collect() }),
        (range(), 1..=7u32)
            .prop_map(|((a, b), s)| Field { text: format!("{a}-{b}/{s}"), set: (a..=b).step_by(s as usize).collect() }),
        prop::collection::btree_set(min..=max, 1..4).prop_map(|v| Field {
            text: v.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            set: v.into_iter().collect(),
        }),
    ]
}

#[derive(Clone, Debug)]
struct Expr {
    text: String,
    seconds: Vec<u32>,
    minutes: Vec<u32>,
    hours: Vec<u32>,
    days: Vec<u32>,
    months: Vec<u32>,
    weekdays: Vec<u32>,
    days_star: bool,
    weekdays_star: bool,
}

fn expr() -> impl Strategy<Value = Expr> {
    (prop::option::weighted(0.2, field(0, 59)), field(0, 59), field(0, 23), field(1, 31), field(1, 12), field(0, 7))
        .prop_map(|(sec, min, hour, dom, mon, dow)| {
            let text = match &sec {
                Some(s) => format!("{} {} {} {} {} {}", s.text, min.text, hour.text, dom.text, mon.text, dow.text),
                None => format!("{} {} {} {} {}", min.text, hour.text, dom.text, mon.text, dow.text),
            };
            Expr {
                text,
                seconds: sec.map_or(vec![0], |s| s.set),
                minutes: min.set,
                hours: hour.set,
                days_star: dom.text.starts_with('*'),
                weekdays_star: dow.text.starts_with('*'),
                days: dom.set,
                months: mon.set,
                weekdays: dow.set.into_iter().map(|d| d % 7).collect(),
            }
        })
}

/// The brute-force reference: walk days with jiff's calendar, match the generator's sets with
/// Vixie's day rule, turn each matching reading into an instant with jiff (a skipped reading
/// fires at the change, a repeated one the first time) and take the first after `now`.
fn reference_next(e: &Expr, tz: &TimeZone, now: i64) -> Option<i64> {
    let now_ts = Timestamp::from_second(now).unwrap();
    let mut date = now_ts.to_zoned(tz.clone()).date().yesterday().unwrap();
    let end = date.checked_add(jiff::Span::new().days(366 * 28)).unwrap();
    while date < end {
        let dom = e.days.contains(&(date.day() as u32));
        let dow = e.weekdays.contains(&(date.weekday().to_sunday_zero_offset() as u32));
        let day_ok = if !e.days_star && !e.weekdays_star { dom || dow } else { dom && dow };
        if e.months.contains(&(date.month() as u32)) && day_ok {
            for &h in &e.hours {
                for &m in &e.minutes {
                    for &s in &e.seconds {
                        let local = local_secs(date.at(h as i8, m as i8, s as i8, 0));
                        let at = match reference_resolve(tz, local) {
                            LocalResult::Unique(at)
                            | LocalResult::Gap { at, .. }
                            | LocalResult::Fold { earlier: at, .. } => at,
                        };
                        if at > now {
                            return Some(at);
                        }
                    }
                }
            }
        }
        date = date.tomorrow().unwrap();
    }
    None
}

/// The property test of the schedules: random expressions from random instants over ten years
/// (2026 to 2036), in zones with ordinary, half-hour and southern DST, against the reference.
#[test]
fn cron_next_fire_matches_the_reference_over_ten_years() {
    let zones: Vec<(Zone, TimeZone)> =
        ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"].iter().map(|n| zone(n)).collect();
    let start = DateTime::new(2026, 1, 1, 0, 0, 0).unwrap().to_seconds();
    let span = DateTime::new(2036, 1, 1, 0, 0, 0).unwrap().to_seconds() - start;
    // Half the cases start within two days before a DST change, where the maths is hardest.
    let changes: Vec<Vec<i64>> = zones
        .iter()
        .map(|(_, tz)| {
            let from = Timestamp::from_second(start).unwrap();
            tz.following(from).map(|t| t.timestamp().as_second()).take_while(|&t| t < start + span).collect()
        })
        .collect();
    let config = ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(e in expr(), offset in 0..span, which in 0..4usize, near_change in any::<bool>())| {
        let (ours, theirs) = &zones[which];
        let now = match &changes[which] {
            c if near_change && !c.is_empty() => c[offset as usize % c.len()] - offset % (2 * 86_400),
            _ => start + offset,
        };
        match Cron::parse(&e.text) {
            Ok(cron) => {
                let got = cron.next_fire(now, ours);
                let want = reference_next(&e, theirs, now);
                prop_assert_eq!(got, want, "{} in {} after {}", e.text, ours.name(), now);
            }
            // Only a day-of-month that no chosen month has is refused.
            Err(err) => {
                prop_assert_eq!(err.field, "day-of-month", "{}: {}", e.text, err);
                prop_assert_eq!(reference_next(&e, theirs, now), None);
            }
        }
    });
}

/// Chained next-fire over ten years at DST-sensitive times: every daily 02:30 (skipped in
/// spring, repeated in autumn in Berlin and New York; 02:15 in Lord Howe's half-hour gap) and an
/// every-30-minutes job, each fire compared with the reference.
#[test]
fn ten_years_of_chained_fires_match_the_reference() {
    let start = DateTime::new(2026, 1, 1, 0, 0, 0).unwrap().to_seconds();
    let end = DateTime::new(2036, 1, 1, 0, 0, 0).unwrap().to_seconds();
    for (name, text, hours, minutes) in [
        ("Europe/Berlin", "30 2 * * *", (0..24).filter(|&h| h == 2).collect::<Vec<u32>>(), vec![30]),
        ("America/New_York", "30 2 * * *", vec![2], vec![30]),
        ("Australia/Lord_Howe", "15 2 * * *", vec![2], vec![15]),
        ("Australia/Lord_Howe", "*/30 1-2 * * *", vec![1, 2], vec![0, 30]),
    ] {
        let (ours, theirs) = zone(name);
        let e = Expr {
            text: text.into(),
            seconds: vec![0],
            minutes,
            hours,
            days: (1..=31).collect(),
            months: (1..=12).collect(),
            weekdays: (0..7).collect(),
            days_star: true,
            weekdays_star: true,
        };
        let cron = Cron::parse(text).unwrap();
        let mut t = start;
        let mut n = 0;
        while t < end {
            let got = cron.next_fire(t, &ours).unwrap();
            assert_eq!(Some(got), reference_next(&e, &theirs, t), "{text} in {name} after {t}");
            t = got;
            n += 1;
        }
        assert!(n >= 3650, "{name} {text}: {n} fires");
    }
}

/// The user moves from Berlin to New York: the same job's next fire follows the new zone.
#[test]
fn changing_zone_moves_the_next_fire() {
    let (berlin, _) = zone("Europe/Berlin");
    let (new_york, _) = zone("America/New_York");
    let cron = Cron::parse("0 9 * * *").unwrap();
    let now = DateTime::new(2026, 6, 1, 12, 0, 0).unwrap().to_seconds(); // 12:00 UTC
    // 09:00 CEST tomorrow is 07:00 UTC; 09:00 EDT today is 13:00 UTC.
    assert_eq!(cron.next_fire(now, &berlin), Some(DateTime::new(2026, 6, 2, 7, 0, 0).unwrap().to_seconds()));
    assert_eq!(cron.next_fire(now, &new_york), Some(DateTime::new(2026, 6, 1, 13, 0, 0).unwrap().to_seconds()));
}

/// Hostile zone files: every truncation and random corruptions of a real one are refused or
/// read, never a panic, and a zone read from corrupt bytes still answers offsets.
#[test]
fn corrupt_tzif_never_panics() {
    let bytes = std::fs::read(Path::new(ZONEINFO).join("Australia/Lord_Howe")).unwrap();
    for len in 0..bytes.len() {
        let _ = Zone::from_tzif("x", &bytes[..len]);
    }
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..20_000 {
        let mut b = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % b.len() as u64) as usize;
            b[i] = next() as u8;
        }
        if let Ok(z) = Zone::from_tzif("x", &b) {
            for t in [-1i64 << 40, 0, 1_800_000_000, 1 << 40] {
                let _ = z.resolve(z.to_local(t));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any text of cron's alphabet parses or is refused naming a field; what parses fires
    /// strictly later, or never.
    #[test]
    fn any_cron_text_parses_or_names_a_field(text in "[0-9*/,? \\-a-zA-Z@]{0,40}", now in -1_000_000_000_000i64..1_000_000_000_000) {
        match Cron::parse(&text) {
            Ok(cron) => {
                if let Some(at) = cron.next_fire(now, &Zone::utc()) {
                    prop_assert!(at > now);
                }
            }
            Err(e) => prop_assert!(["expression", "second", "minute", "hour", "day-of-month", "month", "day-of-week"].contains(&e.field)),
        }
    }

    /// Any text of the TZ string alphabet parses or is refused; what parses answers offsets
    /// within a day and resolves every reading.
    #[test]
    fn any_posix_text_parses_or_is_refused(text in "[A-Z<>+\\-0-9:,./JM]{0,40}", t in -100_000_000_000i64..100_000_000_000) {
        if let Ok(z) = Zone::from_posix(&text) {
            prop_assert!(z.offset_at(t).abs() <= 25 * 3600);
            let _ = z.resolve(t);
        }
    }

    /// Any text into the cron.json reader: a result or a clear refusal, never a panic.
    #[test]
    fn any_cron_json_text_loads_or_is_refused(text in "[{}\\[\\]\":,a-z0-9 \n]{0,200}") {
        let _ = chela_core::schedule::file::load(&text);
    }
}

/// A cron.json nested far deeper than any job costs its entry (or the file), not the stack.
#[test]
fn deeply_nested_cron_json_is_refused() {
    let text = format!("{{\"jobs\": [{}{}]}}", "[".repeat(100_000), "]".repeat(100_000));
    let f = chela_core::schedule::file::load(&text).unwrap();
    assert!(f.jobs.is_empty());
    assert!(f.bad[0].message.contains("must be a JSON object"), "{:?}", f.bad);
    let entry = format!(
        "{{\"jobs\": [{{\"id\": \"a\", \"action\": {{\"type\": \"cap\", \"name\": \"x\", \"args\": {}1{}}}}}]}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let loaded = chela_core::schedule::file::load(&entry);
    // Either the whole file or the one entry is refused; nothing panics or overflows.
    match loaded {
        Ok(f) => assert!(f.jobs.is_empty() && f.bad.len() == 1),
        Err(e) => assert!(e.to_string().contains("recursion limit"), "{e}"),
    }
}

/// A zone whose rules changed: Samoa skipped 30 December 2011 (from UTC-10 to UTC+14). A daily
/// noon job fires on the 29th, once at the first instant after the skipped day (midnight of the
/// 31st) for the noon that never happened, and at noon on the 31st.
#[test]
fn a_skipped_day_fires_once_after_it() {
    let (apia, theirs) = zone("Pacific/Apia");
    let cron = Cron::parse("0 12 * * *").unwrap();
    let utc = |d, h| DateTime::new(2011, 12, d, h, 0, 0).unwrap().to_seconds();
    let mut t = utc(29, 0);
    let mut got = Vec::new();
    for _ in 0..3 {
        t = cron.next_fire(t, &apia).unwrap();
        got.push(t);
    }
    assert_eq!(got, [utc(29, 22), utc(30, 10), utc(30, 22)]);
    assert_eq!(apia.to_local(utc(30, 10)), DateTime::new(2011, 12, 31, 0, 0, 0).unwrap().to_seconds());
    assert_eq!(theirs.to_offset(Timestamp::from_second(utc(30, 10)).unwrap()).seconds(), 14 * 3600);
}
