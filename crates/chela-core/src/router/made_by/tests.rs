use alloc::string::ToString;
use serde_json::json;

use super::*;
use crate::router::{Event, Router};
use crate::schedule::Job;

fn message(channel: &str, chat: &str, text: &str) -> Event {
    Event::new("message").unwrap().with_chat(channel, chat).unwrap().with_text(text).unwrap()
}

fn router(rules: serde_json::Value) -> Router {
    let loaded = Router::load(&json!({ "rules": rules }).to_string());
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    loaded.router
}

const BY_A: &str = r#"{"channel": "telegram", "chat_id": "a", "groups": ["board"]}"#;

#[test]
fn a_model_made_rule_sees_and_answers_only_its_own_chat_until_approved() {
    let by_a: serde_json::Value = serde_json::from_str(BY_A).unwrap();
    let mut r = router(json!([
        {"id": "echo", "match": {"type": "message"}, "consume_on_match": true,
         "actions": [{"type": "send", "text": "echo {{event.text}}"}], "made_by": by_a},
        {"id": "owner", "match": {"type": "message", "text": "x"}, "actions": [{"type": "send", "text": "o"}]}
    ]));
    let own = r.handle_event(&message("telegram", "a", "hi"), 0);
    assert_eq!(own.fired.len(), 1);
    assert!(own.consumed);
    assert_eq!(own.fired[0].made_by.as_ref().map(MadeBy::chat).as_deref(), Some("telegram/a"));
    // Another person's message is not the rule's to read, nor to consume.
    for (channel, chat) in [("telegram", "b"), ("feishu", "a"), ("", "")] {
        let other = r.handle_event(&message(channel, chat, "hi"), 0);
        assert!(other.fired.is_empty() && !other.consumed && other.waiting.is_empty(), "{other:?}");
    }
    // The owner's rules are as they were.
    let x = r.handle_event(&message("telegram", "b", "x"), 0);
    assert_eq!((x.fired.len(), x.fired[0].made_by.clone()), (1, None));
    r.approve_rule("echo").unwrap();
    assert_eq!(r.handle_event(&message("telegram", "b", "hi"), 0).fired.len(), 1, "approved: as written");
    assert!(r.approve_rule("owner").unwrap_err().contains("the owner's"));
    assert!(r.approve_rule("nope").is_err());
    // Approval is written back with the rule.
    assert!(r.to_json().contains("\"approved\": true"));
}

#[test]
fn a_model_made_rule_that_reaches_another_chat_waits_and_consumes_nothing() {
    let by_a: serde_json::Value = serde_json::from_str(BY_A).unwrap();
    let send = |channel: &str, chat: &str| {
        json!({"id": "s", "match": {"type": "message"}, "consume_on_match": true, "made_by": by_a,
               "actions": [{"type": "agent", "channel": channel, "chat_id": chat, "message": "m"}]})
    };
    // Its own chat named in full, or by a literal: no approval needed.
    let mut own = router(json!([send("telegram", "a")]));
    assert!(!own.rules().next().unwrap().pending);
    assert_eq!(own.handle_event(&message("telegram", "a", "m"), 0).fired.len(), 1);
    for (channel, chat) in [("telegram", "b"), ("feishu", "a"), ("telegram", "{{event.chat_id}}")] {
        let mut r = router(json!([send(channel, chat)]));
        assert!(r.rules().next().unwrap().pending, "{channel}/{chat}");
        let plan = r.handle_event(&message("telegram", "a", "m"), 0);
        assert!(plan.fired.is_empty() && !plan.consumed, "{plan:?}");
        assert_eq!(plan.waiting, ["s"]);
        r.approve_rule("s").unwrap();
        assert!(!r.rules().next().unwrap().pending);
        assert_eq!(r.handle_event(&message("telegram", "a", "m"), 0).fired.len(), 1);
    }
}

#[test]
fn a_bad_made_by_costs_its_rule() {
    for bad in [
        json!({"channel": "", "chat_id": "a"}),
        json!({"channel": "t"}),
        json!("owner"),
        json!({"channel": "t", "chat_id": "a", "root": true}),
    ] {
        let text = json!({"rules": [{"id": "r", "actions": [{"type": "drop"}], "made_by": bad}]}).to_string();
        let loaded = Router::load(&text);
        assert_eq!(loaded.router.len(), 0, "{bad}");
        assert!(loaded.problems[0].message.contains("made_by"), "{:?}", loaded.problems);
    }
}

fn job(action: serde_json::Value, trigger: serde_json::Value, approved: bool) -> Job {
    let mut made_by: serde_json::Value = serde_json::from_str(BY_A).unwrap();
    made_by["approved"] = json!(approved);
    serde_json::from_value(json!({"id": "j", "trigger": trigger, "action": action, "made_by": made_by})).unwrap()
}

#[test]
fn a_model_made_job_waits_when_it_reaches_another_chat_and_sees_only_its_own() {
    let every = json!({"type": "interval", "every_s": 60});
    let agent = |chat: &str| json!({"type": "agent", "message": "m", "channel": "telegram", "chat_id": chat});
    assert!(!job(agent("a"), every.clone(), false).pending());
    assert!(job(agent("b"), every.clone(), false).pending());
    assert!(!job(agent("b"), every.clone(), true).pending());
    let emit = |data: serde_json::Value| json!({"type": "emit", "event": "e", "data": data});
    assert!(!job(emit(json!({"text": "t"})), every.clone(), false).pending());
    assert!(job(emit(json!({"chat_id": "b"})), every.clone(), false).pending());
    assert!(!job(json!({"type": "cap", "name": "x", "args": {}}), every.clone(), false).pending());
    job(agent("b"), every, false).validate().unwrap();

    let on_message = json!({"type": "on_event", "event": "message"});
    let cap = json!({"type": "cap", "name": "x", "args": {}});
    let confined = job(cap.clone(), on_message.clone(), false);
    assert!(confined.fires_on(&message("telegram", "a", "hi")));
    assert!(!confined.fires_on(&message("telegram", "b", "hi")));
    assert!(job(cap, on_message, true).fires_on(&message("telegram", "b", "hi")));
    let mut bad = job(agent("a"), json!({"type": "once", "at": 1}), false);
    bad.made_by.as_mut().unwrap().chat_id = "x".repeat(MAX_CHAT_ID + 1);
    assert!(bad.validate().unwrap_err().to_string().starts_with("made_by"));
}
