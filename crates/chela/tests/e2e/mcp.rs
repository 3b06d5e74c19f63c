//! A turn through an MCP server: the fake LLM calls a tool of the fixture server written with
//! the official Python SDK (`tests/mcp/fixtures/server.py`), and the tool's result reaches
//! the next request, on both wire formats.

use std::path::PathBuf;

use chela_testkit::{FakeLlm, Step};
use serde_json::json;

use crate::{Provider, Ws, body, tool_names};

#[test]
fn the_model_calls_an_mcp_tool_and_sees_its_result() {
    let python = chela_testkit::peers::mcp_python();
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
