//! Prompt-cache figures (byte counts, not times, so any build profile gives the same numbers):
//! a scripted conversation of one session runs against the fake LLM over 127.0.0.1 with real
//! files, and each request body the provider sent is measured.
//!
//! - the first request: body bytes, tool JSON bytes and tool count;
//! - over the first 10 turns: the cached prefix (what the cache serves: the longest prefix an
//!   earlier request wrote, found as Anthropic looks for it, at a breakpoint or up to 20 blocks
//!   before one) in bytes and as a share of each body;
//! - over 20 turns: the estimated input cost without caching and with Anthropic's cache as it
//!   bills (that prefix is read at 0.1×, what the request newly marks is written at 1.25×, the
//!   rest at 1×), at a fixed $3 per million input tokens and 4 bytes a token. Output is the
//!   same either way and left out.
//!
//! The turns are two minutes apart on a manual clock, as a person's are, so the time in the
//! request changes from turn to turn.
//!
//! Run: `cargo bench -p chela-runtime --bench cache` (or `--profile dev`: the same figures).

use std::sync::Arc;
use std::time::Duration;

use chela_core::agent::{ToolCall, ToolResult};
use chela_core::cap::Caller;
use chela_proto::chat::Message;
use chela_runtime::app::App;
use chela_runtime::session::{HubLimits, SessionHub};
use chela_runtime::turn::{Cancel, Observer, TurnEnd, TurnRequest};
use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

struct Quiet;

impl Observer for Quiet {
    fn text(&mut self, _: &str) {}
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
}

const TURNS: usize = 20;
const INPUT_PER_MTOK: f64 = 3.0;

/// Turn `k`'s script: every fourth turn asks the clock, every fifth stores a memory.
fn script() -> Vec<Step> {
    let mut steps = Vec::new();
    for k in 0..TURNS {
        if k % 4 == 1 {
            steps.push(Step::tool_call("get_current_time", json!({})));
        } else if k % 5 == 2 {
            steps.push(Step::tool_call("memory_store", json!({"content": format!("fact number {k} about Ada")})));
        }
        steps.push(Step::text(format!("Answer {k}: {}", "a few words of reply ".repeat(8))));
    }
    steps
}

async fn session(cache: bool) -> Vec<Vec<u8>> {
    let llm = FakeLlm::start(script());
    let dir = tempfile::tempdir().unwrap();
    let ws = chela_infra::workspace::Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    let url = llm.anthropic_base_url();
    let prompt_cache = if cache { "true" } else { "false" };
    for (k, v) in [
        ("llm.provider", "anthropic"),
        ("llm.base_url", url.as_str()),
        ("llm.api_key", "k"),
        ("llm.prompt_cache", prompt_cache),
    ] {
        chela_infra::config::set_override(&ws, k, v).unwrap();
    }
    // A person's turns come minutes apart: the clock the prompt reads moves between them.
    let clock = chela_infra::clock::Clock::manual(1_800_000_000_000);
    let app = Arc::new(App::from_base(chela_runtime::app::Base::load_with(ws, clock.clone()).unwrap()).unwrap());
    let hub = SessionHub::new(app.clone(), HubLimits::from_config(&app.base.cfg));
    for k in 0..TURNS {
        let req = TurnRequest {
            channel: "cli".into(),
            chat_id: "local".into(),
            user: Message::user_text(format!("Question {k}: {}", "some words the person typed ".repeat(4))),
            scope: Vec::new(),
            caller: Caller::Manual,
            depth: 0,
            cancel: Cancel::default(),
            observer: Box::new(Quiet),
            client: None,
        };
        match hub.submit(req).unwrap().finish().await.unwrap() {
            TurnEnd::Done(_) => {}
            TurnEnd::Failed(e) => panic!("turn {k}: {e}"),
        }
        clock.advance(Duration::from_secs(120));
    }
    llm.requests().into_iter().map(|r| r.body).collect()
}

/// A request as the cache sees it: its pieces in order (each tool, each system block, each
/// message block; content without the marks, one text block and a string alike) and which
/// pieces carry a breakpoint.
fn pieces(body: &[u8]) -> (Vec<String>, Vec<usize>) {
    let v: Value = serde_json::from_slice(body).unwrap();
    let mut out = Vec::new();
    let mut marks = Vec::new();
    let mut push = |item: &Value, out: &mut Vec<String>| {
        let mut item = item.clone();
        let marked = item.as_object_mut().and_then(|o| o.remove("cache_control")).is_some();
        out.push(item.to_string());
        if marked {
            marks.push(out.len() - 1);
        }
    };
    for t in v["tools"].as_array().into_iter().flatten() {
        push(t, &mut out);
    }
    match &v["system"] {
        Value::String(s) => push(&json!({"type": "text", "text": s}), &mut out),
        Value::Array(blocks) => blocks.iter().for_each(|b| push(b, &mut out)),
        _ => {}
    }
    for m in v["messages"].as_array().into_iter().flatten() {
        out.push(format!("role:{}", m["role"]));
        match &m["content"] {
            Value::String(s) => push(&json!({"type": "text", "text": s}), &mut out),
            Value::Array(blocks) => blocks.iter().for_each(|b| push(b, &mut out)),
            _ => {}
        }
    }
    (out, marks)
}

fn tokens(bytes: usize) -> f64 {
    bytes as f64 / 4.0
}

/// How far before a breakpoint Anthropic looks for an earlier cache entry, in blocks.
const LOOKBACK: usize = 20;

/// Input cost of the requests in order, as Anthropic bills a cache, and the bytes each request
/// read from it.
fn cost_with_cache(bodies: &[Vec<u8>]) -> (f64, Vec<u64>, u64) {
    let mut written: Vec<Vec<String>> = Vec::new();
    let (mut cost, mut reads, mut all_bytes) = (0.0, Vec::new(), 0u64);
    for body in bodies {
        let (p, marks) = pieces(body);
        let len = |k: usize| p[..k].iter().map(String::len).sum::<usize>();
        let total = len(p.len());
        let was_written = |k: usize| written.iter().any(|w| w.len() == k + 1 && w[..] == p[..=k]);
        let hit = marks.iter().rev().find_map(|&m| (m.saturating_sub(LOOKBACK)..=m).rev().find(|&k| was_written(k)));
        let read = hit.map_or(0, |m| len(m + 1));
        let last = marks.last().map_or(0, |&m| len(m + 1));
        let write = last.saturating_sub(read);
        let rest = total - read - write;
        cost += (tokens(read) * 0.1 + tokens(write) * 1.25 + tokens(rest)) * INPUT_PER_MTOK / 1e6;
        for &m in &marks {
            written.push(p[..=m].to_vec());
        }
        reads.push(read as u64);
        all_bytes += total as u64;
    }
    (cost, reads, all_bytes)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cached = rt.block_on(session(true));
    let plain = rt.block_on(session(false));

    let first: Value = serde_json::from_slice(&cached[0]).unwrap();
    let tools = serde_json::to_string(&first["tools"]).unwrap().len();
    println!(
        "first request (terminal chat, Anthropic): {} B body, {} B tool JSON, {} tools",
        cached[0].len(),
        tools,
        first["tools"].as_array().map_or(0, Vec::len)
    );

    // The requests of the first 10 turns: 10 plus the tool rounds among them. Bytes as the
    // cache counts them (the pieces, without marks), so prefix and body add up alike.
    let ten: usize = (0..10).map(|k| 1 + usize::from(k % 4 == 1 || k % 5 == 2)).sum();
    let (_, reads, body) = cost_with_cache(&cached[..ten]);
    let prefix: u64 = reads.iter().sum();
    println!(
        "10 turns ({ten} requests): cached prefix {} B per request on average, {:.1} % of the {} B of request bodies",
        prefix / ten as u64,
        100.0 * prefix as f64 / body as f64,
        body
    );

    let before: f64 = plain.iter().map(|b| tokens(b.len()) * INPUT_PER_MTOK / 1e6).sum();
    let (after, reads, all) = cost_with_cache(&cached);
    let read: u64 = reads.iter().sum();
    println!(
        "20 turns ({} requests), input at ${INPUT_PER_MTOK}/Mtok, 4 B/token: before ${before:.4}, after ${after:.4} \
         ({:.1} % of the input read from the cache)",
        cached.len(),
        100.0 * read as f64 / all as f64
    );
}
