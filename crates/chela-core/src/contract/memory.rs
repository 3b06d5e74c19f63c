//! `memory_store` and `memory_recall`: the memory tools both sides offer (the host adds
//! update, forget, list and the daily note).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::chat::ToolSpec;
use serde::Deserialize;

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
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Tags {
    One(String),
    Many(Vec<String>),
}

impl Tags {
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

#[derive(Debug, Deserialize)]
pub struct StoreArgs {
    pub content: String,
    #[serde(default)]
    pub tags: Option<Tags>,
    #[serde(default)]
    pub source: String,
}

#[derive(Debug, Deserialize)]
pub struct RecallArgs {
    pub query: String,
    #[serde(default)]
    pub max_results: Option<usize>,
}

/// The answer to `memory_recall`: the best matches a line each, or a sentence saying none did.
pub fn recall(entries: &Entries, a: &RecallArgs) -> String {
    let hits = entries.recall(&a.query, a.max_results.unwrap_or(8).clamp(1, 50));
    if hits.is_empty() {
        return format!("Nothing remembered matches \"{}\".", a.query);
    }
    hits.iter().map(|(_, e)| render_line(e)).collect::<Vec<_>>().join("\n")
}
