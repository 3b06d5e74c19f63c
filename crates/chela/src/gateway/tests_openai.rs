//! The OpenAI-compatible endpoint speaks OpenAI: the client's messages are the conversation
//! (or only its new ones, in a named session), refusals are OpenAI's error shape, usage is the
//! provider's, and the client's tools go back to the client.

use chela_testkit::{FakeLlm, Step};
use hyper::StatusCode;
use serde_json::{Value, json};

use super::tests::{harness, req};

const CHAT: &str = "/v1/chat/completions";

fn sent(llm: &FakeLlm, i: usize) -> Value {
    llm.requests()[i].json.clone().unwrap()
}

/// The fake's token estimate for a request body, which it reports as the usage.
fn prompt_tokens(llm: &FakeLlm, i: usize) -> u64 {
    (llm.requests()[i].body.len() as u64).div_ceil(4).max(1)
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "The client's weather lookup",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})
}

#[tokio::test]
async fn a_stateless_request_sends_the_clients_whole_conversation_and_its_system_message() {
    let h = harness(vec![Step::text("Il fait beau.")], "127.0.0.1:18789", None);
    let body = json!({"model": "chela", "messages": [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]},
        {"role": "assistant", "content": "an earlier answer"},
        {"role": "user", "content": "and the weather?"},
    ]});
    let (status, reply) = h.send("POST", CHAT, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], "Il fait beau.");
    let asked = sent(&h.llm, 0);
    let system = asked["system"].to_string();
    assert!(system.contains("The program calling Chela") && system.contains("Answer in French."), "{system}");
    let messages = asked["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0]["content"], "part one\npart two", "text parts are joined with a newline");
    // The last message before the turn carries the prompt cache's breakpoint: a block, same text.
    assert_eq!(messages[1]["content"][0]["text"], "an earlier answer", "{messages:?}");
    assert_eq!(messages[1]["content"][0]["cache_control"], json!({"type": "ephemeral"}));
    // The turn's context goes in front of the newest message, after the cached history.
    let newest = messages[2]["content"].as_str().unwrap();
    assert_eq!(chela_testkit::person_text(newest), "and the weather?");
    assert!(newest.starts_with("<turn_context>\n"), "{newest}");
}

#[tokio::test]
async fn a_named_session_keeps_chelas_history_and_takes_only_the_new_messages() {
    let h = harness(vec![Step::text("first"), Step::text("second")], "127.0.0.1:18789", None);
    let one = json!({"user": "s1", "messages": [{"role": "user", "content": "question one"}]});
    assert_eq!(h.send("POST", CHAT, &one.to_string()).await.0, StatusCode::OK);
    // The client's copy of the conversation differs from Chela's: Chela's is used.
    let two = json!({"user": "s1", "messages": [
        {"role": "user", "content": "a question the client made up"},
        {"role": "assistant", "content": "an answer the client made up"},
        {"role": "user", "content": "question two"},
    ]});
    let (status, reply) = h.send("POST", CHAT, &two.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let asked = sent(&h.llm, 1)["messages"].to_string();
    assert!(asked.contains("question one") && asked.contains("first") && asked.contains("question two"), "{asked}");
    assert!(!asked.contains("made up"), "{asked}");
}

#[tokio::test]
async fn refusals_are_openai_errors_with_the_right_status() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (status, reply) = h
        .send("POST", CHAT, &json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}).to_string())
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{reply}");
    assert_eq!(reply["error"]["code"], "model_not_found");
    assert_eq!(reply["error"]["param"], "model");
    assert!(reply["error"]["message"].as_str().unwrap().contains("gpt-4o"), "{reply}");
    let (status, reply) =
        h.send("POST", CHAT, &json!({"n": 3, "messages": [{"role": "user", "content": "x"}]}).to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        reply["error"],
        json!({"message": "Chela gives one answer per request: `n` must be 1 (parameter `n`)",
        "type": "invalid_request_error", "param": "n", "code": null})
    );
    let (status, reply) = h.send("GET", "/v1/nothing", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(reply["error"]["type"], "invalid_request_error", "{reply}");
    assert!(h.llm.requests().is_empty(), "nothing reached the model");

    let locked = harness(vec![], "0.0.0.0:18789", Some("the-token"));
    let (status, headers, body) = locked.call(req("GET", "/v1/models", "")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.contains_key("www-authenticate"));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("gateway.token"), "{body}");
}

#[tokio::test]
async fn the_configured_model_is_an_alias_of_chela() {
    let h = harness(vec![Step::text("aliased")], "127.0.0.1:18789", None);
    let (status, set) = h.send("POST", "/api/config", r#"{"key":"llm.model","value":"claude-test-1"}"#).await;
    assert_eq!(status, StatusCode::OK, "{set}");
    let (_, models) = h.get("/v1/models").await;
    assert_eq!(models["data"].as_array().unwrap().len(), 1, "one model to pick: {models}");
    let body = json!({"model": "claude-test-1", "messages": [{"role": "user", "content": "x"}]});
    let (status, reply) = h.send("POST", CHAT, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], "aliased");
}

#[tokio::test]
async fn usage_is_the_providers_whole_and_streamed() {
    let h = harness(vec![Step::text("four"), Step::text("streamed")], "127.0.0.1:18789", None);
    let (_, reply) =
        h.send("POST", CHAT, &json!({"messages": [{"role": "user", "content": "2+2?"}]}).to_string()).await;
    let input = prompt_tokens(&h.llm, 0);
    let usage = json!({"prompt_tokens": input, "completion_tokens": 1, "total_tokens": input + 1,
        "prompt_tokens_details": {"cached_tokens": 0}});
    assert_eq!(reply["usage"], usage);
    let body = json!({"stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "again"}]});
    let (status, _, text) = h.call(req("POST", CHAT, &body.to_string())).await;
    assert_eq!(status, StatusCode::OK);
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert_eq!(events.last().unwrap(), &"data: [DONE]");
    let usage: Value = serde_json::from_str(events[events.len() - 2].strip_prefix("data: ").unwrap()).unwrap();
    let input = prompt_tokens(&h.llm, 1);
    assert_eq!(usage["choices"], json!([]), "{usage}");
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": input, "completion_tokens": 2, "total_tokens": input + 2, "prompt_tokens_details": {"cached_tokens": 0}})
    );
}

#[tokio::test]
async fn a_call_to_a_client_tool_goes_back_to_the_client_and_its_result_continues_the_turn() {
    let h = harness(
        vec![Step::tool_call("get_weather", json!({"city": "Paris"})), Step::text("Sunny in Paris.")],
        "127.0.0.1:18789",
        None,
    );
    let mut messages = vec![json!({"role": "user", "content": "weather in Paris?"})];
    let ask = |messages: &[Value]| json!({"messages": messages, "tools": [weather_tool()]}).to_string();
    let (status, reply) = h.send("POST", CHAT, &ask(&messages)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let choice = &reply["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{reply}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Paris"})
    );
    // The model saw the client's tool beside Chela's own.
    let offered: Vec<String> =
        sent(&h.llm, 0)["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
    assert!(
        offered.contains(&"get_weather".to_owned()) && offered.contains(&"memory_recall".to_owned()),
        "{offered:?}"
    );
    messages.push(choice["message"].clone());
    messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21 C"}));
    let (status, reply) = h.send("POST", CHAT, &ask(&messages)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], "Sunny in Paris.");
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    let asked = sent(&h.llm, 1);
    let result = &asked["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{asked}");
    assert_eq!(result["tool_use_id"], call["id"]);
    assert_eq!(result["content"], "sunny, 21 C");
}

#[tokio::test]
async fn a_streamed_client_tool_call_ends_with_tool_calls_and_a_named_session_continues_it() {
    let h = harness(
        vec![Step::tool_call("get_weather", json!({"city": "Oslo"})).with_text("Let me look."), Step::text("Cold.")],
        "127.0.0.1:18789",
        None,
    );
    let body = json!({"user": "s2", "stream": true, "tools": [weather_tool()],
        "messages": [{"role": "user", "content": "weather in Oslo?"}]});
    let (_, _, text) = h.call(req("POST", CHAT, &body.to_string())).await;
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let calls: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"][0]["delta"].get("tool_calls")).collect();
    assert_eq!(calls.len(), 1, "{text}");
    let call = &calls[0][0];
    assert_eq!((call["index"].as_u64(), call["function"]["name"].as_str()), (Some(0), Some("get_weather")));
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "tool_calls", "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"));
    // The named session holds the call: the client sends only the result.
    let next = json!({"user": "s2", "tools": [weather_tool()], "messages": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": call["id"], "type": "function",
            "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": "-5 C"}]});
    let (status, reply) = h.send("POST", CHAT, &next.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], "Cold.");
    let asked = sent(&h.llm, 1).to_string();
    assert!(asked.contains("weather in Oslo?") && asked.contains("-5 C"), "{asked}");
}

#[tokio::test]
async fn a_client_tool_named_like_chelas_hides_it_and_never_runs_inside_chela() {
    let h = harness(vec![Step::tool_call("memory_store", json!({"text": "secret"}))], "127.0.0.1:18789", None);
    let tool =
        json!({"type": "function", "function": {"name": "memory_store", "description": "the client's own store"}});
    let body = json!({"tools": [tool], "messages": [{"role": "user", "content": "remember"}]});
    let (status, reply) = h.send("POST", CHAT, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "memory_store");
    let offered: Vec<Value> =
        sent(&h.llm, 0)["tools"].as_array().unwrap().iter().filter(|t| t["name"] == "memory_store").cloned().collect();
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0]["description"], "the client's own store", "the client's wins the clash");
    assert_eq!(h.llm.requests().len(), 1, "the turn ended with the call: no tool result went back to the model");
    let root = h.daemon.workspace().root().to_owned();
    let sessions = h.daemon.workspace().sessions_dir();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.starts_with(&sessions) {
                continue;
            }
            if p.is_dir() {
                dirs.push(p);
            } else {
                let text = std::fs::read(&p).unwrap();
                assert!(
                    !String::from_utf8_lossy(&text).contains("secret"),
                    "Chela's memory_store ran: {}",
                    p.display()
                );
            }
        }
    }
}

#[tokio::test]
async fn the_responses_api_answers_whole_and_streams_its_events_in_order() {
    let h = harness(
        vec![
            Step::text("whole response"),
            Step::tool_call("get_weather", json!({"city": "Oslo"})).with_text("Looking."),
        ],
        "127.0.0.1:18789",
        None,
    );
    let body = json!({"model": "chela", "instructions": "Be brief.", "input": "hi"});
    let (status, reply) = h.send("POST", "/v1/responses", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!((reply["object"].as_str(), reply["status"].as_str()), (Some("response"), Some("completed")));
    assert_eq!(
        reply["output"][0]["content"][0],
        json!({"type": "output_text", "text": "whole response", "annotations": []})
    );
    let input = prompt_tokens(&h.llm, 0);
    assert_eq!(reply["usage"]["input_tokens"], input);
    assert!(sent(&h.llm, 0)["system"].to_string().contains("Be brief."));

    let tool = json!({"type": "function", "name": "get_weather", "parameters": {"type": "object"}});
    let body = json!({"stream": true, "input": "weather in Oslo?", "tools": [tool]});
    let (status, headers, text) = h.call(req("POST", "/v1/responses", &body.to_string())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/event-stream");
    let events: Vec<Value> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (kind, data) = e.split_once('\n').unwrap();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(kind.strip_prefix("event: "), data["type"].as_str(), "{e}");
            data
        })
        .collect();
    let mut kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    // The text may come in several deltas, as the model streamed it.
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ],
        "{text}"
    );
    let seq: Vec<u64> = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(seq, (0..seq.len() as u64).collect::<Vec<_>>());
    let done = &events.last().unwrap()["response"];
    assert_eq!(done["output"][0]["content"][0]["text"], "Looking.");
    assert_eq!(done["output"][1]["type"], "function_call");
    assert_eq!(done["output"][1]["name"], "get_weather");
    let added = events.iter().filter(|e| e["type"] == "response.output_item.added").nth(1).unwrap();
    assert_eq!(done["output"][1]["call_id"], added["item"]["call_id"]);
}

/// A harness whose provider speaks OpenAI's wire to the fake.
fn openai_harness(script: Vec<Step>) -> super::tests::Harness {
    let h = super::tests::harness_with_settings(
        script,
        &[("llm.provider", "openai"), ("llm.api_key", "k"), ("llm.max_retries", "0")],
    );
    let keep = crate::config::KeyChoice::Keep;
    crate::config::set_overrides(h.daemon.workspace(), &[("llm.base_url", &h.llm.openai_base_url())], keep).unwrap();
    h.daemon.reload().unwrap();
    h
}

#[tokio::test]
async fn response_format_reaches_an_openai_provider_on_every_call_of_the_turn() {
    let h = openai_harness(vec![
        Step::tool_call("get_current_time", json!({})),
        Step::text("{\"n\":1}"),
        Step::text("{\"ok\":true}"),
    ]);
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let format = json!({"type": "json_schema", "json_schema": {"name": "count", "schema": schema, "strict": true}});
    // Chela's own tool runs inside the turn: two model calls, each asked for the format.
    let body = json!({"response_format": format, "messages": [{"role": "user", "content": "count"}]});
    let (status, reply) = h.send("POST", CHAT, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], "{\"n\":1}");
    assert_eq!(h.llm.requests().len(), 2);
    for i in 0..2 {
        assert_eq!(sent(&h.llm, i)["response_format"], format, "call {i}");
    }
    // The Responses API's `text.format` is the same request to the provider.
    let body = json!({"input": "ok?", "text": {"format": {"type": "json_object"}}});
    let (status, reply) = h.send("POST", "/v1/responses", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(sent(&h.llm, 2)["response_format"], json!({"type": "json_object"}));
}

#[tokio::test]
async fn a_format_the_anthropic_provider_cannot_take_is_refused_before_the_model() {
    let h = harness(vec![Step::text("not asked")], "127.0.0.1:18789", None);
    for (path, body) in [
        (CHAT, json!({"response_format": {"type": "json_object"}, "messages": [{"role": "user", "content": "x"}]})),
        ("/v1/responses", json!({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}})),
    ] {
        let (status, reply) = h.send("POST", path, &body.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {reply}");
        assert_eq!(reply["error"]["type"], "invalid_request_error");
        assert_eq!(reply["error"]["param"], "response_format");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains("configured provider (anthropic) does not take"), "{message}");
    }
    let text = json!({"response_format": {"type": "text"}, "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(h.send("POST", CHAT, &text.to_string()).await.0, StatusCode::OK, "free text is fine");
    assert_eq!(h.llm.requests().len(), 1, "only the free-text request reached the model");
}
