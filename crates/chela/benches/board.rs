//! `sensor_read` through the tool path on the simulated board: the registry's authorisation,
//! argument parsing, the blocking pool hop, the board host's lock, the real driver talking the
//! sensor's register protocol to the simulated I2C bus (virtual waits, CRC-8 checked), the
//! reading as JSON and its `sensor.reading` event. The same for `led_set` (the ws2812-spi
//! encoding decoded back by the simulated data line).
//!
//! Run: `cargo bench -p chela --bench board` (`CHELA_BENCH_ITERS=N` to change the count).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::time::Instant;

use chela::ManualCalls;

fn main() {
    let iters: usize = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(5_000);
    let dir = tempfile::tempdir().unwrap();
    let calls = ManualCalls::load(&dir.path().join("ws")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    println!("board bench: {iters} calls each, built-in simulated board, tool path (ManualCalls)");
    for (tool, args) in [
        ("sensor_read", r#"{"device":"climate"}"#),
        ("sensor_read", r#"{"device":"light"}"#),
        ("sensor_read", r#"{"device":"air"}"#),
        ("led_set", r##"{"device":"strip","color":"#ff8000","brightness":60}"##),
    ] {
        let mut times = Vec::with_capacity(iters);
        rt.block_on(async {
            for _ in 0..iters / 10 {
                calls.call(tool, args).await.unwrap();
            }
            for _ in 0..iters {
                let t = Instant::now();
                let out = calls.call(tool, args).await.unwrap();
                times.push(t.elapsed());
                std::hint::black_box(out);
            }
        });
        times.sort();
        let median = times[times.len() / 2];
        let p99 = times[times.len() * 99 / 100];
        println!("{tool:<12} {args:<58} median {:>7.1} µs   p99 {:>7.1} µs", micros(median), micros(p99));
    }
}

fn micros(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
