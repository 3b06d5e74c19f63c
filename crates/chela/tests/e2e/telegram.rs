//! `chela run` with the Telegram channel, against the fake Bot API and the fake LLM.

use std::process::Child;
use std::time::Duration;

use chela_testkit::telegram::{FakeTelegram, Hostile, Sent};
use chela_testkit::{FakeLlm, Step};

use crate::{Out, Provider, Ws, finish};

pub const TOKEN: &str = "123456:e2e-telegram-token";
pub const OWNER: i64 = 42;
const WAIT: Duration = Duration::from_secs(20);

pub fn ws_for(provider: Provider, llm: &FakeLlm, tg: &FakeTelegram, extra: &str) -> Ws {
    Ws::for_llm(
        provider,
        llm,
        &format!(
            "[channels.telegram]\ntoken = \"{TOKEN}\"\napi_base = \"{}\"\nallow_from = [\"{OWNER}\"]\n{extra}",
            tg.base_url()
        ),
    )
}

/// Starts `chela run` and waits until it polls Telegram.
pub fn start(ws: &Ws, tg: &FakeTelegram) -> Child {
    let polls = tg.calls_to("getUpdates").len();
    let child = ws.cmd(&["run"]).spawn().unwrap();
    let seen = tg.wait_calls("getUpdates", polls + 1, WAIT);
    assert!(seen.len() > polls, "chela run never polled Telegram");
    child
}

#[allow(unsafe_code)]
pub fn stop(child: Child) -> Out {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    finish(child, Duration::from_secs(10))
}

fn to_owner(sent: &[Sent]) -> Vec<&Sent> {
    sent.iter().filter(|s| s.chat_id == OWNER).collect()
}

/// The text of every request the model got, as JSON.
fn asked(llm: &FakeLlm) -> Vec<String> {
    llm.requests().iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect()
}

#[test]
fn a_message_is_answered_as_telegram_html_while_typing_shows() {
    let llm = FakeLlm::start(vec![Step::text("**Hello** there: 1 < 2 && `x>y`")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "hi");
    let sent = tg.wait_sent(WAIT, |s| !s.is_empty());
    let out = stop(child);
    out.expect_ok();
    assert_eq!(sent.len(), 1, "{sent:?}\n{}", out.stderr);
    assert!(!out.stderr.contains("unknown setting"), "{}", out.stderr);
    assert_eq!(sent[0].text, "Hello there: 1 < 2 && x>y");
    assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    assert!(sent[0].entities.iter().any(|(t, o, l)| t == "bold" && *o == 0 && *l == 5), "{:?}", sent[0].entities);
    assert!(tg.calls_to("sendChatAction").iter().any(|c| c.params["action"] == "typing"));
    assert!(asked(&llm)[0].contains("hi"));
}

#[test]
fn a_restart_neither_replays_nor_loses_an_update() {
    let llm = FakeLlm::start(vec![Step::text("first answer")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    let first = tg.push_text(OWNER, OWNER, "message one");
    tg.wait_sent(WAIT, |s| !s.is_empty());
    stop(child).expect_ok();
    let saved = std::fs::read_to_string(ws.path().join("state/telegram.offset")).unwrap();
    assert_eq!(saved.trim(), (first + 1).to_string());

    // Telegram still holds what it was not told was handled: a new server re-delivers the first
    // update, and a second one arrived while Chela was down.
    let llm2 = FakeLlm::start(vec![Step::text("second answer")]);
    let tg2 = FakeTelegram::start(TOKEN);
    let again = tg2.push_text(OWNER, OWNER, "message one");
    assert_eq!(again, first, "the fake numbers updates the same way each time");
    let second = tg2.push_text(OWNER, OWNER, "message two");
    assert_eq!(second, first + 1);
    let ws2 = {
        ws.write_config(&format!(
            "[llm]\nprovider = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"{}\"\nmodel = \"{}\"\n\
             [channels.telegram]\ntoken = \"{TOKEN}\"\napi_base = \"{}\"\nallow_from = [\"{OWNER}\"]\n",
            llm2.anthropic_base_url(),
            crate::KEY,
            crate::MODEL,
            tg2.base_url()
        ));
        &ws
    };
    let child = start(ws2, &tg2);
    let sent = tg2.wait_sent(WAIT, |s| !s.is_empty());
    // Give a replay its chance to show: the poll after the second update has been made.
    tg2.wait_calls("getUpdates", 2, WAIT);
    stop(child).expect_ok();
    let asked2 = asked(&llm2);
    assert_eq!(asked2.len(), 1, "{asked2:?}");
    assert!(asked2[0].contains("message two"));
    assert_eq!(sent.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(), ["second answer"]);
}

#[test]
fn markup_telegram_refuses_is_resent_plain() {
    let llm = FakeLlm::start(vec![Step::text("**bold** claim")]);
    let tg = FakeTelegram::start(TOKEN);
    tg.refuse_html(1);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "go");
    let sent = tg.wait_sent(WAIT, |s| !s.is_empty());
    stop(child).expect_ok();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].parse_mode, None);
    assert_eq!(sent[0].raw, "bold claim");
    assert_eq!(tg.calls_to("sendMessage").len(), 2);
}

#[test]
fn a_9000_character_reply_arrives_in_valid_chunks() {
    let reply: String =
        (0..300).map(|n| format!("**Item {n}** has `code<{n}>` & a [link](https://e.com/{n}) here.\n")).collect();
    assert!(reply.chars().count() > 9000);
    // What Telegram shows is over 2 x 4096 characters too: at least three messages.
    assert!(
        (0..300).map(|n| format!("Item {n} has code<{n}> & a link here.")).map(|l| l.len() + 1).sum::<usize>() > 8192
    );
    let llm = FakeLlm::start(vec![Step::text(reply.clone())]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::OpenAi, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "long please");
    let expected: String = (0..300).map(|n| format!("Item {n} has code<{n}> & a link here.")).collect();
    let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let sent =
        tg.wait_sent(WAIT, |s| squash(&s.iter().map(|m| m.text.as_str()).collect::<String>()) == squash(&expected));
    stop(child).expect_ok();
    // Every chunk passed the fake's HTML parser and its length check, or it would be missing.
    assert!(sent.len() >= 3, "{} messages", sent.len());
    assert!(sent.iter().all(|s| s.parse_mode.as_deref() == Some("HTML")));
    assert_eq!(tg.calls_to("sendMessage").len(), sent.len(), "a chunk was refused");
    assert_eq!(squash(&sent.iter().map(|m| m.text.as_str()).collect::<String>()), squash(&expected));
}

#[test]
fn a_429_is_waited_out_for_its_retry_after() {
    let llm = FakeLlm::start(vec![Step::text("patient")]);
    let tg = FakeTelegram::start(TOKEN);
    tg.rate_limit(1, 1);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "hi");
    let sent = tg.wait_sent(WAIT, |s| !s.is_empty());
    stop(child).expect_ok();
    assert_eq!(sent[0].text, "patient");
    let calls = tg.calls_to("sendMessage");
    assert_eq!(calls.len(), 2);
    let gap = calls[1].at - calls[0].at;
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}, before retry_after");
}

#[test]
fn a_photo_reaches_the_model_as_an_image_in_both_wire_formats() {
    let jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3, 4, 5];
    // base64 of the bytes above.
    let encoded = "/9j/4AECAwQF";
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![Step::text("a nice photo")]);
        let tg = FakeTelegram::start(TOKEN);
        let ws = ws_for(provider, &llm, &tg, "");
        let child = start(&ws, &tg);
        tg.push_photo(OWNER, OWNER, jpeg.clone(), "what is this?");
        tg.wait_sent(WAIT, |s| !s.is_empty());
        stop(child).expect_ok();
        let req = &llm.requests()[0];
        let body = String::from_utf8_lossy(&req.body);
        assert!(body.contains(encoded), "{provider:?}: {body}");
        assert!(body.contains("image/jpeg") && body.contains("what is this?"), "{provider:?}: {body}");
    }
}

#[test]
fn a_stranger_reaches_nothing_but_whoami_and_a_pairing_code() {
    let llm = FakeLlm::start(vec![]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(99, 99, "let me in");
    tg.push_photo(99, 99, vec![0xFF, 0xD8, 0xFF, 0xE0], "");
    tg.push_text(99, 99, "/new");
    tg.push_text(99, 99, "/whoami");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text.contains("Your Telegram user id is 99")));
    stop(child).expect_ok();
    assert!(sent[0].text.contains("pairing code"), "the first answer is the pairing code: {sent:?}");
    for m in &sent {
        assert!(
            m.text.contains("pairing code") || m.text.contains("Your Telegram user id is 99"),
            "a stranger gets only the pairing code and their id: {sent:?}"
        );
    }
    assert!(llm.requests().is_empty());
    assert!(tg.calls_to("getFile").is_empty(), "a stranger's photo was downloaded");
    assert!(!ws.path().join("inbox").exists());
    assert!(!ws.path().join("sessions/telegram_99.jsonl").exists());
}

#[test]
fn a_stranger_approved_with_chela_pairing_is_answered_and_a_revoked_one_is_not() {
    let llm = FakeLlm::start(vec![Step::text("welcome aboard")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(77, 77, "hello?");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text.contains("pairing code")));
    let text = &sent.last().unwrap().text;
    let code = text.split("chela pairing approve ").nth(1).expect("the command is in the answer");
    let code: String = code.chars().take_while(char::is_ascii_alphanumeric).collect();
    assert_eq!(code.len(), 8, "{text}");
    // The owner approves from another process while the daemon runs.
    ws.run(&["pairing", "approve", &code]).expect_ok();
    tg.push_text(77, 77, "now?");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text == "welcome aboard"));
    assert!(sent.iter().any(|m| m.text == "welcome aboard"), "{sent:?}");
    assert_eq!(llm.requests().len(), 1);
    ws.run(&["pairing", "revoke", "telegram:77"]).expect_ok();
    let before = tg.sent().len();
    tg.push_text(77, 77, "still there?");
    let sent = tg.wait_sent(WAIT, |s| s.len() > before);
    stop(child).expect_ok();
    assert!(sent[before..].iter().all(|m| m.text.contains("pairing code")), "{sent:?}");
    assert_eq!(llm.requests().len(), 1, "nothing more reached the model");
}

#[test]
fn hostile_answers_and_oversized_files_are_survived() {
    let llm = FakeLlm::start(vec![Step::text("saved it"), Step::text("still here")]);
    let tg = FakeTelegram::start(TOKEN);
    tg.omit_file_sizes();
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "max_file_bytes = 2048\n");
    let child = start(&ws, &tg);
    tg.push_document(OWNER, OWNER, "big.bin", vec![7; 5000]);
    let refused = tg.wait_sent(WAIT, |s| !to_owner(s).is_empty());
    assert!(refused[0].text.contains("larger than I accept"), "{}", refused[0].text);
    tg.push_document(OWNER, OWNER, "../notes.txt", b"hello".to_vec());
    tg.wait_sent(WAIT, |s| s.len() >= 2);
    tg.hostile([Hostile::Garbage, Hostile::Endless, Hostile::Huge(6 * 1024 * 1024)]);
    let polls = tg.calls_to("getUpdates").len();
    // The poll already waiting gets the garbage; the next two polls the endless and the huge
    // body; then polling goes on normally.
    let calls = tg.wait_calls("getUpdates", polls + 3, Duration::from_secs(30));
    assert!(calls.len() >= polls + 3, "polling stopped after the bad answers");
    // Each bad answer is followed by a back-off (1 s, then 2 s, then 4 s), never a tight loop.
    for pair in calls[polls..polls + 3].windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(gap >= Duration::from_millis(900), "polled again after {gap:?}");
    }
    tg.push_text(OWNER, OWNER, "are you there?");
    let sent = tg.wait_sent(Duration::from_secs(30), |s| s.len() >= 3);
    let out = stop(child);
    out.expect_ok();
    let texts: Vec<&str> = sent.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts[1..], ["saved it", "still here"], "{}", out.stderr);
    let inbox: Vec<String> = std::fs::read_dir(ws.path().join("inbox"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert!(inbox[0].ends_with("-_notes.txt"), "{inbox:?}");
    assert_eq!(std::fs::read(ws.path().join("inbox").join(&inbox[0])).unwrap(), b"hello");
    let asked = asked(&llm);
    assert!(asked[0].contains(&format!("inbox/{}", inbox[0])), "{}", asked[0]);
    assert_eq!(asked.len(), 2);
}

#[test]
fn doctor_checks_the_bot_token_and_reachability() {
    let llm = FakeLlm::start(vec![]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    ws.run(&["doctor"]).stdout_has("ok    telegram: bot @chela_test_bot answers at http://127.0.0.1");
    let wrong = FakeTelegram::start("999:another-token");
    let ws = ws_for(Provider::Anthropic, &llm, &wrong, "");
    let out = ws.run(&["doctor"]);
    out.expect_code(1).stdout_has("FAIL  telegram: Telegram rejected the bot token (401)");
    assert!(!out.stdout.contains("e2e-telegram-token"), "the token was shown:\n{}", out.stdout);
}

#[test]
fn a_duplicate_update_is_ignored_and_new_starts_over() {
    let llm = FakeLlm::start(vec![Step::text("once"), Step::text("fresh")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    let message = serde_json::json!({"message_id": 5, "from": {"id": OWNER, "is_bot": false, "first_name": "T"},
        "chat": {"id": OWNER, "type": "private"}, "date": 0, "text": "only once"});
    // Both copies in one getUpdates answer: the offset alone cannot hide the second.
    tg.push_update(serde_json::json!({"update_id": 900, "message": message}));
    tg.push_update(serde_json::json!({"update_id": 900, "message": message}));
    tg.wait_sent(WAIT, |s| !s.is_empty());
    tg.push_text(OWNER, OWNER, "/new");
    tg.wait_sent(WAIT, |s| s.len() >= 2);
    tg.push_text(OWNER, OWNER, "after new");
    let sent = tg.wait_sent(WAIT, |s| s.len() >= 3);
    stop(child).expect_ok();
    let texts: Vec<&str> = sent.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["once", "Started a new conversation; the previous one is archived.", "fresh"]);
    let asked = asked(&llm);
    assert_eq!(asked.len(), 2);
    // The conversation after /new does not carry the one before.
    assert!(!asked[1].contains("only once"), "{}", asked[1]);
}

#[test]
fn a_chats_replies_keep_their_order_when_the_first_is_held_up() {
    let long: String = (0..400).map(|n| format!("line {n} of the first answer\n")).collect();
    let llm = FakeLlm::start(vec![Step::text(long), Step::text("second answer")]);
    let tg = FakeTelegram::start(TOKEN);
    // The first answer's first message waits a second for its retry_after; the second turn
    // ends meanwhile, and its answer must still come after the whole first one.
    tg.rate_limit(1, 1);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "one");
    tg.push_text(OWNER, OWNER, "two");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text == "second answer"));
    stop(child).expect_ok();
    let last = sent.last().unwrap();
    assert_eq!(
        last.text,
        "second answer",
        "{:?}",
        sent.iter().map(|m| &m.text[..m.text.len().min(20)]).collect::<Vec<_>>()
    );
    assert!(sent.len() >= 3);
}

/// The `chat_id` of a call, however the client spelled it (number or string).
fn chat_of(call: &chela_testkit::telegram::Call) -> String {
    call.params["chat_id"].to_string().trim_matches('"').to_owned()
}

/// The code in a pairing answer.
fn pairing_code(text: &str) -> String {
    let after = text.split("chela pairing approve ").nth(1).expect("the command is in the answer");
    let code: String = after.chars().take_while(char::is_ascii_alphanumeric).collect();
    assert_eq!(code.len(), 8, "{text}");
    code
}

#[test]
fn after_a_revoke_the_models_telegram_send_text_to_that_chat_is_refused() {
    let send = |text: &str| Step::tool_call("telegram_send_text", serde_json::json!({"chat_id": "77", "text": text}));
    let llm = FakeLlm::start(vec![
        Step::text("welcome aboard"),
        // The send tools start hidden; the unlock lasts for the rest of the owner's conversation.
        Step::tool_call("tools_unlock", serde_json::json!({"group": "telegram"})),
        send("a note while paired"),
        Step::text("sent it"),
        send("a note after the revoke"),
        Step::text("could not"),
    ]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(77, 77, "hello?");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text.contains("pairing code")));
    ws.run(&["pairing", "approve", &pairing_code(&sent.last().unwrap().text)]).expect_ok();
    tg.push_text(77, 77, "now?");
    tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text == "welcome aboard"));

    // While 77 is approved, the owner's request reaches their chat: the tool works.
    tg.push_text(OWNER, OWNER, "tell 77 something");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text == "sent it"));
    assert!(sent.iter().any(|m| m.chat_id == 77 && m.text == "a note while paired"), "{sent:?}");

    ws.run(&["pairing", "revoke", "telegram:77"]).expect_ok();
    let to_77 = tg.calls_to("sendMessage").iter().filter(|c| chat_of(c) == "77").count();
    tg.push_text(OWNER, OWNER, "tell 77 again");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text == "could not"));
    let out = stop(child);
    out.expect_ok();
    let after: Vec<_> = tg.calls_to("sendMessage").into_iter().filter(|c| chat_of(c) == "77").collect();
    assert_eq!(after.len(), to_77, "Telegram was asked to write to 77 after the revoke: {after:?}");
    assert!(!sent.iter().any(|m| m.text.contains("after the revoke")), "{sent:?}");
    // The model was told why, in the tool's result.
    let asked = asked(&llm);
    assert_eq!(asked.len(), 6, "{}", out.stderr);
    assert!(asked[5].contains("Chela may not write to telegram chat 77"), "{}", asked[5]);
    assert!(asked[5].contains(r#""is_error":true"#), "a refusal is a tool error: {}", asked[5]);
}

/// The owner's sends and edits, in order: (method, text, parse_mode, when).
fn owner_writes(tg: &FakeTelegram) -> Vec<chela_testkit::telegram::Call> {
    tg.calls()
        .into_iter()
        .filter(|c| matches!(c.method.as_str(), "sendMessage" | "editMessageText") && chat_of(c) == OWNER.to_string())
        .collect()
}

const SLOW: &str = "**Slowly** the answer grows in one message: first a few words, then a few more, each second a \
                    little longer, never a new message for every piece, until at last the whole of it is there.";
/// What Telegram shows of [`SLOW`].
const SLOW_SHOWN: &str = "Slowly the answer grows in one message: first a few words, then a few more, each second a \
                          little longer, never a new message for every piece, until at last the whole of it is there.";

/// [`SLOW`] in pieces of at most 24 characters, 300 ms apart: about 4 s in all.
fn slow_step() -> Step {
    Step::text(SLOW).chunk_delay_ms(300)
}

#[test]
fn a_slowly_streamed_answer_grows_in_one_message_edited_at_most_once_a_second() {
    let llm = FakeLlm::start(vec![slow_step()]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "take your time");
    let whole = SLOW_SHOWN;
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text == whole && m.parse_mode.as_deref() == Some("HTML")));
    let out = stop(child);
    out.expect_ok();
    assert_eq!(sent.len(), 1, "one message, edited: {sent:?}\n{}", out.stderr);
    assert!(sent[0].entities.iter().any(|(t, o, l)| t == "bold" && *o == 0 && *l == 6), "{:?}", sent[0].entities);
    let writes = owner_writes(&tg);
    let methods: Vec<&str> = writes.iter().map(|c| c.method.as_str()).collect();
    assert_eq!(methods[0], "sendMessage", "{methods:?}");
    assert!(methods[1..].iter().all(|m| *m == "editMessageText"), "{methods:?}");
    // Previews while it grew, then the final edit.
    assert!(writes.len() >= 3, "{methods:?}");
    let texts: Vec<&str> = writes.iter().map(|c| c.params["text"].as_str().unwrap_or("")).collect();
    assert!(texts[0].len() < whole.len() && whole.starts_with(texts[0]), "the first preview was partial: {texts:?}");
    for pair in texts[..texts.len() - 1].windows(2) {
        assert!(pair[1].len() >= pair[0].len() && pair[1].starts_with(pair[0]), "it grew: {texts:?}");
    }
    for pair in writes.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(gap >= Duration::from_secs(1), "two writes {gap:?} apart: {methods:?}");
    }
    let last = writes.last().unwrap();
    assert_eq!(last.params["parse_mode"], "HTML", "{:?}", last.params);
    assert!(writes[..writes.len() - 1].iter().all(|c| c.params.get("parse_mode").is_none()), "previews are plain");
}

#[test]
fn with_stream_edits_off_the_answer_is_sent_once_when_whole() {
    // As slow as above, so a preview would have been shown.
    let llm = FakeLlm::start(vec![slow_step()]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "stream_edits = false\n");
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "all at once");
    let sent = tg.wait_sent(WAIT, |s| !s.is_empty());
    let out = stop(child);
    out.expect_ok();
    assert!(!out.stderr.contains("unknown setting"), "{}", out.stderr);
    assert_eq!(sent[0].text, SLOW_SHOWN);
    let methods: Vec<String> = owner_writes(&tg).into_iter().map(|c| c.method).collect();
    assert_eq!(methods, ["sendMessage"]);
}

#[test]
fn a_sender_over_the_rate_limit_is_told_once_and_then_not_answered() {
    let llm = FakeLlm::start(vec![Step::text("one"), Step::text("two"), Step::text("three")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "[access]\nrate_per_hour = 2\n");
    let child = start(&ws, &tg);
    for text in ["a", "b", "c", "d"] {
        tg.push_text(OWNER, OWNER, text);
    }
    // Updates are handled in order: once the stranger after them has their code, "d" was decided.
    tg.push_text(99, 99, "hello");
    tg.wait_sent(WAIT, |s| s.iter().any(|m| m.chat_id == 99) && to_owner(s).len() >= 3);
    // A stop lets running turns finish: a wrongly admitted "d" would be asked and answered now.
    let out = stop(child);
    out.expect_ok();
    let sent = tg.sent();
    let texts: Vec<&str> = to_owner(&sent).iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts.len(), 3, "{texts:?}\n{}", out.stderr);
    assert_eq!(texts[..2], ["one", "two"]);
    assert!(texts[2].contains("faster than I may answer"), "the polite reply: {texts:?}");
    assert_eq!(llm.requests().len(), 2, "only the messages within the limit reached the model");
}

/// Pairs Telegram user 77 through a code and `chela pairing approve`.
fn pair_77(ws: &Ws, tg: &FakeTelegram) {
    tg.push_text(77, 77, "hello?");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.chat_id == 77 && m.text.contains("pairing code")));
    let asked = sent.iter().rev().find(|m| m.chat_id == 77).unwrap();
    ws.run(&["pairing", "approve", &pairing_code(&asked.text)]).expect_ok();
}

/// Every send or edit Telegram was asked to make in chat 77.
fn writes_to_77(tg: &FakeTelegram) -> Vec<chela_testkit::telegram::Call> {
    tg.calls()
        .into_iter()
        .filter(|c| matches!(c.method.as_str(), "sendMessage" | "editMessageText") && chat_of(c) == "77")
        .collect()
}

/// Waits until the turn of chat 77 has ended with `answer` saved in its session.
fn wait_turn_saved(ws: &Ws, answer: &str) {
    let session = ws.path().join("sessions/telegram_77.jsonl");
    crate::wait_for("the turn to end", WAIT, || std::fs::read_to_string(&session).is_ok_and(|s| s.contains(answer)));
}

#[test]
fn a_revoke_while_the_model_works_keeps_that_turns_answer_from_the_revoked_chat() {
    let llm = FakeLlm::start(vec![Step::text("a secret meant for 77 while approved")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    pair_77(&ws, &tg);
    llm.hold();
    tg.push_text(77, 77, "tell me the secret");
    crate::wait_for("the model call", WAIT, || llm.requests().len() == 1);
    ws.run(&["pairing", "revoke", "telegram:77"]).expect_ok();
    llm.release();
    wait_turn_saved(&ws, "a secret meant for 77");
    // A stop lets answers being sent go out first: one sent wrongly is in the fake by then.
    let out = stop(child);
    out.expect_ok();
    let leaked: Vec<_> =
        writes_to_77(&tg).into_iter().filter(|c| c.params["text"].to_string().contains("secret")).collect();
    assert!(leaked.is_empty(), "the revoked chat got the turn's answer: {leaked:?}\n{}", out.stderr);
}

#[test]
fn a_revoke_while_the_answer_streams_stops_the_edits_and_the_final_answer() {
    let llm = FakeLlm::start(vec![slow_step()]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    pair_77(&ws, &tg);
    let before = writes_to_77(&tg).len();
    tg.push_text(77, 77, "take your time");
    // The first preview is in the chat: the answer is growing.
    crate::wait_for("the first preview", WAIT, || writes_to_77(&tg).len() > before);
    ws.run(&["pairing", "revoke", "telegram:77"]).expect_ok();
    wait_turn_saved(&ws, "the whole of it is there");
    let out = stop(child);
    out.expect_ok();
    let writes = writes_to_77(&tg);
    let shown: Vec<&str> = writes[before..].iter().map(|c| c.params["text"].as_str().unwrap_or("")).collect();
    assert!(!shown.contains(&SLOW_SHOWN), "the whole answer reached the revoked chat: {shown:?}\n{}", out.stderr);
    assert!(
        writes[before..].iter().all(|c| c.params.get("parse_mode").is_none()),
        "the final formatted answer reached the revoked chat: {shown:?}"
    );
}

#[test]
fn a_strangers_flood_of_commands_gets_no_more_replies_than_the_rate_limit() {
    let llm = FakeLlm::start(vec![Step::text("owner answer")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    for i in 0..300 {
        tg.push_text(99, 99, ["/start", "/help", "/whoami"][i % 3]);
    }
    // Updates are handled in order: once the owner is answered, every command was decided.
    tg.push_text(OWNER, OWNER, "hi");
    tg.wait_sent(WAIT, |s| !to_owner(s).is_empty());
    // A stop lets replies being sent go out first.
    let out = stop(child);
    out.expect_ok();
    let to_99 = tg.calls_to("sendMessage").iter().filter(|c| chat_of(c) == "99").count();
    // The default access.rate_per_hour (30), and one "slow down".
    assert!(to_99 <= 31, "300 commands from a stranger got {to_99} replies\n{}", out.stderr);
    assert!(to_99 >= 1, "the stranger heard nothing at all");
    assert_eq!(llm.requests().len(), 1, "only the owner reached the model");
}
