//! The gateway's WebSocket chat, as both the host's `/ws` and the chip's port 18789 speak it
//! (MimiClaw's protocol): what a client sends, the events it gets, which chat ids it may choose,
//! and how the gateway's token is checked.
//!
//! Client → `{"type":"message","content":"…","chat_id":"…"}` (`chat_id` optional). Server →
//! `{"type":"response"|"error"|"token","content":"…","chat_id":"…"}`.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::json::read::{self, Reader, field, object};

/// The longest chat id a client may choose: it becomes part of a file or session name.
pub const MAX_CHAT_ID: usize = 128;

/// What a client sends.
#[derive(Debug, PartialEq, Eq)]
pub struct ClientMessage {
    /// `type`.
    pub kind: String,
    /// Empty when missing.
    pub content: String,
    pub chat_id: Option<String>,
}

impl ClientMessage {
    /// Reads a client's text frame, with the rules of the serde derive it replaced (held to it
    /// by a property test): `type` required, unknown fields skipped, a field given twice
    /// refused. Host and chip both read it here.
    pub fn read(text: &str) -> read::Result<ClientMessage> {
        read::read_all(text.as_bytes(), |r| {
            let (mut kind, mut content, mut chat_id, mut seen) = (None, String::new(), None, 0);
            object(r, |r, key| {
                match key {
                    "type" => kind = Some(field(r, &mut seen, 1, Reader::string_owned)?),
                    "content" => content = field(r, &mut seen, 2, Reader::string_owned)?,
                    "chat_id" => chat_id = field(r, &mut seen, 4, Reader::string_opt)?,
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            Ok(ClientMessage { kind: kind.ok_or_else(|| r.error("missing field `type`"))?, content, chat_id })
        })
    }
}

/// For serde callers: the message's text, read by [`ClientMessage::read`].
impl<'de> serde::Deserialize<'de> for ClientMessage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ClientMessage, D::Error> {
        let raw = alloc::boxed::Box::<serde_json::value::RawValue>::deserialize(d)?;
        ClientMessage::read(raw.get()).map_err(serde::de::Error::custom)
    }
}

/// A server event: `{"type":kind,"content":content,"chat_id":chat_id}`.
pub fn event(kind: &str, content: &str, chat_id: &str) -> String {
    crate::json::to_string(|w| {
        w.begin_object()
            .field_str("type", kind)
            .field_str("content", content)
            .field_str("chat_id", chat_id)
            .end_object();
    })
}

/// A chat id a client chose: short, and of characters a file name keeps as they are.
pub fn check_chat_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_CHAT_ID {
        return Err(format!("a chat_id has 1 to {MAX_CHAT_ID} characters"));
    }
    if !id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '@')) || id.starts_with('.')
    {
        return Err("a chat_id may hold only letters, digits and _ - . : @ (and not start with a dot)".to_owned());
    }
    Ok(())
}

/// Whether `given` is the gateway's `token`. An empty token admits nobody. Compared without
/// stopping at the first difference, so the time taken does not tell an attacker how much of a
/// guess was right (the length is not secret: tokens are generated with a fixed one).
pub fn token_matches(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    !b.is_empty() && a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization: Bearer …` header value.
pub fn bearer(value: &str) -> Option<&str> {
    value.strip_prefix("Bearer ").map(str::trim)
}

/// One `name=value` of a query string, percent-decoded (browsers' WebSockets cannot set
/// headers, so the upgrade URL's `?token=` counts as the bearer).
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use proptest::prelude::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abc", "abd"));
        assert!(!token_matches("abc", "abcd"));
        assert!(!token_matches("", "a"));
        // No token set: nobody is let in, not even with an empty guess.
        assert!(!token_matches("", ""));
    }

    #[test]
    fn query_tokens_are_percent_decoded() {
        assert_eq!(query_param("a=1&token=x%2By+z", "token").as_deref(), Some("x+y z"));
        assert_eq!(query_param("token=%zz%4", "token").as_deref(), Some("%zz%4"));
        assert_eq!(query_param("tokens=1", "token"), None);
        assert_eq!(bearer("Bearer  t0k "), Some("t0k"));
        assert_eq!(bearer("Basic abc"), None);
    }

    #[test]
    fn chat_ids() {
        assert!(check_chat_id("ws_1").is_ok());
        assert!(check_chat_id("a:b@c.d-e").is_ok());
        for bad in ["", ".hidden", "a/b", "a b", "ä"] {
            assert!(check_chat_id(bad).is_err(), "{bad}");
        }
        assert!(check_chat_id(&"a".repeat(MAX_CHAT_ID)).is_ok());
        assert!(check_chat_id(&"a".repeat(MAX_CHAT_ID + 1)).is_err());
    }

    #[test]
    fn events_are_mimiclaw_json() {
        let e = event("response", "say \"hi\"\n", "ws_1");
        assert_eq!(e, r#"{"type":"response","content":"say \"hi\"\n","chat_id":"ws_1"}"#);
        let back: serde_json::Value = serde_json::from_str(&e).unwrap();
        assert_eq!(back["content"], "say \"hi\"\n");
        let m: ClientMessage = serde_json::from_str(r#"{"type":"message","content":"x"}"#).unwrap();
        assert_eq!(m, ClientMessage { kind: "message".into(), content: "x".into(), chat_id: None });
    }

    #[derive(serde::Deserialize)]
    struct RefClientMessage {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        content: String,
        #[serde(default)]
        chat_id: Option<String>,
    }

    fn agree(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let ours = ClientMessage::read(text);
        let theirs = serde_json::from_str::<RefClientMessage>(text).map(|m| ClientMessage {
            kind: m.kind,
            content: m.content,
            chat_id: m.chat_id,
        });
        match (ours, theirs) {
            (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b, "{}", text),
            (Err(_), Err(_)) => {}
            // serde's derive also reads a struct from an array of its fields; the reader does not.
            (Err(_), Ok(_)) if text.starts_with('[') => {}
            (a, b) => proptest::prop_assert!(false, "ours {:?}, serde {:?} for {}", a, b.is_ok(), text),
        }
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]

        #[test]
        fn client_messages_read_as_the_serde_derive_read_them(
            fields in proptest::collection::vec((
                proptest::sample::select(&["type", "content", "chat_id", "other"][..]),
                proptest::prop_oneof![
                    proptest::prelude::Just("null".to_owned()),
                    proptest::prelude::Just("1".to_owned()),
                    proptest::prelude::Just("[]".to_owned()),
                    proptest::prelude::Just("{\"a\":[1]}".to_owned()),
                    proptest::prelude::any::<String>().prop_map(|s| serde_json::Value::String(s).to_string()),
                ],
            ), 0..5),
            array in proptest::prelude::any::<bool>(),
        ) {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let text = if array { format!("[{}]", fields.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>().join(",")) } else { format!("{{{}}}", body.join(",")) };
            agree(&text)?;
        }
    }

    #[test]
    fn the_derives_refusals_stay_refused() {
        for bad in [
            r#"{"content":"x"}"#,
            r#"{"type":null}"#,
            r#"{"type":"m","content":null}"#,
            r#"{"type":"m","type":"m"}"#,
            "not json",
            r#"{"type":"m"} x"#,
        ] {
            assert!(ClientMessage::read(bad).is_err(), "{bad}");
            assert!(serde_json::from_str::<RefClientMessage>(bad).is_err(), "{bad}");
        }
    }
}
