//! The daemon's figures: `chela run` with its gateway, against the instant fake LLM on 127.0.0.1.
//!
//! Printed, each beside its target:
//! 1. ready: spawn of `chela run` to the first 200 from `/health` (median of 20 runs);
//! 2. idle RSS after 1 s, with the gateway only and with the gateway and (fake) Telegram;
//! 3. one warm turn through `POST /v1/chat/completions`: wall per request (median, p99) less
//!    the fake's own time for the same request sent to it directly, and the daemon's CPU per
//!    turn (utime + stime from `/proc/PID/stat`);
//! 4. 100 WebSocket chats at once, each sending messages in sequence: turns/s, p50/p99 latency
//!    and the daemon's peak RSS;
//! 5. a soak at a steady 50 turns/s for `$CHELA_SOAK_SECS` (default 10), over ten sessions filled
//!    to their in-memory history bound first: RSS at start and end.
//!
//! Each phase gets a daemon of its own, so a peak RSS belongs to that phase. The fake runs in
//! this process, so its CPU is not the daemon's (but it shares the machine's cores).
//! The workspace sets `agent.compaction = false` (a summary request would be an extra model
//! call in some turns) and `sessions.max_live = 128` (the default, 64, is below 100 chats).
//!
//! Run: `cargo build --profile release-small -p chela && cargo bench -p chela --bench daemon`.
//! The binary is `$CHELA_BIN`, else the first argument, else `target/release-small/chela`
//! (under `$CARGO_TARGET_DIR` when set). `CHELA_BENCH_PHASES=ready,idle` runs only the phases
//! named (`ready`, `idle`, `warm turn`, `websocket`, `soak`).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
// Unsafe only for `libc::sysconf`, to turn /proc's clock ticks into time.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, FakeTelegram, Options, Recorded, Step};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

#[path = "common/release_bin.rs"]
mod release_bin;
use release_bin::chela_bin;

const READY_RUNS: usize = 20;
const WARM_TURNS: usize = 500;
/// Turns per session in the warm-turn phase, so no history grows past a few dozen exchanges.
const TURNS_PER_SESSION: usize = 50;
const WS_CHATS: usize = 100;
const WS_MESSAGES: usize = 20;
const SOAK_RATE: u64 = 50;
const SOAK_SESSIONS: usize = 10;
/// Bytes added to each soak message: 30 of them pass a session's 256 KiB in-memory bound.
const SOAK_PAD: usize = 12 * 1024;
const SOAK_FILL_TURNS: usize = 30;
const ANSWER: &str = "ok, noted.";
const TG_TOKEN: &str = "123456:bench-telegram-token";
/// No phase waits longer than this for anything.
const LIMIT: Duration = Duration::from_secs(30);
/// Largest response body the bench reads.
const MAX_BODY: usize = 8 * 1024 * 1024;

type Res<T> = Result<T, String>;
/// One measured part of the run, against its own daemon.
type Phase = fn(&Path, &FakeLlm) -> Res<()>;

/// A workspace for `chela run` pointed at the fake, and optionally at a fake Telegram.
fn workspace(dir: &Path, llm: &FakeLlm, tg: Option<&FakeTelegram>) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("a workspace folder");
    let mut toml = format!(
        "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\napi_key = \"bench-dummy-key\"\nmodel = \"bench\"\n\
         [agent]\ncompaction = false\n[sessions]\nmax_live = 128\n",
        llm.openai_base_url()
    );
    if let Some(tg) = tg {
        toml.push_str(&format!("[channels.telegram]\ntoken = \"{TG_TOKEN}\"\napi_base = \"{}\"\n", tg.base_url()));
    }
    std::fs::write(home.join("chela.toml"), toml).expect("chela.toml");
    home
}

/// A port nobody listens on now (bound and released), for a daemon whose start is timed
/// without reading its stderr.
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port on 127.0.0.1")
}

/// A running `chela run`, killed when dropped.
struct Daemon {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Daemon {
    fn spawn(bin: &Path, home: &Path) -> Res<Daemon> {
        let addr = free_port();
        let log = home.with_file_name("daemon.log");
        let mut cmd = Command::new(bin);
        cmd.arg("run")
            .env_clear()
            .env("HOME", home)
            .env("CHELA_HOME", home)
            .env("CHELA_GATEWAY__LISTEN", addr.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).map_err(|e| e.to_string())?);
        let child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        Ok(Daemon { child, addr, log })
    }

    /// Polls `/health` until it answers 200; the time from `started`.
    fn wait_ready(&mut self, started: Instant) -> Res<Duration> {
        while started.elapsed() < LIMIT {
            if health(self.addr) {
                return Ok(started.elapsed());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("chela run exited ({status}):\n{}", self.log_text()));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Err(format!("/health did not answer within {LIMIT:?}:\n{}", self.log_text()))
    }

    fn start(bin: &Path, home: &Path) -> Res<Daemon> {
        let started = Instant::now();
        let mut d = Daemon::spawn(bin, home)?;
        d.wait_ready(started)?;
        Ok(d)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `VmRSS` and `VmHWM` in KiB.
    fn rss_kib(&self) -> (u64, u64) {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |k: &str| {
            s.lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// What the resident pages are, from `/proc/PID/smaps_rollup` and `status`: anonymous
    /// (heap, stacks), file-backed (the binary's and the libraries' pages touched so far), and
    /// the number of threads.
    fn rss_parts(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(format!("/proc/{}/{f}", self.pid())).unwrap_or_default();
        let (rollup, status) = (read("smaps_rollup"), read("status"));
        let field = |s: &str, k: &str| -> u64 {
            s.lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        let (rss, anon) = (field(&rollup, "Rss:"), field(&rollup, "Anonymous:"));
        format!(
            "anonymous {:.2} MiB, file-backed {:.2} MiB, {} threads",
            mib(anon),
            mib(rss.saturating_sub(anon)),
            field(&status, "Threads:")
        )
    }

    /// User plus system CPU time of every thread so far.
    fn cpu(&self) -> Duration {
        let s = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // The command name may hold spaces; fields are counted after its closing parenthesis,
        // where field 3 (state) is index 0, so utime (14) and stime (15) are 11 and 12.
        let rest = s.rfind(')').map_or("", |i| &s[i + 1..]);
        let f: Vec<u64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
        let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        // SAFETY: sysconf only reads a constant of the running system.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let hz = u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100);
        Duration::from_nanos(ticks * 1_000_000_000 / hz)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn health(addr: SocketAddr) -> bool {
    let Ok(stream) = TcpStream::connect(addr) else { return false };
    let mut c = Http { addr, conn: Some(BufReader::new(stream)) };
    matches!(c.request("GET", "/health", &[], b""), Ok((200, _)))
}

/// A minimal HTTP/1.1 keep-alive client: enough for the gateway and the fake, bounded.
struct Http {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
}

impl Http {
    fn new(addr: SocketAddr) -> Http {
        Http { addr, conn: None }
    }

    /// Sends one request; a kept-alive connection the server closed meanwhile is opened again once.
    fn request(&mut self, method: &str, path: &str, headers: &[(String, String)], body: &[u8]) -> Res<(u16, Vec<u8>)> {
        let reused = self.conn.is_some();
        match self.try_request(method, path, headers, body) {
            Err(_) if reused => {
                self.conn = None;
                self.try_request(method, path, headers, body)
            }
            r => r,
        }
    }

    fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Res<(u16, Vec<u8>)> {
        if self.conn.is_none() {
            let s = TcpStream::connect(self.addr).map_err(|e| format!("connect {}: {e}", self.addr))?;
            s.set_read_timeout(Some(LIMIT)).map_err(|e| e.to_string())?;
            let _ = s.set_nodelay(true);
            self.conn = Some(BufReader::new(s));
        }
        let conn = self.conn.as_mut().expect("connected above");
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n", self.addr, body.len());
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut msg = head.into_bytes();
        msg.extend_from_slice(body);
        conn.get_mut().write_all(&msg).map_err(|e| e.to_string())?;
        let result = read_response(conn);
        if result.as_ref().is_ok_and(|r| r.2) || result.is_err() {
            self.conn = None;
        }
        result.map(|(status, body, _)| (status, body))
    }
}

/// Reads one response: status, body (by length or chunked), and whether the server closes.
fn read_response(r: &mut BufReader<TcpStream>) -> Res<(u16, Vec<u8>, bool)> {
    let mut line = String::new();
    let line_of = |r: &mut BufReader<TcpStream>, line: &mut String| -> Res<()> {
        line.clear();
        let n = r.by_ref().take(16 * 1024).read_line(line).map_err(|e| e.to_string())?;
        if n == 0 { Err("connection closed".to_owned()) } else { Ok(()) }
    };
    line_of(r, &mut line)?;
    let status: u16 =
        line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(format!("bad status line {line:?}"))?;
    let (mut length, mut chunked, mut close) = (None, false, false);
    for _ in 0..200 {
        line_of(r, &mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let Some((k, v)) = l.split_once(':') else { continue };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
        match k.as_str() {
            "content-length" => length = v.parse::<usize>().ok(),
            "transfer-encoding" => chunked = v.contains("chunked"),
            "connection" => close = v.contains("close"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line_of(r, &mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| format!("bad chunk size {line:?}"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                for _ in 0..200 {
                    line_of(r, &mut line)?;
                    if line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            if body.len() + size > MAX_BODY {
                return Err("response body over the bench's limit".to_owned());
            }
            let start = body.len();
            body.resize(start + size + 2, 0);
            r.read_exact(&mut body[start..]).map_err(|e| e.to_string())?;
            body.truncate(start + size);
        }
    } else if let Some(n) = length {
        if n > MAX_BODY {
            return Err("response body over the bench's limit".to_owned());
        }
        body.resize(n, 0);
        r.read_exact(&mut body).map_err(|e| e.to_string())?;
    } else if status != 204 && status != 304 {
        r.by_ref().take(MAX_BODY as u64).read_to_end(&mut body).map_err(|e| e.to_string())?;
        close = true;
    }
    Ok((status, body, close))
}

fn json_headers() -> Vec<(String, String)> {
    vec![("Content-Type".to_owned(), "application/json".to_owned())]
}

/// One non-streamed turn through the OpenAI endpoint, checked.
fn api_turn(c: &mut Http, user: &str, n: usize) -> Res<()> {
    api_turn_padded(c, user, n, 0)
}

/// A turn whose message carries `pad` bytes more than its number.
fn api_turn_padded(c: &mut Http, user: &str, n: usize, pad: usize) -> Res<()> {
    let content = format!("note {n} {}", "x".repeat(pad));
    let body = json!({"model": "chela", "user": user, "messages": [{"role": "user", "content": content}]});
    let (status, reply) = c.request("POST", "/v1/chat/completions", &json_headers(), body.to_string().as_bytes())?;
    let v: Value = serde_json::from_slice(&reply).unwrap_or(Value::Null);
    if status != 200 || v["choices"][0]["message"]["content"] != ANSWER {
        return Err(format!("turn {n}: status {status}, {}", String::from_utf8_lossy(&reply)));
    }
    Ok(())
}

fn push_answers(llm: &FakeLlm, n: usize) {
    for _ in 0..n {
        llm.push(Step::text(ANSWER));
    }
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort_unstable();
    v
}

/// The value below which `q` of the sorted samples lie (nearest rank).
fn quantile(s: &[Duration], q: f64) -> Duration {
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

fn ready(bin: &Path, llm: &FakeLlm) -> Res<()> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let home = workspace(dir.path(), llm, None);
    // The first start writes the workspace's default files; the runs measured find them there.
    drop(Daemon::start(bin, &home)?);
    let mut samples = Vec::new();
    for _ in 0..READY_RUNS {
        let started = Instant::now();
        let mut d = Daemon::spawn(bin, &home)?;
        samples.push(d.wait_ready(started)?);
    }
    let s = sorted(samples);
    let med = quantile(&s, 0.5);
    println!(
        "1. ready (spawn to first 200 from /health), median of {READY_RUNS}: {:.2} ms (min {:.2}, max {:.2}); target <= 8 ms: {}",
        ms(med),
        ms(s[0]),
        ms(s[s.len() - 1]),
        verdict(med <= Duration::from_millis(8))
    );
    Ok(())
}

fn idle(bin: &Path, llm: &FakeLlm) -> Res<()> {
    let mut figures = Vec::new();
    for with_telegram in [false, true] {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let tg = with_telegram.then(|| FakeTelegram::start(TG_TOKEN));
        let home = workspace(dir.path(), llm, tg.as_ref());
        drop(Daemon::start(bin, &home)?);
        let d = Daemon::start(bin, &home)?;
        if let Some(tg) = &tg {
            // Idle means the channel is up: it has asked Telegram for updates at least once.
            let deadline = Instant::now() + LIMIT;
            while tg.calls_to("getUpdates").is_empty() {
                if Instant::now() > deadline {
                    return Err(format!("the daemon never polled the fake Telegram:\n{}", d.log_text()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        let (rss, hwm) = d.rss_kib();
        figures.push(rss);
        println!(
            "2. idle after 1 s, gateway{}: VmRSS {:.2} MiB, VmHWM {:.2} MiB ({})",
            if with_telegram { " + Telegram" } else { "" },
            mib(rss),
            mib(hwm),
            d.rss_parts()
        );
    }
    println!("   target <= 3.5 MiB idle RSS with gateway and Telegram: {}", verdict(figures[1] <= 3584));
    Ok(())
}

fn warm_turns(bin: &Path, llm: &FakeLlm) -> Res<()> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let home = workspace(dir.path(), llm, None);
    let d = Daemon::start(bin, &home)?;
    let mut c = Http::new(d.addr);
    // Warm-up: the first turns open the connections to the fake and the first sessions.
    push_answers(llm, 20);
    for n in 0..20 {
        api_turn(&mut c, "warm-up", n)?;
    }
    push_answers(llm, WARM_TURNS);
    let cpu0 = d.cpu();
    let mut walls = Vec::with_capacity(WARM_TURNS);
    for n in 0..WARM_TURNS {
        let t = Instant::now();
        api_turn(&mut c, &format!("bench-{}", n / TURNS_PER_SESSION), n)?;
        walls.push(t.elapsed());
    }
    let cpu = d.cpu().saturating_sub(cpu0);
    // The fake's own time for one of these requests: a mid-session one, replayed as the
    // daemon sent it, on a kept-alive connection as the daemon's client uses.
    let recorded: Vec<Recorded> = llm.requests();
    let sample = recorded
        .iter()
        .rev()
        .nth(TURNS_PER_SESSION / 2)
        .or(recorded.last())
        .ok_or("the fake recorded no request")?
        .clone();
    let skip = ["host", "content-length", "connection", "transfer-encoding"];
    let headers: Vec<(String, String)> =
        sample.headers.iter().filter(|(k, _)| !skip.contains(&k.as_str())).cloned().collect();
    let mut f = Http::new(llm.addr());
    push_answers(llm, WARM_TURNS + 20);
    let mut fake = Vec::with_capacity(WARM_TURNS);
    for n in 0..WARM_TURNS + 20 {
        let t = Instant::now();
        let (status, _) = f.request("POST", &sample.path, &headers, &sample.body)?;
        if status != 200 {
            return Err(format!("the fake answered {status} to a replayed request"));
        }
        if n >= 20 {
            fake.push(t.elapsed());
        }
    }
    let (walls, fake) = (sorted(walls), sorted(fake));
    let (w50, w99, f50, f99) =
        (quantile(&walls, 0.5), quantile(&walls, 0.99), quantile(&fake, 0.5), quantile(&fake, 0.99));
    let added = w50.saturating_sub(f50);
    let cpu_turn = cpu / u32::try_from(WARM_TURNS).unwrap_or(1);
    println!(
        "3. warm turn, POST /v1/chat/completions (not streamed), {WARM_TURNS} turns, {TURNS_PER_SESSION} per session:"
    );
    println!("   wall per request: median {:.3} ms, p99 {:.3} ms", ms(w50), ms(w99));
    println!(
        "   the fake alone, same request ({} B body): median {:.3} ms, p99 {:.3} ms",
        sample.body.len(),
        ms(f50),
        ms(f99)
    );
    println!(
        "   added wall (median - fake median): {:.3} ms; target <= 2 ms: {}",
        ms(added),
        verdict(added <= Duration::from_millis(2))
    );
    println!(
        "   daemon CPU per turn (utime+stime delta / {WARM_TURNS}): {:.3} ms; target <= 1 ms: {}",
        ms(cpu_turn),
        verdict(cpu_turn <= Duration::from_millis(1))
    );
    Ok(())
}

/// One WebSocket chat: `WS_MESSAGES` messages in sequence, each timed to its `response`.
async fn ws_chat(addr: SocketAddr, chat: usize, start: std::sync::Arc<tokio::sync::Barrier>) -> Res<Vec<Duration>> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let (mut ws, _) =
        tokio_tungstenite::client_async(format!("ws://{addr}/ws"), stream).await.map_err(|e| e.to_string())?;
    start.wait().await;
    let mut lat = Vec::with_capacity(WS_MESSAGES);
    for m in 0..WS_MESSAGES {
        let t = Instant::now();
        let msg = json!({"type": "message", "content": format!("note {m}"), "chat_id": format!("bench{chat}")});
        ws.send(Message::text(msg.to_string())).await.map_err(|e| e.to_string())?;
        loop {
            let next = tokio::time::timeout(LIMIT, ws.next()).await.map_err(|_| format!("chat {chat}: no event"))?;
            let Some(Ok(Message::Text(t))) = next else {
                if matches!(next, Some(Ok(_))) {
                    continue;
                }
                return Err(format!("chat {chat}: the connection ended"));
            };
            let e: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
            match e["type"].as_str() {
                Some("response") if e["content"] == ANSWER => break,
                Some("token" | "tool") => {}
                _ => return Err(format!("chat {chat}: unexpected event {e}")),
            }
        }
        lat.push(t.elapsed());
    }
    let _ = ws.close(None).await;
    Ok(lat)
}

fn ws_chats(bin: &Path, llm: &FakeLlm) -> Res<()> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let home = workspace(dir.path(), llm, None);
    let d = Daemon::start(bin, &home)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    push_answers(llm, WS_CHATS * WS_MESSAGES);
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(WS_CHATS + 1));
    let addr = d.addr;
    let (elapsed, lat) = rt.block_on(async {
        let tasks: Vec<_> = (0..WS_CHATS).map(|i| tokio::spawn(ws_chat(addr, i, start.clone()))).collect();
        // Timed from the moment every chat is connected.
        tokio::time::timeout(LIMIT, start.wait()).await.map_err(|_| "the chats did not all connect".to_owned())?;
        let t = Instant::now();
        let mut lat = Vec::with_capacity(WS_CHATS * WS_MESSAGES);
        for task in tasks {
            lat.extend(task.await.map_err(|e| e.to_string())??);
        }
        Ok::<_, String>((t.elapsed(), lat))
    })?;
    let (_, hwm) = d.rss_kib();
    let turns = lat.len();
    let rate = turns as f64 / elapsed.as_secs_f64();
    let lat = sorted(lat);
    println!(
        "4. {WS_CHATS} WebSocket chats at once, {WS_MESSAGES} messages each in sequence: {turns} turns in {:.2} s = {rate:.0} turns/s",
        elapsed.as_secs_f64()
    );
    println!(
        "   latency per turn (send to response event): p50 {:.2} ms, p99 {:.2} ms; daemon peak RSS (VmHWM) {:.2} MiB",
        ms(quantile(&lat, 0.5)),
        ms(quantile(&lat, 0.99)),
        mib(hwm)
    );
    println!(
        "   target >= 1,000 turns/s and RSS <= 32 MiB: {} / {}",
        verdict(rate >= 1000.0),
        verdict(hwm <= 32 * 1024)
    );
    Ok(())
}

fn soak(bin: &Path, llm: &FakeLlm) -> Res<()> {
    let secs: u64 = match std::env::var("CHELA_SOAK_SECS") {
        Ok(v) => {
            v.trim().parse().map_err(|_| format!("CHELA_SOAK_SECS must be a whole number of seconds, not {v:?}"))?
        }
        Err(_) => 10,
    };
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let home = workspace(dir.path(), llm, None);
    let d = Daemon::start(bin, &home)?;
    let mut c = Http::new(d.addr);
    // A live session keeps the tail of its history in memory, up to a bound (256 KiB of
    // messages at the default budget), so RSS rises by design until every session holds that
    // much. Big messages fill the ten sessions before the soak starts: what the soak then
    // shows is what grows beyond the bounds.
    push_answers(llm, SOAK_SESSIONS * SOAK_FILL_TURNS);
    for n in 0..SOAK_SESSIONS * SOAK_FILL_TURNS {
        api_turn_padded(&mut c, &format!("soak-{}", n % SOAK_SESSIONS), n, SOAK_PAD)?;
    }
    let (start_rss, _) = d.rss_kib();
    let total = secs * SOAK_RATE;
    let t0 = Instant::now();
    let (mut low, mut high, mut mid_rss) = (start_rss, start_rss, start_rss);
    for n in 0..total {
        let due = t0 + Duration::from_micros(n * 1_000_000 / SOAK_RATE);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        llm.push(Step::text(ANSWER));
        let i = usize::try_from(n).unwrap_or(0);
        api_turn_padded(&mut c, &format!("soak-{}", i % SOAK_SESSIONS), i, SOAK_PAD)?;
        if n % SOAK_RATE == 0 {
            let (rss, _) = d.rss_kib();
            low = low.min(rss);
            high = high.max(rss);
        }
        if n == total / 2 {
            mid_rss = d.rss_kib().0;
        }
    }
    let (end_rss, hwm) = d.rss_kib();
    let took = t0.elapsed().as_secs_f64();
    // Flat: the end within 5 % (or 256 KiB) of the start.
    let flat = end_rss <= start_rss + (start_rss / 20).max(256);
    println!(
        "5. soak, {total} turns at {SOAK_RATE}/s for {secs} s (took {took:.2} s), {SOAK_SESSIONS} sessions in turn, each already at its history bound: VmRSS start {:.2} MiB, \
         middle {:.2} MiB, end {:.2} MiB (sampled each second: {:.2}-{:.2}), VmHWM {:.2} MiB; target flat (end <= start + 5 %): {}",
        mib(start_rss),
        mib(mid_rss),
        mib(end_rss),
        mib(low),
        mib(high),
        mib(hwm),
        verdict(flat)
    );
    Ok(())
}

fn main() -> ExitCode {
    let bin = chela_bin();
    let bin = match std::fs::canonicalize(&bin) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "daemon: no chela binary at {} ({e}).\nBuild it with `cargo build --profile release-small -p chela`, \
                 or set CHELA_BIN to the binary to measure.",
                bin.display()
            );
            return ExitCode::from(2);
        }
    };
    println!("daemon: {}", bin.display());
    // Only the last requests are kept: each holds a whole prompt, and thousands are sent.
    let llm = FakeLlm::start_with(Options { max_recorded: 64, ..Options::default() });
    let phases: [(&str, Phase); 5] =
        [("ready", ready), ("idle", idle), ("warm turn", warm_turns), ("websocket", ws_chats), ("soak", soak)];
    // `CHELA_BENCH_PHASES=idle,ready` runs only the phases named (all when unset).
    let only = std::env::var("CHELA_BENCH_PHASES").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only.split(',').any(|p| p.trim() == name);
    for (name, phase) in phases {
        if !wanted(name) {
            continue;
        }
        if let Err(e) = phase(&bin, &llm) {
            eprintln!("daemon: the {name} phase failed: {e}");
            return ExitCode::FAILURE;
        }
        // Every scripted answer was taken: one model call per turn, none skipped or repeated.
        if llm.remaining() != 0 {
            eprintln!("daemon: the {name} phase left {} scripted answers unused", llm.remaining());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
