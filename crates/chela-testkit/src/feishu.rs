//! A fake Feishu / Lark open platform on 127.0.0.1, for the Feishu channel's tests.
//!
//! What it serves, written from the open platform's documentation and the official SDKs'
//! behaviour (sharing no code with `chela-proto`):
//! - `POST /open-apis/auth/v3/tenant_access_token/internal`: tokens `t-1`, `t-2`, … that expire
//!   after [`FeishuOptions::token_ttl_secs`] (short, to test refresh); a call with an expired or
//!   [`FakeFeishu::invalidate_tokens`]-ed token gets code 99991663.
//! - `GET /open-apis/bot/v3/info`: the bot's `open_id`.
//! - `POST /open-apis/im/v1/messages/{id}/reply` and `POST /open-apis/im/v1/messages`: recorded
//!   ([`FakeFeishu::sent`]).
//! - `POST /callback/ws/endpoint`: the long connection's URL and `ClientConfig`.
//! - The long connection itself: a real WebSocket server (tokio-tungstenite) that sends the
//!   test's events as pbbp2 data frames (whole, in parts, or raw bytes), answers pings with
//!   pongs, and records every ack ([`FakeFeishu::acks`]).
//!
//! For webhook mode, [`webhook_post`] sends an event the way Feishu does: encrypted and signed
//! with the app's encrypt key ([`encrypted_event`]) or plain.
//!
//! Like [`crate::FakeLlm`], it runs on its own thread and runtime; dropping it stops everything.

mod crypto;
mod pb;

use std::convert::Infallible;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

use crate::running::{self, Running};

pub use crypto::{encrypt, signature};
pub use pb::Frame as PbFrame;

const MAX_BODY: usize = 1 << 20;
/// The code Feishu answers a call made with an invalid or expired tenant token.
pub const INVALID_TOKEN: i64 = 99_991_663;
/// The service id in the long connection's URL, which pings must carry.
pub const SERVICE_ID: i32 = 7;

/// How to start a [`FakeFeishu`].
#[derive(Clone, Debug)]
pub struct FeishuOptions {
    pub app_id: String,
    pub app_secret: String,
    /// Lifetime of each tenant token, in seconds.
    pub token_ttl_secs: u64,
    /// The `PingInterval` the endpoint hands out, in seconds.
    pub ping_interval_secs: u64,
    pub bot_open_id: String,
}

impl Default for FeishuOptions {
    fn default() -> FeishuOptions {
        FeishuOptions {
            app_id: "cli_test".into(),
            app_secret: "secret-test".into(),
            token_ttl_secs: 7200,
            ping_interval_secs: 120,
            bot_open_id: "ou_bot".into(),
        }
    }
}

/// A message Chela sent through the API.
#[derive(Clone, Debug)]
pub struct Sent {
    /// The message replied to, for `…/messages/{id}/reply`.
    pub reply_to: Option<String>,
    /// The chat, for `POST /open-apis/im/v1/messages`.
    pub receive_id: Option<String>,
    pub msg_type: String,
    /// `content.text` of a text message, `content.file_key` of a file message.
    pub text: String,
    /// The bearer token used.
    pub token: String,
}

/// A file uploaded through `POST /open-apis/im/v1/files`.
#[derive(Clone, Debug)]
pub struct Upload {
    pub file_type: String,
    pub file_name: String,
    pub data: Vec<u8>,
    /// The key handed back, which a file message names.
    pub file_key: String,
}

/// An acknowledgement received on the long connection.
#[derive(Clone, Debug)]
pub struct Ack {
    pub message_id: String,
    /// `code` of the JSON payload.
    pub code: i64,
    pub biz_rt: Option<String>,
    pub service: i32,
}

enum Command {
    Send(Vec<Vec<u8>>),
    Close,
}

#[derive(Default)]
struct Counters {
    token_requests: AtomicUsize,
    endpoint_requests: AtomicUsize,
    bad_token_calls: AtomicUsize,
    pings: AtomicUsize,
    ws_connections: AtomicUsize,
    ws_open: AtomicUsize,
    next_token: AtomicUsize,
    seq: AtomicU64,
}

struct Shared {
    opts: FeishuOptions,
    ws_addr: SocketAddr,
    /// Issued tokens: value, expiry, still valid.
    tokens: Mutex<Vec<(String, Instant, bool)>>,
    sent: Mutex<Vec<Sent>>,
    uploads: Mutex<Vec<Upload>>,
    acks: Mutex<Vec<Ack>>,
    counters: Counters,
    commands: tokio::sync::Mutex<mpsc::UnboundedReceiver<Command>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running fake. See the module docs.
#[derive(Debug)]
pub struct FakeFeishu {
    server: Running<Shared>,
    commands: mpsc::UnboundedSender<Command>,
}

impl FakeFeishu {
    /// # Panics
    /// If no port can be bound or the runtime cannot start.
    pub fn start(opts: FeishuOptions) -> FakeFeishu {
        FakeFeishu::try_start(opts).unwrap_or_else(|e| panic!("chela-testkit: cannot start the fake Feishu: {e}"))
    }

    pub fn try_start(opts: FeishuOptions) -> io::Result<FakeFeishu> {
        let runtime = running::runtime()?;
        let (http, ws) = (running::bind(&runtime, 0)?, running::bind(&runtime, 0)?);
        let addr = http.local_addr()?;
        let (commands, inbox) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            opts,
            ws_addr: ws.local_addr()?,
            tokens: Mutex::new(Vec::new()),
            sent: Mutex::new(Vec::new()),
            uploads: Mutex::new(Vec::new()),
            acks: Mutex::new(Vec::new()),
            counters: Counters::default(),
            commands: tokio::sync::Mutex::new(inbox),
        });
        let serve = |serving: Arc<Shared>, mut stopped: oneshot::Receiver<()>| async move {
            tokio::select! {
                _ = &mut stopped => {}
                () = serve_http(http, Arc::clone(&serving)) => {}
                () = serve_ws(ws, serving) => {}
            }
        };
        let server = Running::spawn("chela-fake-feishu".into(), addr, runtime, shared, serve)?;
        Ok(FakeFeishu { server, commands })
    }

    /// `http://127.0.0.1:PORT`, for `channels.feishu.api_base`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// Sends `event` (an event envelope) as one data frame on the open long connection, or on the
    /// next one. Returns the frame's `message_id`, which its ack carries.
    pub fn push_event(&self, event: &Value) -> String {
        self.push_event_in_parts(event, 1)
    }

    /// Sends `event` split into `parts` data frames, last part first, as the service may.
    pub fn push_event_in_parts(&self, event: &Value, parts: usize) -> String {
        let payload = serde_json::to_vec(event).expect("JSON");
        let id = format!("msg_{}", self.server.shared().counters.seq.fetch_add(1, Ordering::SeqCst));
        let parts = parts.max(1);
        let size = payload.len().div_ceil(parts).max(1);
        let chunks: Vec<&[u8]> = payload.chunks(size).collect();
        let frames = (0..chunks.len())
            .rev()
            .map(|seq| self.data_frame(&id, chunks.len(), seq, chunks[seq].to_vec()).encode())
            .collect();
        let _ = self.commands.send(Command::Send(frames));
        id
    }

    /// One part of a message that may never be completed (for the abuse cases).
    pub fn push_part(&self, message_id: &str, sum: usize, seq: usize, payload: Vec<u8>) {
        let frame = self.data_frame(message_id, sum, seq, payload).encode();
        let _ = self.commands.send(Command::Send(vec![frame]));
    }

    /// Any bytes as one binary WebSocket message (garbage, oversize frames).
    pub fn push_raw(&self, bytes: Vec<u8>) {
        let _ = self.commands.send(Command::Send(vec![bytes]));
    }

    /// Closes the open long connection; the client should reconnect.
    pub fn drop_connection(&self) {
        let _ = self.commands.send(Command::Close);
    }

    fn data_frame(&self, id: &str, sum: usize, seq: usize, payload: Vec<u8>) -> pb::Frame {
        let n = self.server.shared().counters.seq.fetch_add(1, Ordering::SeqCst);
        let headers = [
            ("type", "event".to_owned()),
            ("message_id", id.to_owned()),
            ("sum", sum.to_string()),
            ("seq", seq.to_string()),
            ("trace_id", format!("trace_{n}")),
        ];
        pb::Frame {
            seq_id: n,
            log_id: n + 1000,
            service: SERVICE_ID,
            method: 1,
            headers: headers.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            payload,
        }
    }

    /// Makes every token issued so far invalid, as an early revocation would.
    pub fn invalidate_tokens(&self) {
        for t in lock(&self.server.shared().tokens).iter_mut() {
            t.2 = false;
        }
    }

    pub fn sent(&self) -> Vec<Sent> {
        lock(&self.server.shared().sent).clone()
    }

    pub fn uploads(&self) -> Vec<Upload> {
        lock(&self.server.shared().uploads).clone()
    }

    pub fn acks(&self) -> Vec<Ack> {
        lock(&self.server.shared().acks).clone()
    }

    pub fn token_requests(&self) -> usize {
        self.server.shared().counters.token_requests.load(Ordering::SeqCst)
    }

    pub fn endpoint_requests(&self) -> usize {
        self.server.shared().counters.endpoint_requests.load(Ordering::SeqCst)
    }

    /// API calls refused for an invalid or expired token.
    pub fn bad_token_calls(&self) -> usize {
        self.server.shared().counters.bad_token_calls.load(Ordering::SeqCst)
    }

    pub fn pings(&self) -> usize {
        self.server.shared().counters.pings.load(Ordering::SeqCst)
    }

    /// Long connections accepted so far.
    pub fn ws_connections(&self) -> usize {
        self.server.shared().counters.ws_connections.load(Ordering::SeqCst)
    }

    /// Long connections open now.
    pub fn ws_open(&self) -> usize {
        self.server.shared().counters.ws_open.load(Ordering::SeqCst)
    }
}

/// An `im.message.receive_v1` event envelope. `mention_bot` puts `@_user_1` (the bot) before the
/// text, as Feishu writes a mention.
pub fn message_event(event_id: &str, chat: (&str, &str), sender: &str, text: &str, mention: Option<&str>) -> Value {
    let (chat_id, chat_type) = chat;
    let (text, mentions) = match mention {
        Some(open_id) => {
            (format!("@_user_1 {text}"), json!([{"key": "@_user_1", "id": {"open_id": open_id}, "name": "Chela"}]))
        }
        None => (text.to_owned(), json!([])),
    };
    json!({
        "schema": "2.0",
        "header": {"event_id": event_id, "event_type": "im.message.receive_v1", "create_time": "1700000000000",
                   "token": "", "app_id": "cli_test", "tenant_key": "tk"},
        "event": {
            "sender": {"sender_id": {"open_id": sender, "user_id": "u1", "union_id": "on_1"}, "sender_type": "user"},
            "message": {"message_id": format!("om_{event_id}"), "chat_id": chat_id, "chat_type": chat_type,
                        "message_type": "text", "content": json!({"text": text}).to_string(), "mentions": mentions}
        }
    })
}

/// The body and headers of a webhook request carrying `event`, encrypted and signed with
/// `encrypt_key` as Feishu does.
pub fn encrypted_event(
    encrypt_key: &str,
    event: &Value,
    timestamp: &str,
    nonce: &str,
) -> (Vec<u8>, Vec<(String, String)>) {
    let plaintext = serde_json::to_vec(event).expect("JSON");
    let iv: [u8; 16] = *b"0123456789abcdef";
    let body = serde_json::to_vec(&json!({"encrypt": encrypt(encrypt_key, iv, &plaintext)})).expect("JSON");
    let sig = signature(timestamp, nonce, encrypt_key, &body);
    let headers = vec![
        ("X-Lark-Request-Timestamp".to_owned(), timestamp.to_owned()),
        ("X-Lark-Request-Nonce".to_owned(), nonce.to_owned()),
        ("X-Lark-Signature".to_owned(), sig),
    ];
    (body, headers)
}

/// POSTs `body` to `url` (`http://127.0.0.1:PORT/path`) over a plain blocking socket and returns
/// the status and body. For webhook tests, which run the real binary's listener.
pub fn webhook_post(url: &str, body: &[u8], headers: &[(String, String)]) -> io::Result<(u16, String)> {
    let rest = url.strip_prefix("http://").ok_or_else(|| io::Error::other("an http:// URL"))?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.take(MAX_BODY as u64).read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| io::Error::other("no status"))?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    // A chunked reply has size lines around the body; the tests' bodies are small JSON.
    let body = if text.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        body.lines().filter(|l| l.starts_with('{')).collect::<String>()
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

async fn serve_http(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, Arc::clone(&shared)));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

fn reply(status: StatusCode, body: &Value) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    Ok(r)
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let bearer = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_owned();
    let content_type =
        req.headers().get(hyper::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let Ok(raw) = Limited::new(req.into_body(), 40 * MAX_BODY).collect().await else {
        return reply(StatusCode::PAYLOAD_TOO_LARGE, &json!({"code": 413, "msg": "body too large"}));
    };
    let raw = raw.to_bytes();
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let opts = &shared.opts;
    let counters = &shared.counters;
    match path.as_str() {
        "/open-apis/auth/v3/tenant_access_token/internal" => {
            counters.token_requests.fetch_add(1, Ordering::SeqCst);
            if body["app_id"] != opts.app_id.as_str() || body["app_secret"] != opts.app_secret.as_str() {
                return reply(StatusCode::OK, &json!({"code": 10014, "msg": "app secret invalid"}));
            }
            let n = counters.next_token.fetch_add(1, Ordering::SeqCst) + 1;
            let token = format!("t-{n}");
            let expiry = Instant::now() + Duration::from_secs(opts.token_ttl_secs);
            lock(&shared.tokens).push((token.clone(), expiry, true));
            reply(
                StatusCode::OK,
                &json!({"code": 0, "msg": "ok", "tenant_access_token": token, "expire": opts.token_ttl_secs}),
            )
        }
        "/callback/ws/endpoint" => {
            counters.endpoint_requests.fetch_add(1, Ordering::SeqCst);
            if body["AppID"] != opts.app_id.as_str() || body["AppSecret"] != opts.app_secret.as_str() {
                return reply(StatusCode::OK, &json!({"code": 10014, "msg": "app secret invalid"}));
            }
            let url = format!("ws://{}/ws?device_id=dev1&service_id={SERVICE_ID}", shared.ws_addr);
            let config = json!({"PingInterval": opts.ping_interval_secs, "ReconnectCount": -1,
                                "ReconnectInterval": 1, "ReconnectNonce": 0});
            reply(StatusCode::OK, &json!({"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}))
        }
        _ if path.starts_with("/open-apis/") => {
            let valid = lock(&shared.tokens).iter().any(|(t, exp, ok)| *t == bearer && *ok && *exp > Instant::now());
            if !valid {
                counters.bad_token_calls.fetch_add(1, Ordering::SeqCst);
                return reply(
                    StatusCode::BAD_REQUEST,
                    &json!({"code": INVALID_TOKEN, "msg": "Invalid access token for authorization."}),
                );
            }
            if path == "/open-apis/im/v1/files" {
                return upload(&content_type, &raw, &shared);
            }
            api(&path, &query, &body, bearer, &shared)
        }
        _ => reply(StatusCode::NOT_FOUND, &json!({"code": 404, "msg": "not found"})),
    }
}

fn api(
    path: &str,
    query: &str,
    body: &Value,
    token: String,
    shared: &Shared,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if path == "/open-apis/bot/v3/info" {
        return reply(
            StatusCode::OK,
            &json!({"code": 0, "msg": "ok", "bot": {"open_id": shared.opts.bot_open_id, "app_name": "Chela"}}),
        );
    }
    let msg_type = body["msg_type"].as_str().unwrap_or("").to_owned();
    let content: Value = body["content"].as_str().and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
    let text = content["text"].as_str().unwrap_or("").to_owned();
    let sent = if let Some(rest) = path.strip_prefix("/open-apis/im/v1/messages/") {
        let Some(id) = rest.strip_suffix("/reply") else {
            return reply(StatusCode::NOT_FOUND, &json!({"code": 404, "msg": "not found"}));
        };
        Sent { reply_to: Some(id.to_owned()), receive_id: None, msg_type, text, token }
    } else if path == "/open-apis/im/v1/messages" && query.contains("receive_id_type=chat_id") {
        let receive_id = body["receive_id"].as_str().map(str::to_owned);
        Sent { reply_to: None, receive_id, msg_type, text, token }
    } else {
        return reply(StatusCode::NOT_FOUND, &json!({"code": 404, "msg": "not found"}));
    };
    let sent = if sent.msg_type == "file" {
        let key = content["file_key"].as_str().unwrap_or("").to_owned();
        if !lock(&shared.uploads).iter().any(|u| u.file_key == key) {
            return reply(StatusCode::BAD_REQUEST, &json!({"code": 230001, "msg": "unknown file_key"}));
        }
        Sent { text: key, ..sent }
    } else {
        sent
    };
    if !matches!(sent.msg_type.as_str(), "text" | "file") || sent.text.is_empty() {
        return reply(StatusCode::BAD_REQUEST, &json!({"code": 230001, "msg": "invalid message content"}));
    }
    lock(&shared.sent).push(sent);
    reply(StatusCode::OK, &json!({"code": 0, "msg": "success", "data": {"message_id": "om_reply"}}))
}

/// `multipart/form-data` with `file_type`, `file_name` and `file`, read strictly: a body that
/// is not exactly that is refused, so a malformed upload fails the test that sent it.
fn upload(content_type: &str, body: &[u8], shared: &Shared) -> Result<Response<Full<Bytes>>, Infallible> {
    let bad = |why: &str| reply(StatusCode::BAD_REQUEST, &json!({"code": 234001, "msg": why}));
    let Some(boundary) = content_type.strip_prefix("multipart/form-data; boundary=") else {
        return bad("not multipart/form-data");
    };
    let delimiter = format!("--{boundary}");
    let mut fields: Vec<(String, Vec<u8>)> = Vec::new();
    let mut rest = body;
    let Some(start) = find(rest, delimiter.as_bytes()) else { return bad("no boundary") };
    rest = &rest[start + delimiter.len()..];
    while let Some(after) = rest.strip_prefix(b"\r\n") {
        let Some(head_end) = find(after, b"\r\n\r\n") else { return bad("a part has no header end") };
        let head = String::from_utf8_lossy(&after[..head_end]).into_owned();
        let content = &after[head_end + 4..];
        let Some(end) = find(content, format!("\r\n{delimiter}").as_bytes()) else { return bad("a part never ends") };
        let Some(name) = head.split("name=\"").nth(1).and_then(|n| n.split('"').next()) else {
            return bad("a part has no name");
        };
        fields.push((name.to_owned(), content[..end].to_vec()));
        rest = &content[end + 2 + delimiter.len()..];
    }
    if rest != b"--\r\n" {
        return bad("the body does not end with the closing boundary");
    }
    let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let (Some(file_type), Some(file_name), Some(data)) = (field("file_type"), field("file_name"), field("file")) else {
        return bad("file_type, file_name and file are required");
    };
    let file_key = format!("file_v2_{}", lock(&shared.uploads).len() + 1);
    lock(&shared.uploads).push(Upload {
        file_type: String::from_utf8_lossy(&file_type).into_owned(),
        file_name: String::from_utf8_lossy(&file_name).into_owned(),
        data,
        file_key: file_key.clone(),
    });
    reply(StatusCode::OK, &json!({"code": 0, "msg": "success", "data": {"file_key": file_key}}))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn serve_ws(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async(stream).await else { return };
            shared.counters.ws_connections.fetch_add(1, Ordering::SeqCst);
            shared.counters.ws_open.fetch_add(1, Ordering::SeqCst);
            connection(ws, &shared).await;
            shared.counters.ws_open.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

async fn connection(ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, shared: &Shared) {
    let (mut tx, mut rx) = ws.split();
    // Only the newest connection takes the test's commands.
    let mut commands = shared.commands.lock().await;
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(Command::Send(frames)) => {
                    for f in frames {
                        if tx.send(Message::Binary(f.into())).await.is_err() {
                            return;
                        }
                    }
                }
                Some(Command::Close) | None => {
                    let _ = tx.close().await;
                    return;
                }
            },
            incoming = rx.next() => match incoming {
                Some(Ok(Message::Binary(bytes))) => {
                    let Some(frame) = pb::Frame::decode(&bytes) else { continue };
                    if frame.method == 0 && frame.header("type") == Some("ping") {
                        shared.counters.pings.fetch_add(1, Ordering::SeqCst);
                        let config = json!({"PingInterval": shared.opts.ping_interval_secs});
                        let pong = pb::Frame {
                            service: frame.service,
                            headers: vec![("type".into(), "pong".into())],
                            payload: config.to_string().into_bytes(),
                            ..pb::Frame::default()
                        };
                        if tx.send(Message::Binary(pong.encode().into())).await.is_err() {
                            return;
                        }
                    } else if frame.method == 1 {
                        let payload: Value = serde_json::from_slice(&frame.payload).unwrap_or(Value::Null);
                        lock(&shared.acks).push(Ack {
                            message_id: frame.header("message_id").unwrap_or("").to_owned(),
                            code: payload["code"].as_i64().unwrap_or(-1),
                            biz_rt: frame.header("biz_rt").map(str::to_owned),
                            service: frame.service,
                        });
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}
