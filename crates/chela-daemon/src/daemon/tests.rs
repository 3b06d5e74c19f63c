//! The daemon's admission, reload and stop against the scripted fake LLM over 127.0.0.1.

use std::time::Duration;

use chela_core::agent::{ToolCall, ToolResult};
use chela_testkit::{FakeLlm, Step};

use super::*;

pub(super) struct Quiet;

impl Observer for Quiet {
    fn text(&mut self, _: &str) {}
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
}

pub(super) fn workspace(dir: &tempfile::TempDir, settings: &[(&str, &str)]) -> Workspace {
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    for (k, v) in settings {
        crate::config::set_override(&ws, k, v).unwrap();
    }
    ws
}

pub(super) fn with_llm(llm: &FakeLlm) -> Vec<(&'static str, String)> {
    vec![
        ("llm.provider", "anthropic".to_owned()),
        ("llm.base_url", llm.anthropic_base_url()),
        ("llm.api_key", "test-key".to_owned()),
        ("llm.max_retries", "0".to_owned()),
    ]
}

pub(super) fn message(channel: &str, sender: &str, text: &str) -> Incoming {
    Incoming {
        channel: channel.into(),
        chat_id: format!("{sender}-chat"),
        sender: sender.into(),
        user: Message::user_text(text),
        cancel: Cancel::default(),
    }
}

async fn answer(d: &Daemon, s: Submitted) -> String {
    match s {
        Submitted::Queued(p) => {
            let end = tokio::time::timeout(Duration::from_secs(20), p.finish()).await.expect("answered in time");
            d.reply_text(&end)
        }
        other => panic!("not queued: {other:?}"),
    }
}

pub(super) fn refs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test]
async fn only_allowed_senders_reach_the_model_and_nothing_of_the_others_is_kept() {
    let llm = FakeLlm::start(vec![Step::text("hello friend")]);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = with_llm(&llm);
    settings.push(("channels.telegram.allow_from", "42".to_owned()));
    let d = Daemon::load(workspace(&dir, &refs(&settings))).unwrap();

    // A stranger is not let in: it is offered a pairing code instead (see crate::access).
    let stranger = d.submit(message("telegram", "666", "let me in"), Box::new(Quiet));
    assert!(matches!(&stranger, Submitted::Answer(a) if a.contains("pairing code")), "{stranger:?}");
    // A channel nobody configured admits no one.
    let other = d.submit(message("feishu", "42", "hi"), Box::new(Quiet));
    assert!(matches!(&other, Submitted::Answer(a) if a.contains("pairing code")), "{other:?}");
    assert!(llm.requests().is_empty(), "nothing reached the model");
    assert!(!d.workspace().session_path("telegram", "666-chat").exists(), "nothing was stored");

    let friend = d.submit(message("telegram", "42", "hi"), Box::new(Quiet));
    assert_eq!(answer(&d, friend).await, "hello friend");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn a_star_opens_a_channel_and_the_owner_channels_are_open() {
    let llm = FakeLlm::start(vec![Step::text("one"), Step::text("two")]);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = with_llm(&llm);
    settings.push(("channels.feishu.allow_from", "*".to_owned()));
    let d = Daemon::load(workspace(&dir, &refs(&settings))).unwrap();
    assert_eq!(answer(&d, d.submit(message("feishu", "anyone", "a"), Box::new(Quiet))).await, "one");
    assert_eq!(answer(&d, d.submit(message("ws", "owner", "b"), Box::new(Quiet))).await, "two");
}

#[tokio::test]
async fn without_a_key_the_daemon_starts_and_answers_what_to_set_then_a_set_key_applies_live() {
    let llm = FakeLlm::start(vec![Step::text("configured now")]);
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir, &[("llm.provider", "anthropic")]);
    // The environment may hold a real key; this test is about a workspace without one.
    let d = Daemon::load(ws.clone()).unwrap();
    if d.app().is_ok() {
        return; // ANTHROPIC_API_KEY is set in this environment: nothing to show here.
    }
    let said = answer(&d, d.submit(message("ws", "owner", "hi"), Box::new(Quiet))).await;
    assert!(said.contains("llm.api_key"), "{said}");
    assert!(llm.requests().is_empty());

    for (k, v) in with_llm(&llm) {
        crate::config::set_override(&ws, k, &v).unwrap();
    }
    assert!(d.reload().unwrap(), "the changed file was noticed");
    assert!(d.app().is_ok());
    assert_eq!(answer(&d, d.submit(message("ws", "owner", "hi"), Box::new(Quiet))).await, "configured now");
}

#[tokio::test]
async fn a_model_set_while_running_is_used_by_the_next_turn() {
    let llm = FakeLlm::start(vec![Step::text("a"), Step::text("b")]);
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir, &refs(&with_llm(&llm)));
    let d = Daemon::load(ws.clone()).unwrap();
    answer(&d, d.submit(message("ws", "owner", "1"), Box::new(Quiet))).await;
    crate::config::set_override(&ws, "llm.model", "model-after-set").unwrap();
    assert!(d.reload().unwrap());
    assert!(!d.reload().unwrap(), "nothing changed since");
    answer(&d, d.submit(message("ws", "owner", "2"), Box::new(Quiet))).await;
    let models: Vec<String> =
        llm.requests().iter().map(|r| r.json.as_ref().unwrap()["model"].as_str().unwrap().to_owned()).collect();
    assert_ne!(models[0], "model-after-set");
    assert_eq!(models[1], "model-after-set");
}

#[tokio::test]
async fn a_stopping_daemon_takes_no_new_message_and_cancels_a_running_turn_which_is_still_saved() {
    // The model stalls far longer than the test: only the stop can end this turn.
    let llm = FakeLlm::start(vec![Step::text("late").delay_ms(60_000)]);
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::load(workspace(&dir, &refs(&with_llm(&llm)))).unwrap();
    let running = d.submit(message("ws", "owner", "slow question"), Box::new(Quiet));
    // Wait until the request is at the model.
    for _ in 0..2000 {
        if !llm.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    d.shutdown().trigger();
    let refused = d.submit(message("ws", "owner", "another"), Box::new(Quiet));
    assert!(matches!(&refused, Submitted::Answer(a) if a.contains("stopping")), "{refused:?}");
    d.hub().stop();
    tokio::time::timeout(Duration::from_secs(5), d.hub().drained()).await.expect("drained after the stop");
    assert_eq!(answer(&d, running).await, "(stopped before answering)");
    let saved = std::fs::read_to_string(d.workspace().session_path("ws", "owner-chat")).unwrap();
    let parsed = chela_core::session::parse(&saved);
    assert_eq!(parsed.skipped_lines, 0, "the file is well-formed");
    assert!(parsed.messages.iter().any(|m| m.text() == "slow question"), "the question is kept: {saved}");
}

/// The pairing path end to end through `submit`: a stranger's messages (a flood, then after a
/// deny) reach no model, no tool and no session file; once the owner approves the code from
/// another process's gate, the next message is answered.
#[tokio::test]
async fn nothing_from_an_unpaired_sender_is_stored_or_reaches_the_model_until_approved() {
    let llm = FakeLlm::start(vec![Step::text("welcome")]);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = with_llm(&llm);
    settings.push(("access.rate_per_hour", "5".to_owned()));
    let ws = workspace(&dir, &refs(&settings));
    let d = Daemon::load(ws.clone()).unwrap();

    let first = d.submit(message("telegram", "7", "write a file for me"), Box::new(Quiet));
    let Submitted::Answer(said) = &first else { panic!("{first:?}") };
    let code = said.split("pairing code is ").nth(1).unwrap()[..8].to_owned();
    assert!(said.contains(&format!("chela pairing approve {code}")), "{said}");
    let mut replies = Vec::new();
    for i in 0..20 {
        replies.push(d.submit(message("telegram", "7", &format!("flood {i}")), Box::new(Quiet)));
    }
    assert!(matches!(&replies[0], Submitted::Answer(a) if a.contains(&code)), "the same code: {:?}", replies[0]);
    assert!(matches!(&replies[4], Submitted::Answer(a) if a.contains("faster than I may answer")), "{:?}", replies[4]);
    assert!(replies[5..].iter().all(|r| matches!(r, Submitted::Drop)), "told once, then silence");
    // A second stranger, denied by the owner, is dropped from then on.
    let Submitted::Answer(other) = d.submit(message("telegram", "8", "hi"), Box::new(Quiet)) else { panic!() };
    let other_code = other.split("pairing code is ").nth(1).unwrap()[..8].to_owned();
    crate::access::Gate::open(&ws).unwrap().deny(&other_code, d.clock().unix_secs_u64()).unwrap();
    assert!(matches!(d.submit(message("telegram", "8", "hi again"), Box::new(Quiet)), Submitted::Drop));

    assert!(llm.requests().is_empty(), "nothing reached the model, so no tool ran");
    let sessions: Vec<_> = std::fs::read_dir(ws.sessions_dir()).unwrap().collect();
    assert!(sessions.is_empty(), "nothing was stored: {sessions:?}");

    // The owner approves from another process; the daemon sees it without a restart.
    // Approval does not reset the flood's counter, so the limit is lifted (live) as well.
    crate::access::Gate::open(&ws).unwrap().approve(&code, d.clock().unix_secs_u64()).unwrap();
    assert!(d.gate().list(d.clock().unix_secs_u64()).unwrap().allowed.iter().any(|p| p.sender == "7"));
    crate::config::set_override(&ws, "access.rate_per_hour", "0").unwrap();
    assert!(d.reload().unwrap());
    let friend = d.submit(message("telegram", "7", "hello"), Box::new(Quiet));
    assert_eq!(answer(&d, friend).await, "welcome");
    assert_eq!(llm.requests().len(), 1);
}

#[cfg(all(feature = "web", feature = "files"))]
#[tokio::test]
async fn a_base_url_and_a_capability_switch_set_while_running_apply_to_the_next_turn() {
    let first = FakeLlm::start(vec![Step::text("from the first")]);
    let second = FakeLlm::start(vec![Step::text("from the second")]);
    let dir = tempfile::tempdir().unwrap();
    // web_search is offered only once a search key is set.
    let mut settings = with_llm(&first);
    settings.push(("search.tavily_key", "tvly-test".to_owned()));
    let ws = workspace(&dir, &refs(&settings));
    let d = Daemon::load(ws.clone()).unwrap();
    assert_eq!(answer(&d, d.submit(message("ws", "owner", "1"), Box::new(Quiet))).await, "from the first");
    // What `chela config set llm.base_url … --keep-key` and `chela cap hide web` write, from another process.
    let keep = crate::config::KeyChoice::Keep;
    crate::config::set_overrides(&ws, &[("llm.base_url", &second.anthropic_base_url())], keep).unwrap();
    crate::config::edit_list_override(&ws, chela_core::config::CAPS_HIDDEN, "web", true).unwrap();
    assert!(d.reload().unwrap());
    assert_eq!(answer(&d, d.submit(message("ws", "owner", "2"), Box::new(Quiet))).await, "from the second");
    assert_eq!(first.requests().len(), 1, "the old base URL is no longer used");
    let tools = |llm: &FakeLlm| -> Vec<String> {
        let body = llm.requests()[0].json.clone().unwrap();
        body["tools"].as_array().into_iter().flatten().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    };
    assert!(tools(&first).contains(&"web_search".to_owned()), "offered before");
    // The daemon adds the im group, hidden until the model unlocks it: tools_unlock names it.
    let unlock = first.requests()[0].json.clone().unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tools_unlock")
        .map(|t| t["description"].as_str().unwrap().to_owned())
        .unwrap();
    assert!(unlock.contains("im (send to chats)"), "the daemon adds the im group: {unlock}");
    assert!(!tools(&first).contains(&"im_send_media".to_owned()), "and keeps it out of the first request");
    assert!(!tools(&second).contains(&"web_search".to_owned()), "hidden from the next turn on");
}

#[tokio::test]
async fn a_message_a_router_rule_consumes_gets_no_turn_and_its_plan_is_queued() {
    let llm = FakeLlm::start(vec![Step::text("from the model")]);
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir, &refs(&with_llm(&llm)));
    std::fs::write(
        ws.root().join(crate::router::FILE),
        r#"{"rules": [{"id": "ping", "match": {"type": "message", "text": {"prefix": "ping"}},
           "consume_on_match": true, "actions": [{"type": "send", "text": "pong"}]}]}"#,
    )
    .unwrap();
    let d = Daemon::load(ws).unwrap();
    assert!(matches!(d.submit(message("ws", "owner", "ping"), Box::new(Quiet)), Submitted::Drop));
    let mut queue = d.rules().take_queue().unwrap();
    assert!(matches!(queue.try_recv(), Ok(crate::router::Work::Plan(p)) if p.fired[0].rule == "ping"));
    // The model's only scripted answer goes to the next message: "ping" used no model call.
    assert_eq!(answer(&d, d.submit(message("ws", "owner", "hello"), Box::new(Quiet))).await, "from the model");
    assert!(queue.try_recv().is_err(), "a message no rule matches queues nothing");
}
