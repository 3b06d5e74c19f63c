//! The Messages API's stream events and whole responses as the pull reader reads them.
//!
//! Each reader keeps the rules of the serde derive it replaced (its property test in
//! `wire_tests.rs` holds it to them): unknown fields are skipped, `null` is an absent `Option`,
//! a repeated field or a missing `type` is refused, and a field of the wrong type is refused.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

use super::WireUsage;
use crate::json::read::{self, Reader, Result, field, object, opt};

#[derive(Debug, PartialEq)]
pub(super) struct WireEvent<'a> {
    pub kind: Cow<'a, str>,
    pub index: usize,
    pub content_block: Option<StartBlock<'a>>,
    pub delta: Option<WireDelta<'a>>,
    pub message: Option<StartMessage>,
    pub usage: Option<WireUsageDelta>,
    pub error: Option<WireError>,
}

#[derive(Debug, PartialEq)]
pub(super) struct StartBlock<'a> {
    pub kind: Cow<'a, str>,
    pub text: Option<String>,
    pub id: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, PartialEq, Default)]
pub(super) struct WireDelta<'a> {
    pub kind: Option<Cow<'a, str>>,
    pub text: Option<Cow<'a, str>>,
    pub partial_json: Option<Cow<'a, str>>,
    pub stop_reason: Option<String>,
}

#[derive(Debug, PartialEq)]
pub(super) struct StartMessage {
    pub usage: WireUsage,
}

/// `message_delta`'s usage: cumulative counts, each present or not.
#[derive(Debug, PartialEq, Default)]
pub(super) struct WireUsageDelta {
    pub output_tokens: Option<u64>,
    pub input_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
}

#[derive(Debug, PartialEq, Default)]
pub(super) struct WireError {
    pub kind: String,
    pub message: String,
}

impl<'a> WireEvent<'a> {
    pub fn read(data: &'a [u8]) -> Result<WireEvent<'a>> {
        read::read_all(data, |r| {
            let (mut kind, mut index, mut seen) = (None, 0, 0);
            let (mut content_block, mut delta, mut message, mut usage, mut error) = (None, None, None, None, None);
            object(r, |r, key| {
                match key {
                    "type" => kind = Some(field(r, &mut seen, 1, Reader::str)?),
                    "index" => index = field(r, &mut seen, 2, Reader::usize)?,
                    "content_block" => content_block = field(r, &mut seen, 4, |r| opt(r, StartBlock::read))?,
                    "delta" => delta = field(r, &mut seen, 8, |r| opt(r, WireDelta::read))?,
                    "message" => message = field(r, &mut seen, 16, |r| opt(r, StartMessage::read))?,
                    "usage" => usage = field(r, &mut seen, 32, |r| opt(r, WireUsageDelta::read))?,
                    "error" => error = field(r, &mut seen, 64, |r| opt(r, WireError::read))?,
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            let kind = kind.ok_or_else(|| r.error("missing field `type`"))?;
            Ok(WireEvent { kind, index, content_block, delta, message, usage, error })
        })
    }
}

impl<'a> StartBlock<'a> {
    fn read(r: &mut Reader<'a>) -> Result<StartBlock<'a>> {
        let (mut kind, mut seen) = (None, 0);
        let (mut text, mut id, mut name) = (None, None, None);
        object(r, |r, key| {
            match key {
                "type" => kind = Some(field(r, &mut seen, 1, Reader::str)?),
                "text" => text = field(r, &mut seen, 2, Reader::string_opt)?,
                "id" => id = field(r, &mut seen, 4, Reader::string_opt)?,
                "name" => name = field(r, &mut seen, 8, Reader::string_opt)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        let kind = kind.ok_or_else(|| r.error("missing field `type`"))?;
        Ok(StartBlock { kind, text, id, name })
    }
}

impl<'a> WireDelta<'a> {
    fn read(r: &mut Reader<'a>) -> Result<WireDelta<'a>> {
        let (mut d, mut seen) = (WireDelta::default(), 0);
        object(r, |r, key| {
            match key {
                "type" => d.kind = field(r, &mut seen, 1, Reader::str_opt)?,
                "text" => d.text = field(r, &mut seen, 2, Reader::str_opt)?,
                "partial_json" => d.partial_json = field(r, &mut seen, 4, Reader::str_opt)?,
                "stop_reason" => d.stop_reason = field(r, &mut seen, 8, Reader::string_opt)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(d)
    }
}

impl StartMessage {
    fn read(r: &mut Reader<'_>) -> Result<StartMessage> {
        let (mut usage, mut seen) = (WireUsage::default(), 0);
        object(r, |r, key| {
            match key {
                "usage" => usage = field(r, &mut seen, 1, WireUsage::read)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(StartMessage { usage })
    }
}

impl WireUsage {
    /// A message's usage: its counts are numbers (absent is 0), only the cache counts may be null.
    pub(super) fn read(r: &mut Reader<'_>) -> Result<WireUsage> {
        let u = read_usage(r, |r| r.u64().map(Some))?;
        Ok(WireUsage {
            input_tokens: u.input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens.unwrap_or(0),
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
        })
    }
}

impl WireUsageDelta {
    fn read(r: &mut Reader<'_>) -> Result<WireUsageDelta> {
        read_usage(r, |r| r.u64_opt())
    }
}

/// The four usage counts both shapes carry; `count` reads `input_tokens` and `output_tokens`,
/// so each shape says whether they may be null.
fn read_usage(r: &mut Reader<'_>, count: fn(&mut Reader<'_>) -> Result<Option<u64>>) -> Result<WireUsageDelta> {
    let (mut u, mut seen) = (WireUsageDelta::default(), 0);
    object(r, |r, key| {
        match key {
            "input_tokens" => u.input_tokens = field(r, &mut seen, 1, count)?,
            "output_tokens" => u.output_tokens = field(r, &mut seen, 2, count)?,
            "cache_creation_input_tokens" => u.cache_creation_input_tokens = field(r, &mut seen, 4, Reader::u64_opt)?,
            "cache_read_input_tokens" => u.cache_read_input_tokens = field(r, &mut seen, 8, Reader::u64_opt)?,
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(u)
}

impl WireError {
    fn read(r: &mut Reader<'_>) -> Result<WireError> {
        let (mut e, mut seen) = (WireError::default(), 0);
        object(r, |r, key| {
            match key {
                "type" => e.kind = field(r, &mut seen, 1, Reader::string_owned)?,
                "message" => e.message = field(r, &mut seen, 2, Reader::string_owned)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(e)
    }
}

/// A non-streamed response.
#[derive(Debug, PartialEq)]
pub(super) struct WireMessage<'a> {
    pub content: Vec<WireBlock<'a>>,
    pub stop_reason: Option<String>,
    pub usage: WireUsage,
}

// Flat rather than a tagged enum: unknown block types (thinking, server tools) pass through
// without failing, and the raw `input` is not buffered away.
#[derive(Debug, PartialEq, Default)]
pub(super) struct WireBlock<'a> {
    pub kind: String,
    pub text: Option<String>,
    pub id: Option<String>,
    pub name: Option<String>,
    /// The tool input's JSON text.
    pub input: Option<&'a str>,
}

impl<'a> WireMessage<'a> {
    pub fn read(body: &'a [u8]) -> Result<WireMessage<'a>> {
        read::read_all(body, |r| {
            let (mut content, mut stop_reason, mut usage, mut seen) = (None, None, WireUsage::default(), 0);
            object(r, |r, key| {
                match key {
                    "content" => content = Some(field(r, &mut seen, 1, blocks)?),
                    "stop_reason" => stop_reason = field(r, &mut seen, 2, Reader::string_opt)?,
                    "usage" => usage = field(r, &mut seen, 4, WireUsage::read)?,
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            let content = content.ok_or_else(|| r.error("missing field `content`"))?;
            Ok(WireMessage { content, stop_reason, usage })
        })
    }
}

fn blocks<'a>(r: &mut Reader<'a>) -> Result<Vec<WireBlock<'a>>> {
    r.begin_array()?;
    let mut all = Vec::new();
    while r.next_item()? {
        all.push(WireBlock::read(r)?);
    }
    Ok(all)
}

impl<'a> WireBlock<'a> {
    fn read(r: &mut Reader<'a>) -> Result<WireBlock<'a>> {
        let (mut kind, mut b, mut seen) = (None, WireBlock::default(), 0);
        object(r, |r, key| {
            match key {
                "type" => kind = Some(field(r, &mut seen, 1, Reader::string_owned)?),
                "text" => b.text = field(r, &mut seen, 2, Reader::string_opt)?,
                "id" => b.id = field(r, &mut seen, 4, Reader::string_opt)?,
                "name" => b.name = field(r, &mut seen, 8, Reader::string_opt)?,
                "input" => b.input = field(r, &mut seen, 16, |r| opt(r, Reader::raw))?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        b.kind = kind.ok_or_else(|| r.error("missing field `type`"))?;
        Ok(b)
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
