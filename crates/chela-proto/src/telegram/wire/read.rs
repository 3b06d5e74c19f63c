//! A `getUpdates` answer read by the pull reader (the chip reads its updates through here): the
//! rules of the serde derive it replaced, which its property test holds it to.

use alloc::vec::Vec;

use super::{Chat, Envelope, Message, Parameters, Update, Updates, User};
use crate::json::read::{self, Reader, Result, field, object, opt};

impl Updates {
    /// Reads a whole `getUpdates` body.
    pub fn read(body: &[u8]) -> Result<Updates> {
        read::read_all(body, |r| {
            let (mut ok, mut result, mut error_code, mut description, mut parameters) = (None, None, None, None, None);
            let mut seen = 0;
            object(r, |r, key| {
                match key {
                    "ok" => ok = Some(field(r, &mut seen, 1, Reader::bool)?),
                    "result" => result = field(r, &mut seen, 2, |r| opt(r, updates))?,
                    "error_code" => error_code = field(r, &mut seen, 4, |r| opt(r, u16_of))?,
                    "description" => description = Some(field(r, &mut seen, 8, Reader::string_owned)?),
                    "parameters" => parameters = field(r, &mut seen, 16, |r| opt(r, Parameters::read))?,
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            let ok = ok.ok_or_else(|| r.error("missing field `ok`"))?;
            Ok(Envelope { ok, result, error_code, description: description.unwrap_or_default(), parameters })
        })
    }
}

fn u16_of(r: &mut Reader<'_>) -> Result<u16> {
    let n = r.u64()?;
    u16::try_from(n).map_err(|_| r.error("invalid value: expected u16"))
}

fn updates(r: &mut Reader<'_>) -> Result<Vec<Update>> {
    r.begin_array()?;
    let mut all = Vec::new();
    while r.next_item()? {
        all.push(Update::read(r)?);
    }
    Ok(all)
}

impl Parameters {
    fn read(r: &mut Reader<'_>) -> Result<Parameters> {
        let (mut retry_after, mut seen) = (None, 0);
        object(r, |r, key| {
            match key {
                "retry_after" => retry_after = field(r, &mut seen, 1, Reader::u64_opt)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(Parameters { retry_after })
    }
}

impl Update {
    fn read(r: &mut Reader<'_>) -> Result<Update> {
        let (mut update_id, mut message, mut seen) = (None, None, 0);
        object(r, |r, key| {
            match key {
                "update_id" => update_id = Some(field(r, &mut seen, 1, Reader::i64)?),
                "message" => message = field(r, &mut seen, 2, |r| opt(r, Message::read))?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        let update_id = update_id.ok_or_else(|| r.error("missing field `update_id`"))?;
        Ok(Update { update_id, message })
    }
}

impl Message {
    fn read(r: &mut Reader<'_>) -> Result<Message> {
        let (mut message_id, mut chat, mut from, mut text, mut seen) = (0, None, None, None, 0);
        object(r, |r, key| {
            match key {
                "message_id" => message_id = field(r, &mut seen, 1, Reader::i64)?,
                "chat" => chat = Some(field(r, &mut seen, 2, |r| id(r).map(|id| Chat { id }))?),
                "from" => from = field(r, &mut seen, 4, |r| opt(r, |r| id(r).map(|id| User { id })))?,
                "text" => text = field(r, &mut seen, 8, Reader::string_opt)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        let chat = chat.ok_or_else(|| r.error("missing field `chat`"))?;
        Ok(Message { message_id, chat, from, text })
    }
}

/// A `Chat` or a `User`: an object whose `id` is read.
fn id(r: &mut Reader<'_>) -> Result<i64> {
    let (mut id, mut seen) = (None, 0);
    object(r, |r, key| {
        match key {
            "id" => id = Some(field(r, &mut seen, 1, Reader::i64)?),
            _ => r.skip()?,
        }
        Ok(())
    })?;
    id.ok_or_else(|| r.error("missing field `id`"))
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
