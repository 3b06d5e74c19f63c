//! The daemon's first request: `chela run` with its channels (Telegram, Feishu, the gateway's
//! console) offers as few tools as the terminal chat, and everything else stays one
//! `tools_unlock` away. Measured on what the model is sent, so a group that becomes visible
//! again (here or in a channel) fails it.

use std::time::Duration;

use chela_testkit::feishu::{FakeFeishu, FeishuOptions};
use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::telegram::{OWNER, TOKEN, start, stop, ws_for};
use crate::{Provider, wait_for};

const WAIT: Duration = Duration::from_secs(30);

/// Most tools offered before anything is unlocked (as the terminal chat's budget test).
const MAX_TOOLS: usize = 16;
/// Most bytes of the `tools` array, Anthropic form, without the prompt cache's breakpoint.
const MAX_BYTES: usize = 4096;

/// The tool names of a recorded request.
fn names(body: &Value) -> Vec<String> {
    body["tools"].as_array().into_iter().flatten().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn the_daemons_first_request_keeps_the_tool_budget_and_the_rest_is_one_unlock_away() {
    let llm = FakeLlm::start(vec![
        Step::tool_call("tools_unlock", json!({"group": "scheduler"})),
        Step::tool_call("cron_list", json!({})),
        Step::text("No jobs yet."),
    ]);
    let tg = chela_testkit::telegram::FakeTelegram::start(TOKEN);
    let feishu = FakeFeishu::start(FeishuOptions::default());
    let ws = ws_for(
        Provider::Anthropic,
        &llm,
        &tg,
        &format!(
            "\n[channels.feishu]\napp_id = \"cli_test\"\napp_secret = \"secret-test\"\napi_base = \"{}\"\nallow_from = [\"*\"]\n",
            feishu.base_url()
        ),
    );
    let child = start(&ws, &tg);
    // Both channels run (and so have registered their send tools) before the first message.
    wait_for("the Feishu long connection", WAIT, || feishu.ws_open() == 1);
    tg.push_text(OWNER, OWNER, "which reminders do I have?");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.chat_id == OWNER));
    let out = stop(child);
    assert_eq!(sent.last().map(|s| s.text.as_str()), Some("No jobs yet."), "{}", out.stderr);

    let reqs: Vec<Value> = llm.requests().iter().map(|r| r.json.clone().unwrap()).collect();
    let first = &reqs[0];
    let mut tools = first["tools"].as_array().unwrap().clone();
    for t in &mut tools {
        t.as_object_mut().unwrap().remove("cache_control");
    }
    let bytes = serde_json::to_string(&tools).unwrap().len();
    let offered = names(first);
    eprintln!("the daemon's first request: {} tools, {bytes} B of tool JSON: {offered:?}", offered.len());
    assert!(offered.len() <= MAX_TOOLS, "{} tools offered: {offered:?}", offered.len());
    assert!(bytes <= MAX_BYTES, "{bytes} bytes of tools: {offered:?}");
    // Nothing the daemon or its channels add is lost: tools_unlock names each of their groups.
    let unlock = tools.iter().find(|t| t["name"] == "tools_unlock").unwrap()["description"].as_str().unwrap();
    for group in ["im", "scheduler", "router", "telegram", "feishu", "local"] {
        let named = [" ", ",", "."].iter().any(|end| unlock.contains(&format!("{group}{end}")));
        assert!(named, "tools_unlock does not name {group}: {unlock}");
    }
    // MimiClaw's cron tools come with the unlock, in the same turn, and work.
    let after = names(&reqs[1]);
    for tool in ["cron_add", "cron_list", "cron_remove"] {
        assert!(after.contains(&tool.to_owned()), "{tool} not offered after the unlock: {after:?}");
        assert!(!offered.contains(&tool.to_owned()), "{tool} was offered before the unlock");
    }
    let answered = reqs[2]["messages"].to_string();
    assert!(!answered.contains("\"is_error\":true"), "a call failed: {answered}");
}
