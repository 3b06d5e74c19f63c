//! The gateway as a service (requests handed to [`Gateway::handle`]) and, for the WebSocket,
//! over a real 127.0.0.1 socket; the model is the scripted fake LLM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::*;
use crate::daemon::Daemon;
use crate::workspace::Workspace;

pub(super) struct Harness {
    pub dir: tempfile::TempDir,
    pub llm: FakeLlm,
    pub gw: Arc<Gateway>,
    pub daemon: Arc<Daemon>,
    /// The token [`Harness::call`] adds to requests that carry none: [`TOKEN`] when the
    /// harness was built without one (every gateway has a token).
    pub auto_token: Option<&'static str>,
}

/// `gateway.token` of a harness built with `None`.
pub(super) const TOKEN: &str = "harness-token";

pub(super) const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 50000);

/// A daemon over the fake LLM and a gateway "listening" on `listen` (nothing is bound).
pub(super) fn harness(script: Vec<Step>, listen: &str, token: Option<&str>) -> Harness {
    harness_with(script, listen, token, Limits::default())
}

pub(super) fn harness_with(script: Vec<Step>, listen: &str, token: Option<&str>, limits: Limits) -> Harness {
    let llm = FakeLlm::start(script);
    let settings = [
        ("llm.provider", "anthropic".to_owned()),
        ("llm.base_url", llm.anthropic_base_url()),
        ("llm.api_key", "test-key".to_owned()),
        ("llm.max_retries", "0".to_owned()),
    ];
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    build(llm, &settings, listen, token, limits)
}

/// A daemon with only `settings` in its runtime layer (no model unless they name one).
pub(super) fn harness_with_settings(script: Vec<Step>, settings: &[(&str, &str)]) -> Harness {
    build(FakeLlm::start(script), settings, "127.0.0.1:18789", None, Limits::default())
}

fn build(llm: FakeLlm, settings: &[(&str, &str)], listen: &str, token: Option<&str>, limits: Limits) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    for (k, v) in settings {
        crate::config::set_override(&ws, k, v).unwrap();
    }
    let daemon = Arc::new(Daemon::load(ws).unwrap());
    let auto_token = token.is_none().then_some(TOKEN);
    let token = token.or(auto_token).map(str::to_owned);
    let gw = Gateway::new(Arc::clone(&daemon), listen.parse().unwrap(), token, limits);
    Harness { dir, llm, gw, daemon, auto_token }
}

impl Harness {
    /// Serves on a real 127.0.0.1 port; returns its address.
    pub async fn serve(&self) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(Arc::clone(&self.gw).run(listener));
        addr
    }

    pub async fn call(&self, mut req: Request<Full<Bytes>>) -> (StatusCode, hyper::HeaderMap, String) {
        if let Some(t) = self.auto_token
            && !req.headers().contains_key("authorization")
        {
            req.headers_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let resp = self.gw.handle(PEER, req).await;
        let (parts, body) = resp.into_parts();
        let body = tokio::time::timeout(Duration::from_secs(20), body.collect()).await.expect("a whole body in time");
        (parts.status, parts.headers, String::from_utf8(body.unwrap().to_bytes().to_vec()).unwrap())
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let (status, _, body) = self.call(req("GET", path, "")).await;
        (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")))
    }

    pub async fn send(&self, method: &str, path: &str, body: &str) -> (StatusCode, Value) {
        let (status, _, body) = self.call(req(method, path, body)).await;
        (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")))
    }
}

/// A request as a local client sends it.
pub(super) fn req(method: &str, path: &str, body: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1:18789")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap()
}

#[tokio::test]
async fn health_says_ok_and_unknown_paths_and_methods_are_sentences() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    assert_eq!(h.get("/health").await, (StatusCode::OK, json!({"status": "ok"})));
    let (status, body) = h.get("/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["error"].as_str().unwrap().contains("/nowhere"), "{body}");
    let (status, body) = h.send("POST", "/health", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(body["error"].as_str().unwrap().contains("POST"), "{body}");
}

#[tokio::test]
async fn models_lists_chela() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (status, body) = h.get("/v1/models").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["data"][0]["id"], "chela");
    assert_eq!(body["object"], "list");
}

#[tokio::test]
async fn a_completion_answers_the_last_user_message_in_the_named_session() {
    let h = harness(vec![Step::text("first answer"), Step::text("second answer")], "127.0.0.1:18789", None);
    let ask = |text: &str| {
        json!({"model": "chela", "user": "script-1", "messages": [
            {"role": "system", "content": "ignored: Chela has its own"},
            {"role": "user", "content": [{"type": "text", "text": text}]},
        ]})
        .to_string()
    };
    let (status, body) = h.send("POST", "/v1/chat/completions", &ask("question one")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"], json!({"role": "assistant", "content": "first answer"}));
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let (_, body) = h.send("POST", "/v1/chat/completions", &ask("question two")).await;
    assert_eq!(body["choices"][0]["message"]["content"], "second answer");
    // The second request carried the first exchange: the session is Chela's.
    let sent = h.llm.requests()[1].json.clone().unwrap().to_string();
    assert!(sent.contains("question one") && sent.contains("first answer"), "{sent}");
    assert!(h.daemon.workspace().session_path("api", "script-1").exists());
}

#[tokio::test]
async fn a_completion_without_a_session_is_one_shot_and_is_archived() {
    let h = harness(vec![Step::text("once")], "127.0.0.1:18789", None);
    let body = json!({"model": "chela", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let (status, reply) = h.send("POST", "/v1/chat/completions", &body).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], "once");
    let sessions = h.daemon.workspace().sessions_dir();
    let live: Vec<_> = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert!(live.is_empty(), "no live session is left: {live:?}");
    let archived = std::fs::read_dir(sessions.join("archive")).unwrap().count();
    assert_eq!(archived, 1, "the exchange is kept in the archive");
}

/// The data lines of an SSE body, as JSON (or the `[DONE]` marker as a string).
fn sse_events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let data = e.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data line: {e:?}"));
            if data == "[DONE]" { Value::String(data.to_owned()) } else { serde_json::from_str(data).unwrap() }
        })
        .collect()
}

#[tokio::test]
async fn a_streamed_completion_is_openai_sse_ending_with_done() {
    let h = harness(vec![Step::text("streamed answer here")], "127.0.0.1:18789", None);
    let body = json!({"model": "chela", "stream": true, "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let (status, headers, text) = h.call(req("POST", "/v1/chat/completions", &body)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/event-stream");
    let events = sse_events(&text);
    assert_eq!(events.last().unwrap(), "[DONE]");
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    let chunks = &events[..events.len() - 1];
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == chunks[0]["id"]));
    let content: String =
        chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect::<Vec<_>>().concat();
    assert_eq!(content, "streamed answer here");
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn bad_completion_requests_get_sentences() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    for (body, says) in [
        ("{not json", "not a chat completion request"),
        (r#"{"messages": []}"#, "no message with role `user`"),
        (r#"{"messages": [{"role": "user", "content": "  "}]}"#, "empty"),
        (r#"{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}"#, "image_url"),
        (r#"{"user": "../../etc", "messages": [{"role": "user", "content": "x"}]}"#, "chat_id"),
    ] {
        let (status, reply) = h.send("POST", "/v1/chat/completions", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        // OpenAI's error shape, which its clients show.
        assert!(reply["error"]["message"].as_str().unwrap().contains(says), "{body}: {reply}");
        assert_eq!(reply["error"]["type"], "invalid_request_error", "{body}: {reply}");
    }
    assert!(h.llm.requests().is_empty());
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    let limits = Limits { body: 1000, ..Limits::default() };
    let h = harness_with(vec![], "127.0.0.1:18789", None, limits);
    let (status, reply) = h.send("POST", "/v1/chat/completions", &"x".repeat(1001)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reply["error"]["message"].as_str().unwrap().contains("1000 bytes"), "{reply}");
}

// ---- Auth -----------------------------------------------------------------------------------

fn with(mut r: Request<Full<Bytes>>, name: &'static str, value: &str) -> Request<Full<Bytes>> {
    r.headers_mut().insert(name, value.parse().unwrap());
    r
}

#[tokio::test]
async fn off_loopback_every_request_but_the_page_needs_the_token() {
    let h = harness(vec![], "0.0.0.0:18789", Some("the-right-token"));
    let (status, headers, body) = h.call(req("GET", "/health", "")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.contains_key("www-authenticate"));
    assert!(body.contains("gateway.token"), "{body}");
    let wrong = with(req("GET", "/health", ""), "authorization", "Bearer the-wrong-token");
    assert_eq!(h.call(wrong).await.0, StatusCode::UNAUTHORIZED);
    let right = with(req("GET", "/health", ""), "authorization", "Bearer the-right-token");
    assert_eq!(h.call(right).await.0, StatusCode::OK);
    // Any host name is fine off loopback: it is reached by its network name.
    let named = with(req("GET", "/health", ""), "host", "chela.lan:18789");
    assert_eq!(h.call(with(named, "authorization", "Bearer the-right-token")).await.0, StatusCode::OK);
    // `?token=` counts only on a WebSocket upgrade (browsers cannot set headers there).
    assert_eq!(h.call(req("GET", "/health?token=the-right-token", "")).await.0, StatusCode::UNAUTHORIZED);
    // The page is served to anyone: it holds no data, and asks for the token.
    let (status, headers, _) = h.call(req("GET", "/", "")).await;
    assert_eq!((status, headers["content-type"].to_str().unwrap()), (StatusCode::OK, "text/html; charset=utf-8"));
    assert_eq!(h.call(req("GET", "/v1/models", "")).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn on_loopback_no_token_is_needed_but_other_sites_are_refused() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    assert_eq!(h.call(req("GET", "/health", "")).await.0, StatusCode::OK);
    // DNS rebinding: a site's name re-pointed at 127.0.0.1.
    let (status, _, body) = h.call(with(req("GET", "/health", ""), "host", "evil.example:18789")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("evil.example"), "{body}");
    // CSRF: another site's page posting to the loopback port.
    let post = || req("POST", "/v1/chat/completions", r#"{"messages":[{"role":"user","content":"x"}]}"#);
    let (status, _, body) = h.call(with(post(), "origin", "https://evil.example")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("evil.example"), "{body}");
    assert!(h.llm.requests().is_empty(), "nothing reached the model");
    // Chela's own page may post.
    h.llm.push(Step::text("fine"));
    let (status, _, body) = h.call(with(post(), "origin", "http://127.0.0.1:18789")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

// ---- WebSocket --------------------------------------------------------------------------------

type Client = tokio_tungstenite::WebSocketStream<TcpStream>;

pub(super) async fn ws_connect(addr: SocketAddr, path: &str) -> Client {
    let stream = TcpStream::connect(addr).await.unwrap();
    // Every harness built without a token has [`TOKEN`]; browsers put it in the URL.
    let sep = if path.contains('?') { '&' } else { '?' };
    let url = format!("ws://127.0.0.1:{}{path}{sep}token={TOKEN}", addr.port());
    tokio_tungstenite::client_async(url, stream).await.expect("the upgrade is accepted").0
}

pub(super) async fn next_json(c: &mut Client) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), c.next()).await.expect("an event in time");
        match m.expect("the connection is open").expect("a frame") {
            WsMessage::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            WsMessage::Ping(_) | WsMessage::Pong(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Every event up to and including the `response` (or `error`).
pub(super) async fn until_answer(c: &mut Client) -> Vec<Value> {
    let mut events = Vec::new();
    loop {
        let e = next_json(c).await;
        let last = e["type"] == "response" || e["type"] == "error";
        events.push(e);
        if last {
            return events;
        }
    }
}

#[tokio::test]
async fn a_websocket_turn_streams_tokens_and_tool_events_then_the_response() {
    let script = vec![Step::tool_call("get_current_time", json!({})), Step::text("it is now")];
    let h = harness(script, "127.0.0.1:18789", None);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/ws").await;
    c.send(WsMessage::text(r#"{"type":"message","content":"what time is it?"}"#)).await.unwrap();
    let events = until_answer(&mut c).await;
    let chat = events[0]["chat_id"].as_str().unwrap().to_owned();
    assert!(chat.starts_with("ws_"), "{events:?}");
    assert!(events.iter().all(|e| e["chat_id"] == chat.as_str()), "{events:?}");
    let tools: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "tool")
        .map(|e| (e["name"].as_str().unwrap(), e["state"].as_str().unwrap()))
        .collect();
    assert_eq!(tools, [("get_current_time", "start"), ("get_current_time", "ok")]);
    let tokens: String =
        events.iter().filter(|e| e["type"] == "token").map(|e| e["content"].as_str().unwrap()).collect();
    assert_eq!(tokens, "it is now");
    assert_eq!(events.last().unwrap(), &json!({"type": "response", "content": "it is now", "chat_id": chat}));
    // A second message without a chat id stays in the connection's chat; a named one is its own.
    h.llm.push(Step::text("again"));
    c.send(WsMessage::text(r#"{"type":"message","content":"and now?"}"#)).await.unwrap();
    assert_eq!(until_answer(&mut c).await.last().unwrap()["chat_id"], chat.as_str());
    h.llm.push(Step::text("named"));
    c.send(WsMessage::text(r#"{"type":"message","content":"hi","chat_id":"kitchen"}"#)).await.unwrap();
    assert_eq!(
        until_answer(&mut c).await.last().unwrap(),
        &json!({"type":"response","content":"named","chat_id":"kitchen"})
    );
    assert!(h.daemon.workspace().session_path("ws", "kitchen").exists());
}

#[tokio::test]
async fn websocket_mistakes_are_error_events_and_the_connection_stays() {
    let h = harness(vec![Step::text("still here")], "127.0.0.1:18789", None);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/").await;
    for (sent, says) in [
        ("{not json".to_owned(), "not the expected JSON"),
        (r#"{"type":"subscribe"}"#.to_owned(), "unknown message type"),
        (r#"{"type":"message","content":""}"#.to_owned(), "empty"),
        (json!({"type":"message","content":"x","chat_id":"c".repeat(10_000)}).to_string(), "1 to 128"),
        (r#"{"type":"message","content":"x","chat_id":"../../etc/passwd"}"#.to_owned(), "letters, digits"),
    ] {
        c.send(WsMessage::text(sent.clone())).await.unwrap();
        let e = next_json(&mut c).await;
        assert_eq!(e["type"], "error", "{sent}: {e}");
        assert!(e["content"].as_str().unwrap().contains(says), "{sent}: {e}");
    }
    c.send(WsMessage::Ping(Bytes::from_static(b"are you there"))).await.unwrap();
    c.send(WsMessage::text(r#"{"type":"message","content":"ok?"}"#)).await.unwrap();
    assert_eq!(until_answer(&mut c).await.last().unwrap()["content"], "still here");
    assert!(!h.dir.path().join("etc").exists());
}

#[tokio::test]
async fn the_ws_outlet_reaches_the_clients_of_a_chat_and_only_existing_chats() {
    let h = harness(vec![Step::text("hello")], "127.0.0.1:18789", None);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/ws").await;
    c.send(WsMessage::text(r#"{"type":"message","content":"hi","chat_id":"desk"}"#)).await.unwrap();
    until_answer(&mut c).await;
    let outlet = h.daemon.outlets().get("ws").expect("the gateway registered its outlet");
    outlet.send_text("desk", "a reminder").await.unwrap();
    assert_eq!(next_json(&mut c).await, json!({"type": "response", "content": "a reminder", "chat_id": "desk"}));
    let e = outlet.send_text("nobody-here", "x").await.unwrap_err();
    assert!(e.contains("nobody-here"), "{e}");
}

#[tokio::test]
async fn the_model_can_write_to_an_open_chat_with_local_send_text_and_only_to_one() {
    let script = vec![
        // The group starts hidden (most turns send nothing), so the model unlocks it first.
        Step::tool_call("tools_unlock", json!({"group": "local"})),
        Step::tool_calls([
            ("local_send_text", json!({"chat_id": "desk", "text": "a note from the tool"})),
            ("local_send_text", json!({"chat_id": "closed-chat", "text": "nobody sees this"})),
        ]),
        Step::text("done"),
    ];
    let h = harness(script, "127.0.0.1:18789", None);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/ws").await;
    c.send(WsMessage::text(r#"{"type":"message","content":"leave me a note","chat_id":"desk"}"#)).await.unwrap();
    let mut events = Vec::new();
    // The tool's push is a `response` too; the turn's own answer is the one saying "done".
    while events.last().is_none_or(|e: &Value| e["content"] != "done") {
        events.push(next_json(&mut c).await);
    }
    let pushed = json!({"type": "response", "content": "a note from the tool", "chat_id": "desk"});
    assert!(events.contains(&pushed), "{events:?}");
    let states: Vec<&str> =
        events.iter().filter(|e| e["type"] == "tool").map(|e| e["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["start", "ok", "start", "ok", "start", "error"], "{events:?}");
    let results = h.llm.requests()[2].json.clone().unwrap().to_string();
    assert!(results.contains("No client has the chat closed-chat open now"), "{results}");
}

#[tokio::test]
async fn a_token_is_made_once_and_stored_on_loopback_too() {
    for listen in ["127.0.0.1:18789", "[::1]:18789", "0.0.0.0:18789"] {
        let h = harness_with_settings(vec![], &[]);
        let d = &h.daemon;
        let made = auth::token_for(d, listen.parse().unwrap()).unwrap();
        assert_eq!(made.len(), 64, "{listen}");
        assert!(made.bytes().all(|b| b.is_ascii_hexdigit()), "{made}");
        let stored = crate::config::Config::load(d.workspace()).unwrap();
        assert_eq!(stored.get(chela_core::config::GATEWAY_TOKEN), made, "kept in overrides.toml");
        d.apply(Arc::new(stored));
        assert_eq!(auth::token_for(d, listen.parse().unwrap()).unwrap(), made, "not made again");
    }
}

#[tokio::test]
async fn off_loopback_a_websocket_needs_the_token_in_its_url() {
    let h = harness(vec![Step::text("hello holder")], "0.0.0.0:18789", Some("ws-token-123"));
    let addr = h.serve().await;
    let stream = TcpStream::connect(addr).await.unwrap();
    let refused = tokio_tungstenite::client_async(format!("ws://{addr}/ws"), stream).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), StatusCode::UNAUTHORIZED),
        other => panic!("not refused: {:?}", other.map(|_| ())),
    }
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut c, _) =
        tokio_tungstenite::client_async(format!("ws://{addr}/ws?token=ws-token-123"), stream).await.expect("upgrade");
    c.send(WsMessage::text(r#"{"type":"message","content":"hi"}"#)).await.unwrap();
    assert_eq!(until_answer(&mut c).await.last().unwrap()["content"], "hello holder");
}

#[tokio::test]
async fn pings_are_answered_and_a_close_or_a_stopping_daemon_ends_the_connection() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/ws").await;
    c.send(WsMessage::Ping(Bytes::from_static(b"still there?"))).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(20), c.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(pong, WsMessage::Pong(Bytes::from_static(b"still there?")));
    c.close(None).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(20), c.next()).await.expect("the close is answered");
    assert!(matches!(end, None | Some(Ok(WsMessage::Close(_))) | Some(Err(_))), "{end:?}");

    let mut c = ws_connect(addr, "/ws").await;
    h.daemon.shutdown().trigger();
    let end = tokio::time::timeout(Duration::from_secs(20), c.next()).await.expect("closed by the stop");
    assert!(matches!(end, Some(Ok(WsMessage::Close(_)))), "{end:?}");
}
