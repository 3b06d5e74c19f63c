//! The xiaozhi conversation on `/xiaozhi/v1/`: one WebSocket per talking device, driving its
//! voice pipeline with the wire codec of [`chela_proto::xiaozhi`]. The conversation itself is
//! `session::Session`, shared with the MQTT + UDP transport ([`mqtt`], [`udp`]); this module is
//! the WebSocket carrier.
//!
//! Handshake (checked before the upgrade, so a refused device never gets a socket):
//! `Authorization: Bearer <token>` must be the current token of an approved device in the
//! device store (the OTA answer gave it; unknown, revoked or missing → 401), presented with the
//! `Device-Id` MAC and `Client-Id` it was issued to (the firmware always sends both; another or a
//! missing one → 401, so a token copied off one device does not open another's conversation),
//! `Protocol-Version` 1, 2 or 3 (missing is 1; others → 400). There is no "no token" mode: the firmware sends whatever token the OTA
//! answer gave, and Chela gives one only to devices the owner approved, so a token is always
//! required, as for the OTA endpoints' deny-by-default onboarding.
//!
//! Then: the device's `hello` within [`Limits::device_hello`] (else the socket is closed with
//! that reason), answered with transport `websocket`, a session id and downlink Opus 24 kHz in
//! 60 ms packets. `listen`, `abort`, `mcp` and audio frames drive the pipeline; what it yields
//! goes out as `stt`, `llm`, `tts` and binary frames in the device's protocol version, paced.
//! A recognised (or typed, `listen detect`) utterance is a turn in the device's own session
//! (channel `xiaozhi`, chat = the device id), see [`turn`]. Closing: no frame for
//! [`Limits::device_idle`] (120 s, the firmware's own rule), a `goodbye`, too many frames that
//! are not audio in a row ([`MAX_BAD_FRAMES`]), the daemon stopping, or the device leaving.
//!
//! Bounds: a text or binary message is at most [`MAX_MESSAGE`] bytes (a bigger one closes the
//! socket with 1009), the turn's control messages wait in a queue of [`CONTROL_QUEUE`], the
//! device MCP link's in [`MCP_QUEUE`], the pipeline's own queues are bounded (see its docs),
//! and each write may take [`Limits::write_timeout`].
//!
//! [`Limits::device_hello`]: Limits::device_hello
//! [`Limits::device_idle`]: Limits::device_idle
//! [`Limits::write_timeout`]: Limits::write_timeout

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chela_core::config as keys;
use chela_proto::xiaozhi::frame::{self, Frame, Kind, Version};
use chela_proto::xiaozhi::message::{self, Hello, Message as XzMessage};
use futures_util::{SinkExt, StreamExt};
use hyper::header::{AUTHORIZATION, HeaderMap, HeaderValue, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self as tung, Message};

use crate::daemon::Daemon;
use crate::devices::{Devices, normalize_id};
use crate::serve::admit::WsSlot;
use crate::serve::http::{ApiError, Conns, Limits, Resp, json as json_resp, switching_protocols};
use crate::voice::{DOWNLINK_RATE, FRAME_MS};
use session::{Reason, Session, Stop, Transport};

pub mod mqtt;
pub mod mqtt_wire;
mod session;
pub mod turn;
pub mod udp;

/// Largest WebSocket message from a device, text or binary (a device MCP page is ~8 KB).
pub const MAX_MESSAGE: usize = message::MAX_MESSAGE;
/// Frames in a row that are neither audio nor a known message before the socket is closed.
pub const MAX_BAD_FRAMES: u32 = 64;
/// Control messages (`llm`, `alert`) from the running turn waiting to be written.
pub const CONTROL_QUEUE: usize = 16;
/// JSON-RPC messages from the device MCP client waiting to be written.
pub const MCP_QUEUE: usize = 16;

/// The device MCP client's end of one connection. `deliver` gets each `payload` of an incoming
/// `{"type":"mcp"}` message; the client sends its own messages into the `mpsc::Sender` it was
/// attached with, and the endpoint wraps each as `{"session_id":…,"type":"mcp","payload":…}`.
/// Dropped when the device disconnects.
pub trait McpLink: Send {
    fn deliver(&self, payload: Value);
    /// Resolves once the device's tools are listed (or their setup failed): a turn waits on it,
    /// at most [`turn::TOOLS_WAIT`], so the device's first utterance already sees its tools.
    fn settled(&self) -> turn::Waiting;
}

/// What the endpoint knows of the device for the MCP client.
#[derive(Clone, Debug)]
pub struct DeviceHello {
    /// The device's MAC (`Device-Id`).
    pub device: String,
    pub session_id: String,
    /// The camera's `/mcp/vision/explain` URL and the device's vision token, offered to the
    /// device in `initialize` (`capabilities.vision`).
    pub vision: Option<(String, String)>,
}

/// **The device MCP hook.** Called once after a `hello` with `features.mcp`: the device MCP
/// client (`chela_runtime::mcp::device`) takes the device's MCP messages, and its tools become the
/// group `device_<id>` until the connection ends (dropping the link removes the group).
fn attach_mcp(host: &Host, hello: &DeviceHello, out: mpsc::Sender<Value>) -> Option<Box<dyn McpLink>> {
    chela_log::debug!(device = %hello.device, session = %hello.session_id, "xiaozhi: the device offers MCP tools");
    Some(Box::new(chela_runtime::mcp::device::attach(host.daemon.toolbox(), &hello.device, hello.vision.clone(), out)))
}

impl McpLink for chela_runtime::mcp::device::DevicePeer {
    fn deliver(&self, payload: Value) {
        chela_runtime::mcp::device::Peer::deliver(self, payload);
    }

    fn settled(&self) -> turn::Waiting {
        Box::pin(chela_runtime::mcp::device::Peer::settled(self))
    }
}

/// A device's refusal before the upgrade: 401 with the reason.
fn unauthorized(why: &str) -> Resp {
    let mut resp = json_resp(StatusCode::UNAUTHORIZED, &json!({ "error": why }));
    resp.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"xiaozhi\""));
    resp
}

/// What a device's connection needs of the gateway that accepted it.
#[derive(Clone)]
pub struct Host {
    pub daemon: Arc<Daemon>,
    pub limits: Limits,
    pub conns: Arc<Conns>,
    /// Where the device's camera posts a photo: the address the device reached the gateway at.
    pub camera_url: String,
}

/// Checks the device's handshake and answers 101, serving the connection on its own task,
/// which holds the gateway's WebSocket `slot` while the socket is open.
pub async fn accept<B: Send + 'static>(host: Host, req: Request<B>, slot: Option<WsSlot>) -> Result<Resp, ApiError> {
    if !host.daemon.config().bool(keys::XIAOZHI_ENABLED) {
        return Err(ApiError::NotFound("xiaozhi devices are off here (xiaozhi.enabled = false)".into()));
    }
    if req.method() != hyper::Method::GET {
        return Err(ApiError::BadRequest("a WebSocket is opened with GET".to_owned()));
    }
    let headers = req.headers();
    if headers.get(SEC_WEBSOCKET_VERSION).and_then(|v| v.to_str().ok()) != Some("13") {
        return Err(ApiError::BadRequest(
            "only WebSocket version 13 is spoken here (Sec-WebSocket-Version)".to_owned(),
        ));
    }
    let Some(key) = headers.get(SEC_WEBSOCKET_KEY) else {
        return Err(ApiError::BadRequest("the upgrade request has no Sec-WebSocket-Key".to_owned()));
    };
    let version = protocol_version(headers)?;
    let get = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok()).map_or("", str::trim);
    let Some(device) = normalize_id(get("device-id")) else {
        return Err(ApiError::BadRequest(
            "the Device-Id header is missing or not a MAC address like aa:bb:cc:dd:ee:ff".into(),
        ));
    };
    let client_id = get("client-id").to_owned();
    if client_id.is_empty() {
        return Ok(unauthorized(
            "a device sends its Client-Id with its token (the firmware always does); this connection had none",
        ));
    }
    let Some(token) = get(AUTHORIZATION.as_str()).strip_prefix("Bearer ").map(str::trim).filter(|t| !t.is_empty())
    else {
        return Ok(unauthorized(
            "a device needs its token (Authorization: Bearer …); restart it so its OTA check fetches one",
        ));
    };
    let store = Devices::open(host.daemon.workspace());
    let (id, token) = (device.clone(), token.to_owned());
    let verdict = crate::tasks::blocking(move || {
        store.load().map(|s| s.token_ok(&id, &client_id, &token).then(|| s.vision_token(&id)))
    })
    .await
    .map_err(|e| ApiError::internal("the device store", e))?;
    let camera_url = host.camera_url.clone();
    let vision = match verdict {
        Ok(Some(vision_token)) => vision_token.map(|t| (camera_url, t)),
        Ok(None) => {
            chela_log::info!(%device, "xiaozhi: a WebSocket with an unknown or revoked device token was refused");
            return Ok(unauthorized(
                "this device token is unknown or revoked, or was issued to another Device-Id or Client-Id; the owner revokes the device (`chela device revoke MAC`), restarts it so its OTA check asks again, and approves its new code with `chela device approve CODE`",
            ));
        }
        Err(e) => {
            chela_log::error!("xiaozhi: {e}");
            return Err(ApiError::Busy("the device store cannot be read; the owner has been told in the log".into()));
        }
    };
    let resp = switching_protocols(key)?;
    let conns = Arc::clone(&host.conns);
    conns.spawn(async move {
        let _slot = slot;
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => connection(host, device, vision, version, TokioIo::new(upgraded)).await,
            Err(e) => chela_log::debug!("xiaozhi: WebSocket upgrade failed: {e}"),
        }
    });
    Ok(resp)
}

/// `Protocol-Version`: 1, 2 or 3; missing is 1.
fn protocol_version(headers: &HeaderMap) -> Result<Version, ApiError> {
    let Some(raw) = headers.get("protocol-version") else { return Ok(Version::V1) };
    raw.to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .and_then(Version::from_number)
        .ok_or_else(|| ApiError::BadRequest("Protocol-Version must be 1, 2 or 3 (the binary audio framing)".into()))
}

type Socket<S> = WebSocketStream<S>;

/// The WebSocket as a conversation's carrier: audio frames in the device's protocol version.
struct Ws<S> {
    socket: Socket<S>,
    version: Version,
    write_timeout: Duration,
    /// Milliseconds of the reply sent so far (protocol 2's frame timestamp).
    downlink_ms: u32,
}

impl<S> Transport for Ws<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send,
{
    fn name(&self) -> &'static str {
        "websocket"
    }

    fn hello_answer(&mut self, session_id: &str, _hello: &Hello) -> Result<String, Stop> {
        Ok(XzMessage::Hello(Hello::server(session_id, DOWNLINK_RATE, FRAME_MS)).to_json())
    }

    async fn send_text(&mut self, text: String) -> Result<(), Stop> {
        send(&mut self.socket, Message::text(text), self.write_timeout).await
    }

    async fn send_audio(&mut self, packet: &[u8]) -> Result<(), Stop> {
        let mut buf = Vec::with_capacity(packet.len() + self.version.header_len());
        let f = Frame { kind: Kind::Opus, timestamp: self.downlink_ms, payload: packet };
        if let Err(e) = frame::encode(self.version, &f, &mut buf) {
            chela_log::warn!("xiaozhi: a downlink frame could not be encoded: {e}");
            return Ok(());
        }
        self.downlink_ms = self.downlink_ms.wrapping_add(FRAME_MS);
        send(&mut self.socket, Message::binary(buf), self.write_timeout).await
    }

    fn reply_starts(&mut self) {
        self.downlink_ms = 0;
    }
}

/// One device's conversation, until it leaves, falls silent, or the daemon stops.
async fn connection<S>(host: Host, device: String, vision: Option<(String, String)>, version: Version, io: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send,
{
    let limits = host.limits;
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
        // Small buffers: an idle device costs little.
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_write_buffer_size(2 * MAX_MESSAGE);
    let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let mut ws = Ws { socket, version, write_timeout: limits.write_timeout, downlink_ms: 0 };
    let mut c = Session::new(host.clone(), device, vision);
    chela_log::debug!(device = %c.device, protocol = version.number(), "xiaozhi: a device connected");
    let shutdown = host.daemon.shutdown().clone();
    let mut deadline = Instant::now() + limits.device_hello;
    let stop = loop {
        let step = tokio::select! {
            incoming = ws.socket.next() => match incoming {
                None => Err(Stop::Gone),
                Some(Err(tung::Error::Capacity(e))) => {
                    chela_log::info!(device = %c.device, "xiaozhi: a device sent a message over the limit ({e}); closed");
                    Err(Stop::Close(Reason::Size, "message too large"))
                }
                Some(Err(e)) => {
                    chela_log::debug!(device = %c.device, "xiaozhi: the WebSocket failed: {e}");
                    Err(Stop::Gone)
                }
                Some(Ok(msg)) => {
                    if c.started() {
                        deadline = Instant::now() + limits.device_idle;
                    }
                    match msg {
                        Message::Text(text) => c.on_text(text.as_str(), &mut ws).await,
                        Message::Binary(bytes) => on_binary(&mut c, version, &bytes),
                        // The codec answers pings and a close; the stream ends after a close.
                        _ => Ok(()),
                    }
                }
            },
            work = c.next() => c.handle(work, &mut ws).await,
            () = sleep_until(deadline) => Err(if c.started() {
                chela_log::debug!(device = %c.device, "xiaozhi: nothing from the device for {:?}; closed", limits.device_idle);
                Stop::Close(Reason::Normal, "idle")
            } else {
                chela_log::info!(device = %c.device, "xiaozhi: no hello within {:?}; closed", limits.device_hello);
                Stop::Close(Reason::Policy, "no hello within 10 s")
            }),
            () = shutdown.wait() => Err(Stop::Close(Reason::Away, "Chela is stopping")),
        };
        if let Err(stop) = step {
            break stop;
        }
    };
    // Leaving cancels the running turn (dropping it) and the reply.
    c.end_turn();
    let close = match stop {
        Stop::Gone => None,
        Stop::Goodbye => Some((CloseCode::Normal, "goodbye")),
        Stop::Close(reason, text) => Some((close_code(reason), text)),
    };
    if let Some((code, reason)) = close {
        let frame = CloseFrame { code, reason: reason.into() };
        let _ = tokio::time::timeout(Duration::from_secs(1), ws.socket.close(Some(frame))).await;
    }
    chela_log::debug!(device = %c.device, "xiaozhi: a device left");
}

fn close_code(reason: Reason) -> CloseCode {
    match reason {
        Reason::Normal => CloseCode::Normal,
        Reason::Policy => CloseCode::Policy,
        Reason::Size => CloseCode::Size,
        Reason::Error => CloseCode::Error,
        Reason::Away => CloseCode::Away,
    }
}

/// A binary frame: audio in the device's protocol version.
fn on_binary(c: &mut Session, version: Version, bytes: &Bytes) -> Result<(), Stop> {
    if !c.started() {
        return Ok(());
    }
    match frame::parse(version, bytes) {
        Ok(Frame { kind: Kind::Opus, payload, .. }) => c.on_audio(payload),
        Ok(Frame { kind: Kind::Json, .. }) => {
            chela_log::debug!(device = %c.device, "xiaozhi: a JSON binary frame was ignored");
            Ok(())
        }
        Err(e) => {
            chela_log::debug!(device = %c.device, "xiaozhi: a bad binary frame: {e}");
            c.bad_frame()
        }
    }
}

/// Writes one message within the write timeout; a failure ends the connection.
async fn send<S>(socket: &mut Socket<S>, msg: Message, timeout: Duration) -> Result<(), Stop>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    match tokio::time::timeout(timeout, socket.send(msg)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            chela_log::debug!("xiaozhi: a write failed: {e}");
            Err(Stop::Gone)
        }
        Err(_) => {
            chela_log::info!("xiaozhi: a device took no data for {timeout:?}; cut off");
            Err(Stop::Gone)
        }
    }
}

/// Longest typed utterance kept (a `detect` text); the rest is cut.
pub const MAX_DETECT_CHARS: usize = 2000;
