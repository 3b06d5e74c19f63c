//! The event router in the real `chela run`: rules of `rules.json` answer chat messages on
//! Telegram and the gateway's WebSocket without the model, run each action type (`send`,
//! `agent`, `cap`, `emit`, `drop`), honour `only_if` and `cooldown_ms`, follow edits of the file
//! while the daemon runs, survive a hand-broken file, and a rule the model writes with
//! `router_add_rule` then runs without it. A `send` to a chat Chela may not write to is refused.
//!
//! The fake LLM counts every request: "without the model" is asserted as "no request".

use std::process::Child;
use std::time::Duration;

use chela_testkit::telegram::{FakeTelegram, Sent};
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::gateway::Running;
use crate::telegram::{OWNER, TOKEN};
use crate::{Capture, Out, Provider, Ws, wait_for};

const WAIT: Duration = Duration::from_secs(20);
/// A second user allowed to talk, for the `only_if` guard on the sender.
const BOSS: i64 = 43;

/// A workspace talking to `llm` and to `tg`, where `allowed` may talk, with the router's
/// `info` lines on stderr.
fn ws_for(llm: &FakeLlm, tg: &FakeTelegram, allowed: &[i64]) -> Ws {
    let allow: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
    let mut ws = Ws::for_llm(
        Provider::Anthropic,
        llm,
        &format!(
            "[channels.telegram]\ntoken = \"{TOKEN}\"\napi_base = \"{}\"\nallow_from = [{}]\n",
            tg.base_url(),
            allow.join(", ")
        ),
    );
    ws.set_env("CHELA_LOG", "info");
    ws
}

fn write_rules(ws: &Ws, rules: &Value) {
    std::fs::write(ws.path().join("rules.json"), serde_json::to_string_pretty(rules).unwrap()).unwrap();
}

/// `chela run` with Telegram, its stderr read as it comes; killed if the test panics.
struct Daemon {
    child: Option<Child>,
    stderr: Capture,
}

impl Daemon {
    /// Starts `chela run` and waits until it polls Telegram.
    fn start(ws: &Ws, tg: &FakeTelegram) -> Daemon {
        let polls = tg.calls_to("getUpdates").len();
        let mut child = ws.cmd(&["run"]).spawn().unwrap();
        let stderr = Capture::start(child.stderr.take());
        let seen = tg.wait_calls("getUpdates", polls + 1, WAIT);
        assert!(seen.len() > polls, "chela run never polled Telegram:\n{}", stderr.now());
        Daemon { child: Some(child), stderr }
    }

    fn log(&self) -> String {
        self.stderr.now()
    }

    /// Waits until `needle` appears `times` times on stderr.
    #[track_caller]
    fn wait_log(&self, needle: &str, times: usize) {
        wait_for(&format!("{times} x {needle:?} on stderr"), WAIT, || self.log().matches(needle).count() >= times);
    }

    /// SIGTERM, and what the daemon said.
    fn stop(mut self) -> Out {
        let mut out = crate::telegram::stop(self.child.take().unwrap());
        out.stderr = std::mem::replace(&mut self.stderr, Capture::start(None::<std::fs::File>)).finish();
        out
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The texts sent to `chat`, in order.
fn texts_to(sent: &[Sent], chat: i64) -> Vec<String> {
    sent.iter().filter(|s| s.chat_id == chat).map(|s| s.text.clone()).collect()
}

/// Pushes `text` from `user` in their private chat and waits until that chat has `total`
/// messages from Chela; those messages.
#[track_caller]
fn say(tg: &FakeTelegram, user: i64, text: &str, total: usize) -> Vec<String> {
    tg.push_text(user, user, text);
    let sent = tg.wait_sent(WAIT, |s| texts_to(s, user).len() >= total);
    let to = texts_to(&sent, user);
    assert!(to.len() >= total, "after {text:?}, chat {user} got only {to:?}");
    to
}

#[test]
fn ping_is_answered_pong_by_a_rule_and_the_model_is_never_asked() {
    let llm = FakeLlm::start(vec![Step::text("the model's answer to the note")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(&llm, &tg, &[OWNER]);
    write_rules(
        &ws,
        &json!({"rules": [
            {"id": "ping", "match": {"type": "message", "text": "ping"}, "consume_on_match": true,
             "actions": [{"type": "send", "text": "pong"}]},
            // Not consuming: the rule answers and the message still reaches the model.
            {"id": "note", "match": {"type": "message", "text": {"prefix": "note"}},
             "actions": [{"type": "send", "text": "noted"}]}
        ]}),
    );
    let d = Daemon::start(&ws, &tg);
    assert_eq!(say(&tg, OWNER, "ping", 1), ["pong"]);
    assert!(llm.requests().is_empty(), "the model was asked about ping");
    assert!(!ws.path().join("sessions/telegram_42.jsonl").exists(), "a consumed message ran a turn");

    let to = say(&tg, OWNER, "note: buy milk", 3);
    let out = d.stop();
    out.expect_ok();
    assert_eq!(to.len(), 3, "{to:?}\n{}", out.stderr);
    assert_eq!(to[0], "pong");
    // The rule's send and the turn's answer race; both arrive.
    let mut rest = to[1..].to_vec();
    rest.sort();
    assert_eq!(rest, ["noted", "the model's answer to the note"], "{}", out.stderr);
    assert_eq!(llm.requests().len(), 1);
    assert!(crate::text_of(&crate::body(&llm, 0)["messages"][0]).contains("note: buy milk"));
    let session = std::fs::read_to_string(ws.path().join("sessions/telegram_42.jsonl")).unwrap();
    assert!(!session.contains("ping"), "the consumed message is in the session: {session}");
}

#[test]
fn ping_over_the_gateway_websocket_is_answered_pong_without_the_model() {
    let llm = FakeLlm::start(vec![Step::text("hello back")]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
    write_rules(
        &ws,
        &json!({"rules": [{"id": "ping", "match": {"type": "message", "channel": "ws", "text": "ping"},
            "consume_on_match": true, "actions": [{"type": "send", "text": "pong to {{event.chat_id}}"}]}]}),
    );
    let d = Running::start(&ws);
    let got: Vec<Value> = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let stream = tokio::net::TcpStream::connect(d.addr).await.unwrap();
        let (mut c, _) =
            tokio_tungstenite::client_async(format!("ws://{}/ws?token={}", d.addr, crate::GATEWAY_TOKEN), stream)
                .await
                .unwrap();
        let mut got = Vec::new();
        // "ping", then a message no rule takes: its answer is the model's first one only if
        // "ping" used none.
        for text in ["ping", "hello"] {
            let m = json!({"type": "message", "content": text, "chat_id": "e2e"}).to_string();
            c.send(Message::text(m)).await.unwrap();
            loop {
                let m = tokio::time::timeout(WAIT, c.next()).await.expect("an answer in time");
                let Message::Text(t) = m.unwrap().unwrap() else { continue };
                let e: Value = serde_json::from_str(t.as_str()).unwrap();
                if e["type"] == "response" {
                    got.push(e);
                    break;
                }
            }
        }
        got
    });
    let answer = |text: &str| json!({"type": "response", "content": text, "chat_id": "e2e"});
    assert_eq!(got, [answer("pong to e2e"), answer("hello back")], "{}", d.stderr());
    assert_eq!(llm.requests().len(), 1);
    let session = std::fs::read_to_string(ws.path().join("sessions/ws_e2e.jsonl")).unwrap();
    assert!(session.contains("hello") && !session.contains("ping"), "{session}");
}

#[cfg(feature = "files")]
#[test]
fn each_action_type_runs_for_real() {
    let llm =
        FakeLlm::start(vec![Step::text("I will remind you to water the plants."), Step::text("the model's answer")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(&llm, &tg, &[OWNER]);
    std::fs::create_dir(ws.path().join("notes")).unwrap();
    std::fs::write(ws.path().join("notes/status.txt"), "all systems nominal").unwrap();
    let message = |id: &str, text: Value, actions: Value| json!({"id": id, "match": {"type": "message", "text": text}, "consume_on_match": true, "actions": actions});
    write_rules(
        &ws,
        &json!({"rules": [
            message("greet", json!({"prefix": "hello"}),
                json!([{"type": "send", "text": "Hi {{event.sender}} in {{event.channel}}, you said: {{event.text}}"}])),
            message("remind", json!({"prefix": "remind"}),
                json!([{"type": "agent", "message": "Reminder for chat {{event.chat_id}}: {{event.text}}"}])),
            message("status", json!("status"), json!([
                {"type": "cap", "cap": "file_write",
                 "args": {"path": "log/{{event.chat_id}}.txt", "content": "{{event.text}} asked by {{event.sender}}"}},
                {"type": "cap", "cap": "file_read", "args": {"path": "notes/status.txt"}},
                {"type": "send", "text": "Status: {{last.output}}"}
            ])),
            message("alarm", json!({"prefix": "alarm"}), json!([{"type": "emit", "event": "alarm_raised", "text": "{{event.text}}!"}])),
            {"id": "alarm_out", "match": {"type": "alarm_raised", "source": "router"},
             "actions": [{"type": "send", "text": "Alarm from rule {{event.rule}}: {{event.text}}"}]},
            {"id": "hush", "match": {"type": "message", "text": {"contains": "secret"}}, "actions": [{"type": "drop"}]}
        ]}),
    );
    let d = Daemon::start(&ws, &tg);

    // send, with the event's fields filled in.
    assert_eq!(say(&tg, OWNER, "hello there", 1)[0], "Hi 42 in telegram, you said: hello there");
    assert!(llm.requests().is_empty());

    // agent: a turn in the chat with the filled-in message; the answer reaches the chat.
    assert_eq!(say(&tg, OWNER, "remind me to water the plants", 2)[1], "I will remind you to water the plants.");
    let asked = crate::conversation(Provider::Anthropic, &crate::body(&llm, 0));
    assert_eq!(crate::text_of(asked.last().unwrap()), "Reminder for chat 42: remind me to water the plants");

    // cap twice, then send of the last cap's output.
    assert_eq!(say(&tg, OWNER, "status", 3)[2], "Status: all systems nominal");
    assert_eq!(std::fs::read_to_string(ws.path().join("log/42.txt")).unwrap(), "status asked by 42");

    // emit: the raised event fires another rule, in the same chat.
    assert_eq!(say(&tg, OWNER, "alarm in the kitchen", 4)[3], "Alarm from rule alarm: alarm in the kitchen!");

    // drop: nothing is sent and nothing reaches the model; the next message does.
    tg.push_text(OWNER, OWNER, "my secret is 1234");
    let to = say(&tg, OWNER, "anything new?", 5);
    let out = d.stop();
    out.expect_ok();
    assert_eq!(to.len(), 5, "{to:?}");
    assert_eq!(to[4], "the model's answer", "{}", out.stderr);
    assert_eq!(llm.requests().len(), 2, "only the agent action and the last message reached the model");
    let last = String::from_utf8_lossy(&llm.requests()[1].body).into_owned();
    assert!(last.contains("anything new?") && !last.contains("my secret"), "{last}");
    assert!(!last.contains("hello there") && !last.contains("alarm in the kitchen"), "consumed messages ran turns");
    for rule in ["greet", "remind", "status", "alarm", "alarm_out"] {
        assert!(out.stderr.contains(&format!("router rule ran rule={rule}")), "{rule}:\n{}", out.stderr);
    }
}

#[test]
fn only_if_guards_and_cooldowns_decide_in_the_running_daemon() {
    let llm = FakeLlm::start(vec![Step::text("the model on status"), Step::text("the model on ping")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(&llm, &tg, &[OWNER, BOSS]);
    write_rules(
        &ws,
        &json!({"rules": [
            {"id": "boss", "match": {"type": "message", "text": "status?"}, "consume_on_match": true,
             "only_if": [{"field": "sender", "op": "eq", "value": BOSS.to_string()}],
             "actions": [{"type": "send", "text": "All quiet, boss."}]},
            {"id": "ping", "match": {"type": "message", "text": "ping"}, "consume_on_match": true,
             "cooldown_ms": 600_000, "actions": [{"type": "send", "text": "pong"}]}
        ]}),
    );
    let d = Daemon::start(&ws, &tg);
    assert_eq!(say(&tg, BOSS, "status?", 1), ["All quiet, boss."]);
    assert!(llm.requests().is_empty());
    // The guard fails for another sender: the message takes its default path, to the model.
    assert_eq!(say(&tg, OWNER, "status?", 1), ["the model on status"]);
    assert_eq!(say(&tg, OWNER, "ping", 2)[1], "pong");
    // Within the cooldown the rule does not fire, so the model answers.
    let to = say(&tg, OWNER, "ping", 3);
    let out = d.stop();
    out.expect_ok();
    assert_eq!(to, ["the model on status", "pong", "the model on ping"], "{}", out.stderr);
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(texts_to(&tg.sent(), BOSS), ["All quiet, boss."]);
}

#[test]
fn rules_json_edited_while_the_daemon_runs_applies_to_the_next_message() {
    let llm = FakeLlm::start(vec![Step::text("the model, before any rule")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(&llm, &tg, &[OWNER]);
    let d = Daemon::start(&ws, &tg);
    assert_eq!(say(&tg, OWNER, "hot", 1), ["the model, before any rule"]);

    // Written in place, as an editor saving over the file does.
    let rule = |text: &str| {
        json!({"rules": [{"id": "hot", "match": {"type": "message", "text": "hot"}, "consume_on_match": true,
            "actions": [{"type": "send", "text": text}]}]})
    };
    write_rules(&ws, &rule("the new rule answers"));
    d.wait_log("rules.json changed", 1);
    assert_eq!(say(&tg, OWNER, "hot", 2)[1], "the new rule answers");

    // Replaced through a rename, as an atomic writer does.
    let tmp = ws.path().join("rules.json.tmp");
    std::fs::write(&tmp, serde_json::to_string(&rule("edited again")).unwrap()).unwrap();
    std::fs::rename(&tmp, ws.path().join("rules.json")).unwrap();
    d.wait_log("rules.json changed", 2);
    let to = say(&tg, OWNER, "hot", 3);
    let out = d.stop();
    out.expect_ok();
    assert_eq!(to, ["the model, before any rule", "the new rule answers", "edited again"], "{}", out.stderr);
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn a_hand_broken_rules_json_keeps_its_good_rules_and_a_rule_the_model_writes_runs_without_it() {
    let llm = FakeLlm::start(vec![
        // `chela doctor` probes the model once.
        Step::text("probe"),
        Step::tool_call("tools_unlock", json!({"group": "router"})),
        Step::tool_call(
            "router_add_rule",
            json!({"rule": {"id": "ping", "match": {"type": "message", "text": "ping"}, "consume_on_match": true,
                "actions": [{"type": "send", "text": "pong, from the rule you asked for"}]}}),
        ),
        Step::text("Done: I will answer ping with pong."),
    ]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(&llm, &tg, &[OWNER]);
    let broken = "{\"rules\": [\n\
        {\"id\": \"greet\", \"match\": {\"type\": \"message\", \"text\": \"hi\"}, \"consume_on_match\": true, \"actions\": [{\"type\": \"send\", \"text\": \"hello from the rules\"}]},\n\
        {\"id\": \"bad\", \"match\": {\"type\": \"message\"}, \"only_if\": [{\"field\": \"sender\", \"op\": \"gte\", \"value\": 1}], \"actions\": [{\"type\": \"drop\"}]},\n\
        {\"id\": \"worse\", \"actions\": [{\"type\": \"send\", \"text\": \"unclosed {{event.text\"}]}\n\
        ]}\n";
    let path = ws.path().join("rules.json");
    std::fs::write(&path, broken).unwrap();
    let d = Daemon::start(&ws, &tg);
    // Said at load, before the first poll; waited for because stderr is read by another thread.
    d.wait_log("rules.json line 3: rule `bad`: `only_if[0].op`: unknown op `gte`", 1);

    // The good rule runs; the bad ones do not (`bad` would drop every message).
    assert_eq!(say(&tg, OWNER, "hi", 1), ["hello from the rules"]);
    assert!(llm.requests().is_empty());

    let doctor = ws.run(&["doctor"]);
    let warned: Vec<&str> = doctor.stdout.lines().filter(|l| l.contains("rules.json line")).collect();
    assert_eq!(warned.len(), 2, "{}", doctor.stdout);
    assert!(warned[0].starts_with("warn  rules.json line 3: rule `bad`: `only_if[0].op`"), "{}", doctor.stdout);
    assert!(warned[1].starts_with("warn  rules.json line 4: rule `worse`: `actions[0].text`"), "{}", doctor.stdout);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken, "the daemon or doctor rewrote the file");
    assert!(!ws.path().join("rules.json.bak").exists());

    // The model writes a rule: a whole valid file, the broken one kept as it was.
    let to = say(&tg, OWNER, "answer ping with pong from now on", 2);
    assert_eq!(to[1], "Done: I will answer ping with pong.");
    assert_eq!(std::fs::read_to_string(ws.path().join("rules.json.bak")).unwrap(), broken);
    let now: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let ids: Vec<&str> = now["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["greet", "ping"]);
    let asked = llm.requests().len();
    assert_eq!(asked, 4, "the probe and the turn's three calls (unlock, add, answer)");

    // The rule the model wrote runs without it.
    let to = say(&tg, OWNER, "ping", 3);
    let out = d.stop();
    out.expect_ok();
    assert_eq!(to[2], "pong, from the rule you asked for", "{}", out.stderr);
    assert_eq!(llm.requests().len(), asked, "ping reached the model");
    ws.run(&["doctor"]).stdout_has("rules.json: 2 rule(s), all valid");
}

#[test]
fn a_send_to_a_chat_chela_may_not_write_to_is_refused_and_logged() {
    let llm = FakeLlm::start(vec![]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(&llm, &tg, &[OWNER]);
    write_rules(
        &ws,
        &json!({"rules": [
            {"id": "copy", "match": {"type": "message", "text": {"prefix": "relay"}},
             "actions": [{"type": "send", "chat_id": "{{event.chat_id}}", "text": "relaying"}]},
            {"id": "elsewhere", "match": {"type": "message", "text": {"prefix": "relay"}},
             "actions": [{"type": "send", "channel": "feishu", "chat_id": "oc_1", "text": "{{event.text}}"}]},
            {"id": "relay", "match": {"type": "message", "text": {"prefix": "relay"}}, "consume_on_match": true,
             "actions": [{"type": "send", "channel": "telegram", "chat_id": "999", "text": "{{event.text}}"},
                         {"type": "send", "text": "relayed"}]},
            {"id": "after", "match": {"type": "message", "text": {"prefix": "relay"}},
             "actions": [{"type": "send", "text": "after the consuming rule"}]}
        ]}),
    );
    let d = Daemon::start(&ws, &tg);
    assert_eq!(say(&tg, OWNER, "relay the launch codes", 1), ["relaying"]);
    d.wait_log("router rule stopped", 2);
    let out = d.stop();
    out.expect_ok();
    let stopped: Vec<&str> = out.stderr.lines().filter(|l| l.contains("router rule stopped")).collect();
    assert_eq!(stopped.len(), 2, "{}", out.stderr);
    assert!(stopped[0].contains("the feishu channel is not running") && stopped[0].contains("rule=elsewhere"));
    assert!(
        stopped[1].contains("telegram/999 is not a chat allowed to talk to Chela") && stopped[1].contains("rule=relay"),
        "{}",
        out.stderr
    );
    // The refusal ends the rule: its second send did not run, and `consume_on_match` kept the
    // last rule from firing at all.
    let calls = tg.calls_to("sendMessage");
    assert!(calls.iter().all(|c| c.params["chat_id"].to_string().trim_matches('"') == "42"), "{calls:?}");
    assert_eq!(texts_to(&tg.sent(), OWNER), ["relaying"]);
    assert!(!out.stderr.contains("rule=after"), "{}", out.stderr);
    assert!(llm.requests().is_empty());
}
