//! Cross-check: Chela's own decoders (`chela-proto`) read what the fake sends. The fake was
//! written from the vendor docs independently, so agreement here is evidence for both.

use chela_proto::chat::{Block, Reply as ProtoReply, StopReason};
use chela_proto::error::{ApiError, ErrorClass, classify};
use chela_proto::stream::{Limits, StreamError};
use chela_proto::{anthropic, openai};
use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::client::{Api, BOTH, Reply};

fn decode_stream(api: Api, reply: &Reply) -> Result<ProtoReply, StreamError> {
    match api {
        Api::Anthropic => {
            let mut d = anthropic::StreamDecoder::new(Limits::default());
            d.handle_bytes(&reply.body, &mut |_| {})?;
            d.finish()
        }
        Api::OpenAi => {
            let mut d = openai::StreamDecoder::new(Limits::default());
            d.handle_bytes(&reply.body, &mut |_| {})?;
            d.finish()
        }
    }
}

fn decode_whole(api: Api, reply: &Reply) -> Result<ProtoReply, StreamError> {
    match api {
        Api::Anthropic => anthropic::parse_response(&reply.body),
        Api::OpenAi => openai::parse_response(&reply.body),
    }
}

fn decode(api: Api, stream: bool, reply: &Reply) -> Result<ProtoReply, StreamError> {
    if stream { decode_stream(api, reply) } else { decode_whole(api, reply) }
}

/// `(name, input)` of each tool use, and the text, of a decoded reply.
fn summary(reply: &ProtoReply) -> (String, Vec<(String, Value)>) {
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in &reply.content {
        match block {
            Block::Text { text: t } => text.push_str(t),
            Block::ToolUse { id, name, input } => {
                assert!(id.starts_with("toolu_01") || id.starts_with("call_"), "{id}");
                calls.push((name.clone(), serde_json::from_str(input.as_str()).unwrap()));
            }
            other => panic!("unexpected block {other:?}"),
        }
    }
    (text, calls)
}

#[tokio::test]
async fn chela_proto_decodes_text_and_tool_calls_in_every_mode() {
    for api in BOTH {
        for stream in [false, true] {
            let input = json!({"query": "weather in Paris", "days": 3});
            let llm = FakeLlm::start(vec![
                Step::text("A plain answer, long enough to stream in pieces."),
                Step::tool_calls([("search", input.clone()), ("get_current_time", json!({}))]).with_text("Looking."),
            ]);
            let mut req = api.request("hello", stream);
            if api == Api::OpenAi && stream {
                // Without it the documented stream carries no usage at all.
                req["stream_options"] = json!({"include_usage": true});
            }
            let reply = decode(api, stream, &api.post(llm.addr(), &req).await).unwrap();
            assert_eq!(reply.stop_reason, StopReason::EndTurn, "{api:?} {stream}");
            assert_eq!(summary(&reply), ("A plain answer, long enough to stream in pieces.".into(), vec![]));
            assert!(reply.usage.output_tokens > 0, "{api:?} {stream}: {:?}", reply.usage);
            assert!(reply.arg_errors.is_empty());

            let reply = decode(api, stream, &api.ask(llm.addr(), stream).await).unwrap();
            assert_eq!(reply.stop_reason, StopReason::ToolUse, "{api:?} {stream}");
            let want = vec![("search".to_string(), input), ("get_current_time".to_string(), json!({}))];
            assert_eq!(summary(&reply), ("Looking.".into(), want), "{api:?} {stream}");
        }
    }
}

#[tokio::test]
async fn chela_proto_rejects_malformed_and_cut_replies() {
    for api in BOTH {
        let llm = FakeLlm::start(vec![
            Step::malformed(),
            Step::malformed(),
            Step::drop_after_events(4),
            Step::drop_after_events(0),
        ]);
        let addr = llm.addr();
        let err = decode(api, true, &api.ask(addr, true).await).unwrap_err();
        assert!(matches!(err, StreamError::Malformed(_) | StreamError::Sse(_)), "{api:?}: {err:?}");
        assert!(decode(api, false, &api.ask(addr, false).await).is_err(), "{api:?}");
        for _ in 0..2 {
            let cut = api.ask(addr, true).await;
            assert!(cut.body_error.is_some());
            let err = decode(api, true, &cut).unwrap_err();
            assert_eq!(err, StreamError::Truncated, "{api:?}");
        }
    }
}

#[tokio::test]
async fn chela_proto_classifies_the_error_bodies() {
    let cases = [
        (Step::status(429), ErrorClass::RateLimited),
        (Step::status(529), ErrorClass::Unavailable),
        (Step::status(500), ErrorClass::Unavailable),
        (Step::status(401), ErrorClass::Auth),
        (Step::context_too_long(), ErrorClass::ContextTooLong),
    ];
    for api in BOTH {
        let llm = FakeLlm::start(cases.iter().map(|c| c.0.clone()).collect());
        for (step, class) in &cases {
            let reply = api.ask(llm.addr(), false).await;
            let err = ApiError::parse(&reply.body).unwrap_or_else(|| panic!("{api:?} {step:?}: not an error body"));
            assert!(!err.message.is_empty());
            assert_eq!(classify(reply.status, Some(&err)), *class, "{api:?} {step:?}: {err:?}");
        }
    }
}
