//! The abuse corpus of the gateway: what a hostile client or a hostile web page can send to
//! `chela run`. Every test runs the real binary on its own workspace (cleared environment, an
//! ephemeral 127.0.0.1 port) against the scripted fake LLM, and checks two things: the attack
//! is refused with a bound, and the daemon still answers afterwards.
//!
//! The cases that need the gateway's timers shortened (slow request heads) are service-level
//! tests in `src/gateway/tests_abuse.rs`.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use chela_testkit::daemon::{Running, command};
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

/// The API key in the workspace's `chela.toml`: no response may ever carry it.
const SECRET: &str = "sk-ant-abuse-gateway-secret";
/// `gateway.token`: the gateway asks for it on loopback too.
const TOKEN: &str = "abuse-gateway-token";

/// `chela run` on a fresh workspace, killed when dropped.
struct Daemon {
    // First, so the daemon is killed before its folders and its model go.
    _run: Running,
    _dir: tempfile::TempDir,
    _home: tempfile::TempDir,
    _llm: FakeLlm,
    addr: SocketAddr,
    root: std::path::PathBuf,
}

impl Daemon {
    fn start(script: Vec<Step>) -> Daemon {
        let llm = FakeLlm::start(script);
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let config = dir.path().join("chela.toml");
        let text = format!(
            "[llm]\nprovider = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"{SECRET}\"\n\n[gateway]\ntoken = \"{TOKEN}\"\n",
            llm.anthropic_base_url()
        );
        std::fs::write(&config, text).unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut c = command(env!("CARGO_BIN_EXE_chela"), dir.path(), home.path());
        c.arg("run").env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0");
        let run = Running::start(c, Duration::from_secs(20));
        let (addr, root) = (run.addr(), dir.path().to_path_buf());
        Daemon { _run: run, _dir: dir, _home: home, _llm: llm, addr, root }
    }

    /// One raw HTTP/1.1 request with the token (closing the connection); the status and the body.
    fn http(&self, head: &str, body: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let req = format!(
            "{head}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        // The server may answer (413) before the whole body is taken; that is fine.
        let _ = s.write_all(body);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        assert!(!text.contains(SECRET), "a response carried the API key: {text}");
        (status, body)
    }

    fn get(&self, path: &str) -> (u16, String) {
        self.http(&format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1"), b"")
    }

    /// Still serving.
    fn healthy(&self) {
        assert_eq!(self.get("/health"), (200, r#"{"status":"ok"}"#.to_owned()));
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

type Client = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

async fn connect(addr: SocketAddr) -> Client {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    tokio_tungstenite::client_async(format!("ws://{addr}/ws?token={TOKEN}"), stream).await.expect("upgrade").0
}

/// Whether the server ended the connection (an error, a close frame, or the end of the stream)
/// within 20 s, skipping anything else it sent first.
async fn closed_by_server(c: &mut Client) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, c.next()).await {
            Err(_) => return false,
            Ok(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => return true,
            Ok(Some(Ok(_))) => {}
        }
    }
}

#[test]
fn an_oversize_websocket_message_ends_that_connection_only() {
    let d = Daemon::start(vec![Step::text("fine")]);
    runtime().block_on(async {
        let mut c = connect(d.addr).await;
        let huge = format!(r#"{{"type":"message","content":"{}"}}"#, "x".repeat(2 * 1024 * 1024));
        // The write itself may fail once the server has closed.
        let _ = c.send(Message::text(huge)).await;
        assert!(closed_by_server(&mut c).await, "a 2 MiB message was not refused");
        let mut c = connect(d.addr).await;
        c.send(Message::text(r#"{"type":"message","content":"hi"}"#)).await.unwrap();
        loop {
            let Some(Ok(Message::Text(t))) = c.next().await else { panic!("the connection ended") };
            if t.as_str().contains(r#""type":"response""#) {
                assert!(t.as_str().contains("fine"), "{t}");
                break;
            }
        }
    });
    d.healthy();
}

#[test]
fn an_endless_fragmented_message_is_cut_at_the_message_bound() {
    let d = Daemon::start(vec![]);
    runtime().block_on(async {
        let mut c = connect(d.addr).await;
        let piece = vec![b'a'; 16 * 1024];
        let mut sent = 0usize;
        let mut first = true;
        // 64 MiB if nobody stopped it; the bound is 256 KiB.
        for _ in 0..4096 {
            let op = if first { OpCode::Data(Data::Text) } else { OpCode::Data(Data::Continue) };
            first = false;
            if c.send(Message::Frame(Frame::message(piece.clone(), op, false))).await.is_err() {
                break;
            }
            sent += piece.len();
            if sent > 1024 * 1024 {
                break;
            }
        }
        assert!(closed_by_server(&mut c).await, "the fragments were taken without end ({sent} bytes)");
    });
    d.healthy();
}

#[test]
fn a_crowd_of_connections_is_bounded_and_the_daemon_still_answers() {
    let d = Daemon::start(vec![]);
    // Far more than the 256 the gateway keeps; each holds its connection open, sending nothing.
    let crowd: Vec<TcpStream> = (0..1000).filter_map(|_| TcpStream::connect(d.addr).ok()).collect();
    assert!(crowd.len() >= 900, "only {} connections could be opened", crowd.len());
    // Those past the bound are closed at once: reading them ends instead of waiting.
    let mut closed = 0;
    for s in &crowd[600..] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        if matches!((&*s).read(&mut b), Ok(0) | Err(_)) {
            closed += 1;
        }
    }
    assert!(closed >= 390, "only {closed} of the 400 newest connections were closed");
    drop(crowd);
    // The freed slots serve again (the kernel needs a moment to tell the server they closed).
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect(d.addr).is_ok_and(|mut s| {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        !out.starts_with("HTTP/1.1 200")
    }) {
        assert!(Instant::now() < deadline, "the gateway did not recover from the crowd");
        std::thread::sleep(Duration::from_millis(50));
    }
    d.healthy();
}

#[test]
fn bad_json_huge_chat_ids_and_bodies_are_refused_with_sentences() {
    let d = Daemon::start(vec![]);
    runtime().block_on(async {
        let mut c = connect(d.addr).await;
        for sent in
            ["{{{{".to_owned(), format!(r#"{{"type":"message","content":"x","chat_id":"{}"}}"#, "c".repeat(200_000))]
        {
            c.send(Message::text(sent)).await.unwrap();
            let Some(Ok(Message::Text(t))) = c.next().await else { panic!("no answer") };
            assert!(t.as_str().contains(r#""type":"error""#), "{t}");
            assert!(t.len() < 1000, "the error does not echo the input: {} bytes", t.len());
        }
    });
    let post = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json";
    let (status, body) = d.http(post, b"{\"messages\": [");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not a chat completion request"), "{body}");
    let (status, body) = d.http(post, &vec![b' '; 2 * 1024 * 1024]);
    assert_eq!(status, 413, "{body}");
    d.healthy();
}

#[test]
fn names_in_api_paths_never_lead_outside_their_folder() {
    let d = Daemon::start(vec![]);
    std::fs::write(d.root.join("outside.jsonl"), "{\"not\":\"a session\"}\n").unwrap();
    for path in [
        "/api/sessions/..%2Foutside",
        "/api/sessions/../outside",
        "/api/sessions/..",
        "/api/sessions/.%2E",
        "/api/sessions/%2Fetc%2Fpasswd",
        "/api/memory/..%2Fchela.toml",
        "/api/memory/../chela.toml",
        "/api/memory/chela.toml",
        "/api/memory/%2e%2e%2fchela.toml",
        "/api/memory/memory/../../chela.toml",
        "/api/memory/2026-01-01.md%2F..%2F..%2Fchela.toml",
    ] {
        let (status, body) = d.get(path);
        assert!(status == 400 || status == 404, "{path}: {status} {body}");
        assert!(body.contains("\"error\""), "{path}: {body}");
    }
    let (status, _) = d.http(
        "PUT /api/memory/..%2Fchela.toml HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json",
        br#"{"content":"[llm]\nprovider = \"openai\"\n"}"#,
    );
    assert_eq!(status, 404);
    let config = std::fs::read_to_string(d.root.join("chela.toml")).unwrap();
    assert!(config.contains(SECRET), "chela.toml is untouched");
    let (status, _) = d.http("DELETE /api/sessions/..%2Foutside HTTP/1.1\r\nHost: 127.0.0.1", b"");
    assert_eq!(status, 400);
    assert!(d.root.join("outside.jsonl").exists());
    d.healthy();
}

#[test]
fn another_sites_page_cannot_use_the_loopback_gateway() {
    let d = Daemon::start(vec![]);
    let before = std::fs::read_to_string(d.root.join("chela.toml")).unwrap();
    // CSRF: a form or fetch from another origin that changes a setting.
    let (status, body) = d.http(
        "POST /api/config HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nContent-Type: text/plain",
        br#"{"key":"llm.base_url","value":"http://evil.example/v1"}"#,
    );
    assert_eq!(status, 403, "{body}");
    // The same page opening a WebSocket to it.
    let (status, _) = d.http(
        "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        b"",
    );
    assert_eq!(status, 403);
    // DNS rebinding: evil.example re-pointed at 127.0.0.1 reads from the page's own origin.
    let (status, body) = d.http("GET /api/config HTTP/1.1\r\nHost: evil.example", b"");
    assert_eq!(status, 403, "{body}");
    assert!(!d.root.join("overrides.toml").exists(), "nothing was stored");
    assert_eq!(std::fs::read_to_string(d.root.join("chela.toml")).unwrap(), before);
    d.healthy();
}

#[test]
fn one_client_naming_many_chats_does_not_lock_new_conversations_out() {
    // sessions.max_live is 64: one WebSocket fills it with quiet conversations.
    let mut script: Vec<Step> = (0..64).map(|i| Step::text(format!("answer {i}"))).collect();
    script.push(Step::text("the one-shot answer"));
    let d = Daemon::start(script);
    runtime().block_on(async {
        let mut c = connect(d.addr).await;
        for i in 0..64 {
            let msg = serde_json::json!({"type": "message", "content": "hi", "chat_id": format!("hog{i}")});
            c.send(Message::text(msg.to_string())).await.unwrap();
            loop {
                let Some(Ok(Message::Text(t))) = c.next().await else { panic!("the connection ended") };
                if t.as_str().contains(r#""type":"response""#) || t.as_str().contains(r#""type":"error""#) {
                    assert!(t.as_str().contains(&format!("answer {i}")), "{t}");
                    break;
                }
            }
        }
    });
    // A new conversation from someone else: a one-shot request takes a quiet one's slot.
    let body = r#"{"model":"chela","messages":[{"role":"user","content":"hello"}]}"#;
    let head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json";
    let (status, body) = d.http(head, body.as_bytes());
    assert_eq!(status, 200, "the new conversation was refused: {body}");
    assert!(body.contains("the one-shot answer"), "{body}");
    // The conversations that were closed to make room are still on disk, whole.
    let hog0 = std::fs::read_to_string(d.root.join("sessions/ws_hog0.jsonl")).unwrap_or_default();
    assert!(hog0.contains("answer 0"), "{hog0}");
}
