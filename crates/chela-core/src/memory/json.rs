//! Entry lines read by the pull reader and written by the writer, host and chip alike, with
//! the rules of the serde derives they replaced (held to them in `json_tests.rs`): unknown
//! fields skipped, a field given twice refused, `tags` and `source` empty when missing.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::json::Writer;
use chela_proto::json::read::{self, Reader, field, object};

use super::Entry;

fn strings<'a, T>(r: &mut Reader<'a>, one: impl Fn(&mut Reader<'a>) -> read::Result<T>) -> read::Result<Vec<T>> {
    r.begin_array()?;
    let mut all = Vec::new();
    while r.next_item()? {
        all.push(one(r)?);
    }
    Ok(all)
}

impl Entry {
    /// Reads one entry line.
    pub fn read_line(line: &str) -> read::Result<Entry> {
        read::read_all(line.as_bytes(), |r| {
            let (mut id, mut content, mut created, mut updated) = (None, None, None, None);
            let (mut tags, mut source, mut seen) = (Vec::new(), String::new(), 0);
            object(r, |r, key| {
                let s = &mut seen;
                match key {
                    "id" => id = Some(field(r, s, 1, Reader::string_owned)?),
                    "content" => content = Some(field(r, s, 2, Reader::string_owned)?),
                    "tags" => tags = field(r, s, 4, |r| strings(r, Reader::string_owned))?,
                    "source" => source = field(r, s, 8, Reader::string_owned)?,
                    "created" => created = Some(field(r, s, 16, Reader::u64)?),
                    "updated" => updated = Some(field(r, s, 32, Reader::u64)?),
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            Ok(Entry {
                id: id.ok_or_else(|| r.error("missing field `id`"))?,
                content: content.ok_or_else(|| r.error("missing field `content`"))?,
                tags,
                source,
                created: created.ok_or_else(|| r.error("missing field `created`"))?,
                updated: updated.ok_or_else(|| r.error("missing field `updated`"))?,
            })
        })
    }

    /// Appends the entry's line (without its `\n`) as the derive wrote it.
    pub fn write_line(&self, out: &mut String) {
        let mut w = Writer::new(out);
        w.begin_object().field_str("id", &self.id).field_str("content", &self.content);
        if !self.tags.is_empty() {
            w.key("tags").begin_array();
            for t in &self.tags {
                w.string(t);
            }
            w.end_array();
        }
        if !self.source.is_empty() {
            w.field_str("source", &self.source);
        }
        w.field_u64("created", self.created).field_u64("updated", self.updated).end_object();
    }
}

/// An entry line read without copying its text: what a prompt line needs.
pub(super) struct EntryRef<'a> {
    pub id: Cow<'a, str>,
    pub content: Cow<'a, str>,
    pub tags: Vec<Cow<'a, str>>,
}

impl<'a> EntryRef<'a> {
    pub fn read(raw: &'a [u8]) -> read::Result<EntryRef<'a>> {
        read::read_all(raw, |r| {
            let (mut id, mut content, mut tags, mut seen) = (None, None, Vec::new(), 0);
            object(r, |r, key| {
                match key {
                    "id" => id = Some(field(r, &mut seen, 1, Reader::str)?),
                    "content" => content = Some(field(r, &mut seen, 2, Reader::str)?),
                    "tags" => tags = field(r, &mut seen, 4, |r| strings(r, Reader::str))?,
                    _ => r.skip()?,
                }
                Ok(())
            })?;
            Ok(EntryRef {
                id: id.ok_or_else(|| r.error("missing field `id`"))?,
                content: content.ok_or_else(|| r.error("missing field `content`"))?,
                tags,
            })
        })
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
