//! Telegram long polling on the chip: the `getUpdates` reply read within a bound, who may talk
//! to the device, and the `sendMessage` body, in the Bot API wire types the host's channel
//! uses too (`chela_proto::telegram::wire`). Unknown chats get nothing: not a reply, not a turn.

use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::telegram::wire::{self, ChatId, GetUpdates, SendMessage};

/// Largest `getUpdates` body read: one update at a time (`limit=1`), and a message's text is
/// at most 4,096 characters, so a body past this is not a text message the chip can take.
pub const MAX_UPDATES_BYTES: usize = 16 * 1024;

/// The long-poll wait asked of Telegram, in seconds.
pub const POLL_SECONDS: u32 = 25;

/// Who may talk to the device: the owner's chat and an allowlist. Nobody, if both are empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub owner: Option<i64>,
    pub allow: Vec<i64>,
}

impl Access {
    /// Parses the owner id and a comma-separated allowlist (build-time settings).
    pub fn parse(owner: &str, allow: &str) -> Result<Access, String> {
        let id =
            |s: &str| s.trim().parse::<i64>().map_err(|_| alloc::format!("`{}` is not a Telegram chat id", s.trim()));
        let owner = if owner.trim().is_empty() { None } else { Some(id(owner)?) };
        let allow = allow.split(',').filter(|s| !s.trim().is_empty()).map(id).collect::<Result<_, _>>()?;
        Ok(Access { owner, allow })
    }

    pub fn admits(&self, chat_id: i64) -> bool {
        self.owner == Some(chat_id) || self.allow.contains(&chat_id)
    }
}

/// One update, as the device acts on it.
#[derive(Debug, PartialEq, Eq)]
pub enum Update {
    /// A text message from a chat the device admits.
    Text { update_id: i64, chat_id: i64, text: String },
    /// Anything else (a sticker, an edit, an unknown chat): confirmed and dropped, unanswered.
    Ignored { update_id: i64 },
}

impl Update {
    pub fn id(&self) -> i64 {
        match self {
            Update::Text { update_id, .. } | Update::Ignored { update_id } => *update_id,
        }
    }
}

/// What a `getUpdates` body came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled {
    Updates(Vec<Update>),
    /// The body was larger than [`MAX_UPDATES_BYTES`]: the update (its id read from the start,
    /// if it could be) is skipped; the sender, if admitted, gets a short reply.
    TooLarge {
        update_id: Option<i64>,
        chat_id: Option<i64>,
    },
}

/// Reads a `getUpdates` body; `truncated` when the reader stopped at the bound.
pub fn parse_updates(body: &[u8], truncated: bool, access: &Access) -> Result<Polled, String> {
    if truncated {
        return Ok(Polled::TooLarge {
            update_id: number_after(body, b"\"update_id\":"),
            chat_id: number_after(body, b"\"chat\":{\"id\":"),
        });
    }
    let u = wire::Updates::read(body).map_err(|e| alloc::format!("getUpdates sent what is not its JSON: {e}"))?;
    if !u.ok {
        return Err(alloc::format!("getUpdates failed: {}", u.description));
    }
    Ok(Polled::Updates(
        u.result
            .unwrap_or_default()
            .into_iter()
            .map(|r| match r.message {
                Some(wire::Message { chat, text: Some(text), .. }) if access.admits(chat.id) => {
                    Update::Text { update_id: r.update_id, chat_id: chat.id, text }
                }
                _ => Update::Ignored { update_id: r.update_id },
            })
            .collect(),
    ))
}

/// The integer after the first `key` in `body`.
fn number_after(body: &[u8], key: &[u8]) -> Option<i64> {
    let at = body.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &body[at..];
    let end = rest.iter().position(|b| !(b.is_ascii_digit() || *b == b'-')).unwrap_or(rest.len());
    core::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// The `getUpdates` path and query after `offset` (the next update wanted).
pub fn updates_path(token: &str, offset: i64) -> String {
    let poll = GetUpdates { offset, timeout: POLL_SECONDS, limit: Some(1), allowed_updates: GetUpdates::MESSAGES };
    alloc::format!("/bot{token}/getUpdates?{}", poll.query())
}

/// `sendMessage` bodies for `reply`: rendered to Telegram's HTML and split within its limit.
pub fn send_bodies(chat_id: i64, reply: &str) -> Vec<String> {
    let chunks = chela_proto::telegram::render_chunks(if reply.trim().is_empty() { "(no reply)" } else { reply });
    chunks.iter().map(|c| send(chat_id, c, Some("HTML")).to_json()).collect()
}

/// The body of a plain `sendMessage` (no markup): the short replies the device makes itself.
pub fn plain_body(chat_id: i64, text: &str) -> String {
    send(chat_id, text, None).to_json()
}

fn send<'a>(chat_id: i64, text: &'a str, parse_mode: Option<&'a str>) -> SendMessage<'a> {
    SendMessage { chat_id: ChatId::Id(chat_id), text, parse_mode, link_preview_options: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Access {
        Access::parse("42", "7, -1001").unwrap()
    }

    #[test]
    fn access_is_owner_or_allowlist_and_nobody_by_default() {
        let a = owner();
        assert!(a.admits(42) && a.admits(7) && a.admits(-1001));
        assert!(!a.admits(43));
        assert!(!Access::parse("", "").unwrap().admits(0));
        assert!(Access::parse("x", "").is_err());
        assert!(Access::parse("", "1,,2;").is_err());
    }

    #[test]
    fn unknown_chats_get_nothing() {
        let body = br#"{"ok":true,"result":[{"update_id":10,"message":{"message_id":1,"chat":{"id":99,"type":"private"},"text":"hi"}},{"update_id":11,"message":{"message_id":2,"chat":{"id":42,"type":"private"},"date":1,"text":"hello"}},{"update_id":12,"message":{"message_id":3,"chat":{"id":42,"type":"private"},"sticker":{}}}]}"#;
        let polled = parse_updates(body, false, &owner()).unwrap();
        assert_eq!(
            polled,
            Polled::Updates(alloc::vec![
                Update::Ignored { update_id: 10 },
                Update::Text { update_id: 11, chat_id: 42, text: "hello".into() },
                Update::Ignored { update_id: 12 },
            ])
        );
    }

    #[test]
    fn an_oversize_update_is_skipped_by_its_id() {
        let body = br#"{"ok":true,"result":[{"update_id":77,"message":{"message_id":1,"from":{"id":42},"chat":{"id":42,"type":"private"},"text":"aaaa"#;
        assert_eq!(
            parse_updates(body, true, &owner()).unwrap(),
            Polled::TooLarge { update_id: Some(77), chat_id: Some(42) }
        );
        assert_eq!(
            parse_updates(b"garbage", true, &owner()).unwrap(),
            Polled::TooLarge { update_id: None, chat_id: None }
        );
    }

    #[test]
    fn garbage_and_refusals_are_errors() {
        assert!(parse_updates(b"<html>", false, &owner()).is_err());
        let e = parse_updates(br#"{"ok":false,"error_code":401,"description":"Unauthorized"}"#, false, &owner())
            .unwrap_err();
        assert!(e.contains("Unauthorized"), "{e}");
    }

    #[test]
    fn send_bodies_escape_and_split() {
        let bodies = send_bodies(42, "a < b **bold**");
        assert_eq!(bodies.len(), 1);
        let v: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
        assert_eq!(v["chat_id"], 42);
        assert_eq!(v["text"], "a &lt; b <b>bold</b>");
        assert_eq!(v["parse_mode"], "HTML");
        let long = "word ".repeat(2000);
        assert!(send_bodies(42, &long).len() >= 3);
        assert_eq!(
            updates_path("T", 5),
            "/bot T/getUpdates?offset=5&limit=1&timeout=25&allowed_updates=%5B%22message%22%5D".replace(' ', "")
        );
    }
}
