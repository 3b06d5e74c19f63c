//! The Bot API's wire format, the part Chela reads and writes on both sides: the answer
//! envelope every method returns ([`Envelope`]), the updates `getUpdates` gives ([`Update`],
//! [`Message`]: the fields the host and the chip act on; the rest is skipped), and the
//! `sendMessage` and `getUpdates` requests ([`SendMessage`], [`GetUpdates`]).

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

/// Every Bot API answer: `result` when `ok`, else the error code, Telegram's sentence and,
/// for a 429, how long to wait.
#[derive(Debug, PartialEq, Deserialize)]
pub struct Envelope<T> {
    pub ok: bool,
    #[serde(default = "none")]
    pub result: Option<T>,
    #[serde(default)]
    pub error_code: Option<u16>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub parameters: Option<Parameters>,
}

fn none<T>() -> Option<T> {
    None
}

/// `ResponseParameters`: what to do after an error.
#[derive(Debug, PartialEq, Deserialize)]
pub struct Parameters {
    #[serde(default)]
    pub retry_after: Option<u64>,
}

// Update, Message, Chat and User are read by the pull reader (`wire/read.rs`, [`Updates::read`]);
// their serde derive is kept for its property test only.

/// One update; only messages are asked for (`allowed_updates=["message"]`).
#[derive(Debug, PartialEq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct Update {
    pub update_id: i64,
    #[cfg_attr(test, serde(default))]
    pub message: Option<Message>,
}

/// A message, as far as Chela reads one.
#[derive(Debug, PartialEq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct Message {
    #[cfg_attr(test, serde(default))]
    pub message_id: i64,
    pub chat: Chat,
    #[cfg_attr(test, serde(default))]
    pub from: Option<User>,
    #[cfg_attr(test, serde(default))]
    pub text: Option<String>,
}

#[derive(Debug, PartialEq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct Chat {
    pub id: i64,
}

#[derive(Debug, PartialEq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct User {
    pub id: i64,
}

/// Whom a call is for: a chat's number (the chip's settings) or its text (the host keeps
/// chat ids as text; Telegram takes both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ChatId<'a> {
    Id(i64),
    Text(&'a str),
}

/// `LinkPreviewOptions`, as far as Chela sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LinkPreview {
    pub is_disabled: bool,
}

/// A `sendMessage` body, written by [`SendMessage::to_json`] (`Serialize` goes through it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendMessage<'a> {
    pub chat_id: ChatId<'a>,
    pub text: &'a str,
    /// Left out when `None`.
    pub parse_mode: Option<&'a str>,
    /// Left out when `None`.
    pub link_preview_options: Option<LinkPreview>,
}

impl SendMessage<'_> {
    /// The body as compact JSON, the text the serde derive wrote; written without serde so that
    /// the chip, which sends one per reply, links no serializer for it.
    pub fn to_json(&self) -> String {
        crate::json::to_string(|w| {
            w.begin_object().key("chat_id");
            match self.chat_id {
                ChatId::Id(n) => w.raw(&alloc::format!("{n}")),
                ChatId::Text(t) => w.string(t),
            };
            w.field_str("text", self.text);
            if let Some(mode) = self.parse_mode {
                w.field_str("parse_mode", mode);
            }
            if let Some(l) = self.link_preview_options {
                w.key("link_preview_options").begin_object().field_bool("is_disabled", l.is_disabled).end_object();
            }
            w.end_object();
        })
    }
}

impl Serialize for SendMessage<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw = serde_json::value::RawValue::from_string(self.to_json()).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

/// A `getUpdates` request: as a JSON body (the host) or a query string (the chip).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GetUpdates {
    /// The first update wanted: one past the last confirmed.
    pub offset: i64,
    /// Seconds Telegram holds the request open waiting for an update.
    pub timeout: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    pub allowed_updates: &'static [&'static str],
}

impl GetUpdates {
    /// Only messages: the one kind of update Chela acts on.
    pub const MESSAGES: &'static [&'static str] = &["message"];

    /// The request as a query string (`allowed_updates` as JSON, percent-encoded).
    pub fn query(&self) -> String {
        let mut allowed = String::from("%5B");
        for (i, kind) in self.allowed_updates.iter().enumerate() {
            if i > 0 {
                allowed.push_str("%2C");
            }
            allowed.push_str("%22");
            allowed.push_str(kind);
            allowed.push_str("%22");
        }
        allowed.push_str("%5D");
        let limit = self.limit.map(|n| alloc::format!("&limit={n}")).unwrap_or_default();
        alloc::format!("offset={}{limit}&timeout={}&allowed_updates={allowed}", self.offset, self.timeout)
    }
}

/// The updates of a `getUpdates` answer that reads, or why it does not ([`Updates::read`]).
pub type Updates = Envelope<Vec<Update>>;

mod read;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_carries_the_result_or_the_error() {
        let ok = Updates::read(
            br#"{"ok":true,"result":[{"update_id":11,"message":{"message_id":2,"from":{"id":7,"is_bot":false},"chat":{"id":42,"type":"private"},"date":1,"text":"hello"}},{"update_id":12,"edited_message":{}}]}"#,
        )
        .unwrap();
        let updates = ok.result.unwrap();
        let m = updates[0].message.as_ref().unwrap();
        assert_eq!((updates[0].update_id, m.message_id, m.chat.id), (11, 2, 42));
        assert_eq!((m.from.as_ref().unwrap().id, m.text.as_deref()), (7, Some("hello")));
        assert!(updates[1].message.is_none());
        let refused: Envelope<serde_json::Value> = serde_json::from_str(
            r#"{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":7}}"#,
        )
        .unwrap();
        assert!(!refused.ok && refused.result.is_none());
        assert_eq!((refused.error_code, refused.parameters.unwrap().retry_after), (Some(429), Some(7)));
    }

    /// The writer against the derive it replaced.
    mod send_message_against_the_derive {
        use super::*;
        use proptest::prelude::*;

        #[derive(Serialize)]
        #[serde(untagged)]
        enum RefChatId<'a> {
            Id(i64),
            Text(&'a str),
        }

        #[derive(Serialize)]
        struct RefLinkPreview {
            is_disabled: bool,
        }

        #[derive(Serialize)]
        struct RefSendMessage<'a> {
            chat_id: RefChatId<'a>,
            text: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            parse_mode: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            link_preview_options: Option<RefLinkPreview>,
        }

        proptest! {
            #[test]
            fn writes_what_the_derive_wrote(
                id in prop_oneof![any::<i64>().prop_map(Some), Just(None)],
                chat in "[-0-9a-z@]{0,6}",
                text in "(?s).{0,40}",
                mode in proptest::option::of("[A-Za-z\"]{0,8}"),
                preview in proptest::option::of(any::<bool>()),
            ) {
                let body = SendMessage {
                    chat_id: id.map_or(ChatId::Text(&chat), ChatId::Id),
                    text: &text,
                    parse_mode: mode.as_deref(),
                    link_preview_options: preview.map(|is_disabled| LinkPreview { is_disabled }),
                };
                let reference = RefSendMessage {
                    chat_id: id.map_or(RefChatId::Text(&chat), RefChatId::Id),
                    text: &text,
                    parse_mode: mode.as_deref(),
                    link_preview_options: preview.map(|is_disabled| RefLinkPreview { is_disabled }),
                };
                let want = serde_json::to_string(&reference).unwrap();
                prop_assert_eq!(body.to_json(), want.clone());
                prop_assert_eq!(serde_json::to_string(&body).unwrap(), want);
            }
        }
    }

    #[test]
    fn requests_as_each_side_sends_them() {
        let body = SendMessage {
            chat_id: ChatId::Text("-100"),
            text: "a",
            parse_mode: Some("HTML"),
            link_preview_options: Some(LinkPreview { is_disabled: true }),
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"chat_id":"-100","text":"a","parse_mode":"HTML","link_preview_options":{"is_disabled":true}}"#
        );
        let plain = SendMessage { chat_id: ChatId::Id(42), text: "b", parse_mode: None, link_preview_options: None };
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"chat_id":42,"text":"b"}"#);
        let poll = GetUpdates { offset: 5, timeout: 25, limit: Some(1), allowed_updates: GetUpdates::MESSAGES };
        assert_eq!(poll.query(), "offset=5&limit=1&timeout=25&allowed_updates=%5B%22message%22%5D");
        let host = GetUpdates { limit: None, timeout: 30, ..poll };
        assert_eq!(serde_json::to_string(&host).unwrap(), r#"{"offset":5,"timeout":30,"allowed_updates":["message"]}"#);
    }
}
