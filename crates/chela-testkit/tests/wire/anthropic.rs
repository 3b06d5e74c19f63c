//! The Anthropic Messages API shapes: message objects, the SSE event flow, tool use.

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::client::Api;

/// The `type` of each event's data, asserting it matches the SSE event name.
fn event_types(reply: &crate::client::Reply) -> Vec<String> {
    reply
        .events()
        .iter()
        .map(|(name, data)| {
            let data: Value = serde_json::from_str(data).unwrap();
            let kind = data["type"].as_str().unwrap().to_string();
            assert_eq!(name.as_deref(), Some(kind.as_str()), "event name and data type differ");
            kind
        })
        .collect()
}

#[tokio::test]
async fn text_answer_is_a_message_object() {
    let llm = FakeLlm::start(vec![Step::text("Hello there, friend!")]);
    let reply = Api::Anthropic.ask(llm.addr(), false).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert!(reply.header("request-id").unwrap().starts_with("req_"));
    let body = reply.json();
    assert!(body["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(body["type"], "message");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["content"], json!([{"type": "text", "text": "Hello there, friend!"}]));
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["stop_sequence"], Value::Null);
    assert!(body["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(body["usage"]["output_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn tool_calls_are_tool_use_blocks_after_the_text() {
    let step = Step::tool_calls([("get_current_time", json!({})), ("search", json!({"q": "rust", "n": 3}))])
        .with_text("Let me check.");
    let llm = FakeLlm::start(vec![step, Step::tool_call("again", json!({}))]);
    let body = Api::Anthropic.ask(llm.addr(), false).await.json();
    assert_eq!(body["stop_reason"], "tool_use");
    let content = body["content"].as_array().unwrap();
    assert_eq!(content.len(), 3);
    assert_eq!(content[0], json!({"type": "text", "text": "Let me check."}));
    assert_eq!(content[1]["type"], "tool_use");
    assert_eq!(content[1]["name"], "get_current_time");
    assert_eq!(content[1]["input"], json!({}));
    assert_eq!(content[2]["name"], "search");
    assert_eq!(content[2]["input"], json!({"q": "rust", "n": 3}));
    let mut ids: Vec<&str> = content[1..].iter().map(|b| b["id"].as_str().unwrap()).collect();
    let again = Api::Anthropic.ask(llm.addr(), false).await.json();
    assert_eq!(again["content"].as_array().unwrap().len(), 1, "no text block when the step has no text");
    ids.push(again["content"][0]["id"].as_str().unwrap());
    assert!(ids.iter().all(|id| id.starts_with("toolu_01")), "{ids:?}");
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), 3, "tool ids repeat: {ids:?}");
}

#[tokio::test]
async fn streamed_text_follows_the_documented_event_flow() {
    let text = "Streaming is fun, one piece at a time.";
    let llm = FakeLlm::start(vec![Step::text(text)]);
    let reply = Api::Anthropic.ask(llm.addr(), true).await;
    assert_eq!(reply.status, 200);
    assert!(reply.header("content-type").unwrap().starts_with("text/event-stream"));
    assert_eq!(reply.header("content-length"), None, "a stream is chunked");
    assert_eq!(reply.body_error, None);
    let types = event_types(&reply);
    let deltas = types.iter().filter(|t| *t == "content_block_delta").count();
    assert!(deltas >= 3, "text should arrive in several pieces: {types:?}");
    let mut want = vec!["message_start", "ping", "content_block_start"];
    want.extend(std::iter::repeat_n("content_block_delta", deltas));
    want.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(types, want);

    let data = reply.event_json();
    let start = &data[0]["message"];
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        (&start["type"], &start["role"], &start["model"]),
        (&json!("message"), &json!("assistant"), &json!("claude-test"))
    );
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stop_reason"], Value::Null);
    assert!(start["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        data[2],
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    );
    let streamed: String = data[3..3 + deltas]
        .iter()
        .map(|d| {
            assert_eq!(d["index"], 0);
            assert_eq!(d["delta"]["type"], "text_delta");
            d["delta"]["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(streamed, text);
    assert_eq!(data[3 + deltas], json!({"type": "content_block_stop", "index": 0}));
    let delta = &data[4 + deltas];
    assert_eq!(delta["delta"], json!({"stop_reason": "end_turn", "stop_sequence": null}));
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert_eq!(data[5 + deltas], json!({"type": "message_stop"}));
}

#[tokio::test]
async fn streamed_tool_use_sends_input_json_deltas_starting_empty() {
    let input = json!({"city": "Paris", "units": "metric"});
    let llm = FakeLlm::start(vec![Step::tool_call("get_weather", input.clone()).with_text("Checking.")]);
    let reply = Api::Anthropic.ask(llm.addr(), true).await;
    let types = event_types(&reply);
    let data = reply.event_json();
    // Block 1 is the tool use; block 0 the text.
    let block1: Vec<&Value> = data.iter().filter(|d| d["index"] == 1).collect();
    assert_eq!(block1[0]["type"], "content_block_start");
    let block = &block1[0]["content_block"];
    assert_eq!(block["type"], "tool_use");
    assert_eq!(block["name"], "get_weather");
    assert_eq!(block["input"], json!({}));
    assert!(block["id"].as_str().unwrap().starts_with("toolu_01"));
    let deltas: Vec<&str> = block1[1..block1.len() - 1]
        .iter()
        .map(|d| {
            assert_eq!(d["type"], "content_block_delta");
            assert_eq!(d["delta"]["type"], "input_json_delta");
            d["delta"]["partial_json"].as_str().unwrap()
        })
        .collect();
    assert_eq!(deltas[0], "", "the first partial_json is empty, as the real API sends");
    assert!(deltas.len() >= 3, "the input arrives in several pieces: {deltas:?}");
    assert_eq!(serde_json::from_str::<Value>(&deltas.concat()).unwrap(), input);
    assert_eq!(block1.last().unwrap()["type"], "content_block_stop");
    // The text block closes before the tool block opens.
    let text_stop = data.iter().position(|d| d["type"] == "content_block_stop" && d["index"] == 0).unwrap();
    let tool_start = data.iter().position(|d| d["type"] == "content_block_start" && d["index"] == 1).unwrap();
    assert!(text_stop < tool_start, "{types:?}");
    let delta = data.iter().find(|d| d["type"] == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(types.last().unwrap(), "message_stop");
}
