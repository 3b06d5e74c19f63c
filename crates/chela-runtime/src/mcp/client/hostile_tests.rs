//! The HTTP client against hostile or broken servers, written here with tokio on 127.0.0.1:
//! an endless event stream, a 50 MB body, a wrong Content-Type, a session id that changes,
//! 500s, a redirect, an expired session. Each must end in a clear tool error (or, for the
//! session cases, in the right behaviour), with Chela still up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_core::cap::{Caller, Scope};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Clients;
use crate::config::McpServer;
use crate::net::{ClientOptions, HttpClient};
use crate::testing::Fixture;
use crate::tools::ToolErrorKind;

/// One request as the fake server saw it.
#[derive(Clone, Debug)]
struct Seen {
    http_method: String,
    session: Option<String>,
    rpc: Value,
}

/// What the fake server does with a request.
enum Act {
    /// 200 with a JSON body and maybe a session id.
    Json(Value, Option<&'static str>),
    /// Any status with a body and extra headers.
    Status(u16, &'static str, Vec<(&'static str, String)>),
    /// 200 text/event-stream that sends keep-alive comments forever.
    EndlessStream,
    /// 200 application/json announcing and sending 50 MB.
    Huge,
}

type Handler = Arc<dyn Fn(&Seen) -> Act + Send + Sync>;

/// A fake MCP server; returns its URL and what it saw.
async fn hostile(handler: Handler) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else { return };
            let (handler, log) = (Arc::clone(&handler), Arc::clone(&log));
            tokio::spawn(async move {
                let _ = serve(sock, handler, log).await;
            });
        }
    });
    (url, seen)
}

async fn serve(mut sock: tokio::net::TcpStream, handler: Handler, log: Arc<Mutex<Vec<Seen>>>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        // The head, then the body by its length: enough HTTP/1.1 for what Chela sends.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = sock.read(&mut chunk).await?;
            if n == 0 || buf.len() > 64 * 1024 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let header = |name: &str| {
            head.lines().find_map(|l| {
                l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_owned())
            })
        };
        let len: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 4096];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body: Vec<u8> = buf.drain(..head_end + len).skip(head_end).collect();
        let seen = Seen {
            http_method: head.split(' ').next().unwrap_or("").to_owned(),
            session: header("mcp-session-id"),
            rpc: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        log.lock().unwrap().push(seen.clone());
        match handler(&seen) {
            Act::Json(v, session) => {
                let body = v.to_string();
                let sid = session.map(|s| format!("mcp-session-id: {s}\r\n")).unwrap_or_default();
                let out = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{sid}content-length: {}\r\n\r\n{body}",
                    body.len()
                );
                sock.write_all(out.as_bytes()).await?;
            }
            Act::Status(code, body, headers) => {
                let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
                let out = format!("HTTP/1.1 {code} X\r\n{extra}content-length: {}\r\n\r\n{body}", body.len());
                sock.write_all(out.as_bytes()).await?;
            }
            Act::EndlessStream => {
                sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n").await?;
                // Until Chela hangs up: a write error ends it. Bounded anyway.
                for _ in 0..100_000 {
                    sock.write_all(b": still thinking\n\n").await?;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                return Ok(());
            }
            Act::Huge => {
                let size = 50 * 1024 * 1024;
                let head =
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n");
                sock.write_all(head.as_bytes()).await?;
                let block = vec![b' '; 64 * 1024];
                for _ in 0..size / block.len() {
                    sock.write_all(&block).await?;
                }
                return Ok(());
            }
        }
    }
}

fn method(s: &Seen) -> &str {
    s.rpc["method"].as_str().unwrap_or("")
}

fn answer(s: &Seen, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": s.rpc["id"], "result": result})
}

/// A handshake-era server with one tool `t`; `call` decides what a `tools/call` gets.
fn legacy(call: impl Fn(&Seen) -> Act + Send + Sync + 'static) -> Handler {
    Arc::new(move |s: &Seen| match method(s) {
        "server/discover" => Act::Status(400, "unsupported", vec![]),
        "initialize" => {
            Act::Json(answer(s, json!({"protocolVersion": "2025-06-18", "capabilities": {}})), Some("sess-1"))
        }
        "tools/list" => {
            Act::Json(answer(s, json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]})), None)
        }
        "tools/call" => call(s),
        _ if s.http_method == "GET" => Act::Status(405, "", vec![]),
        _ => Act::Status(202, "", vec![]),
    })
}

async fn call_tool(url: String, timeout: u64) -> (crate::tools::ToolResult, Clients) {
    let mut cfg = McpServer::default();
    cfg.url = url;
    cfg.timeout_secs = timeout;
    let map: BTreeMap<String, McpServer> = [("h".to_owned(), cfg)].into();
    let clients = Clients::new(&map, &HttpClient::new(ClientOptions::default()));
    let fx = Fixture::new(&[]);
    clients.ensure(&fx.toolbox).await;
    let r = fx.toolbox.call(&fx.ctx(), "mcp_h_t", "{}", Caller::Model, Scope::default()).await;
    (r, clients)
}

#[tokio::test]
async fn an_endless_event_stream_ends_at_the_call_timeout() {
    let (url, seen) = hostile(legacy(|_| Act::EndlessStream)).await;
    let started = tokio::time::Instant::now();
    let (r, clients) = call_tool(url, 2).await;
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::TimedOut, "{e}");
    assert!(e.0.contains("did not answer tools/call within 2"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // The server is told the call is off.
    for _ in 0..100 {
        if seen.lock().unwrap().iter().any(|s| method(s) == "notifications/cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.lock().unwrap().iter().any(|s| method(s) == "notifications/cancelled"));
    clients.shutdown().await;
}

#[tokio::test]
async fn a_50_mb_body_is_refused_by_its_length() {
    let (url, _) = hostile(legacy(|_| Act::Huge)).await;
    let (r, _c) = call_tool(url, 30).await;
    let e = r.unwrap_err();
    assert!(e.0.contains("over 16777216 bytes"), "{e}");
}

#[tokio::test]
async fn a_wrong_content_type_500s_and_redirects_are_clear_errors() {
    let (url, _) =
        hostile(legacy(|_| Act::Status(200, "<html>hi</html>", vec![("content-type", "text/html".into())]))).await;
    let e = call_tool(url, 10).await.0.unwrap_err();
    assert!(e.0.contains("Content-Type `text/html`") && e.0.contains("application/json or text/event-stream"), "{e}");

    let (url, _) = hostile(legacy(|_| Act::Status(500, "boom\n  inside", vec![]))).await;
    let e = call_tool(url, 10).await.0.unwrap_err();
    assert!(e.0.contains("answered tools/call with HTTP 500: boom inside"), "{e}");

    let (url, _) =
        hostile(legacy(|_| Act::Status(307, "", vec![("location", "http://example.invalid/mcp".into())]))).await;
    let e = call_tool(url, 10).await.0.unwrap_err();
    assert!(e.0.contains("redirects (307) to http://example.invalid/mcp") && e.0.contains("mcp.servers.h.url"), "{e}");
}

#[tokio::test]
async fn a_session_id_that_changes_is_not_followed() {
    // Every answer names a new session; Chela keeps the one the handshake gave.
    let n = Arc::new(Mutex::new(0));
    let handler = legacy(move |s| {
        *n.lock().unwrap() += 1;
        let other = if *n.lock().unwrap() % 2 == 0 { "sess-x" } else { "sess-y" };
        Act::Json(answer(s, json!({"content": [{"type": "text", "text": "ok"}]})), Some(other))
    });
    let (url, seen) = hostile(handler).await;
    let (r, clients) = call_tool(url.clone(), 10).await;
    assert_eq!(r.unwrap(), "ok");
    let seen = seen.lock().unwrap().clone();
    let later: Vec<_> = seen.iter().filter(|s| !matches!(method(s), "server/discover" | "initialize")).collect();
    assert!(!later.is_empty());
    assert!(later.iter().all(|s| s.session.as_deref() == Some("sess-1")), "{later:?}");
    clients.shutdown().await;
}

#[tokio::test]
async fn an_expired_session_is_renewed_once() {
    let inits = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&inits);
    let handler: Handler = Arc::new(move |s: &Seen| match method(s) {
        "server/discover" => Act::Status(404, "", vec![]),
        "initialize" => {
            *counter.lock().unwrap() += 1;
            let sid = if *counter.lock().unwrap() == 1 { "old" } else { "new" };
            Act::Json(answer(s, json!({"protocolVersion": "2025-06-18", "capabilities": {}})), Some(sid))
        }
        _ if s.http_method != "POST" => Act::Status(405, "", vec![]),
        "tools/list" => Act::Json(answer(s, json!({"tools": [{"name": "t"}]})), None),
        // The server forgot session `old` after the list.
        "tools/call" if s.session.as_deref() == Some("old") => Act::Status(404, "no such session", vec![]),
        "tools/call" => Act::Json(answer(s, json!({"content": [{"type": "text", "text": "renewed"}]})), None),
        _ => Act::Status(202, "", vec![]),
    });
    let (url, seen) = hostile(handler).await;
    let (r, clients) = call_tool(url, 10).await;
    assert_eq!(r.unwrap(), "renewed");
    assert_eq!(*inits.lock().unwrap(), 2);
    clients.shutdown().await;
    // The session is ended on shutdown.
    assert!(seen.lock().unwrap().iter().any(|s| s.http_method == "DELETE" && s.session.as_deref() == Some("new")));
}
