//! The pull reader's chunks and responses against the serde derive they replaced (kept here, in
//! the test only).

use super::*;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::ToString;
use proptest::prelude::*;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Value, json};

#[derive(Deserialize, Default)]
struct SerdeUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<SerdeUsageDetails>,
}

#[derive(Deserialize, Default)]
struct SerdeUsageDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct SerdeFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct SerdeToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<SerdeFunction>,
}

#[derive(Deserialize)]
struct SerdeMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<SerdeToolCall>>,
}

#[derive(Deserialize)]
struct SerdeChoice {
    message: SerdeMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct SerdeCompletion {
    #[serde(default)]
    choices: Vec<SerdeChoice>,
    #[serde(default)]
    usage: Option<SerdeUsage>,
}

#[derive(Deserialize)]
struct SerdeDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<SerdeToolCall>>,
}

#[derive(Deserialize)]
struct SerdeChunkChoice<'a> {
    #[serde(default)]
    index: usize,
    #[serde(default, borrow)]
    delta: Option<SerdeDelta<'a>>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct SerdeChunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<SerdeChunkChoice<'a>>,
    #[serde(default)]
    usage: Option<SerdeUsage>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

fn usage(u: SerdeUsage) -> WireUsage {
    WireUsage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
    }
}

fn call(tc: &SerdeToolCall) -> WireToolCall<'_> {
    WireToolCall {
        index: tc.index,
        id: tc.id.clone(),
        function: tc
            .function
            .as_ref()
            .map(|f| WireFunction { name: f.name.clone(), arguments: f.arguments.as_deref().map(RawValue::get) }),
    }
}

fn calls(v: &Option<Vec<SerdeToolCall>>) -> Option<Vec<WireToolCall<'_>>> {
    v.as_ref().map(|v| v.iter().map(call).collect())
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0u64..100).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        Just(json!(-1)),
        Just(json!(2.5)),
        "[a-z_\"\\\\{}\u{e9}]{0,6}".prop_map(Value::String),
        Just(json!("{\"a\":1}")),
        Just(json!("\"unterminated")),
    ]
}

const KEYS: &[&str] = &[
    "choices",
    "usage",
    "error",
    "index",
    "delta",
    "message",
    "finish_reason",
    "content",
    "tool_calls",
    "id",
    "function",
    "name",
    "arguments",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "cached_tokens",
    "extra",
];

/// JSON text built from the format's own keys (repeats included), three levels deep, with
/// arrays where the format has them and objects or scalars anywhere.
fn text() -> impl Strategy<Value = String> {
    let leaf = scalar().prop_map(|v| v.to_string());
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec((prop::sample::select(KEYS), inner.clone()), 0..5).prop_map(|m| {
                let body: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", body.join(","))
            }),
            prop::collection::vec(inner, 0..3).prop_map(|items| format!("[{}]", items.join(","))),
        ]
    })
}

/// serde's derive also reads a struct from an array of its fields in order; no server sends that,
/// and the reader refuses it: the one refusal the derive does not share.
const ARRAY_AS_STRUCT: &str = "invalid type: expected an object";

fn agree_chunk(text: &str) -> core::result::Result<(), TestCaseError> {
    let ours = WireChunk::read(text.as_bytes());
    let theirs = serde_json::from_str::<SerdeChunk<'_>>(text);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => {
            let b = WireChunk {
                choices: b
                    .choices
                    .iter()
                    .map(|c| ChunkChoice {
                        index: c.index,
                        delta: c
                            .delta
                            .as_ref()
                            .map(|d| ChunkDelta { content: d.content.clone(), tool_calls: calls(&d.tool_calls) }),
                        finish_reason: c.finish_reason.clone(),
                    })
                    .collect(),
                usage: b.usage.map(usage),
                error: b.error.is_some(),
            };
            prop_assert_eq!(a, b, "{}", text);
        }
        (Err(_), Err(_)) => {}
        (Err(e), Ok(_)) if e.what == ARRAY_AS_STRUCT => {}
        (a, b) => prop_assert!(false, "ours {:?}, serde {:?} for {}", a, b.map(|_| ()), text),
    }
    Ok(())
}

fn agree_completion(text: &str) -> core::result::Result<(), TestCaseError> {
    let ours = WireCompletion::read(text.as_bytes());
    let theirs = serde_json::from_str::<SerdeCompletion>(text);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => {
            let choices: Vec<WireChoice<'_>> = b
                .choices
                .iter()
                .map(|c| WireChoice {
                    message: WireMessage {
                        content: c.message.content.clone(),
                        tool_calls: calls(&c.message.tool_calls),
                    },
                    finish_reason: c.finish_reason.clone(),
                })
                .collect();
            prop_assert_eq!(a, WireCompletion { choices, usage: b.usage.map(usage) }, "{}", text);
        }
        (Err(_), Err(_)) => {}
        (Err(e), Ok(_)) if e.what == ARRAY_AS_STRUCT => {}
        (a, b) => prop_assert!(false, "ours {:?}, serde {:?} for {}", a, b.map(|_| ()), text),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn chunks_and_completions_read_as_the_serde_derive_read_them(text in text()) {
        agree_chunk(&text)?;
        agree_completion(&text)?;
    }

    #[test]
    fn well_formed_chunks_read_as_the_serde_derive_read_them(
        content in any::<Option<String>>(),
        args in prop_oneof![any::<String>().prop_map(Value::String), Just(json!({"x": [1, {"y": null}]})), Just(Value::Null)],
        index in any::<Option<u8>>(),
        cached in any::<Option<u64>>(),
    ) {
        let call = json!({"index": index, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": args}});
        let chunk = json!({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": content, "tool_calls": [call]}, "finish_reason": null}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": cached}}});
        agree_chunk(&chunk.to_string())?;
        let body = json!({"choices": [{"message": {"content": content, "tool_calls": [call]}, "finish_reason": "tool_calls"}], "usage": null});
        agree_completion(&body.to_string())?;
        agree_chunk(&json!({"error": {"message": content}}).to_string())?;
    }
}

#[test]
fn arguments_keep_their_text_as_the_raw_value_did() {
    let c = WireChunk::read(br#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments": {"a" : [1, 2]} }}]}}]}"#)
        .unwrap();
    let tc = &c.choices[0].delta.as_ref().unwrap().tool_calls.as_ref().unwrap()[0];
    assert_eq!(tc.function.as_ref().unwrap().arguments, Some(r#"{"a" : [1, 2]}"#));
    assert_eq!(super::super::arguments_text(Some(r#""{\"a\":1}""#)).unwrap(), r#"{"a":1}"#);
    assert!(super::super::arguments_text(Some(r#""\q""#)).is_err());
    // A choice without its message is refused, as the derive refused it.
    assert_eq!(WireCompletion::read(br#"{"choices":[{}]}"#).unwrap_err().what, "missing field `message`");
}
