//! Message content as JSON text: read by the pull reader, written by the writer, host and chip
//! alike (the serde impls of these types are adapters onto the reader).
//!
//! The rules are those of the serde derives this replaced, which `json_tests.rs` holds it to: a
//! block's known fields are type-checked whatever its `type`, unknown fields are skipped, a field
//! given twice is refused, and `null` stands for a missing optional field. Unlike the derives,
//! a struct written as an array of its fields, or a role written as `{"user":null}`, is refused:
//! nothing writes them.

use alloc::string::String;
use alloc::vec::Vec;

use super::{Block, Image, Images, Json, Role};
use crate::json::read::{self, Kind, Reader, Result, field, object, opt};
use crate::json::{Sink, Writer};

impl Role {
    /// Reads `"user"` or `"assistant"`.
    pub fn read(r: &mut Reader<'_>) -> Result<Role> {
        let at = r.offset();
        match &*r.str()? {
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            _ => Err(read::Error { what: "unknown variant, expected `user` or `assistant`", offset: at }),
        }
    }
}

impl Json {
    /// Reads one value of any kind, keeping its text.
    pub fn read(r: &mut Reader<'_>) -> Result<Json> {
        r.raw().map(|raw| Json(raw.into()))
    }
}

impl Image {
    pub fn read(r: &mut Reader<'_>) -> Result<Image> {
        let (mut media_type, mut data, mut seen) = (None, None, 0);
        object(r, |r, key| {
            match key {
                "media_type" => media_type = Some(field(r, &mut seen, 1, Reader::string_owned)?),
                "data" => data = Some(field(r, &mut seen, 2, Reader::string_owned)?),
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(Image {
            media_type: media_type.ok_or_else(|| r.error("missing field `media_type`"))?,
            data: data.ok_or_else(|| r.error("missing field `data`"))?,
        })
    }
}

impl Images {
    /// Reads an array of images (`null` is refused, as the derive refused it).
    pub fn read(r: &mut Reader<'_>) -> Result<Images> {
        r.begin_array()?;
        let mut all = Vec::new();
        while r.next_item()? {
            all.push(Image::read(r)?);
        }
        Ok(Images::from(all))
    }
}

impl Block {
    /// Reads one block, `{"type":"text","text":...}` and its siblings.
    pub fn read(r: &mut Reader<'_>) -> Result<Block> {
        let mut kind: Option<String> = None;
        let (mut text, mut media_type, mut data, mut id, mut name) = (None, None, None, None, None);
        let (mut input, mut tool_use_id, mut content) = (None, None, None);
        let (mut images, mut is_error, mut seen) = (Images::none(), false, 0);
        object(r, |r, key| {
            let s = &mut seen;
            match key {
                "type" => kind = Some(field(r, s, 1, Reader::string_owned)?),
                "text" => text = field(r, s, 2, Reader::string_opt)?,
                "media_type" => media_type = field(r, s, 4, Reader::string_opt)?,
                "data" => data = field(r, s, 8, Reader::string_opt)?,
                "id" => id = field(r, s, 16, Reader::string_opt)?,
                "name" => name = field(r, s, 32, Reader::string_opt)?,
                "input" => input = field(r, s, 64, |r| opt(r, Json::read))?,
                "tool_use_id" => tool_use_id = field(r, s, 128, Reader::string_opt)?,
                "content" => content = field(r, s, 256, Reader::string_opt)?,
                "images" => images = field(r, s, 512, Images::read)?,
                "is_error" => is_error = field(r, s, 1024, Reader::bool)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        let kind = kind.ok_or_else(|| r.error("missing field `type`"))?;
        let need = |v: Option<String>, what: &'static str| v.ok_or_else(|| r.error(what));
        Ok(match kind.as_str() {
            "text" => Block::Text { text: need(text, "missing field `text`")? },
            "image" => Block::Image {
                media_type: need(media_type, "missing field `media_type`")?,
                data: need(data, "missing field `data`")?,
            },
            "tool_use" => Block::ToolUse {
                id: need(id, "missing field `id`")?,
                name: need(name, "missing field `name`")?,
                input: input.ok_or_else(|| r.error("missing field `input`"))?,
            },
            "tool_result" => Block::ToolResult {
                tool_use_id: need(tool_use_id, "missing field `tool_use_id`")?.into_boxed_str(),
                content: need(content, "missing field `content`")?,
                images,
                is_error,
            },
            _ => return Err(r.error("unknown variant, expected one of `text`, `image`, `tool_use`, `tool_result`")),
        })
    }

    /// Writes the block as its derive did: `type` first, then its fields in order.
    pub fn write<S: Sink + ?Sized>(&self, w: &mut Writer<'_, S>) {
        w.begin_object();
        match self {
            Block::Text { text } => {
                w.field_str("type", "text").field_str("text", text);
            }
            Block::Image { media_type, data } => {
                w.field_str("type", "image").field_str("media_type", media_type).field_str("data", data);
            }
            Block::ToolUse { id, name, input } => {
                w.field_str("type", "tool_use").field_str("id", id).field_str("name", name);
                w.field_raw("input", input.as_str());
            }
            Block::ToolResult { tool_use_id, content, images, is_error } => {
                w.field_str("type", "tool_result").field_str("tool_use_id", tool_use_id).field_str("content", content);
                if !images.is_empty() {
                    w.key("images").begin_array();
                    for i in images.as_slice() {
                        w.begin_object().field_str("media_type", &i.media_type).field_str("data", &i.data).end_object();
                    }
                    w.end_array();
                }
                if *is_error {
                    w.field_bool("is_error", true);
                }
            }
        }
        w.end_object();
    }
}

/// Reads message content: a string (one text block) or an array of blocks.
pub fn read_content(r: &mut Reader<'_>) -> Result<Vec<Block>> {
    if r.peek()? == Kind::String {
        return Ok(alloc::vec![Block::Text { text: r.string_owned()? }]);
    }
    if r.peek()? != Kind::Array {
        return Err(r.error("invalid type: expected a string or an array of content blocks"));
    }
    r.begin_array()?;
    let mut out = Vec::new();
    while r.next_item()? {
        out.push(Block::read(r)?);
    }
    Ok(out)
}

/// Writes message content: one text block as a plain string, anything else as an array.
pub fn write_content<S: Sink + ?Sized>(blocks: &[Block], w: &mut Writer<'_, S>) {
    if let [Block::Text { text }] = blocks {
        w.string(text);
        return;
    }
    w.begin_array();
    for b in blocks {
        b.write(w);
    }
    w.end_array();
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
