//! Skills: what the cache saves, and what the summary costs in every request.
//!
//! Measured interleaved, on a workspace whose `skills/` holds 50 skills with descriptions of
//! Agent Skills length and bodies of about 3 KiB (files in the page cache, as for every turn but
//! the first):
//! - `Skills::lookup` of a workspace skill with the cache warm: the sandboxed stat of the folder
//!   and the file, the (mtime, size) check, a clone of an `Arc`;
//! - the same lookup with its cache entry dropped first: the stat, the sandboxed open and read,
//!   `chela_core::skills::parse`;
//! - `chela_core::skills::parse` alone on text already in memory;
//! - `Skills::for_session`, what each turn does: list `skills/`, look up all 50 (cache warm),
//!   read the conversation's active list, build the summary (a tenth as many runs).
//!
//! Then the request bytes the skills part of the system prompt adds (JSON-escaped, as it goes
//! into the request body) with 10 and 50 skills, at the default `skills.summary_budget` and
//! with no budget, and what one active skill adds on top.
//!
//! Run: `cargo bench -p chela --bench skills` (`CHELA_BENCH_ITERS=N` to change the count).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use chela::config::Config;
use chela::skills::{SessionRef, Skills};
use chela::workspace::Workspace;

const WARMUP: usize = 1_000;

fn skill_md(i: usize) -> String {
    let name = format!("skill-{i:02}");
    let mut body = format!("# {name}\n\n");
    while body.len() < 3000 {
        body.push_str("- Read the user's file first, then say what you will change and change only that part.\n");
    }
    format!(
        "---\nname: {name}\ndescription: Fill in, check and convert documents of kind {i} when the user sends one or asks how to prepare it.\nlicense: Apache-2.0\n---\n{body}"
    )
}

fn workspace(root: &Path, n: usize) -> (Workspace, Config) {
    for i in 0..n {
        let dir = root.join("skills").join(format!("skill-{i:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), skill_md(i)).unwrap();
    }
    let ws = Workspace::locate(Some(root.to_owned())).unwrap();
    ws.ensure().unwrap();
    let cfg = Config::load(&ws).unwrap();
    (ws, cfg)
}

fn percentiles(mut v: Vec<f64>) -> [f64; 4] {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    [at(0.5), at(0.9), at(0.99), v[v.len() - 1]]
}

fn main() {
    let iters = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000usize);
    let dir = tempfile::tempdir().unwrap();
    let (ws, cfg) = workspace(dir.path(), 50);
    let skills = Skills::new(&cfg);
    let name = "skill-25";
    let text = skill_md(25);
    let max = 32 * 1024;

    for _ in 0..WARMUP {
        black_box(skills.lookup(&ws, &cfg, name).unwrap());
        skills.invalidate(name);
        black_box(skills.lookup(&ws, &cfg, name).unwrap());
        black_box(chela_core::skills::parse(name, &text, max).unwrap());
    }
    for _ in 0..WARMUP / 10 {
        black_box(skills.for_session(&ws, &cfg, "cli", "bench"));
    }
    let (mut cached, mut uncached, mut parse, mut turn) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iters {
        let t = Instant::now();
        black_box(skills.lookup(&ws, &cfg, name).unwrap());
        cached.push(t.elapsed().as_secs_f64() * 1e6);

        skills.invalidate(name);
        let t = Instant::now();
        black_box(skills.lookup(&ws, &cfg, name).unwrap());
        uncached.push(t.elapsed().as_secs_f64() * 1e6);

        let t = Instant::now();
        black_box(chela_core::skills::parse(name, &text, max).unwrap());
        parse.push(t.elapsed().as_secs_f64() * 1e6);

        // A tenth as often: it looks up all 50.
        if turn.len() * 10 < cached.len() {
            let t = Instant::now();
            black_box(skills.for_session(&ws, &cfg, "cli", "bench"));
            turn.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    println!("{iters} lookups per row after {WARMUP} warm-up rounds; microseconds ({} bytes SKILL.md)", text.len());
    println!("{:<44} {:>8} {:>8} {:>8} {:>8}", "", "p50", "p90", "p99", "max");
    for (label, v) in [
        ("lookup, cache warm (stat + stamp check)", cached),
        ("lookup, entry dropped (stat + read + parse)", uncached),
        ("parse alone (text in memory)", parse),
        ("a turn's skills part, 50 skills, cache warm", turn),
    ] {
        let [p50, p90, p99, top] = percentiles(v);
        println!("{label:<44} {p50:>8.2} {p90:>8.2} {p99:>8.2} {top:>8.2}");
    }

    println!("\nrequest bytes added by the skills part of the system prompt (JSON-escaped)");
    println!("{:<8} {:>22} {:>16} {:>22}", "skills", "default budget (2048)", "no budget", "+1 active skill");
    for n in [10, 50] {
        let dir = tempfile::tempdir().unwrap();
        let (ws, cfg) = workspace(dir.path(), n);
        let bytes = |cfg: &Config| {
            let s = Skills::new(cfg).for_session(&ws, cfg, "cli", "bench");
            serde_json::to_string(&s.prompt).unwrap().len()
        };
        let default = bytes(&cfg);
        chela::config::set_override(&ws, "skills.summary_budget", "1000000").unwrap();
        let unbounded = bytes(&Config::load(&ws).unwrap());
        chela::config::unset_override(&ws, "skills.summary_budget").unwrap();
        let s = Skills::new(&cfg);
        s.activate(&ws, &cfg, &SessionRef::new("cli", "bench", Vec::new()), "skill-01").unwrap();
        let active = bytes(&cfg);
        println!("{n:<8} {default:>22} {unbounded:>16} {active:>22}");
    }
}
