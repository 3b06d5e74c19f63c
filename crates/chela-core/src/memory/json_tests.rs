//! Entry lines against the serde derives they replaced (kept here only).

use super::*;
use alloc::string::ToString;
use chela_proto::json::strategies::{array_text, number_text, object_text, string_text};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct RefEntry {
    id: String,
    content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    source: String,
    created: u64,
    updated: u64,
}

#[derive(Deserialize)]
struct RefEntryRef<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    content: Cow<'a, str>,
    #[serde(default, borrow)]
    tags: Vec<Cow<'a, str>>,
}

fn from_ref(e: RefEntry) -> Entry {
    Entry { id: e.id, content: e.content, tags: e.tags, source: e.source, created: e.created, updated: e.updated }
}

/// serde's derive also reads a struct from an array of its fields; nothing writes that, and
/// the reader refuses it.
fn array_as_struct(text: &str) -> bool {
    text.starts_with('[')
}

fn agree(text: &str) -> Result<(), TestCaseError> {
    match (Entry::read_line(text), serde_json::from_str::<RefEntry>(text).map(from_ref)) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), Err(_)) => {}
        (Err(_), Ok(_)) if array_as_struct(text) => {}
        (a, b) => prop_assert!(false, "entry: ours {:?}, serde {:?} for {}", a, b, text),
    }
    let ours = EntryRef::read(text.as_bytes()).map(|e| (e.id.into_owned(), e.content.into_owned(), e.tags.concat()));
    let theirs = serde_json::from_str::<RefEntryRef<'_>>(text)
        .map(|e| (e.id.into_owned(), e.content.into_owned(), e.tags.concat()));
    match (ours, theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), Err(_)) => {}
        (Err(_), Ok(_)) if array_as_struct(text) => {}
        (a, b) => prop_assert!(false, "entry ref: ours {:?}, serde {:?} for {}", a, b, text),
    }
    Ok(())
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("null".to_string()),
        1 => Just("true".to_string()),
        3 => number_text(),
        1 => string_text(6),
        1 => array_text(string_text(4), 0..3),
        1 => Just("[1]".to_string()),
        1 => Just("{}".to_string()),
    ]
}

const KEYS: &[&str] = &["id", "content", "tags", "source", "created", "updated", "other"];

fn line() -> impl Strategy<Value = String> {
    prop_oneof![5 => object_text(KEYS, value(), 0..8), 1 => array_text(value(), 0..4)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn entry_lines_read_as_the_serde_derives_read_them(text in line()) {
        agree(&text)?;
    }

    #[test]
    fn entry_lines_are_written_as_the_derive_wrote_them(
        id in "[a-z0-9_]{1,8}", content in any::<String>(), tags in prop::collection::vec(any::<String>(), 0..3),
        source in "[a-z\"]{0,5}", created in any::<u64>(), updated in any::<u64>(),
    ) {
        let e = Entry { id, content, tags, source, created, updated };
        let mut ours = String::new();
        e.write_line(&mut ours);
        let theirs = serde_json::to_string(&RefEntry {
            id: e.id.clone(), content: e.content.clone(), tags: e.tags.clone(), source: e.source.clone(), created, updated,
        }).unwrap();
        prop_assert_eq!(&ours, &theirs);
        prop_assert_eq!(Entry::read_line(&ours).unwrap(), e);
        agree(&ours)?;
    }
}

#[test]
fn what_the_derives_refused_stays_refused() {
    for bad in [
        r#"{"id":"m1","content":"c","created":1}"#,
        r#"{"id":"m1","content":"c","created":1,"updated":-1}"#,
        r#"{"id":"m1","content":"c","created":1,"updated":2,"tags":null}"#,
        r#"{"id":"m1","content":"c","created":1,"updated":2,"source":null}"#,
        r#"{"id":"m1","id":"m2","content":"c","created":1,"updated":2}"#,
        r#"{"content":"c","created":1,"updated":2}"#,
        r#"{"id":"m1","content":"c","created":1,"updated":2} {}"#,
    ] {
        assert!(Entry::read_line(bad).is_err(), "{bad}");
        assert!(serde_json::from_str::<RefEntry>(bad).is_err(), "{bad}");
    }
}
