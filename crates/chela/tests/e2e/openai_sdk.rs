//! The real `chela run`'s OpenAI-compatible endpoint driven by real OpenAI clients, pinned and
//! installed by tests/openai/install.sh under target/: the `openai` Python SDK (chat whole and
//! streamed with usage, a client tool's round trip, refusals as the SDK's exceptions, the
//! Responses API created and streamed, a structured answer asked of an OpenAI-wire provider) and litellm with Chela as an OpenAI-compatible provider.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::gateway::Running;
use crate::{Provider, Ws};

/// The folder with the installed clients. A failed install fails the test with the reason.
fn peers() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new("bash").arg(root.join("tests/openai/install.sh")).output().expect("cannot run bash");
        assert!(
            out.status.success(),
            "tests/openai/install.sh failed (it needs python3 with venv and PyPI):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap())
    })
    .clone()
}

fn run(script: &str, d: &Running, ws: &Ws) -> HashMap<String, Value> {
    run_with(script, &[], d, ws)
}

fn run_with(script: &str, args: &[&str], d: &Running, ws: &Ws) -> HashMap<String, Value> {
    let out: Output = Command::new(peers().join("venv/bin/python"))
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/openai").join(script))
        .arg(format!("http://{}/v1", d.addr))
        .args(args)
        .env_clear()
        .env("HOME", ws.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CHELA_GATEWAY_TOKEN", crate::GATEWAY_TOKEN)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .output()
        .expect("cannot run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), d.stderr());
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), serde_json::from_str(v).unwrap_or_else(|e| panic!("{e}: {v}"))))
        .collect()
}

/// The fake's usage for request `i`: its estimate of the request body and of the answer.
fn usage(llm: &FakeLlm, i: usize, answer: &str) -> Value {
    let input = (llm.requests()[i].body.len() as u64).div_ceil(4).max(1);
    let output = (answer.len() as u64).div_ceil(4).max(1);
    json!([input, output, input + output])
}

#[test]
fn the_openai_sdk_gets_openai_semantics_from_chela() {
    let llm = FakeLlm::start(vec![
        Step::text("Ahoy from Chela"),
        Step::text("streamed from Chela"),
        Step::tool_call("get_weather", json!({"city": "Paris"})),
        Step::text("Sunny in Paris."),
        Step::text("Hello from responses"),
        Step::text("a streamed response"),
        Step::tool_call("get_weather", json!({"city": "Rome"})),
        Step::text("Warm in Rome."),
    ]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let d = Running::start(&ws);
    let got = run("client.py", &d, &ws);
    assert_eq!(got["MODELS"], json!(["chela"]));
    // Stateless: the client's system message reached the model as the caller's instructions.
    assert!(crate::body(&llm, 0)["system"].to_string().contains("Answer like a pirate."));
    assert_eq!(
        got["CHAT"],
        json!({"text": "Ahoy from Chela", "finish": "stop", "usage": usage(&llm, 0, "Ahoy from Chela")})
    );
    let streamed = "streamed from Chela";
    assert_eq!(got["STREAM"], json!({"text": streamed, "finish": "stop", "usage": usage(&llm, 1, streamed)}));
    assert_eq!(got["TOOL_CALL"], json!({"finish": "tool_calls", "name": "get_weather", "args": {"city": "Paris"}}));
    assert_eq!(got["TOOL_ANSWER"], json!({"text": "Sunny in Paris.", "finish": "stop"}));
    assert!(crate::body(&llm, 3).to_string().contains("sunny, 21 C"), "the client's tool result reached the model");

    let err = |key: &str, class: &str, status: u16, says: &str| {
        let e = &got[key];
        assert_eq!((e["class"].as_str(), e["status"].as_u64()), (Some(class), Some(u64::from(status))), "{key}: {e}");
        assert!(e["message"].as_str().unwrap().contains(says), "{key}: {e}");
    };
    err("ERR_N", "BadRequestError", 400, "`n` must be 1");
    assert_eq!(got["ERR_N"]["param"], "n");
    err("ERR_MODEL", "NotFoundError", 404, "gpt-4o");
    assert_eq!(got["ERR_MODEL"]["code"], "model_not_found");
    err("ERR_ROLE", "BadRequestError", 400, "the role `wizard`");
    err("ERR_TOOL_ID", "BadRequestError", 400, "call_nobody");
    err("ERR_FORMAT", "BadRequestError", 400, "json_object");
    err("ERR_HUGE", "BadRequestError", 400, "at most 2048");
    err("ERR_NESTED", "BadRequestError", 400, "as a string");

    let responses = &got["RESPONSES"];
    assert_eq!(responses["text"], "Hello from responses");
    assert_eq!(responses["status"], "completed");
    assert_eq!(responses["usage"], usage(&llm, 4, "Hello from responses"));
    assert!(crate::body(&llm, 4)["system"].to_string().contains("Be brief."));
    let text = "a streamed response";
    assert_eq!(got["RESPONSES_STREAM"], json!({"deltas": text, "text": text, "status": "completed"}));
    assert_eq!(got["RESPONSES_CALL"], json!({"name": "get_weather", "args": {"city": "Rome"}}));
    assert_eq!(got["RESPONSES_TOOL_ANSWER"], "Warm in Rome.");
    assert!(got["RESPONSES_ERR"].as_str().unwrap().contains("previous_response_id"), "{}", got["RESPONSES_ERR"]);
    assert_eq!(llm.requests().len(), 8, "no refused request reached the model");
}

#[test]
fn the_openai_sdks_response_format_reaches_an_openai_provider() {
    let llm = FakeLlm::start(vec![Step::text(r#"{"a":1}"#), Step::text(r#"{"n":2}"#), Step::text(r#"{"n":3}"#)]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
    let d = Running::start(&ws);
    let got = run_with("client.py", &["format"], &d, &ws);
    assert_eq!(got["FORMAT_OBJECT"], json!({"a": 1}));
    assert_eq!(got["FORMAT_SCHEMA"], json!({"n": 2}));
    assert_eq!(got["FORMAT_RESPONSES"], json!({"n": 3}));
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
        "additionalProperties": false});
    let named = json!({"type": "json_schema", "json_schema": {"name": "count", "schema": schema, "strict": true}});
    assert_eq!(crate::body(&llm, 0)["response_format"], json!({"type": "json_object"}));
    assert_eq!(crate::body(&llm, 1)["response_format"], named);
    assert_eq!(crate::body(&llm, 2)["response_format"], named, "text.format is the same request");
}

#[test]
fn litellm_uses_chela_as_an_openai_compatible_provider() {
    let llm = FakeLlm::start(vec![Step::text("hi, litellm"), Step::text("streamed to litellm")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let d = Running::start(&ws);
    let got = run("litellm_client.py", &d, &ws);
    let u = usage(&llm, 0, "hi, litellm");
    assert_eq!(got["CHAT"], json!({"text": "hi, litellm", "usage": [u[0], u[1]]}));
    assert_eq!(got["STREAM"], "streamed to litellm");
    assert!(got["ERR"].as_str().unwrap().contains("`n` must be 1"), "litellm shows Chela's sentence: {}", got["ERR"]);
    assert_eq!(llm.requests().len(), 2);
}
