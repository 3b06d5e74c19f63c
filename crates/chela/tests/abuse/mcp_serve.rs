//! The abuse corpus of Chela's MCP server: what a broken or hostile MCP client can send to the
//! real `chela mcp serve` (stdio) and to `/mcp` of the real `chela run` (on an ephemeral
//! 127.0.0.1 port). Each case checks that the input is refused with a clear error within a
//! bound, and that the server still answers afterwards.
//!
//! The token on a non-loopback address is a service-level test (`src/channels/mcp/tests.rs`),
//! since tests bind loopback only.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chela_testkit::FakeLlm;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// `gateway.token`: `/mcp` needs it on loopback too.
const GATEWAY_TOKEN: &str = "abuse-mcp-serve-gateway-token";

struct Ws {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    _llm: FakeLlm,
}

impl Ws {
    fn new(extra: &str) -> Ws {
        let llm = FakeLlm::start(vec![]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let config = dir.path().join("chela.toml");
        let text = format!(
            "[llm]\nprovider = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"sk-ant-abuse\"\n{extra}",
            llm.anthropic_base_url()
        );
        std::fs::write(&config, text).unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
        Ws { dir, home: tempfile::tempdir().unwrap(), _llm: llm }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
        c.args(args).env_clear().env("HOME", self.home.path()).env("CHELA_HOME", self.dir.path());
        c.env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0").env("CHELA_GATEWAY__TOKEN", GATEWAY_TOKEN);
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        c
    }
}

/// `chela mcp serve` with its stdout read line by line on a thread.
struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Served {
    fn start(ws: &Ws) -> Served {
        let mut child = ws
            .cmd(&["mcp", "serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start chela mcp serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Served { stdin: child.stdin.take(), child, lines }
    }

    fn write(&mut self, bytes: &[u8]) {
        self.stdin.as_mut().unwrap().write_all(bytes).unwrap();
        self.stdin.as_mut().unwrap().flush().unwrap();
    }

    fn send(&mut self, msg: &Value) {
        self.write(format!("{msg}\n").as_bytes());
    }

    fn recv(&self) -> Value {
        let line = self.lines.recv_timeout(WAIT).expect("an answer in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn handshake(&mut self, version: &str) {
        self.send(&json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "abuser", "version": "0"}}}));
        assert_eq!(self.recv()["result"]["protocolVersion"], version);
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// A ping answered: the server is still up and in step.
    fn still_answers(&mut self) {
        self.send(&json!({"jsonrpc": "2.0", "id": "alive", "method": "ping"}));
        assert_eq!(self.recv(), json!({"jsonrpc": "2.0", "id": "alive", "result": {}}));
    }

    /// The peak resident memory of the server, in KiB.
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn garbage_lines_get_errors_and_the_server_goes_on() {
    let ws = Ws::new("");
    let mut s = Served::start(&ws);
    s.write(b"this is not json\n");
    assert_eq!(s.recv()["error"]["code"], -32700);
    s.write(b"\xff\xfe\x00binary\n");
    assert_eq!(s.recv()["error"]["code"], -32700);
    for bad in
        [json!(42), json!({"id": 1, "method": "ping"}), json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"})]
    {
        s.send(&bad);
        assert_eq!(s.recv()["error"]["code"], -32600, "{bad}");
    }
    // Blank lines are nothing.
    s.write(b"\n   \n");
    s.handshake("2025-11-25");
    s.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "resources/list"}));
    let unknown = s.recv();
    assert_eq!((unknown["id"].clone(), unknown["error"]["code"].clone()), (json!(5), json!(-32601)));
    s.send(
        &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "chat", "arguments": "text"}}),
    );
    assert_eq!(s.recv()["error"]["code"], -32602);
    s.still_answers();
}

#[test]
fn a_50_mb_line_is_refused_without_being_kept() {
    let ws = Ws::new("");
    let mut s = Served::start(&ws);
    s.handshake("2025-11-25");
    let mut line = Vec::with_capacity(50 * 1024 * 1024 + 64);
    line.extend_from_slice(
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chat","arguments":{"message":""#,
    );
    line.resize(50 * 1024 * 1024, b'a');
    line.extend_from_slice(b"\"}}}\n");
    s.write(&line);
    let refused = s.recv();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("limit"), "{refused}");
    s.still_answers();
    // Read in pieces and dropped: the process never held the 50 MB.
    let peak = s.peak_kib();
    assert!(peak < 40 * 1024, "peak RSS {peak} KiB");
}

#[test]
fn a_flood_of_requests_is_answered_in_full_with_bounded_memory() {
    let ws = Ws::new("");
    let mut s = Served::start(&ws);
    s.handshake("2025-11-25");
    const N: usize = 5000;
    let mut stdin = s.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut all = String::new();
        for i in 0..N {
            all.push_str(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n"));
        }
        stdin.write_all(all.as_bytes()).unwrap();
        stdin
    });
    let started = Instant::now();
    let mut seen = vec![false; N];
    for _ in 0..N {
        let reply = s.recv();
        let id = usize::try_from(reply["id"].as_u64().unwrap()).unwrap();
        assert!(reply["result"]["tools"].is_array(), "{reply}");
        seen[id] = true;
    }
    assert!(seen.iter().all(|&b| b), "every request answered once");
    s.stdin = Some(writer.join().unwrap());
    s.still_answers();
    assert!(started.elapsed() < WAIT);
    assert!(s.peak_kib() < 60 * 1024, "peak RSS {} KiB", s.peak_kib());
}

#[test]
fn batches_after_2025_06_18_and_a_disabled_groups_tools_are_refused() {
    let ws = Ws::new("[mcp.serve]\ngroups = [\"memory\", \"files\", \"chat\"]\n[caps]\ndisabled = [\"memory\"]\n");
    let mut s = Served::start(&ws);
    s.handshake("2025-06-18");
    s.send(&json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]));
    let refused = s.recv();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    s.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let list = s.recv();
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"file_read") && names.contains(&"chat"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("memory_")), "{names:?}");
    s.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "memory_store", "arguments": {"content": "x"}}}));
    let refused = s.recv();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(!ws.dir.path().join("memory/entries.jsonl").exists(), "nothing was stored");
    s.still_answers();
}

// ---- /mcp of the real daemon ----

struct Run {
    child: Child,
    addr: SocketAddr,
}

impl Run {
    fn start(ws: &Ws) -> Run {
        let mut child = ws
            .cmd(&["run"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start chela run");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listens on http://").nth(1) {
                    let _ = tx.send(rest.trim().to_owned());
                }
            }
        });
        let addr = rx.recv_timeout(WAIT).expect("the gateway's address").parse().unwrap();
        Run { child, addr }
    }

    /// One request on its own connection; the status and the body.
    fn post(&self, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
        post_to(self.addr, headers, body)
    }

    fn ping(&self) -> u16 {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
        self.post(&[], body.to_string().as_bytes()).0
    }
}

/// One POST to `/mcp` at `addr` on its own connection; the status and the body.
fn post_to(addr: SocketAddr, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {GATEWAY_TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n",
        addr,
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    c.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) and close before taking the whole body.
    let _ = c.write_all(body);
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn hostile_http_clients_are_refused_and_the_daemon_goes_on() {
    let ws = Ws::new("");
    let d = Run::start(&ws);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}})
    .to_string();
    // Another site's page posting to the loopback server.
    assert_eq!(d.post(&[("Origin", "https://evil.example")], init.as_bytes()).0, 403);
    // A version header nobody defined.
    assert_eq!(d.post(&[("MCP-Protocol-Version", "1.0-evil")], init.as_bytes()).0, 400);
    // Not JSON, and not JSON-RPC.
    assert_eq!(d.post(&[], b"{{{{").0, 400);
    assert_eq!(d.post(&[], b"[1, 2, 3]").0, 400);
    // Over the body bound.
    let big = vec![b' '; 2 * 1024 * 1024];
    assert_eq!(d.post(&[], &big).0, 413);
    // A request that names no session and no version.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    assert_eq!(d.post(&[], list.as_bytes()).0, 400);
    assert_eq!(d.post(&[("Mcp-Session-Id", "0000")], list.as_bytes()).0, 404);
    // An unknown method in a real session.
    let (status, _) = d.post(&[], init.as_bytes());
    assert_eq!(status, 200);
    let odd = json!({"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let (status, body) = d.post(&[], odd.to_string().as_bytes());
    assert_eq!(status, 404, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["code"], -32601);
    // A flood of sessions stops at the bound.
    let mut codes = Vec::new();
    for _ in 0..80 {
        codes.push(d.post(&[], init.as_bytes()).0);
    }
    assert!(codes.contains(&503) && codes.iter().all(|c| *c == 200 || *c == 503), "{codes:?}");
    assert_eq!(d.ping(), 200, "the daemon still answers");
}

// ---- the GET stream and cancellation on /mcp ----

impl Run {
    /// Opens a handshake-era session; its id.
    fn session(&self) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "streamer", "version": "0"}}});
        let mut c = TcpStream::connect(self.addr).unwrap();
        c.set_read_timeout(Some(WAIT)).unwrap();
        let body = init.to_string();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\nAuthorization: Bearer {GATEWAY_TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        c.write_all(head.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        let line = out.lines().find(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:")).expect(&out);
        line.split_once(':').unwrap().1.trim().to_owned()
    }

    /// A GET stream of session `sid`, its head read; the connection stays open.
    fn stream(&self, sid: &str) -> TcpStream {
        let mut c = TcpStream::connect(self.addr).unwrap();
        c.set_read_timeout(Some(WAIT)).unwrap();
        let head = format!(
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {GATEWAY_TOKEN}\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n",
            self.addr
        );
        c.write_all(head.as_bytes()).unwrap();
        let mut seen = Vec::new();
        let mut byte = [0u8];
        while !seen.ends_with(b"\r\n\r\n") {
            assert_eq!(c.read(&mut byte).unwrap(), 1, "the head of the stream");
            seen.push(byte[0]);
        }
        assert!(seen.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
        c
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

/// Reads what a stream sends until it ends (the response's last chunk) or WAIT passes.
fn ends(mut c: TcpStream) -> bool {
    let started = Instant::now();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < WAIT {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(_) => return false,
        }
        if all.ends_with(b"0\r\n\r\n") {
            return true;
        }
    }
    false
}

#[test]
fn many_get_streams_keep_one_per_session_and_unread_ones_cost_nothing() {
    let ws = Ws::new("");
    let d = Run::start(&ws);
    // One session opening stream after stream: each new one ends the one before.
    let sid = d.session();
    let mut last = d.stream(&sid);
    for _ in 0..50 {
        let next = d.stream(&sid);
        assert!(ends(std::mem::replace(&mut last, next)), "the older stream ended");
    }
    // Many sessions, each with a stream nobody ever reads.
    let before = d.rss_kib();
    let mut unread = Vec::new();
    for _ in 0..60 {
        let sid = d.session();
        let c = d.stream(&sid);
        unread.push(c);
    }
    // Switching groups makes every stream get a message it will never read. The first
    // session's stream is read after each switch: its notice says the daemon took the change,
    // so the next switch is made only then (no fixed wait for the config watcher).
    const CHANGED: &str = "notifications/tools/list_changed";
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    for (n, disabled) in ["memory", "chat", "memory", "chat"].into_iter().enumerate() {
        std::fs::write(ws.dir.path().join("chela.toml"), {
            let text = std::fs::read_to_string(ws.dir.path().join("chela.toml")).unwrap();
            let kept: String = text
                .lines()
                .filter(|l| !l.starts_with("[caps]") && !l.starts_with("disabled"))
                .map(|l| format!("{l}\n"))
                .collect();
            format!("{kept}[caps]\ndisabled = [\"{disabled}\"]\n")
        })
        .unwrap();
        while String::from_utf8_lossy(&got).matches(CHANGED).count() <= n {
            let read = last.read(&mut buf).expect("a change announced in time");
            assert!(read > 0, "the stream ended: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..read]);
        }
    }
    assert_eq!(d.ping(), 200, "the daemon still answers");
    let grown = d.rss_kib().saturating_sub(before);
    assert!(grown < 16 * 1024, "60 unread streams grew the daemon by {grown} KiB");
}

#[test]
fn cancels_of_unknown_ids_and_cancels_racing_results_break_nothing() {
    let ws = Ws::new("");
    let d = Run::start(&ws);
    let sid = d.session();
    let headers = [("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    for id in [json!("never-sent"), json!(12345), json!(null), json!({"x": 1})] {
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
        assert_eq!(d.post(&headers, cancel.to_string().as_bytes()).0, 202, "{id}");
    }
    // A cheap call and its cancel sent at the same time, many times: each call is either
    // answered whole with its own id or, cancelled, answered 202 with no body.
    let (mut answered, mut cancelled) = (0, 0);
    for i in 0..40 {
        let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "memory_list", "arguments": {}}});
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": i}});
        let racer = {
            let (addr, sid, cancel) = (d.addr, sid.clone(), cancel.to_string());
            std::thread::spawn(move || {
                let h = [("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
                post_to(addr, &h, cancel.as_bytes()).0
            })
        };
        let (status, body) = d.post(&headers, call.to_string().as_bytes());
        assert_eq!(racer.join().unwrap(), 202);
        match status {
            200 => {
                let reply: Value = serde_json::from_str(&body).unwrap();
                assert_eq!(reply["id"], i, "{reply}");
                assert_eq!(reply["result"]["isError"], false, "{reply}");
                answered += 1;
            }
            202 => {
                assert_eq!(body, "");
                cancelled += 1;
            }
            other => panic!("status {other}: {body}"),
        }
    }
    assert_eq!(answered + cancelled, 40);
    assert_eq!(d.ping(), 200, "the daemon still answers");
}
