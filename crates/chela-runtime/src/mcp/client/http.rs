//! One connection to a remote MCP server over HTTP, on Chela's own client stack (`crate::net`:
//! pooled hyper, proxy). Three ways to talk, found by [`HttpConn::open`] and then kept:
//!
//! - **Stateless (2026-07-28)**: each request is a POST carrying `MCP-Protocol-Version`,
//!   `Mcp-Method` and `Mcp-Name`; no session. List changes come on a `subscriptions/listen`
//!   request whose answer is a long-lived event stream.
//! - **Streamable HTTP (2025-03-26 … 2025-11-25)**: `initialize` by POST; the server's
//!   `Mcp-Session-Id` is echoed on every later request with the agreed `MCP-Protocol-Version`;
//!   a 404 on a session means it expired, so the handshake is done again once; an optional GET
//!   stream carries what the server says unasked (405: it has none); DELETE ends the session.
//! - **HTTP+SSE (2024-11-05)**, when the POST of `initialize` gets 400, 404 or 405 (the spec's
//!   backwards-compatibility rule): a GET stream whose first `endpoint` event names where to
//!   POST; the answers come back on the stream.
//!
//! An answer to a POST is a JSON body or an event stream on which the server may first send
//! its own notifications and requests. Everything read is bounded: one message or event
//! ([`MAX_MESSAGE`]), the messages before an answer ([`MAX_QUEUED`]), an error body
//! ([`MAX_ERROR_BODY`]); a stream that never answers ends at the call's timeout.
//!
//! Calling order: [`HttpConn::new`], [`HttpConn::open`] once, then [`HttpConn::request`] /
//! [`HttpConn::notify`] from any task; [`HttpConn::shutdown`] at the end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use chela_proto::sse;
use hyper::http::Method;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

use super::conn::{CallError, MAX_MESSAGE};
use super::wire::{self, Era, Incoming, RpcError};
use crate::net::{Guard, HttpClient, NetError, Request, Response};
use crate::tasks::TaskHandle;

/// Messages a server may send on one answer's stream before the answer itself.
pub const MAX_QUEUED: usize = 256;
/// The most of an error answer's body kept for the message.
pub const MAX_ERROR_BODY: usize = 2048;
/// The longest `Mcp-Session-Id` accepted.
const MAX_SESSION_ID: usize = 256;
/// Requests waiting for an answer at once on the HTTP+SSE transport.
const MAX_PENDING: usize = 256;
/// How long a standing stream (GET, `subscriptions/listen`) may stay silent before it is
/// opened again; servers send keep-alive comments far more often.
const STREAM_IDLE: Duration = Duration::from_secs(600);
/// Times a standing stream is opened again after it ended, per connection.
const MAX_REOPEN: u32 = 100;
/// How far past a request's deadline the HTTP layer's own timeouts are set.
const GRACE: Duration = Duration::from_millis(500);
/// Bound on the small requests Chela makes by itself (answers to the server, DELETE, cancel).
const SIDE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the server is and what to send with every request.
#[derive(Clone)]
pub struct Remote {
    pub server: String,
    pub url: String,
    /// Configured headers, `bearer` already turned into `Authorization`. Never logged.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The header values are secrets: only their names.
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Remote").field("server", &self.server).field("url", &self.url).field("headers", &names).finish()
    }
}

type Reply = Result<Value, CallError>;

/// How requests go out, once the era and transport are known.
#[derive(Clone)]
enum Mode {
    /// Before `open` decided.
    Unknown,
    Modern,
    Streamable {
        session: Option<String>,
        version: String,
    },
    Sse(Arc<SseLink>),
}

/// The HTTP+SSE transport: where to POST and who waits for which answer.
struct SseLink {
    endpoint: String,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
}

/// What became of one POST.
enum Posted {
    /// 202, or any 2xx for a message that wants no answer.
    Accepted,
    /// The answer to the request, and the session id the response carried.
    Answer(Result<Value, RpcError>, Option<String>),
    /// An HTTP error; the body's start.
    Status(u16, String),
}

pub struct HttpConn {
    remote: Remote,
    http: HttpClient,
    mode: Mutex<Mode>,
    next_id: AtomicU64,
    list_changed: Notify,
    gone: watch::Sender<bool>,
    dead: Mutex<Option<String>>,
    /// One new handshake at a time after the session expired.
    rehandshake: tokio::sync::Mutex<()>,
    /// Standing streams (GET, listen, the HTTP+SSE reader) and cancel notices: stopped with the
    /// connection, at its shutdown or when it is dropped.
    tasks: Mutex<Vec<TaskHandle>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HttpConn {
    pub fn new(remote: Remote, http: HttpClient) -> Arc<HttpConn> {
        Arc::new(HttpConn {
            remote,
            http,
            mode: Mutex::new(Mode::Unknown),
            next_id: AtomicU64::new(1),
            list_changed: Notify::new(),
            gone: watch::Sender::new(false),
            dead: Mutex::new(None),
            rehandshake: tokio::sync::Mutex::new(()),
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// Which transport is in use, for `chela mcp list`.
    pub fn transport(&self) -> &'static str {
        match &*lock(&self.mode) {
            Mode::Sse(_) => "http+sse",
            _ => "http",
        }
    }

    /// Why the connection is unusable, if it is.
    pub fn dead(&self) -> Option<String> {
        lock(&self.dead).clone()
    }

    fn fail(&self, why: String) {
        let why = lock(&self.dead).get_or_insert(why).clone();
        if let Mode::Sse(link) = &*lock(&self.mode) {
            for (_, tx) in lock(&link.waiting).drain() {
                let _ = tx.send(Err(CallError::Broken(why.clone())));
            }
        }
        self.gone.send_replace(true);
    }

    /// Resolves when the server says its tool list changed.
    pub async fn list_changed(&self) {
        self.list_changed.notified().await;
    }

    /// Resolves once the connection is unusable.
    pub async fn closed(&self) {
        let mut rx = self.gone.subscribe();
        let _ = rx.wait_for(|gone| *gone).await;
    }

    /// Finds the era (`cached`, or try the stateless revision and fall back to the handshake,
    /// and to HTTP+SSE when Streamable HTTP is refused), opens what streams the server offers.
    pub async fn open(self: &Arc<Self>, cached: Option<&Era>, timeout: Duration) -> Result<Era, String> {
        let deadline = Instant::now() + timeout;
        let explain = |e: CallError| format!("MCP server {}: {e}", self.remote.server);
        if !matches!(cached, Some(Era::Legacy(_))) {
            *lock(&self.mode) = Mode::Modern;
            let (method, params) = wire::discover();
            let id = self.next_id();
            let msg = message(Some(id), method, &params);
            let modern = match self.post(&msg, Some(id), method, &params, deadline).await.map_err(explain)? {
                Posted::Answer(outcome, _) => wire::probe_outcome(&outcome).then_some(outcome.ok()),
                Posted::Status(status, body) if (400..500).contains(&status) => {
                    // A modern server refuses our revision with a JSON-RPC error in the body.
                    match wire::decode(body.as_bytes()) {
                        Ok(Incoming::Response { outcome, .. }) if wire::probe_outcome(&outcome) => Some(None),
                        _ => None,
                    }
                }
                Posted::Status(status, body) => return Err(self.status_error(method, status, &body)),
                Posted::Accepted => None,
            };
            if let Some(discovered) = modern {
                let tools_change =
                    discovered.as_ref().is_some_and(|d| d["capabilities"]["tools"]["listChanged"] == json!(true));
                if tools_change {
                    self.spawn_stream(Stream::Listen);
                }
                return Ok(Era::Modern);
            }
        }
        *lock(&self.mode) = Mode::Unknown;
        match self.handshake(deadline).await? {
            Some(version) => {
                self.spawn_stream(Stream::Get);
                Ok(Era::Legacy(version))
            }
            None => {
                self.open_sse(deadline).await?;
                let (method, params) = wire::initialize();
                let left = deadline.saturating_duration_since(Instant::now());
                let result = self.request(method, params, left).await.map_err(explain)?;
                let version = wire::agreed_version(&result)?;
                self.notify("notifications/initialized", json!({})).await.map_err(explain)?;
                Ok(Era::Legacy(version))
            }
        }
    }

    /// `initialize` over Streamable HTTP. `Ok(None)`: the server refuses the transport (400,
    /// 404, 405), so it may speak the older HTTP+SSE one.
    async fn handshake(&self, deadline: Instant) -> Result<Option<String>, String> {
        let (method, params) = wire::initialize();
        let id = self.next_id();
        let msg = message(Some(id), method, &params);
        let explain = |e: CallError| format!("MCP server {}: {e}", self.remote.server);
        match self.post(&msg, Some(id), method, &params, deadline).await.map_err(explain)? {
            Posted::Answer(Ok(result), session) => {
                let version = wire::agreed_version(&result)?;
                if let Some(s) = &session
                    && (s.len() > MAX_SESSION_ID || !s.bytes().all(|b| (0x21..=0x7e).contains(&b)))
                {
                    return Err(format!(
                        "MCP server {} sent an invalid Mcp-Session-Id (visible ASCII, at most {MAX_SESSION_ID} bytes)",
                        self.remote.server
                    ));
                }
                *lock(&self.mode) = Mode::Streamable { session, version: version.clone() };
                let note = message(None, "notifications/initialized", &json!({}));
                match self.post(&note, None, "notifications/initialized", &json!({}), deadline).await {
                    Ok(Posted::Accepted | Posted::Answer(..)) => Ok(Some(version)),
                    Ok(Posted::Status(s, body)) => Err(self.status_error("notifications/initialized", s, &body)),
                    Err(e) => Err(explain(e)),
                }
            }
            Posted::Answer(Err(e), _) => Err(explain(CallError::Rpc(e))),
            Posted::Status(400 | 404 | 405, _) => Ok(None),
            Posted::Status(status, body) => Err(self.status_error(method, status, &body)),
            Posted::Accepted => {
                Err(format!("MCP server {} accepted initialize without answering it", self.remote.server))
            }
        }
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn status_error(&self, method: &str, status: u16, body: &str) -> String {
        // An error page's text, on one line and short.
        let body = body.split_whitespace().collect::<Vec<_>>().join(" ");
        let body = bounded(&body, 300);
        let mut s = format!("MCP server {} answered {method} with HTTP {status}", self.remote.server);
        if !body.is_empty() {
            s.push_str(&format!(": {body}"));
        }
        s
    }

    /// Sends a notification (no answer).
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), CallError> {
        let msg = message(None, method, &params);
        let deadline = Instant::now() + SIDE_TIMEOUT;
        let mode = lock(&self.mode).clone();
        let posted = match mode {
            Mode::Sse(link) => self.post_sse(&link, msg, deadline).await?,
            _ => self.post(&msg, None, method, &params, deadline).await?,
        };
        match posted {
            Posted::Status(s, body) => Err(CallError::Broken(self.status_error(method, s, &body))),
            _ => Ok(()),
        }
    }

    /// Sends a request and waits at most `timeout` for its answer. If the answer does not
    /// come (timeout, or the caller drops this future because the turn was stopped) the
    /// server is told with `notifications/cancelled`.
    pub async fn request(self: &Arc<Self>, method: &str, params: Value, timeout: Duration) -> Reply {
        if let Some(why) = self.dead() {
            return Err(CallError::Broken(why));
        }
        let id = self.next_id();
        let mut guard = Cancel { conn: Arc::clone(self), id, reason: "the call was stopped", done: false };
        let deadline = Instant::now() + timeout;
        let answer = tokio::time::timeout_at(deadline, self.exchange(id, method, &params, deadline)).await;
        match answer {
            Ok(reply) => {
                guard.done = true;
                reply
            }
            Err(_) => {
                guard.reason = "timed out";
                Err(CallError::TimedOut(format!(
                    "MCP server {} did not answer {method} within {} s",
                    self.remote.server,
                    timeout.as_secs_f32()
                )))
            }
        }
    }

    async fn exchange(&self, id: u64, method: &str, params: &Value, deadline: Instant) -> Reply {
        let msg = message(Some(id), method, params);
        let mode = lock(&self.mode).clone();
        if let Mode::Sse(link) = mode {
            return self.exchange_sse(&link, id, method, &msg, deadline).await;
        }
        let mut renewed = false;
        loop {
            let posted = self.post(&msg, Some(id), method, params, deadline).await?;
            match posted {
                Posted::Answer(outcome, _) => return outcome.map_err(CallError::Rpc),
                // The session expired (the server restarted or dropped it): one new handshake.
                Posted::Status(404, _) if !renewed && self.has_session() => {
                    renewed = true;
                    let _one = self.rehandshake.lock().await;
                    chela_log::info!("MCP server {}: the session expired; starting a new one", self.remote.server);
                    match self.handshake(deadline).await {
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            return Err(CallError::Broken(format!(
                                "MCP server {} refused a new session",
                                self.remote.server
                            )));
                        }
                        Err(e) => return Err(CallError::Broken(e)),
                    }
                }
                Posted::Status(s, body) => return Err(CallError::Broken(self.status_error(method, s, &body))),
                Posted::Accepted => {
                    return Err(CallError::Broken(format!(
                        "MCP server {} accepted {method} (HTTP 202) but a request needs an answer",
                        self.remote.server
                    )));
                }
            }
        }
    }

    fn has_session(&self) -> bool {
        matches!(&*lock(&self.mode), Mode::Streamable { session: Some(_), .. })
    }

    /// The headers of a request in the current mode.
    fn headers(&self, method: &str, params: &Value, accept: &str) -> Vec<(String, String)> {
        let mut h = self.remote.headers.clone();
        h.push(("accept".into(), accept.into()));
        match &*lock(&self.mode) {
            Mode::Modern => {
                h.push(("mcp-protocol-version".into(), wire::MODERN_VERSION.into()));
                h.push(("mcp-method".into(), method.into()));
                if let Some(name) = params.get("name").and_then(Value::as_str).filter(|n| valid_header(n)) {
                    h.push(("mcp-name".into(), name.into()));
                }
            }
            Mode::Streamable { session, version } => {
                if let Some(s) = session {
                    h.push(("mcp-session-id".into(), s.clone()));
                }
                h.push(("mcp-protocol-version".into(), version.clone()));
            }
            Mode::Unknown | Mode::Sse(_) => {}
        }
        h
    }

    async fn send(&self, req: Request) -> Result<Response, CallError> {
        self.http.send(req).await.map_err(|e| self.unreachable(&e))
    }

    fn unreachable(&self, e: &NetError) -> CallError {
        CallError::Broken(format!("MCP server {} at {} cannot be reached: {e}", self.remote.server, self.remote.url))
    }

    /// One POST of `msg` to the server's URL (Streamable HTTP and the stateless era).
    async fn post(
        &self,
        msg: &Bytes,
        want: Option<u64>,
        method: &str,
        params: &Value,
        deadline: Instant,
    ) -> Result<Posted, CallError> {
        let mut headers = self.headers(method, params, "application/json, text/event-stream");
        headers.push(("content-type".into(), "application/json".into()));
        // A little past the deadline: the caller's own timeout, which says what timed out and
        // tells the server, comes first.
        let timeout = deadline.saturating_duration_since(Instant::now()) + GRACE;
        let req = Request {
            method: Method::POST,
            url: self.remote.url.clone(),
            headers,
            body: msg.clone(),
            timeout,
            guard: Guard::AllowAll,
        };
        let mut resp = self.send(req).await?;
        let session = resp.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let status = resp.status;
        if (300..400).contains(&status) {
            let to = resp.headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or("?");
            return Err(CallError::Broken(format!(
                "MCP server {} redirects ({status}) to {}; Chela does not follow redirects for MCP: put the final URL in mcp.servers.{}.url",
                self.remote.server,
                bounded(to, 200),
                self.remote.server
            )));
        }
        if !(200..300).contains(&status) {
            let (body, _) =
                resp.bytes_truncated(MAX_ERROR_BODY, SIDE_TIMEOUT).await.unwrap_or_else(|_| (Bytes::new(), false));
            return Ok(Posted::Status(status, String::from_utf8_lossy(&body).into_owned()));
        }
        let Some(want) = want else { return Ok(Posted::Accepted) };
        if status == 202 {
            return Ok(Posted::Accepted);
        }
        let idle = deadline.saturating_duration_since(Instant::now()) + GRACE;
        match content_type(&resp).as_str() {
            "application/json" => {
                let body = resp.bytes(MAX_MESSAGE, idle).await.map_err(|e| self.body_error(&e))?;
                match wire::decode(&body)
                    .map_err(|e| CallError::Broken(format!("MCP server {}: {e}", self.remote.server)))?
                {
                    Incoming::Response { id, outcome } if id.as_u64() == Some(want) => {
                        Ok(Posted::Answer(outcome, session))
                    }
                    _ => Err(CallError::Broken(format!(
                        "MCP server {} answered {method} with a JSON body that is not its answer",
                        self.remote.server
                    ))),
                }
            }
            "text/event-stream" => {
                let outcome = self.read_stream(&mut resp, Some(want), Some(deadline)).await?;
                match outcome {
                    Some(o) => Ok(Posted::Answer(o, session)),
                    None => Err(CallError::Broken(format!(
                        "MCP server {} closed the event stream of {method} before answering",
                        self.remote.server
                    ))),
                }
            }
            other => Err(CallError::Broken(format!(
                "MCP server {} answered {method} with Content-Type `{}`; an MCP server answers application/json or text/event-stream",
                self.remote.server,
                bounded(other, 100)
            ))),
        }
    }

    fn body_error(&self, e: &NetError) -> CallError {
        CallError::Broken(match e {
            NetError::BodyTooLarge { limit } => format!(
                "MCP server {} sent a message over {limit} bytes; Chela reads at most {MAX_MESSAGE} bytes per message",
                self.remote.server
            ),
            e => format!("MCP server {}: {e}", self.remote.server),
        })
    }

    /// Reads events from `resp`, handling the server's own messages, until the answer to
    /// `want` (returned), the end of the stream (`None`), or an error.
    async fn read_stream(
        &self,
        resp: &mut Response,
        want: Option<u64>,
        deadline: Option<Instant>,
    ) -> Result<Option<Result<Value, RpcError>>, CallError> {
        let mut parser = sse::Parser::new(MAX_MESSAGE);
        let mut before = 0usize;
        loop {
            let idle = deadline.map_or(STREAM_IDLE, |d| d.saturating_duration_since(Instant::now()) + GRACE);
            let Some(chunk) = resp.chunk(idle).await.map_err(|e| self.body_error(&e))? else { return Ok(None) };
            parser.handle_bytes(&chunk);
            loop {
                let ev = match parser.poll_event() {
                    Ok(Some(ev)) => ev,
                    Ok(None) => break,
                    Err(e) => {
                        return Err(CallError::Broken(format!(
                            "MCP server {} sent a broken event stream ({e}); Chela reads at most {MAX_MESSAGE} bytes per event",
                            self.remote.server
                        )));
                    }
                };
                if ev.data.trim().is_empty() || !(ev.event.is_empty() || ev.event == "message") {
                    continue;
                }
                if let Some(answer) = self.handle_message(ev.data.as_bytes(), want).await? {
                    return Ok(Some(answer));
                }
                before += 1;
                if want.is_some() && before > MAX_QUEUED {
                    return Err(CallError::Broken(format!(
                        "MCP server {} sent more than {MAX_QUEUED} messages before its answer",
                        self.remote.server
                    )));
                }
            }
        }
    }

    /// One message from the server: the answer to `want` is returned; notifications and
    /// requests are dealt with here.
    async fn handle_message(
        &self,
        data: &[u8],
        want: Option<u64>,
    ) -> Result<Option<Result<Value, RpcError>>, CallError> {
        let server = &self.remote.server;
        match wire::decode(data).map_err(|e| CallError::Broken(format!("MCP server {server}: {e}")))? {
            Incoming::Response { id, outcome } => {
                if want.is_some() && id.as_u64() == want {
                    return Ok(Some(outcome));
                }
                chela_log::debug!("MCP server {server} answered request id {id}, which is not waiting here");
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "notifications/tools/list_changed" => self.list_changed.notify_one(),
                "notifications/message" => {
                    chela_log::info!("MCP server {server}: {}", bounded(&params.to_string(), 2048));
                }
                _ => {}
            },
            Incoming::Request { id, method } => {
                // Chela declares no client capabilities; it answers pings and refuses the rest.
                let reply = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Chela does not offer {}", bounded(&method, 100))}})
                };
                let body = Bytes::from(reply.to_string());
                let mode = lock(&self.mode).clone();
                let sent = match mode {
                    Mode::Sse(link) => self.post_sse(&link, body, Instant::now() + SIDE_TIMEOUT).await.map(|_| ()),
                    // Boxed: answering goes through `post`, which may be reading the stream this
                    // request came on.
                    _ => Box::pin(self.post(&body, None, &method, &Value::Null, Instant::now() + SIDE_TIMEOUT))
                        .await
                        .map(|_| ()),
                };
                if let Err(e) = sent {
                    chela_log::debug!("MCP server {server}: answering its {method} failed: {e}");
                }
            }
        }
        Ok(None)
    }

    /// Opens a standing stream in the background; it ends with the connection.
    fn spawn_stream(self: &Arc<Self>, kind: Stream) {
        let me = Arc::downgrade(self);
        let task = TaskHandle::spawn(async move {
            for n in 0..MAX_REOPEN {
                let Some(conn) = me.upgrade() else { return };
                if conn.dead().is_some() {
                    return;
                }
                let again = conn.standing(kind).await;
                drop(conn);
                if !again {
                    return;
                }
                tokio::time::sleep(super::backoff(n.min(6) + 1)).await;
            }
        });
        self.own(task);
    }

    /// One life of a standing stream; whether to open it again.
    async fn standing(&self, kind: Stream) -> bool {
        let server = &self.remote.server;
        let (method, body) = match kind {
            Stream::Get => (Method::GET, Bytes::new()),
            Stream::Listen => {
                let params = wire::params(Some(&Era::Modern), json!({"notifications": {"toolsListChanged": true}}));
                (Method::POST, message(Some(self.next_id()), "subscriptions/listen", &params))
            }
        };
        let mut headers = match kind {
            Stream::Get => self.headers("GET", &Value::Null, "text/event-stream"),
            Stream::Listen => self.headers("subscriptions/listen", &Value::Null, "application/json, text/event-stream"),
        };
        if kind == Stream::Listen {
            headers.push(("content-type".into(), "application/json".into()));
        }
        let req = Request {
            method,
            url: self.remote.url.clone(),
            headers,
            body,
            timeout: SIDE_TIMEOUT * 6,
            guard: Guard::AllowAll,
        };
        let mut resp = match self.send(req).await {
            Ok(r) => r,
            Err(e) => {
                chela_log::debug!("MCP server {server}: its {kind:?} stream: {e}");
                return true;
            }
        };
        if resp.status == 405 && kind == Stream::Get {
            // The server offers no stream of its own.
            return false;
        }
        if resp.status != 200 || content_type(&resp) != "text/event-stream" {
            chela_log::debug!(
                "MCP server {server}: its {kind:?} stream answered {} ({})",
                resp.status,
                content_type(&resp)
            );
            return false;
        }
        match self.read_stream(&mut resp, None, None).await {
            Ok(_) => true,
            Err(e) => {
                chela_log::debug!("MCP server {server}: its {kind:?} stream ended: {e}");
                true
            }
        }
    }

    /// HTTP+SSE: the GET stream and its `endpoint` event; then a reader hands answers out.
    async fn open_sse(self: &Arc<Self>, deadline: Instant) -> Result<(), String> {
        let server = self.remote.server.clone();
        let mut headers = self.remote.headers.clone();
        headers.push(("accept".into(), "text/event-stream".into()));
        let timeout = deadline.saturating_duration_since(Instant::now());
        let req = Request {
            method: Method::GET,
            url: self.remote.url.clone(),
            headers,
            body: Bytes::new(),
            timeout,
            guard: Guard::AllowAll,
        };
        let mut resp = self.send(req).await.map_err(|e| e.to_string())?;
        if resp.status != 200 || content_type(&resp) != "text/event-stream" {
            return Err(format!(
                "MCP server {server} refused Streamable HTTP, and its URL is no HTTP+SSE stream either (GET answered {} with `{}`)",
                resp.status,
                bounded(&content_type(&resp), 100)
            ));
        }
        let mut parser = sse::Parser::new(MAX_MESSAGE);
        let endpoint = 'found: {
            for _ in 0..MAX_QUEUED {
                let idle = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
                let chunk = resp.chunk(idle).await.map_err(|e| format!("MCP server {server}: {e}"))?;
                let Some(chunk) = chunk else { break };
                parser.handle_bytes(&chunk);
                while let Some(ev) = parser.poll_event().map_err(|e| format!("MCP server {server}: {e}"))? {
                    if ev.event == "endpoint" {
                        break 'found ev.data;
                    }
                }
            }
            return Err(format!("MCP server {server} sent no `endpoint` event on its HTTP+SSE stream"));
        };
        let endpoint = same_origin(&self.remote.url, endpoint.trim()).ok_or_else(|| {
            format!("MCP server {server} named an endpoint on another origin; Chela sends its headers only to the configured one")
        })?;
        let link = Arc::new(SseLink { endpoint, waiting: Mutex::new(HashMap::new()) });
        *lock(&self.mode) = Mode::Sse(Arc::clone(&link));
        let me = Arc::downgrade(self);
        let task = TaskHandle::spawn(async move {
            let why = loop {
                let next = resp.chunk(STREAM_IDLE).await;
                let Some(conn) = me.upgrade() else { return };
                let chunk = match next {
                    Ok(Some(c)) => c,
                    Ok(None) => {
                        let why = format!("MCP server {} closed its event stream", conn.remote.server);
                        break (conn, why);
                    }
                    Err(e) => {
                        let why = format!("MCP server {}: {e}", conn.remote.server);
                        break (conn, why);
                    }
                };
                parser.handle_bytes(&chunk);
                let mut broke = None;
                loop {
                    match parser.poll_event() {
                        Ok(Some(ev)) if ev.event.is_empty() || ev.event == "message" => {
                            if let Err(e) = conn.dispatch_sse(&ev.data).await {
                                broke = Some(e);
                                break;
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => {
                            broke = Some(format!("MCP server {} sent a broken event stream ({e})", conn.remote.server));
                            break;
                        }
                    }
                }
                if let Some(why) = broke {
                    break (conn, why);
                }
            };
            let (conn, why) = why;
            if conn.dead().is_none() {
                chela_log::warn!("{why}");
            }
            conn.fail(why);
        });
        self.own(task);
        Ok(())
    }

    /// One message on the HTTP+SSE stream: an answer goes to its waiter.
    async fn dispatch_sse(&self, data: &str) -> Result<(), String> {
        if data.trim().is_empty() {
            return Ok(());
        }
        if let Ok(Incoming::Response { id, outcome }) = wire::decode(data.as_bytes()) {
            if let Mode::Sse(link) = &*lock(&self.mode)
                && let Some(tx) = id.as_u64().and_then(|n| lock(&link.waiting).remove(&n))
            {
                let _ = tx.send(outcome.map_err(CallError::Rpc));
            }
            return Ok(());
        }
        self.handle_message(data.as_bytes(), None).await.map(|_| ()).map_err(|e| e.to_string())
    }

    async fn exchange_sse(&self, link: &Arc<SseLink>, id: u64, method: &str, msg: &Bytes, deadline: Instant) -> Reply {
        let (tx, rx) = oneshot::channel();
        {
            let mut w = lock(&link.waiting);
            if w.len() >= MAX_PENDING {
                return Err(CallError::Broken(format!(
                    "{MAX_PENDING} requests to MCP server {} are already waiting; try again later",
                    self.remote.server
                )));
            }
            w.insert(id, tx);
        }
        let _remove = Unwait { link: Arc::clone(link), id };
        match self.post_sse(link, msg.clone(), deadline).await? {
            Posted::Status(s, body) => return Err(CallError::Broken(self.status_error(method, s, &body))),
            Posted::Accepted | Posted::Answer(..) => {}
        }
        rx.await
            .unwrap_or_else(|_| Err(CallError::Broken(self.dead().unwrap_or_else(|| "the connection closed".into()))))
    }

    async fn post_sse(&self, link: &SseLink, body: Bytes, deadline: Instant) -> Result<Posted, CallError> {
        let mut headers = self.remote.headers.clone();
        headers.push(("content-type".into(), "application/json".into()));
        let timeout = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let req = Request {
            method: Method::POST,
            url: link.endpoint.clone(),
            headers,
            body,
            timeout,
            guard: Guard::AllowAll,
        };
        let resp = self.send(req).await?;
        if (200..300).contains(&resp.status) {
            return Ok(Posted::Accepted);
        }
        let status = resp.status;
        let (body, _) =
            resp.bytes_truncated(MAX_ERROR_BODY, SIDE_TIMEOUT).await.unwrap_or_else(|_| (Bytes::new(), false));
        Ok(Posted::Status(status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// Keeps `task` with the connection. Finished ones are forgotten first, so the list holds
    /// the few standing streams and the cancel notices still being sent.
    fn own(&self, task: TaskHandle) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// Ends the session (DELETE) and every stream.
    pub async fn shutdown(&self) {
        self.fail(format!("MCP server {} was stopped", self.remote.server));
        drop(std::mem::take(&mut *lock(&self.tasks)));
        let mode = std::mem::replace(&mut *lock(&self.mode), Mode::Unknown);
        if let Mode::Streamable { session: Some(s), version } = mode {
            let mut headers = self.remote.headers.clone();
            headers.push(("mcp-session-id".into(), s));
            headers.push(("mcp-protocol-version".into(), version));
            let req = Request {
                method: Method::DELETE,
                url: self.remote.url.clone(),
                headers,
                body: Bytes::new(),
                timeout: SIDE_TIMEOUT,
                guard: Guard::AllowAll,
            };
            // A server that does not end sessions on request answers 405; nothing to do then.
            let _ = self.http.send(req).await;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    /// Streamable HTTP's optional GET stream.
    Get,
    /// The stateless era's `subscriptions/listen`.
    Listen,
}

/// Tells the server a request will not be waited on any more.
struct Cancel {
    conn: Arc<HttpConn>,
    id: u64,
    reason: &'static str,
    done: bool,
}

impl Drop for Cancel {
    fn drop(&mut self) {
        if self.done || self.conn.dead().is_some() {
            return;
        }
        let (conn, id, reason) = (Arc::clone(&self.conn), self.id, self.reason);
        // Dropping the request's response already closed its connection; the notice is for
        // servers that keep working on it. Best effort, bounded by SIDE_TIMEOUT.
        if tokio::runtime::Handle::try_current().is_ok() {
            let notice = TaskHandle::spawn({
                let conn = Arc::clone(&conn);
                async move {
                    let _ = conn.notify("notifications/cancelled", json!({"requestId": id, "reason": reason})).await;
                }
            });
            conn.own(notice);
        }
    }
}

struct Unwait {
    link: Arc<SseLink>,
    id: u64,
}

impl Drop for Unwait {
    fn drop(&mut self) {
        lock(&self.link.waiting).remove(&self.id);
    }
}

fn message(id: Option<u64>, method: &str, params: &Value) -> Bytes {
    Bytes::from(wire::encode(id, method, params))
}

fn content_type(resp: &Response) -> String {
    let v = resp.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    v.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

fn valid_header(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

fn bounded(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// `endpoint` resolved against `base`; `None` when it leads to another origin.
fn same_origin(base: &str, endpoint: &str) -> Option<String> {
    let origin_end = base.find("://").map(|i| i + 3).map(|i| base[i..].find('/').map_or(base.len(), |j| i + j))?;
    let origin = &base[..origin_end];
    if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
        let other = same_origin_prefix(endpoint)?;
        return (other == origin).then(|| endpoint.to_owned());
    }
    if endpoint.starts_with("//") {
        return None;
    }
    if let Some(path) = endpoint.strip_prefix('/') {
        return Some(format!("{origin}/{path}"));
    }
    // Relative to the stream's folder.
    let path = &base[origin_end..];
    let path = path.split(['?', '#']).next().unwrap_or("");
    let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
    Some(format!("{origin}{dir}{endpoint}"))
}

fn same_origin_prefix(url: &str) -> Option<&str> {
    let i = url.find("://")? + 3;
    Some(url[i..].find('/').map_or(url, |j| &url[..i + j]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_stay_on_the_configured_origin() {
        let base = "http://127.0.0.1:3001/sse";
        assert_eq!(
            same_origin(base, "/message?sessionId=a").as_deref(),
            Some("http://127.0.0.1:3001/message?sessionId=a")
        );
        assert_eq!(same_origin(base, "message?x=1").as_deref(), Some("http://127.0.0.1:3001/message?x=1"));
        assert_eq!(same_origin("http://h:1/a/b/sse?t=1", "m").as_deref(), Some("http://h:1/a/b/m"));
        assert_eq!(same_origin(base, "http://127.0.0.1:3001/m").as_deref(), Some("http://127.0.0.1:3001/m"));
        assert_eq!(same_origin(base, "http://evil.example/m"), None);
        assert_eq!(same_origin(base, "http://127.0.0.1:3002/m"), None);
        assert_eq!(same_origin(base, "//evil.example/m"), None);
        assert_eq!(same_origin("http://h:1", "/m").as_deref(), Some("http://h:1/m"));
    }

    #[test]
    fn remote_debug_hides_header_values() {
        let r = Remote {
            server: "s".into(),
            url: "http://h/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer sekrit".into())],
        };
        let shown = format!("{r:?}");
        assert!(shown.contains("Authorization") && !shown.contains("sekrit"), "{shown}");
    }
}
