//! The OpenAI Chat Completions shapes: completion objects, chunk streams, tool calls.

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::client::{Api, Reply};

/// The chunks of a stream, asserting it ends with `[DONE]` and that the rest are chunk objects
/// sharing one id.
fn chunks(reply: &Reply) -> Vec<Value> {
    assert_eq!(reply.body_error, None);
    let events = reply.events();
    assert!(events.iter().all(|(name, _)| name.is_none()), "OpenAI streams are data-only");
    let (last, rest) = events.split_last().unwrap();
    assert_eq!(last.1, "[DONE]");
    let chunks: Vec<Value> = rest.iter().map(|(_, d)| serde_json::from_str(d).unwrap()).collect();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], chunks[0]["id"]);
        assert_eq!(c["model"], "gpt-test");
        assert!(c["created"].is_u64());
    }
    assert!(chunks[0]["id"].as_str().unwrap().starts_with("chatcmpl-"));
    chunks
}

fn delta(chunk: &Value) -> &Value {
    &chunk["choices"][0]["delta"]
}

#[tokio::test]
async fn text_answer_is_a_chat_completion() {
    let llm = FakeLlm::start(vec![Step::text("Hello there, friend!")]);
    let reply = Api::OpenAi.ask(llm.addr(), false).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(body["object"], "chat.completion");
    assert!(body["created"].as_u64().unwrap() > 1_600_000_000);
    assert_eq!(body["model"], "gpt-test");
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "Hello there, friend!");
    assert!(choice["message"].get("tool_calls").is_none(), "no tool_calls key without calls");
    let usage = &body["usage"];
    let (p, c) = (usage["prompt_tokens"].as_u64().unwrap(), usage["completion_tokens"].as_u64().unwrap());
    assert!(p > 0 && c > 0);
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), p + c);
}

#[tokio::test]
async fn tool_calls_carry_arguments_as_a_json_string() {
    let llm = FakeLlm::start(vec![
        Step::tool_calls([("get_current_time", json!({})), ("search", json!({"q": "rust"}))]),
        Step::tool_call("x", json!({})).with_text("First, some words."),
    ]);
    let body = Api::OpenAi.ask(llm.addr(), false).await.json();
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null, "content is null when only tools are called");
    let calls = choice["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    for (call, (name, input)) in calls.iter().zip([("get_current_time", json!({})), ("search", json!({"q": "rust"}))]) {
        assert!(call["id"].as_str().unwrap().starts_with("call_"));
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], name);
        let args = call["function"]["arguments"].as_str().expect("arguments is a string");
        assert_eq!(serde_json::from_str::<Value>(args).unwrap(), input);
    }
    assert_ne!(calls[0]["id"], calls[1]["id"]);
    let with_text = Api::OpenAi.ask(llm.addr(), false).await.json();
    assert_eq!(with_text["choices"][0]["message"]["content"], "First, some words.");
    assert_ne!(with_text["choices"][0]["message"]["tool_calls"][0]["id"], calls[0]["id"]);
}

#[tokio::test]
async fn streamed_text_with_usage_ends_with_a_usage_chunk_then_done() {
    let text = "Streaming is fun, one piece at a time.";
    let llm = FakeLlm::start(vec![Step::text(text)]);
    let mut req = Api::OpenAi.request("hi", true);
    req["stream_options"] = json!({"include_usage": true});
    let reply = Api::OpenAi.post(llm.addr(), &req).await;
    assert!(reply.header("content-type").unwrap().starts_with("text/event-stream"));
    let chunks = chunks(&reply);
    let (usage_chunk, rest) = chunks.split_last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    let usage = &usage_chunk["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
    assert!(rest.iter().all(|c| c["usage"].is_null() && c.get("usage").is_some()), "other chunks carry usage: null");
    assert_eq!(*delta(&rest[0]), json!({"role": "assistant", "content": ""}));
    let (finish, pieces) = rest[1..].split_last().unwrap();
    assert_eq!(*delta(finish), json!({}));
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(pieces.len() >= 3, "text arrives in several pieces");
    let streamed: String = pieces
        .iter()
        .map(|c| {
            assert_eq!(c["choices"][0]["finish_reason"], Value::Null);
            delta(c)["content"].as_str().unwrap()
        })
        .collect();
    assert_eq!(streamed, text);
}

#[tokio::test]
async fn streamed_tool_calls_open_with_id_and_name_then_send_only_arguments() {
    let inputs = [json!({"city": "Paris"}), json!({"q": "rust", "n": 2})];
    let llm = FakeLlm::start(vec![
        Step::tool_calls([("get_weather", inputs[0].clone()), ("search", inputs[1].clone())]).with_text("Hm."),
    ]);
    let chunks = chunks(&Api::OpenAi.ask(llm.addr(), true).await);
    assert!(chunks.iter().all(|c| c.get("usage").is_none()), "no usage without include_usage");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(*delta(last), json!({}));
    let text: String = chunks.iter().filter_map(|c| delta(c)["content"].as_str()).collect();
    assert_eq!(text, "Hm.");
    let first_call = chunks.iter().position(|c| delta(c).get("tool_calls").is_some()).unwrap();
    assert!(chunks[..first_call].iter().all(|c| delta(c).get("content").is_some()), "text comes before the calls");
    for (index, (name, input)) in ["get_weather", "search"].iter().zip(&inputs).enumerate() {
        let parts: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| delta(c)["tool_calls"].as_array())
            .flatten()
            .filter(|t| t["index"] == index)
            .collect();
        let head = parts[0];
        assert!(head["id"].as_str().unwrap().starts_with("call_"));
        assert_eq!(head["type"], "function");
        assert_eq!(head["function"], json!({"name": name, "arguments": ""}));
        assert!(parts.len() >= 3, "arguments arrive in several pieces");
        let mut args = String::new();
        for more in &parts[1..] {
            let mut keys: Vec<&String> = more.as_object().unwrap().keys().collect();
            keys.sort();
            assert_eq!(keys, ["function", "index"], "later deltas carry only index and arguments");
            assert_eq!(more["function"].as_object().unwrap().len(), 1);
            args.push_str(more["function"]["arguments"].as_str().unwrap());
        }
        assert_eq!(serde_json::from_str::<Value>(&args).unwrap(), *input);
    }
}
