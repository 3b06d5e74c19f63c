//! The MCP server driven as its clients drive it: the stdio transport over an in-memory pipe,
//! and `/mcp` as a service of the gateway, each over a real daemon whose model is the scripted
//! fake LLM on 127.0.0.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chela_testkit::{FakeLlm, Step};
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use crate::channels::mcp::*;
use crate::daemon::Daemon;
use crate::gateway::{Gateway, Limits};
use crate::workspace::Workspace;

pub(super) const WAIT: Duration = Duration::from_secs(20);
pub(super) const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 50000);

pub(super) fn daemon(llm: &FakeLlm, dir: &tempfile::TempDir, settings: &[(&str, &str)]) -> Arc<Daemon> {
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    let base = llm.anthropic_base_url();
    let mut all = vec![
        ("llm.provider", "anthropic"),
        ("llm.base_url", base.as_str()),
        ("llm.api_key", "test-key"),
        ("llm.max_retries", "0"),
    ];
    all.extend_from_slice(settings);
    for (k, v) in all {
        crate::config::set_override(&ws, k, v).unwrap();
    }
    Arc::new(Daemon::load(ws).unwrap())
}

/// A client's end of `chela mcp serve`'s stdin and stdout.
pub(super) struct Pipe {
    pub(super) to: DuplexStream,
    from: BufReader<DuplexStream>,
    pub(super) served: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Pipe {
    pub(super) fn start(daemon: Arc<Daemon>) -> Pipe {
        let (to, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, from) = tokio::io::duplex(64 * 1024);
        let served = tokio::spawn(stdio::serve(daemon, server_in, server_out));
        Pipe { to, from: BufReader::new(from), served }
    }

    pub(super) async fn send(&mut self, msg: &Value) {
        self.to.write_all(format!("{msg}\n").as_bytes()).await.unwrap();
    }

    pub(super) async fn recv(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(WAIT, self.from.read_line(&mut line)).await.expect("an answer in time").unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    pub(super) async fn ask(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        self.recv().await
    }

    async fn handshake(&mut self, version: &str) -> Value {
        let init = self
            .ask(
                0,
                "initialize",
                json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "unit client", "version": "1"}}),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        init
    }
}

pub(super) fn names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
    n.sort();
    n
}

pub(super) fn modern(params: Value) -> Value {
    let mut p = params;
    p["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "modern-unit", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_client_lists_calls_and_chats_in_its_own_conversation() {
    let llm = FakeLlm::start(vec![Step::text("hello, MCP caller")]);
    let dir = tempfile::tempdir().unwrap();
    let mut pipe = Pipe::start(daemon(&llm, &dir, &[]));
    let init = pipe.handshake("2025-06-18").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "chela");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);

    let list = pipe.ask(1, "tools/list", json!({})).await;
    let served = names(&list);
    assert!(served.contains(&"memory_store".to_owned()) && served.contains(&"chat".to_owned()), "{served:?}");
    // Only the default groups: no file or web tools.
    assert!(!served.iter().any(|n| n.starts_with("file_") || n.starts_with("web_")), "{served:?}");
    let schema =
        &list["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "chat").unwrap()["inputSchema"];
    assert_eq!(schema["required"], json!(["message"]));

    let stored =
        pipe.ask(2, "tools/call", json!({"name": "memory_store", "arguments": {"content": "tea, no sugar"}})).await;
    assert_eq!(stored["result"]["isError"], false, "{stored}");
    let recalled = pipe.ask(3, "tools/call", json!({"name": "memory_recall", "arguments": {"query": "tea"}})).await;
    assert!(recalled["result"]["content"][0]["text"].as_str().unwrap().contains("tea, no sugar"), "{recalled}");

    let chat =
        pipe.ask(4, "tools/call", json!({"name": "chat", "arguments": {"message": "hi from an MCP client"}})).await;
    assert_eq!(chat["result"], json!({"content": [{"type": "text", "text": "hello, MCP caller"}], "isError": false}));
    let asked = llm.requests()[0].json.clone().unwrap().to_string();
    assert!(asked.contains("hi from an MCP client"), "{asked}");
    // The conversation is the client's: channel `mcp`, its name made a chat id.
    let ws = dir.path().join("ws/sessions");
    let files: Vec<String> =
        std::fs::read_dir(&ws).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(files.iter().any(|f| f.starts_with("mcp_unit_client")), "{files:?}");

    drop(pipe.to);
    tokio::time::timeout(WAIT, pipe.served).await.expect("stops when stdin closes").unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_switched_off_while_serving_disappears_with_a_notification() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(&llm, &dir, &[]);
    let mut pipe = Pipe::start(Arc::clone(&d));
    pipe.handshake("2025-11-25").await;
    assert!(names(&pipe.ask(1, "tools/list", json!({})).await).contains(&"memory_list".to_owned()));

    crate::config::set_override(d.workspace(), "caps.disabled", "memory").unwrap();
    let note = pipe.recv().await;
    assert_eq!(note, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    assert_eq!(names(&pipe.ask(2, "tools/list", json!({})).await), ["chat"]);
    let refused = pipe.ask(3, "tools/call", json!({"name": "memory_list", "arguments": {}})).await;
    assert_eq!(refused["error"]["code"], INVALID_PARAMS, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_requests_are_answered_without_a_handshake() {
    let llm = FakeLlm::start(vec![Step::text("stateless hello")]);
    let dir = tempfile::tempdir().unwrap();
    let mut pipe = Pipe::start(daemon(&llm, &dir, &[]));
    let found = pipe.ask(1, "server/discover", modern(json!({}))).await;
    assert_eq!(found["result"]["supportedVersions"], json!([MODERN]));
    assert_eq!(found["result"]["resultType"], "complete");
    assert_eq!(found["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "chela");

    let list = pipe.ask(2, "tools/list", modern(json!({}))).await;
    assert_eq!(list["result"]["resultType"], "complete");
    assert!(list["result"]["ttlMs"].as_u64().is_some(), "{list}");
    let chat = pipe.ask(3, "tools/call", modern(json!({"name": "chat", "arguments": {"message": "hi"}}))).await;
    assert_eq!(chat["result"]["content"][0]["text"], "stateless hello");
    assert_eq!(chat["result"]["resultType"], "complete");

    let mut old = modern(json!({}));
    old["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let refused = pipe.ask(4, "tools/list", old).await;
    assert_eq!(refused["error"]["code"], UNSUPPORTED_VERSION);
    assert_eq!(refused["error"]["data"], json!({"supported": [MODERN], "requested": "2099-01-01"}));
    // Without `_meta` and without a handshake there is no version to answer in.
    let bare = pipe.ask(5, "tools/list", json!({})).await;
    assert_eq!(bare["error"]["code"], INVALID_REQUEST);
    // 2026-07-28 has no ping.
    assert_eq!(pipe.ask(6, "ping", modern(json!({}))).await["error"]["code"], METHOD_NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_only_before_2025_06_18_and_unknown_versions_get_the_newest() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let mut pipe = Pipe::start(daemon(&llm, &dir, &[]));
    pipe.handshake("2025-03-26").await;
    pipe.send(&json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "nope/nothing"},
    ]))
    .await;
    let replies = pipe.recv().await;
    assert_eq!(replies[0], json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!(replies[1]["error"]["code"], METHOD_NOT_FOUND);
    assert_eq!(replies.as_array().unwrap().len(), 2);

    let mut newer = Pipe::start(daemon(&llm, &tempfile::tempdir().unwrap(), &[]));
    let init = newer.handshake("1999-01-01").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    newer.send(&json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])).await;
    let refused = newer.recv().await;
    assert_eq!(refused["error"]["code"], INVALID_REQUEST);
    assert!(refused["error"]["message"].as_str().unwrap().contains("batches"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_chat_gets_no_answer_and_other_requests_go_on() {
    let llm = FakeLlm::start(vec![Step::text("too late").delay_ms(15_000)]);
    let dir = tempfile::tempdir().unwrap();
    let mut pipe = Pipe::start(daemon(&llm, &dir, &[]));
    pipe.handshake("2025-11-25").await;
    pipe.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "chat", "arguments": {"message": "slow"}}}))
        .await;
    // Answered while the chat runs.
    assert_eq!(pipe.ask(8, "ping", json!({})).await["id"], 8);
    pipe.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})).await;
    // The next line is the ping's, not the cancelled call's.
    assert_eq!(pipe.ask(9, "ping", json!({})).await["id"], 9);
    let started = tokio::time::Instant::now();
    drop(pipe.to);
    tokio::time::timeout(WAIT, pipe.served).await.expect("stops").unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "the cancelled turn did not hold the exit");
    let mut rest = String::new();
    pipe.from.read_to_string_bounded(&mut rest).await;
    assert!(!rest.contains("too late"), "{rest}");
}

trait ReadRest {
    async fn read_to_string_bounded(&mut self, out: &mut String);
}

impl ReadRest for BufReader<DuplexStream> {
    async fn read_to_string_bounded(&mut self, out: &mut String) {
        use tokio::io::AsyncReadExt;
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.take(1 << 20).read_to_end(&mut buf)).await;
        out.push_str(&String::from_utf8_lossy(&buf));
    }
}

// ---- /mcp on the gateway, as a service ----

/// The token of a gateway made without one: every gateway needs one, loopback too.
pub(super) const LOCAL_TOKEN: &str = "local-token";

fn gateway(llm: &FakeLlm, dir: &tempfile::TempDir, listen: &str, token: Option<&str>) -> Arc<Gateway> {
    let d = daemon(llm, dir, &[]);
    Gateway::new(d, listen.parse().unwrap(), Some(token.unwrap_or(LOCAL_TOKEN).to_owned()), Limits::default())
}

pub(super) fn post(body: &Value, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let mut b = Request::builder().method("POST").uri("/mcp");
    let defaults = [
        ("host", "127.0.0.1:18789"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", "Bearer local-token"),
    ];
    for (k, v) in defaults {
        if !headers.iter().any(|(h, _)| *h == k) {
            b = b.header(k, v);
        }
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::from(body.to_string()))).unwrap()
}

pub(super) async fn call(gw: &Arc<Gateway>, mut req: Request<Full<Bytes>>) -> (StatusCode, hyper::HeaderMap, String) {
    if !req.headers().contains_key("authorization") {
        req.headers_mut().insert("authorization", format!("Bearer {LOCAL_TOKEN}").parse().unwrap());
    }
    let resp = gw.handle(PEER, req).await;
    let (parts, body) = resp.into_parts();
    let body = tokio::time::timeout(WAIT, body.collect()).await.unwrap().unwrap().to_bytes();
    (parts.status, parts.headers, String::from_utf8(body.to_vec()).unwrap())
}

fn init_body(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "http-unit", "version": "1"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sessions_are_opened_checked_and_ended() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&llm, &dir, "127.0.0.1:18789", None);
    let (status, headers, body) = call(&gw, post(&init_body("2025-06-18"), &[])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sid = headers.get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["result"]["protocolVersion"], "2025-06-18");

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, body) = call(&gw, post(&note, &[("mcp-session-id", &sid)])).await;
    assert_eq!((status, body.as_str()), (StatusCode::ACCEPTED, ""));

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let with = [("mcp-session-id", sid.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let (status, _, body) = call(&gw, post(&list, &with)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(names(&serde_json::from_str(&body).unwrap()).contains(&"memory_store".to_owned()));

    // No session id: 400; an unknown one: 404; a version the session did not agree on: 400.
    assert_eq!(call(&gw, post(&list, &[])).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(call(&gw, post(&list, &[("mcp-session-id", "feedface")])).await.0, StatusCode::NOT_FOUND);
    let wrong = [("mcp-session-id", sid.as_str()), ("mcp-protocol-version", "2025-03-26")];
    assert_eq!(call(&gw, post(&list, &wrong)).await.0, StatusCode::BAD_REQUEST);
    let bogus = [("mcp-session-id", sid.as_str()), ("mcp-protocol-version", "banana")];
    assert_eq!(call(&gw, post(&list, &bogus)).await.0, StatusCode::BAD_REQUEST);
    // Batches ended with 2025-06-18.
    let batch = json!([{"jsonrpc": "2.0", "id": 3, "method": "ping"}]);
    assert_eq!(call(&gw, post(&batch, &with)).await.0, StatusCode::BAD_REQUEST);

    // A GET is for an event stream only.
    let get = Request::builder().method("GET").uri("/mcp").header("host", "127.0.0.1:18789");
    let get = get.header("mcp-session-id", sid.as_str()).body(Full::new(Bytes::new())).unwrap();
    assert_eq!(call(&gw, get).await.0, StatusCode::NOT_ACCEPTABLE);
    let delete = || {
        Request::builder()
            .method("DELETE")
            .uri("/mcp")
            .header("host", "127.0.0.1:18789")
            .header("mcp-session-id", sid.as_str())
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    assert_eq!(call(&gw, delete()).await.0, StatusCode::NO_CONTENT);
    assert_eq!(call(&gw, delete()).await.0, StatusCode::NOT_FOUND);
    assert_eq!(call(&gw, post(&list, &with)).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_stateless_requests_sse_answers_and_the_session_bound() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&llm, &dir, "127.0.0.1:18789", None);
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": modern(json!({}))});
    let (status, _, body) = call(&gw, post(&list, &[("mcp-protocol-version", MODERN)])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["result"]["resultType"], "complete");
    // The header and `_meta` must agree.
    assert_eq!(call(&gw, post(&list, &[("mcp-protocol-version", "2025-11-25")])).await.0, StatusCode::BAD_REQUEST);
    let mut old = list.clone();
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2030-01-01");
    let (status, _, body) = call(&gw, post(&old, &[])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["code"], UNSUPPORTED_VERSION);

    // A client that takes only a stream gets one event.
    let (status, headers, body) = call(&gw, post(&list, &[("accept", "text/event-stream")])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("content-type").unwrap(), "text/event-stream");
    let data = body.strip_prefix("event: message\ndata: ").unwrap().trim_end();
    assert_eq!(serde_json::from_str::<Value>(data).unwrap()["id"], 5);

    for _ in 0..http::MAX_SESSIONS {
        assert_eq!(call(&gw, post(&init_body("2025-11-25"), &[])).await.0, StatusCode::OK);
    }
    let (status, _, body) = call(&gw, post(&init_body("2025-11-25"), &[])).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_off_loopback_needs_the_token_and_a_foreign_origin_is_refused() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    // Nothing is bound: the gateway only believes it listens there.
    let gw = gateway(&llm, &dir, "192.0.2.10:18789", Some("s3cret"));
    let host = [("host", "192.0.2.10:18789")];
    assert_eq!(call(&gw, post(&init_body("2025-11-25"), &host)).await.0, StatusCode::UNAUTHORIZED);
    let wrong = [("host", "192.0.2.10:18789"), ("authorization", "Bearer nope")];
    assert_eq!(call(&gw, post(&init_body("2025-11-25"), &wrong)).await.0, StatusCode::UNAUTHORIZED);
    let right = [("host", "192.0.2.10:18789"), ("authorization", "Bearer s3cret")];
    assert_eq!(call(&gw, post(&init_body("2025-11-25"), &right)).await.0, StatusCode::OK);

    let local = gateway(&llm, &tempfile::tempdir().unwrap(), "127.0.0.1:18789", None);
    let foreign = [("origin", "https://evil.example")];
    assert_eq!(call(&local, post(&init_body("2025-11-25"), &foreign)).await.0, StatusCode::FORBIDDEN);
    let own = [("origin", "http://127.0.0.1:18789")];
    assert_eq!(call(&local, post(&init_body("2025-11-25"), &own)).await.0, StatusCode::OK);
}

// ---- one batch path, cancellation and the GET stream ----

fn with_session<'a>(sid: &'a str, version: &'a str) -> [(&'a str, &'a str); 2] {
    [("mcp-session-id", sid), ("mcp-protocol-version", version)]
}

pub(super) async fn http_session(gw: &Arc<Gateway>, version: &str) -> String {
    let (status, headers, body) = call(gw, post(&init_body(version), &[])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sid = headers.get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(call(gw, post(&note, &with_session(&sid, version))).await.0, StatusCode::ACCEPTED);
    sid
}

fn slow_chat(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "chat", "arguments": {"message": "slow"}}})
}

/// The batch every transport must answer alike: a ping, a cancel of the slow chat (id 7), an
/// `initialize` (refused in a batch), an unknown method and a non-message.
fn mixed_batch() -> Value {
    json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}},
        {"jsonrpc": "2.0", "id": 3, "method": "nope/nothing"},
        42,
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_transports_take_a_batch_alike_and_apply_its_cancel() {
    // stdio
    let llm = FakeLlm::start(vec![Step::text("too late").delay_ms(15_000)]);
    let dir = tempfile::tempdir().unwrap();
    let mut pipe = Pipe::start(daemon(&llm, &dir, &[]));
    pipe.handshake("2025-03-26").await;
    let started = tokio::time::Instant::now();
    pipe.send(&slow_chat(7)).await;
    // The chat has reached the model before the cancel comes.
    tokio::time::timeout(WAIT, async {
        while llm.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await
        }
    })
    .await
    .unwrap();
    pipe.send(&mixed_batch()).await;
    let on_stdio = pipe.recv().await;
    // The cancelled chat is answered no more: the next line is this ping's.
    assert_eq!(pipe.ask(9, "ping", json!({})).await["id"], 9);
    drop(pipe.to);
    tokio::time::timeout(WAIT, pipe.served).await.expect("stops").unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "the cancelled turn was stopped");

    // HTTP
    let llm = FakeLlm::start(vec![Step::text("too late").delay_ms(15_000)]);
    let gw = gateway(&llm, &tempfile::tempdir().unwrap(), "127.0.0.1:18789", None);
    let sid = http_session(&gw, "2025-03-26").await;
    let started = tokio::time::Instant::now();
    let chat = tokio::spawn({
        let (gw, sid) = (Arc::clone(&gw), sid.clone());
        async move { call(&gw, post(&slow_chat(7), &with_session(&sid, "2025-03-26"))).await }
    });
    tokio::time::timeout(WAIT, async {
        while llm.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await
        }
    })
    .await
    .unwrap();
    let (status, _, body) = call(&gw, post(&mixed_batch(), &with_session(&sid, "2025-03-26"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let on_http: Value = serde_json::from_str(&body).unwrap();
    // No response for the cancelled call: 202 and no body, long before the model's answer.
    let (status, _, body) = tokio::time::timeout(WAIT, chat).await.unwrap().unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::ACCEPTED, ""));
    assert!(started.elapsed() < Duration::from_secs(10));

    assert_eq!(on_stdio, on_http, "the transports answer a batch alike");
    let replies = on_http.as_array().unwrap();
    assert_eq!(replies.len(), 4, "{on_http}");
    assert_eq!(replies[0], json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!((replies[1]["id"].clone(), replies[1]["error"]["code"].clone()), (json!(2), json!(INVALID_REQUEST)));
    assert_eq!(replies[2]["error"]["code"], METHOD_NOT_FOUND);
    assert_eq!(replies[3]["error"]["code"], INVALID_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_cancelled_or_abandoned_call_stops_its_turn() {
    let llm = FakeLlm::start(vec![
        Step::text("too late").delay_ms(15_000),
        Step::text("also too late").delay_ms(15_000),
        Step::text("the third answer"),
    ]);
    let gw = gateway(&llm, &tempfile::tempdir().unwrap(), "127.0.0.1:18789", None);
    let sid = http_session(&gw, "2025-11-25").await;
    let headers = with_session(&sid, "2025-11-25");
    let started = tokio::time::Instant::now();

    // Cancelled by a notification: its POST ends with 202 and no response.
    let first = tokio::spawn({
        let (gw, sid) = (Arc::clone(&gw), sid.clone());
        async move { call(&gw, post(&slow_chat(1), &with_session(&sid, "2025-11-25"))).await }
    });
    tokio::time::timeout(WAIT, async {
        while llm.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await
        }
    })
    .await
    .unwrap();
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "changed my mind"}});
    assert_eq!(call(&gw, post(&cancel, &headers)).await.0, StatusCode::ACCEPTED);
    let (status, _, body) = tokio::time::timeout(WAIT, first).await.unwrap().unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::ACCEPTED, ""));

    // Abandoned: the client goes away, so hyper drops the handler.
    let second = tokio::spawn({
        let (gw, sid) = (Arc::clone(&gw), sid.clone());
        async move { call(&gw, post(&slow_chat(2), &with_session(&sid, "2025-11-25"))).await }
    });
    tokio::time::timeout(WAIT, async {
        while llm.requests().len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await
        }
    })
    .await
    .unwrap();
    second.abort();
    assert!(second.await.unwrap_err().is_cancelled());

    // Both turns were stopped: the third call, in the same conversation and so queued behind
    // them otherwise, is answered at once.
    let (status, _, body) = call(&gw, post(&slow_chat(3), &headers)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["result"]["content"][0]["text"], "the third answer");
    assert!(started.elapsed() < Duration::from_secs(12), "{:?}", started.elapsed());
    // A cancel naming nothing in flight changes nothing.
    let stray = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "never-sent"}});
    assert_eq!(call(&gw, post(&stray, &headers)).await.0, StatusCode::ACCEPTED);
    let ping = json!({"jsonrpc": "2.0", "id": 4, "method": "ping"});
    let pong: Value = serde_json::from_str(&call(&gw, post(&ping, &headers)).await.2).unwrap();
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 4, "result": {}}));
}

fn get_stream(sid: Option<&str>) -> Request<Full<Bytes>> {
    let mut b = Request::builder()
        .method("GET")
        .uri("/mcp")
        .header("host", "127.0.0.1:18789")
        .header("accept", "text/event-stream")
        .header("authorization", format!("Bearer {LOCAL_TOKEN}"));
    if let Some(sid) = sid {
        b = b.header("mcp-session-id", sid);
    }
    b.body(Full::new(Bytes::new())).unwrap()
}

/// The next data chunk of a stream that is not a keep-alive comment; `None` when it ended.
pub(super) async fn next_event(
    body: &mut http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>,
) -> Option<String> {
    // One deadline for the event, not one per frame: keep-alive comments must not stretch a
    // missing event into minutes.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let frame = tokio::time::timeout_at(deadline, body.frame()).await.expect("an event in time")?.unwrap();
        let text = String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap();
        if !text.starts_with(':') {
            return Some(text);
        }
    }
}

/// On one thread the stream's watcher cannot run before the change below: it must still be
/// announced (the watcher once took its first look when it first ran, and missed it).
#[tokio::test(flavor = "current_thread")]
async fn a_change_made_as_the_get_stream_opens_is_announced() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(&llm, &dir, &[]);
    let gw =
        Gateway::new(Arc::clone(&d), "127.0.0.1:18789".parse().unwrap(), Some(LOCAL_TOKEN.into()), Limits::default());
    let sid = http_session(&gw, "2025-11-25").await;
    let mut stream = gw.handle(PEER, get_stream(Some(&sid))).await.into_body();
    crate::config::set_override(d.workspace(), "caps.disabled", "memory").unwrap();
    d.reload().unwrap();
    let event = tokio::time::timeout(WAIT, next_event(&mut stream)).await.expect("the change announced in time");
    assert!(event.expect("the stream is open").contains("notifications/tools/list_changed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_the_get_stream_announces_changes_one_per_session_and_ends() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(&llm, &dir, &[]);
    let gw =
        Gateway::new(Arc::clone(&d), "127.0.0.1:18789".parse().unwrap(), Some(LOCAL_TOKEN.into()), Limits::default());
    // Without a session there is no stream; an unknown one is 404.
    assert_eq!(call(&gw, get_stream(None)).await.0, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(call(&gw, get_stream(Some("feedface"))).await.0, StatusCode::NOT_FOUND);
    let sid = http_session(&gw, "2025-11-25").await;

    let resp = gw.handle(PEER, get_stream(Some(&sid))).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut stream = resp.into_body();
    crate::config::set_override(d.workspace(), "caps.disabled", "memory").unwrap();
    d.reload().unwrap();
    let event = next_event(&mut stream).await.unwrap();
    let data = event.strip_prefix("event: message\ndata: ").unwrap().trim_end();
    assert_eq!(
        serde_json::from_str::<Value>(data).unwrap(),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );

    // A second GET takes over; the first stream ends.
    let mut second = gw.handle(PEER, get_stream(Some(&sid))).await.into_body();
    assert_eq!(next_event(&mut stream).await, None);
    crate::config::set_override(d.workspace(), "caps.disabled", "chat").unwrap();
    d.reload().unwrap();
    assert!(next_event(&mut second).await.unwrap().contains("list_changed"));

    // DELETE ends the session's stream.
    let delete = Request::builder()
        .method("DELETE")
        .uri("/mcp")
        .header("host", "127.0.0.1:18789")
        .header("mcp-session-id", sid.as_str())
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(call(&gw, delete).await.0, StatusCode::NO_CONTENT);
    assert_eq!(next_event(&mut second).await, None);

    // The daemon stopping ends every stream.
    let other = http_session(&gw, "2025-06-18").await;
    let mut third = gw.handle(PEER, get_stream(Some(&other))).await.into_body();
    d.shutdown().trigger();
    assert_eq!(next_event(&mut third).await, None);
}

/// The stream's watcher belongs to the gateway: a gateway dropped while the daemon runs on (a
/// restart of the gateway alone) leaves no watcher behind holding the sessions and their
/// streams, so the open stream ends with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_the_get_stream_watcher_ends_with_its_gateway() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(&llm, &dir, &[]);
    let gw =
        Gateway::new(Arc::clone(&d), "127.0.0.1:18789".parse().unwrap(), Some(LOCAL_TOKEN.into()), Limits::default());
    let sid = http_session(&gw, "2025-11-25").await;
    let mut stream = gw.handle(PEER, get_stream(Some(&sid))).await.into_body();
    assert_eq!(Arc::strong_count(&gw), 1);
    drop(gw);
    assert_eq!(next_event(&mut stream).await, None, "the stream ended with the gateway");
    assert!(!d.shutdown().is_triggered(), "the daemon did not stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_get_stream_nobody_reads_holds_at_most_its_queue() {
    let llm = FakeLlm::start(vec![]);
    let gw = gateway(&llm, &tempfile::tempdir().unwrap(), "127.0.0.1:18789", None);
    let sid = http_session(&gw, "2025-11-25").await;
    let stream = gw.handle(PEER, get_stream(Some(&sid))).await;
    let big = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x".repeat(64 * 1024)}});
    // 1000 messages of 64 KiB: 64 MiB if they were kept.
    for _ in 0..1000 {
        assert_eq!(gw.mcp.notify_all(&big), 1, "the stream stays open");
    }
    assert_eq!(gw.mcp.queued(&sid), Some(http::STREAM_QUEUE));
    // Once the client is gone the stream is forgotten at the next message.
    drop(stream);
    assert_eq!(gw.mcp.notify_all(&big), 0);
    assert_eq!(gw.mcp.queued(&sid), None);
}
