//! End-to-end tests of the client against local servers on 127.0.0.1: a real hyper server for
//! well-behaved HTTP, raw TCP scripts for servers that misbehave, and a rustls server for TLS.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::*;

/// For waits a test expects to finish quickly, or to time out on purpose.
pub(super) const SHORT: Duration = Duration::from_millis(300);
/// A bound for steps that should succeed; only reached when a test is failing (or the machine is
/// badly overloaded), so it is generous to keep CI from flaking.
pub(super) const LONG: Duration = Duration::from_secs(5);

pub(super) fn get(url: impl Into<String>) -> Request {
    Request {
        method: Method::GET,
        url: url.into(),
        headers: Vec::new(),
        body: Bytes::new(),
        timeout: LONG,
        guard: Guard::AllowAll,
    }
}

pub(super) fn client() -> HttpClient {
    HttpClient::new(ClientOptions::default())
}

/// What the echo server saw of one request.
#[derive(Debug)]
pub(super) struct Seen {
    pub peer: SocketAddr,
    pub method: Method,
    pub target: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A hyper server on 127.0.0.1 that reports every request it gets and answers "hello". It also
/// listens on [::1] with the same port when it can, since `localhost` may resolve to either.
pub(super) async fn echo_server() -> (SocketAddr, mpsc::UnboundedReceiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    if let Ok(v6) = TcpListener::bind(("::1", addr.port())).await {
        tokio::spawn(serve_echo(v6, tx.clone()));
    }
    tokio::spawn(serve_echo(listener, tx));
    (addr, rx)
}

async fn serve_echo(listener: TcpListener, tx: mpsc::UnboundedSender<Seen>) {
    loop {
        let (stream, peer) = listener.accept().await.unwrap();
        let tx = tx.clone();
        let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let tx = tx.clone();
            async move {
                let (parts, body) = req.into_parts();
                let body = body.collect().await?.to_bytes();
                let target = parts.uri.to_string();
                let _ = tx.send(Seen { peer, method: parts.method, target, headers: parts.headers, body });
                Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::from_static(b"hello"))))
            }
        });
        tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service));
    }
}

/// Serves one connection with `script`, which gets the raw socket after the request head was read.
async fn raw_server<F, Fut>(script: F) -> SocketAddr
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_head(&mut stream).await;
        script(stream).await;
    });
    addr
}

pub(super) async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read_u8().await {
            Ok(b) => head.push(b),
            Err(_) => break,
        }
    }
    String::from_utf8(head).unwrap()
}

/// True when the peer closes its end within a second, i.e. the client really dropped the connection.
async fn closed_by_peer(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(tokio::time::timeout(LONG, stream.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}

#[tokio::test]
async fn get_and_post_reach_the_server_intact() {
    let (addr, mut seen) = echo_server().await;
    let mut req = get(format!("http://{addr}/v1/items?limit=2&q=a%20b#ignored"));
    req.headers = vec![
        ("x-api-key".into(), "secret".into()),
        ("accept".into(), "text/event-stream".into()),
        ("x-multi".into(), "one".into()),
        ("x-multi".into(), "two".into()),
    ];
    let resp = client().send(req).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.bytes(1024, SHORT).await.unwrap(), "hello");
    let s = seen.recv().await.unwrap();
    assert_eq!((s.method, s.target.as_str()), (Method::GET, "/v1/items?limit=2&q=a%20b"));
    assert_eq!(s.headers["host"], addr.to_string());
    assert_eq!(s.headers["user-agent"], USER_AGENT_VALUE);
    assert_eq!(s.headers["x-api-key"], "secret");
    assert_eq!(s.headers["accept"], "text/event-stream");
    assert_eq!(s.headers.get_all("x-multi").iter().collect::<Vec<_>>(), ["one", "two"]);
    assert!(s.body.is_empty());

    let body = Bytes::from(r#"{"model":"m","messages":[{"role":"user","content":"héllo"}]}"#);
    let req = Request {
        method: Method::POST,
        headers: vec![("content-type".into(), "application/json".into()), ("User-Agent".into(), "custom/1".into())],
        body: body.clone(),
        ..get(format!("http://{addr}/v1/messages"))
    };
    let resp = client().send(req).await.unwrap();
    assert_eq!(resp.status, 200);
    let s = seen.recv().await.unwrap();
    assert_eq!((s.method, s.target.as_str()), (Method::POST, "/v1/messages"));
    assert_eq!(s.body, body);
    assert_eq!(s.headers["content-length"], body.len().to_string());
    assert_eq!(s.headers["content-type"], "application/json");
    assert_eq!(s.headers.get_all("user-agent").iter().collect::<Vec<_>>(), ["custom/1"], "the caller's agent wins");
}

#[tokio::test]
async fn empty_post_declares_its_length() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let _ = tx.send(read_head(&mut stream).await);
        stream.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await.unwrap();
    });
    let req = Request { method: Method::POST, ..get(format!("http://{addr}/")) };
    let resp = client().send(req).await.unwrap();
    assert_eq!(resp.status, 204);
    let head = rx.await.unwrap().to_ascii_lowercase();
    assert!(head.starts_with("post / http/1.1\r\n"), "{head}");
    assert!(head.contains("\r\ncontent-length: 0\r\n"), "{head}");
}

#[tokio::test]
async fn bad_headers_are_refused_before_connecting() {
    let req = Request { headers: vec![("bad header".into(), "x".into())], ..get("http://127.0.0.1:9/") };
    let err = client().send(req).await.unwrap_err();
    assert!(matches!(err, NetError::InvalidHeader { .. }), "{err:?}");
    let req = Request { headers: vec![("x-ok".into(), "line\r\nbreak".into())], ..get("http://127.0.0.1:9/") };
    assert!(matches!(client().send(req).await.unwrap_err(), NetError::InvalidHeader { .. }));
    let err = client().send(get("gopher://example.com/")).await.unwrap_err();
    assert!(matches!(err, NetError::InvalidUrl { .. }) && !err.is_retryable(), "{err:?}");
}

/// A response body fed by the test, one frame per message; hyper sends it chunked.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|piece| piece.map(|b| Ok(Frame::data(b))))
    }
}

#[tokio::test]
async fn chunked_body_arrives_piece_by_piece() {
    let (pieces, rx) = mpsc::channel::<Bytes>(1);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let rx = std::sync::Mutex::new(Some(rx));
        let service = service_fn(move |_req| {
            let body = ChannelBody(rx.lock().unwrap().take().unwrap());
            async move { Ok::<_, Infallible>(hyper::Response::new(body)) }
        });
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await.unwrap();
    });

    let mut resp = client().send(get(format!("http://{addr}/stream"))).await.unwrap();
    assert_eq!(resp.headers["transfer-encoding"], "chunked");
    // Each piece is only sent after the previous one was received, so reading one at a time
    // proves the body is streamed rather than buffered.
    for piece in ["data: one\n\n", "data: two\n\n", "data: three\n\n"] {
        pieces.send(Bytes::from(piece)).await.unwrap();
        assert_eq!(resp.chunk(LONG).await.unwrap().unwrap(), piece);
    }
    drop(pieces);
    assert_eq!(resp.chunk(LONG).await.unwrap(), None);
    assert_eq!(resp.chunk(LONG).await.unwrap(), None, "stays ended");
}

#[tokio::test]
async fn connection_closed_mid_body_is_an_error_not_the_end() {
    let chunked = raw_server(|mut s: TcpStream| async move {
        s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n").await.unwrap();
        // Closing here, without the terminating `0\r\n\r\n` chunk.
    })
    .await;
    let mut resp = client().send(get(format!("http://{chunked}/"))).await.unwrap();
    assert_eq!(resp.chunk(LONG).await.unwrap().unwrap(), "hello");
    let err = resp.chunk(LONG).await.unwrap_err();
    assert!(matches!(err, NetError::Dropped { phase: Phase::Body, .. }), "{err:?}");
    assert!(err.to_string().contains("in the middle of the response"), "{err}");

    let short = raw_server(|mut s: TcpStream| async move {
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello").await.unwrap();
    })
    .await;
    let resp = client().send(get(format!("http://{short}/"))).await.unwrap();
    let err = resp.bytes(100, LONG).await.unwrap_err();
    assert!(matches!(err, NetError::Dropped { phase: Phase::Body, .. }), "{err:?}");
}

#[tokio::test]
async fn garbage_instead_of_http_is_a_protocol_error() {
    let addr = raw_server(|mut s: TcpStream| async move {
        s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\r\n").await.unwrap();
    })
    .await;
    let err = client().send(get(format!("http://{addr}/"))).await.unwrap_err();
    assert!(matches!(err, NetError::Protocol { .. }) && !err.is_retryable(), "{err:?}");
}

#[tokio::test]
async fn idle_body_times_out() {
    let addr = raw_server(|mut s: TcpStream| async move {
        s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n").await.unwrap();
        // Hold the connection open without sending more, until the client gives up.
        let _ = closed_by_peer(&mut s).await;
    })
    .await;
    let mut resp = client().send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.chunk(SHORT).await.unwrap().unwrap(), "abc");
    let started = Instant::now();
    let err = resp.chunk(Duration::from_millis(100)).await.unwrap_err();
    assert!(started.elapsed() < LONG);
    assert!(matches!(err, NetError::Timeout { phase: Phase::Body, .. }), "{err:?}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn headers_timeout_is_retryable() {
    let addr = raw_server(|mut s: TcpStream| async move {
        let _ = closed_by_peer(&mut s).await;
    })
    .await;
    let req = Request { timeout: Duration::from_millis(150), ..get(format!("http://{addr}/")) };
    let err = client().send(req).await.unwrap_err();
    assert!(matches!(err, NetError::Timeout { phase: Phase::Headers, .. }), "{err:?}");
    assert!(err.is_retryable());
}

/// Serves `body` once with a content-length, or chunked in 10-byte pieces.
async fn body_server(body: &'static [u8], chunked: bool) -> SocketAddr {
    raw_server(move |mut s: TcpStream| async move {
        if chunked {
            s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n").await.unwrap();
            for piece in body.chunks(10) {
                s.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await.unwrap();
                s.write_all(piece).await.unwrap();
                s.write_all(b"\r\n").await.unwrap();
            }
            s.write_all(b"0\r\n\r\n").await.unwrap();
        } else {
            s.write_all(format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len()).as_bytes()).await.unwrap();
            s.write_all(body).await.unwrap();
        }
        let _ = closed_by_peer(&mut s).await;
    })
    .await
}

const BODY: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

#[tokio::test]
async fn bytes_enforces_the_limit() {
    for chunked in [false, true] {
        let send = async || client().send(get(format!("http://{}/", body_server(BODY, chunked).await))).await.unwrap();
        assert_eq!(send().await.bytes(BODY.len(), SHORT).await.unwrap(), BODY, "chunked={chunked}");
        let err = send().await.bytes(BODY.len() - 1, SHORT).await.unwrap_err();
        assert!(matches!(err, NetError::BodyTooLarge { limit } if limit == BODY.len() - 1), "{err:?}");
        assert!(!err.is_retryable());
    }
}

#[tokio::test]
async fn bytes_truncated_keeps_the_head_and_says_if_there_was_more() {
    for chunked in [false, true] {
        let send = async || client().send(get(format!("http://{}/", body_server(BODY, chunked).await))).await.unwrap();
        for (limit, more) in [(0, true), (15, true), (20, true), (BODY.len(), false), (1000, false)] {
            let (head, truncated) = send().await.bytes_truncated(limit, SHORT).await.unwrap();
            assert_eq!(&head[..], &BODY[..limit.min(BODY.len())], "chunked={chunked} limit={limit}");
            assert_eq!(truncated, more, "chunked={chunked} limit={limit}");
        }
    }
}

#[tokio::test]
async fn connection_refused_is_retryable_and_says_so() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let err = client().send(get(format!("http://127.0.0.1:{port}/"))).await.unwrap_err();
    assert!(matches!(err, NetError::Connect { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(err.to_string(), format!("could not connect to 127.0.0.1:{port}: connection refused"));
}

#[tokio::test]
async fn dropping_the_response_closes_the_connection() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let addr = raw_server(move |mut s: TcpStream| async move {
        s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n").await.unwrap();
        let _ = tx.send(closed_by_peer(&mut s).await);
    })
    .await;
    let mut resp = client().send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.chunk(SHORT).await.unwrap().unwrap(), "abc");
    drop(resp);
    assert!(rx.await.unwrap(), "the server should see the connection closed");
}

#[tokio::test]
async fn dropping_a_pending_send_closes_the_connection() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let addr = raw_server(move |mut s: TcpStream| async move {
        let _ = tx.send(closed_by_peer(&mut s).await);
    })
    .await;
    // As when the user cancels a turn: the future is dropped while waiting for headers.
    let client = client();
    let pending = tokio::time::timeout(Duration::from_millis(100), client.send(get(format!("http://{addr}/"))));
    assert!(pending.await.is_err());
    assert!(rx.await.unwrap(), "the server should see the connection closed");
}

#[tokio::test]
async fn public_only_refuses_local_addresses_however_spelled() {
    let (addr, mut seen) = echo_server().await;
    let port = addr.port();
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/".to_owned(),
        "http://192.168.1.1/".to_owned(),
        "http://[fc00::1]/".to_owned(),
    ] {
        let req = Request { guard: Guard::PublicOnly, ..get(url.clone()) };
        let err = client().send(req).await.unwrap_err();
        assert!(matches!(err, NetError::Refused { .. }), "{url}: {err:?}");
        assert!(!err.is_retryable());
    }
    let req = Request { guard: Guard::PublicOnly, ..get(format!("http://localhost:{port}/")) };
    let message = client().send(req).await.unwrap_err().to_string();
    assert!(message.starts_with("refusing to connect to localhost ("), "{message}");
    assert!(message.contains("loopback"), "{message}");
    let req = Request { guard: Guard::PublicOnly, ..get("http://169.254.169.254/latest/meta-data/") };
    assert_eq!(
        client().send(req).await.unwrap_err().to_string(),
        "refusing to connect to 169.254.169.254: it is a link-local address (this range includes cloud metadata \
         services), and only public internet addresses are allowed here"
    );

    // The refusals never reached the server; the same request without the guard does.
    let resp = client().send(get(format!("http://127.0.0.1:{port}/"))).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(seen.recv().await.unwrap().target, "/");
    assert!(seen.try_recv().is_err(), "exactly one request reached the server");
}

/// A TLS acceptor for `localhost` with a fresh self-signed certificate, and that certificate's PEM.
pub(super) fn tls_acceptor() -> (tokio_rustls::TlsAcceptor, String) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let pem = cert.cert.pem();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    (tokio_rustls::TlsAcceptor::from(Arc::new(config)), pem)
}

/// A TLS server for `localhost` with a fresh self-signed certificate; returns its port and PEM.
pub(super) async fn tls_server() -> (u16, String) {
    let (acceptor, pem) = tls_acceptor();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that rejects the certificate makes the handshake fail; that is the test.
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let service = service_fn(|_req| async {
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"over tls"))))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    (port, pem)
}

#[tokio::test]
async fn https_with_an_extra_root() {
    let (port, pem) = tls_server().await;
    let trusting =
        HttpClient::new(ClientOptions { extra_root_pem: Some(pem.into_bytes()), ..ClientOptions::default() });
    let resp = trusting.send(get(format!("https://localhost:{port}/"))).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "over tls");

    let err = client().send(get(format!("https://localhost:{port}/"))).await.unwrap_err();
    assert!(matches!(err, NetError::Tls { .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("not signed by a trusted authority"), "{err}");

    // The certificate names localhost, not 127.0.0.1.
    let err = trusting.send(get(format!("https://127.0.0.1:{port}/"))).await.unwrap_err();
    assert!(err.to_string().contains("different host name"), "{err}");
}
