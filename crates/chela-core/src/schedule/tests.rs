use alloc::string::ToString;
use alloc::vec::Vec;

use super::file::{self, FileError};
use super::*;
use crate::zone::DateTime;

const BERLIN: &str = "CET-1CEST,M3.5.0,M10.5.0/3";
const NEW_YORK: &str = "EST5EDT,M3.2.0,M11.1.0";
const LORD_HOWE: &str = "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0";

fn utc(y: i32, mo: u8, d: u8, h: u8, mi: u8) -> i64 {
    DateTime::new(y, mo, d, h, mi, 0).unwrap().to_seconds()
}

fn show(zone: &Zone, t: i64) -> alloc::string::String {
    let off = zone.offset_at(t);
    alloc::format!("{} {:+}", DateTime::from_seconds(t + i64::from(off)), off / 60)
}

/// The next `n` fires after `from`, shown as wall clock and offset in minutes.
fn fires(expr: &str, zone: &Zone, from: i64, n: usize) -> Vec<alloc::string::String> {
    let cron = Cron::parse(expr).unwrap();
    let mut t = from;
    (0..n)
        .map(|_| {
            t = cron.next_fire(t, zone).unwrap();
            show(zone, t)
        })
        .collect()
}

#[test]
fn cron_fields_ranges_steps_lists_names() {
    let z = Zone::utc();
    let from = utc(2026, 1, 1, 0, 0); // a Thursday
    assert_eq!(
        fires("*/20 9-10 * * *", &z, from, 4),
        ["2026-01-01 09:00:00 +0", "2026-01-01 09:20:00 +0", "2026-01-01 09:40:00 +0", "2026-01-01 10:00:00 +0"]
    );
    assert_eq!(
        fires("0 12 * JAN-FEB MON,fri", &z, from, 3),
        ["2026-01-02 12:00:00 +0", "2026-01-05 12:00:00 +0", "2026-01-09 12:00:00 +0"]
    );
    assert_eq!(
        fires("30 5 1,15 */3 *", &z, from, 3),
        ["2026-01-01 05:30:00 +0", "2026-01-15 05:30:00 +0", "2026-04-01 05:30:00 +0"]
    );
    assert_eq!(
        fires("15/20 0 * * *", &z, from, 3),
        ["2026-01-01 00:15:00 +0", "2026-01-01 00:35:00 +0", "2026-01-01 00:55:00 +0"]
    );
    // Six fields: seconds first.
    assert_eq!(
        fires("*/15 0 0 * * *", &z, from, 3),
        ["2026-01-01 00:00:15 +0", "2026-01-01 00:00:30 +0", "2026-01-01 00:00:45 +0"]
    );
    // 7 is Sunday, like 0.
    assert_eq!(fires("0 0 * * 7", &z, from, 1), ["2026-01-04 00:00:00 +0"]);
    assert_eq!(fires("@monthly", &z, from, 2), ["2026-02-01 00:00:00 +0", "2026-03-01 00:00:00 +0"]);
    assert_eq!(fires("@hourly", &z, from, 1), ["2026-01-01 01:00:00 +0"]);
    // `?` stands for `*` in the day fields.
    assert_eq!(Cron::parse("0 0 ? * MON").unwrap(), Cron::parse("0 0 * * MON").unwrap());
}

#[test]
fn cron_day_rule_is_vixie_or() {
    let z = Zone::utc();
    let from = utc(2026, 1, 1, 0, 0);
    // Both restricted: the 13th OR any Friday.
    assert_eq!(
        fires("0 0 13 * FRI", &z, from, 3),
        ["2026-01-02 00:00:00 +0", "2026-01-09 00:00:00 +0", "2026-01-13 00:00:00 +0"]
    );
    // Day-of-week starting with `*` counts as unrestricted: the 13th only, on even weekdays.
    assert_eq!(fires("0 0 13 * */2", &z, from, 2), ["2026-01-13 00:00:00 +0", "2026-06-13 00:00:00 +0"]);
    // Day-of-month `*`: weekdays alone decide.
    assert_eq!(fires("0 0 * * SAT", &z, from, 1), ["2026-01-03 00:00:00 +0"]);
}

#[test]
fn cron_leap_days_and_month_ends() {
    let z = Zone::utc();
    assert_eq!(fires("0 0 29 2 *", &z, utc(2025, 1, 1, 0, 0), 2), ["2028-02-29 00:00:00 +0", "2032-02-29 00:00:00 +0"]);
    assert_eq!(
        fires("0 0 31 * *", &z, utc(2026, 1, 31, 0, 0), 3),
        ["2026-03-31 00:00:00 +0", "2026-05-31 00:00:00 +0", "2026-07-31 00:00:00 +0"]
    );
    assert_eq!(
        fires("59 23 28-31 2 *", &z, utc(2100, 1, 1, 0, 0), 2),
        ["2100-02-28 23:59:00 +0", "2101-02-28 23:59:00 +0"]
    );
    // Year end rolls over.
    assert_eq!(fires("0 0 * * *", &z, utc(2026, 12, 31, 12, 0), 1), ["2027-01-01 00:00:00 +0"]);
    // Feb 29 on a Monday with both day fields restricted is OR: every Monday in February too.
    assert_eq!(
        fires("0 0 29 2 MON", &z, utc(2026, 1, 1, 0, 0), 2),
        ["2026-02-02 00:00:00 +0", "2026-02-09 00:00:00 +0"]
    );
}

#[test]
fn cron_across_dst_gap_fires_once_at_the_change() {
    let z = Zone::from_posix(BERLIN).unwrap();
    // 29 March 2026: 02:00 CET jumps to 03:00 CEST. Everything from 02:00 to 02:59 fires at
    // 03:00 CEST, once.
    assert_eq!(
        fires("30 2 * * *", &z, utc(2026, 3, 28, 12, 0), 2),
        ["2026-03-29 03:00:00 +120", "2026-03-30 02:30:00 +120"]
    );
    assert_eq!(
        fires("*/20 1-3 29 3 *", &z, utc(2026, 3, 28, 23, 59), 6),
        [
            "2026-03-29 01:00:00 +60",
            "2026-03-29 01:20:00 +60",
            "2026-03-29 01:40:00 +60",
            "2026-03-29 03:00:00 +120",
            "2026-03-29 03:20:00 +120",
            "2026-03-29 03:40:00 +120"
        ]
    );
}

#[test]
fn cron_across_dst_fold_fires_once() {
    let z = Zone::from_posix(BERLIN).unwrap();
    // 25 October 2026: 03:00 CEST falls back to 02:00 CET; 02:30 shows twice, fires once.
    assert_eq!(
        fires("30 2 * * *", &z, utc(2026, 10, 24, 12, 0), 2),
        ["2026-10-25 02:30:00 +120", "2026-10-26 02:30:00 +60"]
    );
    assert_eq!(
        fires("0 * 25 10 *", &z, utc(2026, 10, 24, 22, 30), 4),
        ["2026-10-25 01:00:00 +120", "2026-10-25 02:00:00 +120", "2026-10-25 03:00:00 +60", "2026-10-25 04:00:00 +60"]
    );
    // Asked during the second 02:xx hour, the repeats are not fired again.
    let second_230 = utc(2026, 10, 25, 1, 30);
    assert_eq!(fires("45 2 * * *", &z, second_230, 1), ["2026-10-26 02:45:00 +60"]);
}

#[test]
fn cron_new_york_and_lord_howe_half_hour_dst() {
    let ny = Zone::from_posix(NEW_YORK).unwrap();
    // 8 March 2026: 02:00 EST -> 03:00 EDT.
    assert_eq!(fires("30 2 8 3 *", &ny, utc(2026, 3, 1, 0, 0), 1), ["2026-03-08 03:00:00 -240"]);
    let lh = Zone::from_posix(LORD_HOWE).unwrap();
    // 4 October 2026: 02:00 +10:30 jumps to 02:30 +11. 02:15 is skipped and fires at 02:30.
    assert_eq!(
        fires("15 2 * * *", &lh, utc(2026, 10, 2, 0, 0), 3),
        ["2026-10-03 02:15:00 +630", "2026-10-04 02:30:00 +660", "2026-10-05 02:15:00 +660"]
    );
    // 5 April 2026: 02:00 +11 falls back to 01:30 +10:30; 01:45 shows twice, fires once.
    assert_eq!(
        fires("45 1 * * *", &lh, utc(2026, 4, 3, 0, 0), 3),
        ["2026-04-04 01:45:00 +660", "2026-04-05 01:45:00 +660", "2026-04-06 01:45:00 +630"]
    );
}

#[test]
fn cron_errors_name_the_field() {
    for (expr, field, want) in [
        ("61 * * * *", "minute", "61 is out of range 0-59"),
        ("* 24 * * *", "hour", "out of range 0-23"),
        ("* * 0 * *", "day-of-month", "out of range 1-31"),
        ("* * * 13 *", "month", "out of range 1-12"),
        ("* * * FOO *", "month", "not a number or a name like JAN"),
        ("* * * * 8", "day-of-week", "out of range 0-7"),
        ("*/0 * * * *", "minute", "step"),
        ("5-1 * * * *", "minute", "runs backwards"),
        ("* * * *", "expression", "has 4 fields"),
        ("* * * * * * *", "expression", "has 7 fields"),
        ("@fortnightly", "expression", "unknown shorthand"),
        ("0 0 30 2 *", "day-of-month", "never occurs"),
        ("? * * * *", "minute", "only allowed"),
        ("1,,2 * * * *", "minute", "not a number"),
        ("-1 * * * *", "minute", "not a number"),
        ("99999999999 * * * *", "minute", "not a number"),
    ] {
        let e = Cron::parse(expr).unwrap_err();
        assert_eq!(e.field, field, "{expr}: {e}");
        assert!(e.to_string().contains(want), "{expr}: {e}");
    }
    assert_eq!(Cron::parse(&"* ".repeat(200)).unwrap_err().field, "expression");
}

#[test]
fn cron_that_never_fires_and_ends_of_time() {
    let z = Zone::utc();
    // Only Feb 29 that is also Sunday... is OR in Vixie, so restrict with dow `*`: 2028 has one.
    let c = Cron::parse("0 0 29 2 *").unwrap();
    assert_eq!(c.next_fire(utc(9998, 1, 1, 0, 0), &z), None, "no 29 Feb before 10000 after 9996");
    assert_eq!(c.next_fire(i64::MAX, &z), None);
    assert_eq!(c.next_fire(i64::MIN, &z), None);
}

fn job(trigger: Trigger) -> Job {
    Job {
        id: "j".to_string(),
        name: alloc::string::String::new(),
        enabled: true,
        paused: false,
        trigger,
        action: Action::Emit { event: "tick".to_string(), data: serde_json::Value::Null },
        grace_s: Some(600),
        delete_after_run: false,
        created_at: None,
        last_run: None,
        made_by: None,
    }
}

#[test]
fn interval_fires_on_its_anchor_grid() {
    let z = Zone::utc();
    let j = job(Trigger::Interval { every_s: 300, anchor: 0 });
    let s = j.validate().unwrap();
    assert_eq!(j.next_fire(&s, 1000, &z), Some(1200));
    assert_eq!(j.next_fire(&s, 1200, &z), Some(1500));
    let j = job(Trigger::Interval { every_s: 60, anchor: 7 });
    let s = j.validate().unwrap();
    assert_eq!(j.next_fire(&s, -100, &z), Some(-53));
    assert_eq!(s.next_after(i64::MAX - 10, &z), None);
}

#[test]
fn disabled_and_paused_jobs_do_not_fire() {
    let z = Zone::utc();
    let mut j = job(Trigger::Interval { every_s: 60, anchor: 0 });
    let s = j.validate().unwrap();
    j.paused = true;
    assert_eq!(j.next_fire(&s, 0, &z), None);
    assert_eq!(j.catch_up(&s, 1000, &z), None);
    j.paused = false;
    j.enabled = false;
    assert_eq!(j.next_fire(&s, 0, &z), None);
    j.enabled = true;
    assert_eq!(j.next_fire(&s, 0, &z), Some(60));
}

#[test]
fn once_jobs_fire_once() {
    let z = Zone::utc();
    let mut j = job(Trigger::Once { at: 5000 });
    j.delete_after_run = true;
    let s = j.validate().unwrap();
    assert_eq!(j.next_fire(&s, 0, &z), Some(5000));
    assert_eq!(j.next_fire(&s, 5000, &z), None);
    assert!(!j.finished(&s));
    j.record_run(5000);
    assert_eq!(j.next_fire(&s, 0, &z), None);
    assert!(j.finished(&s));
}

#[test]
fn missed_runs_catch_up_once_within_grace() {
    let z = Zone::from_posix(BERLIN).unwrap();
    // Every minute; last ran at 10:00 UTC, Chela down until 12:00: 119 were missed, one runs,
    // and it is the first one inside the 10-minute grace window.
    let mut j = job(Trigger::Cron { expr: "* * * * *".to_string(), tz: None });
    j.last_run = Some(utc(2026, 6, 1, 10, 0));
    let s = j.validate().unwrap();
    assert_eq!(j.catch_up(&s, utc(2026, 6, 1, 12, 0), &z), Some(utc(2026, 6, 1, 11, 50)));
    // Daily at 08:00 Berlin (06:00 UTC); start at 06:09 UTC: inside 10 minutes, runs.
    let mut d = job(Trigger::Cron { expr: "0 8 * * *".to_string(), tz: Some("Europe/Berlin".to_string()) });
    d.last_run = Some(utc(2026, 5, 31, 6, 0));
    let s = d.validate().unwrap();
    assert_eq!(d.catch_up(&s, utc(2026, 6, 1, 6, 9), &z), Some(utc(2026, 6, 1, 6, 0)));
    assert_eq!(d.catch_up(&s, utc(2026, 6, 1, 6, 10), &z), Some(utc(2026, 6, 1, 6, 0)), "exactly the grace");
    assert_eq!(d.catch_up(&s, utc(2026, 6, 1, 6, 11), &z), None, "too late");
    // Already ran at 06:00: nothing to catch up.
    d.record_run(utc(2026, 6, 1, 6, 0));
    assert_eq!(d.catch_up(&s, utc(2026, 6, 1, 6, 5), &z), None);
    // A once job missed by 5 minutes runs; one missed by an hour does not.
    let o = job(Trigger::Once { at: utc(2026, 6, 1, 9, 0) });
    let s = o.validate().unwrap();
    assert_eq!(o.catch_up(&s, utc(2026, 6, 1, 9, 5), &z), Some(utc(2026, 6, 1, 9, 0)));
    assert_eq!(o.catch_up(&s, utc(2026, 6, 1, 10, 0), &z), None);
    // Created after the missed instant: not missed at all.
    let mut c = job(Trigger::Once { at: utc(2026, 6, 1, 9, 0) });
    c.created_at = Some(utc(2026, 6, 1, 9, 1));
    assert_eq!(c.catch_up(&s, utc(2026, 6, 1, 9, 5), &z), None);
    // Without a grace, the default hour applies.
    let mut g = job(Trigger::Once { at: utc(2026, 6, 1, 9, 0) });
    g.grace_s = None;
    assert_eq!(g.catch_up(&s, utc(2026, 6, 1, 9, 59), &z), Some(utc(2026, 6, 1, 9, 0)));
}

#[test]
fn event_triggers_match_type_and_fields() {
    let mut filter = BTreeMap::new();
    filter.insert("channel".to_string(), "telegram".to_string());
    let j = job(Trigger::OnEvent { event: "message".to_string(), filter });
    let s = j.validate().unwrap();
    assert_eq!(j.next_fire(&s, 0, &Zone::utc()), None);
    let fields = |k: &str| (k == "channel").then_some("telegram");
    assert!(j.matches_event("message", fields));
    assert!(!j.matches_event("other", fields));
    assert!(!j.matches_event("message", |_| None));
    assert!(!job(Trigger::Once { at: 1 }).matches_event("message", fields));
}

#[test]
fn validation_names_the_field() {
    let cases: Vec<(Job, &str)> = alloc::vec![
        (
            job(Trigger::Cron { expr: "61 * * * *".to_string(), tz: None }),
            "trigger.expr: minute field: 61 is out of range 0-59"
        ),
        (
            job(Trigger::Cron { expr: "* * * * *".to_string(), tz: Some("../etc/passwd".to_string()) }),
            "trigger.tz: bad time zone name"
        ),
        (job(Trigger::Interval { every_s: 0, anchor: 0 }), "trigger.every_s: 0 must be"),
        (
            job(Trigger::OnEvent { event: alloc::string::String::new(), filter: BTreeMap::new() }),
            "trigger.event: must not be empty"
        ),
        (Job { id: "a b".to_string(), ..job(Trigger::Once { at: 1 }) }, "id: \"a b\" may hold only"),
        (Job { id: "x".repeat(65), ..job(Trigger::Once { at: 1 }) }, "id: is 65 bytes; the limit is 64"),
        (
            Job {
                action: Action::Agent { message: "m".repeat(MAX_MESSAGE_LEN + 1), channel: None, chat_id: None },
                ..job(Trigger::Once { at: 1 })
            },
            "action.message: is 8193 bytes",
        ),
        (
            Job {
                action: Action::Cap { name: alloc::string::String::new(), args: serde_json::Value::Null },
                ..job(Trigger::Once { at: 1 })
            },
            "action.name: must not be empty"
        ),
    ];
    for (j, want) in cases {
        let e = j.validate().unwrap_err().to_string();
        assert!(e.starts_with(want), "want {want:?}, got {e:?}");
    }
}

const GOOD_AND_BAD: &str = r#"{"version": 1, "jobs": [
  {"id": "morning", "trigger": {"type": "cron", "expr": "0 8 * * 1-5", "tz": "Europe/Berlin"}, "action": {"type": "agent", "message": "Plan my day", "channel": "telegram", "chat_id": "42"}},
  {"id": "typo", "trigger": {"type": "cron", "expr": "0 25 * * *"}, "action": {"type": "emit", "event": "x"}},
  {"id": "tick", "trigger": {"type": "interval", "every_s": 300}, "action": {"type": "cap", "name": "time_now", "args": {"fmt": "iso"}}},
  {"id": "kind", "trigger": {"type": "sometimes"}, "action": {"type": "emit", "event": "x"}},
  {"id": "morning", "trigger": {"type": "once", "at": 1}, "action": {"type": "emit", "event": "x"}},
  {"id": "extra", "enabeld": false, "trigger": {"type": "once", "at": 1}, "action": {"type": "emit", "event": "x"}},
  {"id": "multi",
   "trigger": {"type": "interval", "every_s": -5},
   "action": {"type": "emit", "event": "x"}},
  42,
  {"id": "evt", "trigger": {"type": "on_event", "event": "message", "match": {"channel": "feishu"}}, "action": {"type": "emit", "event": "seen", "data": {"n": 1}}, "paused": true}
]}"#;

#[test]
fn file_keeps_good_jobs_and_reports_bad_lines() {
    let f = file::load(GOOD_AND_BAD).unwrap();
    let ids: Vec<&str> = f.jobs.iter().map(|j| j.job.id.as_str()).collect();
    assert_eq!(ids, ["morning", "tick", "evt"]);
    assert_eq!(f.jobs.iter().map(|j| j.line).collect::<Vec<_>>(), [2, 4, 12]);
    let bad: Vec<alloc::string::String> = f.bad.iter().map(ToString::to_string).collect();
    assert_eq!(bad.len(), 6, "{bad:#?}");
    assert_eq!(bad[0], "line 3: job 2 (\"typo\"): trigger.expr: hour field: 25 is out of range 0-23");
    assert!(bad[1].starts_with("line 5: job 4 (\"kind\"): unknown variant `sometimes`, expected one of `once`, `interval`, `cron`, `on_event`"), "{}", bad[1]);
    assert_eq!(bad[2], "line 6: job 5 (\"morning\"): id \"morning\" is already used by the job on line 2");
    assert!(bad[3].starts_with("line 7: job 6 (\"extra\"): unknown field `enabeld`"), "{}", bad[3]);
    assert!(bad[4].starts_with("line 8: job 7 (\"multi\"): invalid value: integer `-5`"), "{}", bad[4]);
    assert!(bad[4].ends_with("(line 9)"), "{}", bad[4]);
    assert!(bad[5].starts_with("line 11: job 8: a job must be a JSON object"), "{}", bad[5]);
    assert!(f.jobs[2].job.paused);
}

#[test]
fn file_round_trips_and_refuses_what_is_not_a_job_list() {
    let f = file::load(GOOD_AND_BAD).unwrap();
    let jobs: Vec<Job> = f.jobs.iter().map(|j| j.job.clone()).collect();
    let text = file::to_json(&jobs);
    let again = file::load(&text).unwrap();
    assert!(again.bad.is_empty());
    assert_eq!(again.jobs.iter().map(|j| j.job.clone()).collect::<Vec<_>>(), jobs);
    assert_eq!(again.jobs.iter().map(|j| j.line).collect::<Vec<_>>(), [2, 3, 4]);
    assert!(file::load(&file::to_json(&[])).unwrap().jobs.is_empty());

    for (text, want) in [
        ("", "line 1 column 0: EOF while parsing"),
        ("{\"jobs\": [\n{\"id\": \"a\",\n", "line 3"),
        ("[]", "line 1 column 1: the top level must be a JSON object"),
        ("\n  42", "line 2 column 3: the top level must be a JSON object"),
        ("{\"jobs\": {}}", "invalid type: map"),
        ("{}", "missing field `jobs`"),
        ("{\"version\": 2, \"jobs\": []}", "version 2"),
    ] {
        let e = file::load(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
    let big = " ".repeat(file::MAX_FILE_LEN + 1);
    assert!(matches!(file::load(&big), Err(FileError::TooLarge { .. })));
}

#[test]
fn file_bounds_the_job_count() {
    let entry = r#"{"id": "j", "trigger": {"type": "once", "at": 1}, "action": {"type": "emit", "event": "x"}}"#;
    let mut text = alloc::string::String::from("{\"jobs\": [\n");
    for i in 0..file::MAX_JOBS + 5 {
        text.push_str(&entry.replace("\"j\"", &alloc::format!("\"j{i}\"")));
        text.push_str(if i + 1 < file::MAX_JOBS + 5 { ",\n" } else { "\n" });
    }
    text.push_str("]}");
    let f = file::load(&text).unwrap();
    assert_eq!(f.jobs.len(), file::MAX_JOBS);
    assert_eq!(f.bad.len(), 5);
    assert!(f.bad[0].message.contains("more than 1000 jobs"));
    assert_eq!(f.bad[0].line, file::MAX_JOBS + 2);
}

#[test]
fn on_event_jobs_fire_on_router_events_by_type_and_exact_fields() {
    use crate::router::{Event, Value};
    let mut filter = BTreeMap::new();
    filter.insert("channel".to_string(), "telegram".to_string());
    filter.insert("level".to_string(), "3".to_string());
    let mut j = job(Trigger::OnEvent { event: "message".to_string(), filter });
    let ev = |kind: &str, channel: &str, level: Value| {
        Event::new(kind).unwrap().with_chat(channel, "42").unwrap().with("level", level).unwrap()
    };
    // An integer field compares as the text a template shows.
    assert!(j.fires_on(&ev("message", "telegram", Value::Int(3))));
    assert!(j.fires_on(&ev("message", "telegram", Value::Str("3".into()))));
    // Exact, as the router's exact match: no prefix, no case folding.
    assert!(!j.fires_on(&ev("message", "telegra", Value::Int(3))));
    assert!(!j.fires_on(&ev("message", "Telegram", Value::Int(3))));
    assert!(!j.fires_on(&ev("message", "telegram", Value::Int(30))));
    assert!(!j.fires_on(&ev("messages", "telegram", Value::Int(3))));
    // A field the event lacks is no match.
    assert!(!j.fires_on(&Event::new("message").unwrap().with_chat("telegram", "42").unwrap()));
    j.paused = true;
    assert!(!j.fires_on(&ev("message", "telegram", Value::Int(3))), "a paused job fires on nothing");
    assert!(!job(Trigger::Once { at: 1 }).fires_on(&ev("message", "telegram", Value::Int(3))));
}

#[test]
fn triggers_and_actions_read_in_one_pass_with_serdes_messages() {
    let t = |text: &str| serde_json::from_str::<Trigger>(text).map_err(|e| e.to_string());
    let a = |text: &str| serde_json::from_str::<Action>(text).map_err(|e| e.to_string());
    // The tag anywhere; defaults as before; null for an optional field.
    assert_eq!(t(r#"{"every_s": 60, "type": "interval"}"#), Ok(Trigger::Interval { every_s: 60, anchor: 0 }));
    assert_eq!(
        t(r#"{"type": "cron", "expr": "* * * * *", "tz": null}"#),
        Ok(Trigger::Cron { expr: "* * * * *".into(), tz: None })
    );
    let mut filter = BTreeMap::new();
    filter.insert("channel".to_string(), "cli".to_string());
    assert_eq!(
        t(r#"{"match": {"channel": "cli"}, "event": "message", "type": "on_event"}"#),
        Ok(Trigger::OnEvent { event: "message".into(), filter })
    );
    assert_eq!(
        a(r#"{"type": "cap", "name": "time_now"}"#),
        Ok(Action::Cap { name: "time_now".into(), args: serde_json::Value::Null })
    );
    assert_eq!(
        a(r#"{"data": {"n": [1, {"k": null}]}, "type": "emit", "event": "e"}"#),
        Ok(Action::Emit { event: "e".into(), data: serde_json::json!({"n": [1, {"k": null}]}) })
    );
    assert_eq!(
        a(r#"{"type": "agent", "message": "m", "chat_id": "7"}"#),
        Ok(Action::Agent { message: "m".into(), channel: None, chat_id: Some("7".into()) })
    );
    for (text, want) in [
        (r#"{"type": "once"}"#, "missing field `at`"),
        (r#"{"at": 1}"#, "missing field `type`"),
        (r#"{"type": "once", "at": 1, "at": 2}"#, "duplicate field `at`"),
        (r#"{"type": "once", "type": "once", "at": 1}"#, "duplicate field `type`"),
        (
            r#"{"type": "Once", "at": 1}"#,
            "unknown variant `Once`, expected one of `once`, `interval`, `cron`, `on_event`",
        ),
        // A field of another variant, or of none, before or after the tag: the variant's fields.
        (r#"{"type": "once", "at": 1, "expr": "x"}"#, "unknown field `expr`, expected `at`"),
        (r#"{"expr": "x", "type": "once", "at": 1}"#, "unknown field `expr`, expected `at`"),
        (r#"{"every_s": 5, "nope": [1], "type": "interval"}"#, "unknown field `nope`, expected `every_s` or `anchor`"),
        (r#"{"type": "interval", "every_s": -5}"#, "invalid value: integer `-5`, expected u64"),
        (r#"{"type": 3}"#, "invalid type: integer `3`, expected a string"),
        (r#"["once", 1]"#, "invalid type: sequence, expected internally tagged enum Trigger"),
    ] {
        let e = t(text).unwrap_err();
        assert!(e.starts_with(want), "{text}: {e}");
    }
    let e = a(r#"{"type": "emit", "event": "e", "message": "m"}"#).unwrap_err();
    assert!(e.starts_with("unknown field `message`, expected `event` or `data`"), "{e}");
    // Through serde_json's Value too (the host's tools build jobs from the model's arguments).
    let v =
        serde_json::json!({"action": {"type": "emit", "event": "e"}, "trigger": {"at": 5, "type": "once"}, "id": "x"});
    let job: Job = serde_json::from_value(v).unwrap();
    assert_eq!(job.trigger, Trigger::Once { at: 5 });
}
