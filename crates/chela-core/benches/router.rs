//! Event-router throughput: events matched against 100 rules per second, on one core.
//!
//! Four rule sets of 100 rules each (built by the functions below, loaded from `rules.json`
//! text through `Router::load`, as the host does):
//! - *mixed*: 20 event types, 5 rules each, half with a text pattern, half with a guard;
//! - *chat*: 100 rules on `message` with `prefix`/`contains` text patterns, chat messages of
//!   6 to 14 words;
//! - *guarded*: the worst case we size for: 100 rules on the same type (`sensor`), each with
//!   two guards (`temp gt N`, `room eq "roomK"`), events with 8 fields; some rules fire;
//! - *guarded-all*: 100 rules on `sensor` whose two number guards hold and whose string guard
//!   (`contains`, which the router tries last) fails, all constants distinct, so every guard of
//!   every rule is evaluated for every event and nothing fires.
//!
//! The figure is events per second of the thread's own CPU time (`/proc/thread-self/schedstat`;
//! the machine is shared, so wall time counts other people's work), the median of 5 rounds;
//! each round runs `CHELA_BENCH_ITERS` events (default 1,000,000) from a pool of 1,024
//! pre-built events. The plan of each event (the fired rules' bound actions) is built and
//! dropped inside the timed loop.
//!
//! Run: `cargo bench -p chela-core --bench router` (`CHELA_BENCH_ONLY=guarded` runs one rule set).

use std::hint::black_box;
use std::time::Instant;

use chela_core::router::{Event, Router, Value};
use serde_json::{Value as Json, json};

const TARGET: f64 = 1_000_000.0;
const ROUNDS: usize = 5;
const WORDS: [&str; 16] = [
    "lamp", "door", "rain", "tea", "remind", "status", "kitchen", "garden", "music", "stop", "hello", "weather",
    "timer", "light", "open", "close",
];

/// A fixed-seed generator, so two runs measure the same events.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len() as u64) as usize]
    }
}

fn send(text: &str) -> Json {
    json!([{"type": "send", "text": text}])
}

fn mixed() -> (Vec<Json>, Vec<Event>) {
    let mut rng = Rng(1);
    let rules = (0..100)
        .map(|i| {
            let kind = format!("type{}", i % 20);
            if i % 2 == 0 {
                json!({"id": format!("m{i}"), "match": {"type": kind, "text": {"prefix": rng.word()}}, "actions": send("{{event.text}}")})
            } else {
                json!({"id": format!("m{i}"), "match": {"type": kind}, "only_if": [{"field": "level", "op": "gt", "value": rng.below(100)}], "actions": send("level {{event.level}}")})
            }
        })
        .collect();
    let events = (0..1024)
        .map(|i| {
            Event::new(&format!("type{}", i % 23))
                .unwrap()
                .with_source("gpio")
                .unwrap()
                .with_text(&format!("{} {}", rng.word(), rng.word()))
                .unwrap()
                .with("level", Value::Int(rng.below(100) as i64))
                .unwrap()
        })
        .collect();
    (rules, events)
}

fn chat() -> (Vec<Json>, Vec<Event>) {
    let mut rng = Rng(2);
    let rules = (0..100)
        .map(|i| {
            let pat = if i % 2 == 0 {
                json!({"prefix": format!("/{}", rng.word())})
            } else {
                json!({"contains": format!("{} {}", rng.word(), rng.word())})
            };
            json!({"id": format!("c{i}"), "match": {"type": "message", "channel": "telegram", "text": pat}, "actions": send("{{event.text}}")})
        })
        .collect();
    let events = (0..1024)
        .map(|i| {
            let n = 6 + rng.below(9) as usize;
            let mut text = if i % 8 == 0 { format!("/{}", rng.word()) } else { String::new() };
            for _ in 0..n {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(rng.word());
            }
            Event::new("message")
                .unwrap()
                .with_source("telegram")
                .unwrap()
                .with_chat("telegram", "123456789")
                .unwrap()
                .with_text(&text)
                .unwrap()
        })
        .collect();
    (rules, events)
}

fn sensor(rng: &mut Rng) -> Event {
    Event::new("sensor")
        .unwrap()
        .with_source("aht20")
        .unwrap()
        .with("device", Value::Str("esp32c3-1".into()))
        .unwrap()
        .with("seq", Value::Int(rng.below(1 << 20) as i64))
        .unwrap()
        .with("hum", Value::Float(30.0 + rng.below(400) as f64 / 10.0))
        .unwrap()
        .with("ok", Value::Bool(true))
        .unwrap()
        .with("note", Value::Str("periodic".into()))
        .unwrap()
        .with("battery", Value::Int(rng.below(100) as i64))
        .unwrap()
        .with("room", Value::Str(format!("room{}", rng.below(10))))
        .unwrap()
        .with("temp", Value::Int(rng.below(130) as i64))
        .unwrap()
}

fn guarded() -> (Vec<Json>, Vec<Event>) {
    let mut rng = Rng(3);
    let rules = (0..100)
        .map(|i| {
            json!({"id": format!("g{i}"), "match": {"type": "sensor"}, "only_if": [
                {"field": "temp", "op": "gt", "value": 20 + i},
                {"field": "room", "op": "eq", "value": format!("room{}", i % 10)}
            ], "actions": send("{{event.room}} is at {{event.temp}}")})
        })
        .collect();
    (rules, (0..1024).map(|_| sensor(&mut rng)).collect())
}

fn guarded_all() -> (Vec<Json>, Vec<Event>) {
    let mut rng = Rng(4);
    // Every constant differs from rule to rule (nothing a cache of guard results could share),
    // and the failing guard is a string test, which the router orders last: every guard of
    // every rule runs.
    let rules = (0..100)
        .map(|i| {
            json!({"id": format!("a{i}"), "match": {"type": "sensor"}, "only_if": [
                {"field": "temp", "op": "ge", "value": -i},
                {"field": "battery", "op": "ge", "value": -i},
                {"field": "note", "op": "contains", "value": format!("z{i}")}
            ], "actions": send("{{event.note}}")})
        })
        .collect();
    (rules, (0..1024).map(|_| sensor(&mut rng)).collect())
}

fn cpu_nanos() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let n = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000usize);
    println!("router: 100 rules, {n} events per round, median of {ROUNDS} rounds, one thread");
    println!("{:>12} {:>14} {:>14} {:>10} {:>10}", "rules", "cpu Mev/s", "wall Mev/s", "ns/event", "fired/ev");
    let only = std::env::var("CHELA_BENCH_ONLY").ok();
    let mask: usize = std::env::var("CHELA_BENCH_POOL").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(1024) - 1;
    let mut pass = true;
    for (name, build) in [
        ("mixed", mixed as fn() -> (Vec<Json>, Vec<Event>)),
        ("chat", chat),
        ("guarded", guarded),
        ("guarded-all", guarded_all),
    ] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let (rules, events) = build();
        let text = serde_json::to_string_pretty(&json!({ "rules": rules })).unwrap();
        let loaded = Router::load(&text);
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let mut router = loaded.router;
        assert_eq!(router.len(), 100);
        // Warm-up, and the count of rules fired per event.
        let mut fired = 0usize;
        for (i, e) in events.iter().enumerate() {
            fired += router.handle_event(e, i as u64).fired.len();
        }
        let mut rounds = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let (c0, w0) = (cpu_nanos(), Instant::now());
            for i in 0..n {
                let plan = router.handle_event(black_box(&events[i & mask]), i as u64);
                black_box(&plan);
            }
            let wall = w0.elapsed().as_nanos() as f64;
            let cpu = (cpu_nanos() - c0) as f64;
            rounds.push((if cpu > 0.0 { cpu } else { wall }, wall));
        }
        rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (cpu, wall) = rounds[ROUNDS / 2];
        let rate = n as f64 / cpu * 1e9;
        pass &= rate >= TARGET;
        println!(
            "{name:>12} {:>14.2} {:>14.2} {:>10.0} {:>10.2}",
            rate / 1e6,
            n as f64 / wall * 1e3,
            cpu / n as f64,
            fired as f64 / events.len() as f64
        );
    }
    // The yardstick: 300 integer comparisons against distinct constants, read from a table like
    // guards are, per event: what guarded-all cannot do less than. It measures the machine.
    let table: Vec<(i64, u8)> = (0..300).map(|i| (-(i as i64), (i % 3) as u8)).collect();
    let values: Vec<[i64; 3]> = (0..1024).map(|i| [i, i * 7 % 100, -1]).collect();
    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let c0 = cpu_nanos();
        let mut hits = 0u64;
        for i in 0..n {
            let v = black_box(&values[i & mask]);
            for &(k, slot) in black_box(&table) {
                hits += u64::from(v[usize::from(slot)] >= k);
            }
        }
        black_box(hits);
        rounds.push((cpu_nanos() - c0) as f64);
    }
    rounds.sort_by(f64::total_cmp);
    println!(
        "{:>12} {:>14.2} {:>14} {:>10.0}",
        "floor",
        n as f64 / rounds[ROUNDS / 2] * 1e3,
        "-",
        rounds[ROUNDS / 2] / n as f64
    );
    println!("target: >= 1,000,000 events/s on every rule set: {}", if pass { "PASS" } else { "FAIL" });
}
