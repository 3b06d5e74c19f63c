//! The JSON of Feishu events (schema 2.0) that Chela acts on, and of URL verification.
//!
//! Both the long connection and the webhook deliver the same envelope:
//! `{"schema":"2.0","header":{"event_id","event_type","token",…},"event":{…}}`. A webhook may
//! also receive `{"type":"url_verification","challenge","token"}` (after decryption, when an
//! encrypt key is set). Only `im.message.receive_v1` is decoded further; every other event is
//! reported by type so the host can acknowledge and ignore it.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde::Deserialize;

/// The event type of a message sent to the bot.
pub const MESSAGE_RECEIVE: &str = "im.message.receive_v1";

/// What an event body is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Envelope {
    /// The webhook's URL check: answer `{"challenge": challenge}`.
    UrlVerification { challenge: String, token: String },
    /// A message to the bot.
    Message(MessageEvent),
    /// Any other event, acknowledged and ignored.
    Other { event_id: String, event_type: String, token: String },
}

/// An `im.message.receive_v1` event, flattened to what a channel needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageEvent {
    /// Unique per delivery attempt series: the key for deduplication.
    pub event_id: String,
    /// The verification token the event carries (`header.token`).
    pub token: String,
    /// The sender's `open_id`.
    pub sender: String,
    /// `user` for a person, `app` for a bot.
    pub sender_type: String,
    pub message_id: String,
    pub chat_id: String,
    /// `p2p` or `group`.
    pub chat_type: String,
    /// `text`, `post`, `image`, …
    pub message_type: String,
    /// The `content` field: a JSON document in a string, shaped by `message_type`.
    pub content: String,
    pub mentions: Vec<Mention>,
}

/// One `@` in a message: `key` (`@_user_1`) is what stands in the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mention {
    pub key: String,
    pub open_id: String,
    pub name: String,
}

/// Why an event body cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventError {
    /// Not JSON, or not the shape of an event.
    Malformed { reason: String },
    /// A message event without a field it needs.
    Missing { field: &'static str },
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::Malformed { reason } => write!(f, "a Feishu event is not valid: {reason}"),
            EventError::Missing { field } => write!(f, "a Feishu message event lacks {field}"),
        }
    }
}

impl core::error::Error for EventError {}

#[derive(Deserialize)]
struct Raw {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    challenge: String,
    #[serde(default)]
    token: String,
    header: Option<RawHeader>,
    event: Option<RawEvent>,
}

#[derive(Deserialize)]
struct RawHeader {
    #[serde(default)]
    event_id: String,
    #[serde(default)]
    event_type: String,
    #[serde(default)]
    token: String,
}

#[derive(Deserialize)]
struct RawEvent {
    sender: Option<RawSender>,
    message: Option<RawMessage>,
}

#[derive(Deserialize)]
struct RawSender {
    sender_id: Option<RawId>,
    #[serde(default)]
    sender_type: String,
}

#[derive(Deserialize, Default)]
struct RawId {
    #[serde(default)]
    open_id: String,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    message_id: String,
    #[serde(default)]
    chat_id: String,
    #[serde(default)]
    chat_type: String,
    #[serde(default)]
    message_type: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    mentions: Vec<RawMention>,
}

#[derive(Deserialize)]
struct RawMention {
    #[serde(default)]
    key: String,
    #[serde(default)]
    id: RawId,
    #[serde(default)]
    name: String,
}

/// Reads an event body (already decrypted).
pub fn parse_envelope(body: &[u8]) -> Result<Envelope, EventError> {
    let raw: Raw = serde_json::from_slice(body).map_err(|e| EventError::Malformed { reason: alloc::format!("{e}") })?;
    if raw.kind == "url_verification" {
        return Ok(Envelope::UrlVerification { challenge: raw.challenge, token: raw.token });
    }
    let header = raw.header.ok_or(EventError::Missing { field: "header" })?;
    if header.event_id.is_empty() {
        return Err(EventError::Missing { field: "header.event_id" });
    }
    if header.event_type != MESSAGE_RECEIVE {
        return Ok(Envelope::Other { event_id: header.event_id, event_type: header.event_type, token: header.token });
    }
    let event = raw.event.ok_or(EventError::Missing { field: "event" })?;
    let sender = event.sender.ok_or(EventError::Missing { field: "event.sender" })?;
    let message = event.message.ok_or(EventError::Missing { field: "event.message" })?;
    let open_id = sender.sender_id.unwrap_or_default().open_id;
    for (value, field) in [
        (&open_id, "event.sender.sender_id.open_id"),
        (&message.message_id, "event.message.message_id"),
        (&message.chat_id, "event.message.chat_id"),
    ] {
        if value.is_empty() {
            return Err(EventError::Missing { field });
        }
    }
    Ok(Envelope::Message(MessageEvent {
        event_id: header.event_id,
        token: header.token,
        sender: open_id,
        sender_type: sender.sender_type,
        message_id: message.message_id,
        chat_id: message.chat_id,
        chat_type: message.chat_type,
        message_type: message.message_type,
        content: message.content,
        mentions: message
            .mentions
            .into_iter()
            .map(|m| Mention { key: m.key, open_id: m.id.open_id, name: m.name })
            .collect(),
    }))
}

#[derive(Deserialize)]
struct TextContent {
    text: String,
}

impl MessageEvent {
    /// Whether the message names the bot: any mention of `bot_open_id`, or, when the bot's id is
    /// not known, any mention at all.
    pub fn mentions_bot(&self, bot_open_id: Option<&str>) -> bool {
        match bot_open_id {
            Some(bot) => self.mentions.iter().any(|m| m.open_id == bot),
            None => !self.mentions.is_empty(),
        }
    }

    /// The text of a `text` message, with the bot's mentions removed and other people's shown by
    /// name (`@Alice`). `None` for other message types or a content that is not `{"text": …}`.
    pub fn text(&self, bot_open_id: Option<&str>) -> Option<String> {
        if self.message_type != "text" {
            return None;
        }
        let content: TextContent = serde_json::from_str(&self.content).ok()?;
        let mut text = content.text;
        // Longest keys first, so `@_user_10` is not taken for `@_user_1` followed by `0`.
        let mut mentions: Vec<&Mention> = self.mentions.iter().filter(|m| !m.key.is_empty()).collect();
        mentions.sort_by_key(|m| core::cmp::Reverse(m.key.len()));
        for m in mentions {
            let is_bot = bot_open_id.is_none_or(|bot| m.open_id == bot);
            let with = if is_bot { String::new() } else { alloc::format!("@{}", m.name) };
            text = text.replace(&m.key, &with);
        }
        Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUP: &str = r#"{"schema":"2.0","header":{"event_id":"ev1","event_type":"im.message.receive_v1","token":"vt","app_id":"cli"},
      "event":{"sender":{"sender_id":{"open_id":"ou_alice"},"sender_type":"user"},
      "message":{"message_id":"om_1","chat_id":"oc_1","chat_type":"group","message_type":"text",
      "content":"{\"text\":\"@_user_1 ask @_user_2 about @_user_10\"}",
      "mentions":[{"key":"@_user_1","id":{"open_id":"ou_bot"},"name":"Chela"},
                  {"key":"@_user_2","id":{"open_id":"ou_bob"},"name":"Bob"},
                  {"key":"@_user_10","id":{"open_id":"ou_carol"},"name":"Carol"}]}}}"#;

    #[test]
    fn a_group_message_loses_the_bots_mention_and_names_the_others() {
        let Envelope::Message(m) = parse_envelope(GROUP.as_bytes()).unwrap() else { panic!("not a message") };
        assert_eq!((m.event_id.as_str(), m.token.as_str(), m.sender.as_str()), ("ev1", "vt", "ou_alice"));
        assert_eq!((m.message_id.as_str(), m.chat_id.as_str(), m.chat_type.as_str()), ("om_1", "oc_1", "group"));
        assert!(m.mentions_bot(Some("ou_bot")));
        assert!(!m.mentions_bot(Some("ou_other_bot")));
        assert_eq!(m.text(Some("ou_bot")).unwrap(), "ask @Bob about @Carol");
    }

    #[test]
    fn url_verification_and_other_events_are_told_apart() {
        let v = parse_envelope(br#"{"challenge":"c1","token":"t","type":"url_verification"}"#).unwrap();
        assert_eq!(v, Envelope::UrlVerification { challenge: "c1".into(), token: "t".into() });
        let o =
            parse_envelope(br#"{"header":{"event_id":"e","event_type":"im.chat.updated_v1","token":"t"}}"#).unwrap();
        assert!(matches!(o, Envelope::Other { ref event_type, .. } if event_type == "im.chat.updated_v1"));
    }

    #[test]
    fn broken_events_say_what_is_wrong() {
        assert!(matches!(parse_envelope(b"not json"), Err(EventError::Malformed { .. })));
        assert_eq!(parse_envelope(b"{}"), Err(EventError::Missing { field: "header" }));
        let no_chat = GROUP.replace("\"chat_id\":\"oc_1\",", "");
        assert_eq!(parse_envelope(no_chat.as_bytes()), Err(EventError::Missing { field: "event.message.chat_id" }));
        let image = GROUP.replace("\"message_type\":\"text\"", "\"message_type\":\"image\"");
        let Envelope::Message(m) = parse_envelope(image.as_bytes()).unwrap() else { panic!("not a message") };
        assert_eq!(m.text(None), None);
    }
}
