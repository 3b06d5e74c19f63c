//! Streamable HTTP at `/mcp` on the gateway. The gateway has already decided who is asking
//! (loopback: anyone on this machine; elsewhere: `gateway.token`) and refused a foreign
//! `Origin` (403) and an oversized body (413); this file speaks the transport:
//!
//! - `POST` one JSON-RPC message (or, before 2025-06-18, a batch). Notifications and
//!   responses get 202 and no body; a request gets its response as `application/json`, or as
//!   one SSE event when the client accepts only `text/event-stream`. Chela sends nothing about
//!   a request before its response (no progress, no requests of its own), so a stream per
//!   POST would carry one event: JSON is what both SDKs take and what is simplest to bound.
//! - Handshake era: `initialize` opens a session and its id comes back in `Mcp-Session-Id`;
//!   every later request carries it (missing: 400, unknown or expired: 404) and
//!   `MCP-Protocol-Version` (missing: 2025-03-26 is assumed; unknown or not the negotiated
//!   one: 400). At most [`MAX_SESSIONS`] live at once; one unused for [`IDLE`] is dropped.
//!   `DELETE` ends one.
//! - Cancellation: `notifications/cancelled` on the session stops the named call in flight
//!   (its tool future is dropped, its turn stopped) and its POST is answered 202 with no body:
//!   no response is sent for it. A client that closes the connection of a POST in flight
//!   cancels that call the same way (hyper drops the handler; [`InFlight`] cancels on drop);
//!   that is how a 2026-07-28 client cancels, having no session to name the call in.
//! - `GET` (a handshake-era session's server-initiated stream, `text/event-stream`): one per
//!   session (a new GET takes over and the older stream ends). It carries
//!   `notifications/tools/list_changed` when the served tools change (groups switched, MCP or
//!   Lua tools come and go; looked at every [`RELIST`]), through a queue of
//!   [`STREAM_QUEUE`] messages: a client that does not read loses the newest (a change it
//!   will see on its next list) and holds no more memory. A comment every [`KEEP_ALIVE`]
//!   keeps proxies from closing it and finds a client that went away. It ends on DELETE, when
//!   the session expires, and when the daemon stops. Without a session (2026-07-28 clients
//!   re-list after `ttlMs`) a GET is 405.
//! - 2026-07-28: no session; each request names its version in `params._meta`, and the
//!   `MCP-Protocol-Version` header, when sent, must agree. Errors carry the HTTP status the
//!   revision gives them (-32022 and invalid params: 400, unknown method: 404).
//!   `subscriptions/listen` is answered with an event stream that stays open: first the
//!   acknowledgment, then `notifications/tools/list_changed` per change (the same watcher and
//!   queue bound as a GET stream, and its keep-alive), each stamped with the listen request's
//!   id. At most [`MAX_LISTENS`] are open at once (more: error -32603, as the reference
//!   servers answer). A client ends one by closing it; when the daemon stops, each gets the
//!   listen request's result as its last event and ends.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper::header::{ACCEPT, ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, Kind, LEGACY_VERSIONS, LISTEN, Listen, METHOD_NOT_FOUND, MODERN,
    PARSE_ERROR, Server, Session, UNSUPPORTED_VERSION, classify, clip, error, meta_version,
};
use crate::daemon::Daemon;
use crate::serve::http::{ApiError, Limits, Resp, full, read_body};
use crate::tasks::TaskHandle;
use crate::turn::Cancel;

/// Handshake-era sessions kept at once.
pub const MAX_SESSIONS: usize = 64;
/// A session unused this long is forgotten.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// Messages waiting for one GET stream; more are dropped.
pub const STREAM_QUEUE: usize = 16;
/// How often an idle GET stream gets a comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How often the served tools are compared while a stream is open: a listening client hears
/// of a change within a second of it taking effect.
pub const RELIST: Duration = Duration::from_millis(250);
/// `subscriptions/listen` streams open at once on the endpoint (they have no session to be
/// counted in).
pub const MAX_LISTENS: usize = 32;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// One handshake-era session.
struct Live {
    session: Session,
    used: Instant,
    /// Its requests in flight, by id (as JSON text), each with the serial of its [`InFlight`].
    running: HashMap<String, (u64, Cancel)>,
    /// The sending end of its GET stream, if one is open.
    stream: Option<mpsc::Sender<Bytes>>,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Live>,
    /// The open `subscriptions/listen` streams, by serial.
    listens: HashMap<u64, (Listen, mpsc::Sender<Bytes>)>,
    /// A task compares the served tools (only while some stream is open).
    watching: bool,
    serial: u64,
}

impl State {
    fn expire(&mut self) {
        let now = Instant::now();
        self.sessions.retain(|_, live| now.duration_since(live.used) < IDLE);
    }
}

/// The server and its sessions, one per gateway.
pub struct Endpoint {
    server: Arc<Server>,
    state: Arc<Mutex<State>>,
    /// The task that compares the served tools ([`watch`]), owned here so that it ends with the
    /// gateway even if the daemon never stops. Not in `state`: the task holds that.
    watcher: Mutex<Option<TaskHandle>>,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Endpoint {
    pub fn new(daemon: Arc<Daemon>) -> Endpoint {
        Endpoint { server: Arc::new(Server::new(daemon)), state: Arc::default(), watcher: Mutex::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The session `id`, if it lives; touching it keeps it alive.
    fn session(&self, id: &str) -> Option<Session> {
        let mut state = self.state();
        state.expire();
        state.sessions.get_mut(id).map(|live| {
            live.used = Instant::now();
            live.session.clone()
        })
    }

    fn open(&self, session: Session) -> Option<String> {
        let mut state = self.state();
        state.expire();
        if state.sessions.len() >= MAX_SESSIONS {
            return None;
        }
        let id = new_id()?;
        let live = Live { session, used: Instant::now(), running: HashMap::new(), stream: None };
        state.sessions.insert(id.clone(), live);
        Some(id)
    }

    fn update(&self, id: &str, session: Session) {
        if let Some(live) = self.state().sessions.get_mut(id) {
            live.session = session;
        }
    }

    /// Stops the calls of session `sid` that `ids` name.
    fn cancel(&self, sid: &str, ids: &[Value]) {
        let state = self.state();
        let Some(live) = state.sessions.get(sid) else { return };
        for id in ids {
            if let Some((_, c)) = live.running.get(&id.to_string()) {
                c.cancel();
            }
        }
    }

    /// [`notify_all`] on this endpoint's streams (for tests of the bound).
    #[cfg(any(test, feature = "testing"))]
    pub fn notify_all(&self, msg: &Value) -> usize {
        notify_all(&self.state, msg)
    }

    /// The messages waiting in the GET stream of `sid` (for tests of the bound).
    #[cfg(any(test, feature = "testing"))]
    pub fn queued(&self, sid: &str) -> Option<usize> {
        let state = self.state();
        let tx = state.sessions.get(sid)?.stream.as_ref()?;
        Some(tx.max_capacity() - tx.capacity())
    }
}

/// One SSE event holding `msg`.
fn sse_event(msg: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {msg}\n\n"))
}

/// Queues `event` on a stream: whether the stream is still open. A full queue means the
/// client does not read; it misses this change and sees it when it lists again.
fn offer(tx: &mpsc::Sender<Bytes>, event: Bytes) -> bool {
    !matches!(tx.try_send(event), Err(mpsc::error::TrySendError::Closed(_)))
}

/// Sends `msg` on every open GET stream; a stream whose queue is full misses it, a closed
/// one is forgotten. How many streams are open afterwards.
fn notify_all(state: &Mutex<State>, msg: &Value) -> usize {
    let event = sse_event(msg);
    let mut state = lock(state);
    let mut open = 0;
    for live in state.sessions.values_mut() {
        if let Some(tx) = &live.stream {
            if offer(tx, event.clone()) {
                open += 1;
            } else {
                live.stream = None;
            }
        }
    }
    open
}

/// Tells every listen stream that asked for it that the tools changed; forgets closed ones.
fn notify_listens(state: &Mutex<State>) {
    lock(state).listens.retain(|_, (listen, tx)| match listen.tools_changed() {
        Some(note) => offer(tx, sse_event(&note)),
        None => !tx.is_closed(),
    });
}

/// While a GET or listen stream is open: every [`RELIST`], compares the served tools with the
/// last look (at first `served`, taken when the stream opened, so that a change made before
/// this task first runs is announced too) and announces a change. Ends the streams when the
/// daemon stops (a listen stream with its request's result), and itself when no stream is
/// left.
async fn watch(server: Arc<Server>, state: Arc<Mutex<State>>, mut served: Vec<String>) {
    let shutdown = server.daemon.shutdown().clone();
    loop {
        tokio::select! {
            () = tokio::time::sleep(RELIST) => {}
            () = shutdown.wait() => {
                let mut state = lock(&state);
                for live in state.sessions.values_mut() {
                    live.stream = None;
                }
                for (_, (listen, tx)) in state.listens.drain() {
                    // Its last event; a client whose queue is full learns of the end by the close.
                    offer(&tx, sse_event(&listen.closed()));
                }
                state.watching = false;
                return;
            }
        }
        let now = server.tool_names();
        if now != served {
            served = now;
            notify_all(&state, &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
            notify_listens(&state);
        }
        let mut state = lock(&state);
        state.expire();
        state.listens.retain(|_, (_, tx)| !tx.is_closed());
        let mut open = !state.listens.is_empty();
        for live in state.sessions.values_mut() {
            if live.stream.as_ref().is_some_and(mpsc::Sender::is_closed) {
                live.stream = None;
            }
            open |= live.stream.is_some();
        }
        if !open {
            state.watching = false;
            return;
        }
    }
}

/// 16 random bytes as hex: visible ASCII, as the transport asks of a session id.
fn new_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Answers one request to `/mcp`.
pub async fn handle<B>(limits: &Limits, mcp: &Endpoint, req: Request<B>) -> Result<Resp, ApiError>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    match parts.method {
        Method::POST => {}
        Method::DELETE => return Ok(delete(mcp, headers)),
        Method::GET => return Ok(get(mcp, headers)),
        ref m => return Err(ApiError::MethodNotAllowed(format!("{m} is not used on /mcp; POST JSON-RPC messages"))),
    }
    let accept = header(headers, ACCEPT.as_str()).unwrap_or("").to_ascii_lowercase();
    let json_ok = accept.is_empty() || accept.contains("application/json") || accept.contains("*/*");
    if !json_ok && !accept.contains("text/event-stream") {
        return Ok(rpc_status(
            StatusCode::NOT_ACCEPTABLE,
            &error(Value::Null, INVALID_REQUEST, "accept application/json or text/event-stream"),
        ));
    }
    let content_type = header(headers, CONTENT_TYPE.as_str()).unwrap_or("");
    if !content_type.to_ascii_lowercase().starts_with("application/json") {
        return Ok(rpc_status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &error(Value::Null, INVALID_REQUEST, "send the message as Content-Type: application/json"),
        ));
    }
    let body = read_body(limits, body).await?;
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            let e = error(Value::Null, PARSE_ERROR, &format!("the body is not JSON: {e}"));
            return Ok(rpc_status(StatusCode::BAD_REQUEST, &e));
        }
    };
    let header_version = header(headers, VERSION_HEADER);
    if let Some(v) = header_version
        && !LEGACY_VERSIONS.contains(&v)
        && v != MODERN
    {
        let e = error(Value::Null, INVALID_REQUEST, &format!("unsupported MCP-Protocol-Version `{}`", clip(v)));
        return Ok(rpc_status(StatusCode::BAD_REQUEST, &e));
    }
    let sse = !json_ok;
    if let Value::Array(batch) = msg {
        return Ok(batch_reply(mcp, headers, batch, sse).await);
    }
    match classify(msg) {
        Kind::Notification { method, params } => {
            if let Some(sid) = header(headers, SESSION_HEADER)
                && let Some(mut s) = mcp.session(sid)
            {
                let cancels: Vec<Value> = mcp.server.notification(&mut s, &method, &params).into_iter().collect();
                mcp.update(sid, s);
                mcp.cancel(sid, &cancels);
            }
            Ok(accepted())
        }
        Kind::Response => Ok(accepted()),
        Kind::Invalid(e) => Ok(rpc_status(StatusCode::BAD_REQUEST, &e)),
        Kind::Request { id, method, params } if method == "initialize" && meta_version(&params).is_none() => {
            let (reply, session) = mcp.server.initialize(id.clone(), &params);
            let Some(sid) = mcp.open(session) else {
                let e = error(id, INVALID_REQUEST, &format!("{MAX_SESSIONS} MCP sessions are open; end one first"));
                return Ok(rpc_status(StatusCode::SERVICE_UNAVAILABLE, &e));
            };
            let mut resp = reply_response(&reply, sse, StatusCode::OK);
            if let Ok(v) = HeaderValue::from_str(&sid) {
                resp.headers_mut().insert(SESSION_HEADER, v);
            }
            Ok(resp)
        }
        Kind::Request { id, method, params } if method == LISTEN && meta_version(&params).is_some() => {
            if let (Some(h), Some(m)) = (header_version, meta_version(&params))
                && h != m
            {
                let e = error(id, INVALID_PARAMS, "MCP-Protocol-Version and params._meta name different versions");
                return Ok(rpc_status(StatusCode::BAD_REQUEST, &e));
            }
            Ok(listen(mcp, &accept, &id, &params))
        }
        Kind::Request { id, method, params } => {
            let modern = meta_version(&params).is_some() || (method == "server/discover");
            let (session, sid) = if modern {
                if let (Some(h), Some(m)) = (header_version, meta_version(&params))
                    && h != m
                {
                    let e = error(id, INVALID_PARAMS, "MCP-Protocol-Version and params._meta name different versions");
                    return Ok(rpc_status(StatusCode::BAD_REQUEST, &e));
                }
                (Session::default(), None)
            } else {
                match legacy_session(mcp, headers, &id) {
                    Ok(s) => (s, header(headers, SESSION_HEADER)),
                    Err((status, e)) => return Ok(rpc_status(status, &e)),
                }
            };
            let flight = InFlight::start(mcp, sid, &id);
            let reply = mcp.server.request(&session, id, &method, params, &flight.cancel).await;
            if flight.cancel.is_cancelled() {
                // The client cancelled it: no response is sent for it.
                return Ok(accepted());
            }
            let status = if modern { status_of(&reply) } else { StatusCode::OK };
            Ok(reply_response(&reply, sse, status))
        }
    }
}

/// A request in flight: its cancel, known to its session by id while it runs. Dropped, it
/// cancels: when the handler is dropped because the client went away, the call stops too.
struct InFlight<'a> {
    cancel: Cancel,
    state: &'a Mutex<State>,
    /// The session and the key it is filed under there, with this flight's serial.
    filed: Option<(String, String, u64)>,
}

impl<'a> InFlight<'a> {
    fn start(mcp: &'a Endpoint, sid: Option<&str>, id: &Value) -> InFlight<'a> {
        let cancel = Cancel::default();
        let mut filed = None;
        if let Some(sid) = sid {
            let mut state = mcp.state();
            state.serial += 1;
            let serial = state.serial;
            if let Some(live) = state.sessions.get_mut(sid) {
                live.running.insert(id.to_string(), (serial, cancel.clone()));
                filed = Some((sid.to_owned(), id.to_string(), serial));
            }
        }
        InFlight { cancel, state: &mcp.state, filed }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        // After an answer this changes nothing; before one, it stops the call's turn.
        self.cancel.cancel();
        if let Some((sid, key, serial)) = &self.filed {
            let mut state = lock(self.state);
            if let Some(live) = state.sessions.get_mut(sid)
                && live.running.get(key).is_some_and(|(s, _)| s == serial)
            {
                live.running.remove(key);
            }
        }
    }
}

/// The session a handshake-era request names, with its version header checked.
fn legacy_session(mcp: &Endpoint, headers: &HeaderMap, id: &Value) -> Result<Session, (StatusCode, Value)> {
    let Some(sid) = header(headers, SESSION_HEADER) else {
        let e = error(
            id.clone(),
            INVALID_REQUEST,
            &format!("send `initialize` first and then its Mcp-Session-Id, or use protocol version {MODERN}"),
        );
        return Err((StatusCode::BAD_REQUEST, e));
    };
    let Some(session) = mcp.session(sid) else {
        let e = error(id.clone(), INVALID_REQUEST, "no such session (it ended or expired); initialize again");
        return Err((StatusCode::NOT_FOUND, e));
    };
    // A client that sends no version header is taken to speak 2025-03-26, as the transport
    // says; that is let through, since what the session agreed on decides what it gets.
    let agreed = session.version.as_deref().unwrap_or("");
    if let Some(sent) = header(headers, VERSION_HEADER)
        && sent != agreed
    {
        let e = error(
            id.clone(),
            INVALID_REQUEST,
            &format!("MCP-Protocol-Version `{}` is not the version this session agreed on ({agreed})", clip(sent)),
        );
        return Err((StatusCode::BAD_REQUEST, e));
    }
    Ok(session)
}

async fn batch_reply(mcp: &Endpoint, headers: &HeaderMap, batch: Vec<Value>, sse: bool) -> Resp {
    let sid = header(headers, SESSION_HEADER);
    let mut session = sid.and_then(|id| mcp.session(id)).unwrap_or_default();
    let batch = match mcp.server.batch(&mut session, batch) {
        Ok(b) => b,
        Err(refused) => return rpc_status(StatusCode::BAD_REQUEST, &refused),
    };
    // The batch was taken, so the session exists.
    if let Some(sid) = sid {
        mcp.update(sid, session);
        mcp.cancel(sid, &batch.cancels);
    }
    let flight = InFlight::start(mcp, None, &Value::Null);
    match batch.answer(&mcp.server, &flight.cancel).await {
        Some(replies) => reply_response(&replies, sse, StatusCode::OK),
        None => accepted(),
    }
}

/// Opens the GET stream of a handshake-era session.
fn get(mcp: &Endpoint, headers: &HeaderMap) -> Resp {
    let accept = header(headers, ACCEPT.as_str()).unwrap_or("").to_ascii_lowercase();
    if !accept.contains("text/event-stream") {
        let e = error(Value::Null, INVALID_REQUEST, "a GET on /mcp opens an event stream: accept text/event-stream");
        return rpc_status(StatusCode::NOT_ACCEPTABLE, &e);
    }
    if header(headers, SESSION_HEADER).is_none() {
        let mut resp = rpc_status(
            StatusCode::METHOD_NOT_ALLOWED,
            &error(
                Value::Null,
                INVALID_REQUEST,
                "the GET stream belongs to a session: initialize first and send its Mcp-Session-Id \
                 (2026-07-28 has no stream; POST requests to /mcp)",
            ),
        );
        resp.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
        return resp;
    }
    let session = match legacy_session(mcp, headers, &Value::Null) {
        Ok(s) => s,
        Err((status, e)) => return rpc_status(status, &e),
    };
    let Some(sid) = header(headers, SESSION_HEADER) else { return accepted() };
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    {
        let mut state = mcp.state();
        let Some(live) = state.sessions.get_mut(sid) else {
            let e = error(Value::Null, INVALID_REQUEST, "no such session (it ended or expired); initialize again");
            return rpc_status(StatusCode::NOT_FOUND, &e);
        };
        // One stream per session: this one takes over, and the older one ends.
        live.stream = Some(tx);
        mcp.ensure_watcher(&mut state);
    }
    chela_log::debug!(client = ?session.client, "mcp: a GET stream opened");
    event_stream(rx)
}

/// Opens a `subscriptions/listen` stream, or answers why not.
fn listen(mcp: &Endpoint, accept: &str, id: &Value, params: &Value) -> Resp {
    // Nothing named, or anything, takes a stream too; only a client that names JSON alone is told.
    if !(accept.is_empty() || accept.contains("text/event-stream") || accept.contains("*/*")) {
        let e = error(
            id.clone(),
            INVALID_REQUEST,
            "subscriptions/listen answers with an event stream: accept text/event-stream",
        );
        return rpc_status(StatusCode::NOT_ACCEPTABLE, &e);
    }
    let listen = match mcp.server.listen(id, params) {
        Ok(l) => l,
        Err(refused) => return rpc_status(status_of(&refused), &refused),
    };
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    {
        let mut state = mcp.state();
        state.listens.retain(|_, (_, tx)| !tx.is_closed());
        if state.listens.len() >= MAX_LISTENS {
            let why = format!("{MAX_LISTENS} subscriptions are open on this server; close one first");
            return rpc_status(StatusCode::OK, &error(id.clone(), INTERNAL_ERROR, &why));
        }
        // The acknowledgment is the stream's first event: queued before anything else can be.
        offer(&tx, sse_event(&listen.ack()));
        state.serial += 1;
        let serial = state.serial;
        state.listens.insert(serial, (listen, tx));
        mcp.ensure_watcher(&mut state);
    }
    chela_log::debug!("mcp: a subscriptions/listen stream opened");
    event_stream(rx)
}

impl Endpoint {
    /// Starts the task that compares the served tools, unless it runs. Called with `state`
    /// locked, so that the task cannot end between the look and the start.
    fn ensure_watcher(&self, state: &mut State) {
        if state.watching {
            return;
        }
        state.watching = true;
        let served = self.server.tool_names();
        // A watcher that ended by itself is replaced here; its handle only aborts a finished task.
        let task = TaskHandle::spawn(watch(Arc::clone(&self.server), Arc::clone(&self.state), served));
        *self.watcher.lock().unwrap_or_else(PoisonError::into_inner) = Some(task);
    }

    /// The listen streams open now (for tests of the bound and of the ends).
    #[cfg(any(test, feature = "testing"))]
    pub fn listening(&self) -> usize {
        let mut state = self.state();
        state.listens.retain(|_, (_, tx)| !tx.is_closed());
        state.listens.len()
    }

    /// Whether the task that compares the served tools runs (for tests of the ends).
    #[cfg(any(test, feature = "testing"))]
    pub fn watching(&self) -> bool {
        self.state().watching
    }

    /// Announces a change to the listen streams now (for tests of the bound).
    #[cfg(any(test, feature = "testing"))]
    pub fn tools_changed(&self) {
        notify_listens(&self.state);
    }

    /// The messages waiting in each listen stream (for tests of the bound).
    #[cfg(any(test, feature = "testing"))]
    pub fn queued_listens(&self) -> Vec<usize> {
        self.state().listens.values().map(|(_, tx)| tx.max_capacity() - tx.capacity()).collect()
    }
}

/// A response whose body is the event stream fed by `rx`.
fn event_stream(rx: mpsc::Receiver<Bytes>) -> Resp {
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
    keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut resp = Response::new(EventStream { rx, keep_alive }.boxed());
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// A GET stream's body: the session's queued messages, and a comment when it was quiet for
/// [`KEEP_ALIVE`]. Both are made only when hyper asks for the next frame, so a client that
/// does not read holds at most the queue. Ends when the sending end is dropped.
struct EventStream {
    rx: mpsc::Receiver<Bytes>,
    keep_alive: tokio::time::Interval,
}

impl Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                self.keep_alive.reset();
                return Poll::Ready(Some(Ok(Frame::data(event))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        match self.keep_alive.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b": keep-alive\n\n"))))),
            Poll::Pending => Poll::Pending,
        }
    }
}

fn delete(mcp: &Endpoint, headers: &HeaderMap) -> Resp {
    let Some(sid) = header(headers, SESSION_HEADER) else {
        return rpc_status(StatusCode::BAD_REQUEST, &error(Value::Null, INVALID_REQUEST, "name the session to end"));
    };
    let Some(live) = mcp.state().sessions.remove(sid) else {
        return rpc_status(StatusCode::NOT_FOUND, &error(Value::Null, INVALID_REQUEST, "no such session"));
    };
    // Its calls in flight stop, and its GET stream ends with `live`.
    for (_, c) in live.running.values() {
        c.cancel();
    }
    drop(live);
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    resp
}

/// The HTTP status of a stateless reply, as 2026-07-28 gives it.
fn status_of(reply: &Value) -> StatusCode {
    match reply.pointer("/error/code").and_then(Value::as_i64) {
        Some(PARSE_ERROR | INVALID_REQUEST | INVALID_PARAMS | UNSUPPORTED_VERSION) => StatusCode::BAD_REQUEST,
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn accepted() -> Resp {
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() = StatusCode::ACCEPTED;
    resp
}

fn rpc_status(status: StatusCode, body: &Value) -> Resp {
    crate::serve::http::json(status, body)
}

/// A reply as JSON, or as one SSE event for a client that accepts only a stream.
fn reply_response(reply: &Value, sse: bool, status: StatusCode) -> Resp {
    if !sse {
        return rpc_status(status, reply);
    }
    let mut resp = Response::new(full(format!("event: message\ndata: {reply}\n\n")));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}
