//! The rule store over a real `rules.json` in a temporary workspace.

use chela_core::router::{Added, Event};
use serde_json::json;

use super::{BACKUP, FILE, Rules, Work};
use crate::workspace::Workspace;

fn ws() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    (dir, ws)
}

const PING: &str = r#"{"id": "ping", "match": {"type": "message", "text": {"prefix": "ping"}},
  "consume_on_match": true, "actions": [{"type": "send", "text": "pong"}]}"#;

fn message(text: &str) -> Event {
    Event::new("message")
        .unwrap()
        .with_source("telegram")
        .unwrap()
        .with_chat("telegram", "42")
        .unwrap()
        .with_text(text)
        .unwrap()
}

#[test]
fn a_broken_rule_costs_itself_and_is_reported_with_its_line() {
    let (_d, ws) = ws();
    let text =
        format!("{{\"rules\": [\n{PING},\n{{\"id\": \"bad\", \"actions\": [{{\"type\": \"teleport\"}}]}}\n]}}\n");
    std::fs::write(ws.root().join(FILE), &text).unwrap();
    let rules = Rules::open(&ws);
    assert_eq!(rules.len(), 1);
    let lines = rules.problems().lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("rules.json line 4: rule `bad`"), "{lines:?}");
    // The good rule works.
    assert!(rules.raise_message(&message("ping me"), false));
    assert!(!rules.raise_message(&message("hello"), false));
    let mut q = rules.take_queue().unwrap();
    assert!(matches!(q.try_recv(), Ok(Work::Plan(p)) if p.fired[0].rule == "ping"));
    assert!(q.try_recv().is_err(), "a message no rule matches queues nothing");
}

#[test]
fn a_tool_write_replaces_a_file_with_bad_rules_and_keeps_the_old_one() {
    let (_d, ws) = ws();
    let broken = "{\"rules\": [ {\"id\": \"x\", \"actions\": 5} ]}\n";
    std::fs::write(ws.root().join(FILE), broken).unwrap();
    let rules = Rules::open(&ws);
    assert!(!rules.problems().is_empty());
    let added = rules.add(serde_json::from_str(PING).unwrap()).unwrap();
    assert_eq!(added, Added::New);
    assert_eq!(std::fs::read_to_string(ws.root().join(BACKUP)).unwrap(), broken);
    assert!(rules.problems().is_empty());
    // The written file reads back to the same rules, with no problems.
    let again = Rules::open(&ws);
    assert_eq!(again.len(), 1);
    assert!(again.problems().is_empty());
    // Upsert by id, then remove.
    let mut spec: serde_json::Value = serde_json::from_str(PING).unwrap();
    spec["enabled"] = json!(false);
    assert_eq!(rules.add(spec).unwrap(), Added::Replaced);
    assert_eq!(rules.list()[0]["enabled"], json!(false));
    rules.remove("ping").unwrap();
    assert!(rules.remove("ping").unwrap_err().to_string().contains("no rule \"ping\""));
    assert_eq!(Rules::open(&ws).len(), 0);
}

#[test]
fn an_invalid_rule_from_a_tool_is_refused_with_the_cores_reason_and_nothing_is_written() {
    let (_d, ws) = ws();
    let rules = Rules::open(&ws);
    let e = rules
        .add(json!({"id": "t", "only_if": [{"field": "x", "op": "gte", "value": 1}], "actions": [{"type": "drop"}]}));
    let e = e.unwrap_err().to_string();
    assert!(e.contains("rule `t`") && e.contains("gte"), "{e}");
    assert!(!ws.root().join(FILE).exists());
}

#[test]
fn a_hand_edit_is_seen_on_refresh() {
    let (_d, ws) = ws();
    let rules = Rules::open(&ws);
    assert!(!rules.refresh());
    std::fs::write(ws.root().join(FILE), format!("{{\"rules\": [{PING}]}}")).unwrap();
    assert!(rules.refresh());
    assert_eq!(rules.len(), 1);
    assert!(!rules.refresh(), "an unchanged file is not read again");
}

#[test]
fn a_symlink_is_refused_and_not_replaced() {
    let (d, ws) = ws();
    let _ = &d;
    let target = d.path().join("elsewhere.json");
    std::fs::write(&target, format!("{{\"rules\": [{PING}]}}")).unwrap();
    std::os::unix::fs::symlink(&target, ws.root().join(FILE)).unwrap();
    let rules = Rules::open(&ws);
    assert_eq!(rules.len(), 0);
    assert!(rules.problems().whole.unwrap().contains("symbolic link"));
    let e = rules.add(serde_json::from_str(PING).unwrap()).unwrap_err().to_string();
    assert!(e.contains("symbolic link"), "{e}");
    assert!(std::fs::symlink_metadata(ws.root().join(FILE)).unwrap().file_type().is_symlink());
}

#[test]
fn a_huge_file_is_not_read_and_not_replaced() {
    let (_d, ws) = ws();
    let huge = format!("{{\"rules\": [{PING}], \"pad\": \"{}\"}}", "x".repeat(chela_core::router::MAX_FILE_BYTES));
    std::fs::write(ws.root().join(FILE), &huge).unwrap();
    let rules = Rules::open(&ws);
    assert_eq!(rules.len(), 0);
    assert!(rules.problems().whole.unwrap().contains("the limit is"));
    assert!(rules.add(serde_json::from_str(PING).unwrap()).is_err());
    assert_eq!(std::fs::metadata(ws.root().join(FILE)).unwrap().len(), huge.len() as u64);
}

#[test]
fn a_flood_overflows_the_bounded_queue_and_the_drops_are_counted() {
    let (_d, ws) = ws();
    let rules = Rules::with_queue(&ws, 4);
    // No cooldown: every message fires.
    rules.add(serde_json::from_str(PING).unwrap()).unwrap();
    for _ in 0..10 {
        assert!(rules.raise_message(&message("ping"), false));
    }
    assert_eq!(rules.dropped(), 6);
    let mut q = rules.take_queue().unwrap();
    let mut n = 0;
    while q.try_recv().is_ok() {
        n += 1;
    }
    assert_eq!(n, 4);
}

/// A scheduler over `ws` with `cron` as its file.
fn scheduler(ws: &Workspace, cron: &str) -> crate::scheduler::Scheduler {
    std::fs::write(ws.root().join(crate::scheduler::FILE), cron).unwrap();
    let settings = crate::scheduler::Settings { zone: chela_core::zone::Zone::utc(), grace_s: 60, max_jobs: 100 };
    crate::scheduler::Scheduler::open(ws, settings, 1_800_000_000)
}

fn ctx_in(ws: &Workspace, depth: u8) -> crate::tools::ToolCtx {
    let base = crate::app::Base::load(ws.clone()).unwrap();
    let mut ctx = base.tool_ctx();
    ctx.conversation = Some(("telegram".to_owned(), "42".to_owned()));
    ctx.depth = depth;
    ctx
}

#[test]
fn a_tool_result_raises_cap_result_only_when_someone_listens() {
    let (_d, ws) = ws();
    let rules = std::sync::Arc::new(Rules::open(&ws));
    let sched = std::sync::Arc::new(scheduler(&ws, r#"{"jobs": []}"#));
    let hook = super::cap_results(std::sync::Arc::clone(&rules), std::sync::Arc::clone(&sched));
    let ctx = ctx_in(&ws, 0);
    let mut q = rules.take_queue().unwrap();
    // Nobody listens: nothing is built or queued.
    hook(&ctx, "get_current_time", &Ok("12:00".to_owned()));
    assert!(q.try_recv().is_err());
    rules
        .add(json!({"id": "r", "match": {"type": "cap_result"}, "actions": [{"type": "send", "text": "{{event.output}}"}]}))
        .unwrap();
    let long = "y".repeat(5000);
    hook(&ctx, "web_search", &Ok(long.clone()));
    let Ok(Work::Event(e)) = q.try_recv() else { panic!("a cap_result event is queued") };
    assert_eq!((e.kind(), e.source(), e.channel(), e.chat_id()), ("cap_result", "web_search", "telegram", "42"));
    assert_eq!(e.text().len(), super::MAX_RESULT_EXCERPT, "the output is cut");
    assert_eq!(e.get("ok"), Some(&chela_core::router::Value::Bool(true)));
    assert_eq!(e.get("cap"), Some(&chela_core::router::Value::Str("web_search".into())));
    assert_eq!(e.depth(), 0);
    // A failed call says so; the rule's plan fills its template from the event.
    let failed: crate::tools::ToolResult = Err(crate::tools::ToolError::new("no network"));
    hook(&ctx, "web_search", &failed);
    let Ok(Work::Event(e)) = q.try_recv() else { panic!("a cap_result event is queued") };
    assert_eq!(e.get("ok"), Some(&chela_core::router::Value::Bool(false)));
    assert_eq!(e.text(), "no network");
    let plan = rules.plan(&e);
    assert_eq!(plan.fired[0].rule, "r");
}

#[test]
fn results_of_calls_past_the_depth_bound_are_not_raised() {
    let (_d, ws) = ws();
    let rules = std::sync::Arc::new(Rules::open(&ws));
    rules
        .add(json!({"id": "again", "match": {"type": "cap_result"}, "actions": [{"type": "cap", "cap": "get_current_time"}]}))
        .unwrap();
    let sched = std::sync::Arc::new(scheduler(&ws, r#"{"jobs": []}"#));
    let hook = super::cap_results(std::sync::Arc::clone(&rules), std::sync::Arc::clone(&sched));
    let mut q = rules.take_queue().unwrap();
    let max = chela_core::router::MAX_EMIT_DEPTH;
    // A rule whose `cap` reacts to results: each call is one step deeper, and the chain ends.
    hook(&ctx_in(&ws, max), "get_current_time", &Ok("t".to_owned()));
    assert!(matches!(q.try_recv(), Ok(Work::Event(e)) if e.depth() == max));
    hook(&ctx_in(&ws, max + 1), "get_current_time", &Ok("t".to_owned()));
    assert!(q.try_recv().is_err(), "one step past the bound is cut");
    let deep = Event::new("x").unwrap().with_depth(max + 1);
    assert!(!super::raise(&rules, &sched, deep));
}
