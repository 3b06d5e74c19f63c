//! Lua scripts: what a `lua_run` costs.
//!
//! Rows (median and p99 of interleaved iterations, in µs):
//! - `first instruction` — from the start of a run (a prepared state taken from the pool, on a
//!   blocking-pool thread) to the moment its chunk is called;
//! - `trivial run, total` — the same run until its outcome is back on the async side;
//! - `lua_run tool call` — `lua_run {code}` through the registry as the model calls it
//!   (argument parsing, authorisation, the run, the JSON reply);
//! - `cap.call round trip` — one `cap.call("get_current_time", "{}")` from inside a script: the
//!   median run of a script making 2,000 calls minus the median run of the same script making
//!   none, divided by 2,000 (no p99: a difference of medians has none).
//!
//! Run: `cargo bench -p chela --bench lua` (`CHELA_BENCH_ITERS=N` to change the count).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::time::Duration;

use chela::lua::BenchRig;

const WARMUP: usize = 50;
/// `cap.call`s in the script whose run time is compared with an empty loop.
const CAP_CALLS: usize = 2000;

fn stats(v: &mut [Duration]) -> (f64, f64) {
    v.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(v[v.len() / 2]), us(v[(v.len() * 99 / 100).min(v.len() - 1)]))
}

fn main() {
    let iters: usize = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let rig = BenchRig::load(&dir.path().join("ws")).unwrap();
        let trivial = "function run(args) return 1 end";
        let calls = |n: usize| {
            format!(
                "local cap = require('cap') function run() for i = 1, {n} do local ok, r = cap.call('get_current_time', '{{}}') \
                 assert(ok, r) end return true end"
            )
        };
        let (with_calls, without) = (calls(CAP_CALLS), calls(0));
        let (mut first, mut total, mut tool) = (vec![], vec![], vec![]);
        let (mut t100s, mut t0s) = (vec![], vec![]);
        for i in 0..WARMUP + iters {
            let (out, f, t) = rig.run(trivial).await;
            assert_eq!(out.as_deref(), Ok("1"));
            let start = std::time::Instant::now();
            let reply = rig.call("lua_run", r#"{"code":"function run(a) return a.x end","args":{"x":2}}"#).await;
            let tool_time = start.elapsed();
            assert_eq!(reply.as_deref(), Ok(r#"{"result":2,"output":""}"#));
            if i >= WARMUP {
                first.push(f);
                total.push(t);
                tool.push(tool_time);
            }
            if i % 5 == 0 {
                let (a, _, t100) = rig.run(&with_calls).await;
                let (b, _, t0) = rig.run(&without).await;
                assert_eq!((a.as_deref(), b.as_deref()), (Ok("true"), Ok("true")));
                if i >= WARMUP {
                    t100s.push(t100);
                    t0s.push(t0);
                }
            }
        }
        println!("lua_run, {iters} iterations (median / p99, µs)");
        for (name, v) in [
            ("first instruction", &mut first),
            ("trivial run, total", &mut total),
            ("lua_run tool call", &mut tool),
        ] {
            let (m, p) = stats(v);
            println!("{name:<22} {m:>9.1} {p:>9.1}");
        }
        let ((with, _), (without, _)) = (stats(&mut t100s), stats(&mut t0s));
        println!("{:<22} {:>9.1}", "cap.call round trip", (with - without) / CAP_CALLS as f64);
    });
}
