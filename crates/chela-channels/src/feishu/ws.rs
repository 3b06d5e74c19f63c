//! The long connection: the way the official SDKs receive events without a public address.
//!
//! Per connection: ask `/callback/ws/endpoint` for a URL and the server's `ClientConfig`, open
//! a WebSocket to it (our own client over the net stack's dialer, proxy and TLS included), then
//! - every `PingInterval` send a ping control frame carrying the URL's `service_id`; a pong may
//!   carry a new `ClientConfig`, which takes effect;
//! - join data frames split in parts ([`Reassembler`], bounded), hand each whole event to the
//!   channel, and acknowledge every data frame with the same frame, a `biz_rt` header and
//!   `{"code":200}` (the service resends unacknowledged events);
//! - a frame that is not pbbp2 is logged and skipped, as the SDKs do; a broken WebSocket ends
//!   the connection.
//!
//! A connection that ends (or cannot be made) is made again after a back-off that doubles from
//! one second up to the server's `ReconnectInterval`, with the server's `ReconnectNonce` as
//! random jitter before the first retry, until the daemon stops.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chela_core::retry::Exponential;
use chela_proto::feishu::frame::{Frame, METHOD_CONTROL, METHOD_DATA};
use chela_proto::feishu::parts::{PartLimits, Reassembler};
use chela_proto::websocket::{self, Decoder, Message, Role};
use ring::digest::{SHA1_FOR_LEGACY_USE_ONLY, digest};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::Channel;
use super::api::ClientConfig;
use crate::net::Url;

/// Largest long-connection message (one frame, or one part of an event).
pub const MAX_FRAME_BYTES: usize = 1 << 20;
/// Largest handshake answer.
const MAX_HANDSHAKE_BYTES: usize = 16 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// A connection that stayed up this long resets the back-off.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// Bounds on the server's `ClientConfig`, so a bad value can neither spin nor stall.
const PING_RANGE: (u64, u64) = (1, 600);
const BACKOFF_CEILING: Duration = Duration::from_secs(600);
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Runs the long connection until the daemon stops.
pub async fn run(channel: Arc<Channel>) -> Result<()> {
    let shutdown = channel.daemon.shutdown().clone();
    let mut failures = 0u32;
    let mut config = ClientConfig::default();
    loop {
        let started = Instant::now();
        let outcome = tokio::select! {
            outcome = connect_and_serve(&channel, &mut config) => outcome,
            () = shutdown.wait() => return Ok(()),
        };
        let now = channel.daemon.clock().unix_secs();
        match outcome {
            Ok(()) => {
                channel.daemon.live().failed(super::CHANNEL, "the long connection closed; reconnecting", now);
                chela_log::info!("the Feishu long connection closed; reconnecting");
            }
            Err(e) => {
                channel.daemon.live().failed(super::CHANNEL, &format!("{e:#}"), now);
                chela_log::warn!("the Feishu long connection failed: {e:#}");
            }
        }
        failures = if started.elapsed() >= STABLE_AFTER { 1 } else { failures.saturating_add(1) };
        let delay = backoff(failures, &config);
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown.wait() => return Ok(()),
        }
    }
}

/// Doubles from 1 s up to the server's `ReconnectInterval` (bounded); the first retry also waits
/// a random part of `ReconnectNonce`, so many clients do not come back at the same instant.
fn backoff(failures: u32, config: &ClientConfig) -> Duration {
    let ceiling = Duration::from_secs(config.reconnect_interval.max(1)).min(BACKOFF_CEILING);
    let base = Exponential::new(Duration::from_secs(1), ceiling).step(failures.saturating_sub(1));
    let jitter = if failures == 1 && config.reconnect_nonce > 0 {
        Duration::from_millis(random_u64() % (config.reconnect_nonce.min(600) * 1000))
    } else {
        Duration::ZERO
    };
    base + jitter
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // Only for jitter: a failure leaves it at 0, which is still a valid delay.
    let _ = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    u64::from_le_bytes(b)
}

async fn connect_and_serve(channel: &Arc<Channel>, config: &mut ClientConfig) -> Result<()> {
    let endpoint = channel.api.endpoint().await?;
    *config = endpoint.config;
    let (url, service) = parse_ws_url(&endpoint.url)?;
    let stream = channel.http.open_stream(&url, CONNECT_TIMEOUT).await?;
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut decoder = Decoder::new(Role::Client, MAX_FRAME_BYTES);
    tokio::time::timeout(CONNECT_TIMEOUT, handshake(&url, &mut rd, &mut wr, &mut decoder))
        .await
        .map_err(|_| anyhow!("the Feishu long connection's handshake took over {CONNECT_TIMEOUT:?}"))??;
    chela_log::info!("the Feishu long connection is up");
    channel.daemon.live().connected(super::CHANNEL, channel.daemon.clock().unix_secs());
    let mut parts = Reassembler::new(PartLimits { max_bytes: MAX_FRAME_BYTES, ..PartLimits::HOST });
    let epoch = Instant::now();
    let mut next_ping = Instant::now() + ping_interval(config);
    let mut buf = vec![0u8; 16 * 1024];
    // Ping at once, as the SDKs do, so the server sees the client alive from the start.
    send(&mut wr, &Message::Binary(Frame::ping(service).to_bytes())).await?;
    loop {
        let n = tokio::select! {
            read = rd.read(&mut buf) => read.context("reading the Feishu long connection")?,
            () = tokio::time::sleep_until(next_ping) => {
                send(&mut wr, &Message::Binary(Frame::ping(service).to_bytes())).await?;
                next_ping = Instant::now() + ping_interval(config);
                continue;
            }
        };
        if n == 0 {
            return Ok(());
        }
        decoder.handle_bytes(&buf[..n]);
        while let Some(message) = decoder.poll_message()? {
            match message {
                Message::Binary(bytes) => {
                    let now_ms = u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
                    if let Some(ack) = on_frame(channel, &bytes, &mut parts, config, now_ms) {
                        send(&mut wr, &Message::Binary(ack.to_bytes())).await?;
                    }
                }
                Message::Ping(data) => send(&mut wr, &Message::Pong(data)).await?,
                Message::Close(code, reason) => {
                    let _ = send(&mut wr, &Message::Close(code, String::new())).await;
                    bail!("Feishu closed the long connection ({code} {reason})");
                }
                Message::Text(_) | Message::Pong(_) => {}
            }
        }
    }
}

fn ping_interval(config: &ClientConfig) -> Duration {
    Duration::from_secs(config.ping_interval.clamp(PING_RANGE.0, PING_RANGE.1))
}

/// Handles one pbbp2 frame; returns the ack to send for a data frame.
fn on_frame(
    channel: &Arc<Channel>,
    bytes: &[u8],
    parts: &mut Reassembler,
    config: &mut ClientConfig,
    now_ms: u64,
) -> Option<Frame> {
    let frame = match Frame::decode(bytes, MAX_FRAME_BYTES) {
        Ok(f) => f,
        Err(e) => {
            chela_log::warn!("skipped a Feishu long-connection message: {e}");
            return None;
        }
    };
    match frame.method {
        METHOD_CONTROL => {
            if frame.header("type") == Some("pong") && !frame.payload.is_empty() {
                #[derive(Deserialize)]
                struct Update {
                    #[serde(rename = "PingInterval")]
                    ping_interval: Option<u64>,
                }
                if let Ok(Update { ping_interval: Some(p) }) = serde_json::from_slice(&frame.payload) {
                    config.ping_interval = p;
                }
            }
            None
        }
        METHOD_DATA => {
            let started = Instant::now();
            if frame.header("type") == Some("event") {
                let id = frame.header("message_id").unwrap_or_default();
                let sum = frame.header_int("sum").unwrap_or(1);
                let seq = frame.header_int("seq").unwrap_or(0);
                match parts.handle_part(id, sum, seq, &frame.payload, now_ms) {
                    Ok(Some(payload)) => channel.on_event(&payload),
                    Ok(None) => {}
                    Err(e) => chela_log::warn!("dropped a Feishu event: {e}"),
                }
            }
            // Every data frame is acknowledged, parts and unknown types included, as the SDKs
            // do: an unacknowledged frame is sent again.
            Some(frame.ack(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)))
        }
        _ => None,
    }
}

async fn send(wr: &mut (impl AsyncWriteExt + Unpin), message: &Message) -> Result<()> {
    let mut out = Vec::new();
    websocket::encode(message, Some(random_u64().to_le_bytes()[..4].try_into().unwrap_or([0; 4])), &mut out);
    wr.write_all(&out).await.context("writing to the Feishu long connection")?;
    wr.flush().await.context("writing to the Feishu long connection")
}

/// `ws://` / `wss://` as the dialer's `http://` / `https://`, and the `service_id` pings carry.
fn parse_ws_url(raw: &str) -> Result<(Url, i32)> {
    let http = if let Some(rest) = raw.strip_prefix("wss://") {
        format!("https://{rest}")
    } else if let Some(rest) = raw.strip_prefix("ws://") {
        format!("http://{rest}")
    } else {
        bail!("Feishu handed out a long-connection URL that is not ws:// or wss://");
    };
    let url = Url::parse(&http).map_err(|e| anyhow!("Feishu's long-connection URL is not valid: {e}"))?;
    let service = url
        .path_and_query
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("service_id="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Ok((url, service))
}

/// The WebSocket opening handshake (RFC 6455 §4.1); bytes after the answer's head go to `decoder`.
async fn handshake(
    url: &Url,
    rd: &mut (impl AsyncReadExt + Unpin),
    wr: &mut (impl AsyncWriteExt + Unpin),
    decoder: &mut Decoder,
) -> Result<()> {
    let mut nonce = [0u8; 16];
    rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())
        .map_err(|e| anyhow!("no random bytes for the WebSocket key: {e}"))?;
    let key = STANDARD.encode(nonce);
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: chela/{}\r\n\r\n",
        url.path_and_query,
        url.host_header(),
        env!("CARGO_PKG_VERSION"),
    );
    wr.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let end = loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > MAX_HANDSHAKE_BYTES {
            bail!("Feishu's WebSocket handshake answer is over {MAX_HANDSHAKE_BYTES} bytes");
        }
        let mut buf = [0u8; 2048];
        let n = rd.read(&mut buf).await?;
        if n == 0 {
            bail!("Feishu closed the long connection during its handshake");
        }
        head.extend_from_slice(&buf[..n]);
    };
    decoder.handle_bytes(&head[end..]);
    let text = String::from_utf8_lossy(&head[..end]);
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or("");
    if status.split(' ').nth(1) != Some("101") {
        // Feishu says why in headers (`Handshake-Msg`), as the SDKs read them.
        let why = lines
            .clone()
            .find_map(|l| {
                l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("handshake-msg")).map(|(_, v)| v.trim())
            })
            .unwrap_or("");
        bail!("Feishu refused the long connection: {status} {why}");
    }
    let expected = STANDARD.encode(digest(&SHA1_FOR_LEGACY_USE_ONLY, format!("{key}{WS_GUID}").as_bytes()));
    let accept = lines.find_map(|l| {
        l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("sec-websocket-accept")).map(|(_, v)| v.trim())
    });
    if accept != Some(expected.as_str()) {
        bail!("the long connection's server did not complete the WebSocket handshake properly");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ws_url_becomes_a_dialable_url_and_a_service_id() {
        let (url, service) =
            parse_ws_url("wss://msg-frontier.feishu.cn/ws/v2?fpid=493&device_id=7&service_id=33554678").unwrap();
        assert!(url.https);
        assert_eq!((url.host.as_str(), url.port, service), ("msg-frontier.feishu.cn", 443, 33_554_678));
        assert!(parse_ws_url("https://x/ws").is_err());
    }

    #[test]
    fn the_back_off_doubles_up_to_the_servers_interval() {
        let config = ClientConfig { reconnect_interval: 5, reconnect_nonce: 0, ..ClientConfig::default() };
        let delays: Vec<u64> = (1..=5).map(|n| backoff(n, &config).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        let jittered = ClientConfig { reconnect_nonce: 2, ..config };
        assert!(backoff(1, &jittered) < Duration::from_secs(3));
        let hostile = ClientConfig { reconnect_interval: u64::MAX, ..config };
        assert_eq!(backoff(100, &hostile), BACKOFF_CEILING);
    }
}
