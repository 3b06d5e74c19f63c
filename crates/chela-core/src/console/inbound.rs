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
mod tests;
