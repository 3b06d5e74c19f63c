//! Keep-alive connections for trusted traffic (`Guard::AllowAll`: the provider, web search,
//! channels): hyper-util's pooled client driven by our own connector, so a daemon pays for the
//! TCP and TLS handshakes once per host instead of once per request.
//!
//! The connector is the same dial path as a fresh connection (resolve, proxy tunnel, TLS; see
//! `Dialer`). A connection goes back to the pool only once its response was read to the end; one
//! dropped half-way is closed by hyper, never reused. Idle connections are bounded in number per
//! host and closed after `IDLE_TIMEOUT`.
//!
//! Not here: guarded requests (`Guard::PublicOnly`). They never touch the pool; see `send` in
//! `mod.rs` for why.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::http::Uri;
use hyper::http::response::Parts;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection, capture_connection};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::time::{Instant, timeout_at};

use super::error::chain;
use super::url::Url;
use super::{Dialer, Guard, Io, NetError, Phase, hyper_error};

/// How long an unused connection stays open. Below the usual server-side keep-alive limits
/// (60 s and more), so we rarely pick a connection the server is just closing.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections kept per host by default. An assistant rarely has more than a couple of
/// requests to one host in flight (a streaming model call, a search); more than this are closed
/// when done.
pub(crate) const MAX_IDLE_PER_HOST: usize = 4;
/// The most `ClientOptions::max_idle_per_host` may ask for.
pub(crate) const MAX_IDLE_PER_HOST_CEILING: usize = 64;

tokio::task_local! {
    /// The deadline of the request that is waiting for a connection. hyper-util gives a
    /// connector only the URI, so this is how the request's time bound reaches the dial.
    static DEADLINE: Instant;
}

#[derive(Debug)]
pub(crate) struct Pool {
    client: Client<Connector, Full<Bytes>>,
}

impl Pool {
    pub(crate) fn new(dialer: Arc<Dialer>, max_idle_per_host: usize) -> Pool {
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(max_idle_per_host)
            .pool_timer(TokioTimer::new())
            .build(Connector { dialer });
        Pool { client }
    }

    /// Sends `head` (origin-form target) on a pooled connection to `url`'s origin, or a new one.
    pub(crate) async fn send(
        &self,
        url: &Url,
        mut head: hyper::Request<Full<Bytes>>,
        deadline: Instant,
    ) -> Result<(Parts, Incoming), NetError> {
        // The pool is keyed by scheme and authority, so the client needs the absolute form; it
        // writes the origin form on the wire.
        let absolute =
            format!("{}://{}{}", if url.https { "https" } else { "http" }, url.authority(), url.path_and_query);
        *head.uri_mut() = absolute
            .parse::<Uri>()
            .map_err(|e| NetError::InvalidUrl { url: absolute.clone(), reason: e.to_string() })?;
        let captured = capture_connection(&mut head);
        let pending = DEADLINE.scope(deadline, self.client.request(head));
        match timeout_at(deadline, pending).await {
            Err(_) => {
                // The dial times itself out with its exact phase at the same deadline; this is
                // the rest: waiting for the answer, or for a connection someone else is opening.
                let connected = captured.connection_metadata().is_some();
                let phase = if connected { Phase::Headers } else { Phase::Connect };
                Err(NetError::Timeout { phase, target: url.authority() })
            }
            Ok(Err(e)) => Err(classify(&url.host, &e)),
            Ok(Ok(response)) => Ok(response.into_parts()),
        }
    }
}

/// The dial's own `NetError` when the connector failed, else hyper's error, as for a fresh
/// connection.
fn classify(host: &str, e: &hyper_util::client::legacy::Error) -> NetError {
    let source = std::error::Error::source(e);
    if let Some(net) = source.and_then(|s| s.downcast_ref::<NetError>()) {
        return net.clone();
    }
    if let Some(hyper) = source.and_then(|s| s.downcast_ref::<hyper::Error>()) {
        return hyper_error(host, Phase::Headers, hyper);
    }
    NetError::Dropped { host: host.to_owned(), phase: Phase::Headers, reason: chain(e) }
}

#[derive(Clone, Debug)]
pub(crate) struct Connector {
    dialer: Arc<Dialer>,
}

impl tower_service::Service<Uri> for Connector {
    type Response = Conn;
    type Error = NetError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, NetError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), NetError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // hyper-util calls this while polling the request's own future, inside `DEADLINE.scope`.
        // The fallback only bounds a call from anywhere else.
        let deadline = DEADLINE.try_with(|d| *d).unwrap_or_else(|_| Instant::now() + self.dialer.connect_timeout);
        let dialer = self.dialer.clone();
        Box::pin(async move {
            let text = uri.to_string();
            let url = Url::parse(&text).map_err(|reason| NetError::InvalidUrl { url: text, reason })?;
            let io = dialer.open(&url, Guard::AllowAll, deadline).await?;
            Ok(Conn::new(io))
        })
    }
}

/// A dialled stream (plain or TLS, direct or tunnelled) as hyper wants it. Both the pool and a
/// fresh connection use this one type, so hyper's HTTP/1 client is compiled once.
pub(crate) struct Conn(TokioIo<Box<dyn Io>>);

impl Conn {
    pub(crate) fn new(io: Box<dyn Io>) -> Conn {
        Conn(TokioIo::new(io))
    }
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        // Not `proxy(true)`: a proxy here is a tunnel, so requests keep the origin form.
        Connected::new()
    }
}

impl Read for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl Write for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
}
