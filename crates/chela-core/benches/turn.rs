//! Host CPU time of one agent turn, without the wait for the model.
//!
//! The turn (see `common::turn`): a 50-message history and 30 tools; round 1 encodes the
//! request and decodes a streamed tool call, the no-op tool runs, round 2 encodes the longer
//! request and decodes a streamed text answer. Both wire formats, interleaved so machine noise
//! hits them alike. A second row per format adds what the driver also does every turn: parse
//! the session file into the history and encode the turn's lines to append.
//!
//! Run: `cargo bench -p chela-core --bench turn` (`CHELA_BENCH_ITERS=N` to change the count).

mod common;

use std::hint::black_box;
use std::time::Instant;

use chela_core::session;
use common::{Fixture, Format, Probe};

const TOOLS: usize = 30;
const MESSAGES: usize = 50;
const WARMUP: usize = 2_000;

struct Row {
    name: String,
    nanos: Vec<u64>,
}

fn main() {
    let iters = common::iterations(20_000);
    let registry = common::registry(TOOLS);
    let system = common::system_prompt(&registry);
    let history = common::history(MESSAGES, usize::MAX);
    assert_eq!(history.len(), MESSAGES);
    let session_text = common::session_text(&history);
    let fixtures: Vec<Fixture> = Format::BOTH.iter().map(|&f| Fixture::new(f, common::registry(TOOLS))).collect();

    println!(
        "turn: {} messages ({} request bytes, session file {} bytes), {} tools, system prompt {} bytes, {}-byte chunks",
        history.len(),
        chela_core::history::bytes(&history),
        session_text.len(),
        registry.tools_for(Default::default()).len(),
        system.len(),
        common::CHUNK,
    );
    for fx in &fixtures {
        let mut bodies = Vec::new();
        let run = common::turn(fx, history.clone(), system.clone(), &mut |p| {
            if let Probe::Encoded { body_len, .. } = p {
                bodies.push(body_len);
            }
        });
        common::check(&run);
        println!(
            "  {:<9} request bodies {:?} bytes; streamed replies {} + {} bytes",
            fx.format.name(),
            bodies,
            fx.tool_call.len(),
            fx.text.len()
        );
    }

    let mut rows: Vec<Row> = fixtures
        .iter()
        .flat_map(|fx| {
            [
                Row { name: format!("{} turn", fx.format.name()), nanos: Vec::with_capacity(iters) },
                Row {
                    name: format!("{} turn + session parse/encode", fx.format.name()),
                    nanos: Vec::with_capacity(iters),
                },
            ]
        })
        .collect();

    for i in 0..WARMUP + iters {
        let record = i >= WARMUP;
        for (f, fx) in fixtures.iter().enumerate() {
            // The turn alone: the history is loaded before the clock starts.
            let loaded = session::parse(&session_text).messages;
            let sys = system.clone();
            let start = Instant::now();
            let run = common::turn(fx, loaded, sys, &mut |_| {});
            black_box(&run);
            drop(run);
            let t = start.elapsed().as_nanos() as u64;
            if record {
                rows[2 * f].nanos.push(t);
            }

            // With the driver's per-turn session work: parse the file, encode the new lines.
            let sys = system.clone();
            let start = Instant::now();
            let loaded = session::parse(black_box(&session_text)).messages;
            let lines = common::turn_lines(fx, loaded, sys);
            black_box(&lines);
            drop(lines);
            let t = start.elapsed().as_nanos() as u64;
            if record {
                rows[2 * f + 1].nanos.push(t);
            }
        }
    }

    println!("\n{} turns per row after {WARMUP} warm-up turns; microseconds", iters);
    println!("{:<40} {:>8} {:>8} {:>8} {:>8} {:>8}", "", "p50", "p90", "p99", "max", "mean");
    let mut pass = true;
    for row in &mut rows {
        row.nanos.sort_unstable();
        let us = |n: u64| n as f64 / 1000.0;
        let mean = row.nanos.iter().sum::<u64>() as f64 / row.nanos.len().max(1) as f64 / 1000.0;
        let (p50, p99) = (common::quantile(&row.nanos, 0.50), common::quantile(&row.nanos, 0.99));
        println!(
            "{:<40} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            row.name,
            us(p50),
            us(common::quantile(&row.nanos, 0.90)),
            us(p99),
            us(*row.nanos.last().unwrap_or(&0)),
            mean
        );
        if row.name.ends_with(" turn") {
            pass &= p50 < 200_000 && p99 < 1_000_000;
        }
    }
    println!("target (turn rows): p50 < 200 µs and p99 < 1000 µs: {}", if pass { "PASS" } else { "FAIL" });
}
