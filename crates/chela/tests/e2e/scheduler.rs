//! The scheduler in `chela run`: a job the model adds fires and its answer reaches the chat;
//! the jobs survive a restart; a hand-broken `cron.json` keeps its good jobs and is reported;
//! `chela heartbeat trigger` reaches the running daemon.

use std::time::Duration;

use chela_testkit::script::ToolCall;
use chela_testkit::telegram::FakeTelegram;
use chela_testkit::{FakeLlm, Step};
use serde_json::json;

use crate::telegram::{OWNER, TOKEN, start, stop, ws_for};
use crate::{Provider, Ws};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_job_the_model_adds_fires_in_its_chat_and_the_jobs_survive_a_restart() {
    let llm = FakeLlm::start(vec![
        // The scheduler's tools start hidden: the model unlocks them when a task needs them.
        Step::tool_call("tools_unlock", json!({"group": "scheduler"})),
        Step::tool_calls([
            ToolCall::new(
                "cron_add",
                json!({"name": "ping", "schedule_type": "at", "message": "say pong", "delay_s": 2}),
            ),
            ToolCall::new(
                "scheduler_add_job",
                json!({"id": "new-year", "trigger": {"type": "cron", "expr": "0 0 1 1 *"},
                       "action": {"type": "agent", "message": "Happy new year"}}),
            ),
        ]),
        Step::text("Scheduled."),
        Step::text("pong from the job"),
    ]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "ping me in two seconds");
    let sent = tg.wait_sent(WAIT, |s| s.len() >= 2);
    let out = stop(child);
    out.expect_ok();
    let texts: Vec<&str> = sent.iter().filter(|s| s.chat_id == OWNER).map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["Scheduled.", "pong from the job"], "{}", out.stderr);
    let job_turn = String::from_utf8_lossy(&llm.requests()[3].body).into_owned();
    assert!(job_turn.contains("[Scheduled job ping (") && job_turn.contains("say pong"), "{job_turn}");

    // The once job deleted itself after it ran; the other one is in the file for the next start.
    let list = ws.run(&["cron", "list"]);
    list.expect_ok();
    assert!(list.stdout.contains("new-year  active  next: "), "{}", list.stdout);
    assert!(!list.stdout.contains("ping"), "{}", list.stdout);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ws.path().join("cron.json")).unwrap()).unwrap();
    assert_eq!(file["jobs"][0]["action"]["chat_id"], "42", "the chat defaulted to the conversation");
}

#[test]
fn a_broken_entry_is_reported_by_doctor_and_the_good_jobs_are_kept() {
    let ws = Ws::empty();
    let text = "{\"version\": 1, \"jobs\": [\n  {\"id\": \"good\", \"trigger\": {\"type\": \"interval\", \"every_s\": 60}, \"action\": {\"type\": \"cap\", \"name\": \"get_current_time\"}},\n  {\"id\": \"bad\", \"trigger\": {\"type\": \"cron\", \"expr\": \"0 25 * * *\"}, \"action\": {\"type\": \"cap\", \"name\": \"x\"}}\n]}\n";
    std::fs::write(ws.path().join("cron.json"), text).unwrap();
    let doctor = ws.run(&["doctor"]);
    assert!(doctor.stdout.contains("warn  cron.json line 3: job 2 (\"bad\"): trigger.expr"), "{}", doctor.stdout);
    let list = ws.run(&["cron", "list"]);
    list.expect_ok();
    assert!(list.stdout.contains("good  active"), "{}", list.stdout);
    assert!(list.stdout.contains("line 3"), "{}", list.stdout);
    assert_eq!(std::fs::read_to_string(ws.path().join("cron.json")).unwrap(), text, "not rewritten");
    // Pausing the good job is a change made on purpose: a whole valid file, the old one kept.
    ws.run(&["cron", "pause", "good"]).expect_ok();
    assert_eq!(std::fs::read_to_string(ws.path().join("cron.json.bak")).unwrap(), text);
    ws.run(&["doctor"]).stdout_has("cron.json: 1 job(s), all valid");
}

#[test]
fn chela_heartbeat_trigger_reaches_the_running_daemon_and_the_answer_the_chat() {
    let llm = FakeLlm::start(vec![Step::text("The plants are watered.")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(
        Provider::Anthropic,
        &llm,
        &tg,
        &format!("[heartbeat]\nchannel = \"telegram\"\nchat_id = \"{OWNER}\"\n"),
    );
    std::fs::write(ws.path().join("HEARTBEAT.md"), "# Tasks\n- [x] feed the cat\n- [ ] water the plants\n").unwrap();
    let child = start(&ws, &tg);
    ws.run(&["heartbeat", "trigger"]).expect_ok().stdout_has("Asked the running daemon for a heartbeat");
    let sent = tg.wait_sent(WAIT, |s| !s.is_empty());
    let out = stop(child);
    out.expect_ok();
    assert_eq!(sent[0].text, "The plants are watered.", "{}", out.stderr);
    assert_eq!(sent[0].chat_id, OWNER);
    let asked = String::from_utf8_lossy(&llm.requests()[0].body).into_owned();
    assert!(asked.contains("[Heartbeat]") && asked.contains("water the plants") && !asked.contains("feed the cat"));
}

/// `rules.json` for the automation test: a rule on the `emit` job's event, one on the result of
/// the `cap` job's call, one on the `scheduler` event of that job's run.
const RULES: &str = r#"{"rules": [
  {"id": "hot", "match": {"type": "kitchen"}, "actions": [{"type": "send", "text": "Kitchen at {{event.text}}°C ({{event.job}})"}]},
  {"id": "clock-result", "match": {"type": "cap_result"}, "only_if": [{"field": "cap", "op": "eq", "value": "get_current_time"}],
   "actions": [{"type": "send", "channel": "telegram", "chat_id": "42", "text": "time tool ok: {{event.ok}}"}]},
  {"id": "clock-done", "match": {"type": "scheduler", "source": "scheduler"}, "only_if": [{"field": "job", "op": "eq", "value": "clock"}],
   "actions": [{"type": "send", "channel": "telegram", "chat_id": "42", "text": "job {{event.job}} ran: {{event.ok}}"}]}
]}
"#;

#[test]
fn emit_on_event_cap_result_and_scheduler_events_drive_rules_in_the_real_daemon() {
    // The first answer is the agent's to the message; the second the on_event job's turn, which
    // queues behind it in the same chat.
    let llm = FakeLlm::start(vec![Step::text("hi there"), Step::text("greeting from the job")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 4;
    let cron = json!({"version": 1, "jobs": [
        {"id": "heat", "trigger": {"type": "once", "at": at},
         "action": {"type": "emit", "event": "kitchen", "data": {"text": "31", "channel": "telegram", "chat_id": "42"}}},
        {"id": "clock", "trigger": {"type": "once", "at": at}, "action": {"type": "cap", "name": "get_current_time"}},
        {"id": "greet", "trigger": {"type": "on_event", "event": "message", "match": {"text": "hello"}},
         "action": {"type": "agent", "message": "say hi to the new person"}}
    ]});
    std::fs::write(ws.path().join("cron.json"), cron.to_string()).unwrap();
    std::fs::write(ws.path().join("rules.json"), RULES).unwrap();
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "hello");
    let sent = tg.wait_sent(WAIT, |s| s.len() >= 5);
    let out = stop(child);
    out.expect_ok();
    let mut texts: Vec<&str> = sent.iter().filter(|s| s.chat_id == OWNER).map(|s| s.text.as_str()).collect();
    texts.sort_unstable();
    assert_eq!(
        texts,
        ["Kitchen at 31°C (heat)", "greeting from the job", "hi there", "job clock ran: true", "time tool ok: true"],
        "{}",
        out.stderr
    );
    let job_turn = String::from_utf8_lossy(&llm.requests()[1].body).into_owned();
    assert!(job_turn.contains("[Scheduled job greet] say hi to the new person"), "{job_turn}");

    // The outcomes were kept, and another process shows them.
    let list = ws.run(&["cron", "list"]);
    list.expect_ok();
    for line in ["last: ran at", "raised a kitchen event", "get_current_time answered", "answer sent to telegram/42"] {
        assert!(list.stdout.contains(line), "{line:?} in {}", list.stdout);
    }
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ws.path().join("state/jobs.json")).unwrap()).unwrap();
    assert_eq!(kept["jobs"]["greet"]["ok"], true, "{kept}");
}

#[test]
fn a_job_for_a_chat_that_may_not_be_written_to_is_recorded_as_an_error() {
    let llm = FakeLlm::start(vec![Step::text("never asked")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3;
    let cron = json!({"version": 1, "jobs": [
        {"id": "stranger", "trigger": {"type": "once", "at": at},
         "action": {"type": "agent", "message": "hello", "channel": "telegram", "chat_id": "777"}}
    ]});
    std::fs::write(ws.path().join("cron.json"), cron.to_string()).unwrap();
    let child = start(&ws, &tg);
    crate::wait_for("the job's outcome", WAIT, || {
        std::fs::read_to_string(ws.path().join("state/jobs.json")).is_ok_and(|t| t.contains("stranger"))
    });
    let out = stop(child);
    out.expect_ok();
    let list = ws.run(&["cron", "list"]);
    assert!(list.stdout.contains("last: not run at") && list.stdout.contains("unpaired or gone"), "{}", list.stdout);
    assert!(llm.requests().is_empty(), "the model was not asked");
    assert!(tg.sent().is_empty(), "nothing went to the stranger");
}
