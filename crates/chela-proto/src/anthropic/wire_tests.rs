//! The pull reader's events against the serde derive they replaced (kept here, in the test only).

use super::*;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value, json};

#[derive(Deserialize, Debug, PartialEq, Default)]
struct SerdeUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct SerdeEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: usize,
    #[serde(default, borrow)]
    content_block: Option<SerdeStartBlock<'a>>,
    #[serde(default, borrow)]
    delta: Option<SerdeDelta<'a>>,
    #[serde(default)]
    message: Option<SerdeStartMessage>,
    #[serde(default)]
    usage: Option<SerdeUsageDelta>,
    #[serde(default)]
    error: Option<SerdeError>,
}

#[derive(Deserialize)]
struct SerdeStartBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct SerdeDelta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct SerdeStartMessage {
    #[serde(default)]
    usage: SerdeUsage,
}

#[derive(Deserialize)]
struct SerdeUsageDelta {
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct SerdeError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

fn usage(u: SerdeUsage) -> WireUsage {
    WireUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_creation_input_tokens: u.cache_creation_input_tokens,
        cache_read_input_tokens: u.cache_read_input_tokens,
    }
}

/// The serde event in the reader's types, to compare field by field.
fn convert(e: SerdeEvent<'_>) -> WireEvent<'_> {
    WireEvent {
        kind: e.kind,
        index: e.index,
        content_block: e.content_block.map(|b| StartBlock { kind: b.kind, text: b.text, id: b.id, name: b.name }),
        delta: e.delta.map(|d| WireDelta {
            kind: d.kind,
            text: d.text,
            partial_json: d.partial_json,
            stop_reason: d.stop_reason,
        }),
        message: e.message.map(|m| StartMessage { usage: usage(m.usage) }),
        usage: e.usage.map(|u| WireUsageDelta {
            output_tokens: u.output_tokens,
            input_tokens: u.input_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
        }),
        error: e.error.map(|e| WireError { kind: e.kind, message: e.message }),
    }
}

/// A field's value: right types, wrong types, `null` and the shapes around them.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        (0u64..100).prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        Just(json!(1.5)),
        "[a-z_\"\\\\\u{e9}]{0,6}".prop_map(Value::String),
        Just(json!("message_start")),
        Just(json!("content_block_start")),
        Just(json!("text_delta")),
    ]
}

const KEYS: &[&str] = &[
    "type",
    "index",
    "content_block",
    "delta",
    "message",
    "usage",
    "error",
    "text",
    "id",
    "name",
    "partial_json",
    "stop_reason",
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "extra",
];

/// Objects built from the events' own keys (repeats included) over scalars and nested objects.
fn object_text() -> impl Strategy<Value = String> {
    let inner = prop::collection::vec((prop::sample::select(KEYS), scalar()), 0..6).prop_map(|m| members(&m));
    let value = prop_oneof![scalar().prop_map(|v| v.to_string()), inner];
    prop::collection::vec((prop::sample::select(KEYS), value), 0..8).prop_map(|m| {
        let body: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(","))
    })
}

fn members(m: &[(&str, Value)]) -> String {
    let body: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}", body.join(","))
}

fn agree(text: &str) -> core::result::Result<(), TestCaseError> {
    let ours = WireEvent::read(text.as_bytes());
    let theirs = serde_json::from_str::<SerdeEvent<'_>>(text);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, convert(b), "{}", text),
        (Err(_), Err(_)) => {}
        (a, b) => prop_assert!(false, "ours {:?}, serde {:?} for {}", a, b.map(|_| ()), text),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn events_read_as_the_serde_derive_read_them(text in object_text()) {
        agree(&text)?;
    }

    #[test]
    fn well_formed_events_read_as_the_serde_derive_read_them(
        kind in prop::sample::select(&["message_start", "content_block_start", "content_block_delta", "message_delta", "error", "ping"][..]),
        index in 0u64..5,
        text in any::<String>(),
        tokens in any::<Option<u64>>(),
    ) {
        let v = json!({
            "type": kind, "index": index,
            "content_block": {"type": "tool_use", "id": text, "name": "n", "input": {}},
            "delta": {"type": "text_delta", "text": text, "stop_reason": "end_turn"},
            "message": {"id": "m", "usage": {"input_tokens": 3, "cache_read_input_tokens": tokens}},
            "usage": {"output_tokens": tokens},
            "error": {"type": "overloaded_error", "message": text},
        });
        agree(&v.to_string())?;
        let mut m: Map<String, Value> = Map::new();
        m.insert("type".into(), json!(kind));
        agree(&Value::Object(m).to_string())?;
    }
}

#[derive(Deserialize)]
struct SerdeBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Deserialize)]
struct SerdeMessage {
    content: Vec<SerdeBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: SerdeUsage,
}

/// serde's derive also reads a struct from an array of its fields in order; no server sends
/// that, and the reader refuses it: the one refusal the derive does not share.
const ARRAY_AS_STRUCT: &str = "invalid type: expected an object";

fn agree_message(text: &str) -> core::result::Result<(), TestCaseError> {
    let ours = WireMessage::read(text.as_bytes());
    let theirs = serde_json::from_str::<SerdeMessage>(text);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => {
            let content = b
                .content
                .iter()
                .map(|b| WireBlock {
                    kind: b.kind.clone(),
                    text: b.text.clone(),
                    id: b.id.clone(),
                    name: b.name.clone(),
                    input: b.input.as_deref().map(serde_json::value::RawValue::get),
                })
                .collect();
            prop_assert_eq!(a, WireMessage { content, stop_reason: b.stop_reason, usage: usage(b.usage) }, "{}", text);
        }
        (Err(_), Err(_)) => {}
        (Err(e), Ok(_)) if e.what == ARRAY_AS_STRUCT => {}
        (a, b) => prop_assert!(false, "ours {:?}, serde {:?} for {}", a, b.map(|_| ()), text),
    }
    Ok(())
}

const MESSAGE_KEYS: &[&str] =
    &["content", "stop_reason", "usage", "type", "text", "id", "name", "input", "input_tokens", "extra"];

/// Message bodies built from the format's own keys (repeats included), arrays where it has them.
fn message_text() -> impl Strategy<Value = String> {
    let leaf = scalar().prop_map(|v| v.to_string());
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec((prop::sample::select(MESSAGE_KEYS), inner.clone()), 0..5).prop_map(|m| {
                let body: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", body.join(","))
            }),
            prop::collection::vec(inner, 0..3).prop_map(|items| format!("[{}]", items.join(","))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn messages_read_as_the_serde_derive_read_them(text in message_text()) {
        agree_message(&text)?;
    }

    #[test]
    fn real_shaped_messages_read_as_the_serde_derive_read_them(text in any::<String>(), stop in any::<Option<String>>()) {
        let body = json!({"id": "m", "type": "message", "role": "assistant", "content": [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": "t", "name": "f", "input": {"q": text, "n": [1, 2.5, null]}},
            {"type": "thinking", "thinking": text}],
            "stop_reason": stop, "usage": {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": null}});
        agree_message(&body.to_string())?;
    }
}

#[test]
fn a_repeated_or_missing_type_is_refused() {
    assert_eq!(WireEvent::read(br#"{"index":1}"#).unwrap_err().what, "missing field `type`");
    assert_eq!(WireEvent::read(br#"{"type":"a","type":"b"}"#).unwrap_err().what, "duplicate field");
    assert!(serde_json::from_str::<SerdeEvent<'_>>(r#"{"type":"a","type":"b"}"#).is_err());
    // Unknown members are skipped, however deep.
    let ev = WireEvent::read(br#"{"x":[{"y":[1,{"z":null}]}],"type":"ping"}"#).unwrap();
    assert_eq!(ev.kind, "ping");
}
