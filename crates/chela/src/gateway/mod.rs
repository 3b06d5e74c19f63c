//! The gateway: one HTTP/1 listener on `gateway.listen` serving the owner's console and
//! scripts: a WebSocket chat (`/ws`, MimiClaw's protocol plus token and tool events), an
//! OpenAI-compatible endpoint (`/v1/chat/completions`, `/v1/models`), the dashboard's HTTP API
//! (`/api/*`), `/health`, and the web page at `/`.
//!
//! What it is not: a public web server. It serves one person: every request but the page needs
//! `gateway.token`, on loopback too (see [`auth`]); the page gets it from a one-time login link
//! (see [`login`]).
//!
//! Everything is bounded: connections ([`Limits::connections`]; more are closed at once; per
//! source address, with a reserve only the owner can use: see [`admit`]), WebSockets (counted
//! on their own, closed after [`Limits::ws_idle`] without traffic), request heads (hyper's read buffer and a header timeout, so a slow client cannot hold a
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
use hyper::body::Body;
use hyper::header::HeaderValue;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::channels::{openai, ws};
use crate::daemon::Daemon;
use crate::net::BoxFuture;
use crate::serve::{admit, http};

/// A handler's future behind a pointer, here and in `api::route`: awaited in place, every
/// handler's state machine is compiled into the router's own (52 + 37 KB at opt-level s);
/// boxed, each is polled through its own, for one allocation per request.
fn boxed<'a, T>(handler: impl Future<Output = T> + Send + 'a) -> BoxFuture<'a, T> {
    Box::pin(handler)
}

mod api;
mod api_jobs;
mod api_memory;
mod api_usage;
pub(crate) mod auth;
mod inflate;
pub(crate) mod login;
mod mcp_endpoint;
mod page;
pub(crate) mod vision;
mod xiaozhi;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_abuse;
#[cfg(test)]
mod tests_api;
#[cfg(test)]
mod tests_console;
#[cfg(test)]
mod tests_dos;
// The MCP server's tests, both transports (the HTTP one is a gateway service).
#[cfg(test)]
mod tests_mcp;
#[cfg(test)]
mod tests_mcp_listen;
#[cfg(test)]
mod tests_openai;
#[cfg(test)]
mod tests_vision;
#[cfg(test)]
mod tests_ws_chat;
#[cfg(test)]
mod tests_xiaozhi;
#[cfg(all(test, feature = "voice"))]
mod tests_xiaozhi_mqtt;
#[cfg(all(test, feature = "voice"))]
mod tests_xiaozhi_ws;

pub use http::{ApiError, Limits, Resp};
pub(crate) use http::{full, json};

/// One running gateway: the daemon it serves, where it listens, and who may use it.
pub struct Gateway {
    pub(crate) daemon: Arc<Daemon>,
    pub(crate) listen: SocketAddr,
    /// `gateway.token`; `None` lets nobody in but to the open routes (see [`auth::check`]).
    pub(crate) token: Option<String>,
    /// `gateway.token` as the settings files say now (`chela gateway token --rotate`).
    pub(crate) live_token: auth::LiveToken,
    /// Console login codes already used.
    pub(crate) logins: login::Logins,
    pub(crate) limits: Limits,
    pub(crate) clients: Arc<ws::Clients>,
    /// `/mcp`: the MCP server and its handshake-era sessions.
    pub(crate) mcp: crate::channels::mcp::http::Endpoint,
    /// xiaozhi devices: the rate of new activation codes.
    pub(crate) onboarding: xiaozhi::Onboarding,
    /// Where MQTT devices connect and send audio, once that endpoint is up (`xiaozhi.transport`).
    #[cfg(feature = "voice")]
    pub(crate) mqtt: std::sync::OnceLock<xiaozhi::MqttAddrs>,
    admission: Arc<admit::Admission>,
    conns: Arc<http::Conns>,
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
    let gw = Gateway::new(daemon, bound, token, Limits::from_config(&cfg));
    xiaozhi::start_mqtt(&gw).await?;
    gw.run(listener).await;
    Ok(())
}

impl Gateway {
    pub fn new(daemon: Arc<Daemon>, listen: SocketAddr, token: Option<String>, limits: Limits) -> Arc<Gateway> {
        let clients = Arc::new(ws::Clients::default());
        daemon.outlets().register(Arc::new(ws::WsOutlet(Arc::clone(&clients))));
        if let Err(e) = daemon.toolbox().register(ws::tool::group(Arc::clone(&clients))) {
            chela_log::warn!("gateway: the {} tool group is not available: {e}", ws::tool::GROUP);
        }
        Arc::new(Gateway {
            mcp: crate::channels::mcp::http::Endpoint::new(Arc::clone(&daemon)),
            daemon,
            listen,
            token,
            live_token: auth::LiveToken::default(),
            limits,
            clients,
            onboarding: xiaozhi::Onboarding::default(),
            #[cfg(feature = "voice")]
            mqtt: std::sync::OnceLock::new(),
            admission: admit::Admission::new(limits),
            logins: login::Logins::default(),
            conns: Arc::default(),
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
                    chela_log::warn!("gateway: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Closing the newest connection keeps the ones already served working; waiting for
            // a slot instead would let idle connections starve every new one.
            let admitted = match self.admission.connection(peer.ip(), self.limits.is_local(peer)) {
                Ok(c) => c,
                Err(why) => {
                    chela_log::debug!(%peer, "gateway: a connection was closed: {why}");
                    drop(stream);
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let gw = Arc::clone(&self);
            let shutdown = shutdown.clone();
            self.conns.spawn(async move {
                let probation = admitted.probation;
                let service = hyper::service::service_fn(|req| {
                    let gw = Arc::clone(&gw);
                    async move {
                        if probation && !gw.proves_owner(peer, &req) {
                            return Ok::<_, Infallible>(busy_for_strangers());
                        }
                        Ok::<_, Infallible>(gw.handle(peer, req).await)
                    }
                });
                let head_timeout =
                    if probation { gw.limits.probation_header_timeout } else { gw.limits.header_timeout };
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(head_timeout)
                    .max_buf_size(gw.limits.head.max(8192))
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades();
                tokio::pin!(conn);
                // At a stop the request in flight is still answered (its turn's answer comes
                // with the daemon's flush); only then does the connection close.
                let ended = tokio::select! {
                    ended = conn.as_mut() => ended,
                    () = shutdown.wait() => {
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                };
                if let Err(e) = ended {
                    chela_log::debug!(%peer, "gateway connection ended: {e}");
                }
                drop(admitted);
            });
        }
        self.conns.closed().await;
        self.daemon.outlets().unregister("ws");
        self.daemon.toolbox().unregister(ws::tool::GROUP);
    }

    /// Whether a request on a reserved connection may be served: it comes from this machine, or
    /// it carries `gateway.token` (or none is needed here).
    fn proves_owner<B>(&self, peer: SocketAddr, req: &Request<B>) -> bool {
        self.limits.is_local(peer) || auth::check(self, peer, req, false).is_ok()
    }

    /// Answers one request from `peer`.
    pub async fn handle<B>(self: &Arc<Self>, peer: SocketAddr, req: Request<B>) -> Resp
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let openai = openai::is_openai_path(req.uri().path());
        match self.route(peer, req).await {
            Ok(resp) => resp,
            // OpenAI's clients read only OpenAI's error shape (`openai.BadRequestError`).
            Err(e) if openai => openai::refusal_response(e),
            Err(e) => e.into_response(),
        }
    }

    async fn route<B>(self: &Arc<Self>, peer: SocketAddr, req: Request<B>) -> Result<Resp, ApiError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let upgrade = http::is_upgrade(&req);
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
        let mut req = req;
        if upgrade {
            // Held by the socket's task (see `ws_slot`) for as long as it is open.
            let slot = self.admission.websocket(peer.ip(), self.limits.is_local(peer))?;
            req.extensions_mut().insert(slot);
        }
        if host {
            return boxed(mcp_endpoint::accept(self, req)).await;
        }
        if camera {
            let (parts, body) = req.into_parts();
            return Ok(boxed(vision::explain(self, &method, &parts.headers, body)).await);
        }
        if device {
            let (parts, body) = req.into_parts();
            let body = if method == Method::GET { Bytes::new() } else { self.read_body(body).await? };
            return boxed(xiaozhi::route(self, peer, &method, &path, &parts.headers, body)).await;
        }
        if device_ws {
            #[cfg(feature = "voice")]
            {
                let host = crate::channels::xiaozhi::Host {
                    daemon: Arc::clone(&self.daemon),
                    limits: self.limits,
                    conns: Arc::clone(&self.conns),
                    camera_url: format!("{}{}", xiaozhi::base(self, req.headers()).1, vision::PATH),
                };
                let slot = admit::ws_slot(&req);
                return boxed(crate::channels::xiaozhi::accept(host, req, slot)).await;
            }
            #[cfg(not(feature = "voice"))]
            return Err(ApiError::NotFound(
                "this Chela was built without the `voice` feature: no xiaozhi conversations".into(),
            ));
        }
        if upgrade {
            return match path.as_str() {
                "/" | "/ws" => {
                    let slot = admit::ws_slot(&req);
                    let ctx = ws::Ctx {
                        daemon: Arc::clone(&self.daemon),
                        clients: Arc::clone(&self.clients),
                        limits: self.limits,
                        conns: Arc::clone(&self.conns),
                    };
                    ws::accept(ctx, who, req, slot)
                }
                _ => Err(ApiError::NotFound(format!("there is no WebSocket at {path}; use /ws"))),
            };
        }
        match (&method, path.as_str()) {
            (&Method::GET, "/api/live") => Ok(json(StatusCode::OK, &crate::channels::live::report(&self.daemon))),
            (&Method::GET, "/health" | auth::HEALTHZ) => Ok(json(StatusCode::OK, &serde_json::json!({"status": "ok"}))),
            (&Method::GET, "/") => page::index(req.headers()),
            (_, "/v1/chat/completions") if method == Method::POST => {
                let (parts, body) = req.into_parts();
                let body = self.read_body(body).await?;
                Ok(boxed(openai::completions(&self.daemon, &self.limits, &parts.headers, &body)).await)
            }
            (_, "/v1/responses") if method == Method::POST => {
                let (parts, body) = req.into_parts();
                let body = self.read_body(body).await?;
                Ok(boxed(openai::responses(&self.daemon, &self.limits, &parts.headers, &body)).await)
            }
            (&Method::GET, "/v1/models") => Ok(openai::models()),
            (_, "/mcp") => boxed(crate::channels::mcp::http::handle(&self.limits, &self.mcp, req)).await,
            (_, p) if p.starts_with("/api/") => {
                let (_, body) = req.into_parts();
                let body = if matches!(method, Method::GET | Method::HEAD) {
                    Bytes::new()
                } else {
                    self.read_body(body).await?
                };
                boxed(api::route(self, &method, &path["/api".len()..], &body)).await
            }
            (_, "/health" | "/v1/chat/completions" | "/v1/responses" | "/v1/models" | "/ws" | "/") => {
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
        http::read_body(&self.limits, body).await
    }
}

/// The answer on a reserved connection to a request that did not prove it is the owner's.
fn busy_for_strangers() -> Resp {
    let e = ApiError::Busy(
        "the gateway's connections are all taken; the last few are kept for the owner, so a request on one \
         needs gateway.token (Authorization: Bearer …). Try again in a minute."
            .into(),
    );
    let mut resp = e.into_response();
    // Not kept alive: the slot goes back to the reserve.
    resp.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Whether `path` is the xiaozhi conversation endpoint, `/xiaozhi/v1/` (with or without the slash).
fn is_device_ws(path: &str) -> bool {
    path == "/xiaozhi/v1/" || path == "/xiaozhi/v1"
}
