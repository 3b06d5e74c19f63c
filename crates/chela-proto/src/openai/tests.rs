use super::*;
use crate::chat::{Json, Message, ToolSpec};
use alloc::string::ToString;
use alloc::vec;
use proptest::prelude::*;
use serde_json::{Value, json};

const TOOL_STREAM: &str = include_str!("../../tests/fixtures/openai_tool_stream.sse");
const TOOL_COMPLETION: &str = include_str!("../../tests/fixtures/openai_tool_completion.json");

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

fn tool(reply: &Reply, i: usize) -> (String, String, Value) {
    match &reply.content[i] {
        Block::ToolUse { id, name, input } => (id.clone(), name.clone(), serde_json::from_str(input.as_str()).unwrap()),
        other => panic!("block {i} is {other:?}"),
    }
}

#[test]
fn request_maps_tools_results_and_images() {
    let messages = vec![
        Message::user_text("Weather and time?"),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::ToolUse {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    input: Json::parse(r#"{"city":"Paris"}"#).unwrap(),
                },
                Block::ToolUse { id: "call_2".into(), name: "get_current_time".into(), input: Json::empty_object() },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                Block::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "18°C".into(),
                    images: Default::default(),
                    is_error: false,
                },
                Block::ToolResult {
                    tool_use_id: "call_2".into(),
                    content: "clock broken".into(),
                    images: Default::default(),
                    is_error: true,
                },
            ],
        },
        Message::assistant_text("It is 18°C."),
        Message {
            role: Role::User,
            content: vec![
                Block::text("And this?"),
                Block::Image { media_type: "image/jpeg".into(), data: "/9j/4A==".into() },
            ],
        },
    ];
    let tools = [ToolSpec { name: "get_weather", description: "Weather.", input_schema: r#"{"type":"object"}"# }];
    let req = Request {
        model: "gpt-4o-mini",
        max_tokens: 512,
        system: "Be brief.",
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
            "model": "gpt-4o-mini",
            "max_tokens": 512,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather and time?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18°C"},
                {"role": "tool", "tool_call_id": "call_2", "content": "Error: clock broken"},
                {"role": "assistant", "content": "It is 18°C."},
                {"role": "user", "content": [
                    {"type": "text", "text": "And this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4A=="}}
                ]}
            ],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}}}],
            "tool_choice": "auto",
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
}

#[test]
fn tool_choice_none_and_no_stream() {
    let messages = vec![Message::user_text("x")];
    let tools = [ToolSpec { name: "t", description: "d", input_schema: "{}" }];
    let req = Request {
        model: "m",
        max_tokens: 1,
        system: "",
        messages: &messages,
        tools: &tools,
        tool_choice: ToolChoice::None,
        stream: false,
        cache: Default::default(),
        format: None,
    };
    let mut body = String::new();
    write_request(&req, &mut body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["tool_choice"], "none");
    assert!(v.get("stream").is_none() && v.get("stream_options").is_none());
    assert_eq!(v["messages"].as_array().unwrap().len(), 1);
    assert_eq!(v["max_tokens"], 1);
    let mut body = String::new();
    write_request_for(&req, Dialect::OPENAI, &mut body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["max_completion_tokens"], 1);
    assert!(v.get("max_tokens").is_none());
}

#[test]
fn stream_and_whole_completion_give_the_same_reply() {
    let (streamed, shown) = decode(&[TOOL_STREAM.as_bytes()]);
    let streamed = streamed.unwrap();
    let whole = parse_response(TOOL_COMPLETION.as_bytes()).unwrap();
    assert_eq!(shown, "Let me check both é世.");
    assert_eq!(streamed.content[0], Block::text("Let me check both é世."));
    assert_eq!(streamed.content[0], whole.content[0]);
    assert_eq!(tool(&streamed, 1), ("call_abc".into(), "get_weather".into(), json!({"location": "Paris"})));
    assert_eq!(tool(&streamed, 1), tool(&whole, 1));
    assert_eq!(tool(&streamed, 2), ("call_def".into(), "get_current_time".into(), json!({})));
    assert_eq!(tool(&streamed, 2), tool(&whole, 2));
    assert_eq!(streamed.stop_reason, StopReason::ToolUse);
    assert_eq!(streamed.usage, Usage { input_tokens: 82, output_tokens: 17, ..Usage::default() });
    assert_eq!(whole.usage, streamed.usage);
}

#[test]
fn ollama_style_whole_calls_without_index_id_or_done() {
    let body = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{\"name\":\"a\",\"arguments\":{\"x\":1}}}]}}]}\n\n\
                data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b1\",\"function\":{\"name\":\"b\",\"arguments\":\"\"}}]}}]}\n\n\
                data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    let r = decode(&[body.as_bytes()]).0.unwrap();
    assert_eq!(tool(&r, 0), ("call_0".into(), "a".into(), json!({"x": 1})));
    assert_eq!(tool(&r, 1), ("b1".into(), "b".into(), json!({})));
    assert!(r.has_tool_use());
}

#[test]
fn stream_error_chunk_is_an_api_error() {
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"error\": {\"message\": \"upstream timeout\", \"type\": \"server_error\"}}\n\n";
    match decode(&[body.as_bytes()]) {
        (Err(StreamError::Api(e)), shown) => {
            assert_eq!(e.kind, "server_error");
            assert_eq!(shown, "Hi");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn text_near_the_bound_never_takes_more_than_the_bound() {
    // 80 deltas of 44 bytes: doubling from 44 would reach a 5,632-byte buffer for 3,520 bytes.
    let limits = Limits { max_reply_bytes: 4096, ..Limits::CHIP };
    let mut body = String::new();
    for _ in 0..80 {
        body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"All work and no play makes Jack a dull boy. \"}}]}\n\n");
    }
    body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    let mut d = StreamDecoder::new(limits);
    d.handle_bytes(body.as_bytes(), &mut |_| {}).unwrap();
    let reply = d.finish().unwrap();
    let Block::Text { text } = &reply.content[0] else { panic!("{:?}", reply.content) };
    assert_eq!(text.len(), 3520);
    assert!(text.capacity() <= limits.max_reply_bytes, "capacity {}", text.capacity());
}

#[test]
fn a_stream_without_finish_or_done_is_truncated() {
    let cut = &TOOL_STREAM[..TOOL_STREAM.find("{\"index\":0,\"delta\":{},").unwrap() - 60];
    let cut = &cut[..cut.rfind("\n\n").unwrap() + 2];
    assert_eq!(decode(&[cut.as_bytes()]).0, Err(StreamError::Truncated));
}

#[test]
fn bad_arguments_become_argument_errors() {
    let body = r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]},"finish_reason":"tool_calls"}]}"#;
    let r = parse_response(body.as_bytes()).unwrap();
    assert_eq!(r.arg_errors, vec![ArgError { tool_use_id: "c".into(), raw: "{oops".into() }]);
    assert_eq!(tool(&r, 0).2, json!({}));
}

#[test]
fn whole_body_error_and_garbage() {
    let r = parse_response(br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#);
    assert!(matches!(r, Err(StreamError::Api(ref e)) if e.code == "invalid_api_key"), "{r:?}");
    assert!(matches!(parse_response(b"[]"), Err(StreamError::Malformed(_))));
    assert!(matches!(parse_response(br#"{"choices":[]}"#), Err(StreamError::Malformed(_))));
    assert!(matches!(decode(&[b"data: {nope\n\n"]).0, Err(StreamError::Malformed(_))));
}

#[test]
fn tool_call_indexes_are_bounded() {
    let body =
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":100000,\"function\":{\"name\":\"a\"}}]}}]}\n\n";
    assert!(matches!(decode(&[body.as_bytes()]).0, Err(StreamError::Malformed(_))));
}

#[test]
fn a_flood_of_empty_tool_calls_is_refused_with_a_clear_error() {
    let limits = Limits { max_tool_calls: 4, ..Limits::HOST };
    let mut d = StreamDecoder::new(limits);
    let mut body = String::new();
    for i in 0..5 {
        body.push_str(&alloc::format!(
            "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"c{i}\",\"function\":{{\"name\":\"\",\"arguments\":\"\"}}}}]}}}}]}}\n\n"
        ));
    }
    let e = d.handle_bytes(body.as_bytes(), &mut |_| {}).unwrap_err();
    assert_eq!(e, StreamError::TooMany { what: "tool calls", limit: 4 });
    // Each empty call costs its overhead against the reply bytes too.
    let tight = Limits { max_reply_bytes: 3 * crate::stream::BLOCK_OVERHEAD, ..Limits::HOST };
    let mut d = StreamDecoder::new(tight);
    assert_eq!(
        d.handle_bytes(body.as_bytes(), &mut |_| {}),
        Err(StreamError::TooLarge { limit: tight.max_reply_bytes })
    );
    // A whole completion is held to the same count.
    let calls: Vec<String> = (0..5)
        .map(|i| alloc::format!(r#"{{"id":"c{i}","type":"function","function":{{"name":"x","arguments":"{{}}"}}}}"#))
        .collect();
    let whole = alloc::format!(
        r#"{{"choices":[{{"message":{{"content":null,"tool_calls":[{}]}},"finish_reason":"tool_calls"}}]}}"#,
        calls.join(",")
    );
    assert_eq!(
        parse_response_within(whole.as_bytes(), limits),
        Err(StreamError::TooMany { what: "tool calls", limit: 4 })
    );
    assert!(parse_response(whole.as_bytes()).is_ok());
}

proptest! {
    #[test]
    fn any_split_and_line_ending_gives_the_same_reply(
        points in proptest::collection::vec(0usize..4000, 0..40),
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

#[test]
fn tool_result_images_follow_the_tool_messages_in_a_user_message() {
    let image = |t: &str, d: &str| crate::chat::Image { media_type: t.into(), data: d.into() };
    let messages = vec![
        Message::user_text("Show me."),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::ToolUse { id: "call_1".into(), name: "tiny".into(), input: Json::empty_object() },
                Block::ToolUse { id: "call_2".into(), name: "plain".into(), input: Json::empty_object() },
                Block::ToolUse { id: "call_3".into(), name: "shot".into(), input: Json::empty_object() },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                Block::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "Here it is.".into(),
                    images: vec![image("image/png", "iVBORw0KGgo=")].into(),
                    is_error: false,
                },
                Block::tool_result("call_2", "plain text", false),
                Block::ToolResult {
                    tool_use_id: "call_3".into(),
                    content: String::new(),
                    images: vec![image("image/jpeg", "/9j/4A=="), image("image/webp", "UklGRg==")].into(),
                    is_error: false,
                },
            ],
        },
    ];
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
    let url = |u: &str| json!({"type": "image_url", "image_url": {"url": u}});
    assert_eq!(
        v["messages"].as_array().unwrap()[2..],
        [
            json!({"role": "tool", "tool_call_id": "call_1", "content": "Here it is."}),
            json!({"role": "tool", "tool_call_id": "call_2", "content": "plain text"}),
            json!({"role": "tool", "tool_call_id": "call_3", "content": ""}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "The image(s) the tool call call_1 returned:"},
                url("data:image/png;base64,iVBORw0KGgo="),
                {"type": "text", "text": "The image(s) the tool call call_3 returned:"},
                url("data:image/jpeg;base64,/9j/4A=="),
                url("data:image/webp;base64,UklGRg==")
            ]}),
        ]
    );
}

#[test]
fn response_format_is_written_as_openai_takes_it() {
    let messages = [Message::user_text("count")];
    let body = |format: Option<&Format>| {
        let req = Request {
            model: "m",
            max_tokens: 5,
            system: "",
            messages: &messages,
            tools: &[],
            tool_choice: ToolChoice::Auto,
            stream: false,
            cache: Default::default(),
            format,
        };
        let mut body = String::new();
        write_request(&req, &mut body);
        body
    };
    assert!(!body(None).contains("response_format"), "free text asks for nothing");
    let object = body(Some(&Format::JsonObject));
    assert!(object.ends_with(r#","response_format":{"type":"json_object"}}"#), "{object}");
    let schema = Format::JsonSchema {
        name: "count".into(),
        description: Some("A \"count\".".into()),
        schema: Some(r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#.into()),
        strict: Some(true),
    };
    let v: Value = serde_json::from_str(&body(Some(&schema))).unwrap();
    assert_eq!(
        v["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "count", "description": "A \"count\".",
            "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, "strict": true}})
    );
    let bare = Format::JsonSchema { name: "x".into(), description: None, schema: None, strict: None };
    let v: Value = serde_json::from_str(&body(Some(&bare))).unwrap();
    assert_eq!(v["response_format"], json!({"type": "json_schema", "json_schema": {"name": "x"}}));
}
