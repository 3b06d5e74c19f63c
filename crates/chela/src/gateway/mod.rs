//! The gateway: one HTTP/1 listener on `gateway.listen` serving the owner's console and
//! scripts: a WebSocket chat (`/ws`, MimiClaw's protocol plus token and tool events), an
//! OpenAI-compatible endpoint (`/v1/chat/completions`, `/v1/models`), the dashboard's HTTP API
//! (`/api/*`), `/health`, and the web page at `/`.
//!
//! What it is not: a public web server. It serves one person: every request but the page needs
//! `gateway.token`, on loopback too (see [`auth`]); the page gets it from a one-time login link
//! (see [`login`]).
//!
//! Everything is bounded: connections ([`Limits::connections`]; more are closed at once),
//! request heads (hyper's read buffer and a header timeout, so a slow client cannot hold a
//! connection while sending headers), request bodies ([`Limits::body`], read within
//! [`Limits::body_timeout`]), WebSocket messages and each socket's outbound queue (see [`ws`]).
//!
//! Drive it with [`serve`] (from `chela run`) or, in tests, [`Gateway::bind`] + [`Gateway::run`];
//! a request is answered by [`Gateway::handle`], which tests call directly as a service.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::daemon::Daemon;

mod api;
mod auth;
mod error;
pub(crate) mod login;
mod mcp_endpoint;
mod openai;
mod page;
mod stream;
mod tool;
pub(crate) mod vision;
pub(crate) mod ws;
mod xiaozhi;
#[cfg(feature = "voice")]
mod xiaozhi_turn;
#[cfg(feature = "voice")]
pub(crate) mod xiaozhi_ws;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_abuse;
#[cfg(test)]
mod tests_api;
#[cfg(test)]
mod tests_vision;
#[cfg(test)]
mod tests_xiaozhi;
#[cfg(all(test, feature = "voice"))]
mod tests_xiaozhi_ws;

pub use error::ApiError;
pub use ws::WsOutlet;

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
        }
    }
}

/// One running gateway: the daemon it serves, where it listens, and who may use it.
pub struct Gateway {
    pub(crate) daemon: Arc<Daemon>,
    pub(crate) listen: SocketAddr,
    /// `gateway.token`; `None` lets nobody in but to the open routes (see [`auth::check`]).
    pub(crate) token: Option<String>,
    /// Console login codes already used.
    pub(crate) logins: login::Logins,
    pub(crate) limits: Limits,
    pub(crate) clients: Arc<ws::Clients>,
    /// `/mcp`: the MCP server and its handshake-era sessions.
    pub(crate) mcp: crate::mcp::serve::http::Endpoint,
    /// xiaozhi devices: the rate of new activation codes.
    pub(crate) onboarding: xiaozhi::Onboarding,
    connections: Arc<Semaphore>,
}

/// Starts the gateway of `daemon` on `gateway.listen` and serves until the daemon stops.
pub async fn serve(daemon: Arc<Daemon>) -> anyhow::Result<()> {
    let cfg = daemon.config();
    let listen = cfg.settings().gateway.addr();
    let token = Some(auth::token_for(&daemon, listen)?);
    let listener = TcpListener::bind(listen).await.with_context(|| {
        format!("the gateway cannot listen on {listen} (gateway.listen); is another Chela already running there?")
    })?;
    // Said on stderr, not only in the log: it is where the page is (and with port 0, which port).
    eprintln!("chela: the gateway listens on http://{}", listener.local_addr().unwrap_or(listen));
    // The bound address, so anything that names it (the OTA answer's WebSocket URL) has the
    // real port when `gateway.listen` asked for port 0.
    let bound = listener.local_addr().unwrap_or(listen);
    auth::announce(token.as_deref().unwrap_or(""), bound);
    let gw = Gateway::new(daemon, bound, token, Limits::default());
    gw.run(listener).await;
    Ok(())
}

impl Gateway {
    pub fn new(daemon: Arc<Daemon>, listen: SocketAddr, token: Option<String>, limits: Limits) -> Arc<Gateway> {
        let clients = Arc::new(ws::Clients::default());
        daemon.outlets().register(Arc::new(WsOutlet(Arc::clone(&clients))));
        if let Err(e) = daemon.toolbox().register(tool::group(Arc::clone(&clients))) {
            tracing::warn!("gateway: the {} tool group is not available: {e}", tool::GROUP);
        }
        Arc::new(Gateway {
            mcp: crate::mcp::serve::http::Endpoint::new(Arc::clone(&daemon)),
            daemon,
            listen,
            token,
            limits,
            clients,
            onboarding: xiaozhi::Onboarding::default(),
            logins: login::Logins::default(),
            connections: Arc::new(Semaphore::new(limits.connections)),
        })
    }

    /// Accepts connections until the daemon stops.
    pub async fn run(self: Arc<Self>, listener: TcpListener) {
        let shutdown = self.daemon.shutdown().clone();
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = shutdown.wait() => break,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!("gateway: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Closing the newest connection keeps the ones already served working; waiting for
            // a permit instead would let idle connections starve every new one.
            let Ok(permit) = Arc::clone(&self.connections).try_acquire_owned() else {
                tracing::debug!(%peer, "gateway: too many connections; one closed");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let gw = Arc::clone(&self);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|req| {
                    let gw = Arc::clone(&gw);
                    async move { Ok::<_, Infallible>(gw.handle(peer, req).await) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(gw.limits.header_timeout)
                    .max_buf_size(gw.limits.head.max(8192))
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades();
                if let Err(e) = conn.await {
                    tracing::debug!(%peer, "gateway connection ended: {e}");
                }
                drop(permit);
            });
        }
        self.daemon.outlets().unregister("ws");
        self.daemon.toolbox().unregister(tool::GROUP);
    }

    /// Answers one request from `peer`.
    pub async fn handle<B>(self: &Arc<Self>, peer: SocketAddr, req: Request<B>) -> Resp
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        match self.route(peer, req).await {
            Ok(resp) => resp,
            Err(e) => e.into_response(),
        }
    }

    async fn route<B>(self: &Arc<Self>, peer: SocketAddr, req: Request<B>) -> Result<Resp, ApiError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let upgrade = ws::is_upgrade(&req);
        let path = req.uri().path().to_owned();
        let method = req.method().clone();
        // The page asks for the token itself, so it is served to anyone (it holds no data).
        let page = method == Method::GET && path == "/" && !upgrade;
        // Devices cannot send gateway.token: the device store authorises them (see `xiaozhi`).
        let device = xiaozhi::is_device_path(&path) && !upgrade;
        // The camera's bearer is checked against the device store (see `vision`).
        let camera = path == vision::PATH && !upgrade;
        // Tool hosts on the MCP endpoint hold only their own token (see `mcp_endpoint`).
        let host = upgrade && crate::mcp::endpoint::is_endpoint_path(&path);
        // A device's conversation: authorised by its own token in the device store.
        let device_ws = upgrade && is_device_ws(&path);
        let who = auth::check(self, peer, &req, page || device || camera || host || device_ws)?;
        if host {
            return mcp_endpoint::accept(self, req).await;
        }
        if camera {
            let (parts, body) = req.into_parts();
            return Ok(vision::explain(self, &method, &parts.headers, body).await);
        }
        if device {
            let (parts, body) = req.into_parts();
            let body = if method == Method::GET { Bytes::new() } else { self.read_body(body).await? };
            return xiaozhi::route(self, &method, &path, &parts.headers, body).await;
        }
        if device_ws {
            #[cfg(feature = "voice")]
            return xiaozhi_ws::accept(self, req).await;
            #[cfg(not(feature = "voice"))]
            return Err(ApiError::NotFound(
                "this Chela was built without the `voice` feature: no xiaozhi conversations".into(),
            ));
        }
        if upgrade {
            return match path.as_str() {
                "/" | "/ws" => ws::accept(self, who, req),
                _ => Err(ApiError::NotFound(format!("there is no WebSocket at {path}; use /ws"))),
            };
        }
        match (&method, path.as_str()) {
            (&Method::GET, "/health") => Ok(json(StatusCode::OK, &serde_json::json!({"status": "ok"}))),
            (&Method::GET, "/") => page::index(),
            (_, "/v1/chat/completions") if method == Method::POST => {
                let (parts, body) = req.into_parts();
                let body = self.read_body(body).await?;
                openai::completions(self, &parts.headers, &body).await
            }
            (&Method::GET, "/v1/models") => Ok(openai::models()),
            (_, "/mcp") => crate::mcp::serve::http::handle(self, &self.mcp, req).await,
            (_, p) if p.starts_with("/api/") => {
                let (_, body) = req.into_parts();
                let body = if matches!(method, Method::GET | Method::HEAD) {
                    Bytes::new()
                } else {
                    self.read_body(body).await?
                };
                api::route(self, &method, &path["/api".len()..], &body).await
            }
            (_, "/health" | "/v1/chat/completions" | "/v1/models" | "/ws" | "/") => {
                Err(ApiError::MethodNotAllowed(format!("{method} is not used on {path}")))
            }
            _ => Err(ApiError::NotFound(format!("there is nothing at {path}"))),
        }
    }

    /// Reads a request body whole, within [`Limits::body`] bytes and [`Limits::body_timeout`].
    pub(crate) async fn read_body<B>(&self, body: B) -> Result<Bytes, ApiError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let limit = self.limits.body;
        let collect = Limited::new(body, limit).collect();
        match tokio::time::timeout(self.limits.body_timeout, collect).await {
            Err(_) => Err(ApiError::Timeout(format!(
                "the request body did not arrive within {} s",
                self.limits.body_timeout.as_secs()
            ))),
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                Err(ApiError::TooLarge(format!("the request body is over {limit} bytes, the most the gateway reads")))
            }
            Ok(Err(e)) => Err(ApiError::BadRequest(format!("the request body could not be read: {e}"))),
        }
    }
}

/// Whether `path` is the xiaozhi conversation endpoint, `/xiaozhi/v1/` (with or without the slash).
fn is_device_ws(path: &str) -> bool {
    path == "/xiaozhi/v1/" || path == "/xiaozhi/v1"
}

/// A JSON response.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Resp {
    let mut resp = Response::new(full(value.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

pub(crate) fn full(body: impl Into<Bytes>) -> BoxBody<Bytes, Infallible> {
    Full::new(body.into()).boxed()
}
