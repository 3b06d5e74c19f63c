//! The `web` group: `web_search`, through Tavily (preferred) or Brave Search, at
//! `search.tavily_url` and `search.brave_url`. The requests, the answers' parsing and the text
//! are the core's contract (`chela_core::contract::web`), shared with the chip.

use std::time::Duration;

use bytes::Bytes;
use chela_core::config as keys;
use chela_core::contract::web::{self as contract, Hit, SEARCH, SearchArgs};
use hyper::http::Method;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};
use crate::net::{Guard, Request};

pub fn group() -> Group {
    Group::new("web", "Search the web.")
        .guidance(
            "Web: use web_search for current events, prices, schedules and facts you are not sure of; \
             cite the URLs you relied on.",
        )
        .with(WebSearch)
        .needs_one_of(&[keys::SEARCH_TAVILY_KEY, keys::SEARCH_BRAVE_KEY])
}

/// Largest search response read.
const MAX_RESPONSE: usize = 1024 * 1024;
/// Longest snippet kept per result.
const MAX_SNIPPET: usize = 500;

pub struct WebSearch;

impl Tool for WebSearch {
    const NAME: &'static str = SEARCH.name;
    const DESCRIPTION: &'static str = SEARCH.description;
    const SCHEMA: &'static str = SEARCH.input_schema;
    type Args = SearchArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: SearchArgs) -> ToolResult {
        let query = a.query.trim();
        if query.is_empty() {
            return Err(ToolError::invalid_args("The search query is empty."));
        }
        let n =
            a.max_results.unwrap_or_else(|| ctx.cfg.usize(keys::SEARCH_MAX_RESULTS)).clamp(1, contract::MAX_RESULTS);
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
        Ok(contract::render(&hits, usize::MAX))
    }
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

async fn tavily_search(ctx: &ToolCtx, key: &str, query: &str, n: usize) -> Result<Vec<Hit>, ToolError> {
    let req = Request {
        method: Method::POST,
        url: format!("{}/search", ctx.cfg.get(keys::SEARCH_TAVILY_URL)),
        headers: vec![
            ("authorization".to_owned(), format!("Bearer {key}")),
            ("content-type".to_owned(), "application/json".to_owned()),
        ],
        body: Bytes::from(contract::tavily_body(query, n)),
        timeout: timeout(ctx),
        guard: Guard::AllowAll,
    };
    contract::parse_tavily(&fetch(ctx, "Tavily", req).await?, n, MAX_SNIPPET).map_err(ToolError::new)
}

async fn brave_search(ctx: &ToolCtx, key: &str, query: &str, n: usize) -> Result<Vec<Hit>, ToolError> {
    let req = Request {
        method: Method::GET,
        url: format!("{}{}", ctx.cfg.get(keys::SEARCH_BRAVE_URL), contract::brave_path(query, n)),
        headers: vec![
            ("accept".to_owned(), "application/json".to_owned()),
            ("x-subscription-token".to_owned(), key.to_owned()),
        ],
        body: Bytes::new(),
        timeout: timeout(ctx),
        guard: Guard::AllowAll,
    };
    contract::parse_brave(&fetch(ctx, "Brave Search", req).await?, n, MAX_SNIPPET).map_err(ToolError::new)
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
        assert_eq!(contract::percent_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(contract::strip_tags("<b>x</b> &lt;y&gt;"), "x <y>");
    }
}
