//! The daemon's admission, reload and stop against the scripted fake LLM over 127.0.0.1.

use std::time::Duration;

use chela_core::agent::{ToolCall, ToolResult};
use chela_testkit::{FakeLlm, Step};

use super::*;

struct Quiet;

impl Observer for Quiet {
    fn text(&mut self, _: &str) {}
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
}

fn workspace(dir: &tempfile::TempDir, settings: &[(&str, &str)]) -> Workspace {
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    for (k, v) in settings {
        crate::config::set_override(&ws, k, v).unwrap();
    }
    ws
}

fn with_llm(llm: &FakeLlm) -> Vec<(&'static str, String)> {
    vec![
        ("llm.provider", "anthropic".to_owned()),
        ("llm.base_url", llm.anthropic_base_url()),
        ("llm.api_key", "test-key".to_owned()),
        ("llm.max_retries", "0".to_owned()),
    ]
}

fn message(channel: &str, sender: &str, text: &str) -> Incoming {
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

fn refs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test]
async fn only_allowed_senders_reach_the_model_and_nothing_of_the_others_is_kept() {
    let llm = FakeLlm::start(vec![Step::text("hello friend")]);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = with_llm(&llm);
    settings.push(("channels.telegram.allow_from", "42".to_owned()));
    let d = Daemon::load(workspace(&dir, &refs(&settings))).unwrap();

    let stranger = d.submit(message("telegram", "666", "let me in"), Box::new(Quiet));
    assert!(matches!(stranger, Submitted::Drop), "{stranger:?}");
    // A channel nobody configured admits no one.
    assert!(matches!(d.submit(message("feishu", "42", "hi"), Box::new(Quiet)), Submitted::Drop));
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
