//! Webhook mode: Feishu POSTs each event to an address of ours. Chela listens on
//! `channels.feishu.webhook_listen` (its own small HTTP/1 listener; put a TLS reverse proxy in
//! front of it for the public address Feishu needs).
//!
//! Per request, as the official SDKs check it:
//! 1. With an encrypt key, the body is `{"encrypt": base64}`: AES-256-CBC with key
//!    SHA-256(encrypt_key), the IV in the first 16 bytes, PKCS#7 padding.
//! 2. URL verification (`type: url_verification`) is answered with its `challenge`.
//! 3. Events, with an encrypt key, must carry `X-Lark-Signature` =
//!    hex(SHA-256(timestamp + nonce + encrypt_key + body)) over the raw body, and a timestamp
//!    within [`MAX_SKEW_SECS`] of now (a replay of a captured event is refused; the same event
//!    within the window is dropped by its id, also after a restart).
//! 4. With a verification token set, the event's `token` must match it.
//!
//! Refusals are 400 (not an event) or 401 (not from Feishu), with `{"error": sentence}`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use aes::cipher::{BlockDecryptMut, KeyIvInit, block_padding::Pkcs7};
use anyhow::{Context, Result};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use chela_proto::feishu::event::{Envelope, parse_envelope};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::http::{HeaderMap, Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use ring::digest::{SHA256, digest};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::Channel;
use crate::config::Feishu;

/// Largest webhook body; Feishu's events are a few kilobytes.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// Webhook requests served at once; more wait in the backlog.
const MAX_CONNECTIONS: usize = 64;
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why webhook mode may not start with `settings`: without an encrypt key (events signed and
/// encrypted) or a verification token (a shared secret in every event), anyone who can reach
/// the port could post events in the owner's name, and Chela would run them as turns.
pub fn unverifiable(settings: &Feishu) -> Option<String> {
    (settings.mode == "webhook" && settings.encrypt_key.is_empty() && settings.verification_token.is_empty()).then(
        || {
            "channels.feishu.mode is webhook, but neither channels.feishu.encrypt_key nor \
             channels.feishu.verification_token is set, so Chela could not tell Feishu's events from forged ones. \
             Copy the app's Encrypt Key (best: events are then signed and encrypted) from the Feishu developer \
             console's Events & Callbacks page with `chela config set channels.feishu.encrypt_key -` (and its \
             Verification Token with `chela config set channels.feishu.verification_token -`), or use \
             `chela config set channels.feishu.mode ws`, which needs neither."
                .to_owned()
        },
    )
}

/// Serves the webhook until the daemon stops.
pub async fn run(channel: Arc<Channel>, listen: &str) -> Result<()> {
    let listener = TcpListener::bind(listen).await.with_context(|| {
        format!("cannot listen on {listen} for Feishu webhooks; set channels.feishu.webhook_listen to a free address")
    })?;
    chela_log::info!("Feishu webhooks are served on http://{}", listener.local_addr()?);
    serve(channel, listener).await
}

/// Accepts webhook connections on `listener` until the daemon stops, then waits for those
/// still open: a request in flight is answered (Feishu would otherwise retry it against the
/// next start) and each connection closes when it is idle. The connections are this
/// function's own, so none outlives it: dropping it aborts them.
async fn serve(channel: Arc<Channel>, listener: TcpListener) -> Result<()> {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let shutdown = channel.daemon.shutdown().clone();
    // Bounded by the permits: a connection holds one until its task ends.
    let conns = crate::serve::http::Conns::default();
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => p?,
            () = shutdown.wait() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // E.g. out of file descriptors: wait instead of spinning.
                    chela_log::warn!("accepting a Feishu webhook connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.wait() => break,
        };
        let channel = Arc::clone(&channel);
        let shutdown = shutdown.clone();
        conns.spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let channel = Arc::clone(&channel);
                async move { Ok::<_, Infallible>(handle(&channel, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = shutdown.wait() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    drop(listener);
    conns.closed().await;
    Ok(())
}

fn answer(status: StatusCode, body: &Value) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert("content-type", hyper::http::HeaderValue::from_static("application/json"));
    r
}

fn refuse(status: StatusCode, why: &str) -> hyper::Response<Full<Bytes>> {
    chela_log::warn!("refused a Feishu webhook request: {why}");
    answer(status, &json!({"error": why}))
}

async fn handle(channel: &Channel, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
    if req.method() != Method::POST {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "Feishu webhooks are POST requests");
    }
    let (parts, body) = req.into_parts();
    let body = match tokio::time::timeout(READ_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect()).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(_)) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the body is larger than a Feishu event can be"),
        Err(_) => return refuse(StatusCode::REQUEST_TIMEOUT, "the body did not arrive in time"),
    };
    let settings = &channel.settings;
    let now = channel.daemon.clock().unix_secs_u64();
    match verify(&settings.encrypt_key, &settings.verification_token, &parts.headers, &body, now) {
        Err((status, why)) => refuse(status, why),
        Ok(Verified::Challenge(challenge)) => answer(StatusCode::OK, &json!({ "challenge": challenge })),
        Ok(Verified::Event(plain)) => {
            channel.on_event(&plain);
            answer(StatusCode::OK, &json!({}))
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verified {
    Challenge(String),
    /// The event's plain JSON.
    Event(Vec<u8>),
}

/// How far a signed event's `X-Lark-Request-Timestamp` may be from this machine's clock: a
/// captured event replayed later is refused, whatever its signature.
pub const MAX_SKEW_SECS: u64 = 300;

/// Checks one webhook request, arrived at `now` (Unix seconds), and returns what it carries.
/// Pure, for unit tests.
pub(super) fn verify(
    encrypt_key: &str,
    verification_token: &str,
    headers: &HeaderMap,
    body: &[u8],
    now: u64,
) -> Result<Verified, (StatusCode, &'static str)> {
    let bad = |why| (StatusCode::BAD_REQUEST, why);
    let outer: Value = serde_json::from_slice(body).map_err(|_| bad("the body is not JSON"))?;
    let plain = match (outer.get("encrypt").and_then(Value::as_str), encrypt_key.is_empty()) {
        (Some(encrypted), false) => decrypt(encrypt_key, encrypted)
            .ok_or_else(|| bad("the encrypted event cannot be decrypted with channels.feishu.encrypt_key"))?,
        (Some(_), true) => {
            return Err(bad("the event is encrypted; set channels.feishu.encrypt_key to the app's Encrypt Key"));
        }
        (None, false) => {
            return Err((StatusCode::UNAUTHORIZED, "the event is not encrypted, but an encrypt key is set"));
        }
        (None, true) => body.to_vec(),
    };
    let envelope = parse_envelope(&plain).map_err(|_| bad("the body is not a Feishu event"))?;
    let token = match &envelope {
        Envelope::UrlVerification { token, .. } | Envelope::Other { token, .. } => token.as_str(),
        Envelope::Message(m) => m.token.as_str(),
    };
    if !verification_token.is_empty() && !same(token.as_bytes(), verification_token.as_bytes()) {
        return Err((StatusCode::UNAUTHORIZED, "the event's verification token is not the app's"));
    }
    if let Envelope::UrlVerification { challenge, .. } = envelope {
        // Feishu signs events, not its URL check, whose answer proves only that we can decrypt.
        return Ok(Verified::Challenge(challenge));
    }
    if !encrypt_key.is_empty() {
        let header = |name| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
        let expected = signature(header("x-lark-request-timestamp"), header("x-lark-request-nonce"), encrypt_key, body);
        if !same(header("x-lark-signature").as_bytes(), expected.as_bytes()) {
            return Err((StatusCode::UNAUTHORIZED, "the event's X-Lark-Signature does not match"));
        }
        let sent = header("x-lark-request-timestamp").parse::<u64>().ok();
        if sent.is_none_or(|t| t.abs_diff(now) > MAX_SKEW_SECS) {
            return Err((
                StatusCode::UNAUTHORIZED,
                "the event's X-Lark-Request-Timestamp is more than 5 minutes from this machine's clock \
                 (a replayed event, or a clock that is off: check NTP)",
            ));
        }
    }
    Ok(Verified::Event(plain))
}

/// Compares without stopping at the first difference, so timing tells nothing about a secret.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn signature(timestamp: &str, nonce: &str, encrypt_key: &str, body: &[u8]) -> String {
    let mut input = Vec::with_capacity(timestamp.len() + nonce.len() + encrypt_key.len() + body.len());
    for part in [timestamp.as_bytes(), nonce.as_bytes(), encrypt_key.as_bytes(), body] {
        input.extend_from_slice(part);
    }
    digest(&SHA256, &input).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The plain bytes of an `encrypt` field, `None` if it is not what the key produced.
fn decrypt(encrypt_key: &str, encrypted: &str) -> Option<Vec<u8>> {
    let raw = STANDARD.decode(encrypted).ok()?;
    if raw.len() < 32 || raw.len() % 16 != 0 {
        return None;
    }
    let key = digest(&SHA256, encrypt_key.as_bytes());
    let (iv, data) = raw.split_at(16);
    let cipher = cbc::Decryptor::<aes::Aes256>::new_from_slices(key.as_ref(), iv).ok()?;
    cipher.decrypt_padded_vec_mut::<Pkcs7>(data).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_testkit::feishu::{encrypt, encrypted_event, message_event};

    /// When the tests' signed events were sent.
    const NOW: u64 = 1_700_000_000;

    fn headers(pairs: &[(String, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(hyper::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn an_encrypted_signed_event_is_decrypted_and_a_changed_one_refused() {
        let event = message_event("ev1", ("oc_1", "p2p"), "ou_a", "hi", None);
        let (body, h) = encrypted_event("key-1", &event, "1700000000", "n1");
        let Ok(Verified::Event(plain)) = verify("key-1", "", &headers(&h), &body, NOW) else { panic!("refused") };
        assert_eq!(serde_json::from_slice::<Value>(&plain).unwrap(), event);
        // Same body, wrong key: the decryption fails before any signature is looked at.
        assert_eq!(verify("key-2", "", &headers(&h), &body, NOW).unwrap_err().0, StatusCode::BAD_REQUEST);
        // Right key, a signature made for another timestamp.
        let mut stale = h.clone();
        stale[0].1 = "1700000001".into();
        assert_eq!(verify("key-1", "", &headers(&stale), &body, NOW).unwrap_err().0, StatusCode::UNAUTHORIZED);
        assert_eq!(verify("key-1", "", &HeaderMap::new(), &body, NOW).unwrap_err().0, StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn a_signed_event_outside_five_minutes_of_now_is_refused() {
        let event = message_event("ev1", ("oc_1", "p2p"), "ou_a", "hi", None);
        for (sent, ok) in
            [(NOW - MAX_SKEW_SECS, true), (NOW + MAX_SKEW_SECS, true), (NOW - 301, false), (NOW + 301, false)]
        {
            let (body, h) = encrypted_event("key-1", &event, &sent.to_string(), "n1");
            let got = verify("key-1", "", &headers(&h), &body, NOW);
            assert_eq!(got.is_ok(), ok, "sent at {sent}: {got:?}");
        }
        // 2020, signed correctly: a captured event replayed years later.
        let (body, h) = encrypted_event("key-1", &event, "1577836800", "n1");
        let (status, why) = verify("key-1", "", &headers(&h), &body, NOW).unwrap_err();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(why.contains("5 minutes"), "{why}");
        let (body, h) = encrypted_event("key-1", &event, "soon", "n1");
        assert_eq!(verify("key-1", "", &headers(&h), &body, NOW).unwrap_err().0, StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn url_verification_answers_the_challenge_with_the_right_token_only() {
        let body = br#"{"challenge":"ch-1","token":"vt","type":"url_verification"}"#;
        assert_eq!(verify("", "vt", &HeaderMap::new(), body, NOW), Ok(Verified::Challenge("ch-1".into())));
        assert_eq!(verify("", "other", &HeaderMap::new(), body, NOW).unwrap_err().0, StatusCode::UNAUTHORIZED);
        let sealed = json!({"encrypt": encrypt("k", *b"iv-iv-iv-iv-iv-i", body)}).to_string();
        assert_eq!(
            verify("k", "vt", &HeaderMap::new(), sealed.as_bytes(), NOW),
            Ok(Verified::Challenge("ch-1".into()))
        );
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        for (key, body) in [
            ("k", &br#"{"encrypt":"not base64!"}"#[..]),
            ("k", br#"{"encrypt":"AAAA"}"#),
            ("k", br#"{"encrypt":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}"#),
            ("", b"not json"),
            ("", br#"{"encrypt":"AAAA"}"#),
            ("", br#"{"header":{}}"#),
        ] {
            let (status, why) = verify(key, "", &HeaderMap::new(), body, NOW).unwrap_err();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{why}");
        }
    }

    /// A stop ends the webhook's connections with it: an idle keep-alive connection is closed,
    /// and once `serve` returned no connection task is left holding the channel.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_closes_the_open_connections_and_leaves_no_task_behind() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const WAIT: Duration = Duration::from_secs(20);
        let dir = tempfile::tempdir().unwrap();
        let ws = crate::workspace::Workspace::locate(Some(dir.path().join("ws"))).unwrap();
        ws.ensure().unwrap();
        let daemon = Arc::new(crate::daemon::Daemon::load(ws).unwrap());
        let mut settings = Feishu::default();
        settings.verification_token = "vt".into();
        let http = crate::net::HttpClient::new(crate::net::ClientOptions::default());
        let channel = Arc::new(Channel {
            daemon: Arc::clone(&daemon),
            // Never called: a URL verification is answered without Feishu.
            api: Arc::new(super::super::Api::new(http.clone(), "http://127.0.0.1:9", "cli_test", "secret")),
            http,
            settings,
            bot_open_id: None,
            seen: std::sync::Mutex::new(super::super::seen::Seen::open(daemon.workspace())),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let served = tokio::spawn(serve(Arc::clone(&channel), listener));

        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let body = r#"{"challenge":"ch-1","token":"vt","type":"url_verification"}"#;
        let req = format!(
            "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        client.write_all(req.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&got).contains("ch-1") {
            let n = tokio::time::timeout(WAIT, client.read(&mut buf)).await.expect("answered in time").unwrap();
            assert!(n > 0, "closed before answering: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));

        // The connection is kept alive for Feishu's next event, until the stop.
        daemon.shutdown().trigger();
        tokio::time::timeout(WAIT, served).await.expect("stopped in time").unwrap().unwrap();
        assert_eq!(Arc::strong_count(&channel), 1, "a connection task outlived the webhook");
        let n = tokio::time::timeout(WAIT, client.read(&mut buf)).await.expect("closed in time").unwrap_or(0);
        assert_eq!(n, 0, "the idle connection was closed at the stop");
    }
}
