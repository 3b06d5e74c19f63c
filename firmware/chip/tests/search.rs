//! The chip's `web_search` over a scripted link speaking Tavily's and Brave's documented
//! formats: which engine, what is sent, the chip's budget, and the answers it refuses.

use chela_chip::link::{Answer, BodyWriter, Link, LinkError};
use chela_chip::search::{self, MAX_ANSWER, MAX_TEXT};
use chela_core::console::{ChipConfig, ChipDefaults, Field};
use chela_core::exchange::Head;

/// A request as the engine saw it: method, URL, headers, body.
type Seen = (String, String, Vec<(String, String)>, String);

/// The requests the engine saw, and the answer it gives.
struct Engine {
    status: u16,
    body: Vec<u8>,
    seen: Vec<Seen>,
}

impl Engine {
    fn new(status: u16, body: &[u8]) -> Engine {
        Engine { status, body: body.to_vec(), seen: Vec::new() }
    }

    fn answer(&self, answer: &mut dyn Answer) {
        answer.head(self.status, &[("content-type", "application/json")]);
        for piece in self.body.chunks(100) {
            if !answer.body(piece) {
                return;
            }
        }
        answer.end();
    }

    fn saw(&mut self, method: &str, head: &Head, body: String) {
        let headers = head.headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        self.seen.push((method.into(), head.url.clone(), headers, body));
    }
}

impl Link for Engine {
    async fn post(
        &mut self,
        head: &Head,
        length: usize,
        body: &mut BodyWriter<'_>,
        answer: &mut dyn Answer,
    ) -> Result<(), LinkError> {
        let (mut sent, mut buf) = (Vec::new(), Vec::new());
        while sent.len() < length {
            body(sent.len(), &mut buf);
            assert!(!buf.is_empty());
            sent.extend_from_slice(&buf);
        }
        self.saw("POST", head, String::from_utf8(sent).unwrap());
        self.answer(answer);
        Ok(())
    }

    async fn get(&mut self, head: &Head, answer: &mut dyn Answer) -> Result<(), LinkError> {
        self.saw("GET", head, String::new());
        self.answer(answer);
        Ok(())
    }

    async fn wait_until(&mut self, _: u64) -> Result<(), LinkError> {
        unreachable!("a search is never retried")
    }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the scripted engine never waits"),
    }
}

fn config(tavily: &str, brave: &str) -> ChipConfig {
    let mut c = ChipConfig::new(ChipDefaults::default());
    c.set(Field::TavilyKey, tavily).unwrap();
    c.set(Field::BraveKey, brave).unwrap();
    c
}

fn search(config: &ChipConfig, engine: &mut Engine, input: &str) -> Result<String, String> {
    block_on(search::run(config, engine, input))
}

const TAVILY: &[u8] = br#"{"query":"rust","results":[{"title":"Rust","url":"https://www.rust-lang.org/","content":"A language\nempowering everyone","score":0.98},{"title":"Book","url":"https://doc.rust-lang.org/book/","content":"The book","score":0.9}],"response_time":0.5}"#;

#[test]
fn tavily_is_preferred_and_spoken_as_documented() {
    let mut engine = Engine::new(200, TAVILY);
    let out = search(&config("tvly-abc", "brave-x"), &mut engine, r#"{"query":"rust lang"}"#).unwrap();
    assert_eq!(
        out,
        "1. Rust\n   https://www.rust-lang.org/\n   A language empowering everyone\n2. Book\n   https://doc.rust-lang.org/book/\n   The book"
    );
    let (method, url, headers, body) = &engine.seen[0];
    assert_eq!((method.as_str(), url.as_str()), ("POST", "https://api.tavily.com/search"));
    assert!(headers.contains(&("authorization".into(), "Bearer tvly-abc".into())));
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body, serde_json::json!({"query": "rust lang", "max_results": 5, "search_depth": "basic"}));
}

#[test]
fn brave_when_only_its_key_is_set() {
    let brave = br#"{"type":"search","web":{"type":"search","results":[{"title":"Caf <strong>guide</strong>","url":"https://example.com/","description":"Best <strong>coffee</strong> &amp; tea"}]}}"#;
    let mut engine = Engine::new(200, brave);
    let out = search(&config("", "BSA-key"), &mut engine, r#"{"query":"coffee & tea","max_results":50}"#).unwrap();
    assert_eq!(out, "1. Caf guide\n   https://example.com/\n   Best coffee & tea");
    let (method, url, headers, _) = &engine.seen[0];
    assert_eq!(method, "GET");
    // At most the chip's five results, whatever the model asks for.
    assert_eq!(url, "https://api.search.brave.com/res/v1/web/search?q=coffee%20%26%20tea&count=5");
    assert!(headers.contains(&("x-subscription-token".into(), "BSA-key".into())));
}

#[test]
fn the_chips_budget_and_refusals() {
    // No key: explained, nothing sent; and the tool is not offered at all.
    let none = config("", "");
    assert!(!search::available(&none));
    let mut engine = Engine::new(200, TAVILY);
    assert!(search(&none, &mut engine, r#"{"query":"x"}"#).unwrap_err().contains("set_tavily_key"));
    assert!(engine.seen.is_empty());
    let keys = config("k", "");
    assert!(search(&keys, &mut engine, r#"{"query":"  "}"#).unwrap_err().contains("empty"));
    assert!(search(&keys, &mut engine, r#"{"q":"x"}"#).unwrap_err().contains("schema"));
    // Engine errors as the host words them.
    let e = search(&keys, &mut Engine::new(401, b"{}"), r#"{"query":"x"}"#).unwrap_err();
    assert!(e.contains("rejected the search key"), "{e}");
    let e = search(&keys, &mut Engine::new(432, b"{}"), r#"{"query":"x"}"#).unwrap_err();
    assert!(e.contains("quota"), "{e}");
    // An answer over the chip's read bound is refused, not buffered.
    let mut huge = br#"{"results":[{"title":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', MAX_ANSWER));
    let e = search(&keys, &mut Engine::new(200, &huge), r#"{"query":"x"}"#).unwrap_err();
    assert!(e.contains("more than this device reads"), "{e}");
    // Long results are cut to the model's budget, at whole results.
    let long: Vec<String> = (0..5)
        .map(|i| {
            let (title, text) = ("x".repeat(300), "word ".repeat(200));
            format!(r#"{{"title":"T{i} {title}","url":"https://e.com/{i}","content":"{text}"}}"#)
        })
        .collect();
    let body = format!(r#"{{"results":[{}]}}"#, long.join(","));
    let out = search(&keys, &mut Engine::new(200, body.as_bytes()), r#"{"query":"x"}"#).unwrap();
    assert!(out.len() <= MAX_TEXT && out.contains("\n3. T2 ") && !out.contains("4. T3"), "{out}");
    assert!(search(&keys, &mut Engine::new(200, b"<html>"), r#"{"query":"x"}"#).unwrap_err().contains("unreadable"));
}
