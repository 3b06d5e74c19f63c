//! The cost of one next-fire computation: a cron expression in Europe/Berlin
//! (the zone read from the system's tz database) and an interval, from instants spread over
//! 2026–2036, so some searches cross DST changes, month ends and leap days.
//!
//! Each row times batches of 1,000 calls and reports the median and p90 batch divided by 1,000
//! (wall clock, one thread), and the thread's CPU time per call over all batches (`-` when the
//! row took under 20 ms of CPU in all, too little for the kernel's per-thread counter).
//!
//! Run: `cargo bench -p chela-core --bench automation` (`CHELA_BENCH_ITERS=N` batches per row;
//! needs Debian `tzdata`).

mod common;

use std::hint::black_box;
use std::time::Instant;

use chela_core::schedule::{Cron, Schedule};
use chela_core::zone::{DateTime, Zone};

const BATCH: usize = 1_000;

/// One row: its label and the computation, from a start instant.
type Row<'a> = (&'static str, Box<dyn Fn(i64) -> Option<i64> + 'a>);

fn main() {
    let batches = common::iterations(300);
    let bytes = std::fs::read("/usr/share/zoneinfo/Europe/Berlin").expect("tzdata is installed (/usr/share/zoneinfo)");
    let berlin = Zone::from_tzif("Europe/Berlin", &bytes).unwrap();
    let start = DateTime::new(2026, 1, 1, 0, 0, 0).unwrap().to_seconds();
    let span = DateTime::new(2036, 1, 1, 0, 0, 0).unwrap().to_seconds() - start;
    let mut rng = common::Rng::new(7);
    let nows: Vec<i64> = (0..BATCH).map(|_| start + (rng.below(span as usize)) as i64).collect();

    let weekday_morning = Cron::parse("0 8 * * 1-5").unwrap();
    let night = Cron::parse("30 2 * * *").unwrap();
    let month_end = Cron::parse("0 0 28-31 * *").unwrap();
    let quarter_hour = Cron::parse("*/15 * * * *").unwrap();
    let interval = Schedule::Interval { every: 300, anchor: 0 };
    let rows: Vec<Row<'_>> = vec![
        ("cron `0 8 * * 1-5`, Europe/Berlin", Box::new(|t| weekday_morning.next_fire(t, &berlin))),
        ("cron `30 2 * * *` (DST hour), Europe/Berlin", Box::new(|t| night.next_fire(t, &berlin))),
        ("cron `0 0 28-31 * *`, Europe/Berlin", Box::new(|t| month_end.next_fire(t, &berlin))),
        ("cron `*/15 * * * *`, Europe/Berlin", Box::new(|t| quarter_hour.next_fire(t, &berlin))),
        ("interval every 300 s", Box::new(|t| interval.next_after(t, &berlin))),
        ("zone offset lookup, Europe/Berlin", Box::new(|t| Some(i64::from(berlin.offset_at(t))))),
    ];

    println!("next-fire: {batches} batches of {BATCH} calls per row, start instants spread over 2026-2036");
    println!("{:<46} {:>10} {:>10} {:>12}", "computation", "p50 ns", "p90 ns", "cpu ns/call");
    for (name, f) in &rows {
        for &t in &nows {
            black_box(f(t));
        }
        let mut per_batch = Vec::with_capacity(batches);
        let cpu0 = cpu_nanos();
        for _ in 0..batches {
            let t0 = Instant::now();
            for &t in &nows {
                black_box(f(black_box(t)));
            }
            per_batch.push(t0.elapsed().as_nanos() as u64);
        }
        let cpu_total = cpu_nanos().saturating_sub(cpu0);
        // The kernel's per-thread figure moves in scheduler ticks: below 20 ms it means little.
        let cpu = if cpu_total < 20_000_000 {
            String::from("-")
        } else {
            format!("{:.0}", cpu_total as f64 / (batches * BATCH) as f64)
        };
        per_batch.sort_unstable();
        let ns = |q| common::quantile(&per_batch, q) as f64 / BATCH as f64;
        println!("{name:<46} {:>10.0} {:>10.0} {cpu:>12}", ns(0.5), ns(0.9));
    }

    // Setup costs, once per job or zone load rather than per fire.
    let mut per = Vec::new();
    for _ in 0..batches.min(100) {
        let t0 = Instant::now();
        for _ in 0..100 {
            black_box(Zone::from_tzif("Europe/Berlin", black_box(&bytes)).unwrap());
        }
        per.push(t0.elapsed().as_nanos() as u64 / 100);
    }
    per.sort_unstable();
    println!("{:<46} {:>10}", "load Europe/Berlin TZif (p50 ns)", common::quantile(&per, 0.5));
    per.clear();
    for _ in 0..batches.min(100) {
        let t0 = Instant::now();
        for _ in 0..100 {
            black_box(Cron::parse(black_box("0,30 8-18/2 * JAN-NOV MON-FRI")).unwrap());
        }
        per.push(t0.elapsed().as_nanos() as u64 / 100);
    }
    per.sort_unstable();
    println!("{:<46} {:>10}", "parse a cron expression (p50 ns)", common::quantile(&per, 0.5));
}

/// This thread's time on a CPU so far, in nanoseconds, from `/proc/thread-self/schedstat`
/// (Linux; 0 where it is missing, and then only the wall-clock columns mean anything).
fn cpu_nanos() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
