//! What a hostile or broken device can do to the xiaozhi conversation (`/xiaozhi/v1/`) of the
//! real `chela run`: garbage binary frames, a 10 MB text frame, a hello that never comes,
//! frames after its own close, leaving mid-sentence, bad and revoked tokens, 200
//! connections opened and dropped, and a device whose MCP side floods
//! `notifications/tools/list_changed`. Each gets a clean close or refusal, and the daemon and
//! another connected device carry on (a whole spoken turn afterwards). The model is the
//! scripted fake LLM, speech the testkit's `FakeAudio`; everything is on 127.0.0.1.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use chela_testkit::audio::FakeAudio;
use chela_testkit::daemon::Running;
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const A: &str = "aa:bb:cc:dd:ee:0a";
const B: &str = "aa:bb:cc:dd:ee:0b";
const CLIENT: &str = "3f1c2a4e-3333-4000-8000-000000000001";
const HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;

fn token(mac: &str) -> String {
    format!("token-of-{mac}")
}

/// `chela run` with devices A and B approved, over the fake LLM and fake audio.
struct Daemon {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    run: Running,
    addr: SocketAddr,
    llm: FakeLlm,
    _audio: FakeAudio,
}

impl Daemon {
    fn start(script: Vec<Step>) -> Daemon {
        let llm = FakeLlm::start(script);
        let audio = FakeAudio::start("unused");
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let device = |mac: &str| {
            json!({"id": mac, "client_id": CLIENT, "info": {}, "state": "approved",
                   "token_sha256": chela::devices::token_hash(&token(mac)), "created": 1, "last_seen": 1})
        };
        let store = json!({"devices": [device(A), device(B)], "pending": []});
        std::fs::write(state.join("devices.json"), store.to_string()).unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut c = chela(dir.path(), home.path());
        c.arg("run")
            .env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0")
            .env("CHELA_GATEWAY__TOKEN", "abuse-xiaozhi-ws-token")
            .env("CHELA_LLM__PROVIDER", "anthropic")
            .env("CHELA_LLM__BASE_URL", llm.anthropic_base_url())
            .env("CHELA_LLM__API_KEY", "test-key")
            .env("CHELA_LLM__MAX_RETRIES", "0")
            .env("CHELA_VOICE__ASR_BASE_URL", audio.base_url())
            .env("CHELA_VOICE__TTS_BASE_URL", audio.base_url())
            // Two hundred devices at once are let in here; the WebSocket cap (128 by default)
            // has its own tests (gateway/tests_dos.rs).
            .env("CHELA_GATEWAY__MAX_WEBSOCKETS", "256");
        let run = Running::start(c, Duration::from_secs(30));
        let addr = run.addr();
        Daemon { dir, home, run, addr, llm, _audio: audio }
    }

    /// `/health` answers and the process is alive.
    fn healthy(&mut self) {
        assert!(self.run.alive(), "chela run died:\n{}", self.run.log());
        let mut s = std::net::TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    }

    fn device_cmd(&self, args: &[&str]) -> bool {
        chela(self.dir.path(), self.home.path()).arg("device").args(args).output().unwrap().status.success()
    }
}

fn chela(root: &Path, home: &Path) -> Command {
    chela_testkit::daemon::command(env!("CARGO_BIN_EXE_chela"), root, home)
}

type Ws = WebSocketStream<TcpStream>;

/// Opens `/xiaozhi/v1/` as device `mac` with `tok`; `Err` is the refusal's HTTP status.
async fn dial(addr: SocketAddr, mac: &str, tok: &str) -> Result<Ws, u16> {
    let mut req = format!("ws://{addr}/xiaozhi/v1/").into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("Authorization", format!("Bearer {tok}").parse().unwrap());
    h.insert("Device-Id", mac.parse().unwrap());
    h.insert("Client-Id", CLIENT.parse().unwrap());
    h.insert("Protocol-Version", "1".parse().unwrap());
    let stream = TcpStream::connect(addr).await.unwrap();
    match tokio_tungstenite::client_async(req, stream).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err(r.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

async fn hello(addr: SocketAddr, mac: &str) -> Ws {
    let mut c = dial(addr, mac, &token(mac)).await.expect("an approved device is let in");
    c.send(Message::text(HELLO)).await.unwrap();
    let v = next_json(&mut c).await.expect("the server's hello");
    assert_eq!(v["type"], "hello");
    c
}

/// The next text message; `None` when the server closed (or the socket ended).
async fn next_json(c: &mut Ws) -> Option<Value> {
    loop {
        match timeout(Duration::from_secs(20), c.next()).await.expect("something in time") {
            Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
            Some(Ok(Message::Close(_)) | Err(_)) | None => return None,
        }
    }
}

/// The close reason and code the server sends (reads past anything else).
async fn close_of(c: &mut Ws) -> Option<(u16, String)> {
    loop {
        match timeout(Duration::from_secs(30), c.next()).await.expect("a close in time") {
            Some(Ok(Message::Close(f))) => return f.map(|f| (u16::from(f.code), f.reason.to_string())),
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return None,
        }
    }
}

/// A typed utterance and its whole spoken reply: the `stt` text and the number of audio frames.
async fn turn(c: &mut Ws, text: &str) -> (String, usize) {
    c.send(Message::text(json!({"type": "listen", "state": "detect", "text": text}).to_string())).await.unwrap();
    let mut stt = String::new();
    let mut frames = 0;
    loop {
        match timeout(Duration::from_secs(20), c.next()).await.expect("the reply in time") {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if v["type"] == "stt" {
                    stt = v["text"].as_str().unwrap().to_owned();
                }
                if v["type"] == "tts" && v["state"] == "stop" {
                    return (stt, frames);
                }
            }
            Some(Ok(Message::Binary(_))) => frames += 1,
            Some(Ok(_)) => {}
            other => panic!("the connection ended: {other:?}"),
        }
    }
}

/// A masked client frame (RFC 6455 §5.2) written straight to the socket.
fn raw_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [1u8, 2, 3, 4];
    let mut f = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => f.push(0x80 | u8::try_from(n).unwrap()),
        n => {
            f.push(0x80 | 126);
            f.extend(u16::try_from(n).unwrap().to_be_bytes());
        }
    }
    f.extend(mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

#[tokio::test]
async fn garbage_binary_frames_are_dropped_then_the_device_is_closed() {
    let mut d = Daemon::start(vec![Step::text("Still here."), Step::text("B is fine.")]);
    let mut b = hello(d.addr, B).await;
    let mut a = hello(d.addr, A).await;
    // A few bad packets: dropped, the device goes on.
    for i in 0..10u8 {
        a.send(Message::binary(vec![0xFF, 0x00, i, 0x13, 0x37])).await.unwrap();
    }
    assert_eq!(turn(&mut a, "are you there").await.0, "are you there");
    // A stream of them: closed with a reason.
    // Opus refuses both: a code-3 packet that declares 0 frames, and one over 4000 bytes.
    for i in 0..200u32 {
        let mut garbage = vec![0xFF, 0x00];
        garbage.extend(i.to_be_bytes().repeat(if i % 2 == 0 { 40 } else { 1300 }));
        if a.send(Message::binary(garbage)).await.is_err() {
            break;
        }
    }
    let (code, why) = close_of(&mut a).await.expect("a close frame");
    assert_eq!(code, 1008, "{why}");
    assert!(why.contains("neither audio"), "{why}");
    assert_eq!(turn(&mut b, "and you").await.0, "and you");
    d.healthy();
}

#[tokio::test]
async fn a_10_mb_text_frame_is_refused_with_1009_and_others_carry_on() {
    let mut d = Daemon::start(vec![Step::text("Fine.")]);
    let mut b = hello(d.addr, B).await;
    let mut a = hello(d.addr, A).await;
    let huge = format!(r#"{{"type":"listen","state":"detect","text":"{}"}}"#, "x".repeat(10 * 1024 * 1024));
    let started = Instant::now();
    // The server stops reading at the frame's header; the rest may never be taken.
    let _ = timeout(Duration::from_secs(10), a.send(Message::text(huge))).await;
    // The server may close before the client has written the whole frame: then the socket
    // just ends; a close frame that does arrive says 1009.
    if let Some((code, _)) = close_of(&mut a).await {
        assert_eq!(code, 1009);
    }
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(d.llm.requests().is_empty(), "nothing of it reached the model");
    let (stt, frames) = turn(&mut b, "hello").await;
    assert_eq!(stt, "hello");
    assert!(frames > 0);
    d.healthy();
}

#[tokio::test]
async fn a_hello_that_never_comes_is_closed_after_10_s() {
    let mut d = Daemon::start(vec![]);
    let mut a = dial(d.addr, A, &token(A)).await.unwrap();
    let started = Instant::now();
    // Audio and messages before hello are ignored; they do not count as a hello.
    a.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    a.send(Message::text(r#"{"type":"listen","state":"detect","text":"hi"}"#)).await.unwrap();
    let (code, why) = close_of(&mut a).await.expect("a close frame");
    assert_eq!(code, 1008);
    assert!(why.contains("hello"), "{why}");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(9) && waited < Duration::from_secs(20), "{waited:?}");
    assert!(d.llm.requests().is_empty());
    d.healthy();
}

#[tokio::test]
async fn frames_after_the_devices_own_close_are_ignored() {
    let mut d = Daemon::start(vec![Step::text("Fine.")]);
    let mut b = hello(d.addr, B).await;
    let a = hello(d.addr, A).await;
    let mut raw = a.into_inner();
    raw.write_all(&raw_frame(0x8, &1000u16.to_be_bytes())).await.unwrap();
    // After its close: a detect (would start a turn), audio, garbage bytes.
    let _ = raw.write_all(&raw_frame(0x1, br#"{"type":"listen","state":"detect","text":"ghost"}"#)).await;
    let _ = raw.write_all(&raw_frame(0x2, &[0xF8, 0xFF, 0xFE])).await;
    let _ = raw.write_all(&[0xde, 0xad, 0xbe, 0xef].repeat(64)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(d.llm.requests().is_empty(), "nothing after the close started a turn");
    assert_eq!(turn(&mut b, "real").await.0, "real");
    d.healthy();
}

#[tokio::test]
async fn a_device_that_leaves_mid_sentence_is_forgotten_and_comes_back() {
    let long = "This answer is long and keeps going. ".repeat(20);
    let mut d = Daemon::start(vec![Step::text(long), Step::text("Back again."), Step::text("B here.")]);
    let mut b = hello(d.addr, B).await;
    let mut a = hello(d.addr, A).await;
    a.send(Message::text(r#"{"type":"listen","state":"detect","text":"talk"}"#)).await.unwrap();
    let mut frames = 0;
    while frames < 3 {
        if let Some(Ok(Message::Binary(_))) = timeout(Duration::from_secs(20), a.next()).await.unwrap() {
            frames += 1;
        }
    }
    drop(a);
    let mut again = hello(d.addr, A).await;
    let (stt, frames) = turn(&mut again, "again").await;
    assert_eq!((stt.as_str(), frames > 0), ("again", true));
    assert_eq!(turn(&mut b, "b").await.0, "b");
    d.healthy();
}

#[tokio::test]
async fn bad_and_revoked_tokens_are_refused_before_the_upgrade() {
    let mut d = Daemon::start(vec![Step::text("B is fine.")]);
    let mut b = hello(d.addr, B).await;
    assert_eq!(dial(d.addr, A, "not-the-token").await.err(), Some(401));
    assert_eq!(dial(d.addr, A, &token(B)).await.err(), Some(401), "another device's token");
    assert_eq!(dial(d.addr, "aa:bb:cc:dd:ee:99", "x").await.err(), Some(401), "an unknown device");
    assert!(d.device_cmd(&["revoke", A]));
    assert_eq!(dial(d.addr, A, &token(A)).await.err(), Some(401), "a revoked device");
    // Without a token at all.
    let mut req = format!("ws://{}/xiaozhi/v1/", d.addr).into_client_request().unwrap();
    req.headers_mut().insert("Device-Id", B.parse().unwrap());
    let stream = TcpStream::connect(d.addr).await.unwrap();
    match tokio_tungstenite::client_async(req, stream).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status().as_u16(), 401),
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert_eq!(turn(&mut b, "ok").await.0, "ok");
    d.healthy();
}

#[tokio::test]
async fn two_hundred_connections_opened_and_dropped_leave_the_daemon_serving() {
    let mut d = Daemon::start(vec![Step::text("Still fine.")]);
    let mut b = hello(d.addr, B).await;
    let addr = d.addr;
    let mut tasks = Vec::new();
    for i in 0..200u32 {
        tasks.push(tokio::spawn(async move {
            let mut c = dial(addr, A, &token(A)).await.expect("let in");
            if i % 2 == 0 {
                c.send(Message::text(HELLO)).await.unwrap();
            }
            if i % 3 == 0 {
                let _ = c.send(Message::binary(vec![0u8; 10])).await;
            }
            c
        }));
    }
    let mut open = Vec::new();
    for t in tasks {
        open.push(t.await.unwrap());
    }
    drop(open);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (stt, frames) = turn(&mut b, "still there").await;
    assert_eq!(stt, "still there");
    assert!(frames > 0);
    // And a new connection of the dropped device works.
    let mut a = hello(d.addr, A).await;
    a.send(Message::text(r#"{"type":"abort"}"#)).await.unwrap();
    d.healthy();
}

/// The running daemon's tools of group `group` (`GET /api/cap/groups`), sorted; `None`: no group.
async fn group_tools(addr: SocketAddr, group: &str) -> Option<Vec<String>> {
    use tokio::io::AsyncReadExt;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET /api/cap/groups HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer abuse-xiaozhi-ws-token\r\n\
         Connection: close\r\n\r\n",
        addr.port()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    timeout(Duration::from_secs(10), s.read_to_string(&mut out)).await.unwrap().unwrap();
    let v: Value = serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap();
    let g = v.as_array().unwrap().iter().find(|g| g["group_id"] == group)?;
    let mut tools: Vec<String> =
        g["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect();
    tools.sort();
    Some(tools)
}

/// Waits (bounded) until device A's group has exactly `want`.
async fn a_tools_become(addr: SocketAddr, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = group_tools(addr, "device_aabbccddee0a").await;
        if now.as_deref().is_some_and(|t| t.iter().map(String::as_str).eq(want.iter().copied())) {
            return;
        }
        assert!(Instant::now() < deadline, "device A's tools are {now:?}, not {want:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The next `mcp` payload from Chela.
async fn next_mcp(c: &mut Ws) -> Value {
    loop {
        let v = next_json(c).await.expect("an MCP message");
        if v["type"] == "mcp" {
            return v["payload"].clone();
        }
    }
}

fn mcp(payload: Value) -> Message {
    Message::text(json!({"session_id": "s", "type": "mcp", "payload": payload}).to_string())
}

fn device_tool(name: &str) -> Value {
    json!({"name": name, "description": "a device tool", "inputSchema": {"type": "object", "properties": {}}})
}

#[tokio::test]
async fn a_device_that_changes_its_tools_is_re_listed_and_one_that_floods_list_changed_is_bounded() {
    let mut d = Daemon::start(vec![Step::text("B is fine.")]);
    let mut b = hello(d.addr, B).await;
    let mut a = hello(d.addr, A).await;
    let init = next_mcp(&mut a).await;
    assert_eq!(init["method"], "initialize");
    a.send(mcp(json!({"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": "2024-11-05",
        "capabilities": {"tools": {}}, "serverInfo": {"name": "board", "version": "1"}}})))
        .await
        .unwrap();
    assert_eq!(next_mcp(&mut a).await["method"], "notifications/initialized");
    let list = next_mcp(&mut a).await;
    assert_eq!(list["method"], "tools/list");
    a.send(mcp(json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": [device_tool("self.lamp.on")]}})))
        .await
        .unwrap();
    a_tools_become(d.addr, &["device_aabbccddee0a_self_lamp_on"]).await;

    // The device's tools change (the lamp goes, a fan comes) and it says so.
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    a.send(mcp(changed.clone())).await.unwrap();
    let list = next_mcp(&mut a).await;
    assert_eq!(list["method"], "tools/list");
    a.send(mcp(json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": [device_tool("self.fan.on")]}})))
        .await
        .unwrap();
    a_tools_become(d.addr, &["device_aabbccddee0a_self_fan_on"]).await;

    // 3 s of the notification as fast as the socket takes it, each tools/list answered.
    let (mut sink, mut stream) = a.split();
    let (answers, mut outbox) = tokio::sync::mpsc::channel::<Message>(16);
    let writer = tokio::spawn(async move {
        let start = Instant::now();
        let mut sent = 0u64;
        loop {
            while let Ok(m) = outbox.try_recv() {
                sink.send(m).await.unwrap();
            }
            if start.elapsed() < Duration::from_secs(3) {
                sink.send(mcp(changed.clone())).await.unwrap();
                sent += 1;
            } else {
                match timeout(Duration::from_secs(3), outbox.recv()).await {
                    Ok(Some(m)) => sink.send(m).await.unwrap(),
                    _ => return sent,
                }
            }
        }
    });
    let mut lists = 0;
    let deadline = Instant::now() + Duration::from_secs(7);
    while Instant::now() < deadline {
        let Ok(Some(Ok(Message::Text(t)))) = timeout(Duration::from_millis(200), stream.next()).await else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        if v["type"] != "mcp" {
            continue;
        }
        assert_eq!(v["payload"]["method"], "tools/list", "{v}");
        lists += 1;
        let tools = [device_tool("self.fan.on"), device_tool("self.fan.off")];
        answers
            .send(mcp(json!({"jsonrpc": "2.0", "id": v["payload"]["id"], "result": {"tools": tools}})))
            .await
            .unwrap();
    }
    let sent = writer.await.unwrap();
    assert!(sent > 1000, "only {sent} notifications were sent");
    assert!((2..=6).contains(&lists), "{lists} listings for {sent} notifications in 3 s");
    a_tools_become(d.addr, &["device_aabbccddee0a_self_fan_off", "device_aabbccddee0a_self_fan_on"]).await;
    // The other device talks as before.
    assert_eq!(turn(&mut b, "ok").await.0, "ok");
    d.healthy();
}
