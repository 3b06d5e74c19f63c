//! A turn through an MCP server: the fake LLM calls a tool of the fixture server written with
//! the official Python SDK (`tests/mcp/fixtures/server.py`), and the tool's result reaches
//! the next request, on both wire formats.

use std::path::PathBuf;

use chela_testkit::{FakeLlm, Step};
use serde_json::json;

use crate::{Provider, Ws, body, tool_names};

/// The venv with the SDK, installed under target/ by the peers' script on first use.
pub fn python() -> String {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dest = repo.join("target/mcp-peers");
    let ok = std::process::Command::new("bash")
        .arg(repo.join("tests/mcp/install-peers.sh"))
        .arg(&dest)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "installing the MCP test peers failed (needs python3 with venv, npm, and the registries)");
    dest.join("venv/bin/python").display().to_string()
}

#[test]
fn the_model_calls_an_mcp_tool_and_sees_its_result() {
    let python = python();
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/fixtures/server.py");
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![
            Step::tool_call("mcp_fx_echo", json!({"text": "from the model"})),
            Step::text("The server said it."),
        ]);
        let ws = Ws::for_llm(provider, &llm, "");
        let config = std::fs::read_to_string(ws.path().join("chela.toml")).unwrap();
        ws.write_config(&format!(
            "{config}\n[mcp.servers.fx]\ncommand = {python:?}\nargs = [{:?}, \"--era\", \"legacy\"]\n",
            server.display().to_string()
        ));
        let out = ws.chat("Ask the fixture to echo.", &[]);
        out.expect_ok();
        assert_eq!(out.stdout, "The server said it.\n", "{provider:?}");
        let first = body(&llm, 0);
        let offered = tool_names(provider, &first);
        assert!(
            offered.contains(&"mcp_fx_echo".to_owned()) && offered.contains(&"mcp_fx_many_t6".to_owned()),
            "{offered:?}"
        );
        let second = body(&llm, 1).to_string();
        assert!(second.contains("echo: from the model (era 2025-11-25)"), "{provider:?}: {second}");
    }
}
