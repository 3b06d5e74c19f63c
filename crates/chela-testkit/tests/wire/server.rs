//! Server behaviour around the script: auth, recording, routing and limits, the shared queue,
//! the demo model, cancellation and shutdown.

use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, MAX_BODY_BYTES, Options, Step};
use hyper::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::{Api, send};

fn with_key(script: Vec<Step>) -> FakeLlm {
    FakeLlm::start_with(Options { script, expected_key: Some("sk-right".into()), ..Options::default() })
}

async fn post_with(api: Api, llm: &FakeLlm, headers: &[(&str, &str)]) -> crate::client::Reply {
    let body = api.request("hi", false).to_string().into_bytes();
    send(llm.addr(), Method::POST, api.path(), headers, body).await
}

#[tokio::test]
async fn anthropic_auth_needs_the_key_and_a_version() {
    let llm = with_key(vec![Step::text("ok")]);
    type Headers = &'static [(&'static str, &'static str)];
    let cases: [(Headers, u16, &str); 3] = [
        (&[("anthropic-version", "2023-06-01")], 401, "authentication_error"),
        (&[("x-api-key", "sk-wrong"), ("anthropic-version", "2023-06-01")], 401, "authentication_error"),
        // What the real API answers for a missing version header.
        (&[("x-api-key", "sk-right")], 400, "invalid_request_error"),
    ];
    for (headers, status, kind) in cases {
        let reply = post_with(Api::Anthropic, &llm, headers).await;
        assert_eq!(reply.status, status, "{headers:?}");
        assert_eq!(reply.json()["error"]["type"], kind, "{headers:?}");
    }
    assert_eq!(llm.remaining(), 1, "rejected requests do not use a step");
    let ok = post_with(Api::Anthropic, &llm, &[("x-api-key", "sk-right"), ("anthropic-version", "2023-06-01")]).await;
    assert_eq!(ok.json()["content"][0]["text"], "ok");
}

#[tokio::test]
async fn openai_auth_needs_the_bearer_key() {
    let llm = with_key(vec![Step::text("ok")]);
    let missing = post_with(Api::OpenAi, &llm, &[]).await;
    assert_eq!(missing.status, 401);
    assert!(missing.json()["error"]["message"].as_str().unwrap().contains("didn't provide an API key"));
    for header in ["Bearer sk-wrong", "sk-right", "Basic sk-right"] {
        let reply = post_with(Api::OpenAi, &llm, &[("authorization", header)]).await;
        assert_eq!(reply.status, 401, "{header}");
        assert_eq!(reply.json()["error"]["code"], "invalid_api_key", "{header}");
    }
    // The Anthropic header does not authenticate an OpenAI request.
    assert_eq!(post_with(Api::OpenAi, &llm, &[("x-api-key", "sk-right")]).await.status, 401);
    let ok = post_with(Api::OpenAi, &llm, &[("authorization", "Bearer sk-right")]).await;
    assert_eq!(ok.json()["choices"][0]["message"]["content"], "ok");
}

#[tokio::test]
async fn every_request_is_recorded() {
    let llm = FakeLlm::start(vec![Step::text("one")]);
    let before = Instant::now();
    let body = Api::Anthropic.request("remember me", false).to_string();
    let headers = [("X-Custom-Thing", "Value Kept"), ("x-api-key", "k"), ("anthropic-version", "v")];
    send(llm.addr(), Method::POST, "/v1/messages", &headers, body.clone().into_bytes()).await;
    send(llm.addr(), Method::POST, "/v1/chat/completions", &[], b"not json".to_vec()).await;
    send(llm.addr(), Method::GET, "/nowhere", &[], Vec::new()).await;
    let after = Instant::now();

    let seen = llm.requests();
    assert_eq!(seen.len(), 3);
    let first = &seen[0];
    assert_eq!((first.method.as_str(), first.path.as_str()), ("POST", "/v1/messages"));
    assert_eq!(first.body, body.as_bytes());
    assert_eq!(first.json.as_ref().unwrap()["messages"][0]["content"], "remember me");
    assert!(first.headers.contains(&("x-custom-thing".to_string(), "Value Kept".to_string())), "{:?}", first.headers);
    assert_eq!(first.header("X-CUSTOM-THING"), Some("Value Kept"));
    assert_eq!(first.header("absent"), None);
    assert_eq!((seen[1].body.as_slice(), seen[1].json.as_ref()), (&b"not json"[..], None));
    assert_eq!((seen[2].method.as_str(), seen[2].path.as_str()), ("GET", "/nowhere"));
    assert!(before <= seen[0].at && seen[0].at <= seen[1].at && seen[1].at <= seen[2].at && seen[2].at <= after);
}

#[tokio::test]
async fn recording_keeps_the_most_recent_requests_within_its_bound() {
    let llm = FakeLlm::start_with(Options { max_recorded: 2, ..Options::default() });
    for text in ["a", "b", "c"] {
        Api::OpenAi.post(llm.addr(), &Api::OpenAi.request(text, false)).await;
    }
    let texts: Vec<Value> =
        llm.requests().iter().map(|r| r.json.as_ref().unwrap()["messages"][0]["content"].clone()).collect();
    assert_eq!(texts, [json!("b"), json!("c")]);
}

#[tokio::test]
async fn both_apis_share_one_queue_and_push_appends() {
    let llm = FakeLlm::start(vec![Step::text("first")]);
    llm.push(Step::text("second"));
    llm.push(Step::text("third"));
    assert_eq!(llm.remaining(), 3);
    assert_eq!(Api::OpenAi.ask(llm.addr(), false).await.json()["choices"][0]["message"]["content"], "first");
    assert_eq!(Api::Anthropic.ask(llm.addr(), false).await.json()["content"][0]["text"], "second");
    assert_eq!(llm.remaining(), 1);
    assert_eq!(Api::OpenAi.ask(llm.addr(), false).await.json()["choices"][0]["message"]["content"], "third");
    assert_eq!(llm.remaining(), 0);
    let demo = Api::OpenAi.ask(llm.addr(), false).await.json();
    assert_eq!(demo["choices"][0]["message"]["content"], "You said: hello", "an empty script falls back to the demo");
}

#[tokio::test]
async fn unknown_paths_methods_and_bad_bodies_get_json_errors_without_using_a_step() {
    let llm = FakeLlm::start(vec![Step::text("kept")]);
    let addr = llm.addr();
    let reply = send(addr, Method::POST, "/v1/complete", &[], b"{}".to_vec()).await;
    assert_eq!((reply.status, reply.json()["error"]["type"].clone()), (404, json!("not_found_error")));
    let reply = send(addr, Method::POST, "/v2/chat", &[("authorization", "Bearer k")], b"{}".to_vec()).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"]["message"], "Invalid URL (POST /v2/chat)");
    let reply = send(addr, Method::GET, "/v1/messages", &[], Vec::new()).await;
    assert_eq!(reply.status, 405);
    let reply = send(addr, Method::POST, "/v1/messages", &[], b"{\"model\":".to_vec()).await;
    assert_eq!(reply.status, 400);
    assert!(reply.json()["error"]["message"].as_str().unwrap().contains("not valid JSON"));
    let no_max_tokens = json!({"model": "m", "messages": []}).to_string().into_bytes();
    let reply = send(addr, Method::POST, "/v1/messages", &[], no_max_tokens).await;
    assert_eq!((reply.status, reply.json()["error"]["message"].clone()), (400, json!("max_tokens: Field required")));
    let reply = send(addr, Method::POST, "/v1/chat/completions", &[], b"{\"model\":\"m\"}".to_vec()).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["error"]["type"], "invalid_request_error");
    assert_eq!(llm.remaining(), 1);
}

#[tokio::test]
async fn bodies_over_the_limit_get_413() {
    let llm = FakeLlm::start(vec![]);
    // A raw request that declares too large a body; the server must refuse without reading it.
    let mut tcp = tokio::net::TcpStream::connect(llm.addr()).await.unwrap();
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        MAX_BODY_BYTES + 1
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tcp.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("request_too_large"), "{response}");
    assert_eq!(llm.requests()[0].body, b"");
}

#[tokio::test]
async fn demo_echoes_calls_the_time_tool_and_reports_results_in_anthropic_format() {
    let llm = FakeLlm::start(vec![]);
    let tools = json!([{"name": "get_current_time", "description": "now", "input_schema": {"type": "object"}}]);
    let mut req = Api::Anthropic.request("Hi there", false);
    req["tools"] = tools.clone();
    assert_eq!(Api::Anthropic.post(llm.addr(), &req).await.json()["content"][0]["text"], "You said: Hi there");

    req["messages"] = json!([{"role": "user", "content": [{"type": "text", "text": "What time is it?"}]}]);
    let call = Api::Anthropic.post(llm.addr(), &req).await.json();
    assert_eq!(call["stop_reason"], "tool_use");
    let block = &call["content"][0];
    assert_eq!((&block["name"], &block["input"]), (&json!("get_current_time"), &json!({})));

    let mut messages = req["messages"].as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": call["content"]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": block["id"], "content": "2025-06-01T12:00:00Z"}
    ]}));
    req["messages"] = Value::Array(messages);
    let done = Api::Anthropic.post(llm.addr(), &req).await.json();
    assert_eq!(done["content"][0]["text"], "Tool get_current_time returned: 2025-06-01T12:00:00Z");
    assert_eq!(done["stop_reason"], "end_turn");
}

#[tokio::test]
async fn demo_works_the_same_in_openai_format_streamed() {
    let llm = FakeLlm::start(vec![]);
    let mut req = Api::OpenAi.request("what's the time?", true);
    req["tools"] = json!([{"type": "function", "function": {"name": "get_current_time", "parameters": {}}}]);
    let reply = Api::OpenAi.post(llm.addr(), &req).await;
    let chunks: Vec<Value> =
        reply.events().iter().filter(|e| e.1 != "[DONE]").map(|e| serde_json::from_str(&e.1).unwrap()).collect();
    let head = &chunks[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(head["function"]["name"], "get_current_time");
    let id = head["id"].clone();

    let mut messages = req["messages"].as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
    ]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "noon"}));
    req["messages"] = Value::Array(messages);
    req["stream"] = json!(false);
    let done = Api::OpenAi.post(llm.addr(), &req).await.json();
    assert_eq!(done["choices"][0]["message"]["content"], "Tool get_current_time returned: noon");
}

/// Waits (briefly polling) until the fake has no client connection open.
async fn until_no_connections(llm: &FakeLlm) -> Duration {
    let since = Instant::now();
    while llm.open_connections() > 0 {
        assert!(since.elapsed() < Duration::from_secs(3), "the fake still holds the connection");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    since.elapsed()
}

/// Sends a streaming OpenAI request over a raw socket, so the test alone owns the connection.
async fn raw_request(llm: &FakeLlm) -> tokio::net::TcpStream {
    let body = Api::OpenAi.request("hi", true).to_string();
    let mut tcp = tokio::net::TcpStream::connect(llm.addr()).await.unwrap();
    let head = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n", body.len());
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body.as_bytes()).await.unwrap();
    tcp
}

#[tokio::test]
async fn a_client_hanging_up_during_a_delay_ends_the_connection_at_once() {
    let llm = FakeLlm::start(vec![Step::text("never").delay_ms(30_000)]);
    let tcp = raw_request(&llm).await;
    while llm.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(llm.open_connections(), 1);
    drop(tcp);
    until_no_connections(&llm).await;
}

#[tokio::test]
async fn a_client_hanging_up_mid_stream_ends_the_connection_at_once() {
    let llm = FakeLlm::start(vec![Step::text("a slow stream of words").chunk_delay_ms(30_000)]);
    let mut tcp = raw_request(&llm).await;
    // Wait for the head and the first event, so the server is inside the pause.
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let mut buf = [0u8; 1024];
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(n > 0, "the server closed early");
        seen.extend_from_slice(&buf[..n]);
    }
    assert_eq!(llm.open_connections(), 1);
    drop(tcp);
    until_no_connections(&llm).await;
}

#[tokio::test]
async fn dropping_the_fake_stops_it_even_mid_delay() {
    let llm = FakeLlm::start(vec![Step::text("never").delay_ms(30_000)]);
    let addr = llm.addr();
    let mut tcp = raw_request(&llm).await;
    while llm.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let dropping = Instant::now();
    drop(llm);
    assert!(dropping.elapsed() < Duration::from_secs(2), "drop waited for the delay");
    let mut got = Vec::new();
    let _ = tcp.read_to_end(&mut got).await;
    assert!(got.is_empty(), "no response after shutdown: {}", String::from_utf8_lossy(&got));
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the port is closed");
}
