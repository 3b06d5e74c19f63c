//! Keep-alive and the guard, against hyper servers on 127.0.0.1 that count the TCP connections
//! they accept; and `NetError::is_unreachable` against real refusals and a name that never
//! resolves.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::tests::{LONG, SHORT, client, get, tls_acceptor};
use super::*;

/// A body that sends "abc" and then nothing, ever: a stream the client gives up on.
struct Endless(bool);

impl hyper::body::Body for Endless {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Pending
        } else {
            Poll::Ready(Some(Ok(Frame::data("abc".into()))))
        }
    }
}

/// Connections accepted and requests answered by a `counting_server`.
#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    requests: AtomicUsize,
}

impl Counts {
    fn get(&self) -> (usize, usize) {
        (self.connections.load(Ordering::SeqCst), self.requests.load(Ordering::SeqCst))
    }
}

/// A keep-alive hyper server on 127.0.0.1 (TLS for `localhost` when `tls` is given). It answers
/// "hello", except a request to `/endless`, whose body never ends.
async fn counting_server(tls: Option<tokio_rustls::TlsAcceptor>) -> (SocketAddr, Arc<Counts>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let shared = counts.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            shared.connections.fetch_add(1, Ordering::SeqCst);
            let (counts, tls) = (shared.clone(), tls.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    counts.requests.fetch_add(1, Ordering::SeqCst);
                    let body = if req.uri().path() == "/endless" {
                        http_body_util::Either::Left(Endless(false))
                    } else {
                        http_body_util::Either::Right(Full::new(Bytes::from_static(b"hello")))
                    };
                    async move { Ok::<_, Infallible>(hyper::Response::new(body)) }
                });
                let http = hyper::server::conn::http1::Builder::new();
                let _ = match tls {
                    None => http.serve_connection(TokioIo::new(stream), service).await,
                    Some(acceptor) => {
                        let Ok(tls) = acceptor.accept(stream).await else { return };
                        http.serve_connection(TokioIo::new(tls), service).await
                    }
                };
            });
        }
    });
    (addr, counts)
}

#[tokio::test]
async fn sequential_requests_share_one_connection() {
    let (addr, counts) = counting_server(None).await;
    let client = client();
    for i in 0..10 {
        // Clones share the pool, as the provider, search and channels do.
        let resp = client.clone().send(get(format!("http://{addr}/{i}"))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (1, 10), "10 requests, one TCP connection");
}

#[tokio::test]
async fn https_requests_share_one_connection() {
    let (acceptor, pem) = tls_acceptor();
    let (addr, counts) = counting_server(Some(acceptor)).await;
    let client = HttpClient::new(ClientOptions { extra_root_pem: Some(pem.into_bytes()), ..ClientOptions::default() });
    for _ in 0..10 {
        let resp = client.send(get(format!("https://localhost:{}/", addr.port()))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (1, 10), "one TCP connection and one TLS handshake");
}

#[tokio::test]
async fn no_idle_connections_means_a_fresh_connection_each_time() {
    let (addr, counts) = counting_server(None).await;
    let client = HttpClient::new(ClientOptions { max_idle_per_host: 0, ..ClientOptions::default() });
    for _ in 0..3 {
        let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (3, 3));
}

#[tokio::test]
async fn the_guarded_path_opens_a_connection_per_request() {
    // `Guard::PublicOnly` cannot reach a server on loopback, so this drives the path it takes,
    // `send_fresh`, with the guard off; the guard itself is tested in `tests.rs`.
    let (addr, counts) = counting_server(None).await;
    let client = client();
    for _ in 0..10 {
        let url = Url::parse(&format!("http://{addr}/")).unwrap();
        let head = build_request(&url, Method::GET, &[], Bytes::new()).unwrap();
        let resp = client.send_fresh(url, Guard::AllowAll, head, Instant::now() + LONG).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (10, 10), "every guarded request dials the address it checked");
}

#[tokio::test]
async fn a_pooled_connection_never_carries_a_guarded_request() {
    let (addr, counts) = counting_server(None).await;
    let client = client();
    let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    // An idle connection to exactly this origin is now in the pool; the guard must still refuse.
    let req = Request { guard: Guard::PublicOnly, ..get(format!("http://{addr}/")) };
    let err = client.send(req).await.unwrap_err();
    assert!(matches!(err, NetError::Refused { .. }), "{err:?}");
    assert_eq!(counts.get(), (1, 1), "the refused request reached nothing");
}

#[tokio::test]
async fn a_response_dropped_mid_body_is_not_reused() {
    let (addr, counts) = counting_server(None).await;
    let client = client();
    let mut resp = client.send(get(format!("http://{addr}/endless"))).await.unwrap();
    assert_eq!(resp.chunk(SHORT).await.unwrap().unwrap(), "abc");
    drop(resp);
    // Had the half-read connection gone back to the pool, this would read the rest of the
    // endless body as its response, or hang.
    for _ in 0..3 {
        let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (2, 4), "a new connection after the dropped one, then reused");
}

#[tokio::test]
async fn a_silent_proxy_times_out_at_the_requests_deadline_in_the_proxy_phase() {
    // A "proxy" that accepts and never answers the CONNECT.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            held.push(listener.accept().await.unwrap().0);
        }
    });
    let client = HttpClient::new(ClientOptions {
        proxy: Some(Proxy::parse(&format!("http://{proxy}")).unwrap()),
        ..ClientOptions::default()
    });
    let req = Request { timeout: Duration::from_millis(200), ..get("http://example.com/") };
    let started = Instant::now();
    let err = client.send(req).await.unwrap_err();
    // The request's own timeout reached the pool's connector, which knows the phase.
    assert!(matches!(err, NetError::Timeout { phase: Phase::Proxy, .. }), "{err:?}");
    assert!(started.elapsed() < LONG);
}

#[tokio::test]
async fn a_refused_connection_is_unreachable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for guard in [Guard::AllowAll, Guard::PublicOnly] {
        let req = Request { guard, ..get(format!("http://127.0.0.1:{port}/")) };
        let err = client().send(req).await.unwrap_err();
        if guard == Guard::AllowAll {
            assert!(matches!(err, NetError::Connect { refused: true, .. }), "{err:?}");
            assert!(err.is_unreachable() && err.is_retryable(), "{err:?}");
        } else {
            assert!(!err.is_unreachable(), "refused by the guard, not by the network: {err:?}");
        }
    }
    // A proxy that is down is the only way out, so the origin is unreachable too.
    let via = HttpClient::new(ClientOptions {
        proxy: Some(Proxy::parse(&format!("socks5h://127.0.0.1:{port}")).unwrap()),
        ..ClientOptions::default()
    });
    let err = via.send(get("http://example.com/")).await.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
}

#[tokio::test]
async fn a_name_that_does_not_exist_is_unreachable() {
    let started = Instant::now();
    let client = client();
    let pending = client.send(get("https://api.chela-test.invalid/v1/messages"));
    let err = tokio::time::timeout(LONG, pending).await.expect("resolution is bounded").unwrap_err();
    assert!(matches!(err, NetError::Dns { not_found: true, .. }), "{err:?}");
    assert!(err.is_unreachable(), "{err:?}");
    assert!(err.to_string().starts_with("could not resolve api.chela-test.invalid: "), "{err}");
    assert!(started.elapsed() < LONG);
}

#[tokio::test]
async fn timeouts_and_resets_are_not_unreachable() {
    // Accepts, reads the request, and holds the connection without answering.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            held.push(silent.accept().await.unwrap().0);
        }
    });
    let req = Request { timeout: Duration::from_millis(150), ..get(format!("http://{silent_addr}/")) };
    let err = client().send(req).await.unwrap_err();
    assert!(matches!(err, NetError::Timeout { phase: Phase::Headers, .. }), "{err:?}");
    assert!(!err.is_unreachable() && err.is_retryable(), "{err:?}");

    // Accepts and closes at once, before answering.
    let closing = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closing_addr = closing.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = closing.accept().await.unwrap();
            let _ = s.shutdown().await;
        }
    });
    let err = client().send(get(format!("http://{closing_addr}/"))).await.unwrap_err();
    assert!(matches!(err, NetError::Dropped { .. }), "{err:?}");
    assert!(!err.is_unreachable() && err.is_retryable(), "{err:?}");
}

#[test]
fn resolver_texts_that_mean_no_such_name() {
    use super::error::resolver_says_no_such_name as no_such_name;
    let gai = |detail: &str| std::io::Error::other(format!("failed to lookup address information: {detail}"));
    assert!(no_such_name(&gai("Name or service not known")));
    assert!(no_such_name(&gai("No address associated with hostname")));
    assert!(no_such_name(&gai("nodename nor servname provided, or not known")));
    // No answer is not a negative answer: the network may be down for a moment.
    assert!(!no_such_name(&gai("Temporary failure in name resolution")));
    assert!(!no_such_name(&gai("Try again")));
}
