//! History load time for a long session: a 4 MiB session file (just under the rotation size),
//! loaded for a turn with the default 64 KiB history budget.
//!
//! Two rows, measured interleaved on the same file (in the page cache, as for every turn but
//! the first):
//! - `tail read + parse` — what `load_history` did before the storage contract:
//!   `workspace::read_tail_lines` of the last 256 KiB (`tail_bytes(64 KiB)`), then
//!   `session::parse` of all of it; the run trimmed the result to the budget afterwards;
//! - `newest-first load` — what it does now: `session::load` through `storage::FileStorage`,
//!   which reads 32 KiB blocks from the end and stops at the first exchange over the budget.
//!
//! Run: `cargo bench -p chela --bench history` (`CHELA_BENCH_ITERS=N` to change the count).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::hint::black_box;
use std::time::Instant;

use chela::storage::FileStorage;
use chela::workspace::read_tail_lines;
use chela_core::session::{self, Budget};
use chela_proto::chat::{Block, Json, Message, Role};

const FILE_BYTES: usize = 4 * 1024 * 1024 - 64 * 1024;
const BUDGET: usize = 64 * 1024;
const TAIL: u64 = 256 * 1024;
const WARMUP: usize = 20;

/// A turn like a real one: a question, a tool call, a 1.5 KB result, an answer.
fn turn(i: usize) -> Vec<Message> {
    vec![
        Message::user_text(format!("Question {i}: what did the notes say about the trip to Lisbon?")),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::text("Let me look at the notes."),
                Block::ToolUse {
                    id: format!("call_{i}"),
                    name: "file_read".into(),
                    input: Json::parse(r#"{"path":"notes/trip.md"}"#).unwrap(),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: format!("call_{i}").into(),
                content: "Flights booked for the 12th; hotel near the river; \"bring the adapter\".\n".repeat(20),
                images: Default::default(),
                is_error: false,
            }],
        },
        Message::assistant_text("The notes say the flights are booked for the 12th and the hotel is near the river."),
    ]
}

fn median(v: &mut [u64]) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64 / 1000.0
}

fn main() {
    let iters: usize = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli_local.jsonl");
    let mut text = String::new();
    let mut i = 0;
    loop {
        let t = session::encode_turn(&turn(i), 1_796_037_920 + i as u64);
        if text.len() + t.len() > FILE_BYTES {
            break;
        }
        text.push_str(&t);
        i += 1;
    }
    std::fs::write(&path, &text).unwrap();
    let (storage, name) = FileStorage::for_file(&path).unwrap();
    let budget = Budget { bytes: BUDGET, max_read: TAIL };

    let old = || {
        let (tail, _) = read_tail_lines(&path, TAIL).unwrap().unwrap();
        session::parse(&tail)
    };
    let new = || session::load(&storage, &name, budget).unwrap();
    let (o, n) = (old(), new());
    println!("history: session file {} bytes, {i} turns, budget {BUDGET} request bytes", text.len());
    println!(
        "  tail read + parse:  {} messages ({} request bytes) from the last {TAIL} bytes",
        o.messages.len(),
        chela_core::history::bytes(&o.messages)
    );
    println!(
        "  newest-first load:  {} messages ({} request bytes), stopped at the budget",
        n.messages.len(),
        chela_core::history::bytes(&n.messages)
    );
    assert_eq!(n.messages[..], o.messages[o.messages.len() - n.messages.len()..], "the same newest messages");

    let (mut t_old, mut t_new) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
    for k in 0..WARMUP + iters {
        let s = Instant::now();
        black_box(old());
        let a = s.elapsed().as_nanos() as u64;
        let s = Instant::now();
        black_box(new());
        let b = s.elapsed().as_nanos() as u64;
        if k >= WARMUP {
            t_old.push(a);
            t_new.push(b);
        }
    }
    println!("\n{iters} loads per row after {WARMUP} warm-up loads; median microseconds");
    println!("  tail read + parse (before)   {:>9.1}", median(&mut t_old));
    println!("  newest-first load (after)    {:>9.1}", median(&mut t_new));
}
