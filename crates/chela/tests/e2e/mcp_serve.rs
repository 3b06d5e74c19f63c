//! `chela mcp serve` (stdio) and the real `chela run`'s `/mcp` (Streamable HTTP) driven by the
//! official MCP clients: the Python SDK (`mcp` 2.3.0) in its handshake mode and in the
//! 2026-07-28 mode, and the TypeScript SDK (`@modelcontextprotocol/sdk` 1.32.2). They list the
//! tools, call a memory tool, run a `chat` turn against the fake LLM and call an unknown tool.
//! tests/mcp-serve/install.sh installs the clients under target/ when they are missing.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::gateway::Running;
use crate::{Provider, Ws};

pub(crate) const SERVED: &str =
    "chat,memory_append_today,memory_forget,memory_list,memory_recall,memory_search,memory_store,memory_update";

/// The folder with the installed clients. A failed install fails the test with the reason.
pub(crate) fn peers() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new("bash").arg(root.join("tests/mcp-serve/install.sh")).output().expect("cannot run bash");
        assert!(
            out.status.success(),
            "tests/mcp-serve/install.sh failed (it needs python3 with venv, npm, and PyPI/npm):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap())
    })
    .clone()
}

/// The `KEY=VALUE` lines a client script printed.
fn lines(out: &std::process::Output, context: &str) -> std::collections::HashMap<String, String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}\n{context}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

fn json_of(v: &str) -> Value {
    serde_json::from_str(v).unwrap_or_else(|e| panic!("{e}: {v}"))
}

/// The stdio command for a client to start, as the test's `Ws::cmd` would run it.
pub(crate) fn stdio_args(ws: &Ws) -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_chela").to_owned(),
        "--workspace".to_owned(),
        ws.path().display().to_string(),
        "mcp".to_owned(),
        "serve".to_owned(),
    ]
}

fn python(mode: &str, target: &[String], ws: &Ws) -> std::process::Output {
    Command::new(peers().join("venv/bin/python"))
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-serve/client.py"))
        .arg(mode)
        .args(target)
        .env_clear()
        .env("HOME", ws.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CHELA_GATEWAY_TOKEN", crate::GATEWAY_TOKEN)
        .output()
        .expect("cannot run the Python client")
}

fn node(target: &[String], ws: &Ws) -> std::process::Output {
    Command::new("node")
        .arg(peers().join("node/client.mjs"))
        .args(target)
        .env_clear()
        .env("HOME", ws.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CHELA_GATEWAY_TOKEN", crate::GATEWAY_TOKEN)
        .output()
        .expect("cannot run node")
}

/// What every Python run must show; `version` is the protocol version it ended up with.
fn check_python(out: &std::process::Output, version: &str, answer: &str, context: &str) {
    let got = lines(out, context);
    assert_eq!(got["VERSION"], version, "{got:?}");
    assert_eq!(got["TOOLS"], SERVED, "{got:?}");
    assert_eq!(json_of(&got["STORED"])["error"], false, "{got:?}");
    assert!(got["RECALL"].contains("the sdk client was here"), "{got:?}");
    assert_eq!(json_of(&got["CHAT"]), json!({"error": false, "text": answer}), "{got:?}");
    let bad = json_of(&got["CHAT_ERROR"]);
    assert_eq!(bad["error"], true, "{got:?}");
    assert!(bad["text"].as_str().unwrap().contains("session"), "{got:?}");
    // A tool of a group not served (files) is unknown here.
    assert_eq!(got["UNKNOWN"], "-32602", "{got:?}");
}

#[test]
fn the_python_sdk_over_stdio_in_both_eras() {
    let llm = FakeLlm::start(vec![Step::text("hello, legacy client"), Step::text("hello, modern client")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut target = vec!["stdio".to_owned()];
    target.extend(stdio_args(&ws));
    check_python(&python("legacy", &target, &ws), "2025-11-25", "hello, legacy client", "stdio legacy");
    check_python(&python("2026-07-28", &target, &ws), "2026-07-28", "hello, modern client", "stdio 2026-07-28");
    // The turns reached the model with the clients' words, in the client's own conversation.
    assert!(crate::body(&llm, 0).to_string().contains("hello from legacy"));
    assert!(crate::body(&llm, 1).to_string().contains("hello from 2026-07-28"));
    let sessions: Vec<String> = std::fs::read_dir(ws.path().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(sessions.iter().any(|s| s.starts_with("mcp_")), "{sessions:?}");
}

#[test]
fn the_python_sdk_over_http_in_both_eras() {
    let llm = FakeLlm::start(vec![Step::text("hello over http"), Step::text("stateless over http")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let d = Running::start(&ws);
    let url = vec![format!("http://{}/mcp", d.addr)];
    check_python(&python("legacy", &url, &ws), "2025-11-25", "hello over http", &d.stderr());
    check_python(&python("2026-07-28", &url, &ws), "2026-07-28", "stateless over http", &d.stderr());
}

#[test]
fn the_typescript_sdk_over_stdio_and_http() {
    let llm = FakeLlm::start(vec![Step::text("hi, node on stdio"), Step::text("hi, node on http")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut target = vec!["stdio".to_owned()];
    target.extend(stdio_args(&ws));
    let d = Running::start(&ws);
    for (target, answer) in
        [(target, "hi, node on stdio"), (vec![format!("http://{}/mcp", d.addr)], "hi, node on http")]
    {
        let got = lines(&node(&target, &ws), &d.stderr());
        assert_eq!(got["SERVER"], "chela", "{got:?}");
        assert_eq!(got["TOOLS"], SERVED, "{got:?}");
        assert_eq!(json_of(&got["STORED"])["error"], false, "{got:?}");
        assert_eq!(json_of(&got["CHAT"]), json!({"error": false, "text": answer}), "{got:?}");
        assert_eq!(got["UNKNOWN"], "-32602", "{got:?}");
    }
    assert!(crate::body(&llm, 1).to_string().contains("hello from typescript"));
}

/// What tests/mcp-serve/cancel.py printed, checked: the slow call was given up, and the turn
/// behind it was not kept waiting for it.
fn check_cancel(out: &std::process::Output, answer: &str, context: &str) {
    let got = lines(out, context);
    assert_eq!(got["ABANDONED"], "true", "{got:?}");
    assert_eq!(got["SECOND"], answer, "{got:?}");
    let secs: f64 = got["SECOND_SECS"].parse().unwrap();
    // The slow answer would take 20 s; the second turn waits behind it unless it was stopped.
    assert!(secs < 8.0, "the cancelled turn held the next one for {secs} s: {context}");
}

fn cancel_py(mode: &str, target: &[String], ws: &Ws) -> std::process::Output {
    Command::new(peers().join("venv/bin/python"))
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-serve/cancel.py"))
        .arg(mode)
        .args(target)
        .env_clear()
        .env("HOME", ws.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CHELA_GATEWAY_TOKEN", crate::GATEWAY_TOKEN)
        .output()
        .expect("cannot run the Python client")
}

#[test]
fn the_python_sdk_cancels_a_call_over_stdio_and_http_in_both_eras() {
    let mut steps = Vec::new();
    for i in 0..4 {
        steps.push(Step::text("far too late").delay_ms(20_000));
        steps.push(Step::text(format!("quick answer {i}")));
    }
    let llm = FakeLlm::start(steps);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut stdio = vec!["stdio".to_owned()];
    stdio.extend(stdio_args(&ws));
    check_cancel(&cancel_py("legacy", &stdio, &ws), "quick answer 0", "stdio legacy");
    check_cancel(&cancel_py("2026-07-28", &stdio, &ws), "quick answer 1", "stdio 2026-07-28");
    let d = Running::start(&ws);
    let url = vec![format!("http://{}/mcp", d.addr)];
    check_cancel(&cancel_py("legacy", &url, &ws), "quick answer 2", &d.stderr());
    check_cancel(&cancel_py("2026-07-28", &url, &ws), "quick answer 3", &d.stderr());
}
