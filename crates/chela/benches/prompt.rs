//! System-prompt build time with every memory file full.
//!
//! The workspace holds `SOUL.md`, `AGENTS.md` and `USER.md` at 4 KiB each and `MEMORY.md` at
//! 8 KiB (their default prompt bounds), three daily notes of 2 KiB (6 KiB together, the daily
//! bound) and 50 remembered entries (more than the 4 KiB entries bound shows).
//!
//! Measured interleaved:
//! - `prompt::build` alone, from strings already in memory;
//! - the host path, `chela::memory::system_prompt` itself: read the four files, the newest part of
//!   the entries file and the daily notes, render the entries, format the local time, then
//!   `prompt::build`. The files are in the page cache, as they are for every turn but the first;
//! - the entries' share of the host path: `memory::recent_entries` (tail read, parse, render).
//!
//! Run: `cargo bench -p chela --bench prompt` (`CHELA_BENCH_ITERS=N` to change the count).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use chela::config::Config;
use chela::localtime::{Date, Local};
use chela::memory;
use chela::workspace::Workspace;
use chela_core::cap::{Capability, GroupSpec, Registry, Scope};
use chela_core::memory::Entries;
use chela_core::prompt::{self, Bounds, Inputs, TurnContext};

const WARMUP: usize = 1_000;
/// `memory.recent_days`'s default.
const RECENT_DAYS: i64 = 3;

/// Markdown-looking text of exactly `len` bytes.
fn filled(title: &str, len: usize) -> String {
    let mut s = format!("# {title}\n\n");
    let mut n = 0;
    while s.len() < len {
        n += 1;
        s.push_str(&format!(
            "- Note {n}: prefers short answers in the morning, tea over coffee, and trains over planes when under four hours.\n"
        ));
    }
    s.truncate(len);
    s
}

/// A workspace with every memory file at its bound.
fn workspace(dir: &Path, today: Date) {
    std::fs::create_dir_all(dir.join("memory")).unwrap();
    std::fs::write(dir.join("SOUL.md"), filled("Soul", 4096)).unwrap();
    std::fs::write(dir.join("AGENTS.md"), filled("How to work", 4096)).unwrap();
    std::fs::write(dir.join("USER.md"), filled("User", 4096)).unwrap();
    std::fs::write(dir.join("MEMORY.md"), filled("Memory", 8192)).unwrap();
    for back in 0..RECENT_DAYS {
        let date = today.days_before(back);
        let mut note = format!("# {date}\n\n");
        let mut n = 0;
        while note.len() < 2048 {
            n += 1;
            note.push_str(&format!(
                "- {:02}:{:02} Booked the dentist for Friday and moved the call with Ana.\n",
                8 + n / 4,
                n % 60
            ));
        }
        note.truncate(2048);
        std::fs::write(dir.join("memory").join(format!("{date}.md")), note).unwrap();
    }
    let mut entries = Entries::default();
    for i in 0..50u64 {
        let content =
            format!("Entry {i}: the user's sister Ana lives in Lyon and visits every second weekend of the month.");
        entries.store(&content, &["family".to_owned(), "travel".to_owned()], "chat", 1_796_000_000 + i).unwrap();
    }
    std::fs::write(dir.join("memory/entries.jsonl"), entries.to_jsonl()).unwrap();
}

/// A registry whose groups give about 1 KiB of tool guidance, like the default build's.
fn registry() -> Registry {
    let mut r = Registry::new();
    for (g, guidance) in [
        ("time", ""),
        ("files", "Files: paths are relative to the workspace; read before you edit, and never delete without asking."),
        (
            "memory",
            "Memory: store durable facts about the user with memory_store; check memory_recall before asking again; MEMORY.md is the user's own notes.",
        ),
        ("web", "Web: web_search for current facts, then web_fetch a result to read it; cite the URL you used."),
        ("http", "HTTP: http_request fetches a URL or calls a web API; private and local addresses are refused."),
    ] {
        let spec = GroupSpec {
            id: g.into(),
            description: "group".into(),
            core: g == "time",
            visible_by_default: true,
            guidance: guidance.into(),
        };
        let cap = Capability {
            id: format!("{g}_tool").into(),
            group: "".into(),
            description: "d".into(),
            input_schema: r#"{"type":"object"}"#.into(),
            llm_callable: true,
        };
        r.add_group(spec, vec![cap]).unwrap();
    }
    r
}

// ---- Measurement. ----

fn quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let iters = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000usize);
    let tz = chela::tzdb::named_zone("Europe/Paris").expect("the system has tzdata");
    // Fixed, so the daily notes picked do not depend on when the benchmark runs.
    let now = 1_796_037_920; // 2026-11-30T11:25:20Z
    let today = Local::at(&tz, now).date();
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().to_path_buf())).unwrap();
    let root = ws.root().to_path_buf();
    workspace(&root, today);
    let registry = registry();
    let cfg = Config::from_layers(None, None, &[]).unwrap();
    let bounds = Bounds::default();

    // The in-memory inputs for `prompt::build` alone: what the host path reads and renders.
    let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap();
    let (soul, agents, user, memory) = (read("SOUL.md"), read("AGENTS.md"), read("USER.md"), read("MEMORY.md"));
    let entries = memory::recent_entries(&ws, bounds.entries);
    let daily = memory::recent_daily(&ws, today, RECENT_DAYS);
    let guidance = registry.guidance_for(Scope::default());
    let inputs = Inputs {
        soul: &soul,
        agents: &agents,
        user: &user,
        memory: &memory,
        entries: &entries,
        daily: &daily,
        tool_guidance: &guidance,
        context: TurnContext {
            channel: "cli",
            chat_id: "local",
            local_time: "2026-11-30T12:25:20+01:00",
            weekday: "Monday",
            timezone: "Europe/Paris",
        },
    };
    let pure = prompt::build(&inputs, &bounds);
    let host = memory::system_prompt(&ws, &cfg, &registry, &tz, now, "cli", "local").text;
    assert_eq!(pure, host, "the in-memory inputs must be what the host path reads");
    println!(
        "prompt: SOUL/AGENTS/USER.md {} B each, MEMORY.md {} B, {} daily notes ({} B), 50 entries ({} B file, {} B rendered); prompt {} B",
        soul.len(),
        memory.len(),
        RECENT_DAYS,
        daily.len(),
        std::fs::metadata(root.join("memory/entries.jsonl")).unwrap().len(),
        entries.len(),
        pure.len()
    );

    let mut build_ns = Vec::with_capacity(iters);
    let mut host_ns = Vec::with_capacity(iters);
    let mut entries_ns = Vec::with_capacity(iters);
    for i in 0..WARMUP + iters {
        let t = Instant::now();
        black_box(prompt::build(black_box(&inputs), &Bounds::default()));
        let a = t.elapsed().as_nanos() as u64;
        let t = Instant::now();
        black_box(memory::system_prompt(black_box(&ws), &cfg, &registry, &tz, now, "cli", "local"));
        let b = t.elapsed().as_nanos() as u64;
        // The part of the host path that handles the entries.
        let t = Instant::now();
        black_box(memory::recent_entries(black_box(&ws), bounds.entries));
        let c = t.elapsed().as_nanos() as u64;
        if i >= WARMUP {
            build_ns.push(a);
            host_ns.push(b);
            entries_ns.push(c);
        }
    }
    println!("\n{iters} builds per row after {WARMUP} warm-up builds; microseconds");
    println!("{:<46} {:>8} {:>8} {:>8} {:>8}", "", "p50", "p90", "p99", "max");
    let mut p50s = Vec::new();
    for (name, v) in [
        ("prompt::build (in memory)", &mut build_ns),
        ("host path (read files + build)", &mut host_ns),
        ("  of which memory::recent_entries", &mut entries_ns),
    ] {
        v.sort_unstable();
        let us = |n: u64| n as f64 / 1000.0;
        p50s.push(quantile(v, 0.5));
        println!(
            "{:<46} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            name,
            us(quantile(v, 0.5)),
            us(quantile(v, 0.9)),
            us(quantile(v, 0.99)),
            us(*v.last().unwrap())
        );
    }
    let verdict = |ns: u64| if ns < 100_000 { "PASS" } else { "FAIL" };
    println!("target: p50 < 100 µs: prompt::build {}, host path {}", verdict(p50s[0]), verdict(p50s[1]));
}
