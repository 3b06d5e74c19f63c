//! `Updates::read` against the serde derive it replaced (kept for this test only).

use super::*;
use alloc::string::{String, ToString};
use proptest::prelude::*;
use serde_json::json;

use crate::json::strategies::{nested_text, number_text, string_text};

/// serde's derive also reads a struct from an array of its fields in order; Telegram never sends
/// that, and the reader refuses it: the one refusal the derive does not share.
const ARRAY_AS_STRUCT: &str = "invalid type: expected an object";

fn agree(text: &str) -> core::result::Result<(), TestCaseError> {
    let ours = Updates::read(text.as_bytes());
    let theirs = serde_json::from_str::<Updates>(text);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), Err(_)) => {}
        (Err(e), Ok(_)) if e.what == ARRAY_AS_STRUCT => {}
        (a, b) => prop_assert!(false, "ours {:?}, serde {:?} for {}", a, b, text),
    }
    Ok(())
}

/// A leaf's text: the shared kinds, and integers in the range of Telegram's small fields.
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("null".to_string()),
        1 => any::<bool>().prop_map(|b| b.to_string()),
        3 => number_text(),
        1 => (0u64..70000).prop_map(|n| n.to_string()),
        1 => string_text(6),
    ]
}

const KEYS: &[&str] = &[
    "ok",
    "result",
    "error_code",
    "description",
    "parameters",
    "retry_after",
    "update_id",
    "message",
    "message_id",
    "chat",
    "from",
    "text",
    "id",
    "date",
    "edited_message",
];

fn text() -> impl Strategy<Value = String> {
    nested_text(scalar(), KEYS, 0..6, 5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn updates_read_as_the_serde_derive_read_them(text in text()) {
        agree(&text)?;
    }

    #[test]
    fn real_shaped_updates_read_as_the_serde_derive_read_them(
        update_id in any::<i64>(), chat in any::<i64>(), text in any::<Option<String>>(), from in any::<bool>(),
    ) {
        let mut message = json!({"message_id": 3, "chat": {"id": chat, "type": "private"}, "date": 1, "text": text});
        if from {
            message["from"] = json!({"id": chat, "is_bot": false, "first_name": "A"});
        }
        agree(&json!({"ok": true, "result": [{"update_id": update_id, "message": message}]}).to_string())?;
        agree(&json!({"ok": false, "error_code": 429, "description": "Too Many Requests", "parameters": {"retry_after": 7}}).to_string())?;
    }
}

#[test]
fn required_fields_and_ranges_are_refused_as_the_derive_refused_them() {
    for bad in [
        r#"{"result":[]}"#,
        r#"{"ok":true,"result":[{"message":{}}]}"#,
        r#"{"ok":true,"result":[{"update_id":1,"message":{"text":"x"}}]}"#,
        r#"{"ok":false,"error_code":70000}"#,
        r#"{"ok":true,"ok":true}"#,
        r#"{"ok":true,"description":null}"#,
    ] {
        assert!(Updates::read(bad.as_bytes()).is_err(), "{bad}");
        assert!(serde_json::from_str::<Updates>(bad).is_err(), "{bad}");
    }
}
