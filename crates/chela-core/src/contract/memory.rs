//! `memory_store` and `memory_recall`: the memory tools both sides offer (the host adds
//! update, forget, list and the daily note).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::chat::ToolSpec;
use chela_proto::json::read::{self, Kind, Reader, field, object, opt};

use super::Args;

use crate::memory::{Entries, render_line};

pub const STORE: ToolSpec<'static> = ToolSpec {
    name: "memory_store",
    description: "Remember a fact for future conversations. Returns its id.",
    input_schema: r#"{"type":"object","properties":{"content":{"type":"string","description":"One self-contained fact."},"tags":{"type":"array","items":{"type":"string"}},"source":{"type":"string","description":"Where it came from, e.g. chat."}},"required":["content"]}"#,
};

pub const RECALL: ToolSpec<'static> = ToolSpec {
    name: "memory_recall",
    description: "Search remembered facts by keywords, best matches first.",
    input_schema: r#"{"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":50}},"required":["query"]}"#,
};

/// Tags as a list or as one comma-separated string: models send both.
#[derive(Debug, PartialEq, Eq)]
pub enum Tags {
    One(String),
    Many(Vec<String>),
}

impl Tags {
    /// A string, or an array of strings.
    pub fn read(r: &mut Reader<'_>) -> read::Result<Tags> {
        let at = r.offset();
        let untagged = read::Error { what: "data did not match any variant of untagged enum Tags", offset: at };
        match r.peek()? {
            Kind::String => r.string_owned().map(Tags::One),
            Kind::Array => {
                r.begin_array()?;
                let mut all = Vec::new();
                while r.next_item()? {
                    all.push(r.string_owned().map_err(|_| untagged)?);
                }
                Ok(Tags::Many(all))
            }
            _ => Err(untagged),
        }
    }

    /// The tags as a list (`None`: no tags). A single string is kept whole here; the entry
    /// store splits it at commas.
    pub fn into_vec(tags: Option<Tags>) -> Vec<String> {
        match tags {
            None => Vec::new(),
            Some(Tags::One(s)) => alloc::vec![s],
            Some(Tags::Many(v)) => v,
        }
    }
}

/// The host's own tools (`memory_update`) read tags through serde: the value's text, read here.
impl<'de> serde::Deserialize<'de> for Tags {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Tags, D::Error> {
        let raw = alloc::boxed::Box::<serde_json::value::RawValue>::deserialize(d)?;
        read::read_all(raw.get().as_bytes(), Tags::read).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct StoreArgs {
    pub content: String,
    pub tags: Option<Tags>,
    /// Empty when not given.
    pub source: String,
}

impl Args for StoreArgs {
    const FIELDS: &'static [&'static str] = &["content", "tags", "source"];

    fn read(r: &mut Reader<'_>) -> read::Result<StoreArgs> {
        let (mut content, mut tags, mut source, mut seen) = (None, None, String::new(), 0);
        object(r, |r, key| {
            match key {
                "content" => content = Some(field(r, &mut seen, 1, Reader::string_owned)?),
                "tags" => tags = field(r, &mut seen, 2, |r| opt(r, Tags::read))?,
                "source" => source = field(r, &mut seen, 4, Reader::string_owned)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(StoreArgs { content: content.ok_or_else(|| r.error("missing field `content`"))?, tags, source })
    }
}

crate::serde_args!(StoreArgs);

#[derive(Debug, PartialEq, Eq)]
pub struct RecallArgs {
    pub query: String,
    pub max_results: Option<usize>,
}

impl Args for RecallArgs {
    const FIELDS: &'static [&'static str] = &["query", "max_results"];

    fn read(r: &mut Reader<'_>) -> read::Result<RecallArgs> {
        let (mut query, mut max_results, mut seen) = (None, None, 0);
        object(r, |r, key| {
            match key {
                "query" => query = Some(field(r, &mut seen, 1, Reader::string_owned)?),
                "max_results" => max_results = field(r, &mut seen, 2, |r| opt(r, Reader::usize))?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(RecallArgs { query: query.ok_or_else(|| r.error("missing field `query`"))?, max_results })
    }
}

crate::serde_args!(RecallArgs);

/// The answer to `memory_recall`: the best matches a line each, or a sentence saying none did.
pub fn recall(entries: &Entries, a: &RecallArgs) -> String {
    let hits = entries.recall(&a.query, a.max_results.unwrap_or(8).clamp(1, 50));
    if hits.is_empty() {
        return format!("Nothing remembered matches \"{}\".", a.query);
    }
    hits.iter().map(|(_, e)| render_line(e)).collect::<Vec<_>>().join("\n")
}
