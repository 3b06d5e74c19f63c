//! The session owner against the scripted fake LLM over 127.0.0.1, with real files.

use std::sync::Arc;
use std::time::Duration;

use chela_core::agent::{ToolCall, ToolResult};
use chela_core::cap::Caller;
use chela_proto::chat::{Message, Role};
use chela_testkit::{FakeLlm, Step};
use serde_json::json;
use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedReceiver;

use super::*;
use crate::fake_app::{self, FakeApp, Wire};
use crate::tools::testing::fake;
use crate::turn::{Cancel, Observer};

/// Shows nothing.
struct Quiet;

impl Observer for Quiet {
    fn text(&mut self, _: &str) {}
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
}

struct Setup {
    _dir: tempfile::TempDir,
    llm: FakeLlm,
    app: Arc<App>,
}

fn setup(script: Vec<Step>, overrides: &[(&str, &str)]) -> Setup {
    let FakeApp { dir, llm, app } = fake_app::start(Wire::Anthropic, script, overrides);
    Setup { _dir: dir, llm, app }
}

/// Registers the gate tool at runtime; returns what tells when it started and what opens it.
fn add_gate(app: &App) -> (UnboundedReceiver<()>, Arc<Notify>) {
    let (started, started_rx) = tokio::sync::mpsc::unbounded_channel();
    let open = Arc::new(Notify::new());
    app.base.tools.toolbox.register(fake::group("test", fake::Gate { started, open: open.clone() })).unwrap();
    (started_rx, open)
}

fn request(chat: &str, text: &str) -> TurnRequest {
    TurnRequest {
        channel: "test".into(),
        chat_id: chat.into(),
        user: Message::user_text(text),
        scope: Vec::new(),
        caller: Caller::Manual,
        depth: 0,
        cancel: Cancel::default(),
        observer: Box::new(Quiet),
        client: None,
    }
}

fn answer(end: TurnEnd) -> String {
    match end {
        TurnEnd::Done(o) => o.text,
        TurnEnd::Failed(e) => panic!("the turn failed: {e}"),
    }
}

/// (role, text) of each message in the session file of `chat`.
fn saved(app: &App, chat: &str) -> Vec<(Role, String)> {
    let text = std::fs::read_to_string(app.base.ws.session_path("test", chat)).unwrap();
    chela_core::session::parse(&text).messages.iter().map(|m| (m.role, m.text())).collect()
}

/// The tool names in request `i` to the model.
fn tools_sent(llm: &FakeLlm, i: usize) -> Vec<String> {
    let body = llm.requests()[i].json.clone().unwrap();
    body["tools"].as_array().into_iter().flatten().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// Bounds a wait that must end, so a broken owner fails the test instead of hanging it.
async fn soon<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f).await.expect("did not finish in time")
}

#[tokio::test]
async fn turns_to_one_chat_run_in_order_and_are_saved_in_order() {
    let s = setup(vec![Step::text("one"), Step::text("two")], &[]);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let first = hub.submit(request("a", "first")).unwrap();
    let second = hub.submit(request("a", "second")).unwrap();
    let (first, second) = tokio::join!(first.finish(), second.finish());
    assert_eq!(answer(first.unwrap()), "one");
    assert_eq!(answer(second.unwrap()), "two");
    let expected = [(Role::User, "first"), (Role::Assistant, "one"), (Role::User, "second"), (Role::Assistant, "two")];
    let expected: Vec<(Role, String)> = expected.iter().map(|(r, t)| (*r, (*t).to_owned())).collect();
    assert_eq!(saved(&s.app, "a"), expected);
    // The second turn saw the first: the owner kept the history between them.
    let body = s.llm.requests()[1].json.clone().unwrap().to_string();
    assert!(body.contains("first") && body.contains("one"), "{body}");
}

#[tokio::test]
async fn chats_run_at_the_same_time_and_groups_added_at_runtime_are_offered_and_callable() {
    let s = setup(vec![Step::tool_call("gate", json!({})), Step::text("b done"), Step::text("a done")], &[]);
    let (mut started, open) = add_gate(&s.app);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let a = hub.submit(request("a", "wait at the gate")).unwrap();
    soon(started.recv()).await.unwrap();
    // Chat a is stuck in its tool; chat b is answered meanwhile.
    let b = hub.submit(request("b", "hello")).unwrap();
    assert_eq!(answer(soon(b.finish()).await.unwrap()), "b done");
    open.notify_one();
    assert_eq!(answer(soon(a.finish()).await.unwrap()), "a done");
    assert!(tools_sent(&s.llm, 0).contains(&"gate".to_owned()));
    let after_tool = s.llm.requests()[2].json.clone().unwrap().to_string();
    assert!(after_tool.contains("opened"), "the runtime tool ran and its result went back: {after_tool}");
    assert_eq!(hub.live(), 2);
}

#[tokio::test]
async fn full_inboxes_and_too_many_chats_are_refused_clearly() {
    let limits = [("sessions.max_waiting", "1"), ("sessions.max_live", "1")];
    let s = setup(vec![Step::tool_call("gate", json!({})), Step::text("1"), Step::text("2")], &limits);
    let (mut started, open) = add_gate(&s.app);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let running = hub.submit(request("a", "one")).unwrap();
    soon(started.recv()).await.unwrap();
    let waiting = hub.submit(request("a", "two")).unwrap();
    let e = hub.submit(request("a", "three")).err().unwrap();
    assert_eq!(e, HubError::Busy { channel: "test".into(), chat: "a".into(), waiting: 1 });
    assert!(e.to_string().contains("test/a is busy") && e.to_string().contains("sessions.max_waiting"), "{e}");
    let e = hub.submit(request("b", "hi")).err().unwrap();
    assert!(matches!(e, HubError::Full { live: 1 }), "{e}");
    open.notify_one();
    assert_eq!(answer(soon(running.finish()).await.unwrap()), "1");
    assert_eq!(answer(soon(waiting.finish()).await.unwrap()), "2");
}

#[cfg(feature = "web")]
#[tokio::test]
async fn the_request_scope_decides_which_groups_the_model_sees() {
    let s = setup(vec![Step::text("with"), Step::text("without")], &[("caps.hidden", "web")]);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let mut unlocked = request("a", "x");
    unlocked.scope = vec!["web".into()];
    answer(soon(hub.submit(unlocked).unwrap().finish()).await.unwrap());
    answer(soon(hub.submit(request("a", "y")).unwrap().finish()).await.unwrap());
    assert!(tools_sent(&s.llm, 0).contains(&"web_search".to_owned()));
    assert!(!tools_sent(&s.llm, 1).contains(&"web_search".to_owned()));
}

#[tokio::test]
async fn a_cancelled_turn_ends_and_the_chat_goes_on() {
    let s = setup(vec![Step::tool_call("gate", json!({})), Step::text("after")], &[]);
    let (mut started, _open) = add_gate(&s.app);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let req = request("a", "wait");
    let cancel = req.cancel.clone();
    let pending = hub.submit(req).unwrap();
    soon(started.recv()).await.unwrap();
    cancel.cancel();
    match soon(pending.finish()).await.unwrap() {
        TurnEnd::Done(o) => assert!(o.cancelled),
        TurnEnd::Failed(e) => panic!("{e}"),
    }
    assert_eq!(answer(soon(hub.submit(request("a", "next")).unwrap().finish()).await.unwrap()), "after");
}

#[tokio::test]
async fn restart_archives_and_forgets_the_history_in_memory() {
    let s = setup(vec![Step::text("one"), Step::text("two")], &[]);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    answer(soon(hub.submit(request("a", "remember me")).unwrap().finish()).await.unwrap());
    soon(hub.restart("test", "a").unwrap().finish()).await.unwrap();
    answer(soon(hub.submit(request("a", "fresh")).unwrap().finish()).await.unwrap());
    let body = s.llm.requests()[1].json.clone().unwrap().to_string();
    assert!(!body.contains("remember me"), "{body}");
    assert_eq!(saved(&s.app, "a")[0].1, "fresh");
}

#[tokio::test(start_paused = true)]
async fn quiet_owners_leave_and_come_back_when_needed() {
    let s = setup(vec![], &[]);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    hub.restart("test", "a").unwrap().finish().await.unwrap();
    assert_eq!(hub.live(), 1);
    tokio::time::sleep(Duration::from_secs(601)).await;
    assert_eq!(hub.live(), 0, "the owner left after ten quiet minutes");
    hub.restart("test", "a").unwrap().finish().await.unwrap();
    assert_eq!(hub.live(), 1);
}

/// A second app on the same workspace, as another `chela` process has.
fn other_process(app: &App) -> Arc<App> {
    let ws = Workspace::locate(Some(app.base.ws.root().to_path_buf())).unwrap();
    Arc::new(App::load(ws).unwrap())
}

/// The texts of the messages request `i` sent to the model, as the people and the model said
/// them: the turn's context in front of the newest one is taken off (it must be there, and only
/// there).
fn sent_texts(llm: &FakeLlm, i: usize) -> Vec<String> {
    let body = llm.requests()[i].json.clone().unwrap();
    let text = |m: &serde_json::Value| match &m["content"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    };
    let mut texts: Vec<String> = body["messages"].as_array().unwrap().iter().map(text).collect();
    let newest = texts.pop().unwrap();
    assert!(texts.iter().all(|t| !t.contains("<turn_context>")), "{texts:?}");
    let (_, said) = newest.split_once("</turn_context>\n\n").unwrap_or_else(|| panic!("no context: {newest}"));
    texts.push(said.to_owned());
    texts
}

#[tokio::test]
async fn an_owner_reads_back_the_turns_another_process_added_to_its_session() {
    let s = setup(vec![Step::text("one"), Step::text("two"), Step::text("three")], &[]);
    let here = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let other = other_process(&s.app);
    let there = SessionHub::new(other.clone(), HubLimits::from_config(&other.base.cfg));
    answer(soon(here.submit(request("a", "first")).unwrap().finish()).await.unwrap());
    answer(soon(there.submit(request("a", "second")).unwrap().finish()).await.unwrap());
    answer(soon(here.submit(request("a", "third")).unwrap().finish()).await.unwrap());
    assert_eq!(sent_texts(&s.llm, 2), ["first", "one", "second", "two", "third"], "the other process's turn is seen");
    let all: Vec<String> = saved(&s.app, "a").into_iter().map(|(_, t)| t).collect();
    assert_eq!(all, ["first", "one", "second", "two", "third", "three"]);
}

#[tokio::test]
async fn a_turn_waits_for_another_process_turn_in_the_same_session_and_starts_from_it_real_time() {
    let s = setup(vec![Step::tool_call("gate", json!({})), Step::text("a done"), Step::text("b done")], &[]);
    let (mut started, open) = add_gate(&s.app);
    let here = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let other = other_process(&s.app);
    let there = SessionHub::new(other.clone(), HubLimits::from_config(&other.base.cfg));
    let a = here.submit(request("a", "wait at the gate")).unwrap();
    soon(started.recv()).await.unwrap();
    let b = there.submit(request("a", "meanwhile")).unwrap();
    // Real time on purpose: without the lock, this is when the other turn would reach the model
    // (and take the answer meant for the gated turn), so the test could fail.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.llm.requests().len(), 1, "the other process waits for the turn in progress");
    open.notify_one();
    assert_eq!(answer(soon(a.finish()).await.unwrap()), "a done");
    assert_eq!(answer(soon(b.finish()).await.unwrap()), "b done");
    let b_saw = sent_texts(&s.llm, 2);
    assert_eq!(b_saw.first().map(String::as_str), Some("wait at the gate"), "{b_saw:?}");
    assert_eq!(b_saw.last().map(String::as_str), Some("meanwhile"));
    assert!(b_saw.contains(&"a done".to_owned()), "the waiting turn starts from the whole other turn: {b_saw:?}");
    let text = std::fs::read_to_string(s.app.base.ws.session_path("test", "a")).unwrap();
    let parsed = chela_core::session::parse(&text);
    assert_eq!(parsed.skipped_lines, 0, "well-formed: {text}");
    let roles: Vec<Role> = parsed.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles.first(), Some(&Role::User));
    assert_eq!(parsed.messages.last().unwrap().text(), "b done");
    let texts: Vec<String> = parsed.messages.iter().map(Message::text).filter(|t| !t.is_empty()).collect();
    assert_eq!(texts, ["wait at the gate", "a done", "meanwhile", "b done"], "whole turns, in order: {text}");
}

#[tokio::test]
async fn a_turn_waiting_for_the_lock_can_be_cancelled() {
    let s = setup(vec![], &[]);
    let path = s.app.base.ws.session_path("test", "a");
    let _held = shared_file::lock_turn(&path, &Cancel::default()).await.unwrap();
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let req = request("a", "blocked");
    let cancel = req.cancel.clone();
    let pending = hub.submit(req).unwrap();
    cancel.cancel();
    let e = soon(pending.finish()).await.err().expect("refused");
    assert!(e.to_string().contains("waiting for another Chela process"), "{e}");
    assert!(s.llm.requests().is_empty());
}

#[tokio::test]
async fn a_full_hub_closes_the_least_recently_used_quiet_conversation_and_it_comes_back_from_its_file() {
    let script = ["a one", "b one", "c one", "a two"].map(Step::text).to_vec();
    let s = setup(script, &[("sessions.max_live", "2")]);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    answer(soon(hub.submit(request("a", "remember alpha")).unwrap().finish()).await.unwrap());
    answer(soon(hub.submit(request("b", "hi")).unwrap().finish()).await.unwrap());
    // Both slots are taken by quiet conversations: the new one takes a's place (used least recently).
    let c = hub.submit(request("c", "hi")).expect("a new conversation is not refused while quiet ones hold the slots");
    assert_eq!(answer(soon(c.finish()).await.unwrap()), "c one");
    assert!(!hub.is_live("a") && hub.is_live("b") && hub.is_live("c"));
    assert_eq!(hub.live(), 2);
    // a speaks again: its owner reads the whole conversation back from sessions/.
    assert_eq!(answer(soon(hub.submit(request("a", "and now?")).unwrap().finish()).await.unwrap()), "a two");
    assert_eq!(sent_texts(&s.llm, 3), ["remember alpha", "a one", "and now?"]);
    assert!(!hub.is_live("b"), "b was the least recently used then");
}

#[tokio::test]
async fn a_conversation_with_a_turn_in_flight_is_never_closed_to_make_room() {
    let script =
        vec![Step::tool_call("gate", json!({})), Step::text("b done"), Step::text("c done"), Step::text("a done")];
    let s = setup(script, &[("sessions.max_live", "2")]);
    let (mut started, open) = add_gate(&s.app);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    let a = hub.submit(request("a", "wait at the gate")).unwrap();
    soon(started.recv()).await.unwrap();
    answer(soon(hub.submit(request("b", "hi")).unwrap().finish()).await.unwrap());
    // a was used first, but it is mid-turn: b goes instead.
    assert_eq!(answer(soon(hub.submit(request("c", "hi")).unwrap().finish()).await.unwrap()), "c done");
    assert!(hub.is_live("a") && !hub.is_live("b"));
    open.notify_one();
    assert_eq!(answer(soon(a.finish()).await.unwrap()), "a done");
}

#[tokio::test]
async fn closing_the_hub_ends_every_owner_and_waits_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    // Owners that would stay ten minutes with nothing to do.
    let limits = HubLimits { inbox: 4, max_live: 4, idle: Duration::from_secs(600), files: FileWork::Inline };
    let hub = SessionHub::unconfigured(Arc::new(ws), limits, "no model yet".into());
    for chat in ["a", "b"] {
        let end = hub.submit(request(chat, "hi")).unwrap().finish().await;
        assert!(end.is_err_and(|e| e.to_string().contains("no model yet")));
    }
    assert_eq!(hub.live(), 2);
    assert_eq!(Arc::strong_count(&hub.shared), 3, "each idle owner holds the hub's state");
    hub.close_all().await;
    assert_eq!(hub.live(), 0);
    assert_eq!(Arc::strong_count(&hub.shared), 1, "no owner is left once close returned");
}

/// The bytes of an Anthropic request body up to the end of its stable system block: tools and
/// the stable system prompt, what the prompt cache reuses from turn to turn.
fn cached_prefix(body: &[u8]) -> String {
    let body = std::str::from_utf8(body).unwrap();
    let system = body.find("\"system\":[").unwrap_or_else(|| panic!("no system blocks: {body:.300}"));
    let mark = "\"cache_control\":{\"type\":\"ephemeral\"}}";
    let end = system + body[system..].find(mark).unwrap() + mark.len();
    body[..end].to_owned()
}

/// A list of messages or tools as the prompt cache reads it: without `cache_control`, and
/// with a message's one-text shorthand written as the list of blocks it stands for.
fn as_read(list: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut out = list.as_array().unwrap().clone();
    for item in &mut out {
        let obj = item.as_object_mut().unwrap();
        obj.remove("cache_control");
        if let Some(text) = obj.get("content").and_then(|c| c.as_str()).map(str::to_owned) {
            obj.insert("content".into(), json!([{"type": "text", "text": text}]));
        }
        if let Some(blocks) = obj.get_mut("content").and_then(|c| c.as_array_mut()) {
            for b in blocks {
                b.as_object_mut().unwrap().remove("cache_control");
            }
        }
    }
    out
}

#[tokio::test]
async fn five_turns_keep_the_cached_prefix_byte_for_byte_until_a_skill_unlocks_tools() {
    let s = setup(vec![], &[]);
    // The same workspace and fake, on a clock the test moves: the time is in the prompt.
    let clock = crate::clock::Clock::manual(1_800_000_000_000);
    let app = Arc::new(
        App::from_base(crate::app::Base::load_with((*s.app.base.ws).clone(), clock.clone()).unwrap()).unwrap(),
    );
    for step in [
        Step::text("hello"),
        Step::tool_call("memory_store", json!({"content": "Ada likes green tea"})),
        Step::text("noted"),
        Step::tool_call("get_current_time", json!({})),
        Step::text("it is now"),
        Step::tool_call("skill_activate", json!({"name": "chela_settings"})),
        Step::text("settings ready"),
        Step::text("bye"),
    ] {
        s.llm.push(step);
    }
    let hub = SessionHub::new(app.clone(), HubLimits::from_config(&app.base.cfg));
    for text in ["hi", "remember: I like green tea", "what time is it?", "open the settings", "thanks"] {
        answer(soon(hub.submit(request("a", text)).unwrap().finish()).await.unwrap());
        clock.advance(Duration::from_secs(61));
    }
    let reqs = s.llm.requests();
    assert_eq!(reqs.len(), 8);
    let prefixes: Vec<String> = reqs.iter().map(|r| cached_prefix(&r.body)).collect();
    // Requests 0-5: before the skill's tools are unlocked (the call that activates it is in #5).
    for (i, p) in prefixes.iter().enumerate().take(6).skip(1) {
        assert_eq!(p, &prefixes[0], "request {i}: memory writes, tool calls and the clock leave the prefix alone");
    }
    // The documented change: the skill unlocked a group, so the tool list grew and the prefix
    // is a new one, which then stays the same.
    assert_ne!(prefixes[6], prefixes[0]);
    assert!(
        tools_sent(&s.llm, 6).iter().any(|t| t == "config_show")
            && !tools_sent(&s.llm, 0).contains(&"config_show".into())
    );
    assert_eq!(prefixes[7], prefixes[6]);
    // The system prompt's stable text itself never changed, and until a skill is active not a
    // byte of the whole system prompt does: what changes per turn travels with the message.
    let round = |i: usize| s.llm.requests()[i].json.clone().unwrap();
    let stable = |i: usize| round(i)["system"][0]["text"].clone();
    assert_eq!(stable(0), stable(7));
    for i in 1..6 {
        assert_eq!(round(i)["system"], round(0)["system"], "request {i}");
    }
    let newest = |i: usize| round(i)["messages"].as_array().unwrap().last().unwrap().clone();
    // The text of the turn's person's message, where the context travels in front of theirs.
    let context = |i: usize| {
        let texts: Vec<String> = as_read(&round(i)["messages"])
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"][0]["text"].as_str().map(str::to_owned))
            .collect();
        texts.into_iter().rfind(|t| t.starts_with("<turn_context>\n")).unwrap()
    };
    assert!(
        !context(2).contains("Ada likes green tea") && context(3).contains("[m1] Ada likes green tea"),
        "the next turn has the entry, in the turn's context"
    );
    assert!(context(0).starts_with("<turn_context>\n") && context(0).contains("Channel: test."), "{}", context(0));
    assert_ne!(context(0), context(7), "the time moved");
    assert!(newest(7).to_string().contains("<turn_context>") && newest(7).to_string().contains("thanks"));
    // The history is what was said, without any turn's context: sent once, never stored.
    let older = round(7)["messages"].as_array().unwrap().clone();
    for m in &older[..older.len() - 1] {
        assert!(!m.to_string().contains("turn_context"), "{m}");
    }
    assert_eq!(older[0], json!({"role": "user", "content": "hi"}));
    // So each turn's first request starts with the previous one's, through the last message
    // before its own person's message: tools, system and history are read from the cache
    // across turns. Compared as the API reads them: a breakpoint, and the one-text shorthand a
    // mark turns into a list of blocks, are not content.
    let firsts = [0, 1, 3, 5, 7];
    for pair in firsts.windows(2) {
        let (f, g) = (round(pair[0]), round(pair[1]));
        let upto = f["messages"].as_array().unwrap().len() - 1;
        let (fm, gm) = (as_read(&f["messages"]), as_read(&g["messages"]));
        assert_eq!(fm[..upto], gm[..upto], "requests {pair:?}: the history before the turn");
        if pair[1] != 7 {
            // The documented change: the skill activated in request 5 unlocked tools for request 7.
            assert_eq!(as_read(&f["tools"]), as_read(&g["tools"]), "requests {pair:?}: the tools");
            assert_eq!(f["system"], g["system"], "requests {pair:?}: the system prompt");
        }
    }
    // The last tool, the stable system block and the history before the turn are marked; the
    // history's mark stays on the same message through the turn's tool round.
    assert_eq!(round(4).to_string().matches("cache_control").count(), 3, "{}", round(4));
    let (a, b) = (round(3)["messages"].as_array().unwrap().clone(), round(4)["messages"].as_array().unwrap().clone());
    assert_eq!(a[..], b[..a.len()], "the tool round's call extends the turn's first, marks and all");
}

#[tokio::test]
async fn every_turn_appends_its_usage_to_the_log() {
    let s = setup(vec![Step::tool_call("get_current_time", json!({})), Step::text("noon"), Step::text("ok")], &[]);
    let hub = SessionHub::new(s.app.clone(), HubLimits::from_config(&s.app.base.cfg));
    for text in ["time?", "thanks"] {
        answer(soon(hub.submit(request("u", text)).unwrap().finish()).await.unwrap());
    }
    let (records, skipped) = crate::usage::read(&s.app.base.ws).unwrap();
    assert_eq!((records.len(), skipped), (2, 0), "{records:?}");
    let r = &records[0];
    assert_eq!((r.channel.as_str(), r.chat.as_str()), ("test", "u"));
    assert_eq!(r.model, s.app.provider.model);
    // The first turn made two model calls; the record sums what the fake reported for both.
    let reported: u64 = s.llm.requests()[..2].iter().map(|q| q.body.len() as u64).sum();
    assert!(r.input > 0 && r.output > 0 && r.input <= reported, "{r:?}");
    assert!(records[1].input > 0);
}
