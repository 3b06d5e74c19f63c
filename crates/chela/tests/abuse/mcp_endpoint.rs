//! The MCP endpoint (`/xiaozhi/mcp/`) against the real `chela run`: PyPI's `mcp2xiaozhi`
//! bridging the upstream `mcp-server-time` dials in with a token from `chela mcp endpoint add`,
//! and the fake LLM calls its tool in a turn through the gateway's OpenAI endpoint; then
//! hostile hosts: no or a wrong token, a 10 MB frame, endless garbage frames, a host that never
//! answers `initialize`, thousands of tools, a host that hangs up mid-call, one that floods
//! `tools/list_changed`; and a host whose token is removed while connected. After each the
//! daemon still serves.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chela_testkit::daemon::Running;
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

/// `chela run` on a fresh workspace, killed when dropped.
struct Daemon {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    run: Running,
    addr: SocketAddr,
}

/// `gateway.token`: the gateway's own routes need it on loopback too.
const GATEWAY_TOKEN: &str = "abuse-mcp-endpoint-gateway-token";

fn chela(root: &Path, home: &Path) -> Command {
    chela_testkit::daemon::command(env!("CARGO_BIN_EXE_chela"), root, home)
}

impl Daemon {
    fn start(llm: &FakeLlm) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut c = chela(dir.path(), home.path());
        c.arg("run")
            .env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0")
            .env("CHELA_GATEWAY__TOKEN", GATEWAY_TOKEN)
            .env("CHELA_LLM__PROVIDER", "anthropic")
            .env("CHELA_LLM__BASE_URL", llm.anthropic_base_url())
            .env("CHELA_LLM__API_KEY", "k")
            .env("CHELA_LLM__MAX_RETRIES", "0")
            .env("CHELA_LOG", "info");
        let run = Running::start(c, Duration::from_secs(30));
        let addr = run.addr();
        Daemon { dir, home, run, addr }
    }

    /// `chela mcp endpoint add NAME`: the token it prints.
    fn token(&self, name: &str) -> String {
        let out = chela(self.dir.path(), self.home.path()).args(["mcp", "endpoint", "add", name]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        let token = text.split("token ").nth(1).unwrap().split_whitespace().next().unwrap().to_owned();
        assert_eq!(token.len(), 64, "{text}");
        token
    }

    fn url(&self, token: &str) -> String {
        format!("ws://{}/xiaozhi/mcp/?token={token}", self.addr)
    }

    /// Whether `/health` answers 200.
    async fn health(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(self.addr).await else { return false };
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let req = format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n", self.addr.port());
        if s.write_all(req.as_bytes()).await.is_err() {
            return false;
        }
        let mut out = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out)).await;
        out.starts_with("HTTP/1.1 200")
    }

    /// One chat turn through `/v1/chat/completions`: the reply's text.
    async fn turn(&self, text: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body = json!({"model": "chela", "messages": [{"role": "user", "content": text}]}).to_string();
        let mut s = TcpStream::connect(self.addr).await.unwrap();
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Authorization: Bearer {GATEWAY_TOKEN}\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr.port(),
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(60), s.read_to_string(&mut out)).await.unwrap().unwrap();
        let json = out.split("\r\n\r\n").nth(1).unwrap_or("");
        let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}"));
        v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned()
    }

    fn log(&self) -> String {
        self.run.log()
    }

    /// The running daemon's registry (`GET /api/cap/groups`): each group's tool ids, sorted.
    async fn groups(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = TcpStream::connect(self.addr).await.unwrap();
        let req = format!(
            "GET /api/cap/groups HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {GATEWAY_TOKEN}\r\n\
             Connection: close\r\n\r\n",
            self.addr.port()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out)).await.unwrap().unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        let v: Value = serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|g| {
                let mut tools: Vec<String> =
                    g["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect();
                tools.sort();
                (g["group_id"].as_str().unwrap().to_owned(), tools)
            })
            .collect()
    }

    /// Waits (bounded, 30 s) until group `group` has the tools `want` (`None`: no such group).
    async fn group_becomes(&self, group: &str, want: Option<&[&str]>) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = self.groups().await.remove(group);
            if now.as_deref().map(|t| t.iter().map(String::as_str).collect::<Vec<_>>()).as_deref() == want {
                return;
            }
            assert!(Instant::now() < deadline, "group {group} is {now:?}, not {want:?}\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

/// A hand-made host: the WebSocket, or the HTTP status the upgrade got.
async fn dial(d: &Daemon, url: &str) -> Result<Ws, u16> {
    let tcp = TcpStream::connect(d.addr).await.unwrap();
    match tokio_tungstenite::client_async(url, tcp).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err(r.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

/// The next JSON message from Chela, within 30 s.
async fn next(ws: &mut Ws) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await.ok()?? {
            Ok(Message::Text(t)) => return serde_json::from_str(t.as_str()).ok(),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// Answers the handshake and one `tools/list` with `tools`.
async fn handshake(ws: &mut Ws, tools: &[Value]) {
    let init = next(ws).await.unwrap();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["clientInfo"]["name"], "XiaozhiMCPEndpointClient");
    assert_eq!(init["params"]["protocolVersion"], "2024-11-05");
    let answer = json!({"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "h", "version": "1"}}});
    ws.send(Message::text(answer.to_string())).await.unwrap();
    assert_eq!(next(ws).await.unwrap()["method"], "notifications/initialized");
    let list = next(ws).await.unwrap();
    assert_eq!(list["method"], "tools/list");
    let answer = json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": tools}});
    ws.send(Message::text(answer.to_string())).await.unwrap();
}

/// Waits (10 s at most) for Chela to hang up on `ws` with close 1008 and `reason`.
async fn hung_up(d: &Daemon, ws: &mut Ws, reason: &str) {
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Close(frame)))) => break frame,
            Ok(Some(Ok(_))) => {}
            Ok(None | Some(Err(_))) => break None,
            Err(_) => panic!("the host is still connected after 10 s (waiting for {reason:?}):\n{}", d.log()),
        }
    };
    let close = close.unwrap_or_else(|| panic!("no close frame (waiting for {reason:?})"));
    assert_eq!(u16::from(close.code), 1008);
    assert_eq!(close.reason.as_str(), reason);
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": "a tool", "inputSchema": {"type": "object", "properties": {}}})
}

/// Waits (bounded) until the daemon's log says `what`.
async fn log_says(d: &Daemon, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !d.log().contains(what) {
        assert!(Instant::now() < deadline, "the log never said {what:?}:\n{}", d.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp2xiaozhi_bridges_mcp_server_time_and_the_model_calls_its_tool() {
    let root = chela_testkit::peers::repo_root();
    let peers = root.join("target/mcp-endpoint-peers");
    let ok = Command::new("bash")
        .arg(root.join("tests/mcp/install-peers.sh"))
        .arg("--endpoint")
        .arg(&peers)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "installing mcp2xiaozhi failed (needs python3 with venv and PyPI)");
    let llm = FakeLlm::start(vec![
        Step::tool_call("endpoint_time_get_current_time", json!({"timezone": "UTC"})),
        Step::text("It is time."),
    ]);
    let d = Daemon::start(&llm);
    let token = d.token("time");
    let work = tempfile::tempdir().unwrap();
    let python = peers.join("venv/bin/python");
    let config = json!({"mcpServers": {"time": {"type": "stdio", "command": python,
        "args": ["-m", "mcp_server_time", "--local-timezone=UTC"]}}});
    std::fs::write(work.path().join("mcp_config.json"), config.to_string()).unwrap();
    let mut bridge = Command::new(peers.join("venv/bin/mcp2xiaozhi"))
        .args(["run", "time"])
        .current_dir(work.path())
        .env("MCP_ENDPOINT", d.url(&token))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    log_says(&d, "tools in group endpoint_time").await;
    let reply = d.turn("what time is it?").await;
    let _ = bridge.kill();
    let _ = bridge.wait();
    assert_eq!(reply, "It is time.");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2, "{}", d.log());
    let second = reqs[1].json.as_ref().unwrap()["messages"].to_string();
    // mcp-server-time's answer: a JSON object with the timezone and the datetime.
    assert!(second.contains("UTC"), "{second}");
    assert!(second.contains("datetime"), "the tool's real result reached the model: {second}");
    // The group went with the bridge.
    log_says(&d, "MCP endpoint host time disconnected").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_hosts_are_refused_or_cut_off_and_the_daemon_carries_on() {
    let llm = FakeLlm::start(vec![]);
    let d = Daemon::start(&llm);
    let token = d.token("h");
    // No token, a wrong one, a removed one.
    assert_eq!(dial(&d, &format!("ws://{}/xiaozhi/mcp/", d.addr)).await.err(), Some(401));
    assert_eq!(dial(&d, &d.url(&"0".repeat(64))).await.err(), Some(401));
    let old = d.token("gone");
    let out = chela(d.dir.path(), d.home.path()).args(["mcp", "endpoint", "remove", "gone"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(dial(&d, &d.url(&old)).await.err(), Some(401));

    // A 10 MB frame closes the socket.
    let mut ws = dial(&d, &d.url(&token)).await.unwrap();
    let _ = ws.send(Message::text("x".repeat(10 << 20))).await;
    let mut closed = false;
    for _ in 0..10 {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Text(_)))) => {}
            _ => {
                closed = true;
                break;
            }
        }
    }
    assert!(closed, "a 10 MB frame must end the connection");

    // Endless garbage frames: dropped, the client still works.
    let mut ws = dial(&d, &d.url(&token)).await.unwrap();
    for i in 0..2000 {
        ws.send(Message::text(format!("{{not json {i}"))).await.unwrap();
    }
    ws.send(Message::Binary(vec![0xff; 1000].into())).await.unwrap();
    handshake(&mut ws, &[tool("ok")]).await;
    log_says(&d, "MCP endpoint host h: 1 tools in group endpoint_h").await;
    drop(ws);

    // Thousands of tools: the group is bounded.
    let mut ws = dial(&d, &d.url(&token)).await.unwrap();
    let many: Vec<Value> = (0..5000).map(|i| tool(&format!("t{i}"))).collect();
    handshake(&mut ws, &many).await;
    log_says(&d, "MCP endpoint host h: 256 tools in group endpoint_h").await;
    drop(ws);

    assert!(d.health().await, "the daemon still serves:\n{}", d.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_hangs_up_mid_call_fails_the_call_and_one_that_never_initializes_is_dropped() {
    let llm = FakeLlm::start(vec![Step::tool_call("endpoint_h_slow", json!({})), Step::text("The tool failed.")]);
    let d = Daemon::start(&llm);
    let token = d.token("h");
    let mut ws = dial(&d, &d.url(&token)).await.unwrap();
    handshake(&mut ws, &[tool("slow")]).await;
    log_says(&d, "tools in group endpoint_h").await;
    let turn = d.turn("go");
    let hang_up = async {
        let call = next(&mut ws).await.unwrap();
        assert_eq!(call["method"], "tools/call");
        assert!(call["id"].is_u64(), "integer ids: {call}");
        drop(ws);
    };
    let (reply, ()) = tokio::join!(turn, hang_up);
    assert_eq!(reply, "The tool failed.");
    let second = llm.requests()[1].json.as_ref().unwrap()["messages"].to_string();
    assert!(second.contains("the host hung up"), "{second}");

    // A host that never answers initialize is hung up on after the setup timeout (30 s).
    let mut ws = dial(&d, &d.url(&token)).await.unwrap();
    assert_eq!(next(&mut ws).await.unwrap()["method"], "initialize");
    let ended = tokio::time::timeout(Duration::from_secs(45), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the silent host was not cut off");
    assert!(d.health().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_token_hangs_up_on_its_connected_host_and_its_tools_go() {
    let llm = FakeLlm::start(vec![]);
    let d = Daemon::start(&llm);
    let (x, y) = (d.token("x"), d.token("y"));
    let mut host_x = dial(&d, &d.url(&x)).await.unwrap();
    handshake(&mut host_x, &[tool("a"), tool("b")]).await;
    let mut host_y = dial(&d, &d.url(&y)).await.unwrap();
    handshake(&mut host_y, &[tool("c")]).await;
    d.group_becomes("endpoint_x", Some(&["endpoint_x_a", "endpoint_x_b"])).await;
    d.group_becomes("endpoint_y", Some(&["endpoint_y_c"])).await;

    let out = chela(d.dir.path(), d.home.path()).args(["mcp", "endpoint", "remove", "x"]).output().unwrap();
    assert!(out.status.success());
    let removed = Instant::now();
    // Chela hangs up (the daemon reloads every second): a close frame saying why.
    hung_up(&d, &mut host_x, "the token was removed").await;
    assert!(removed.elapsed() < Duration::from_secs(10));
    d.group_becomes("endpoint_x", None).await;
    log_says(&d, "MCP endpoint host x disconnected (its token was removed)").await;
    // The other host stays, with its tools, and is sent nothing.
    assert_eq!(d.groups().await.remove("endpoint_y"), Some(vec!["endpoint_y_c".to_owned()]));
    assert!(tokio::time::timeout(Duration::from_secs(2), host_y.next()).await.is_err(), "host y was left alone");
    // The removed token does not get back in.
    assert_eq!(dial(&d, &d.url(&x)).await.err(), Some(401));
    // A token issued again under y's name cuts the host holding the old one as well.
    let _new = d.token("y");
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match host_y.next().await {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the host of a replaced token is still connected");
    d.group_becomes("endpoint_y", None).await;
    assert!(d.health().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_host_with_the_same_name_takes_over_and_the_first_is_hung_up() {
    let llm = FakeLlm::start(vec![]);
    let d = Daemon::start(&llm);
    let x = d.token("x");
    let mut first = dial(&d, &d.url(&x)).await.unwrap();
    handshake(&mut first, &[tool("old")]).await;
    d.group_becomes("endpoint_x", Some(&["endpoint_x_old"])).await;
    // The same token again: a host that reconnected, or a second copy of it.
    let mut second = dial(&d, &d.url(&x)).await.unwrap();
    hung_up(&d, &mut first, "another host connected with this name").await;
    log_says(&d, "MCP endpoint host x disconnected (another host connected with its name)").await;
    // The newcomer's tools are the group, and the first one's leaving did not take them away.
    handshake(&mut second, &[tool("new")]).await;
    d.group_becomes("endpoint_x", Some(&["endpoint_x_new"])).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(d.groups().await.remove("endpoint_x"), Some(vec!["endpoint_x_new".to_owned()]));
    assert!(tokio::time::timeout(Duration::from_secs(1), second.next()).await.is_err(), "the newcomer stays connected");
    drop(second);
    d.group_becomes("endpoint_x", None).await;
    assert!(d.health().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_re_lists_the_host_and_a_flood_of_it_is_bounded() {
    let llm = FakeLlm::start(vec![]);
    let d = Daemon::start(&llm);
    let token = d.token("h");
    let mut ws = dial(&d, &d.url(&token)).await.unwrap();
    handshake(&mut ws, &[tool("a"), tool("b")]).await;
    d.group_becomes("endpoint_h", Some(&["endpoint_h_a", "endpoint_h_b"])).await;
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}).to_string();
    // The host's tools change: a goes, c comes.
    ws.send(Message::text(changed.clone())).await.unwrap();
    let list = next(&mut ws).await.unwrap();
    assert_eq!(list["method"], "tools/list");
    let answer = json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": [tool("b"), tool("c")]}});
    ws.send(Message::text(answer.to_string())).await.unwrap();
    d.group_becomes("endpoint_h", Some(&["endpoint_h_b", "endpoint_h_c"])).await;

    // Now 3 s of list_changed as fast as the socket takes them, every tools/list answered.
    let (mut sink, mut stream) = ws.split();
    let (to_send, mut outbox) = tokio::sync::mpsc::channel::<String>(16);
    let writer = tokio::spawn(async move {
        let start = Instant::now();
        let mut sent = 0u64;
        loop {
            while let Ok(answer) = outbox.try_recv() {
                sink.send(Message::text(answer)).await.unwrap();
            }
            if start.elapsed() < Duration::from_secs(3) {
                sink.send(Message::text(changed.clone())).await.unwrap();
                sent += 1;
            } else {
                match tokio::time::timeout(Duration::from_secs(3), outbox.recv()).await {
                    Ok(Some(answer)) => sink.send(Message::text(answer)).await.unwrap(),
                    _ => return (sent, sink),
                }
            }
        }
    });
    let mut lists = 0;
    let reader = async {
        let deadline = Instant::now() + Duration::from_secs(7);
        while Instant::now() < deadline {
            let Ok(Some(Ok(Message::Text(t)))) = tokio::time::timeout(Duration::from_millis(200), stream.next()).await
            else {
                continue;
            };
            let m: Value = serde_json::from_str(t.as_str()).unwrap();
            assert_eq!(m["method"], "tools/list", "{m}");
            lists += 1;
            let answer = json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [tool("b"), tool("d")]}});
            to_send.send(answer.to_string()).await.unwrap();
        }
    };
    reader.await;
    let (sent, _sink) = writer.await.unwrap();
    assert!(sent > 1000, "only {sent} notifications were sent");
    // At most one listing a second: 3 s of flood, then the one waiting out its gap and the
    // one folded signal.
    assert!((2..=6).contains(&lists), "{lists} listings for {sent} notifications");
    d.group_becomes("endpoint_h", Some(&["endpoint_h_b", "endpoint_h_d"])).await;
    assert!(d.health().await, "the daemon still serves:\n{}", d.log());
}
