//! What a new user meets first, through the real binary: the small commands that must say
//! the right thing (job names, addresses, notes only when they apply), the files a fresh
//! workspace gets, and `chela mcp serve` fed by a pipe that closes at once.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::gateway::Running;
use crate::{Ws, finish};

#[test]
fn cron_list_shows_each_jobs_name() {
    let ws = Ws::empty();
    let job = r#"{"id":"tea","name":"Brew the tea","trigger":{"type":"interval","every_s":600},"action":{"type":"cap","name":"get_current_time"}}"#;
    ws.run(&["cron", "add", job]).expect_ok();
    let unnamed = r#"{"id":"plain","trigger":{"type":"interval","every_s":600},"action":{"type":"cap","name":"get_current_time"}}"#;
    ws.run(&["cron", "add", unnamed]).expect_ok();
    let list = ws.run(&["cron", "list"]);
    list.expect_ok().stdout_has("tea  active").stdout_has("    name: Brew the tea");
    assert_eq!(list.stdout.matches("name:").count(), 1, "a job without a name gets no name line:\n{}", list.stdout);
}

#[test]
fn a_control_character_in_a_jobs_name_never_reaches_the_terminal() {
    let ws = Ws::empty();
    let job = r#"{"id":"x","name":"evil\u001b[2Jname","trigger":{"type":"interval","every_s":600},"action":{"type":"cap","name":"get_current_time"}}"#;
    ws.run(&["cron", "add", job]).expect_ok();
    let list = ws.run(&["cron", "list"]);
    list.expect_ok().stdout_has("name: evil [2Jname");
    assert!(!list.stdout.contains('\u{1b}'), "{:?}", list.stdout);
}

/// `chela mcp serve` with three lines written at once and stdin closed right after.
fn serve_piped(ws: &Ws) -> Vec<Value> {
    let mut child = ws.cmd(&["mcp", "serve"]).stdin(Stdio::piped()).spawn().unwrap();
    let lines = concat!(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
        "\n",
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(lines.as_bytes()).unwrap();
    drop(stdin);
    let out = finish(child, Duration::from_secs(20));
    out.expect_ok();
    out.stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

#[test]
fn mcp_serve_answers_everything_read_before_stdin_ends_every_run() {
    let ws = Ws::empty();
    for run in 0..10 {
        let answers = serve_piped(&ws);
        let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
        assert_eq!(ids, [&Value::from(0), &Value::from(1)], "run {run}: {answers:?}");
        assert!(answers[1]["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "run {run}: {answers:?}");
    }
}

#[test]
fn mcp_endpoint_add_prints_the_address_the_gateway_listens_on() {
    for (listen, dial) in [("127.0.0.1:23456", "ws://127.0.0.1:23456/"), ("0.0.0.0:23457", "ws://127.0.0.1:23457/")] {
        let mut ws = Ws::empty();
        ws.set_env("CHELA_GATEWAY__LISTEN", listen);
        let out = ws.run(&["mcp", "endpoint", "add", "bench"]);
        out.expect_ok().stdout_has(&format!("MCP_ENDPOINT='{dial}"));
        assert!(!out.stdout.contains("18789"), "{}", out.stdout);
    }
}

#[test]
fn restart_notes_only_when_a_daemon_serves_this_workspace() {
    let ws = Ws::empty();
    let out = ws.run(&["config", "set", "sessions.max_live", "9"]);
    out.expect_ok();
    assert!(!out.stderr.contains("restart"), "no daemon runs:\n{}", out.stderr);
    let out = ws.run(&["config", "unset", "sessions.max_live"]);
    assert!(!out.stderr.contains("restart"), "no daemon runs:\n{}", out.stderr);

    // A daemon on another workspace is not this one's.
    let other = Ws::empty();
    let daemon = Running::start(&other);
    let out = ws.run(&["config", "set", "sessions.max_live", "9"]);
    assert!(!out.stderr.contains("restart"), "the daemon serves another workspace:\n{}", out.stderr);
    drop(daemon);

    let daemon = Running::start(&ws);
    for key in ["sessions.max_live", "channels.telegram.token"] {
        let value = if key == "sessions.max_live" { "9" } else { "123:abc" };
        let out = ws.run(&["config", "set", key, value]);
        out.expect_ok().stderr_has(&format!("a running `chela run` reads {key} only when it starts"));
        ws.run(&["config", "unset", key]).expect_ok().stderr_has("restart it");
    }
    let out = ws.run(&["config", "set", "llm.model", "another-model"]);
    out.expect_ok();
    assert!(!out.stderr.contains("restart"), "llm.* applies to the next turn:\n{}", out.stderr);
    drop(daemon);
}

#[test]
fn a_fresh_workspace_gets_heartbeat_md_with_its_format_explained() {
    let ws = Ws::empty();
    ws.run(&["cap", "list"]).expect_ok();
    let text = std::fs::read_to_string(ws.path().join("HEARTBEAT.md")).unwrap();
    assert!(text.contains("<!--") && text.contains("heartbeat.interval") && text.contains("- [x]"), "{text}");
    // The person's edits are kept.
    std::fs::write(ws.path().join("HEARTBEAT.md"), "- [ ] water the plants\n").unwrap();
    ws.run(&["cap", "list"]).expect_ok();
    assert_eq!(std::fs::read_to_string(ws.path().join("HEARTBEAT.md")).unwrap(), "- [ ] water the plants\n");
}

#[cfg(feature = "web")]
#[test]
fn web_search_is_offered_only_with_a_search_key_and_doctor_says_how_to_set_one() {
    use chela_testkit::{FakeLlm, Step};

    use crate::{Provider, body, tool_names};
    // doctor's own test call takes a step too.
    let steps = (0..5).map(|i| Step::text(format!("answer {i}"))).collect();
    let llm = FakeLlm::start(steps);
    let mut ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    ws.chat("hi", &[]).expect_ok();
    let offered = tool_names(Provider::Anthropic, &body(&llm, 0));
    assert!(!offered.iter().any(|t| t == "web_search"), "{offered:?}");
    assert!(!body(&llm, 0).to_string().contains("use web_search"), "nor its guidance in the prompt");
    let doctor = ws.run(&["doctor"]);
    doctor.stdout_has("web search is off").stdout_has("chela config set search.tavily_key -");
    // A person who calls it by hand is told what to set.
    ws.run(&["cap", "call", "web_search", r#"{"query":"x"}"#]).expect_code(1).stderr_has("search.tavily_key");

    ws.set_env("CHELA_SEARCH__BRAVE_KEY", "brave-test-key");
    ws.chat("again", &[]).expect_ok();
    let offered = tool_names(Provider::Anthropic, &body(&llm, llm.requests().len() - 1));
    assert!(offered.iter().any(|t| t == "web_search"), "{offered:?}");
    ws.run(&["doctor"]).stdout_has("web search through Brave Search");
}

#[test]
fn one_url_parser_refuses_an_empty_or_impossible_port_everywhere_and_names_the_setting() {
    for bad in ["http://127.0.0.1:", "http://localhost:99999/v1"] {
        let ws = Ws::empty();
        let out = ws.run(&["config", "set", "llm.base_url", bad]);
        out.expect_code(1).stderr_has("chela: ").stderr_has("`llm.base_url`").stderr_has("is not a valid port");
        assert!(
            !ws.path().join("overrides.toml").exists()
                || !std::fs::read_to_string(ws.path().join("overrides.toml")).unwrap().contains(bad)
        );

        // Written by hand, the chat and doctor refuse it the same way, instead of blaming the key.
        ws.write_config(&format!("[llm]\nbase_url = \"{bad}\"\napi_key = \"k\"\n"));
        let chat = ws.chat("hi", &[]);
        chat.expect_code(1).stderr_has("llm.base_url").stderr_has("is not a valid port");
        assert!(!chat.stderr.contains("API key"), "{}", chat.stderr);
        let doctor = ws.run(&["doctor"]);
        doctor.expect_code(1).stdout_has("llm.base_url").stdout_has("is not a valid port");
    }
}

#[test]
fn a_value_after_the_key_is_a_value_even_with_a_dash() {
    let ws = Ws::empty();
    let out = ws.run(&["config", "set", "llm.max_tokens", "-5"]);
    out.expect_code(1).stderr_has("`-5` is not a valid value for `llm.max_tokens`: expected a whole number from 1");
    assert!(!out.stderr.contains("invalid option"), "{}", out.stderr);
}

#[test]
fn mistyped_commands_and_keys_get_one_suggestion_in_the_one_error_style() {
    let ws = Ws::empty();
    let out = ws.run(&["chta"]);
    out.expect_code(2).stderr_has("chela: unknown command `chta`. Did you mean `chela chat`?");
    let out = ws.run(&["config", "get", "llm.modle"]);
    out.expect_code(1).stderr_has("chela: unknown config key `llm.modle`. Did you mean `llm.model`?");
    assert!(!out.stderr.contains("llm.provider"), "one suggestion, not every key: {}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}

#[test]
fn a_toml_syntax_error_shows_the_line_and_a_caret() {
    let ws = Ws::empty();
    ws.write_config("[llm]\nmodel \"gpt-4.1\"\n");
    let out = ws.run(&["config", "show"]);
    out.expect_code(1).stderr_has("chela: ").stderr_has("chela.toml").stderr_has("line 2, column 7");
    out.stderr_has("  2 | model \"gpt-4.1\"\n    |       ^");
}

#[test]
fn version_names_the_commit_and_the_features() {
    let ws = Ws::empty();
    let out = ws.run(&["--version"]);
    out.expect_ok();
    let first = out.stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with(&format!("chela {} (commit ", env!("CARGO_PKG_VERSION"))), "{}", out.stdout);
    // Built from this checkout: the commit is git's, not "unknown".
    let head = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if let Some(head) = head {
        assert!(first.contains(&head), "{first} names {head}");
    }
    let features = out.stdout.lines().nth(1).unwrap_or_default();
    for (on, name) in
        [(cfg!(feature = "web"), "web"), (cfg!(feature = "voice"), "voice"), (cfg!(feature = "lua"), "lua")]
    {
        assert_eq!(features.split_whitespace().any(|f| f == name), on, "{features}");
    }
    assert!(features.starts_with("features: "), "{}", out.stdout);
}

/// A port nothing listens on now (bound and let go), for a daemon whose address a test names.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn status_says_whether_a_daemon_serves_this_workspace_and_what_waits() {
    let mut ws = Ws::empty();
    let port = free_port();
    ws.set_env("CHELA_GATEWAY__LISTEN", &format!("127.0.0.1:{port}"));
    let job = r#"{"id":"tea","name":"Brew the tea","trigger":{"type":"interval","every_s":600},"action":{"type":"cap","name":"get_current_time"}}"#;
    ws.run(&["cron", "add", job]).expect_ok();

    let out = ws.run(&["status"]);
    out.expect_code(3).stdout_has("chela run: not running on").stdout_has("Brew the tea");
    let json: Value = serde_json::from_str(&ws.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["running"], false, "{json}");

    // A daemon of another workspace is not this one's.
    let other = Ws::empty();
    let elsewhere = Running::start(&other);
    ws.run(&["status"]).expect_code(3);
    drop(elsewhere);

    let daemon = Running::start(&ws);
    let out = ws.run(&["status"]);
    out.expect_ok()
        .stdout_has(&format!("(pid {}, up ", daemon.pid()))
        .stdout_has(&format!("gateway:   http://127.0.0.1:{port} answers"))
        .stdout_has("channels:  telegram off, feishu off")
        .stdout_has("pairing:   no requests waiting")
        .stdout_has("  tea  Brew the tea");
    let json: Value = serde_json::from_str(&ws.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["running"], true, "{json}");
    assert_eq!(json["daemon"]["pid"], daemon.pid(), "{json}");
    assert_eq!(json["daemon"]["gateway_answers"], true, "{json}");
    assert_eq!(json["daemon"]["version"], env!("CARGO_PKG_VERSION"), "{json}");
    assert_eq!(json["next_jobs"][0]["id"], "tea", "{json}");

    // Killed without a chance to tidy up: its run.json stays, but nothing vouches for it.
    drop(daemon);
    let out = ws.run(&["status"]);
    out.expect_code(3).stdout_has("not running");
}

#[test]
fn doctor_tells_this_workspaces_daemon_from_another_ones() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut mine = Ws::empty();
    mine.set_env("CHELA_GATEWAY__LISTEN", &listen);
    let mut theirs = Ws::empty();
    theirs.set_env("CHELA_GATEWAY__LISTEN", &listen);
    let daemon = Running::start(&mine);
    let out = mine.run(&["doctor"]);
    out.stdout_has(&format!(
        "gateway address {listen} is served by a running `chela run` of this workspace (pid {})",
        daemon.pid()
    ));
    let out = theirs.run(&["doctor"]);
    out.expect_code(1)
        .stdout_has(&format!("FAIL  gateway address {listen} is served by a Chela that is not this workspace's"));
}
