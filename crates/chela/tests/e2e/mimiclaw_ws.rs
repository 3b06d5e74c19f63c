//! The real `chela run` driven over its WebSocket by a MimiClaw client written from MimiClaw's
//! documentation in Python (`websockets`, pinned; tests/mimiclaw/install.sh installs it under
//! target/): a `chat_id` override in the first message holds for the connection's later
//! messages, and a connection that names none gets an id no restart repeats.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use chela_testkit::{FakeLlm, Step};

use crate::gateway::Running;
use crate::{Provider, Ws};

/// The venv with `websockets`. A failed install fails the test with the reason.
fn peer() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new("bash").arg(root.join("tests/mimiclaw/install.sh")).output().expect("cannot run bash");
        assert!(
            out.status.success(),
            "tests/mimiclaw/install.sh failed (it needs python3 with venv and PyPI):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap())
    })
    .clone()
}

/// Runs tests/mimiclaw/client.py against daemon `d`; its `KEY=VALUE` lines.
fn client(d: &Running, ws: &Ws) -> HashMap<String, String> {
    let out = Command::new(peer().join("venv/bin/python"))
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mimiclaw/client.py"))
        .arg(format!("ws://{}/ws?token={}", d.addr, crate::GATEWAY_TOKEN))
        .env_clear()
        .env("HOME", ws.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .expect("cannot run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), d.stderr());
    stdout.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

#[test]
fn a_mimiclaw_client_keeps_its_chat_id_and_a_restart_gives_new_connections_new_ids() {
    let steps = ["noted", "blue", "hello", "noted again", "still blue", "hello again"];
    let llm = FakeLlm::start(steps.iter().map(|s| Step::text(*s)).collect());
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let d = Running::start(&ws);
    let got = client(&d, &ws);
    assert_eq!(
        (got["FIRST"].as_str(), got["SECOND"].as_str(), got["SECOND_TEXT"].as_str()),
        ("ws_override", "ws_override", "blue")
    );
    // The second message reached the model with the first one before it: one conversation.
    assert!(crate::body(&llm, 1).to_string().contains("remember: my colour is blue"), "{}", crate::body(&llm, 1));
    assert!(!crate::body(&llm, 2).to_string().contains("my colour"), "a new connection is a new chat");
    let first_own = got["OWN"].clone();
    drop(d);

    let d = Running::start(&ws);
    let again = client(&d, &ws);
    assert_eq!(again["SECOND"], "ws_override");
    for own in [&first_own, &again["OWN"]] {
        let hex = own.strip_prefix("ws_").unwrap_or_else(|| panic!("{own}"));
        assert!(hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit()), "{own}");
    }
    assert_ne!(first_own, again["OWN"], "the restarted daemon gave its first unnamed connection the old id");
}
