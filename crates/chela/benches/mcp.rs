//! MCP client figures (docs/BENCHMARKS.md, "MCP client"): the round trip of a `tools/call`
//! over stdio against the fixture server written with the official Python SDK, next to the
//! same server's own handling time as it reports it; calls per second over one connection
//! (sequential and 8 in flight); Chela's memory per connected stdio server.
//!
//! Transports (docs/BENCHMARKS.md, "MCP: release figures"): the same fixture server reached by
//! Chela's client over stdio and over Streamable HTTP (the fixture's `--http` mode), calls
//! interleaved; what each transport adds beyond the handler's own time, p50/p99, and the ratio.
//!
//! Server figures (docs/BENCHMARKS.md, "MCP server"): a cheap `tools/call` (memory_list)
//! through the real `chela mcp serve` over stdio and the real `chela run`'s `/mcp` over one
//! keep-alive HTTP connection: round trip and calls per second.
//!
//! Run: `cargo bench -p chela --bench mcp` (installs the peers under target/ on first run).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chela::mcp::client::conn::{Conn, Spawn};
use chela::mcp::client::http::{HttpConn, Remote};
use chela::mcp::client::wire;
use chela::net::{ClientOptions, HttpClient};
use serde_json::json;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4
}

/// Bytes malloc has handed out and not taken back (glibc's `mallinfo2`: every arena, mmapped
/// chunks included).
fn malloc_in_use() -> i64 {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    #[allow(unsafe_code)]
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as i64
}

fn spawn(args: Vec<String>, command: String) -> Arc<Conn> {
    Conn::spawn(&Spawn { server: "bench".into(), command, args, env: Vec::new(), cwd: None }).expect("spawn")
}

/// A workspace for the server figures: the fake LLM named as the model (no turn runs).
fn serve_workspace(llm: &chela_testkit::FakeLlm) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let config = dir.path().join("chela.toml");
    let text = format!(
        "[llm]\nprovider = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"sk-ant-bench\"\n",
        llm.anthropic_base_url()
    );
    std::fs::write(&config, text).expect("config");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    dir
}

fn chela(ws: &std::path::Path, home: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_chela"));
    c.args(args).env_clear().env("HOME", home).env("CHELA_HOME", ws).env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0");
    c.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    c
}

/// The `q` quantile of sorted values.
fn pct(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// The fixture's own handler time from a `timed_echo` result.
fn handler_us(result: &serde_json::Value) -> f64 {
    result["structuredContent"]["handler_us"].as_f64().expect("timed_echo reports handler_us")
}

/// Prints the round trip's p50/p99 and the rate; returns (p50, p99).
fn report(what: &str, mut rtt: Vec<f64>, per_sec: f64) -> (f64, f64) {
    rtt.sort_by(f64::total_cmp);
    let (p50, p99) = (pct(&rtt, 0.5), pct(&rtt, 0.99));
    println!("  {what:<28} p50 {p50:>6.0} us   p99 {p99:>6.0} us   {per_sec:>6.0} calls/s");
    (p50, p99)
}

/// The same server over both transports: the Python SDK fixture (2026-07-28 era offered) once
/// as a child on stdio and once serving Streamable HTTP on a loopback port, both reached
/// through Chela's client. Calls alternate between the two (which goes first alternates too),
/// so the machine's load falls on both alike. Added = Chela's round trip − the handler's time.
async fn transport_figures(python: &str, fixture: &str) {
    const N: usize = 1000;
    let long = Duration::from_secs(60);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("its address").port()
    };
    let _server = tokio::process::Command::new(python)
        .args([fixture, "--era", "dual", "--http", &port.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the fixture over HTTP");
    // Python imports its SDK for seconds on a busy machine: wait (bounded) until it listens.
    let deadline = Instant::now() + Duration::from_secs(120);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "the fixture did not listen on {port}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let remote = Remote { server: "bench-http".into(), url: format!("http://127.0.0.1:{port}/mcp"), headers: vec![] };
    let http = HttpConn::new(remote, HttpClient::new(ClientOptions::default()));
    let http_era = http.open(None, long).await.expect("open the HTTP fixture");
    let stdio = spawn(vec![fixture.to_owned(), "--era".into(), "dual".into()], python.to_owned());
    let (m, p) = wire::discover();
    stdio.request(m, p, long).await.expect("discover");
    let stdio_era = wire::Era::Modern;
    let args = json!({"name": "timed_echo", "arguments": {"text": "x"}});
    for _ in 0..50 {
        stdio.request("tools/call", wire::params(Some(&stdio_era), args.clone()), long).await.expect("call");
        http.request("tools/call", wire::params(Some(&http_era), args.clone()), long).await.expect("call");
    }
    let (mut s_rtt, mut s_add, mut h_rtt, mut h_add) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..N {
        for k in 0..2 {
            let t = Instant::now();
            if (i + k) % 2 == 0 {
                let r = stdio.request("tools/call", wire::params(Some(&stdio_era), args.clone()), long).await;
                let took = t.elapsed().as_secs_f64() * 1e6;
                s_rtt.push(took);
                s_add.push(took - handler_us(&r.expect("stdio call")));
            } else {
                let r = http.request("tools/call", wire::params(Some(&http_era), args.clone()), long).await;
                let took = t.elapsed().as_secs_f64() * 1e6;
                h_rtt.push(took);
                h_add.push(took - handler_us(&r.expect("HTTP call")));
            }
        }
    }
    for v in [&mut s_rtt, &mut s_add, &mut h_rtt, &mut h_add] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "one server, two transports (Python SDK fixture, timed_echo, {N} calls each, interleaved; stdio era {}, HTTP era {}):",
        stdio_era.label(),
        http_era.label()
    );
    println!(
        "  stdio            round trip p50 {:>6.0} us p99 {:>7.0} us   added p50 {:>6.0} us p99 {:>7.0} us",
        pct(&s_rtt, 0.5),
        pct(&s_rtt, 0.99),
        pct(&s_add, 0.5),
        pct(&s_add, 0.99)
    );
    println!(
        "  Streamable HTTP  round trip p50 {:>6.0} us p99 {:>7.0} us   added p50 {:>6.0} us p99 {:>7.0} us",
        pct(&h_rtt, 0.5),
        pct(&h_rtt, 0.99),
        pct(&h_add, 0.5),
        pct(&h_add, 0.99)
    );
    println!(
        "  added, HTTP / stdio: p50 {:.2}x   p99 {:.2}x",
        pct(&h_add, 0.5) / pct(&s_add, 0.5),
        pct(&h_add, 0.99) / pct(&s_add, 0.99)
    );
    stdio.shutdown(Duration::from_secs(1)).await;
    http.shutdown().await;
}

/// `tools/call memory_list` through `chela mcp serve` (stdio) and `/mcp` (HTTP), sequential
/// on one connection: the round trip as the client sees it, and calls per second.
fn serve_figures() {
    use std::io::{BufRead, BufReader, Read, Write};
    const N: usize = 2000;
    let llm = chela_testkit::FakeLlm::start(vec![]);
    let ws = serve_workspace(&llm);
    let home = tempfile::tempdir().expect("tempdir");
    println!("chela as an MCP server: tools/call memory_list, {N} sequential calls on one connection:");

    let mut child = chela(ws.path(), home.path(), &["mcp", "serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chela mcp serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let mut ask = |msg: &serde_json::Value| {
        writeln!(stdin, "{msg}").expect("write");
        line.clear();
        stdout.read_line(&mut line).expect("read");
        assert!(!line.contains("\"error\""), "{line}");
    };
    ask(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}));
    let call = |i: usize| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "memory_list", "arguments": {}}});
    for i in 0..200 {
        ask(&call(i));
    }
    let mut rtt = Vec::with_capacity(N);
    let started = Instant::now();
    for i in 0..N {
        let t = Instant::now();
        ask(&call(i));
        rtt.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let stdio = report("stdio (chela mcp serve)", rtt, N as f64 / started.elapsed().as_secs_f64());
    drop(stdin);
    let _ = child.wait();

    let mut run = chela(ws.path(), home.path(), &["run"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("chela run");
    let stderr = BufReader::new(run.stderr.take().expect("stderr"));
    let mut addr = String::new();
    for l in stderr.lines().map_while(Result::ok) {
        if let Some(rest) = l.split("listens on http://").nth(1) {
            addr = rest.trim().to_owned();
            break;
        }
    }
    assert!(!addr.is_empty(), "the gateway's address");
    let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
    conn.set_nodelay(true).expect("nodelay");
    let mut buf = vec![0u8; 64 * 1024];
    let mut post = |msg: &serde_json::Value, sid: &str| -> String {
        let body = msg.to_string();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {sid}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(head.as_bytes()).expect("write");
        // One response: its head, then Content-Length bytes.
        let mut got = Vec::new();
        loop {
            let n = conn.read(&mut buf).expect("read");
            assert!(n > 0, "the connection closed");
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if rest.len() >= len {
                    return head.to_owned();
                }
            }
        }
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}});
    let head = post(&init, "none");
    let sid = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("mcp-session-id:").map(|v| v.trim().to_owned()))
        .expect("a session id");
    for i in 0..200 {
        post(&call(i), &sid);
    }
    let mut rtt = Vec::with_capacity(N);
    let started = Instant::now();
    for i in 0..N {
        let t = Instant::now();
        let head = post(&call(i), &sid);
        rtt.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    let http = report("HTTP /mcp (chela run)", rtt, N as f64 / started.elapsed().as_secs_f64());
    println!("  round trip, HTTP / stdio: p50 {:.2}x   p99 {:.2}x", http.0 / stdio.0, http.1 / stdio.1);
    let _ = run.kill();
    let _ = run.wait();
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
    let mut added = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = conn.request("tools/call", call("x"), long).await.expect("call");
        let took = t.elapsed().as_secs_f64() * 1e6;
        let us = handler_us(&r);
        rtt.push(took);
        own.push(us);
        added.push(took - us);
    }
    for v in [&mut rtt, &mut own, &mut added] {
        v.sort_by(f64::total_cmp);
    }
    println!("tools/call round trip over stdio (Python SDK fixture, {n} calls):");
    println!("  chela-measured round trip   p50 {:>7.0} us   p99 {:>7.0} us", pct(&rtt, 0.5), pct(&rtt, 0.99));
    println!("  server's own time (handler) p50 {:>7.0} us   p99 {:>7.0} us", pct(&own, 0.5), pct(&own, 0.99));
    println!("  added (round trip - handler) p50 {:>6.0} us   p99 {:>7.0} us", pct(&added, 0.5), pct(&added, 0.99));

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
    transport_figures(&python, &fixture).await;

    // Memory: Chela's side of 16 connected stdio servers (the tasks, pipes and buffers), the
    // servers themselves not counted. The peer is the stdlib-only bad peer in its quiet mode.
    let peer = repo().join("tests/mcp/fixtures/bad_peer.py").display().to_string();
    let before = rss_kib();
    let heap_before = malloc_in_use();
    let mut conns = Vec::new();
    for _ in 0..16 {
        let c = spawn(vec![peer.clone(), "silent".into()], "python3".into());
        let (m, p) = wire::initialize();
        c.request(m, p, long).await.expect("initialize");
        c.request("tools/list", json!({}), long).await.expect("list");
        conns.push(c);
    }
    let after = rss_kib();
    let heap = malloc_in_use() - heap_before;
    println!(
        "memory: {} KiB RSS for 16 connected stdio servers: {:.0} KiB each (Chela's side); malloc in use {:.1} KiB each",
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / 16.0,
        heap as f64 / 16.0 / 1024.0
    );
    for c in conns {
        c.shutdown(Duration::from_secs(1)).await;
    }
    serve_figures();
}
