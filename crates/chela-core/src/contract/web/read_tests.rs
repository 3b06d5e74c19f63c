//! The search answers' reader against the serde derives it replaced (kept here only).

use super::*;
use alloc::string::ToString;
use chela_proto::json::strategies::{nested_text, number_text, string_text};
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct RefItem {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default, alias = "description")]
    content: String,
}

#[derive(Deserialize)]
struct RefTavily {
    #[serde(default)]
    results: Vec<RefItem>,
}

#[derive(Deserialize)]
struct RefBrave {
    #[serde(default)]
    web: Option<RefTavily>,
}

fn items(v: Vec<RefItem>) -> Vec<Item> {
    v.into_iter().map(|i| Item { title: i.title, url: i.url, content: i.content }).collect()
}

/// serde's derive also reads a struct from an array of its fields; no engine sends that, and
/// the reader refuses it: the one refusal the derive does not share.
fn array_as_struct(e: &read::Error) -> bool {
    e.what == "invalid type: expected an object"
}

fn agree(text: &str) -> Result<(), TestCaseError> {
    let (ours, theirs) =
        (read_tavily(text.as_bytes()), serde_json::from_str::<RefTavily>(text).map(|t| items(t.results)));
    match (ours, theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), Err(_)) => {}
        (Err(e), Ok(_)) if array_as_struct(&e) => {}
        (a, b) => prop_assert!(false, "tavily: ours {:?}, serde {:?} for {}", a, b, text),
    }
    let theirs = serde_json::from_str::<RefBrave>(text).map(|b| b.web.map(|w| items(w.results)).unwrap_or_default());
    match (read_brave(text.as_bytes()), theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), Err(_)) => {}
        (Err(e), Ok(_)) if array_as_struct(&e) => {}
        (a, b) => prop_assert!(false, "brave: ours {:?}, serde {:?} for {}", a, b, text),
    }
    Ok(())
}

/// A leaf's text: the shared kinds (strings with HTML's `<>&;` among the escapes).
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("null".to_string()),
        1 => any::<bool>().prop_map(|b| b.to_string()),
        2 => number_text(),
        1 => string_text(8),
    ]
}

const KEYS: &[&str] = &["results", "web", "title", "url", "content", "description", "score"];

fn text() -> impl Strategy<Value = String> {
    nested_text(scalar(), KEYS, 0..5, 5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn answers_read_as_the_serde_derives_read_them(text in text()) {
        agree(&text)?;
    }

    #[test]
    fn real_shaped_answers_read_as_the_serde_derives_read_them(
        hits in prop::collection::vec(("[a-z <>]{0,12}", "[a-z:/.]{0,12}", ".{0,30}", any::<bool>()), 0..6),
    ) {
        let key = |brave: bool| if brave { "description" } else { "content" };
        let results: Vec<Value> = hits.iter().map(|(t, u, c, b)| json!({"title": t, "url": u, key(*b): c, "score": 0.5})).collect();
        agree(&json!({"query": "q", "results": results}).to_string())?;
        agree(&json!({"type": "search", "web": {"type": "search", "results": results}}).to_string())?;
    }
}

#[test]
fn what_the_derives_refused_stays_refused() {
    for bad in [
        r#"{"results":null}"#,
        r#"{"results":[{"title":null}]}"#,
        r#"{"results":[{"content":"a","description":"b"}]}"#,
        r#"{"results":[{"url":1}]}"#,
        r#"{"results":[],"results":[]}"#,
        r#"{"web":{"results":[{"title":5}]}}"#,
        r#"{"web":5}"#,
        r#"{} 1"#,
        "<html>",
    ] {
        let tavily = read_tavily(bad.as_bytes()).is_err();
        let brave = read_brave(bad.as_bytes()).is_err();
        assert_eq!(tavily, serde_json::from_str::<RefTavily>(bad).is_err(), "{bad}");
        assert_eq!(brave, serde_json::from_str::<RefBrave>(bad).is_err(), "{bad}");
        assert!(tavily || brave, "{bad}");
    }
}
