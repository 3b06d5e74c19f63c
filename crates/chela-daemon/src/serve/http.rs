//! The gateway's low HTTP parts, shared by its router and the channels it serves: the response
//! type, the one error type (each variant is an HTTP status, each carries the sentence the person
//! or the script's author reads, sent as `{"error": "…"}`), the bounds, and bounded body reading.

use std::fmt;

use hyper::StatusCode;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use chela_core::config as keys;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body;
use hyper::header::{CONNECTION, CONTENT_TYPE, SEC_WEBSOCKET_ACCEPT, UPGRADE};
use hyper::{Request, Response};
use tokio::task::JoinSet;

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiError {
    /// 400: the request is malformed (bad JSON, a missing field, a bad name).
    BadRequest(String),
    /// 401: a token is needed and none (or a wrong one) was given.
    Unauthorized,
    /// 403: refused whoever asks (another site's page, a host name that is not this machine).
    Forbidden(String),
    NotFound(String),
    MethodNotAllowed(String),
    /// 408: the body did not arrive in time.
    Timeout(String),
    /// 409: the request fits, but the state does not allow it (a core group).
    Conflict(String),
    /// 413
    TooLarge(String),
    /// 429 / 503: Chela is busy or stopping; try again.
    Busy(String),
    /// 502: the model could not answer.
    Upstream(String),
    /// 500: something on this machine failed (a file could not be written).
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Upstream(_) => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn into_response(self) -> Resp {
        let status = self.status();
        let mut resp = json(status, &serde_json::json!({ "error": self.to_string() }));
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"chela\""));
        }
        resp
    }

    /// A failure of this machine, logged in full and told in a sentence.
    pub fn internal(what: &str, e: impl fmt::Display) -> ApiError {
        chela_log::warn!("gateway: {what}: {e}");
        ApiError::Internal(format!("{what}: {e}"))
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Unauthorized => f.write_str(
                "This gateway needs its token: send `Authorization: Bearer <gateway.token>` (or `?token=` on a \
                 WebSocket URL). `chela console` prints a one-time login link for the web page; \
                 `chela config get gateway.token` shows where the token is set.",
            ),
            ApiError::BadRequest(s)
            | ApiError::Forbidden(s)
            | ApiError::NotFound(s)
            | ApiError::MethodNotAllowed(s)
            | ApiError::Timeout(s)
            | ApiError::Conflict(s)
            | ApiError::TooLarge(s)
            | ApiError::Busy(s)
            | ApiError::Upstream(s)
            | ApiError::Internal(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ApiError {}

/// The response body every handler returns: a whole buffer or a stream (SSE).
pub type Resp = Response<BoxBody<Bytes, Infallible>>;

/// The bounds of one gateway.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Open connections at once; one more is closed as soon as it is accepted.
    pub connections: usize,
    /// Bytes of one request body.
    pub body: usize,
    /// How long a request body may take to arrive.
    pub body_timeout: Duration,
    /// How long a request head may take to arrive (slowloris).
    pub header_timeout: Duration,
    /// Bytes hyper buffers for a request head.
    pub head: usize,
    /// Bytes of one WebSocket message, however many frames it comes in.
    pub ws_message: usize,
    /// Events waiting to be written to one WebSocket (or one SSE stream); a client that lets
    /// more pile up is cut off.
    pub outbound: usize,
    /// How long writing one event to a client may take before it is cut off.
    pub write_timeout: Duration,
    /// How long a xiaozhi device has to send its `hello` after the upgrade.
    pub device_hello: Duration,
    /// A xiaozhi device that sends nothing for this long is closed (the firmware's own rule).
    pub device_idle: Duration,
    /// Connections one source address other than this machine may hold.
    pub per_address: usize,
    /// The last of [`Limits::connections`], kept for the owner (see [`admit`]).
    pub reserved: usize,
    /// How long a connection on probation in the reserve may take to send its head.
    pub probation_header_timeout: Duration,
    /// Upgraded WebSockets open at once (chat, devices, MCP tool hosts).
    pub websockets: usize,
    /// WebSockets one source address other than this machine may hold.
    pub ws_per_address: usize,
    /// A `/ws` chat socket with no message either way and no turn in flight for this long is
    /// closed (the page reconnects by itself).
    pub ws_idle: Duration,
    /// Whether a loopback peer is a client on this machine (exempt from the per-address caps,
    /// and given a reserved slot outright). Tests switch it off to play remote clients from
    /// 127.0.0.x.
    pub loopback_is_local: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 256,
            body: 1024 * 1024,
            body_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(10),
            // hyper's smallest read buffer; a browser's request head fits in a few KiB.
            head: 16 * 1024,
            ws_message: 256 * 1024,
            outbound: 256,
            write_timeout: Duration::from_secs(10),
            device_hello: Duration::from_secs(10),
            device_idle: Duration::from_secs(120),
            per_address: 16,
            reserved: 32,
            probation_header_timeout: Duration::from_secs(2),
            websockets: 128,
            ws_per_address: 8,
            ws_idle: Duration::from_secs(300),
            loopback_is_local: true,
        }
    }
}

impl Limits {
    /// The defaults with the `gateway.*` bounds the owner set.
    pub fn from_config(cfg: &crate::config::Config) -> Limits {
        let connections = cfg.usize(keys::GATEWAY_MAX_CONNECTIONS);
        Limits {
            connections,
            // An eighth: plenty for one person's page and scripts, little for an attacker to miss.
            reserved: (connections / 8).max(1),
            per_address: cfg.usize(keys::GATEWAY_CONNECTIONS_PER_ADDRESS),
            websockets: cfg.usize(keys::GATEWAY_MAX_WEBSOCKETS),
            ws_per_address: cfg.usize(keys::GATEWAY_WEBSOCKETS_PER_ADDRESS),
            ws_idle: Duration::from_secs(cfg.usize(keys::GATEWAY_WEBSOCKET_IDLE_SECS) as u64),
            ..Limits::default()
        }
    }

    /// Whether `peer` is a client on this machine.
    pub fn is_local(&self, peer: SocketAddr) -> bool {
        self.loopback_is_local && peer.ip().to_canonical().is_loopback()
    }
}

/// Reads a request body within the gateway's bounds on its size and its time.
pub async fn read_body<B>(limits: &Limits, body: B) -> Result<Bytes, ApiError>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limit = limits.body;
    let collect = Limited::new(body, limit).collect();
    match tokio::time::timeout(limits.body_timeout, collect).await {
        Err(_) => Err(ApiError::Timeout(format!(
            "the request body did not arrive within {} s",
            limits.body_timeout.as_secs()
        ))),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(ApiError::TooLarge(format!("the request body is over {limit} bytes, the most the gateway reads")))
        }
        Ok(Err(e)) => Err(ApiError::BadRequest(format!("the request body could not be read: {e}"))),
    }
}

/// A JSON response.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Resp {
    let mut resp = Response::new(full(value.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

pub fn full(body: impl Into<Bytes>) -> BoxBody<Bytes, Infallible> {
    Full::new(body.into()).boxed()
}

/// Whether `req` asks for a WebSocket.
pub fn is_upgrade<B>(req: &Request<B>) -> bool {
    req.headers().get(UPGRADE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The 101 answer to a WebSocket upgrade request whose `Sec-WebSocket-Key` is `key`.
pub fn switching_protocols(key: &HeaderValue) -> Result<Resp, ApiError> {
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut resp = Response::new(full(""));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(SEC_WEBSOCKET_ACCEPT, HeaderValue::from_str(&accept).map_err(|e| ApiError::internal("accept key", e))?);
    Ok(resp)
}

/// Who is asking, as the daemon's `Incoming::sender` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// A client on this machine (loopback listen address) that presented the token.
    Owner,
    /// A client elsewhere that presented `gateway.token`.
    TokenHolder,
}

impl Who {
    pub fn sender(self) -> &'static str {
        match self {
            Who::Owner => "owner",
            Who::TokenHolder => "token",
        }
    }
}

/// The gateway's connection tasks: its HTTP connections and the WebSockets upgraded from them.
/// Owned here so that a stop waits for them (an answer on its way still reaches its client) and
/// dropping the gateway ends them. The set holds live connections only, so it is bounded by
/// [`Limits::connections`] and [`Limits::websockets`].
#[derive(Debug, Default)]
pub struct Conns(Mutex<JoinSet<()>>);

impl Conns {
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        // Boxed, so every kind of connection shares one task type (tokio's task code compiled once).
        let task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(task);
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        while set.try_join_next().is_some() {}
        set.spawn(task);
    }

    /// Waits until every connection ended, those started meanwhile too (a request upgraded
    /// after the listener stopped).
    pub async fn closed(&self) {
        loop {
            let mut set = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
            if set.is_empty() {
                return;
            }
            while set.join_next().await.is_some() {}
        }
    }
}
