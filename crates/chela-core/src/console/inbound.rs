//! Input bigger than the chip's buffers: refused with a short reply, never a
//! reset. The firmware reads Telegram's `getUpdates` answer into a fixed buffer; when the
//! answer does not fit, only its start is there. [`overflowed_update`] finds in that start
//! what the firmware needs to move past the update and tell the person: the update's id and
//! the chat's. [`refuse_message`] is the reply; [`fit_reply`] cuts an answer that is longer
//! than the send buffer. (An LLM reply over the chip's bounds is already stopped by the
//! exchange, `exchange::Options::CHIP`, with its own short note.)

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;

use crate::text;

/// What [`overflowed_update`] found at the start of a `getUpdates` answer too big to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflowed {
    /// Ask for `update_id + 1` next, so the update is not fetched again.
    pub update_id: i64,
    /// The chat to tell, when the start held it.
    pub chat_id: Option<i64>,
}

/// Finds the first update's id and its message's chat id in `prefix`, the part of an
/// oversize `getUpdates` answer that fit. `None` when not even the update id is there (then
/// the firmware has nothing to skip by and should ask for fewer bytes: `limit=1`).
pub fn overflowed_update(prefix: &[u8]) -> Option<Overflowed> {
    let update_id = number_after(prefix, b"\"update_id\":")?;
    // The first "chat" object after the update id is the message's own (Telegram writes
    // `chat` before `text`, and a quoted string cannot hold an unescaped `"chat":{`).
    let at = find(prefix, b"\"update_id\":")?;
    let rest = &prefix[at..];
    let chat_id = find(rest, b"\"chat\":").and_then(|c| {
        let obj = skip_space(&rest[c + 7..]);
        let obj = obj.strip_prefix(b"{")?;
        number_after(obj, b"\"id\":").filter(|_| find(obj, b"\"id\":").is_some_and(|i| !obj[..i].contains(&b'{')))
    });
    Some(Overflowed { update_id, chat_id })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn skip_space(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

/// The integer after the first `key` in `hay`; `None` if it is cut off or not a number.
fn number_after(hay: &[u8], key: &[u8]) -> Option<i64> {
    let rest = skip_space(&hay[find(hay, key)? + key.len()..]);
    let (neg, digits) = match rest.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, rest),
    };
    let n = digits.iter().take_while(|c| c.is_ascii_digit()).count();
    // A number that reaches the end of the prefix may have been cut: do not trust it.
    if n == 0 || n == digits.len() || n > 19 {
        return None;
    }
    // JSON numbers have no leading zero: `007` is not something Telegram sent.
    if n > 1 && digits[0] == b'0' {
        return None;
    }
    let mut v: i64 = 0;
    for &d in &digits[..n] {
        v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
    }
    Some(if neg { -v } else { v })
}

/// The reply to a message of `len` bytes when the chip takes at most `max`: `None` when it
/// fits.
pub fn refuse_message(len: usize, max: usize) -> Option<String> {
    (len > max).then(|| {
        format!("That message is too long for me ({len} bytes; I can read {max}). Please send it in shorter parts.")
    })
}

/// `reply` cut to `max` bytes for a send buffer, with a visible note when it was cut; never
/// splits a character.
pub fn fit_reply(reply: &str, max: usize) -> Cow<'_, str> {
    text::truncate_visibly(reply, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPDATE: &str = r#"{"ok":true,"result":[{"update_id":864211045,
"message":{"message_id":77,"from":{"id":5551234,"is_bot":false,"first_name":"Ada \"chat\":{\"id\":1}"},"chat":{"id":5551234,"first_name":"Ada","type":"private"},"date":1764500000,"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"#;

    #[test]
    fn the_start_of_an_oversize_update_gives_its_id_and_chat() {
        let got = overflowed_update(UPDATE.as_bytes()).unwrap();
        assert_eq!(got, Overflowed { update_id: 864_211_045, chat_id: Some(5_551_234) });
        let group = r#"{"ok":true,"result":[{"update_id":7,"message":{"message_id":1,"chat":{"id":-100123,"title":"g"},"text":"…"#;
        assert_eq!(overflowed_update(group.as_bytes()), Some(Overflowed { update_id: 7, chat_id: Some(-100_123) }));
    }

    #[test]
    fn a_cut_too_early_gives_what_it_can_and_never_a_cut_number() {
        let cut_in_chat = UPDATE.find(r#""chat":{"id":55"#).unwrap() + 16;
        assert_eq!(
            overflowed_update(&UPDATE.as_bytes()[..cut_in_chat]),
            Some(Overflowed { update_id: 864_211_045, chat_id: None }),
            "a chat id cut in the middle is not trusted"
        );
        let cut_in_update = UPDATE.find("864211").unwrap() + 6;
        assert_eq!(overflowed_update(&UPDATE.as_bytes()[..cut_in_update]), None);
        assert_eq!(overflowed_update(b""), None);
        assert_eq!(overflowed_update(b"\"update_id\":99999999999999999999999,"), None, "overflow");
        assert_eq!(overflowed_update(b"\"update_id\": -06172,"), None, "not a JSON number");
        assert_eq!(overflowed_update(b"\"update_id\":0,"), Some(Overflowed { update_id: 0, chat_id: None }));
        assert_eq!(
            overflowed_update(br#""update_id":5,"chat":{"x":{"id":3},"id":4}"#),
            Some(Overflowed { update_id: 5, chat_id: None }),
            "an id inside a nested object is not the chat's"
        );
    }

    #[test]
    fn refusals_are_short_and_cut_replies_stay_within_the_bound() {
        assert_eq!(refuse_message(100, 100), None);
        let r = refuse_message(5000, 4096).unwrap();
        assert!(r.len() < 120 && r.contains("5000") && r.contains("4096"), "{r}");
        let long = "é".repeat(3000);
        let fit = fit_reply(&long, 4096);
        assert!(fit.len() <= 4096 && fit.contains("cut"), "{}", fit.len());
        assert_eq!(fit_reply("short", 4096), "short");
    }
}
