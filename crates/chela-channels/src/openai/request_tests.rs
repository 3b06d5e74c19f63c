use serde_json::json;

use super::*;

fn read(v: serde_json::Value) -> Result<Chat, Refusal> {
    chat(v.to_string().as_bytes())
}

#[test]
fn the_clients_conversation_becomes_chelas_messages() {
    let c = read(json!({"model": "chela", "messages": [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "and tomorrow?"},
    ]}))
    .unwrap();
    assert_eq!(c.instructions.as_deref(), Some("Answer in French."));
    assert_eq!(c.history.len(), 2);
    assert_eq!(c.history[0].text(), "part one\npart two", "text parts are joined by a newline");
    assert_eq!(c.history[1].tool_use_ids().collect::<Vec<_>>(), ["call_1"]);
    assert_eq!(c.user.content[0], Block::tool_result("call_1", "sunny", false));
    assert_eq!(c.user.content[1], Block::text("and tomorrow?"));
    assert!(!c.stream && c.user_field.is_none());
}

#[test]
fn meaning_changing_parameters_are_refused_and_sampling_hints_are_not() {
    let ask = |extra: serde_json::Value| {
        let mut v = json!({"messages": [{"role": "user", "content": "hi"}]});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        read(v)
    };
    for (extra, param, says) in [
        (json!({"n": 2}), "n", "`n` must be 1"),
        (json!({"response_format": {"type": "json_schema"}}), "response_format", "needs `json_schema`"),
        (json!({"response_format": {"type": "yaml"}}), "response_format", "must be"),
        (json!({"logprobs": true}), "logprobs", "log probabilities"),
        (json!({"stop": ["\n"]}), "stop", "stop sequences"),
        (json!({"functions": []}), "functions", "legacy"),
        (json!({"frobnicate": 1}), "frobnicate", "Unrecognized request argument supplied: frobnicate"),
        (json!({"tool_choice": "required"}), "tool_choice", "tool_choice"),
        (json!({"stream": "yes"}), "stream", "true or false"),
    ] {
        let e = ask(extra.clone()).unwrap_err();
        assert_eq!(e.status, hyper::StatusCode::BAD_REQUEST, "{extra}");
        assert_eq!(e.param.as_deref(), Some(param), "{extra}");
        assert!(e.message.contains(says), "{extra}: {}", e.message);
    }
    let fine = json!({"n": 1, "temperature": 0.2, "max_tokens": 10, "response_format": {"type": "text"},
        "logprobs": false, "stop": null, "stream_options": {"include_usage": true}, "stream": true});
    let c = ask(fine).unwrap();
    assert!(c.stream && c.include_usage);
}

#[test]
fn broken_conversations_are_refused_with_the_message_named() {
    for (messages, param, says) in [
        (json!([{"role": "wizard", "content": "x"}]), "messages[0].role", "wizard"),
        (json!([{"content": "x"}]), "messages[0].role", "needs a `role`"),
        (
            json!([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}]),
            "messages[1].tool_call_id",
            "no assistant message before it called",
        ),
        (
            json!([{"role": "user", "content": "q"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "never mind"}]),
            "messages",
            "no tool message answering it",
        ),
        (
            json!([{"role": "user", "content": "q"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]),
            "messages[1].tool_calls",
            "not a JSON object",
        ),
        (
            json!([{"role": "user", "content": [{"type": "text", "text": {"nested": "object"}}]}]),
            "messages[0].content",
            "as a string",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]),
            "messages[0].content",
            "input_audio",
        ),
        (json!([{"role": "user", "content": {"type": "text"}}]), "messages[0].content", "string or an array"),
        (
            json!([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]),
            "messages",
            "the assistant's",
        ),
        (json!([{"role": "system", "content": "only rules"}]), "messages", "no message with role `user`"),
    ] {
        let e = read(json!({"messages": messages})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(param), "{messages}: {}", e.message);
        assert!(e.message.contains(says), "{messages}: {}", e.message);
    }
}

#[test]
fn a_stateless_history_starts_with_the_user() {
    let mut c =
        read(json!({"messages": [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "q"}]}))
            .unwrap();
    let e = c.stateless_history().unwrap_err();
    assert!(e.message.contains("start with a user"), "{}", e.message);
}

#[test]
fn bounds_on_messages_and_tools_are_clear() {
    let many: Vec<_> = (0..=MAX_MESSAGES).map(|_| json!({"role": "user", "content": "x"})).collect();
    let e = read(json!({"messages": many})).unwrap_err();
    assert!(e.message.contains(&format!("at most {MAX_MESSAGES}")), "{}", e.message);
    let tool = |name: &str| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}});
    let tools: Vec<_> = (0..=MAX_TOOLS).map(|i| tool(&format!("t{i}"))).collect();
    let e = read(json!({"messages": [{"role": "user", "content": "x"}], "tools": tools})).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("tools"));
    for bad in [tool("has space"), tool(&"x".repeat(65)), json!({"type": "retrieval"})] {
        let e = read(json!({"messages": [{"role": "user", "content": "x"}], "tools": [bad]})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tools"), "{}", e.message);
    }
    let e = read(json!({"messages": [{"role": "user", "content": "x"}], "tools": [tool("a"), tool("a")]})).unwrap_err();
    assert!(e.message.contains("twice"));
}

proptest::proptest! {
    /// Whatever JSON a client sends, reading it ends in a request or a 400, never a panic, and
    /// a request read is one Chela can send: it ends with a user message that says something.
    #[test]
    fn any_json_reads_to_a_request_or_a_refusal(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
                                                roles in proptest::collection::vec(0u8..6, 0..8)) {
        let _ = chat(&body);
        let names = ["system", "user", "assistant", "tool", "developer", "other"];
        let messages: Vec<_> = roles.iter().enumerate().map(|(i, r)| json!({
            "role": names[*r as usize], "content": format!("m{i}"), "tool_call_id": "c0",
            "tool_calls": if i % 3 == 0 { json!([{"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]) } else { json!(null) },
        })).collect();
        match read(json!({"messages": messages})) {
            Ok(c) => {
                proptest::prop_assert_eq!(c.user.role, Role::User);
                proptest::prop_assert!(c.user.has_tool_results() || !c.user.text().trim().is_empty());
            }
            Err(e) => proptest::prop_assert_eq!(e.status, hyper::StatusCode::BAD_REQUEST),
        }
    }
}

#[test]
fn response_format_is_read_into_the_format_asked_of_the_provider() {
    let ask = |format: serde_json::Value| {
        read(json!({"messages": [{"role": "user", "content": "hi"}], "response_format": format}))
    };
    assert_eq!(ask(json!({"type": "text"})).unwrap().format, None);
    assert_eq!(ask(json!(null)).unwrap().format, None);
    assert_eq!(ask(json!({"type": "json_object"})).unwrap().format, Some(Format::JsonObject));
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    let f = ask(json!({"type": "json_schema", "json_schema": {"name": "count", "schema": schema, "strict": true}}));
    assert_eq!(
        f.unwrap().format,
        Some(Format::JsonSchema {
            name: "count".into(),
            description: None,
            schema: Some(schema.to_string()),
            strict: Some(true)
        })
    );
    // Abuse: every part that reaches the provider is checked and bounded.
    let huge = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA)});
    for (format, says) in [
        (json!("json_object"), "must be an object"),
        (json!({"type": "json_schema", "json_schema": {"schema": {}}}), "name"),
        (json!({"type": "json_schema", "json_schema": {"name": "a\"b"}}), "name"),
        (json!({"type": "json_schema", "json_schema": {"name": "n", "schema": "{}"}}), "JSON Schema object"),
        (json!({"type": "json_schema", "json_schema": {"name": "n", "schema": huge}}), "over"),
        (json!({"type": "json_schema", "json_schema": {"name": "n", "strict": "yes"}}), "true or false"),
        (json!({"type": "json_schema", "json_schema": {"name": "n", "description": 3}}), "string"),
        (json!({"type": "json_schema", "json_schema": {"name": "n", "description": "d".repeat(5000)}}), "over"),
    ] {
        let e = ask(format.clone()).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("response_format"), "{format}");
        assert!(e.message.contains(says), "{format}: {}", e.message);
    }
}
