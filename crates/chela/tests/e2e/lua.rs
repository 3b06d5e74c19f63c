//! Lua through the model: the fake LLM calls `lua_run`, whose script calls tools with
//! `cap.call`; the result goes back to the model and the tool's effect is on disk.

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::{Provider, Ws, body, conversation, tool_names};

const SCRIPT: &str = r#"local cap = require("cap")
local cjson = require("cjson")
function run(args)
  local ok, r = cap.call("file_write", cjson.encode({path = "notes/from-lua.md", content = args.text}))
  print("wrote", ok)
  return {ok = ok, words = #args.text}
end"#;

#[test]
fn the_model_runs_a_script_that_calls_a_tool() {
    // Lua is hidden from the first request; the model unlocks it by need.
    let llm = FakeLlm::start(vec![
        Step::tool_call("tools_unlock", json!({"group": "lua"})),
        Step::tool_call("lua_run", json!({"code": SCRIPT, "args": {"text": "hello from lua"}})),
        Step::text("Done."),
    ]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let out = ws.chat("Write a note with a script.", &[]);
    out.expect_ok().stderr_has("⚙ lua_run");
    assert_eq!(out.stdout, "Done.\n");
    assert!(!tool_names(Provider::Anthropic, &body(&llm, 0)).iter().any(|t| t == "lua_run"));
    assert!(tool_names(Provider::Anthropic, &body(&llm, 1)).iter().any(|t| t == "lua_run"));
    let msgs = conversation(Provider::Anthropic, &body(&llm, 2));
    let result = &msgs[4]["content"][0];
    assert_eq!(result["type"], "tool_result", "{result}");
    assert_ne!(result["is_error"], true, "{result}");
    let text = match &result["content"] {
        Value::String(s) => s.clone(),
        other => other[0]["text"].as_str().unwrap_or_default().to_owned(),
    };
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v, json!({"result": {"ok": true, "words": 14}, "output": "wrote\ttrue"}));
    assert_eq!(std::fs::read_to_string(ws.path().join("notes/from-lua.md")).unwrap(), "hello from lua");
}
