//! Chat Completions' response bodies and stream chunks as the pull reader reads them.
//!
//! Each reader keeps the rules of the serde derive it replaced (its property test in
//! `wire_tests.rs` holds it to them): unknown fields are skipped, `null` is an absent `Option`,
//! a repeated field is refused, and a field of the wrong type is refused.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

use crate::chat::Usage;
use crate::json::read::{self, Reader, Result, field, object, opt};

#[derive(Debug, PartialEq, Default)]
pub(super) struct WireUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// `prompt_tokens_details.cached_tokens`; some servers send `null` for either.
    pub cached_tokens: Option<u64>,
}

impl WireUsage {
    /// `prompt_tokens` includes the cached ones; [`Usage`] counts them apart.
    pub fn neutral(&self) -> Usage {
        let cached = self.cached_tokens.unwrap_or(0).min(self.prompt_tokens);
        Usage {
            input_tokens: self.prompt_tokens - cached,
            output_tokens: self.completion_tokens,
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<WireUsage> {
        let (mut u, mut seen) = (WireUsage::default(), 0);
        object(r, |r, key| {
            match key {
                "prompt_tokens" => u.prompt_tokens = field(r, &mut seen, 1, Reader::u64)?,
                "completion_tokens" => u.completion_tokens = field(r, &mut seen, 2, Reader::u64)?,
                "prompt_tokens_details" => {
                    u.cached_tokens = field(r, &mut seen, 4, |r| opt(r, cached_tokens))?.flatten();
                }
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(u)
    }
}

fn cached_tokens(r: &mut Reader<'_>) -> Result<Option<u64>> {
    let (mut cached, mut seen) = (None, 0);
    object(r, |r, key| {
        match key {
            "cached_tokens" => cached = field(r, &mut seen, 1, Reader::u64_opt)?,
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(cached)
}

#[derive(Debug, PartialEq, Default)]
pub(super) struct WireFunction<'a> {
    pub name: Option<String>,
    /// The value's JSON text: a string (the format's own) or an object (Ollama's).
    pub arguments: Option<&'a str>,
}

#[derive(Debug, PartialEq, Default)]
pub(super) struct WireToolCall<'a> {
    pub index: Option<usize>,
    pub id: Option<String>,
    pub function: Option<WireFunction<'a>>,
}

impl<'a> WireToolCall<'a> {
    fn read(r: &mut Reader<'a>) -> Result<WireToolCall<'a>> {
        let (mut tc, mut seen) = (WireToolCall::default(), 0);
        object(r, |r, key| {
            match key {
                "index" => tc.index = field(r, &mut seen, 1, |r| opt(r, Reader::usize))?,
                "id" => tc.id = field(r, &mut seen, 2, Reader::string_opt)?,
                "function" => tc.function = field(r, &mut seen, 4, |r| opt(r, WireFunction::read))?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(tc)
    }
}

impl<'a> WireFunction<'a> {
    fn read(r: &mut Reader<'a>) -> Result<WireFunction<'a>> {
        let (mut f, mut seen) = (WireFunction::default(), 0);
        object(r, |r, key| {
            match key {
                "name" => f.name = field(r, &mut seen, 1, Reader::string_opt)?,
                "arguments" => f.arguments = field(r, &mut seen, 2, |r| opt(r, Reader::raw))?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(f)
    }
}

/// A list of tool calls (`null` is none).
fn tool_calls<'a>(r: &mut Reader<'a>) -> Result<Option<Vec<WireToolCall<'a>>>> {
    opt(r, |r| {
        r.begin_array()?;
        let mut calls = Vec::new();
        while r.next_item()? {
            calls.push(WireToolCall::read(r)?);
        }
        Ok(calls)
    })
}

/// A non-streamed response: only its first choice is used, the others are checked and dropped.
#[derive(Debug, PartialEq, Default)]
pub(super) struct WireCompletion<'a> {
    pub choices: Vec<WireChoice<'a>>,
    pub usage: Option<WireUsage>,
}

#[derive(Debug, PartialEq)]
pub(super) struct WireChoice<'a> {
    pub message: WireMessage<'a>,
    pub finish_reason: Option<String>,
}

#[derive(Debug, PartialEq, Default)]
pub(super) struct WireMessage<'a> {
    pub content: Option<String>,
    pub tool_calls: Option<Vec<WireToolCall<'a>>>,
}

impl<'a> WireCompletion<'a> {
    pub fn read(body: &'a [u8]) -> Result<WireCompletion<'a>> {
        read::read_all(body, |r| {
            let (mut c, mut seen) = (WireCompletion::default(), 0);
            object(r, |r, key| {
                match key {
                    "choices" => c.choices = field(r, &mut seen, 1, |r| list(r, WireChoice::read))?,
                    "usage" => c.usage = field(r, &mut seen, 2, |r| opt(r, WireUsage::read))?,
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            Ok(c)
        })
    }
}

/// An array of `item`s.
fn list<'a, T>(r: &mut Reader<'a>, mut item: impl FnMut(&mut Reader<'a>) -> Result<T>) -> Result<Vec<T>> {
    r.begin_array()?;
    let mut items = Vec::new();
    while r.next_item()? {
        items.push(item(r)?);
    }
    Ok(items)
}

impl<'a> WireChoice<'a> {
    fn read(r: &mut Reader<'a>) -> Result<WireChoice<'a>> {
        let (mut message, mut finish_reason, mut seen) = (None, None, 0);
        object(r, |r, key| {
            match key {
                "message" => message = Some(field(r, &mut seen, 1, WireMessage::read)?),
                "finish_reason" => finish_reason = field(r, &mut seen, 2, Reader::string_opt)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        let message = message.ok_or_else(|| r.error("missing field `message`"))?;
        Ok(WireChoice { message, finish_reason })
    }
}

impl<'a> WireMessage<'a> {
    fn read(r: &mut Reader<'a>) -> Result<WireMessage<'a>> {
        let (mut m, mut seen) = (WireMessage::default(), 0);
        object(r, |r, key| {
            match key {
                "content" => m.content = field(r, &mut seen, 1, Reader::string_opt)?,
                "tool_calls" => m.tool_calls = field(r, &mut seen, 2, tool_calls)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(m)
    }
}

/// One stream chunk.
#[derive(Debug, PartialEq, Default)]
pub(super) struct WireChunk<'a> {
    pub choices: Vec<ChunkChoice<'a>>,
    pub usage: Option<WireUsage>,
    /// Servers report failures mid-stream as `{"error": {...}}`; its body is read again as an
    /// [`ApiError`](crate::error::ApiError).
    pub error: bool,
}

#[derive(Debug, PartialEq, Default)]
pub(super) struct ChunkChoice<'a> {
    pub index: usize,
    pub delta: Option<ChunkDelta<'a>>,
    pub finish_reason: Option<String>,
}

#[derive(Debug, PartialEq, Default)]
pub(super) struct ChunkDelta<'a> {
    pub content: Option<Cow<'a, str>>,
    pub tool_calls: Option<Vec<WireToolCall<'a>>>,
}

impl<'a> WireChunk<'a> {
    pub fn read(data: &'a [u8]) -> Result<WireChunk<'a>> {
        read::read_all(data, |r| {
            let (mut c, mut seen) = (WireChunk::default(), 0);
            object(r, |r, key| {
                match key {
                    "choices" => c.choices = field(r, &mut seen, 1, |r| list(r, ChunkChoice::read))?,
                    "usage" => c.usage = field(r, &mut seen, 2, |r| opt(r, WireUsage::read))?,
                    "error" => c.error = field(r, &mut seen, 4, |r| opt(r, Reader::skip))?.is_some(),
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            Ok(c)
        })
    }
}

impl<'a> ChunkChoice<'a> {
    fn read(r: &mut Reader<'a>) -> Result<ChunkChoice<'a>> {
        let (mut c, mut seen) = (ChunkChoice::default(), 0);
        object(r, |r, key| {
            match key {
                "index" => c.index = field(r, &mut seen, 1, Reader::usize)?,
                "delta" => c.delta = field(r, &mut seen, 2, |r| opt(r, ChunkDelta::read))?,
                "finish_reason" => c.finish_reason = field(r, &mut seen, 4, Reader::string_opt)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(c)
    }
}

impl<'a> ChunkDelta<'a> {
    fn read(r: &mut Reader<'a>) -> Result<ChunkDelta<'a>> {
        let (mut d, mut seen) = (ChunkDelta::default(), 0);
        object(r, |r, key| {
            match key {
                "content" => d.content = field(r, &mut seen, 1, Reader::str_opt)?,
                "tool_calls" => d.tool_calls = field(r, &mut seen, 2, tool_calls)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(d)
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
