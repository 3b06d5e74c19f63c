//! `web_search` through Tavily (preferred) or Brave Search, as both sides speak it: the
//! request each engine is sent, its answer read into [`Hit`]s, and the text the model gets.
//! The sides differ only in the socket and in how much of the answer they keep (the chip's
//! budget is smaller: [`render`] takes the byte limit).
//!
//! Tavily: `POST …/search` with a bearer key and `{"query", "max_results", "search_depth":
//! "basic"}`; results carry `title`, `url`, `content`. Brave: `GET
//! …/res/v1/web/search?q=…&count=…` with `X-Subscription-Token`; results are under
//! `web.results` with `title`, `url`, `description` (which may hold `<strong>` tags).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::chat::ToolSpec;
use chela_proto::json::read::{self, Reader as Json, field, object, opt};

use super::Args;

pub const SEARCH: ToolSpec<'static> = ToolSpec {
    name: "web_search",
    description: "Search the web. Returns title, URL and snippet for each result.",
    input_schema: r#"{"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}"#,
};

/// The most results asked for.
pub const MAX_RESULTS: usize = 20;

#[derive(Debug, PartialEq, Eq)]
pub struct SearchArgs {
    pub query: String,
    pub max_results: Option<usize>,
}

impl Args for SearchArgs {
    const FIELDS: &'static [&'static str] = &["query", "max_results"];

    fn read(r: &mut Json<'_>) -> read::Result<SearchArgs> {
        let (mut query, mut max_results, mut seen) = (None, None, 0);
        object(r, |r, key| {
            match key {
                "query" => query = Some(field(r, &mut seen, 1, Json::string_owned)?),
                "max_results" => max_results = field(r, &mut seen, 2, |r| opt(r, Json::usize))?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(SearchArgs { query: query.ok_or_else(|| r.error("missing field `query`"))?, max_results })
    }
}

crate::serde_args!(SearchArgs);

/// One result, whatever the engine.
#[derive(Debug, PartialEq, Eq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// Tavily's request body.
pub fn tavily_body(query: &str, n: usize) -> String {
    chela_proto::json::to_string(|w| {
        w.begin_object()
            .field_str("query", query)
            .field_u64("max_results", n as u64)
            .field_str("search_depth", "basic")
            .end_object();
    })
}

/// Brave's path and query, after its base URL.
pub fn brave_path(query: &str, n: usize) -> String {
    format!("/res/v1/web/search?q={}&count={n}", percent_encode(query))
}

/// One result as either engine sends it: Tavily calls the snippet `content`, Brave
/// `description`. Read by the pull reader with the rules of the serde derive it replaced (held
/// to it in `web/read_tests.rs`): missing strings are empty, unknown fields skipped, a field
/// (or `content` and `description`) given twice refused.
#[derive(Debug, Default, PartialEq, Eq)]
struct Item {
    title: String,
    url: String,
    content: String,
}

impl Item {
    fn read(r: &mut Json<'_>) -> read::Result<Item> {
        let (mut item, mut seen) = (Item::default(), 0);
        object(r, |r, key| {
            match key {
                "title" => item.title = field(r, &mut seen, 1, Json::string_owned)?,
                "url" => item.url = field(r, &mut seen, 2, Json::string_owned)?,
                "content" | "description" => item.content = field(r, &mut seen, 4, Json::string_owned)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(item)
    }
}

/// `{"results": [item, ...]}` (missing: none); Brave's `web` holds the same.
fn results(r: &mut Json<'_>) -> read::Result<Vec<Item>> {
    let (mut all, mut seen) = (Vec::new(), 0);
    object(r, |r, key| {
        match key {
            "results" => {
                all = field(r, &mut seen, 1, |r| {
                    r.begin_array()?;
                    let mut v = Vec::new();
                    while r.next_item()? {
                        v.push(Item::read(r)?);
                    }
                    Ok(v)
                })?
            }
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(all)
}

fn read_tavily(body: &[u8]) -> read::Result<Vec<Item>> {
    read::read_all(body, results)
}

/// `{"web": {"results": [...]}}`; a missing or `null` `web` is no results.
fn read_brave(body: &[u8]) -> read::Result<Vec<Item>> {
    read::read_all(body, |r| {
        let (mut all, mut seen) = (Vec::new(), 0);
        object(r, |r, key| {
            match key {
                "web" => all = field(r, &mut seen, 1, |r| opt(r, results))?.unwrap_or_default(),
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(all)
    })
}

/// Tavily's answer: at most `n` hits, snippets on one line and at most `max_snippet` bytes.
pub fn parse_tavily(body: &[u8], n: usize, max_snippet: usize) -> Result<Vec<Hit>, String> {
    let r = read_tavily(body).map_err(|e| format!("Tavily sent an unreadable answer: {e}"))?;
    Ok(r.into_iter()
        .take(n)
        .map(|r| Hit { title: r.title, url: r.url, snippet: snippet(&r.content, max_snippet) })
        .collect())
}

/// Brave's answer, its `<strong>` marks removed.
pub fn parse_brave(body: &[u8], n: usize, max_snippet: usize) -> Result<Vec<Hit>, String> {
    let r = read_brave(body).map_err(|e| format!("Brave Search sent an unreadable answer: {e}"))?;
    Ok(r.into_iter()
        .take(n)
        .map(|r| Hit {
            title: strip_tags(&r.title),
            url: r.url,
            snippet: snippet(&strip_tags(&r.content), max_snippet),
        })
        .collect())
}

/// The model's text: `1. title\n   url\n   snippet`, one block per hit, cut at whole hits to at
/// most `max_bytes` (the first hit is cut inside if it alone is longer).
pub fn render(hits: &[Hit], max_bytes: usize) -> String {
    let mut out = String::new();
    for (i, h) in hits.iter().enumerate() {
        let block = format!("{}{}. {}\n   {}\n   {}", if i > 0 { "\n" } else { "" }, i + 1, h.title, h.url, h.snippet);
        if out.len() + block.len() > max_bytes {
            if i == 0 {
                out.push_str(crate::text::prefix(&block, max_bytes));
            }
            break;
        }
        out.push_str(&block);
    }
    out
}

fn snippet(s: &str, max: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = crate::text::prefix(&one_line, max);
    if cut.len() < one_line.len() { format!("{cut}…") } else { one_line }
}

/// Removes HTML tags and decodes the few entities search snippets use.
pub fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'")
}

/// Percent-encodes a query parameter value (RFC 3986 unreserved characters stay as they are).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The sentence for an engine's answer other than 200.
pub fn status_error(engine: &str, status: u16, body: &[u8]) -> String {
    match status {
        401 | 403 => format!("{engine} rejected the search key (HTTP {status}); the user should check it."),
        429 => format!("{engine} is rate-limiting searches (HTTP 429); try again in a minute."),
        432 | 433 => format!("{engine} says the plan's search quota is used up (HTTP {status})."),
        _ => format!(
            "{engine} answered HTTP {status}: {}",
            crate::text::prefix(String::from_utf8_lossy(body).trim(), 200)
        ),
    }
}

#[cfg(test)]
mod read_tests;
#[cfg(test)]
mod tests;
