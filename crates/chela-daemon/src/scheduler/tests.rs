//! The job store against real files, with `now` passed in.

use std::fs;
use std::sync::Arc;

use super::*;
use crate::testing::Fixture;
use crate::tzdb::named_zone;

const T0: i64 = 1_800_000_000;

fn settings(fx: &Fixture) -> Settings {
    Settings::from_config(&fx.cfg).unwrap()
}

fn write(fx: &Fixture, text: &str) {
    fs::write(fx.root().join(FILE), text).unwrap();
}

const GOOD_AND_BAD: &str = r#"{"version": 1, "jobs": [
  {"id": "ok", "trigger": {"type": "interval", "every_s": 60}, "action": {"type": "cap", "name": "get_current_time"}},
  {"id": "broken", "trigger": {"type": "cron", "expr": "99 * * * *"}, "action": {"type": "cap", "name": "x"}},
  {"id": "later", "trigger": {"type": "once", "at": 1800000600}, "action": {"type": "cap", "name": "get_current_time"}}
]}
"#;

#[test]
fn bad_entries_are_reported_with_their_line_the_good_ones_run_and_the_file_is_kept() {
    let fx = Fixture::new(&[]);
    write(&fx, GOOD_AND_BAD);
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    let ids: Vec<String> = s.list(T0).into_iter().map(|v| v.job.id).collect();
    assert_eq!(ids, ["ok", "later"]);
    let lines = s.problems().lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("cron.json line 3: job 2 (\"broken\"): trigger.expr"), "{lines:?}");
    // The good jobs fire; their last run is not written over the person's file.
    let due = s.take_due(T0 + 60);
    assert_eq!(due.iter().map(|d| d.job.id.as_str()).collect::<Vec<_>>(), ["ok"]);
    assert_eq!(fs::read_to_string(fx.root().join(FILE)).unwrap(), GOOD_AND_BAD);
    // A tool's change writes a whole valid file and keeps the old one.
    s.remove("later").unwrap();
    assert_eq!(fs::read_to_string(fx.root().join(BACKUP)).unwrap(), GOOD_AND_BAD);
    let again = Scheduler::open(&fx.ws, settings(&fx), T0 + 61);
    assert!(again.problems().is_empty());
    assert_eq!(again.list(T0).len(), 1);
}

#[test]
fn jobs_fire_once_per_slot_and_once_jobs_finish() {
    let fx = Fixture::new(&[]);
    write(&fx, GOOD_AND_BAD.replace("\"at\": 1800000600}", "\"at\": 1800000600}, \"delete_after_run\": true").as_str());
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    assert_eq!(s.next_wake(T0), Some(T0 + 60));
    assert!(s.take_due(T0 + 59).is_empty());
    assert_eq!(s.take_due(T0 + 60).len(), 1);
    assert!(s.take_due(T0 + 60).is_empty(), "a slot fires once");
    // Woken late (a suspended laptop): one run, not ten.
    let due = s.take_due(T0 + 660);
    let ids: Vec<&str> = due.iter().map(|d| d.job.id.as_str()).collect();
    assert_eq!(ids, ["ok", "later"]);
    assert!(s.get("later", T0 + 660).is_none(), "a once job with delete_after_run is gone after it ran");
}

#[test]
fn a_missed_run_happens_once_at_start_within_the_grace_window() {
    let fx = Fixture::new(&[("scheduler.missed_grace_secs", "600")]);
    let text = |last: i64| {
        format!(
            r#"{{"version": 1, "jobs": [{{"id": "hourly", "trigger": {{"type": "interval", "every_s": 3600}}, "action": {{"type": "cap", "name": "get_current_time"}}, "last_run": {last}}}]}}"#
        )
    };
    // 1_800_000_000 is a multiple of 3600 plus 0: slots are on the hour from the epoch.
    let slot = T0 - T0.rem_euclid(3600);
    write(&fx, &text(slot - 3600 * 5));
    let s = Scheduler::open(&fx.ws, settings(&fx), slot + 300);
    let due = s.catch_up(slot + 300);
    assert_eq!(due.len(), 1, "five missed runs make one");
    assert_eq!(due[0].at, slot);
    // Beyond the grace window: nothing.
    let s = Scheduler::open(&fx.ws, settings(&fx), slot + 900);
    assert!(s.catch_up(slot + 900).is_empty());
}

#[test]
fn a_planted_symlink_is_neither_read_nor_written_through() {
    let fx = Fixture::new(&[]);
    let outside = fx.root().parent().unwrap().join("secret.json");
    fs::write(&outside, GOOD_AND_BAD).unwrap();
    std::os::unix::fs::symlink(&outside, fx.root().join(FILE)).unwrap();
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    assert!(s.list(T0).is_empty());
    let why = s.problems().whole.unwrap();
    assert!(why.contains("symbolic link"), "{why}");
    let job: Job = serde_json::from_value(serde_json::json!({"id": "n", "trigger": {"type": "interval", "every_s": 5}, "action": {"type": "cap", "name": "get_current_time"}})).unwrap();
    s.upsert(job, T0).unwrap();
    assert_eq!(fs::read_to_string(&outside).unwrap(), GOOD_AND_BAD, "the link's target is untouched");
    assert!(!fs::symlink_metadata(fx.root().join(FILE)).unwrap().file_type().is_symlink());
}

#[test]
fn huge_files_and_thousands_of_jobs_are_bounded() {
    let fx = Fixture::new(&[("scheduler.max_jobs", "50")]);
    write(&fx, &" ".repeat(2 * 1024 * 1024));
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    assert!(s.problems().whole.unwrap().contains("limit"), "a file over the bound is refused whole");
    let entry = |i: usize| {
        format!(
            r#"{{"id": "j{i}", "trigger": {{"type": "interval", "every_s": 60}}, "action": {{"type": "cap", "name": "t"}}}}"#
        )
    };
    let jobs: Vec<String> = (0..5000).map(entry).collect();
    write(&fx, &format!("{{\"version\": 1, \"jobs\": [\n{}\n]}}", jobs.join(",\n")));
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    assert_eq!(s.list(T0).len(), 50);
    let p = s.problems();
    assert_eq!(p.bad.len(), 5000 - 50);
    assert!(p.lines()[0].contains("scheduler.max_jobs (50)"), "{:?}", &p.lines()[0]);
}

#[test]
fn edits_from_another_process_are_picked_up() {
    let fx = Fixture::new(&[]);
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    assert!(!s.refresh(T0));
    write(&fx, GOOD_AND_BAD);
    assert!(s.refresh(T0));
    assert_eq!(s.list(T0).len(), 2);
    // A job first seen now does not make up runs from before.
    assert!(s.take_due(T0 + 10).is_empty());
    request(&fx.ws, "run.ok").unwrap();
    request(&fx.ws, "run.ok").unwrap();
    request(&fx.ws, "heartbeat").unwrap();
    let (ids, beat) = s.take_requests();
    assert_eq!(ids, ["ok"]);
    assert!(beat);
    assert_eq!(s.take_due(T0 + 11).len(), 1, "the asked-for run");
    assert_eq!(s.take_requests(), (Vec::new(), false), "requests are taken once");
}

#[test]
fn zones_come_from_the_zone_database_and_bad_names_are_refused() {
    let berlin = named_zone("Europe/Berlin").unwrap();
    assert_eq!(berlin.offset_at(1_782_900_000), 7200, "summer time");
    assert!(named_zone("../../etc/passwd").is_err());
    assert!(named_zone("Mars/Olympus").unwrap_err().to_string().contains("Mars/Olympus"));
    assert_eq!(local_time(1_782_900_000, &berlin), "2026-07-01 12:00:00 +02:00");
}

#[test]
fn a_flood_of_requests_is_taken_in_bounded_batches_and_unknown_jobs_are_ignored() {
    let fx = Fixture::new(&[]);
    write(&fx, GOOD_AND_BAD);
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    for i in 0..200 {
        request(&fx.ws, &format!("run.nope{i}")).unwrap();
    }
    request(&fx.ws, "run.ok").unwrap();
    let dir = fx.root().join(REQUESTS_DIR);
    // A planted link is removed as a link; what it points at stays.
    let target = fx.root().join("keep.txt");
    fs::write(&target, "mine").unwrap();
    std::os::unix::fs::symlink(&target, dir.join("heartbeat")).unwrap();
    let mut taken = 0;
    let mut beat = false;
    for _ in 0..10 {
        let (ids, b) = s.take_requests();
        assert!(ids.len() <= MAX_REQUESTS);
        taken += ids.len();
        beat |= b;
    }
    assert_eq!(taken, 201);
    assert!(beat);
    assert_eq!(fs::read_to_string(&target).unwrap(), "mine");
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    let due = s.take_due(T0 + 1);
    assert_eq!(due.iter().filter(|d| d.manual).map(|d| d.job.id.as_str()).collect::<Vec<_>>(), ["ok"]);
}

const ON_EVENT: &str = r#"{"version": 1, "jobs": [
  {"id": "hello", "trigger": {"type": "on_event", "event": "message", "match": {"channel": "telegram", "text": "hi"}},
   "action": {"type": "agent", "message": "greet"}},
  {"id": "any", "trigger": {"type": "on_event", "event": "message"}, "action": {"type": "emit", "event": "seen"}},
  {"id": "off", "enabled": false, "trigger": {"type": "on_event", "event": "message"}, "action": {"type": "emit", "event": "x"}}
]}
"#;

fn message(text: &str, depth: u8) -> Event {
    Event::new("message").unwrap().with_chat("telegram", "42").unwrap().with_text(text).unwrap().with_depth(depth)
}

#[test]
fn on_event_jobs_fire_on_matching_events_and_stop_at_the_depth_bound() {
    let fx = Fixture::new(&[]);
    write(&fx, ON_EVENT);
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    assert!(s.problems().is_empty(), "{:?}", s.problems().lines());
    assert!(s.listens("message"));
    assert!(!s.listens("seen"));
    let due = s.take_event(&message("hi", 0), T0 + 5);
    let ids: Vec<&str> = due.iter().map(|d| d.job.id.as_str()).collect();
    assert_eq!(ids, ["hello", "any"], "the disabled job stays quiet");
    assert!(due.iter().all(|d| d.depth == 1 && d.chat == Some(("telegram".into(), "42".into()))));
    assert_eq!(s.get("hello", T0 + 5).unwrap().job.last_run, Some(T0 + 5));
    let ids: Vec<String> = s.take_event(&message("hi there", 2), T0 + 6).into_iter().map(|d| d.job.id).collect();
    assert_eq!(ids, ["any"], "the match is exact");
    assert_eq!(s.take_event(&message("hi", 2), T0 + 7)[0].depth, 3);
    // An event as deep as the router lets emits go fires no job: a job answering what it
    // raised itself ends there.
    assert!(s.take_event(&message("hi", chela_core::router::MAX_EMIT_DEPTH), T0 + 8).is_empty());
    // On-event jobs never fire on the clock.
    assert!(s.take_due(T0 + 100_000).is_empty());
}

#[test]
fn emit_jobs_build_their_event_from_data_and_refuse_what_cannot_be_one() {
    let job: Job = serde_json::from_value(serde_json::json!({"id": "e", "trigger": {"type": "interval", "every_s": 60},
        "action": {"type": "emit", "event": "kitchen", "data": {"text": "hot", "channel": "telegram", "chat_id": "42", "temp": 31, "ok": true, "room": "k"}}}))
    .unwrap();
    let e = emit_event(&job, 2).unwrap();
    assert_eq!(
        (e.kind(), e.source(), e.text(), e.channel(), e.chat_id()),
        ("kitchen", "scheduler", "hot", "telegram", "42")
    );
    assert_eq!(e.get("temp"), Some(&Value::Int(31)));
    assert_eq!(e.get("ok"), Some(&Value::Bool(true)));
    assert_eq!(e.get("room"), Some(&Value::Str("k".into())));
    assert_eq!(e.get("job"), Some(&Value::Str("e".into())));
    assert_eq!(e.depth(), 2);
    let fx = Fixture::new(&[]);
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    let mut bad = job.clone();
    bad.action = Action::Emit { event: "k".into(), data: serde_json::json!({"list": [1]}) };
    let err = format!("{:#}", s.upsert(bad, T0).unwrap_err());
    assert!(err.contains("action.data.list"), "{err}");
    s.upsert(job, T0).unwrap();
}

#[test]
fn outcomes_are_kept_across_restarts_and_shown_in_the_listing() {
    let fx = Fixture::new(&[("scheduler.timezone", "Asia/Tokyo")]);
    write(&fx, GOOD_AND_BAD);
    let s = Scheduler::open(&fx.ws, settings(&fx), T0);
    s.set_outcome("ok", Outcome::new(T0 + 60, false, "telegram/42 is not a chat allowed to talk to Chela", false));
    s.set_outcome("gone", Outcome::new(T0 + 60, true, "ran", false));
    let v = s.get("ok", T0).unwrap();
    assert_eq!(v.last_outcome.as_ref().map(|o| o.ok), Some(false));
    // The end time as the user's clock shows it (08:01 UTC is 17:01 in Tokyo).
    assert!(v.status.unwrap().starts_with("not run at 2027-01-15 17:01:00 +09:00: telegram/42"));
    // The person's broken cron.json is not rewritten for an outcome.
    assert_eq!(fs::read_to_string(fx.root().join(FILE)).unwrap(), GOOD_AND_BAD);
    let again = Scheduler::open(&fx.ws, settings(&fx), T0 + 100);
    let o = again.get("ok", T0 + 100).unwrap().last_outcome.unwrap();
    assert_eq!((o.at, o.ok), (T0 + 60, false));
    let stored = fs::read_to_string(fx.root().join(outcomes::FILE)).unwrap();
    assert!(!stored.contains("gone"), "only jobs that exist are kept: {stored}");
    // A long message is cut; a broken file is read as no outcomes.
    again.set_outcome("ok", Outcome::new(T0, true, &"m".repeat(5000), true));
    assert_eq!(again.get("ok", T0).unwrap().last_outcome.unwrap().message.len(), outcomes::MAX_MESSAGE);
    fs::write(fx.root().join(outcomes::FILE), "{not json").unwrap();
    assert!(Scheduler::open(&fx.ws, settings(&fx), T0).get("ok", T0).unwrap().last_outcome.is_none());
}

/// The tools the chip offers too are advertised exactly as the core's contract gives them:
/// same names, descriptions and schemas, byte for byte. The chip's `tests/contract.rs` checks
/// its side against the same list, so a spec copied by hand on either side shows up here. It
/// stands with the scheduler's tests because the list includes the scheduler's group.
#[cfg(feature = "board")]
#[test]
fn shared_tools_are_advertised_as_the_core_contract() {
    let fx = Fixture::new(&[]);
    // Built as every command builds it: the board's tools come with the board's service.
    let tb = Arc::clone(&fx.toolbox);
    let sched = Scheduler::open(&fx.ws, Settings::from_config(&fx.cfg).unwrap(), fx.clock.unix_secs());
    tb.register(tools::group(Arc::new(sched))).unwrap();
    let registry = tb.registry();
    for shared in &chela_core::contract::SHARED {
        let cap = registry.get(shared.name).unwrap_or_else(|| panic!("the host does not offer {}", shared.name));
        assert_eq!(&cap.tool_spec(), shared, "{} differs from the contract", shared.name);
    }
}
