//! Outbound HTTP/1.1 for providers and tools, on hyper: keep-alive connections for trusted
//! traffic (`pool`), TLS (rustls + webpki roots), HTTP CONNECT and
//! SOCKS5 proxies, and a guard that keeps model-driven requests off loopback, private networks
//! and cloud metadata addresses.
//!
//! Driving it: build one `HttpClient` (cheap to clone; clones share the pool), `send` a
//! `Request`, then read the body with `Response::chunk` (streaming, e.g. SSE) or
//! `Response::bytes` / `bytes_truncated`. Every step is bounded: `Request::timeout` covers
//! everything up to the response headers, each body read has an idle timeout, and whole-body
//! reads have a byte limit. Dropping a pending `send` future or a `Response` before the body
//! ended closes that connection, which is how a turn is cancelled; a body read to the end puts a
//! `Guard::AllowAll` connection back in the pool. `Guard::PublicOnly` requests always get a fresh
//! connection to the address the guard checked.
//!
//! Not here: HTTP/2, redirects, cookies, compression, retries (callers decide with
//! `NetError::is_retryable` and `NetError::is_unreachable`).

mod connect;
mod error;
mod guard;
mod pool;
mod proxy;
mod tls;
mod url;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pool;
#[cfg(test)]
mod tests_proxy;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::http::header::{CONTENT_LENGTH, HOST, USER_AGENT};
use hyper::http::{HeaderMap, HeaderName, HeaderValue, Method};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::AbortHandle;
use tokio::time::{Instant, timeout};

pub use error::{NetError, Phase};
pub use proxy::Proxy;
pub use tls::provider as tls_provider;

use error::chain;
pub use url::Url;

/// A boxed future (see [`Response::bytes`] for why some are).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

const USER_AGENT_VALUE: &str = concat!("chela/", env!("CARGO_PKG_VERSION"));

#[derive(Clone, Debug)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dialer: Arc<Dialer>,
    pool: pool::Pool,
}

/// What opening a connection needs, shared by the pool and the fresh path.
#[derive(Debug)]
struct Dialer {
    proxy: Option<Proxy>,
    connect_timeout: Duration,
    tls: tls::Tls,
}

impl Dialer {
    /// A stream to `url`'s origin, ready for HTTP: resolved and checked against `guard`, dialled
    /// directly or through the proxy, with TLS for `https://`. One boxed stream type keeps a
    /// single copy of hyper's connection code in the binary (see `pool::Live::open`).
    async fn open(&self, url: &Url, guard: Guard, deadline: Instant) -> Result<Box<dyn Io>, NetError> {
        let dial =
            connect::Dial { url, guard, proxy: self.proxy.as_ref(), connect_timeout: self.connect_timeout, deadline };
        let tcp = connect::open(&dial).await?;
        Ok(if url.https { Box::new(self.tls.connect(&url.host, tcp, deadline).await?) } else { Box::new(tcp) })
    }
}

pub struct ClientOptions {
    /// Used for every request.
    pub proxy: Option<Proxy>,
    /// Per resolved address; the request's own timeout still bounds the total.
    pub connect_timeout: Duration,
    /// Extra trusted CA certificates (PEM), e.g. for a self-hosted endpoint.
    pub extra_root_pem: Option<Vec<u8>>,
    /// Idle keep-alive connections kept per host for `Guard::AllowAll` traffic; 0 closes every
    /// connection after its response (a fresh connection per request).
    pub max_idle_per_host: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            proxy: None,
            connect_timeout: Duration::from_secs(10),
            extra_root_pem: None,
            max_idle_per_host: pool::MAX_IDLE_PER_HOST,
        }
    }
}

pub struct Request {
    pub method: Method,
    /// Absolute `http://` or `https://` URL.
    pub url: String,
    /// Sent as given, repeats included. `host` and `user-agent` are added only when absent.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// Until the response headers have arrived: resolution, connect, proxy, TLS, and the wait.
    pub timeout: Duration,
    pub guard: Guard,
}

/// Which addresses a request may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Anything, including loopback and the LAN: for configured endpoints (a local model server).
    AllowAll,
    /// Public internet addresses only: for URLs chosen by the model. See `guard`.
    PublicOnly,
}

/// What [`HttpClient::send`] and [`HttpClient::open_stream`] return: their future, boxed in this
/// crate. An `async fn`'s body is compiled into every crate that awaits it; boxed here, the
/// request path (connect, TLS, proxy, the pool) is compiled once however many crates send.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, NetError>> + Send + 'a>>;

pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

impl HttpClient {
    pub fn new(opts: ClientOptions) -> HttpClient {
        // Bounded whatever the caller asks: idle sockets are file descriptors.
        let max_idle = opts.max_idle_per_host.min(pool::MAX_IDLE_PER_HOST_CEILING);
        let dialer = Arc::new(Dialer {
            proxy: opts.proxy,
            connect_timeout: opts.connect_timeout,
            tls: tls::Tls::new(opts.extra_root_pem),
        });
        let inner = Inner { pool: pool::Pool::new(dialer.clone(), max_idle), dialer };
        HttpClient { inner: Arc::new(inner) }
    }

    /// Sends `req` and returns once the response headers are in.
    pub fn send(&self, req: Request) -> Pending<'_, Response> {
        Box::pin(self.send_now(req))
    }

    async fn send_now(&self, req: Request) -> Result<Response, NetError> {
        let url = Url::parse(&req.url).map_err(|reason| NetError::InvalidUrl { url: req.url.clone(), reason })?;
        let head = build_request(&url, req.method, &req.headers, req.body)?;
        let deadline = Instant::now() + req.timeout;
        match req.guard {
            Guard::AllowAll => self.inner.pool.send(&url, head, deadline).await,
            // Guarded requests (URLs the model chose) never share connections. A pooled
            // connection was checked for the host that opened it; reusing it for another request
            // would trust that old check, and the pool's key (scheme and authority) cannot say
            // which checked address a connection leads to. A fresh connection costs a handshake,
            // which a tool call can afford, and makes "connect only to the address just checked"
            // true for every request.
            Guard::PublicOnly => self.send_fresh(url, req.guard, head, deadline).await,
        }
    }

    /// A raw connection to `url`'s origin (through the proxy, with TLS for `https://`), for a
    /// protocol that takes the connection over after its own HTTP upgrade: the Feishu long
    /// connection's WebSocket. Only for configured endpoints (`Guard::AllowAll`).
    pub fn open_stream<'a>(&'a self, url: &'a Url, timeout: Duration) -> Pending<'a, Box<dyn Io>> {
        Box::pin(self.inner.dialer.open(url, Guard::AllowAll, Instant::now() + timeout))
    }

    /// Sends `head` on a connection of its own, closed when the `Response` is dropped.
    async fn send_fresh(
        &self,
        url: Url,
        guard: Guard,
        head: hyper::Request<Full<Bytes>>,
        deadline: Instant,
    ) -> Result<Response, NetError> {
        let live = pool::Live::open(&self.inner.dialer, &url, guard, deadline).await?;
        pool::send(live, None, &url, head, deadline).await.map_err(|(e, _)| e)
    }
}

fn build_request(
    url: &Url,
    method: Method,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<hyper::Request<Full<Bytes>>, NetError> {
    let mut map = HeaderMap::with_capacity(headers.len() + 3);
    for (name, value) in headers {
        let invalid = || NetError::InvalidHeader { name: name.clone() };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
        let value = HeaderValue::from_str(value).map_err(|_| invalid())?;
        map.append(name, value);
    }
    if !map.contains_key(HOST) {
        // The URL parser only lets through host characters that are valid in a header.
        let value =
            HeaderValue::from_str(&url.host_header()).map_err(|_| NetError::InvalidHeader { name: "host".into() })?;
        map.insert(HOST, value);
    }
    if !map.contains_key(USER_AGENT) {
        map.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
    }
    // hyper omits the length of an empty body, and some servers answer a bodiless POST with
    // "411 Length Required".
    if body.is_empty() && !map.contains_key(CONTENT_LENGTH) && ![Method::GET, Method::HEAD].contains(&method) {
        map.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    }
    let mut request = hyper::Request::new(Full::new(body));
    *request.method_mut() = method;
    *request.uri_mut() = url.path_and_query.clone().into();
    *request.headers_mut() = map;
    Ok(request)
}

fn hyper_error(host: &str, phase: Phase, e: &hyper::Error) -> NetError {
    // `is_parse` covers every malformed-head case, an oversized head included.
    if e.is_parse() {
        NetError::Protocol { host: host.to_owned(), reason: chain(e) }
    } else {
        NetError::Dropped { host: host.to_owned(), phase, reason: chain(e) }
    }
}

/// Aborting the task drops hyper's connection and with it the socket, so a dropped `send` future
/// or `Response` never leaves a connection streaming into the void. hyper usually notices the
/// dropped receiver and closes by itself; the abort makes that certain and immediate.
struct Driver(AbortHandle);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A response whose headers have arrived; the body is read on demand. Dropping it before the
/// body ended closes the connection.
pub struct Response {
    pub status: u16,
    pub headers: HeaderMap,
    body: Incoming,
    host: String,
    /// The connection: back to the pool once the body has ended, else closed with the response.
    conn: pool::Lease,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response").field("status", &self.status).field("host", &self.host).finish_non_exhaustive()
    }
}

impl Response {
    fn new(parts: hyper::http::response::Parts, body: Incoming, host: String, conn: pool::Lease) -> Response {
        Response { status: parts.status.as_u16(), headers: parts.headers, body, host, conn }
    }

    /// The next piece of the body, as it arrives; `Ok(None)` once the body ended cleanly. Errors
    /// when no byte arrives within `idle`, or when the connection ends before the body is
    /// complete (a chunked body without its last chunk, fewer bytes than `content-length`).
    /// Cancel-safe: dropping the future loses no data.
    pub async fn chunk(&mut self, idle: Duration) -> Result<Option<Bytes>, NetError> {
        loop {
            let frame = match timeout(idle, self.body.frame()).await {
                Err(_) => return Err(NetError::Timeout { phase: Phase::Body, target: self.host.clone() }),
                Ok(None) => {
                    self.conn.body_ended(idle).await;
                    return Ok(None);
                }
                Ok(Some(Err(e))) => return Err(hyper_error(&self.host, Phase::Body, &e)),
                Ok(Some(Ok(frame))) => frame,
            };
            // Trailers and empty data frames carry nothing for the caller.
            if let Ok(data) = frame.into_data()
                && !data.is_empty()
            {
                return Ok(Some(data));
            }
        }
    }

    /// The whole body, or `BodyTooLarge` as soon as it is known to exceed `limit` bytes.
    // Boxed behind a plain function, here and below: an async fn's state machine is compiled
    // into every crate that awaits it (fat LTO cannot merge the copies); a boxed one only here.
    #[inline(never)]
    pub fn bytes(self, limit: usize, idle: Duration) -> BoxFuture<'static, Result<Bytes, NetError>> {
        Box::pin(self.read_whole(limit, idle))
    }

    async fn read_whole(mut self, limit: usize, idle: Duration) -> Result<Bytes, NetError> {
        if self.content_length().is_some_and(|len| len > limit as u64) {
            return Err(NetError::BodyTooLarge { limit });
        }
        let mut body = BytesMut::new();
        while let Some(piece) = self.chunk(idle).await? {
            if body.len() + piece.len() > limit {
                return Err(NetError::BodyTooLarge { limit });
            }
            body.extend_from_slice(&piece);
        }
        Ok(body.freeze())
    }

    /// The first `limit` bytes of the body and whether there was more. Stops reading once past
    /// the limit (the rest is never downloaded).
    #[inline(never)]
    pub fn bytes_truncated(self, limit: usize, idle: Duration) -> BoxFuture<'static, Result<(Bytes, bool), NetError>> {
        Box::pin(self.read_head(limit, idle))
    }

    async fn read_head(mut self, limit: usize, idle: Duration) -> Result<(Bytes, bool), NetError> {
        let known_longer = self.content_length().is_some_and(|len| len > limit as u64);
        let mut body = BytesMut::new();
        loop {
            if body.len() == limit && known_longer {
                return Ok((body.freeze(), true));
            }
            let Some(piece) = self.chunk(idle).await? else { return Ok((body.freeze(), false)) };
            let room = limit - body.len();
            if piece.len() > room {
                body.extend_from_slice(&piece[..room]);
                return Ok((body.freeze(), true));
            }
            body.extend_from_slice(&piece);
        }
    }

    fn content_length(&self) -> Option<u64> {
        self.headers.get(CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
    }
}
