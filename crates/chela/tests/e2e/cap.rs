//! `chela cap`: groups switched off or hidden, as the model and a person see them.

use std::fs;

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::{Provider, Ws, body, conversation, tool_names};

/// The tools offered in request `i`.
fn offered(llm: &FakeLlm, i: usize) -> Vec<String> {
    tool_names(Provider::Anthropic, &body(llm, i))
}

fn has_prefix(tools: &[String], prefix: &str) -> bool {
    tools.iter().any(|t| t.starts_with(prefix))
}

#[test]
fn list_shows_the_groups_and_time_is_core() {
    let ws = Ws::empty();
    // Without a search key the web group is hidden from the model (it could only fail).
    ws.run(&["cap", "list"]).expect_ok().stdout_has("web  [enabled, hidden from the model]");
    ws.write_config("[search]\ntavily_key = \"tvly-e2e\"\n");
    let out = ws.run(&["cap", "list"]);
    out.expect_ok();
    let time = out.stdout.lines().find(|l| l.starts_with("time ")).unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(time.contains("[core (always on)]"), "{time}");
    for group in ["files", "memory", "web", "http"] {
        let line = out.stdout.lines().find(|l| l.starts_with(&format!("{group} ")));
        let line = line.unwrap_or_else(|| panic!("no {group} group:\n{}", out.stdout));
        assert!(line.contains("[enabled, visible]"), "{line}");
    }
    for tool in ["get_current_time", "file_read", "memory_store", "web_search", "http_request"] {
        out.stdout_has(&format!("    {tool}"));
    }
    ws.run(&["cap", "disable", "time"]).expect_code(1).stderr_has("core group");
    ws.run(&["cap", "disable", "filez"]).expect_code(1).stderr_has("filez");
}

#[test]
fn a_disabled_group_is_gone_for_the_model_and_for_people() {
    let llm = FakeLlm::start(vec![Step::text("one"), Step::text("two")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    ws.run(&["cap", "disable", "files"]).expect_ok().stdout_has("files: disabled");
    ws.run(&["cap", "list"]).expect_ok().stdout_has("files  [disabled]");

    ws.chat("hi", &[]).expect_ok();
    let tools = offered(&llm, 0);
    assert!(!has_prefix(&tools, "file_"), "disabled tools offered: {tools:?}");
    assert!(tools.iter().any(|t| t == "get_current_time") && has_prefix(&tools, "memory_"), "{tools:?}");

    let out = ws.run(&["cap", "call", "file_read", r#"{"path":"x"}"#]);
    out.expect_code(1).stderr_has("group `files` is disabled").stderr_has("chela cap enable files");
    assert_eq!(out.stdout, "");

    ws.run(&["cap", "enable", "files"]).expect_ok().stdout_has("files: enabled");
    ws.chat("hi again", &[]).expect_ok();
    assert!(offered(&llm, 1).iter().any(|t| t == "file_read"), "{:?}", offered(&llm, 1));
    // Enabled again, the tool works by hand: the file is missing, and it says so.
    ws.run(&["cap", "call", "file_read", r#"{"path":"x"}"#]).expect_code(1).stderr_has("file_read: ");
}

#[test]
fn a_hidden_group_works_by_hand_but_the_model_cannot_use_it() {
    let llm = FakeLlm::start(vec![
        Step::tool_call("memory_store", json!({"content": "sneaky"})),
        Step::text("I could not remember that."),
    ]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    ws.run(&["cap", "hide", "memory"]).expect_ok().stdout_has("memory: hidden from the model");

    let out = ws.run(&["cap", "call", "memory_store", r#"{"content":"by hand"}"#]);
    out.expect_ok().stdout_has("stored as ");

    let out = ws.chat("Remember this.", &[]);
    out.expect_ok().stderr_has("⚙ memory_store").stderr_has(" … error (");
    assert_eq!(out.stdout, "I could not remember that.\n");
    let tools = offered(&llm, 0);
    assert!(!has_prefix(&tools, "memory_"), "hidden tools offered: {tools:?}");
    assert!(has_prefix(&tools, "file_"), "{tools:?}");

    let msgs = conversation(Provider::Anthropic, &body(&llm, 1));
    let result = &msgs[2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{result}");
    assert_eq!(result["is_error"], true, "{result}");
    let text = match &result["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    assert!(text.contains("its group `memory` is hidden"), "{text}");

    // Only the entry stored by hand exists.
    let list = ws.run(&["cap", "call", "memory_list"]);
    list.expect_ok().stdout_has("by hand");
    assert!(!list.stdout.contains("sneaky"), "{}", list.stdout);

    ws.run(&["cap", "show", "memory"]).expect_ok().stdout_has("memory: visible to the model");
    ws.run(&["cap", "list"]).expect_ok().stdout_has("memory  [enabled, visible]");
}

#[test]
fn calling_the_time_tool_by_hand_prints_json() {
    let ws = Ws::empty();
    let out = ws.run(&["cap", "call", "get_current_time"]);
    out.expect_ok();
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    assert!(v["iso"].is_string() && v["unix"].as_i64().is_some_and(|u| u > 1_700_000_000), "{v}");

    let out = ws.run(&["cap", "call", "get_current_time", r#"{"timezone":"Asia/Shanghai"}"#]);
    let v: Value = serde_json::from_str(out.expect_ok().stdout.trim()).unwrap();
    assert_eq!(v["timezone"], "Asia/Shanghai");
    assert!(v["iso"].as_str().unwrap().ends_with("+08:00"), "{v}");

    ws.run(&["cap", "call", "get_current_time", "[1]"]).expect_code(1).stderr_has("must be a JSON object");
    ws.run(&["cap", "call", "no_such_tool"]).expect_code(1).stderr_has("no_such_tool");
}

/// Years of memory through the real binary: more entries than the chip's 1,000, a note, and a
/// Chinese fact; `chela memory reindex` builds the index, and `cap call` recalls and searches
/// through it (an edit by hand is seen without a reindex).
#[test]
fn memory_reindex_and_recall_through_the_index() {
    let ws = Ws::empty();
    fs::create_dir_all(ws.path().join("memory")).unwrap();
    let mut lines = String::new();
    for i in 1..=1500 {
        let content = if i == 700 { "The needle is a green kiwi".to_owned() } else { format!("filler fact {i}") };
        lines.push_str(&json!({"id": format!("m{i}"), "content": content, "created": i, "updated": i}).to_string());
        lines.push('\n');
    }
    lines.push_str(&json!({"id": "m1501", "content": "用户喜欢喝绿茶", "created": 1, "updated": 1}).to_string());
    lines.push('\n');
    fs::write(ws.path().join("memory/entries.jsonl"), lines).unwrap();
    fs::write(ws.path().join("memory/2024-07-14.md"), "# 2024-07-14\n\n- 18:00 Planted the walnut sapling\n").unwrap();
    ws.run(&["memory", "reindex"])
        .expect_ok()
        .stdout_has("Indexed 1501 entries and 2 note passages from 2 files into state/memory-index");
    ws.run(&["cap", "call", "memory_recall", r#"{"query":"needle kiwi"}"#])
        .expect_ok()
        .stdout_has("[m700] The needle is a green kiwi");
    ws.run(&["cap", "call", "memory_recall", r#"{"query":"我喜欢什么茶"}"#])
        .expect_ok()
        .stdout_has("[m1501] 用户喜欢喝绿茶");
    ws.run(&["cap", "call", "memory_search", r#"{"query":"walnut"}"#])
        .expect_ok()
        .stdout_has("memory/2024-07-14.md:3: - 18:00 Planted the walnut sapling");
    fs::write(ws.path().join("memory/2024-07-14.md"), "# 2024-07-14\n\n- 18:00 Planted the oak sapling\n").unwrap();
    ws.run(&["cap", "call", "memory_search", r#"{"query":"walnut"}"#])
        .expect_ok()
        .stdout_has("Nothing in the notes matches");
    ws.run(&["memory", "rebuild"]).expect_code(2).stderr_has("chela memory reindex");
}
