//! The WebSocket chat on `/ws` (and `/` for upgrades), compatible with MimiClaw's.
//!
//! Client → `{"type":"message","content":"…","chat_id":"…"}`. `chat_id` is optional: a
//! message without one goes to the chat id the connection last named (MimiClaw: "can be
//! overridden in the first message"; a later one switches the connection to it, so the last
//! named wins), or, before it named any, to the connection's own `ws_<16 hex digits>`, drawn at
//! random so that a client connecting after a restart cannot land in an earlier client's
//! conversation. A chat id is a conversation of the `ws` channel only: whatever it holds
//! (`telegram:42`), it never reaches another channel's session. Server → `{"type":"token",…}`* and
//! `{"type":"tool","name":"…","state":"start|ok|error",…}`* while the turn runs, then
//! `{"type":"response","content":"…","chat_id":"…"}`; `{"type":"error",…}` for a message that
//! was refused (bad JSON, busy, stopping).
//!
//! Bounds: a message (however many frames it comes in) is at most [`Limits::ws_message`]
//! bytes, or the connection is closed; each connection has one outbound queue of
//! [`Limits::outbound`] events, and a client that lets it fill (it does not read) or takes
//! longer than [`Limits::write_timeout`] to take one event is cut off rather than buffered for;
//! one connection may use at most [`MAX_CHATS_PER_CONNECTION`] chat ids, and wait for answers
//! in at most [`MAX_BUSY_CHATS_PER_CONNECTION`] of them at once (a conversation with a turn in
//! flight holds its live slot in the session hub; the quiet ones can be closed to make room).
//! A connection with no message either way and no answer pending for [`Limits::ws_idle`] is
//! closed; the page reconnects by itself. Pings are answered by the codec; a close is answered
//! and ends the connection.
//!
//! [`Limits::ws_message`]: Limits::ws_message
//! [`Limits::outbound`]: Limits::outbound
//! [`Limits::write_timeout`]: Limits::write_timeout
//! [`Limits::ws_idle`]: Limits::ws_idle

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chela_core::agent::{ToolCall, ToolResult};
use chela_proto::chat::Message as ChatMessage;
use futures_util::{SinkExt, StreamExt};
use hyper::Request;
use hyper::header::{SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use crate::daemon::{Answer, BoxFuture, Daemon, Incoming, Outlet, Reply};
use crate::serve::admit::WsSlot;
use crate::serve::http::{ApiError, Conns, Limits, Resp, Who, switching_protocols};
use crate::turn::{Cancel, Observer};

pub mod tool;

/// Chat ids one connection may speak in; each is a session and a slot in [`Clients`].
pub const MAX_CHATS_PER_CONNECTION: usize = 64;
/// Chats of one connection with a turn in flight at once: with
/// [`Limits::ws_per_address`](Limits::ws_per_address) sockets per address, what one
/// address can hold of `sessions.max_live` (8 × 4 of the default 64).
pub const MAX_BUSY_CHATS_PER_CONNECTION: usize = 4;
use chela_proto::gateway::ClientMessage;
/// The chat ids and messages the chip's gateway shares.
pub use chela_proto::gateway::check_chat_id;

/// What a chat connection needs of the gateway that accepted it.
#[derive(Clone)]
pub struct Ctx {
    pub daemon: Arc<Daemon>,
    pub clients: Arc<Clients>,
    pub limits: Limits,
    pub conns: Arc<Conns>,
}

/// Answers an upgrade request with 101 and serves the connection on its own task, which holds
/// the gateway's WebSocket `slot` while the socket is open.
pub fn accept<B: Send + 'static>(ctx: Ctx, who: Who, req: Request<B>, slot: Option<WsSlot>) -> Result<Resp, ApiError> {
    if req.method() != hyper::Method::GET {
        return Err(ApiError::BadRequest("a WebSocket is opened with GET".to_owned()));
    }
    let version = req.headers().get(SEC_WEBSOCKET_VERSION).and_then(|v| v.to_str().ok());
    if version != Some("13") {
        return Err(ApiError::BadRequest(
            "only WebSocket version 13 is spoken here (Sec-WebSocket-Version)".to_owned(),
        ));
    }
    let Some(key) = req.headers().get(SEC_WEBSOCKET_KEY) else {
        return Err(ApiError::BadRequest("the upgrade request has no Sec-WebSocket-Key".to_owned()));
    };
    let resp = switching_protocols(key)?;
    let conns = Arc::clone(&ctx.conns);
    conns.spawn(async move {
        let _slot = slot;
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => connection(ctx, who, TokioIo::new(upgraded)).await,
            Err(e) => chela_log::debug!("gateway: WebSocket upgrade failed: {e}"),
        }
    });
    Ok(resp)
}

/// Where events for one connection go: its bounded queue, and the switch that cuts it off.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<String>,
    cut: Cancel,
}

impl Outbox {
    pub fn new(tx: mpsc::Sender<String>) -> Outbox {
        Outbox { tx, cut: Cancel::default() }
    }

    /// Whether the client was cut off for not reading.
    #[cfg(any(test, feature = "testing"))]
    pub fn is_cut(&self) -> bool {
        self.cut.is_cancelled()
    }

    /// Queues one event. A full queue means the client is not reading: it is cut off.
    pub fn push(&self, event: &Value) -> bool {
        match self.tx.try_send(event.to_string()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.cut.cancel();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// The connected clients by chat id, for [`WsOutlet`]: what `local_send_text` reaches.
#[derive(Default)]
pub struct Clients {
    chats: Mutex<HashMap<String, Vec<(u64, Outbox)>>>,
    next_conn: AtomicU64,
}

impl Clients {
    fn join(&self, chat: &str, conn: u64, out: &Outbox) {
        let mut chats = self.chats.lock().unwrap_or_else(PoisonError::into_inner);
        let list = chats.entry(chat.to_owned()).or_default();
        if !list.iter().any(|(c, _)| *c == conn) {
            list.push((conn, out.clone()));
        }
    }

    fn leave(&self, conn: u64, joined: &[String]) {
        let mut chats = self.chats.lock().unwrap_or_else(PoisonError::into_inner);
        for chat in joined {
            if let Some(list) = chats.get_mut(chat) {
                list.retain(|(c, _)| *c != conn);
                if list.is_empty() {
                    chats.remove(chat);
                }
            }
        }
    }

    /// Sends `event` to every client of `chat`; false when none is connected.
    pub fn send(&self, chat: &str, event: &Value) -> bool {
        let outs: Vec<Outbox> = {
            let chats = self.chats.lock().unwrap_or_else(PoisonError::into_inner);
            chats.get(chat).map(|l| l.iter().map(|(_, o)| o.clone()).collect()).unwrap_or_default()
        };
        let mut any = false;
        for out in outs {
            any |= out.push(event);
        }
        any
    }
}

/// The "ws" channel's outlet: pushes a `response` to the clients connected to a chat.
pub struct WsOutlet(pub Arc<Clients>);

impl Outlet for WsOutlet {
    fn channel(&self) -> &str {
        "ws"
    }

    fn send_text<'a>(&'a self, chat_id: &'a str, text: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if self.0.send(chat_id, &event("response", text, chat_id)) {
                Ok(())
            } else {
                Err(format!("no WebSocket client is connected to the chat `{chat_id}` now"))
            }
        })
    }

    fn send_file<'a>(
        &'a self,
        chat_id: &'a str,
        path: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let _ = (chat_id, caption);
            Err(format!(
                "WebSocket clients receive text only; {} cannot be sent to them. Name the file in a message instead.",
                path.display()
            ))
        })
    }
}

fn event(kind: &str, content: &str, chat_id: &str) -> Value {
    json!({"type": kind, "content": content, "chat_id": chat_id})
}

/// One connection, until the client leaves, is cut off, or the daemon stops.
async fn connection<S>(ctx: Ctx, who: Who, io: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let limits = ctx.limits;
    let config = WebSocketConfig::default()
        .max_message_size(Some(limits.ws_message))
        .max_frame_size(Some(limits.ws_message))
        // Small buffers: many idle connections cost little.
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_write_buffer_size(limits.ws_message.saturating_mul(2));
    let mut socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (tx, mut rx) = mpsc::channel(limits.outbound.max(1));
    let out = Outbox::new(tx);
    let mut conn = ConnState {
        id: ctx.clients.next_conn.fetch_add(1, Ordering::Relaxed),
        own_chat: None,
        joined: Vec::new(),
        busy: Arc::default(),
        owed: Arc::default(),
    };
    let shutdown = ctx.daemon.shutdown().clone();
    let mut last = tokio::time::Instant::now();
    // Set at a stop: the socket stays open until the answers still pending were written (the
    // daemon delivers them while it stops), then closes.
    let mut stopping = false;
    loop {
        if stopping && rx.is_empty() && conn.owed.count.load(Ordering::Acquire) == 0 {
            let _ = tokio::time::timeout(limits.write_timeout, socket.close(None)).await;
            break;
        }
        tokio::select! {
            incoming = socket.next() => match incoming {
                None => break,
                Some(Err(e)) => {
                    chela_log::debug!("gateway: WebSocket closed: {e}");
                    break;
                }
                Some(Ok(Message::Text(text))) => {
                    last = tokio::time::Instant::now();
                    if let Err(e) = on_text(&ctx, who, text.as_str(), &out, &mut conn) {
                        out.push(&event("error", &e.0, &e.1));
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    out.push(&event("error", "send messages as text frames holding JSON", ""));
                }
                // The codec answers pings and closes itself; the stream ends after a close.
                // Pings do not count as use: a client that only answers them is idle.
                Some(Ok(_)) => {}
            },
            () = tokio::time::sleep_until(last + limits.ws_idle) => {
                if !conn.busy.lock().unwrap_or_else(PoisonError::into_inner).is_empty() {
                    // An answer is still coming: the wait is the model's, not the client's.
                    last = tokio::time::Instant::now();
                    continue;
                }
                chela_log::debug!("gateway: a WebSocket idle for {:?} was closed", limits.ws_idle);
                let reason = format!("idle for {} s; connect again to go on", limits.ws_idle.as_secs());
                let frame = CloseFrame { code: CloseCode::Away, reason: reason.into() };
                let _ = tokio::time::timeout(limits.write_timeout, socket.close(Some(frame))).await;
                break;
            }
            Some(text) = rx.recv() => {
                last = tokio::time::Instant::now();
                match tokio::time::timeout(limits.write_timeout, socket.send(Message::text(text))).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        chela_log::debug!("gateway: WebSocket write failed: {e}");
                        break;
                    }
                    Err(_) => {
                        chela_log::info!("gateway: a WebSocket client took no data for {:?}; cut off", limits.write_timeout);
                        break;
                    }
                }
            }
            () = out.cut.cancelled() => {
                chela_log::info!("gateway: a WebSocket client let {} events pile up unread; cut off", limits.outbound);
                break;
            }
            () = conn.owed.settled.notified(), if stopping => {}
            () = shutdown.wait(), if !stopping => stopping = true,
        }
    }
    ctx.clients.leave(conn.id, &conn.joined);
}

/// What one connection has opened.
struct ConnState {
    id: u64,
    /// Where messages without a chat id go: the last chat id named on this connection and
    /// accepted, else its random `ws_…` id once one was needed.
    own_chat: Option<String>,
    joined: Vec<String>,
    /// Turns in flight per chat; at most [`MAX_BUSY_CHATS_PER_CONNECTION`] chats.
    busy: Arc<Mutex<HashMap<String, usize>>>,
    owed: Arc<Owed>,
}

/// Handles one text message; an error is `(sentence, chat_id)` to send back.
fn on_text(ctx: &Ctx, who: Who, text: &str, out: &Outbox, conn: &mut ConnState) -> Result<(), (String, String)> {
    let msg = ClientMessage::read(text).map_err(|e| {
        (
            format!("the message is not the expected JSON ({e}); send {{\"type\":\"message\",\"content\":\"…\"}}"),
            String::new(),
        )
    })?;
    let chat = match msg.chat_id.filter(|c| !c.is_empty()) {
        Some(c) => {
            check_chat_id(&c).map_err(|e| (e, String::new()))?;
            c
        }
        None => match &conn.own_chat {
            Some(c) => c.clone(),
            None => {
                let c = random_chat_id().ok_or_else(|| {
                    ("no chat id could be drawn for this connection; name one".to_owned(), String::new())
                })?;
                conn.own_chat = Some(c.clone());
                c
            }
        },
    };
    if msg.kind != "message" {
        return Err((format!("unknown message type `{}`; only \"message\" is understood", clip(&msg.kind)), chat));
    }
    if msg.content.trim().is_empty() {
        return Err(("the message is empty".to_owned(), chat));
    }
    if !conn.joined.contains(&chat) {
        if conn.joined.len() >= MAX_CHATS_PER_CONNECTION {
            return Err((format!("one connection may use at most {MAX_CHATS_PER_CONNECTION} chat ids"), chat));
        }
        ctx.clients.join(&chat, conn.id, out);
        conn.joined.push(chat.clone());
    }
    {
        let busy = conn.busy.lock().unwrap_or_else(PoisonError::into_inner);
        if !busy.contains_key(&chat) && busy.len() >= MAX_BUSY_CHATS_PER_CONNECTION {
            return Err((
                format!(
                    "this connection is already waiting for answers in {MAX_BUSY_CHATS_PER_CONNECTION} chats; send \
                     this message once one of them has answered"
                ),
                chat,
            ));
        }
    }
    // Accepted: later messages without a chat id continue this one.
    conn.own_chat = Some(chat.clone());
    let incoming = Incoming {
        channel: "ws".to_owned(),
        chat_id: chat.clone(),
        sender: who.sender().to_owned(),
        user: ChatMessage::user_text(msg.content),
        cancel: Cancel::default(),
    };
    let observer = Box::new(WsObserver { out: out.clone(), chat: chat.clone() });
    *conn.busy.lock().unwrap_or_else(PoisonError::into_inner).entry(chat.clone()).or_default() += 1;
    let busy = Waiting { busy: Arc::clone(&conn.busy), chat: chat.clone() };
    let owing = Owing::new(&conn.owed);
    ctx.daemon.converse(incoming, observer, Box::new(WsReply { out: out.clone(), chat, busy, owing }));
    Ok(())
}

/// Answers on the connection the message came on: the turn's answer as a `response`, the
/// daemon's own sentence (busy, stopping) as an `error`.
struct WsReply {
    out: Outbox,
    chat: String,
    busy: Waiting,
    owing: Owing,
}

impl Reply for WsReply {
    fn send(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        let WsReply { out, chat, busy, owing } = *self;
        // Freed first: a client that writes again as soon as it has the answer finds room.
        drop(busy);
        let kind = if answer.end.is_some() { "response" } else { "error" };
        out.push(&event(kind, &answer.text, &chat));
        // Settled once queued: the connection writes it before it closes at a stop.
        drop(owing);
        Box::pin(async {})
    }
}

/// A chat of a connection with an answer pending, counted until its reply is sent or dropped.
struct Waiting {
    busy: Arc<Mutex<HashMap<String, usize>>>,
    chat: String,
}

/// The answers a connection still owes its client, counted until each was queued for writing
/// (or dropped): a stopping connection closes once none is left.
#[derive(Default)]
struct Owed {
    count: AtomicUsize,
    settled: tokio::sync::Notify,
}

/// One owed answer, settled when dropped.
struct Owing(Arc<Owed>);

impl Owing {
    fn new(owed: &Arc<Owed>) -> Owing {
        owed.count.fetch_add(1, Ordering::AcqRel);
        Owing(Arc::clone(owed))
    }
}

impl Drop for Owing {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.settled.notify_one();
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = busy.get_mut(&self.chat) {
            *n -= 1;
            if *n == 0 {
                busy.remove(&self.chat);
            }
        }
    }
}

/// `ws_` and 16 random hex digits (64 bits: not guessed, not repeated across restarts).
fn random_chat_id() -> Option<String> {
    let mut bytes = [0u8; 8];
    let n = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).ok()?;
    (n == bytes.len()).then_some(())?;
    Some(format!("ws_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Streams a turn's progress to one connection.
struct WsObserver {
    out: Outbox,
    chat: String,
}

impl Observer for WsObserver {
    fn text(&mut self, text: &str) {
        self.out.push(&event("token", text, &self.chat));
    }

    fn reply_done(&mut self, _tools_follow: bool) {}

    fn tool_started(&mut self, call: &ToolCall) {
        self.out.push(&json!({"type": "tool", "name": call.name, "state": "start", "chat_id": self.chat}));
    }

    fn tool_finished(&mut self, call: &ToolCall, result: &ToolResult, _elapsed: Duration) {
        let state = if result.is_error { "error" } else { "ok" };
        self.out.push(&json!({"type": "tool", "name": call.name, "state": state, "chat_id": self.chat}));
    }
}
