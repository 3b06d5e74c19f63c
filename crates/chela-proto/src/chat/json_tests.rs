//! The content reader and writer against the serde derives they replaced (kept here only).

use super::*;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use core::fmt;
use proptest::prelude::*;
use serde::Deserialize;
use serde::de::{SeqAccess, Visitor};
use serde_json::json;
use serde_json::value::RawValue;

use crate::chat::Message;
use crate::json::strategies::{escaped_string, nested_text, number_text, string_text};

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RefRole {
    User,
    Assistant,
}

#[derive(Deserialize)]
struct RefImage {
    media_type: String,
    data: String,
}

#[derive(Deserialize)]
struct RefBlock {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    media_type: Option<String>,
    data: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Box<RawValue>>,
    tool_use_id: Option<String>,
    content: Option<String>,
    #[serde(default)]
    images: Vec<RefImage>,
    #[serde(default)]
    is_error: bool,
}

/// The derive's second step: the flat struct to a block, `None` where it refused.
fn ref_block(r: RefBlock) -> Option<Block> {
    Some(match r.kind.as_str() {
        "text" => Block::Text { text: r.text? },
        "image" => Block::Image { media_type: r.media_type?, data: r.data? },
        "tool_use" => Block::ToolUse { id: r.id?, name: r.name?, input: Json(r.input?.get().into()) },
        "tool_result" => Block::ToolResult {
            tool_use_id: r.tool_use_id?.into_boxed_str(),
            content: r.content?,
            images: r
                .images
                .into_iter()
                .map(|i| Image { media_type: i.media_type, data: i.data })
                .collect::<Vec<_>>()
                .into(),
            is_error: r.is_error,
        },
        _ => return None,
    })
}

/// The old content visitor: a string or an array of blocks.
struct RefContent(Vec<RefBlock>, Option<String>);

impl<'de> Deserialize<'de> for RefContent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<RefContent, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RefContent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> core::result::Result<RefContent, E> {
                Ok(RefContent(Vec::new(), Some(v.into())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> core::result::Result<RefContent, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<RefBlock>()? {
                    out.push(b);
                }
                Ok(RefContent(out, None))
            }
        }
        d.deserialize_any(V)
    }
}

/// serde's derive also reads a struct from an array of its fields and a unit variant from a
/// one-key object; nothing writes those, and the reader refuses them.
fn derive_only(text: &str) -> bool {
    text.contains("[[") || text.contains("{\"user\"") || text.contains("{\"assistant\"")
}

fn agree_content(text: &str) -> core::result::Result<(), TestCaseError> {
    let ours = read::read_all(text.as_bytes(), read_content);
    let theirs = serde_json::from_str::<RefContent>(text).ok().and_then(|c| match c {
        RefContent(_, Some(s)) => Some(alloc::vec![Block::Text { text: s }]),
        RefContent(blocks, None) => blocks.into_iter().map(ref_block).collect::<Option<Vec<_>>>(),
    });
    match (ours, theirs) {
        (Ok(a), Some(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), None) => {}
        (Err(_), Some(_)) if derive_only(text) => {}
        (a, b) => prop_assert!(false, "ours {:?}, serde {:?} for {}", a, b, text),
    }
    Ok(())
}

/// A leaf's text: the shared kinds, and the tags and roles the reader looks for.
fn scalar() -> impl Strategy<Value = String> {
    const TAGS: &[&str] = &["text", "image", "tool_use", "tool_result", "user"];
    prop_oneof![
        1 => Just("null".to_string()),
        1 => any::<bool>().prop_map(|b| b.to_string()),
        2 => number_text(),
        5 => prop::sample::select(TAGS).prop_map(|t| format!("\"{t}\"")),
        1 => string_text(6),
    ]
}

const KEYS: &[&str] = &[
    "type",
    "text",
    "media_type",
    "data",
    "id",
    "name",
    "input",
    "tool_use_id",
    "content",
    "images",
    "is_error",
    "other",
];

fn text() -> impl Strategy<Value = String> {
    nested_text(scalar(), KEYS, 0..7, 6)
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), escaped_string(12)]
}

fn block() -> impl Strategy<Value = Block> {
    let input = prop_oneof![
        Just("{}".to_string()),
        Just(r#"{"zone":"UTC","n":[1,2.5e3,null]}"#.to_string()),
        any_text().prop_map(|s| json!({ "q": s }).to_string()),
    ];
    let images = prop::collection::vec((any_text(), any_text()), 0..3)
        .prop_map(|v| v.into_iter().map(|(media_type, data)| Image { media_type, data }).collect::<Vec<_>>());
    prop_oneof![
        any_text().prop_map(Block::text),
        (any_text(), any_text()).prop_map(|(media_type, data)| Block::Image { media_type, data }),
        (any_text(), any_text(), input).prop_map(|(id, name, input)| Block::ToolUse {
            id,
            name,
            input: Json(input.into())
        }),
        (any_text(), any_text(), images, any::<bool>()).prop_map(|(id, content, images, is_error)| {
            Block::ToolResult { tool_use_id: id.into(), content, images: images.into(), is_error }
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn content_reads_as_the_serde_derive_read_it(text in text()) {
        agree_content(&text)?;
    }

    #[test]
    fn written_content_is_what_serde_wrote_and_reads_back(blocks in prop::collection::vec(block(), 0..4)) {
        let ours = crate::json::to_string(|w| write_content(&blocks, w));
        #[derive(serde::Serialize)]
        struct Line<'a> { #[serde(with = "crate::chat::content_serde")] content: &'a [Block] }
        let theirs = serde_json::to_string(&Line { content: &blocks }).unwrap();
        prop_assert_eq!(format!("{{\"content\":{ours}}}"), theirs);
        agree_content(&ours)?;
        prop_assert_eq!(read::read_all(ours.as_bytes(), read_content).unwrap(), blocks);
    }

    #[test]
    fn roles_and_tool_inputs_read_as_serde_read_them(text in text()) {
        let ours = read::read_all(text.as_bytes(), Role::read).ok();
        let theirs = serde_json::from_str::<RefRole>(&text).ok().map(|r| match r { RefRole::User => Role::User, RefRole::Assistant => Role::Assistant });
        prop_assert!(ours == theirs || (ours.is_none() && derive_only(&text)), "{:?} {:?} {}", ours, theirs, text);
        let ours = Json::parse(&text).ok().map(|j| j.as_str().to_string());
        let theirs = serde_json::from_str::<Box<RawValue>>(&text).ok().map(|r| r.get().to_string());
        prop_assert_eq!(ours, theirs);
    }
}

#[test]
fn the_derives_refusals_stay_refused() {
    for bad in [
        r#"[{"text":"no type"}]"#,
        r#"[{"type":"text"}]"#,
        r#"[{"type":"text","text":null}]"#,
        r#"[{"type":"text","text":"a","id":5}]"#,
        r#"[{"type":"text","text":"a","text":"b"}]"#,
        r#"[{"type":"tool_use","id":"1","name":"n"}]"#,
        r#"[{"type":"tool_use","id":"1","name":"n","input":null}]"#,
        r#"[{"type":"tool_result","tool_use_id":"t","content":"","images":null}]"#,
        r#"[{"type":"tool_result","tool_use_id":"t","content":"","is_error":null}]"#,
        r#"[{"type":"video"}]"#,
        r#"{"type":"text","text":"a"}"#,
        r#"5"#,
        r#""a" 1"#,
        r#"[{"type":"text","text":"a"},]"#,
    ] {
        assert!(read::read_all(bad.as_bytes(), read_content).is_err(), "{bad}");
        assert!(
            serde_json::from_str::<RefContent>(bad).ok().is_none_or(|c| c
                .0
                .into_iter()
                .map(ref_block)
                .any(|b| b.is_none())),
            "{bad}"
        );
    }
    // Through the serde adapters too, which the host's serde callers use.
    assert!(serde_json::from_str::<Block>(r#"{"type":"text","text":"a","text":"b"}"#).is_err());
    assert!(serde_json::from_str::<Role>(r#""system""#).is_err());
    assert_eq!(serde_json::from_str::<Role>(r#" "assistant" "#).unwrap(), Role::Assistant);
    let m = Message::user_text("x");
    assert_eq!(crate::json::to_string(|w| write_content(&m.content, w)), r#""x""#);
}
