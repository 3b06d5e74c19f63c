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

use crate::json::read::{self, Reader, field, object, opt, read_all};

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

#[derive(Default)]
struct Raw {
    kind: String,
    challenge: String,
    token: String,
    header: Option<RawHeader>,
    event: Option<RawEvent>,
}

#[derive(Default)]
struct RawHeader {
    event_id: String,
    event_type: String,
    token: String,
}

#[derive(Default)]
struct RawEvent {
    sender: Option<RawSender>,
    message: Option<RawMessage>,
}

#[derive(Default)]
struct RawSender {
    sender_id: Option<RawId>,
    sender_type: String,
}

#[derive(Default)]
struct RawId {
    open_id: String,
}

#[derive(Default)]
struct RawMessage {
    message_id: String,
    chat_id: String,
    chat_type: String,
    message_type: String,
    content: String,
    mentions: Vec<RawMention>,
}

#[derive(Default)]
struct RawMention {
    key: String,
    id: RawId,
    name: String,
}

// Read with the pull reader, not a serde derive, so the chip links no serde code for events.
// The rules are the derive's: unknown keys skipped, a repeated key refused, an absent string
// empty, `null` accepted only where an `Option` stood.

fn raw(r: &mut Reader<'_>) -> read::Result<Raw> {
    let (mut v, mut seen) = (Raw::default(), 0);
    object(r, |r, key| match key {
        "type" => field(r, &mut seen, 1, |r| r.string_owned()).map(|s| v.kind = s),
        "challenge" => field(r, &mut seen, 2, |r| r.string_owned()).map(|s| v.challenge = s),
        "token" => field(r, &mut seen, 4, |r| r.string_owned()).map(|s| v.token = s),
        "header" => field(r, &mut seen, 8, |r| opt(r, header)).map(|h| v.header = h),
        "event" => field(r, &mut seen, 16, |r| opt(r, event)).map(|e| v.event = e),
        _ => r.skip(),
    })?;
    Ok(v)
}

fn header(r: &mut Reader<'_>) -> read::Result<RawHeader> {
    let (mut v, mut seen) = (RawHeader::default(), 0);
    object(r, |r, key| match key {
        "event_id" => field(r, &mut seen, 1, |r| r.string_owned()).map(|s| v.event_id = s),
        "event_type" => field(r, &mut seen, 2, |r| r.string_owned()).map(|s| v.event_type = s),
        "token" => field(r, &mut seen, 4, |r| r.string_owned()).map(|s| v.token = s),
        _ => r.skip(),
    })?;
    Ok(v)
}

fn event(r: &mut Reader<'_>) -> read::Result<RawEvent> {
    let (mut v, mut seen) = (RawEvent::default(), 0);
    object(r, |r, key| match key {
        "sender" => field(r, &mut seen, 1, |r| opt(r, sender)).map(|s| v.sender = s),
        "message" => field(r, &mut seen, 2, |r| opt(r, message)).map(|m| v.message = m),
        _ => r.skip(),
    })?;
    Ok(v)
}

fn sender(r: &mut Reader<'_>) -> read::Result<RawSender> {
    let (mut v, mut seen) = (RawSender::default(), 0);
    object(r, |r, key| match key {
        "sender_id" => field(r, &mut seen, 1, |r| opt(r, id)).map(|i| v.sender_id = i),
        "sender_type" => field(r, &mut seen, 2, |r| r.string_owned()).map(|s| v.sender_type = s),
        _ => r.skip(),
    })?;
    Ok(v)
}

fn id(r: &mut Reader<'_>) -> read::Result<RawId> {
    let (mut v, mut seen) = (RawId::default(), 0);
    object(r, |r, key| match key {
        "open_id" => field(r, &mut seen, 1, |r| r.string_owned()).map(|s| v.open_id = s),
        _ => r.skip(),
    })?;
    Ok(v)
}

fn message(r: &mut Reader<'_>) -> read::Result<RawMessage> {
    let (mut v, mut seen) = (RawMessage::default(), 0);
    object(r, |r, key| match key {
        "message_id" => field(r, &mut seen, 1, |r| r.string_owned()).map(|s| v.message_id = s),
        "chat_id" => field(r, &mut seen, 2, |r| r.string_owned()).map(|s| v.chat_id = s),
        "chat_type" => field(r, &mut seen, 4, |r| r.string_owned()).map(|s| v.chat_type = s),
        "message_type" => field(r, &mut seen, 8, |r| r.string_owned()).map(|s| v.message_type = s),
        "content" => field(r, &mut seen, 16, |r| r.string_owned()).map(|s| v.content = s),
        "mentions" => field(r, &mut seen, 32, |r| {
            let mut all = Vec::new();
            r.begin_array()?;
            while r.next_item()? {
                all.push(mention(r)?);
            }
            Ok(all)
        })
        .map(|m| v.mentions = m),
        _ => r.skip(),
    })?;
    Ok(v)
}

fn mention(r: &mut Reader<'_>) -> read::Result<RawMention> {
    let (mut v, mut seen) = (RawMention::default(), 0);
    object(r, |r, key| match key {
        "key" => field(r, &mut seen, 1, |r| r.string_owned()).map(|s| v.key = s),
        "id" => field(r, &mut seen, 2, id).map(|i| v.id = i),
        "name" => field(r, &mut seen, 4, |r| r.string_owned()).map(|s| v.name = s),
        _ => r.skip(),
    })?;
    Ok(v)
}

/// Reads an event body (already decrypted).
pub fn parse_envelope(body: &[u8]) -> Result<Envelope, EventError> {
    let raw = read_all(body, raw).map_err(|e| EventError::Malformed { reason: alloc::format!("{e}") })?;
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

/// The `text` of a `{"text": …}` content; `None` when absent or not that shape.
fn text_content(content: &str) -> Option<String> {
    let mut text = None;
    let mut seen = 0;
    read_all(content.as_bytes(), |r| {
        object(r, |r, key| match key {
            "text" => field(r, &mut seen, 1, |r| r.string_owned()).map(|s| text = Some(s)),
            _ => r.skip(),
        })
    })
    .ok()?;
    text
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
        let mut text = text_content(&self.content)?;
        // Longest keys first, so `@_user_10` is not taken for `@_user_1` followed by `0`.
        let mut mentions: Vec<&Mention> = self.mentions.iter().filter(|m| !m.key.is_empty()).collect();
        // An insertion sort, stable: a message has few mentions, and no sort is compiled for them.
        for i in 1..mentions.len() {
            let mut j = i;
            while j > 0 && mentions[j - 1].key.len() < mentions[j].key.len() {
                mentions.swap(j - 1, j);
                j -= 1;
            }
        }
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

    #[test]
    fn the_pull_reader_keeps_the_derives_rules() {
        // Unknown keys (nested too) are skipped; `null` stands for an absent optional part.
        let extra = GROUP.replace("\"schema\":\"2.0\",", "\"schema\":\"2.0\",\"x\":[{\"y\":[1,2,{}]}],");
        assert!(matches!(parse_envelope(extra.as_bytes()), Ok(Envelope::Message(_))));
        assert_eq!(parse_envelope(br#"{"header":null}"#), Err(EventError::Missing { field: "header" }));
        // A repeated key is refused, as serde's derive refuses it.
        let twice = GROUP.replace("\"event_id\":\"ev1\",", "\"event_id\":\"ev1\",\"event_id\":\"ev2\",");
        assert!(matches!(parse_envelope(twice.as_bytes()), Err(EventError::Malformed { .. })));
        // A string field holding another kind is refused, not turned into text.
        let number = GROUP.replace("\"chat_id\":\"oc_1\"", "\"chat_id\":7");
        assert!(matches!(parse_envelope(number.as_bytes()), Err(EventError::Malformed { .. })));
        // Trailing bytes after the object are refused.
        assert!(matches!(parse_envelope(b"{} x"), Err(EventError::Malformed { .. })));
        let odd = GROUP.replace(r#"{\"text\":\"@_user_1 ask @_user_2 about @_user_10\"}"#, r#"{\"text\":5}"#);
        let Envelope::Message(m) = parse_envelope(odd.as_bytes()).unwrap() else { panic!("not a message") };
        assert_eq!(m.text(None), None);
    }
}
