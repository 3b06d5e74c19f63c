//! The scheduler tools over a real `cron.json` in a temporary workspace.

use serde_json::{Value, json};

use super::*;
use crate::scheduler::{FILE, Settings};
use crate::testing::Fixture;
use crate::tools::Erased;

/// The time the tools read: the fixture's clock is the system's.
fn now_secs() -> i64 {
    crate::clock::Clock::system().unix_secs()
}

fn open(fx: &Fixture) -> Arc<Scheduler> {
    Arc::new(Scheduler::open(&fx.ws, Settings::from_config(&fx.cfg).unwrap(), now_secs()))
}

/// Calls `tool` as the model would from telegram chat 42.
async fn call<T: Tool>(fx: &Fixture, tool: T, args: Value) -> ToolResult {
    let mut ctx = fx.ctx();
    ctx.conversation = Some(("telegram".to_owned(), "42".to_owned()));
    Arc::new(tool).call_json(ctx, args.to_string()).await.map(crate::tools::ToolOutput::into_text)
}

fn job(s: &Scheduler, id: &str) -> Value {
    serde_json::to_value(s.get(id, now_secs()).unwrap()).unwrap()
}

#[tokio::test]
async fn a_job_added_from_a_chat_goes_to_that_chat_and_survives_a_restart() {
    let fx = Fixture::new(&[("scheduler.timezone", "UTC")]);
    let s = open(&fx);
    let at = now_secs() + 3600;
    let out = call(
        &fx,
        AddJob(Arc::clone(&s)),
        json!({"id": "tea", "trigger": {"type": "once", "at": at}, "action": {"type": "agent", "message": "Tea?"}}),
    )
    .await
    .unwrap();
    assert!(out.starts_with("Added job tea."), "{out}");
    let j = job(&s, "tea");
    assert_eq!(j["action"], json!({"type": "agent", "message": "Tea?", "channel": "telegram", "chat_id": "42"}));
    assert_eq!(j["next_fire"], at);
    // Upsert by id.
    let out = call(
        &fx,
        AddJob(Arc::clone(&s)),
        json!({"id": "tea", "trigger": {"type": "interval", "every_s": 600}, "action": {"type": "cap", "name": "get_current_time"}}),
    )
    .await
    .unwrap();
    assert!(out.starts_with("Replaced job tea."), "{out}");
    assert_eq!(s.list(now_secs()).len(), 1);
    // A new process reads the same jobs.
    let again = open(&fx);
    assert_eq!(job(&again, "tea")["trigger"], json!({"type": "interval", "every_s": 600, "anchor": 0}));
}

#[tokio::test]
async fn pause_resume_disable_enable_trigger_and_remove() {
    let fx = Fixture::new(&[]);
    let s = open(&fx);
    let add = json!({"id": "j", "trigger": {"type": "interval", "every_s": 60}, "action": {"type": "agent", "message": "hi"}});
    call(&fx, AddJob(Arc::clone(&s)), add).await.unwrap();
    assert!(job(&s, "j")["next_fire"].is_i64());
    call(&fx, PauseJob(Arc::clone(&s)), json!({"id": "j"})).await.unwrap();
    assert_eq!(job(&s, "j")["paused"], true);
    assert!(job(&s, "j")["next_fire"].is_null());
    call(&fx, ResumeJob(Arc::clone(&s)), json!({"id": "j"})).await.unwrap();
    assert!(job(&s, "j")["next_fire"].is_i64());
    call(&fx, DisableJob(Arc::clone(&s)), json!({"id": "j"})).await.unwrap();
    assert!(job(&s, "j")["next_fire"].is_null());
    assert!(!open(&fx).get("j", now_secs()).unwrap().job.enabled, "written to the file");
    call(&fx, EnableJob(Arc::clone(&s)), json!({"id": "j"})).await.unwrap();
    assert!(job(&s, "j")["next_fire"].is_i64());
    call(&fx, TriggerNow(Arc::clone(&s)), json!({"id": "j"})).await.unwrap();
    let due = s.take_due(now_secs());
    assert_eq!(due.len(), 1);
    assert!(due[0].manual);
    let got: Value =
        serde_json::from_str(&call(&fx, GetJob(Arc::clone(&s)), json!({"id": "j"})).await.unwrap()).unwrap();
    assert_eq!(got["id"], "j");
    call(&fx, RemoveJob(Arc::clone(&s)), json!({"id": "j"})).await.unwrap();
    let e = call(&fx, GetJob(Arc::clone(&s)), json!({"id": "j"})).await.unwrap_err();
    assert!(e.0.contains("there is no job \"j\""), "{e}");
    let e = call(&fx, TriggerNow(Arc::clone(&s)), json!({"id": "j"})).await.unwrap_err();
    assert!(e.0.contains("no job"), "{e}");
}

#[tokio::test]
async fn bad_jobs_get_errors_naming_the_field() {
    let fx = Fixture::new(&[]);
    let s = open(&fx);
    let add = |v: Value| call(&fx, AddJob(Arc::clone(&s)), v);
    let agent = json!({"type": "agent", "message": "x"});
    let e = add(json!({"id": "a", "trigger": {"type": "once", "at": 1000}, "action": agent})).await.unwrap_err();
    assert!(e.0.contains("trigger.at") && e.0.contains("in the past"), "{e}");
    let e = add(json!({"id": "a", "trigger": {"type": "interval", "every_s": 0}, "action": agent})).await.unwrap_err();
    assert!(e.0.contains("trigger.every_s"), "{e}");
    let e =
        add(json!({"id": "a", "trigger": {"type": "cron", "expr": "61 * * * *"}, "action": agent})).await.unwrap_err();
    assert!(e.0.contains("trigger.expr"), "{e}");
    let e = add(
        json!({"id": "a", "trigger": {"type": "cron", "expr": "0 8 * * *", "tz": "../../etc/passwd"}, "action": agent}),
    )
    .await
    .unwrap_err();
    assert!(e.0.contains("trigger.tz"), "{e}");
    let e =
        add(json!({"id": "a b", "trigger": {"type": "interval", "every_s": 5}, "action": agent})).await.unwrap_err();
    assert!(e.0.contains("id:"), "{e}");
    let emit = |data: Value| json!({"id": "e", "trigger": {"type": "interval", "every_s": 5}, "action": {"type": "emit", "event": "x", "data": data}});
    let e = add(emit(json!({"nested": {"a": 1}}))).await.unwrap_err();
    assert!(e.0.contains("action.data.nested"), "{e}");
    let e = add(emit(json!({"type": "y"}))).await.unwrap_err();
    assert!(e.0.contains("action.data") && e.0.contains("`type`"), "{e}");
    let e = add(emit(json!("just text"))).await.unwrap_err();
    assert!(e.0.contains("action.data: expected an object"), "{e}");
    // No conversation to default to, and none named.
    let e = Arc::new(AddJob(Arc::clone(&s)))
        .call_json(
            fx.ctx(),
            json!({"id": "a", "trigger": {"type": "interval", "every_s": 5}, "action": agent}).to_string(),
        )
        .await
        .unwrap_err();
    assert!(e.0.contains("action.channel"), "{e}");
    assert!(s.list(now_secs()).is_empty());
    assert!(!fx.root().join(FILE).exists(), "nothing was written");
}

#[tokio::test]
async fn mimiclaws_cron_tools_with_their_argument_names() {
    let fx = Fixture::new(&[]);
    let s = open(&fx);
    let add = |v: Value| call(&fx, CronAdd(Arc::clone(&s)), v);
    let out =
        add(json!({"name": "drink", "schedule_type": "every", "message": "water", "interval_s": 90})).await.unwrap();
    assert!(out.starts_with("OK: added cron job "), "{out}");
    let out = add(json!({"name": "call", "schedule_type": "at", "message": "call mum", "delay_s": 120})).await.unwrap();
    let list: Value = serde_json::from_str(&call(&fx, CronList(Arc::clone(&s)), json!({})).await.unwrap()).unwrap();
    let jobs = list["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let once = jobs.iter().find(|j| j["name"] == "call").unwrap();
    assert_eq!(once["delete_after_run"], true);
    assert_eq!(once["action"]["chat_id"], "42");
    let id = once["id"].as_str().unwrap();
    assert!(out.contains(id));
    for (args, want) in [
        (
            json!({"name": "x", "schedule_type": "every", "message": "m", "interval_s": 0}),
            "interval_s must be positive",
        ),
        (
            json!({"name": "x", "schedule_type": "every", "message": "m", "interval_s": -3}),
            "interval_s must be positive",
        ),
        (json!({"name": "x", "schedule_type": "every", "message": "m"}), "need interval_s"),
        (json!({"name": "x", "schedule_type": "at", "message": "m", "at_epoch": 1000}), "is in the past"),
        (json!({"name": "x", "schedule_type": "at", "message": "m", "delay_s": 0}), "delay_s must be positive"),
        (json!({"name": "x", "schedule_type": "daily", "message": "m"}), "schedule_type must be"),
    ] {
        let e = add(args).await.unwrap_err();
        assert!(e.0.starts_with("Error: ") && e.0.contains(want), "{e}");
    }
    call(&fx, CronRemove(Arc::clone(&s)), json!({"job_id": id})).await.unwrap();
    assert_eq!(s.list(now_secs()).len(), 1);
    let e = call(&fx, CronRemove(Arc::clone(&s)), json!({"job_id": id})).await.unwrap_err();
    assert!(e.0.contains("no job"), "{e}");
}

/// The one `cron_add` schema the chip shares: a cron expression beside MimiClaw's kinds, and
/// the chip's first argument names (`every_s`, `in_s`, `cron`, `id`) still read.
#[tokio::test]
async fn cron_add_takes_a_cron_expression_and_the_chips_old_names() {
    let fx = Fixture::new(&[("scheduler.timezone", "UTC")]);
    let s = open(&fx);
    let add = |v: Value| call(&fx, CronAdd(Arc::clone(&s)), v);
    add(json!({"name": "report", "schedule_type": "cron", "message": "report", "cron_expr": "30 8 * * 1-5"}))
        .await
        .unwrap();
    add(json!({"message": "hourly", "every_s": 3600})).await.unwrap();
    add(json!({"message": "soon", "in_s": 600})).await.unwrap();
    let e = add(json!({"message": "both", "every_s": 3600, "in_s": 5})).await.unwrap_err();
    assert!(e.0.contains("exactly one of"), "{e}");
    let list: Value = serde_json::from_str(&call(&fx, CronList(Arc::clone(&s)), json!({})).await.unwrap()).unwrap();
    let jobs = list["jobs"].as_array().unwrap();
    let by = |m: &str| jobs.iter().find(|j| j["action"]["message"] == m).unwrap().clone();
    assert_eq!(by("report")["trigger"], json!({"type": "cron", "expr": "30 8 * * 1-5"}));
    assert_eq!(by("hourly")["trigger"]["every_s"], 3600);
    assert_eq!(by("soon")["delete_after_run"], true);
    let id = by("soon")["id"].as_str().unwrap().to_owned();
    call(&fx, CronRemove(Arc::clone(&s)), json!({"id": id})).await.unwrap();
    assert_eq!(s.list(now_secs()).len(), 2);
}

#[tokio::test]
async fn the_job_count_is_bounded_by_the_setting() {
    let fx = Fixture::new(&[("scheduler.max_jobs", "3")]);
    let s = open(&fx);
    for i in 0..3 {
        let v = json!({"id": format!("j{i}"), "trigger": {"type": "interval", "every_s": 60}, "action": {"type": "cap", "name": "get_current_time"}});
        call(&fx, AddJob(Arc::clone(&s)), v).await.unwrap();
    }
    let v = json!({"id": "j3", "trigger": {"type": "interval", "every_s": 60}, "action": {"type": "cap", "name": "get_current_time"}});
    let e = call(&fx, AddJob(Arc::clone(&s)), v).await.unwrap_err();
    assert!(e.0.contains("scheduler.max_jobs"), "{e}");
    // Replacing one is not adding one.
    let v = json!({"id": "j2", "trigger": {"type": "interval", "every_s": 30}, "action": {"type": "cap", "name": "get_current_time"}});
    call(&fx, AddJob(Arc::clone(&s)), v).await.unwrap();
}

#[tokio::test]
async fn on_event_and_emit_jobs_are_accepted_and_an_on_event_agent_job_needs_no_chat() {
    let fx = Fixture::new(&[]);
    let s = open(&fx);
    let on_event = json!({"id": "greet", "trigger": {"type": "on_event", "event": "message", "match": {"text": "hello"}},
        "action": {"type": "agent", "message": "say hi"}});
    // Outside a conversation: no chat to default to, and none is needed.
    Arc::new(AddJob(Arc::clone(&s))).call_json(fx.ctx(), on_event.to_string()).await.unwrap();
    let emit = json!({"id": "heat", "trigger": {"type": "interval", "every_s": 60},
        "action": {"type": "emit", "event": "kitchen", "data": {"temp": 31}}});
    call(&fx, AddJob(Arc::clone(&s)), emit).await.unwrap();
    assert!(s.listens("message"));
    let got = job(&s, "greet");
    assert!(got["next_fire"].is_null(), "an on_event job has no time of its own: {got}");
    assert!(got["action"].get("channel").is_none(), "{got}");
}

#[tokio::test]
async fn a_job_the_model_makes_belongs_to_its_chat_and_one_without_a_chat_is_refused() {
    let fx = Fixture::new(&[("scheduler.timezone", "UTC")]);
    let s = open(&fx);
    let add = json!({"id": "far", "trigger": {"type": "interval", "every_s": 60},
        "action": {"type": "agent", "message": "hi", "channel": "telegram", "chat_id": "7"}});
    let out = call(&fx, AddJob(Arc::clone(&s)), add.clone()).await.unwrap();
    assert!(out.contains("waits for the owner's approval"), "{out}");
    let j = job(&s, "far");
    assert_eq!(
        (j["made_by"].clone(), j["pending"].clone()),
        (json!({"channel": "telegram", "chat_id": "42"}), json!(true))
    );
    // The author is not the model's to write.
    let mut forged = add.clone();
    forged["made_by"] = json!({"channel": "telegram", "chat_id": "7", "approved": true});
    assert!(call(&fx, AddJob(Arc::clone(&s)), forged).await.is_err());
    s.approve("far", now_secs()).unwrap();
    assert_eq!(job(&s, "far")["pending"], json!(false));
    // A model with no conversation (an MCP client) cannot make one; the owner's call can.
    let mut ctx = fx.ctx();
    ctx.caller = chela_core::cap::Caller::Model;
    let e = Arc::new(AddJob(Arc::clone(&s))).call_json(ctx, add.to_string()).await.unwrap_err();
    assert!(e.0.contains("belong to a conversation"), "{e}");
    let owner = Arc::new(AddJob(Arc::clone(&s))).call_json(fx.ctx(), add.to_string()).await.unwrap();
    assert!(!owner.into_text().contains("approval"));
    assert_eq!(job(&s, "far").get("made_by"), None, "the owner's job");
    assert!(s.approve("far", now_secs()).unwrap_err().to_string().contains("needs no approval"));
}

#[tokio::test]
async fn bad_arguments_are_refused_in_serdes_words_with_unknown_fields_refused() {
    let fx = Fixture::new(&[("scheduler.timezone", "UTC")]);
    let s = open(&fx);
    let why = |r: ToolResult| {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), crate::tools::ToolErrorKind::InvalidArgs, "{e}");
        let rest = e.0.strip_prefix("Invalid arguments for ").unwrap_or_else(|| panic!("{e}")).to_owned();
        rest.split_once(". Expected: {").unwrap_or_else(|| panic!("{e}")).0.to_owned()
    };
    let remove = |args| call(&fx, RemoveJob(Arc::clone(&s)), args);
    assert_eq!(
        why(remove(json!({"id": "tea", "force": true})).await),
        "scheduler_remove_job: unknown field `force`, expected `id`"
    );
    assert_eq!(
        why(remove(json!({"id": 7})).await),
        "scheduler_remove_job: invalid type: integer `7`, expected a string"
    );
    assert_eq!(why(remove(json!({})).await), "scheduler_remove_job: missing field `id`");
    let add = json!({"id": "tea", "trigger": {"type": "once", "at": 1}, "action": {"type": "agent", "message": "Tea?"}, "colour": "red"});
    assert_eq!(
        why(call(&fx, AddJob(Arc::clone(&s)), add).await),
        "scheduler_add_job: unknown field `colour`, expected one of `id`, `name`, `trigger`, `action`, `enabled`, `grace_s`, `delete_after_run`"
    );
    assert!(s.list(now_secs()).is_empty());
}
