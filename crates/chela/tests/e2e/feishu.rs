//! The Feishu channel: the real `chela run` against the fake Feishu open platform of
//! `chela-testkit` (long connection and webhook) and the scripted fake LLM.

use std::process::Child;
use std::time::Duration;

use chela_testkit::feishu::{
    FakeFeishu, FeishuOptions, SERVICE_ID, encrypt, encrypted_event, message_event, webhook_post,
};
use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::{Capture, Provider, Ws, wait_for};

const LIMIT: Duration = Duration::from_secs(20);

/// A running `chela run` with its stderr captured, stopped when dropped.
struct Running {
    child: Child,
    stderr: Capture,
    ws: Ws,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(llm: &FakeLlm, feishu: &FakeFeishu, extra: &str) -> Running {
    start_with(llm, feishu, "allow_from = [\"*\"]", extra)
}

/// `chela run` with the Feishu settings `allow` (the `allow_from` line, or nothing) and `extra`.
fn start_with(llm: &FakeLlm, feishu: &FakeFeishu, allow: &str, extra: &str) -> Running {
    let ws = Ws::for_llm(Provider::Anthropic, llm, "max_retries = 0");
    let config = std::fs::read_to_string(ws.path().join("chela.toml")).unwrap();
    ws.write_config(&format!(
        "{config}\n[channels.feishu]\napp_id = \"cli_test\"\napp_secret = \"secret-test\"\napi_base = \"{}\"\n{allow}\n{extra}\n",
        feishu.base_url()
    ));
    let mut child = ws.cmd(&["run"]).spawn().unwrap();
    let stderr = Capture::start(child.stderr.take());
    Running { child, stderr, ws }
}

fn start_ws(llm: &FakeLlm, feishu: &FakeFeishu) -> Running {
    let running = start(llm, feishu, "");
    wait_for("the long connection", LIMIT, || feishu.ws_open() == 1);
    running
}

fn p2p(event_id: &str, text: &str) -> Value {
    message_event(event_id, ("oc_p2p", "p2p"), "ou_alice", text, None)
}

/// The text of the last user message of an LLM request, as the person wrote it (without the
/// turn's context Chela sends in front of it).
fn last_user_text(body: &Value) -> String {
    let last = body["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "user").unwrap();
    let text: String = match &last["content"] {
        Value::String(s) => s.clone(),
        blocks => blocks.as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect(),
    };
    chela_testkit::person_text(&text).to_owned()
}

#[test]
fn a_long_connection_event_is_answered_as_a_reply_and_acked() {
    let llm = FakeLlm::start(vec![Step::text("Hello from Chela")]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let _chela = start_ws(&llm, &feishu);
    let id = feishu.push_event(&p2p("ev1", "hi there"));
    wait_for("the reply", LIMIT, || !feishu.sent().is_empty());
    let sent = feishu.sent();
    assert_eq!(sent[0].reply_to.as_deref(), Some("om_ev1"));
    assert_eq!(sent[0].text, "Hello from Chela");
    assert_eq!(last_user_text(llm.requests()[0].json.as_ref().unwrap()), "hi there");
    let acks = feishu.acks();
    let ack = acks.iter().find(|a| a.message_id == id).expect("the event was acknowledged");
    assert_eq!((ack.code, ack.service), (200, SERVICE_ID));
    assert!(ack.biz_rt.as_deref().is_some_and(|v| v.parse::<u64>().is_ok()), "{ack:?}");
    // The client pings on connect, with the URL's service id (the fake answers only those).
    wait_for("a ping", LIMIT, || feishu.pings() >= 1);
}

#[test]
fn duplicates_and_group_chatter_are_acked_but_not_answered() {
    let llm = FakeLlm::start(vec![Step::text("first"), Step::text("second")]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let _chela = start_ws(&llm, &feishu);
    feishu.push_event(&p2p("ev1", "one"));
    feishu.push_event(&p2p("ev1", "one"));
    // A group message that does not mention the bot, then one that does (in 3 parts).
    feishu.push_event(&message_event("ev2", ("oc_group", "group"), "ou_bob", "not for you", None));
    let group = message_event("ev3", ("oc_group", "group"), "ou_bob", "what time is it?", Some("ou_bot"));
    feishu.push_event_in_parts(&group, 3);
    wait_for("two replies", LIMIT, || feishu.sent().len() == 2);
    wait_for("every frame acked", LIMIT, || feishu.acks().len() == 6);
    assert!(feishu.acks().iter().all(|a| a.code == 200));
    let sent = feishu.sent();
    let mut replied: Vec<&str> = sent.iter().filter_map(|s| s.reply_to.as_deref()).collect();
    replied.sort_unstable();
    assert_eq!(replied, ["om_ev1", "om_ev3"]);
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "the duplicate or the unmentioned group message reached the model");
    let texts: Vec<String> = requests.iter().map(|r| last_user_text(r.json.as_ref().unwrap())).collect();
    assert!(texts.contains(&"what time is it?".to_owned()), "the mention was not stripped: {texts:?}");
}

#[test]
fn the_tenant_token_is_refreshed_before_expiry_and_after_an_invalid_token_answer_real_time() {
    let llm = FakeLlm::start(vec![Step::text("a"), Step::text("b"), Step::text("c")]);
    // A 2 s token is replaced after 1 s (half its life).
    let feishu = FakeFeishu::start(FeishuOptions { token_ttl_secs: 2, ..FeishuOptions::default() });
    let _chela = start_ws(&llm, &feishu);
    feishu.push_event(&p2p("ev1", "one"));
    wait_for("the first reply", LIMIT, || feishu.sent().len() == 1);
    let first = feishu.sent()[0].token.clone();
    // Real time must pass for a real token to age; nothing to poll for instead.
    std::thread::sleep(Duration::from_millis(1100));
    feishu.push_event(&p2p("ev2", "two"));
    wait_for("the second reply", LIMIT, || feishu.sent().len() == 2);
    assert_ne!(feishu.sent()[1].token, first, "the token was not refreshed before it expired");
    assert_eq!(feishu.bad_token_calls(), 0, "a call went out with an expired token");
    feishu.invalidate_tokens();
    feishu.push_event(&p2p("ev3", "three"));
    wait_for("the third reply", LIMIT, || feishu.sent().len() == 3);
    assert_eq!(feishu.bad_token_calls(), 1);
    assert_eq!(feishu.sent()[2].text, "c");
}

#[test]
fn hostile_long_connection_input_is_survived() {
    let llm = FakeLlm::start(vec![Step::text("still here")]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let chela = start_ws(&llm, &feishu);
    // Garbage that is not protobuf, and a frame with a hostile length prefix: skipped.
    feishu.push_raw(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01garbage".to_vec());
    feishu.push_raw(vec![0x08, 0, 0x10, 0, 0x18, 0, 0x20, 1, 0x42, 0xff, 0xff, 0xff, 0xff, 0x0f]);
    // Endless multi-part: parts of messages that never complete, each acked, none held long.
    for i in 0..200 {
        feishu.push_part(&format!("never_{i}"), 64, i % 63, vec![b'x'; 4096]);
    }
    wait_for("every part acked", LIMIT, || feishu.acks().len() == 200);
    // An oversize WebSocket message ends the connection; the client comes back.
    feishu.push_raw(vec![0u8; 2 << 20]);
    wait_for("a reconnect", LIMIT, || feishu.ws_connections() == 2 && feishu.ws_open() == 1);
    feishu.push_event(&p2p("ev1", "are you there?"));
    wait_for("the reply", LIMIT, || feishu.sent().len() == 1);
    assert_eq!(feishu.sent()[0].text, "still here");
    let log = chela.stderr.now();
    assert!(log.contains("skipped a Feishu long-connection message"), "{log}");
    assert!(log.contains("larger than"), "{log}");
}

#[test]
fn status_tells_each_long_connection_drop_and_reconnect() {
    let llm = FakeLlm::start(vec![]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let mut ws = Ws::for_llm(Provider::Anthropic, &llm, "max_retries = 0");
    let config = std::fs::read_to_string(ws.path().join("chela.toml")).unwrap();
    ws.write_config(&format!(
        "{config}\n[channels.feishu]\napp_id = \"cli_test\"\napp_secret = \"secret-test\"\napi_base = \"{}\"\n",
        feishu.base_url()
    ));
    // `chela status` finds the daemon at its configured address, so the port is fixed here.
    ws.set_env("CHELA_GATEWAY__LISTEN", &format!("127.0.0.1:{}", free_port()));
    let mut child = ws.cmd(&["run"]).spawn().unwrap();
    let stderr = Capture::start(child.stderr.take());
    let chela = Running { child, stderr, ws };
    wait_for("the long connection", LIMIT, || feishu.ws_open() == 1);
    let feishu_state = || -> Value {
        let out = chela.ws.run(&["status", "--json"]);
        let json: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        json["channels"].as_array().into_iter().flatten().find(|c| c["name"] == "feishu").cloned().unwrap_or_default()
    };
    wait_for("feishu connected", LIMIT, || feishu_state()["connected"] == true);
    assert!(feishu_state()["last_error"].is_null(), "{}", feishu_state());

    // The connection drops and comes back: the drop is told, and the channel is connected again.
    feishu.drop_connection();
    wait_for("a reconnect", LIMIT, || feishu.ws_connections() == 2 && feishu.ws_open() == 1);
    wait_for("the drop and the reconnect in status", LIMIT, || {
        let s = feishu_state();
        s["connected"] == true && s["last_error"].as_str().is_some_and(|e| !e.is_empty())
    });
    chela.ws.run(&["status"]).expect_ok().stdout_has("feishu connected for ").stdout_has("(last error ");
}

#[test]
fn wrong_app_credentials_stop_the_daemon_with_what_to_fix() {
    let llm = FakeLlm::start(vec![]);
    let feishu = FakeFeishu::start(FeishuOptions { app_secret: "the-real-secret".into(), ..FeishuOptions::default() });
    let mut chela = start(&llm, &feishu, "");
    let status = crate::wait_exit(&mut chela.child, LIMIT);
    assert!(!status.success());
    // The pipe may still hold the last lines after the exit.
    wait_for("the refusal in the log", LIMIT, || chela.stderr.now().contains("Feishu refused the app credentials"));
    let log = chela.stderr.now();
    assert!(log.contains("channels.feishu.app_secret"), "{log}");
    assert!(!log.contains("secret-test"), "the secret was printed: {log}");
    assert_eq!(feishu.endpoint_requests(), 0);
}

#[test]
fn the_model_writes_to_known_feishu_chats_only() {
    let llm = FakeLlm::start(vec![
        Step::text("first"),
        Step::tool_call("tools_unlock", json!({"group": "feishu"})),
        Step::tool_call("feishu_send_message", json!({"chat_id": "oc_p2p", "text": "a note from a tool"})),
        Step::tool_call("feishu_send_message", json!({"chat_id": "oc_stranger", "text": "spam"})),
        Step::text("done"),
    ]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let _chela = start_ws(&llm, &feishu);
    feishu.push_event(&p2p("ev1", "hello"));
    wait_for("the first reply", LIMIT, || feishu.sent().len() == 1);
    feishu.push_event(&p2p("ev2", "send me a note"));
    wait_for("the note and the reply", LIMIT, || feishu.sent().len() == 3);
    let sent = feishu.sent();
    assert_eq!((sent[1].receive_id.as_deref(), sent[1].text.as_str()), (Some("oc_p2p"), "a note from a tool"));
    assert_eq!((sent[2].reply_to.as_deref(), sent[2].text.as_str()), (Some("om_ev2"), "done"));
    let last = llm.requests()[4].json.clone().unwrap().to_string();
    assert!(
        last.contains("Chela may not write to feishu chat oc_stranger"),
        "the refusal did not reach the model: {last}"
    );
}

#[test]
fn pings_follow_the_servers_interval_and_sigterm_stops_the_channel_at_once() {
    let llm = FakeLlm::start(vec![]);
    let feishu = FakeFeishu::start(FeishuOptions { ping_interval_secs: 1, ..FeishuOptions::default() });
    let mut chela = start_ws(&llm, &feishu);
    // One on connect, then one a second: three within about two seconds.
    wait_for("three pings", Duration::from_secs(5), || feishu.pings() >= 3);
    let sent = std::time::Instant::now();
    let kill = std::process::Command::new("kill").args(["-TERM", &chela.child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let status = crate::wait_exit(&mut chela.child, LIMIT);
    assert!(status.success(), "{status:?}: {}", chela.stderr.now());
    assert!(sent.elapsed() < Duration::from_secs(5), "took {:?} to stop", sent.elapsed());
    wait_for("the long connection closed", LIMIT, || feishu.ws_open() == 0);
}

/// Now in Unix seconds, as a webhook's `X-Lark-Request-Timestamp`.
fn now() -> String {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().to_string()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn encrypted_webhooks_are_verified_answered_and_bad_ones_refused() {
    let llm = FakeLlm::start(vec![Step::text("webhook answer")]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let port = free_port();
    let _chela = start(
        &llm,
        &feishu,
        &format!(
            "mode = \"webhook\"\nwebhook_listen = \"127.0.0.1:{port}\"\nencrypt_key = \"ek-1\"\nverification_token = \"vt-1\"\n"
        ),
    );
    let url = format!("http://127.0.0.1:{port}/feishu/events");
    wait_for("the webhook listener", LIMIT, || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());

    // URL verification, encrypted as Feishu sends it when an encrypt key is set.
    let check = json!({"challenge": "ch-42", "token": "vt-1", "type": "url_verification"});
    let body = json!({"encrypt": encrypt("ek-1", *b"0123456789abcdef", check.to_string().as_bytes())}).to_string();
    let (status, answer) = webhook_post(&url, body.as_bytes(), &[]).unwrap();
    assert_eq!((status, serde_json::from_str::<Value>(&answer).unwrap()), (200, json!({"challenge": "ch-42"})));

    let mut event = p2p("ev1", "from a webhook");
    event["header"]["token"] = json!("vt-1");
    // A bad signature, a wrong verification token, garbage: refused, nothing reaches the model.
    let (body, mut headers) = encrypted_event("ek-1", &event, &now(), "nonce-1");
    headers[2].1 = "0".repeat(64);
    assert_eq!(webhook_post(&url, &body, &headers).unwrap().0, 401);
    let mut wrong_token = event.clone();
    wrong_token["header"]["token"] = json!("vt-2");
    let (body2, headers2) = encrypted_event("ek-1", &wrong_token, &now(), "nonce-2");
    assert_eq!(webhook_post(&url, &body2, &headers2).unwrap().0, 401);
    let (status, answer) = webhook_post(&url, br#"{"encrypt":"%%% not base64"}"#, &[]).unwrap();
    assert_eq!(status, 400);
    assert!(answer.contains("cannot be decrypted"), "{answer}");

    // The real event, twice (Feishu retries): answered once.
    let (body, headers) = encrypted_event("ek-1", &event, &now(), "nonce-3");
    assert_eq!(webhook_post(&url, &body, &headers).unwrap().0, 200);
    assert_eq!(webhook_post(&url, &body, &headers).unwrap().0, 200);
    wait_for("the reply", LIMIT, || feishu.sent().len() == 1);
    assert_eq!(feishu.sent()[0].reply_to.as_deref(), Some("om_ev1"));
    assert_eq!(feishu.sent()[0].text, "webhook answer");
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn doctor_checks_the_feishu_credentials() {
    let llm = FakeLlm::start(vec![Step::text("pong")]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let config = std::fs::read_to_string(ws.path().join("chela.toml")).unwrap();
    let section = |secret: &str| {
        format!(
            "{config}\n[channels.feishu]\napp_id = \"cli_test\"\napp_secret = \"{secret}\"\napi_base = \"{}\"\nallow_from = [\"ou_alice\"]\n",
            feishu.base_url()
        )
    };
    ws.write_config(&section("secret-test"));
    ws.run(&["doctor"]).stdout_has("ok    Feishu app cli_test gets a tenant token");
    ws.write_config(&section("wrong-secret-123"));
    let out = ws.run(&["doctor"]);
    out.stdout_has("FAIL  Feishu: Feishu refused the app credentials");
    assert!(!out.stdout.contains("wrong-secret-123"), "the secret was printed:\n{}", out.stdout);
}

#[test]
fn a_revoke_while_the_model_works_keeps_that_turns_answer_from_the_revoked_person() {
    let llm = FakeLlm::start(vec![Step::text("a secret meant for alice while approved")]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let chela = start_with(&llm, &feishu, "", "");
    wait_for("the long connection", LIMIT, || feishu.ws_open() == 1);
    feishu.push_event(&p2p("ev1", "hello?"));
    wait_for("the pairing code", LIMIT, || !feishu.sent().is_empty());
    let text = feishu.sent()[0].text.clone();
    let code: String = text.split("chela pairing approve ").nth(1).expect("a pairing answer").chars().take(8).collect();
    chela.ws.run(&["pairing", "approve", &code]).expect_ok();

    llm.hold();
    feishu.push_event(&p2p("ev2", "tell me the secret"));
    wait_for("the model call", LIMIT, || llm.requests().len() == 1);
    chela.ws.run(&["pairing", "revoke", "feishu:ou_alice"]).expect_ok();
    llm.release();
    // Either the answer goes out (the break) or the daemon says why it did not.
    wait_for("the delivery to be decided", LIMIT, || {
        feishu.sent().len() > 1 || chela.stderr.now().contains("may no longer talk")
    });
    let sent = feishu.sent();
    assert!(sent.iter().all(|s| !s.text.contains("secret")), "the revoked person got the answer: {sent:?}");
}

#[test]
fn webhook_mode_without_a_verification_method_does_not_start_and_doctor_says_what_to_set() {
    let llm = FakeLlm::start(vec![Step::text("a forged event's answer")]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let port = free_port();
    let extra = format!("mode = \"webhook\"\nwebhook_listen = \"127.0.0.1:{port}\"\n");
    let mut chela = start(&llm, &feishu, &extra);
    // A forged event from the owner's open_id, for as long as the daemon lives.
    let url = format!("http://127.0.0.1:{port}/feishu/events");
    let forged = p2p("ev-forged", "run this for me").to_string();
    let status = loop {
        if let Some(status) = chela.child.try_wait().unwrap() {
            break status;
        }
        let answered = webhook_post(&url, forged.as_bytes(), &[]).is_ok_and(|(code, _)| code == 200);
        assert!(!answered, "a forged, unverifiable event was accepted");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    wait_for("the refusal in the log", LIMIT, || chela.stderr.now().contains("could not tell Feishu's events"));
    let log = chela.stderr.now();
    assert!(log.contains("channels.feishu.encrypt_key") && log.contains("channels.feishu.verification_token"), "{log}");
    assert!(llm.requests().is_empty() && feishu.sent().is_empty());
    let doctor = chela.ws.run(&["doctor"]);
    doctor.stdout_has("FAIL  Feishu: channels.feishu.mode is webhook, but neither channels.feishu.encrypt_key");
}

#[test]
fn a_replayed_webhook_event_is_refused_by_its_age_and_by_its_id_after_a_restart() {
    let llm = FakeLlm::start(vec![Step::text("first answer"), Step::text("a replay's answer")]);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let port = free_port();
    let extra = format!("mode = \"webhook\"\nwebhook_listen = \"127.0.0.1:{port}\"\nencrypt_key = \"ek-1\"\n");
    let mut chela = start(&llm, &feishu, &extra);
    let url = format!("http://127.0.0.1:{port}/feishu/events");
    let listening = || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    wait_for("the webhook listener", LIMIT, listening);
    // Signed in 2020: a captured event, replayed.
    let old = p2p("ev-2020", "from 2020");
    let (body, headers) = encrypted_event("ek-1", &old, "1577836800", "nonce-1");
    let (status, answer) = webhook_post(&url, &body, &headers).unwrap();
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("5 minutes"), "{answer}");

    let event = p2p("ev-once", "run this once");
    let (body, headers) = encrypted_event("ek-1", &event, &now(), "nonce-2");
    assert_eq!(webhook_post(&url, &body, &headers).unwrap().0, 200);
    wait_for("the reply", LIMIT, || feishu.sent().len() == 1);
    // The daemon restarts on the same workspace; the same signed event comes again in its window.
    let _ = chela.child.kill();
    let _ = chela.child.wait();
    chela.child = chela.ws.cmd(&["run"]).spawn().unwrap();
    chela.stderr = Capture::start(chela.child.stderr.take());
    wait_for("the webhook listener after the restart", LIMIT, listening);
    assert_eq!(webhook_post(&url, &body, &headers).unwrap().0, 200);
    // A new event after it: handled in order, so once it is answered the replay was decided.
    let (body, headers) = encrypted_event("ek-1", &p2p("ev-next", "and this"), &now(), "nonce-3");
    assert_eq!(webhook_post(&url, &body, &headers).unwrap().0, 200);
    wait_for("the next reply", LIMIT, || feishu.sent().len() == 2);
    let asked: Vec<String> = llm.requests().iter().map(|r| last_user_text(r.json.as_ref().unwrap())).collect();
    assert_eq!(asked, ["run this once", "and this"], "the replay ran again");
}
