//! The official MCP clients of the 2026-07-28 revision listen for Chela's tool list changes
//! (`subscriptions/listen`) over stdio (`chela mcp serve`) and HTTP (`chela run`'s `/mcp`):
//! PyPI `mcp` 2.3.0's `Client.listen()` and the TypeScript SDK v2 client
//! (`@modelcontextprotocol/client`). Each opens its stream, `chela cap disable` (or `enable`)
//! changes the served tools from another process, and the client must be told, then list the
//! new tools. tests/mcp-serve/install.sh installs the clients under target/.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use chela_testkit::FakeLlm;

use crate::gateway::Running;
use crate::mcp_serve::{SERVED as ALL, peers, stdio_args};
use crate::{Provider, Ws};

/// Runs a listening client; once it printed `ready` (its stream is acknowledged), runs
/// `chela cap change…` and returns every `KEY=VALUE` line the client printed by its end.
fn listen_through(
    mut client: Command,
    ws: &Ws,
    ready: &str,
    change: &[&str],
    context: &dyn Fn() -> String,
) -> HashMap<String, String> {
    let mut child = client.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("cannot start the client");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut got = HashMap::new();
    let mut line = String::new();
    // The client gives up by itself after 30 s, so these reads end.
    loop {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("the client ended before it listened: {got:?}\n{err}\n{}", context());
        }
        if let Some((k, v)) = line.trim_end().split_once('=') {
            got.insert(k.to_owned(), v.to_owned());
        }
        if got.contains_key(ready) {
            break;
        }
    }
    let mut args = vec!["cap"];
    args.extend_from_slice(change);
    ws.run(&args).expect_ok();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{got:?}\n{rest}\n{}\n{}", String::from_utf8_lossy(&out.stderr), context());
    got.extend(rest.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())));
    got
}

fn client(program: PathBuf, script: &str, target: &[String], ws: &Ws) -> Command {
    let mut c = Command::new(program);
    c.arg(script)
        .args(target)
        .env_clear()
        .env("HOME", ws.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CHELA_GATEWAY_TOKEN", crate::GATEWAY_TOKEN);
    c
}

fn python(target: &[String], ws: &Ws) -> Command {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-serve/listen.py");
    client(peers().join("venv/bin/python"), &script.display().to_string(), target, ws)
}

fn node(target: &[String], ws: &Ws) -> Command {
    client(PathBuf::from("node"), &peers().join("node/listen.mjs").display().to_string(), target, ws)
}

#[test]
fn the_python_sdk_listens_for_tool_changes_over_stdio_and_http() {
    let llm = FakeLlm::start(vec![]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut stdio = vec!["stdio".to_owned()];
    stdio.extend(stdio_args(&ws));
    let got = listen_through(python(&stdio, &ws), &ws, "HONORED", &["disable", "memory"], &String::new);
    assert_eq!(
        (got["HONORED"].as_str(), got["EVENT"].as_str(), got["TOOLS"].as_str()),
        ("True", "ToolsListChanged", "chat")
    );

    let d = Running::start(&ws);
    let url = vec![format!("http://{}/mcp", d.addr)];
    let got = listen_through(python(&url, &ws), &ws, "HONORED", &["enable", "memory"], &|| d.stderr());
    assert_eq!(
        (got["HONORED"].as_str(), got["EVENT"].as_str(), got["TOOLS"].as_str()),
        ("True", "ToolsListChanged", ALL)
    );
}

#[test]
fn the_typescript_v2_client_listens_for_tool_changes_over_stdio_and_http() {
    let llm = FakeLlm::start(vec![]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut stdio = vec!["stdio".to_owned()];
    stdio.extend(stdio_args(&ws));
    let honored = r#"{"toolsListChanged":true}"#;
    let got = listen_through(node(&stdio, &ws), &ws, "HONORED", &["disable", "memory"], &String::new);
    assert_eq!((got["ERA"].as_str(), got["HONORED"].as_str(), got["TOOLS"].as_str()), ("modern", honored, "chat"));
    assert_eq!(got["CLOSED"], "local", "{got:?}");

    let d = Running::start(&ws);
    let url = vec![format!("http://{}/mcp", d.addr)];
    let got = listen_through(node(&url, &ws), &ws, "HONORED", &["enable", "memory"], &|| d.stderr());
    assert_eq!((got["ERA"].as_str(), got["HONORED"].as_str(), got["TOOLS"].as_str()), ("modern", honored, ALL));
    assert_eq!(got["CLOSED"], "local", "{got:?}");
}
