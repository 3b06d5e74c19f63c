//! MCP client figures (docs/BENCHMARKS.md, "MCP client"): the round trip of a `tools/call`
//! over stdio against the fixture server written with the official Python SDK, next to the
//! same server's own handling time as it reports it; calls per second over one connection
//! (sequential and 8 in flight); Chela's memory per connected stdio server.
//!
//! Run: `cargo bench -p chela --bench mcp` (installs the peers under target/ on first run).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chela::mcp::client::conn::{Conn, Spawn};
use chela::mcp::client::wire;
use serde_json::json;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4
}

fn spawn(args: Vec<String>, command: String) -> Arc<Conn> {
    Conn::spawn(&Spawn { server: "bench".into(), command, args, env: Vec::new(), cwd: None }).expect("spawn")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let python = chela_testkit::peers::mcp_python();
    let fixture = repo().join("tests/mcp/fixtures/server.py").display().to_string();
    let long = Duration::from_secs(60);

    let conn = spawn(vec![fixture.clone(), "--era".into(), "dual".into()], python.clone());
    let (m, p) = wire::discover();
    conn.request(m, p, long).await.expect("discover");
    let call =
        |text: &str| wire::params(Some(&wire::Era::Modern), json!({"name": "timed_echo", "arguments": {"text": text}}));
    // Warm up (imports, caches).
    for _ in 0..50 {
        conn.request("tools/call", call("w"), long).await.expect("call");
    }
    let n = 500;
    let mut rtt = Vec::with_capacity(n);
    let mut own = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = conn.request("tools/call", call("x"), long).await.expect("call");
        rtt.push(t.elapsed().as_secs_f64() * 1e6);
        let us: f64 = r["structuredContent"]["handler_us"].as_f64().unwrap_or(f64::NAN);
        own.push(us);
    }
    rtt.sort_by(f64::total_cmp);
    own.sort_by(f64::total_cmp);
    let p = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q) as usize];
    println!("tools/call round trip over stdio (Python SDK fixture, {n} calls):");
    println!("  chela-measured round trip   p50 {:>7.0} us   p99 {:>7.0} us", p(&rtt, 0.5), p(&rtt, 0.99));
    println!("  server's own time (handler) p50 {:>7.0} us   p99 {:>7.0} us", p(&own, 0.5), p(&own, 0.99));

    let t = Instant::now();
    let mut done = 0u32;
    while t.elapsed() < Duration::from_secs(3) {
        conn.request("tools/call", call("s"), long).await.expect("call");
        done += 1;
    }
    println!("  sequential: {:.0} calls/s", f64::from(done) / t.elapsed().as_secs_f64());
    let t2 = Instant::now();
    let mut done = 0u32;
    while t2.elapsed() < Duration::from_secs(3) {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let c = Arc::clone(&conn);
            let params = call("c");
            set.spawn(async move { c.request("tools/call", params, Duration::from_secs(60)).await.map(drop) });
        }
        while let Some(r) = set.join_next().await {
            r.expect("join").expect("call");
            done += 1;
        }
    }
    println!("  8 in flight: {:.0} calls/s", f64::from(done) / t2.elapsed().as_secs_f64());
    conn.shutdown(Duration::from_secs(1)).await;

    // Memory: Chela's side of 16 connected stdio servers (the tasks, pipes and buffers), the
    // servers themselves not counted. The peer is the stdlib-only bad peer in its quiet mode.
    let peer = repo().join("tests/mcp/fixtures/bad_peer.py").display().to_string();
    let before = rss_kib();
    let mut conns = Vec::new();
    for _ in 0..16 {
        let c = spawn(vec![peer.clone(), "silent".into()], "python3".into());
        let (m, p) = wire::initialize();
        c.request(m, p, long).await.expect("initialize");
        c.request("tools/list", json!({}), long).await.expect("list");
        conns.push(c);
    }
    let after = rss_kib();
    println!(
        "memory: {} KiB RSS for 16 connected stdio servers: {:.0} KiB each (Chela's side)",
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / 16.0
    );
    for c in conns {
        c.shutdown(Duration::from_secs(1)).await;
    }
}
