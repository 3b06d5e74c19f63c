//! The failure steps in both APIs: HTTP errors, context too long, malformed bodies, cut
//! connections, and the delays.

use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, Step};
use hyper::Method;
use serde_json::{Value, json};

use crate::client::{Api, BOTH, sse_events, start};

/// `(status, Anthropic error type, OpenAI error type, OpenAI code)`.
const ERRORS: [(u16, &str, &str, Option<&str>); 5] = [
    (429, "rate_limit_error", "requests", Some("rate_limit_exceeded")),
    (500, "api_error", "server_error", None),
    (401, "authentication_error", "invalid_request_error", Some("invalid_api_key")),
    (529, "overloaded_error", "server_error", None),
    (400, "invalid_request_error", "invalid_request_error", None),
];

#[tokio::test]
async fn status_steps_answer_with_each_vendors_error_body() {
    for stream in [false, true] {
        let llm = FakeLlm::start(ERRORS.iter().flat_map(|e| [Step::status(e.0), Step::status(e.0)]).collect());
        for (status, anthropic_type, openai_type, openai_code) in ERRORS {
            let reply = Api::Anthropic.ask(llm.addr(), stream).await;
            assert_eq!(reply.status, status);
            assert_eq!(reply.header("content-type"), Some("application/json"), "errors are JSON even when streaming");
            let body = reply.json();
            assert_eq!(body["type"], "error");
            assert_eq!(body["error"]["type"], anthropic_type, "{status}");
            assert!(!body["error"]["message"].as_str().unwrap().is_empty());

            let reply = Api::OpenAi.ask(llm.addr(), stream).await;
            assert_eq!(reply.status, status);
            let body = reply.json();
            let error = body["error"].as_object().unwrap();
            let mut keys: Vec<&str> = error.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(keys, ["code", "message", "param", "type"]);
            assert_eq!(error["type"], openai_type, "{status}");
            assert_eq!(error["code"], json!(openai_code), "{status}");
            assert_eq!(error["param"], Value::Null);
            assert!(!error["message"].as_str().unwrap().is_empty());
        }
        assert_eq!(llm.remaining(), 0);
    }
}

#[tokio::test]
async fn retry_headers_are_set_only_when_scripted() {
    let llm = FakeLlm::start(vec![
        Step::status(429).retry_after("1"),
        Step::status(429).retry_after_ms(1500),
        Step::status(503),
    ]);
    let reply = Api::Anthropic.ask(llm.addr(), false).await;
    assert_eq!((reply.header("retry-after"), reply.header("retry-after-ms")), (Some("1"), None));
    let reply = Api::OpenAi.ask(llm.addr(), true).await;
    assert_eq!((reply.header("retry-after"), reply.header("retry-after-ms")), (None, Some("1500")));
    let reply = Api::OpenAi.ask(llm.addr(), false).await;
    assert_eq!(reply.status, 503);
    assert_eq!((reply.header("retry-after"), reply.header("retry-after-ms")), (None, None));
}

#[tokio::test]
async fn context_too_long_uses_each_vendors_wording() {
    let llm = FakeLlm::start(vec![Step::context_too_long(), Step::context_too_long()]);
    let reply = Api::Anthropic.ask(llm.addr(), true).await;
    assert_eq!(reply.status, 400);
    let body = reply.json();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["message"], "prompt is too long: 210000 tokens > 200000 maximum");
    let reply = Api::OpenAi.ask(llm.addr(), false).await;
    assert_eq!(reply.status, 400);
    let error = &reply.json()["error"];
    assert_eq!(error["type"], "invalid_request_error");
    assert_eq!(error["code"], "context_length_exceeded");
    assert!(error["message"].as_str().unwrap().contains("maximum context length"));
}

#[tokio::test]
async fn malformed_whole_body_is_truncated_json() {
    for api in BOTH {
        let llm = FakeLlm::start(vec![Step::malformed()]);
        let reply = api.ask(llm.addr(), false).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body_error, None, "{api:?}: the HTTP body itself is complete");
        assert!(!reply.body.is_empty());
        assert!(serde_json::from_slice::<Value>(&reply.body).is_err(), "{api:?}: {}", reply.text());
        assert!(reply.text().starts_with('{'), "{api:?}: it looks like the start of a real body");
    }
}

#[tokio::test]
async fn malformed_stream_has_one_event_that_is_not_json_then_ends_cleanly() {
    for api in BOTH {
        let llm = FakeLlm::start(vec![Step::malformed()]);
        let reply = api.ask(llm.addr(), true).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body_error, None);
        let events = reply.events();
        let bad: Vec<_> =
            events.iter().filter(|(_, d)| d != "[DONE]" && serde_json::from_str::<Value>(d).is_err()).collect();
        assert_eq!(bad.len(), 1, "{api:?}: {events:?}");
        let end = &events.last().unwrap().1;
        assert!(end == "[DONE]" || end.contains("message_stop"), "{api:?} ends with its end marker: {end}");
    }
}

#[tokio::test]
async fn drop_after_events_cuts_a_stream_after_n_events() {
    for api in BOTH {
        for n in [0, 3] {
            let llm = FakeLlm::start(vec![Step::drop_after_events(n)]);
            let reply = api.ask(llm.addr(), true).await;
            assert_eq!(reply.status, 200);
            let error = reply.body_error.as_deref().unwrap_or_else(|| panic!("{api:?}: the body ended cleanly"));
            assert!(!error.is_empty());
            assert_eq!(sse_events(reply.text()).len(), n, "{api:?}");
        }
    }
}

#[tokio::test]
async fn drop_after_events_sends_half_a_whole_body_then_cuts() {
    for api in BOTH {
        let llm = FakeLlm::start(vec![Step::drop_after_events(1)]);
        let reply = api.ask(llm.addr(), false).await;
        assert_eq!(reply.status, 200);
        let promised: usize = reply.header("content-length").unwrap().parse().unwrap();
        assert!(reply.body_error.is_some(), "{api:?}: the client must see an error");
        assert_eq!(reply.body.len(), promised / 2, "{api:?}");
    }
}

#[tokio::test]
async fn delay_ms_holds_the_headers_back() {
    let llm = FakeLlm::start(vec![Step::text("late").delay_ms(60)]);
    let sent = Instant::now();
    let reply = Api::OpenAi.ask(llm.addr(), false).await;
    assert!(sent.elapsed() >= Duration::from_millis(60), "{:?}", sent.elapsed());
    assert_eq!(reply.json()["choices"][0]["message"]["content"], "late");
}

#[tokio::test]
async fn chunk_delay_ms_spaces_the_events() {
    let llm = FakeLlm::start(vec![Step::text("abcdef").chunk_delay_ms(15)]);
    let body = Api::Anthropic.request("hi", true).to_string().into_bytes();
    let headers = [("x-api-key", "k"), ("anthropic-version", "2023-06-01")];
    let mut resp = start(llm.addr(), Method::POST, "/v1/messages", &headers, body).await;
    let mut arrivals = Vec::new();
    while let Some(frame) = http_body_util::BodyExt::frame(resp.body_mut()).await {
        frame.unwrap();
        arrivals.push(Instant::now());
    }
    // message_start, ping, block start, 3 deltas, block stop, message_delta, message_stop.
    assert_eq!(arrivals.len(), 9);
    let total = arrivals[8] - arrivals[0];
    assert!(total >= Duration::from_millis(8 * 15), "nine events with 15 ms gaps took {total:?}");
}
