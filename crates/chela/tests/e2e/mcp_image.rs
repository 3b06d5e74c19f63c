//! An MCP tool's image reaches the model as an image: the fixture server's `tiny_image` (a 1x1
//! PNG, written with the official Python SDK) is called by the fake LLM through the real
//! binary, and the next request carries it in each wire format's own shape. The session file
//! keeps a note, not the image.

use std::path::PathBuf;

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::{Provider, Ws, body};

/// The fixture's PNG (tests/mcp/fixtures/server.py), 70 bytes.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn with_fixture(ws: &Ws, python: &str, extra: &str) {
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/fixtures/server.py");
    let config = std::fs::read_to_string(ws.path().join("chela.toml")).unwrap();
    ws.write_config(&format!(
        "{config}\n{extra}\n[mcp.servers.fx]\ncommand = {python:?}\nargs = [{:?}, \"--era\", \"legacy\"]\n",
        server.display().to_string()
    ));
}

/// The messages of request `i` after the first user message.
fn messages(llm: &FakeLlm, i: usize) -> Vec<Value> {
    body(llm, i)["messages"].as_array().unwrap().clone()
}

#[test]
fn an_mcp_servers_image_reaches_the_model_as_an_image_in_both_wire_formats() {
    let python = chela_testkit::peers::mcp_python();
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![Step::tool_call("mcp_fx_tiny_image", json!({})), Step::text("A tiny image.")]);
        let ws = Ws::for_llm(provider, &llm, "");
        with_fixture(&ws, &python, "");
        let out = ws.chat("Show me the fixture's image.", &[]);
        out.expect_ok();
        assert_eq!(out.stdout, "A tiny image.\n", "{provider:?}");
        let sent = messages(&llm, 1);
        match provider {
            Provider::Anthropic => {
                let result = &sent.last().unwrap()["content"][0];
                assert_eq!(result["type"], "tool_result", "{result}");
                assert_eq!(
                    result["content"],
                    json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]),
                    "{result}"
                );
            }
            Provider::OpenAi => {
                let n = sent.len();
                let (tool, user) = (&sent[n - 2], &sent[n - 1]);
                assert_eq!((tool["role"].as_str(), tool["content"].as_str()), (Some("tool"), Some("")), "{tool}");
                let call_id = tool["tool_call_id"].as_str().unwrap();
                assert_eq!(
                    *user,
                    json!({"role": "user", "content": [
                        {"type": "text", "text": format!("The image(s) the tool call {call_id} returned:")},
                        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}
                    ]})
                );
            }
        }
        // The session file keeps a note where the image was; the next turn loads it as text.
        let lines = ws.session("local");
        let stored = lines.iter().find(|l| l["content"][0]["type"] == "tool_result").expect("a tool result line");
        assert_eq!(stored["content"][0]["content"], "[image: image/png, 70 B]", "{provider:?}: {stored}");
        assert!(stored["content"][0].get("images").is_none(), "{stored}");
    }
}

#[test]
fn a_text_only_model_or_a_spent_bound_gets_a_note_naming_the_setting() {
    let python = chela_testkit::peers::mcp_python();
    for (setting, why) in [
        ("[model]\nvision = false", "model.vision = false"),
        ("[tools]\nmax_image_bytes = 64", "over tools.max_image_bytes"),
    ] {
        let llm = FakeLlm::start(vec![Step::tool_call("mcp_fx_tiny_image", json!({})), Step::text("ok")]);
        let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
        with_fixture(&ws, &python, setting);
        ws.chat("Show me the fixture's image.", &[]).expect_ok();
        let sent = messages(&llm, 1);
        let result = &sent.last().unwrap()["content"][0];
        let text = result["content"].as_str().unwrap_or_else(|| panic!("{setting}: text only: {result}"));
        assert!(text.starts_with("[image: image/png, 70 B; not shown: ") && text.contains(why), "{setting}: {text}");
        assert!(!body(&llm, 1).to_string().contains(PNG), "{setting}: the image was not sent");
    }
}
