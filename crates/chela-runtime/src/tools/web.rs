//! The `web` group: `web_search`, through Tavily (preferred) or Brave Search.
//!
//! Tavily: `POST {search.tavily_url}/search` with a bearer key and `{"query", "max_results",
//! "search_depth": "basic"}`; results carry `title`, `url`, `content`. Brave:
//! `GET {search.brave_url}/res/v1/web/search?q=…&count=…` with `X-Subscription-Token`; results
//! are under `web.results` with `title`, `url`, `description` (which may hold `<strong>` tags).

use std::time::Duration;

use bytes::Bytes;
use chela_core::config as keys;
use hyper::http::Method;
use serde::Deserialize;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};
use crate::net::{Guard, Request};

pub fn group() -> Group {
    Group::new("web", "Search the web.")
        .guidance(
            "Web: use web_search for current events, prices, schedules and facts you are not sure of; \
             cite the URLs you relied on.",
        )
        .with(WebSearch)
}

/// Largest search response read.
const MAX_RESPONSE: usize = 1024 * 1024;
/// Longest snippet kept per result.
const MAX_SNIPPET: usize = 500;

pub struct WebSearch;

#[derive(Deserialize)]
pub struct SearchArgs {
    query: String,
    #[serde(default)]
    max_results: Option<usize>,
}

/// One result, whatever the engine.
#[derive(Debug, PartialEq, Eq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

impl Tool for WebSearch {
    const NAME: &'static str = "web_search";
    const DESCRIPTION: &'static str = "Search the web. Returns title, URL and snippet for each result.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}"#;
    type Args = SearchArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: SearchArgs) -> ToolResult {
        let query = a.query.trim();
        if query.is_empty() {
            return Err(ToolError::invalid_args("The search query is empty."));
        }
        let n = a.max_results.unwrap_or_else(|| ctx.cfg.usize(keys::SEARCH_MAX_RESULTS)).clamp(1, 20);
        let tavily = ctx.cfg.get(keys::SEARCH_TAVILY_KEY);
        let brave = ctx.cfg.get(keys::SEARCH_BRAVE_KEY);
        let hits = if !tavily.is_empty() {
            tavily_search(ctx, tavily, query, n).await?
        } else if !brave.is_empty() {
            brave_search(ctx, brave, query, n).await?
        } else {
            return Err(ToolError::new(
                "Web search is not set up: no search key is configured. Ask the user to run \
                 `chela config set search.tavily_key tvly-…` (Tavily, preferred) or \
                 `chela config set search.brave_key …` (Brave Search).",
            ));
        };
        if hits.is_empty() {
            return Ok(format!("No results for \"{query}\"."));
        }
        Ok(render(&hits))
    }
}

fn render(hits: &[Hit]) -> String {
    let mut out = String::new();
    for (i, h) in hits.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{}. {}\n   {}\n   {}", i + 1, h.title, h.url, h.snippet));
    }
    out
}

async fn fetch(ctx: &ToolCtx, engine: &str, req: Request) -> Result<Bytes, ToolError> {
    let timeout = req.timeout;
    let resp = ctx.http.send(req).await.map_err(|e| ToolError::new(format!("{engine} could not be reached: {e}")))?;
    let status = resp.status;
    let body = resp
        .bytes(MAX_RESPONSE, timeout)
        .await
        .map_err(|e| ToolError::new(format!("{engine} answer could not be read: {e}")))?;
    match status {
        200 => Ok(body),
        401 | 403 => Err(ToolError::new(format!(
            "{engine} rejected the search key (HTTP {status}); the user should check it with `chela config show`."
        ))),
        429 => Err(ToolError::new(format!("{engine} is rate-limiting searches (HTTP 429); try again in a minute."))),
        432 | 433 => Err(ToolError::new(format!("{engine} says the plan's search quota is used up (HTTP {status})."))),
        _ => Err(ToolError::new(format!(
            "{engine} answered HTTP {status}: {}",
            chela_core::text::prefix(String::from_utf8_lossy(&body).trim(), 200)
        ))),
    }
}

fn timeout(ctx: &ToolCtx) -> Duration {
    Duration::from_secs(ctx.cfg.int(keys::HTTP_TIMEOUT_SECS).unsigned_abs())
}

/// One result as either engine sends it: Tavily calls the snippet `content`, Brave `description`.
#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default, alias = "description")]
    content: String,
}

fn parse<T: serde::de::DeserializeOwned>(engine: &str, bytes: &[u8]) -> Result<T, ToolError> {
    serde_json::from_slice(bytes).map_err(|e| ToolError::new(format!("{engine} sent an unreadable answer: {e}")))
}

async fn tavily_search(ctx: &ToolCtx, key: &str, query: &str, n: usize) -> Result<Vec<Hit>, ToolError> {
    #[derive(Deserialize)]
    struct Resp {
        #[serde(default)]
        results: Vec<Item>,
    }
    let body = serde_json::json!({"query": query, "max_results": n, "search_depth": "basic"}).to_string();
    let req = Request {
        method: Method::POST,
        url: format!("{}/search", ctx.cfg.get(keys::SEARCH_TAVILY_URL)),
        headers: vec![
            ("authorization".to_owned(), format!("Bearer {key}")),
            ("content-type".to_owned(), "application/json".to_owned()),
        ],
        body: Bytes::from(body),
        timeout: timeout(ctx),
        guard: Guard::AllowAll,
    };
    let resp: Resp = parse("Tavily", &fetch(ctx, "Tavily", req).await?)?;
    Ok(resp
        .results
        .into_iter()
        .take(n)
        .map(|r| Hit { title: r.title, url: r.url, snippet: snippet(&r.content) })
        .collect())
}

async fn brave_search(ctx: &ToolCtx, key: &str, query: &str, n: usize) -> Result<Vec<Hit>, ToolError> {
    #[derive(Deserialize)]
    struct Resp {
        #[serde(default)]
        web: Option<Web>,
    }
    #[derive(Deserialize)]
    struct Web {
        #[serde(default)]
        results: Vec<Item>,
    }
    let req = Request {
        method: Method::GET,
        url: format!("{}/res/v1/web/search?q={}&count={n}", ctx.cfg.get(keys::SEARCH_BRAVE_URL), percent_encode(query)),
        headers: vec![
            ("accept".to_owned(), "application/json".to_owned()),
            ("x-subscription-token".to_owned(), key.to_owned()),
        ],
        body: Bytes::new(),
        timeout: timeout(ctx),
        guard: Guard::AllowAll,
    };
    let resp: Resp = parse("Brave Search", &fetch(ctx, "Brave Search", req).await?)?;
    Ok(resp
        .web
        .map(|w| w.results)
        .unwrap_or_default()
        .into_iter()
        .take(n)
        // Brave marks the matched words with <strong>.
        .map(|r| Hit { title: strip_tags(&r.title), url: r.url, snippet: snippet(&strip_tags(&r.content)) })
        .collect())
}

fn snippet(s: &str) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = chela_core::text::prefix(&one_line, MAX_SNIPPET);
    if cut.len() < one_line.len() { format!("{cut}…") } else { one_line }
}

/// Removes HTML tags and decodes the few entities search snippets use.
fn strip_tags(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Fixture;
    use crate::tools::testing::serve;

    async fn search(fx: &Fixture, query: &str) -> ToolResult {
        fx.call(WebSearch, serde_json::json!({"query": query})).await
    }

    #[tokio::test]
    async fn tavily_is_preferred_and_spoken_as_documented() {
        let (url, seen) = serve(|_| {
            let body = serde_json::json!({
                "query": "rust", "response_time": 0.5,
                "results": [
                    {"title": "Rust", "url": "https://www.rust-lang.org/", "content": "A language\nempowering everyone", "score": 0.98},
                    {"title": "Book", "url": "https://doc.rust-lang.org/book/", "content": "The book", "score": 0.9}
                ]
            });
            (200, vec![("content-type", "application/json".to_owned())], body.to_string())
        })
        .await;
        let fx = Fixture::new(&[
            ("search.tavily_key", "tvly-abc"),
            ("search.brave_key", "brave-x"),
            ("search.tavily_url", &url),
        ]);
        let out = search(&fx, "rust lang").await.unwrap();
        assert_eq!(
            out,
            "1. Rust\n   https://www.rust-lang.org/\n   A language empowering everyone\n2. Book\n   https://doc.rust-lang.org/book/\n   The book"
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].method, "POST");
        assert_eq!(seen[0].uri, "/search");
        assert_eq!(seen[0].header("authorization"), Some("Bearer tvly-abc"));
        let body: serde_json::Value = serde_json::from_str(&seen[0].body).unwrap();
        assert_eq!(body, serde_json::json!({"query": "rust lang", "max_results": 5, "search_depth": "basic"}));
    }

    #[tokio::test]
    async fn brave_when_only_its_key_is_set() {
        let (url, seen) = serve(|_| {
            let body = serde_json::json!({"type": "search", "web": {"type": "search", "results": [
                {"title": "Caf&eacute; <strong>guide</strong>", "url": "https://example.com/", "description": "Best <strong>coffee</strong> &amp; tea"}
            ]}});
            (200, vec![("content-type", "application/json".to_owned())], body.to_string())
        })
        .await;
        let fx = Fixture::new(&[("search.brave_key", "BSA-key"), ("search.brave_url", &url)]);
        let out = search(&fx, "coffee & tea").await.unwrap();
        assert_eq!(out, "1. Caf&eacute; guide\n   https://example.com/\n   Best coffee & tea");
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].method, "GET");
        assert_eq!(seen[0].uri, "/res/v1/web/search?q=coffee%20%26%20tea&count=5");
        assert_eq!(seen[0].header("x-subscription-token"), Some("BSA-key"));
    }

    #[tokio::test]
    async fn no_key_and_rejected_keys_are_explained() {
        let fx = Fixture::new(&[]);
        let e = search(&fx, "x").await.unwrap_err();
        assert!(e.0.contains("search.tavily_key") && e.0.contains("search.brave_key"), "{e}");
        let (url, _) = serve(|_| (401, vec![], r#"{"detail":{"error":"Unauthorized"}}"#.to_owned())).await;
        let fx = Fixture::new(&[("search.tavily_key", "bad"), ("search.tavily_url", &url)]);
        let e = search(&fx, "x").await.unwrap_err();
        assert!(e.0.contains("rejected the search key"), "{e}");
        let (url, _) = serve(|_| (432, vec![], "{}".to_owned())).await;
        let fx = Fixture::new(&[("search.tavily_key", "k"), ("search.tavily_url", &url)]);
        assert!(search(&fx, "x").await.unwrap_err().0.contains("quota"));
    }

    #[test]
    fn encoding() {
        assert_eq!(percent_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(strip_tags("<b>x</b> &lt;y&gt;"), "x <y>");
    }
}
