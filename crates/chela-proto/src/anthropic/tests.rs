use super::*;
use crate::chat::{Message, Role, ToolSpec};
use alloc::string::ToString;
use alloc::vec;
use proptest::prelude::*;
use serde_json::{Value, json};

const TOOL_STREAM: &str = include_str!("../../tests/fixtures/anthropic_tool_stream.sse");
const TOOL_MESSAGE: &str = include_str!("../../tests/fixtures/anthropic_tool_message.json");
const THINKING_STREAM: &str = include_str!("../../tests/fixtures/anthropic_thinking_stream.sse");

fn decode(chunks: &[&[u8]]) -> (Result<Reply, StreamError>, String) {
    let mut d = StreamDecoder::new(Limits::default());
    let mut shown = String::new();
    for c in chunks {
        let r = d.handle_bytes(c, &mut |u| {
            if let Update::Text(t) = u {
                shown.push_str(t);
            }
        });
        if let Err(e) = r {
            return (Err(e), shown);
        }
    }
    (d.finish(), shown)
}

fn input_value(reply: &Reply, i: usize) -> Value {
    match &reply.content[i] {
        Block::ToolUse { input, .. } => serde_json::from_str(input.as_str()).unwrap(),
        other => panic!("block {i} is {other:?}"),
    }
}

#[test]
fn request_with_every_block_kind() {
    let messages = vec![
        Message::user_text("What's the weather?"),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::text("Checking."),
                Block::ToolUse {
                    id: "toolu_1".into(),
                    name: "get_weather".into(),
                    input: Json::parse(r#"{"city":"Paris"}"#).unwrap(),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                Block::ToolResult {
                    tool_use_id: "toolu_1".into(),
                    content: "18°C".into(),
                    images: Default::default(),
                    is_error: false,
                },
                Block::ToolResult {
                    tool_use_id: "toolu_2".into(),
                    content: "no such tool".into(),
                    images: Default::default(),
                    is_error: true,
                },
                Block::Image { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
                Block::text(""),
            ],
        },
    ];
    let tools = [ToolSpec {
        name: "get_weather",
        description: "Weather now.",
        input_schema: r#"{"type":"object","properties":{"city":{"type":"string"}}}"#,
    }];
    let req = Request {
        model: "claude-sonnet-4-5",
        max_tokens: 1024,
        system: "You are Chela.",
        messages: &messages,
        tools: &tools,
        tool_choice: ToolChoice::Auto,
        stream: true,
        cache: Default::default(),
        format: None,
    };
    let mut body = String::new();
    write_request(&req, &mut body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": "You are Chela.",
            "messages": [
                {"role": "user", "content": "What's the weather?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such tool", "is_error": true},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
                ]}
            ],
            "tools": [{"name": "get_weather", "description": "Weather now.", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "tool_choice": {"type": "auto"},
            "stream": true
        })
    );
}

#[test]
fn request_without_tools_or_system_omits_them() {
    let messages = vec![Message::user_text("hi")];
    let req = Request {
        model: "m",
        max_tokens: 5,
        system: "",
        messages: &messages,
        tools: &[],
        tool_choice: ToolChoice::None,
        stream: false,
        cache: Default::default(),
        format: None,
    };
    let mut body = String::new();
    write_request(&req, &mut body);
    assert_eq!(body, r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#);
}

#[test]
fn stream_and_whole_message_give_the_same_reply() {
    let (streamed, shown) = decode(&[TOOL_STREAM.as_bytes()]);
    let streamed = streamed.unwrap();
    let whole = parse_response(TOOL_MESSAGE.as_bytes()).unwrap();
    assert_eq!(streamed.content[0], whole.content[0]);
    assert_eq!(shown, "Okay, let's check the weather for San Francisco, CA é世:");
    assert_eq!(input_value(&streamed, 1), input_value(&whole, 1));
    assert_eq!(input_value(&whole, 1), json!({"location": "San Francisco, CA", "unit": "fahrenheit"}));
    assert_eq!(streamed.stop_reason, StopReason::ToolUse);
    assert_eq!(streamed.usage, Usage { input_tokens: 472, output_tokens: 89, ..Usage::default() });
    assert_eq!(whole.usage, streamed.usage);
    assert!(streamed.arg_errors.is_empty());
}

#[test]
fn tool_use_start_is_reported_once() {
    let mut d = StreamDecoder::new(Limits::default());
    let mut starts = vec![];
    d.handle_bytes(TOOL_STREAM.as_bytes(), &mut |u| {
        if let Update::ToolUseStart { id, name } = u {
            starts.push((id.to_string(), name.to_string()));
        }
    })
    .unwrap();
    assert_eq!(starts, vec![("toolu_01T1x1fJ34qAmk2tNTrN7Up6".to_string(), "get_weather".to_string())]);
}

#[test]
fn thinking_blocks_and_unknown_events_are_skipped() {
    let (r, _) = decode(&[THINKING_STREAM.as_bytes()]);
    let r = r.unwrap();
    assert_eq!(r.content, vec![Block::text("Hello!")]);
    assert_eq!(r.stop_reason, StopReason::EndTurn);
}

#[test]
fn error_event_is_reported_with_its_type() {
    let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n\
                event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
    let (r, _) = decode(&[body.as_bytes()]);
    match r {
        Err(StreamError::Api(e)) => {
            assert_eq!(e.kind, "overloaded_error");
            assert_eq!(e.message, "Overloaded");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_stream_cut_before_message_stop_is_truncated() {
    let cut = &TOOL_STREAM[..TOOL_STREAM.find("event: message_delta").unwrap()];
    assert_eq!(decode(&[cut.as_bytes()]).0, Err(StreamError::Truncated));
}

#[test]
fn garbage_events_are_malformed() {
    let (r, _) = decode(&[b"event: message_start\ndata: {not json\n\n"]);
    assert!(matches!(r, Err(StreamError::Malformed(_))), "{r:?}");
}

#[test]
fn bad_tool_json_is_kept_as_an_argument_error() {
    let body = "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"x\",\"input\":{}}}\n\n\
                data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n\
                data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n\
                data: {\"type\":\"message_stop\"}\n\n";
    let r = decode(&[body.as_bytes()]).0.unwrap();
    assert_eq!(r.arg_errors, vec![ArgError { tool_use_id: "t".into(), raw: "{\"a\":".into() }]);
    assert_eq!(input_value(&r, 0), json!({}));
}

#[test]
fn replies_are_bounded() {
    let mut d = StreamDecoder::new(Limits { max_event_bytes: 1024, max_reply_bytes: 10, ..Limits::default() });
    let body = "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
                data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"0123456789ab\"}}\n\n";
    assert_eq!(d.handle_bytes(body.as_bytes(), &mut |_| {}), Err(StreamError::TooLarge { limit: 10 }));
    let mut d = StreamDecoder::new(Limits::default());
    let far = "data: {\"type\":\"content_block_start\",\"index\":100000,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
    assert!(matches!(d.handle_bytes(far.as_bytes(), &mut |_| {}), Err(StreamError::Malformed(_))));
}

#[test]
fn text_near_the_bound_never_takes_more_than_the_bound() {
    // 80 deltas of 44 bytes: doubling from 44 would reach a 5,632-byte buffer for 3,520 bytes.
    let limits = Limits { max_reply_bytes: 4096, ..Limits::CHIP };
    let mut body = String::from(
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    );
    for _ in 0..80 {
        body.push_str("data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"All work and no play makes Jack a dull boy. \"}}\n\n");
    }
    body.push_str("data: {\"type\":\"message_stop\"}\n\n");
    let mut d = StreamDecoder::new(limits);
    d.handle_bytes(body.as_bytes(), &mut |_| {}).unwrap();
    let reply = d.finish().unwrap();
    let Block::Text { text } = &reply.content[0] else { panic!("{:?}", reply.content) };
    assert_eq!(text.len(), 3520);
    assert!(text.capacity() <= limits.max_reply_bytes, "capacity {}", text.capacity());
}

fn empty_blocks(n: usize, kind: &str) -> String {
    let mut body = String::new();
    for i in 0..n {
        let block = if kind == "text" {
            String::from(r#"{"type":"text","text":""}"#)
        } else {
            alloc::format!(r#"{{"type":"tool_use","id":"t{i}","name":"x","input":{{}}}}"#)
        };
        body.push_str(&alloc::format!(
            "data: {{\"type\":\"content_block_start\",\"index\":{i},\"content_block\":{block}}}\n\n"
        ));
    }
    body
}

#[test]
fn a_flood_of_empty_blocks_or_tool_calls_is_refused_with_a_clear_error() {
    let limits = Limits { max_blocks: 8, max_tool_calls: 4, ..Limits::HOST };
    let mut d = StreamDecoder::new(limits);
    let e = d.handle_bytes(empty_blocks(9, "text").as_bytes(), &mut |_| {}).unwrap_err();
    assert_eq!(e, StreamError::TooMany { what: "content blocks", limit: 8 });
    assert_eq!(e.to_string(), "the reply has more than 8 content blocks");
    let mut d = StreamDecoder::new(limits);
    let e = d.handle_bytes(empty_blocks(5, "tool_use").as_bytes(), &mut |_| {}).unwrap_err();
    assert_eq!(e, StreamError::TooMany { what: "tool calls", limit: 4 });
    // The chip's defaults bound it too.
    let mut d = StreamDecoder::new(Limits::default());
    assert!(matches!(
        d.handle_bytes(empty_blocks(Limits::CHIP.max_blocks + 1, "text").as_bytes(), &mut |_| {}),
        Err(StreamError::TooMany { .. })
    ));
}

#[test]
fn every_block_counts_against_the_reply_bytes_even_when_empty() {
    let limits = Limits { max_reply_bytes: 10 * crate::stream::BLOCK_OVERHEAD, max_blocks: 1000, ..Limits::HOST };
    let mut d = StreamDecoder::new(limits);
    let e = d.handle_bytes(empty_blocks(11, "text").as_bytes(), &mut |_| {}).unwrap_err();
    assert_eq!(e, StreamError::TooLarge { limit: limits.max_reply_bytes });
    let mut d = StreamDecoder::new(limits);
    d.handle_bytes(empty_blocks(10, "text").as_bytes(), &mut |_| {}).unwrap();
}

#[test]
fn whole_bodies_are_bounded_like_streams() {
    let blocks: Vec<&str> = core::iter::repeat_n(r#"{"type":"text","text":""}"#, 9).collect();
    let body = alloc::format!(r#"{{"content":[{}],"stop_reason":"end_turn"}}"#, blocks.join(","));
    let limits = Limits { max_blocks: 8, ..Limits::HOST };
    assert_eq!(
        parse_response_within(body.as_bytes(), limits),
        Err(StreamError::TooMany { what: "content blocks", limit: 8 })
    );
    assert!(parse_response_within(body.as_bytes(), Limits { max_blocks: 9, ..limits }).is_ok());
}

#[test]
fn whole_body_errors_are_api_errors() {
    let r = parse_response(br#"{"type":"error","error":{"type":"not_found_error","message":"model: nope"}}"#);
    assert!(matches!(r, Err(StreamError::Api(ref e)) if e.kind == "not_found_error"), "{r:?}");
    assert!(matches!(parse_response(b"{"), Err(StreamError::Malformed(_))));
}

proptest! {
    #[test]
    fn any_split_and_line_ending_gives_the_same_reply(
        points in proptest::collection::vec(0usize..3000, 0..40),
        crlf in any::<bool>(),
    ) {
        let text = if crlf { TOOL_STREAM.replace('\n', "\r\n") } else { TOOL_STREAM.to_string() };
        let bytes = text.as_bytes();
        let mut pts: Vec<usize> = points.into_iter().filter(|&p| p <= bytes.len()).collect();
        pts.sort_unstable();
        let mut chunks: Vec<&[u8]> = vec![];
        let mut last = 0;
        for p in pts { chunks.push(&bytes[last..p]); last = p; }
        chunks.push(&bytes[last..]);
        let (whole, whole_shown) = decode(&[TOOL_STREAM.as_bytes()]);
        let (split, split_shown) = decode(&chunks);
        prop_assert_eq!(whole, split);
        prop_assert_eq!(whole_shown, split_shown);
    }
}

fn tool_images_turn() -> Vec<Message> {
    vec![
        Message::user_text("Show me the tiny image."),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::ToolUse {
                    id: "toolu_1".into(),
                    name: "mcp_everything_get-tiny-image".into(),
                    input: Json::empty_object(),
                },
                Block::ToolUse { id: "toolu_2".into(), name: "screenshot".into(), input: Json::empty_object() },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                Block::ToolResult {
                    tool_use_id: "toolu_1".into(),
                    content: "Here it is.".into(),
                    images: vec![crate::chat::Image { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() }]
                        .into(),
                    is_error: false,
                },
                Block::ToolResult {
                    tool_use_id: "toolu_2".into(),
                    content: String::new(),
                    images: vec![crate::chat::Image { media_type: "image/jpeg".into(), data: "/9j/4A==".into() }]
                        .into(),
                    is_error: true,
                },
            ],
        },
    ]
}

#[test]
fn tool_result_images_are_image_blocks_in_its_content() {
    let messages = tool_images_turn();
    let req = Request {
        model: "m",
        max_tokens: 5,
        system: "",
        messages: &messages,
        tools: &[],
        tool_choice: ToolChoice::Auto,
        stream: false,
        cache: Default::default(),
        format: None,
    };
    let mut body = String::new();
    write_request(&req, &mut body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "Here it is."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
            ]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4A=="}}
            ], "is_error": true}
        ]})
    );
}

proptest! {
    // The chip's driver sends a body as windows of a re-encoding; with images in tool results
    // the pieces put together must still be the body, byte for byte.
    #[test]
    fn windows_of_a_request_with_tool_images_are_the_body(len in 1usize..300, data in "[A-Za-z0-9+/]{0,600}") {
        let mut messages = tool_images_turn();
        if let Block::ToolResult { images, .. } = &mut messages[2].content[0] {
            *images = vec![crate::chat::Image { media_type: "image/png".into(), data }].into();
        }
        let req = Request { model: "m", max_tokens: 5, system: "s", messages: &messages, tools: &[], tool_choice: ToolChoice::Auto, stream: true, cache: Default::default(), format: None };
        let mut whole = String::new();
        write_request(&req, &mut whole);
        let mut joined = Vec::new();
        let mut buf = Vec::new();
        loop {
            write_request(&req, &mut crate::json::Window::new(joined.len(), len, &mut buf));
            if buf.is_empty() { break; }
            joined.extend_from_slice(&buf);
        }
        prop_assert_eq!(joined, whole.into_bytes());
    }
}
