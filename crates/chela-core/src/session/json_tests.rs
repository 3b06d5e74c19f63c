//! Session lines read and written without serde, against the serde derives they replaced (kept
//! here only). The content inside a line is held to its old derive in chela-proto's chat tests;
//! these hold the line's own rules: required and defaulted fields, duplicates, unknown fields.

use super::tests::any_turn;
use super::*;
use alloc::format;
use alloc::string::ToString;
use alloc::vec;
use chela_proto::chat::content_serde;
use chela_proto::json::strategies::{array_text, number_text, object_text, string_text};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct RefLineOut<'a> {
    role: Role,
    #[serde(with = "content_serde")]
    content: &'a [Block],
    ts: u64,
}

#[derive(Deserialize)]
struct RefLineIn {
    role: Role,
    #[serde(with = "content_serde")]
    content: Vec<Block>,
    #[serde(default)]
    ts: u64,
}

#[derive(Serialize)]
struct RefSummaryOut<'a> {
    kind: RefKind,
    text: &'a str,
    replaces: u64,
    keeps: u64,
    ts: u64,
}

#[derive(Deserialize)]
struct RefSummaryIn {
    #[serde(rename = "kind")]
    _kind: RefKind,
    text: String,
    #[serde(default)]
    replaces: u64,
    #[serde(default)]
    keeps: u64,
    #[serde(default)]
    ts: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RefKind {
    Summary,
}

/// serde's derive also reads a struct from an array of its fields and a unit variant from a
/// one-key object; nothing writes those, and the reader refuses them.
fn derive_only(text: &str) -> bool {
    text.starts_with('[') || text.contains("{\"summary\"") || text.contains("[[")
}

fn agree(text: &str) -> Result<(), TestCaseError> {
    let ours = LineIn::read(text.as_bytes()).map(|l| (l.role, l.content, l.ts));
    let theirs = serde_json::from_str::<RefLineIn>(text).map(|l| (l.role, l.content, l.ts));
    match (ours, theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), Err(_)) => {}
        (Err(_), Ok(_)) if derive_only(text) => {}
        (a, b) => prop_assert!(false, "line: ours {:?}, serde {:?} for {}", a, b, text),
    }
    let ours = Summary::read(text.as_bytes());
    let theirs = serde_json::from_str::<RefSummaryIn>(text).map(|s| Summary {
        text: s.text,
        replaces: s.replaces,
        keeps: s.keeps,
        ts: s.ts,
    });
    match (ours, theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), Err(_)) => {}
        (Err(_), Ok(_)) if derive_only(text) => {}
        (a, b) => prop_assert!(false, "summary: ours {:?}, serde {:?} for {}", a, b, text),
    }
    Ok(())
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("null".to_string()),
        1 => Just("true".to_string()),
        4 => number_text(),
        1 => Just("\"user\"".to_string()),
        1 => Just("\"assistant\"".to_string()),
        1 => Just("\"summary\"".to_string()),
        1 => string_text(6),
        1 => Just(r#"[{"type":"text","text":"x"}]"#.to_string()),
        1 => Just("[]".to_string()),
        1 => Just("{}".to_string()),
        1 => Just(r#"{"summary":null}"#.to_string()),
    ]
}

const KEYS: &[&str] = &["role", "content", "ts", "kind", "text", "replaces", "keeps", "other"];

fn line() -> impl Strategy<Value = String> {
    prop_oneof![object_text(KEYS, value(), 0..7), array_text(value(), 0..4)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn lines_read_as_the_serde_derives_read_them(text in line()) {
        agree(&text)?;
    }

    #[test]
    fn lines_are_written_as_the_serde_derive_wrote_them(turn in any_turn(0), ts in any::<u64>(), text in ".{0,20}", n in any::<u64>()) {
        for m in &turn {
            let mut ours = String::new();
            encode_line(m, ts, &mut ours);
            let theirs = serde_json::to_string(&RefLineOut { role: m.role, content: &m.content, ts }).unwrap();
            prop_assert_eq!(&ours, &format!("{theirs}\n"));
            agree(ours.trim_end())?;
        }
        let s = Summary { text, replaces: n, keeps: n / 2, ts };
        let ours = encode_summary(&s);
        let theirs = serde_json::to_string(&RefSummaryOut { kind: RefKind::Summary, text: &s.text, replaces: s.replaces, keeps: s.keeps, ts }).unwrap();
        prop_assert_eq!(&ours, &format!("{theirs}\n"));
        prop_assert_eq!(Summary::read(ours.trim_end().as_bytes()).unwrap(), s);
    }
}

#[test]
fn what_the_derives_refused_stays_refused() {
    for bad in [
        r#"{"content":"x"}"#,
        r#"{"role":"user"}"#,
        r#"{"role":"system","content":"x"}"#,
        r#"{"role":"user","content":"x","ts":null}"#,
        r#"{"role":"user","content":"x","ts":-1}"#,
        r#"{"role":"user","role":"user","content":"x"}"#,
        r#"{"role":"user","content":"x"} x"#,
    ] {
        assert!(LineIn::read(bad.as_bytes()).is_err(), "{bad}");
        assert!(serde_json::from_str::<RefLineIn>(bad).is_err(), "{bad}");
    }
    for bad in [
        r#"{"text":"x"}"#,
        r#"{"kind":"other","text":"x"}"#,
        r#"{"kind":"summary"}"#,
        r#"{"kind":"summary","text":"x","keeps":null}"#,
        r#"{"kind":"summary","kind":"summary","text":"x"}"#,
    ] {
        assert!(Summary::read(bad.as_bytes()).is_err(), "{bad}");
        assert!(serde_json::from_str::<RefSummaryIn>(bad).is_err(), "{bad}");
    }
}
