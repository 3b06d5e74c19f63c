//! The MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`, pinned by
//! tests/mcp-serve/install.sh) lists and calls Chela's tools over stdio (`chela mcp serve`) and
//! Streamable HTTP (`chela run`'s `/mcp`), as a user checking a server by hand would.

use std::process::Command;

use chela_testkit::{FakeLlm, Step};
use serde_json::Value;

use crate::gateway::Running;
use crate::mcp_serve::{SERVED, peers};
use crate::{Provider, Ws};

/// `mcp-inspector --cli TARGET… METHOD…`, its stdout as JSON.
fn inspector(ws: &Ws, target: &[String], method: &[&str], context: &dyn Fn() -> String) -> Value {
    let launcher = peers().join("node/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let out = Command::new("node")
        .arg(launcher)
        .arg("--cli")
        .args(target)
        .args(method)
        .env_clear()
        // Its catalog of servers goes under HOME: the test's own.
        .env("HOME", ws.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .expect("cannot run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), context());
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", context()))
}

fn names(list: &Value) -> String {
    let mut n: Vec<&str> = list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    n.sort_unstable();
    n.join(",")
}

fn text(result: &Value) -> (bool, String) {
    let text = result["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect();
    (result["isError"].as_bool().unwrap_or(false), text)
}

#[test]
fn the_inspector_cli_lists_and_calls_tools_over_stdio_and_http() {
    let llm = FakeLlm::start(vec![Step::text("hello, inspector")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    // The server's command, with the workspace given the way `-e` passes it on.
    let stdio = vec![
        "-e".to_owned(),
        format!("CHELA_HOME={}", ws.path().display()),
        "-e".to_owned(),
        format!("HOME={}", ws.home().display()),
        env!("CARGO_BIN_EXE_chela").to_owned(),
        "mcp".to_owned(),
        "serve".to_owned(),
    ];
    let none = String::new;
    assert_eq!(names(&inspector(&ws, &stdio, &["--method", "tools/list"], &none)), SERVED);
    let stored = inspector(
        &ws,
        &stdio,
        &["--method", "tools/call", "--tool-name", "memory_store", "--tool-arg", "content=the inspector was here"],
        &none,
    );
    assert!(!text(&stored).0, "{stored}");

    let d = Running::start(&ws);
    let http = vec![
        format!("http://{}/mcp", d.addr),
        "--transport".to_owned(),
        "http".to_owned(),
        "--header".to_owned(),
        format!("Authorization: Bearer {}", crate::GATEWAY_TOKEN),
    ];
    let ctx = || d.stderr();
    assert_eq!(names(&inspector(&ws, &http, &["--method", "tools/list"], &ctx)), SERVED);
    // The fact stored over stdio is in the daemon's memory.
    let recall = inspector(
        &ws,
        &http,
        &["--method", "tools/call", "--tool-name", "memory_recall", "--tool-arg", "query=inspector"],
        &ctx,
    );
    let (error, found) = text(&recall);
    assert!(!error && found.contains("the inspector was here"), "{recall}");
    let chat =
        inspector(&ws, &http, &["--method", "tools/call", "--tool-name", "chat", "--tool-arg", "message=hi"], &ctx);
    assert_eq!(text(&chat), (false, "hello, inspector".to_owned()), "{chat}");
}
