//! Prompt caching on both wire formats: the breakpoints and key a request carries, and the
//! cached-token counts read back from answers (the recorded ones in the wire corpus too).

use chela_proto::chat::{Block, Cache, Json, Message, Request, Role, ToolChoice, ToolSpec, Usage};
use chela_proto::stream::Limits;
use chela_proto::{anthropic, openai};
use serde_json::{Value, json};

const TOOLS: [ToolSpec<'static>; 2] = [
    ToolSpec { name: "get_weather", description: "Weather.", input_schema: r#"{"type":"object"}"# },
    ToolSpec { name: "get_current_time", description: "Time.", input_schema: r#"{"type":"object"}"# },
];
const SYSTEM: &str = "You are Chela.\n\nChannel: cli. Local time: 09:00.";
const STABLE: usize = "You are Chela.".len();

fn conversation() -> Vec<Message> {
    vec![
        Message::user_text("hi"),
        Message::assistant_text("hello"),
        Message::user_text("time?"),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::text(""),
                Block::ToolUse { id: "t1".into(), name: "get_current_time".into(), input: Json::empty_object() },
            ],
        },
        Message { role: Role::User, content: vec![Block::tool_result("t1", "09:00", false), Block::text("")] },
    ]
}

fn request<'a>(messages: &'a [Message], cache: Cache<'a>) -> Request<'a> {
    Request {
        model: "m",
        max_tokens: 64,
        system: SYSTEM,
        messages,
        tools: &TOOLS,
        tool_choice: ToolChoice::Auto,
        stream: true,
        cache,
        format: None,
    }
}

fn anthropic_body(req: &Request<'_>) -> (String, Value) {
    let mut body = String::new();
    anthropic::write_request(req, &mut body);
    let v = serde_json::from_str(&body).unwrap();
    (body, v)
}

#[test]
fn anthropic_breakpoints_mark_the_last_tool_the_stable_system_and_the_history_end() {
    let messages = conversation();
    let cache = Cache { mark: true, system_stable: STABLE, history_end: Some(1), key: Some("k") };
    let (body, v) = anthropic_body(&request(&messages, cache));
    let eph = json!({"type": "ephemeral"});
    assert_eq!(body.matches("cache_control").count(), 3, "three of the API's four breakpoints: {body}");
    assert!(v["tools"][0].get("cache_control").is_none());
    assert_eq!(v["tools"][1]["cache_control"], eph, "the last tool");
    assert_eq!(
        v["system"],
        json!([
            {"type": "text", "text": "You are Chela.", "cache_control": eph},
            {"type": "text", "text": "\n\nChannel: cli. Local time: 09:00."}
        ])
    );
    // The history's last message (one text block) becomes a block list to carry the mark.
    assert_eq!(v["messages"][1]["content"], json!([{"type": "text", "text": "hello", "cache_control": eph}]));
    assert_eq!(v["messages"][2]["content"], "time?", "unmarked messages keep their plain form");
    // The newest message is not marked: the mark stays put for every call of the turn.
    assert_eq!(v["messages"][4]["content"], json!([{"type": "tool_result", "tool_use_id": "t1", "content": "09:00"}]));
    // A history that ends in a tool round: the mark goes on its last written block, not on the
    // skipped empty text.
    let at_end = Cache { history_end: Some(4), ..cache };
    let (_, v) = anthropic_body(&request(&messages, at_end));
    assert_eq!(
        v["messages"][4]["content"],
        json!([{"type": "tool_result", "tool_use_id": "t1", "content": "09:00", "cache_control": eph}])
    );
    assert!(!body.contains("prompt_cache_key"), "Anthropic has no such field");
    // In the order the API reads the prefix: tools, then system, then messages.
    let (t, s, m) =
        (body.find("\"tools\"").unwrap(), body.find("\"system\"").unwrap(), body.find("\"messages\"").unwrap());
    assert!(t < s && s < m, "{body}");
}

#[test]
fn anthropic_without_marks_is_the_plain_request() {
    let messages = conversation();
    let (body, v) = anthropic_body(&request(&messages, Cache::default()));
    assert!(!body.contains("cache_control"), "{body}");
    assert_eq!(v["system"], SYSTEM);
    // Marks asked for but no stable part known: the system prompt stays one string.
    let cache = Cache { mark: true, system_stable: 0, history_end: None, key: None };
    let (body, v) = anthropic_body(&request(&messages, cache));
    assert_eq!(v["system"], SYSTEM);
    assert_eq!(body.matches("cache_control").count(), 1, "the last tool only: {body}");
    // A stable length off a character boundary is not trusted.
    let cache = Cache { mark: true, system_stable: 1, history_end: None, key: None };
    let mut req = request(&messages, cache);
    req.system = "é and more";
    assert_eq!(anthropic_body(&req).1["system"], "é and more");
}

#[test]
fn anthropic_an_image_at_the_history_end_carries_the_mark() {
    let messages = vec![Message {
        role: Role::User,
        content: vec![Block::text("see"), Block::Image { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() }],
    }];
    let cache = Cache { mark: true, system_stable: STABLE, history_end: Some(0), key: None };
    let (_, v) = anthropic_body(&request(&messages, cache));
    assert_eq!(v["messages"][0]["content"][1]["cache_control"], json!({"type": "ephemeral"}));
    assert!(v["messages"][0]["content"][0].get("cache_control").is_none());
}

#[test]
fn openai_sends_the_key_and_puts_tools_and_the_stable_system_first() {
    let messages = conversation();
    let cache = Cache { mark: true, system_stable: STABLE, history_end: Some(1), key: Some("chela-0123") };
    let req = request(&messages, cache);
    let mut body = String::new();
    openai::write_request(&req, &mut body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["prompt_cache_key"], "chela-0123");
    assert_eq!(v["messages"][0], json!({"role": "system", "content": SYSTEM}));
    assert!(!body.contains("cache_control"));
    // The body's prefix up to the stable system text is the same whatever follows it.
    let cut = body.find("You are Chela.").unwrap() + STABLE;
    assert!(body.find("\"tools\"").unwrap() < body.find("\"messages\"").unwrap());
    let other = [Message::user_text("something else entirely")];
    let mut second = String::new();
    openai::write_request(
        &Request { system: "You are Chela.\n\nChannel: telegram.", ..request(&other, cache) },
        &mut second,
    );
    assert_eq!(&second[..cut], &body[..cut]);
    let mut plain = String::new();
    openai::write_request(&request(&messages, Cache::default()), &mut plain);
    assert!(!plain.contains("prompt_cache_key"));
}

fn anthropic_stream(events: &[&str]) -> Usage {
    let mut d = anthropic::StreamDecoder::new(Limits::default());
    for e in events {
        d.handle_bytes(e.as_bytes(), &mut |_| {}).unwrap();
    }
    d.finish().unwrap().usage
}

#[test]
fn anthropic_cache_counts_are_read_whole_and_streamed() {
    let whole = br#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],
        "stop_reason":"end_turn","usage":{"input_tokens":21,"cache_creation_input_tokens":188,
        "cache_read_input_tokens":2048,"output_tokens":393}}"#;
    let u = anthropic::parse_response(whole).unwrap().usage;
    assert_eq!(u, Usage { input_tokens: 21, output_tokens: 393, cache_read_tokens: 2048, cache_write_tokens: 188 });
    assert_eq!(u.prompt_tokens(), 21 + 188 + 2048);
    let streamed = anthropic_stream(&[
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":21,\"cache_creation_input_tokens\":188,\"cache_read_input_tokens\":2048,\"output_tokens\":1}}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":393}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ]);
    assert_eq!(streamed, u);
    // A delta that repeats the cache counts (newer API versions do) overrides the start's.
    let again = anthropic_stream(&[
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n",
        "data: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":7,\"cache_read_input_tokens\":900,\"cache_creation_input_tokens\":3}}\n\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    ]);
    assert_eq!(again, Usage { input_tokens: 5, output_tokens: 7, cache_read_tokens: 900, cache_write_tokens: 3 });
}

#[test]
fn openai_cached_tokens_are_taken_out_of_the_prompt_count() {
    let whole = br#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":339,"completion_tokens":83,"prompt_tokens_details":{"cached_tokens":320}}}"#;
    let u = openai::parse_response(whole).unwrap().usage;
    assert_eq!(u, Usage { input_tokens: 19, output_tokens: 83, cache_read_tokens: 320, cache_write_tokens: 0 });
    // A server that claims more cached than sent is clamped, not wrapped; null details are none.
    let odd = br#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":99}}}"#;
    assert_eq!(openai::parse_response(odd).unwrap().usage.cache_read_tokens, 10);
    let null = br#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":null}}"#;
    assert_eq!(openai::parse_response(null).unwrap().usage.input_tokens, 10);
}

/// The recorded answers, read where the project keeps them beside the repository; `None` when
/// this checkout has no corpus next to it.
fn corpus(name: &str) -> Option<Vec<u8>> {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = here.ancestors().map(|a| a.join("shared/wire-corpus/bodies")).find(|d| d.is_dir())?;
    Some(std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}")))
}

fn decode_recorded(name: &str) -> Option<Usage> {
    let body = corpus(name)?;
    let usage = match (name.starts_with("anthropic"), name.ends_with(".sse")) {
        (true, true) => {
            let mut d = anthropic::StreamDecoder::new(Limits::HOST);
            d.handle_bytes(&body, &mut |_| {}).unwrap();
            d.finish().unwrap().usage
        }
        (true, false) => anthropic::parse_response(&body).unwrap().usage,
        (false, true) => {
            let mut d = openai::StreamDecoder::new(Limits::HOST);
            d.handle_bytes(&body, &mut |_| {}).unwrap();
            d.finish().unwrap().usage
        }
        (false, false) => openai::parse_response(&body).unwrap().usage,
    };
    Some(usage)
}

#[test]
fn recorded_answers_give_their_cache_counts() {
    // (file, uncached input, cached input, cache write, output), as the recordings say.
    let cases = [
        ("anthropic-sonnet45-stream-text-then-tool.1.sse", 565, 0, 0, 48),
        ("anthropic-haiku45-stream-thinking-tool.2.sse", 707, 0, 0, 89),
        ("deepseek-reasoner-stream-tool.1.sse", 339 - 320, 320, 0, 83),
        ("glm-stream-tool-empty-name-delta.1.sse", 171 - 128, 128, 0, 14),
        ("xai-grok3mini-stream-tool.1.sse", 291 - 290, 290, 0, 26),
        ("openai-gpt4omini-stream-tool.2.sse", 78, 0, 0, 9),
    ];
    let mut seen = 0;
    for (name, input, read, write, output) in cases {
        let Some(u) = decode_recorded(name) else { continue };
        seen += 1;
        let want =
            Usage { input_tokens: input, output_tokens: output, cache_read_tokens: read, cache_write_tokens: write };
        assert_eq!(u, want, "{name}");
    }
    if seen == 0 {
        eprintln!("the wire corpus is not beside this checkout; only the inline answers were checked");
    }
}
