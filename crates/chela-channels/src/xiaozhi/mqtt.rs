//! xiaozhi devices over MQTT + UDP: Chela is the MQTT endpoint a device connects to
//! (`xiaozhi.mqtt_listen`), and its audio travels over UDP ([`super::udp`]). The firmware never
//! subscribes: it publishes JSON to its `publish_topic` and Chela pushes PUBLISH packets on the
//! device's own connection (topic `devices/p2p/<mac_underscored>`), so this is not a broker.
//!
//! The packet format is rumqttc's MQTT 3.1.1 codec; the session is ours: the first packet must
//! be a CONNECT within [`CONNECT_TIMEOUT`], from a client id `GID_<group>@@@<mac_underscored>@@@<uuid>`
//! of an approved device, with the username and password its OTA answer gave (see
//! [`password`]); otherwise a refusing CONNACK and the socket is closed. One connection per
//! client id: a newer one closes the older. Nothing for 1.5 × the keep-alive ends the
//! connection (and with it the conversation and the device's MCP tools). QoS 0 is what the
//! firmware sends; QoS 1 is acknowledged, QoS 2 closes (the packet rules are
//! [`super::mqtt_wire`]). A packet over its `MAX_PACKET`, more than [`MAX_PER_ADDRESS`]
//! connections from one address or [`MAX_CONNECTIONS`] in all are refused.
//!
//! Each `hello` (`"transport":"udp"`, version 3) starts a conversation, answered with a `udp`
//! block of fresh keys; a `goodbye` from either side ends it and the connection stays.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::BytesMut;
use chela_proto::xiaozhi::message::{Hello, Message as XzMessage};
use rumqttc::mqttbytes::v4::{ConnAck, ConnectReturnCode, Packet, Publish};
use rumqttc::mqttbytes::{self, QoS};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio::time::{Instant, sleep_until};
use tokio_rustls::TlsAcceptor;

use super::Host;
pub use super::mqtt_wire::PUBLISH_TOPIC;
use super::mqtt_wire::{Event, Wire};
use super::session::{Reason, Session, Stop, Transport};
use super::udp::{Channel, Hub};
use crate::devices::{DeviceState, Devices, State};
use crate::voice::{DOWNLINK_RATE, FRAME_MS};

/// MQTT connections at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// MQTT connections from one address at once.
pub const MAX_PER_ADDRESS: usize = 64;
/// Time for the CONNECT after the socket opens.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The keep-alive the OTA answer asks for (the firmware's default), seconds.
pub const KEEPALIVE: u16 = 240;
/// A CONNECT's keep-alive of 0 (none) or above this is taken as this, seconds.
pub const MAX_KEEPALIVE: u16 = 1200;

/// The MQTT client id of a device: `GID_chela@@@<mac_underscored>@@@<client id>`.
pub fn client_id(mac: &str, client: &str) -> String {
    format!("GID_chela@@@{}@@@{client}", mac.replace(':', "_"))
}

/// The topic Chela pushes to a device on.
pub fn subscribe_topic(mac: &str) -> String {
    format!("devices/p2p/{}", mac.replace(':', "_"))
}

/// The MAC and client id inside an MQTT client id, whatever its group.
pub fn parse_client_id(raw: &str) -> Option<(String, String)> {
    let mut parts = raw.split("@@@");
    let (group, mac, client) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !group.starts_with("GID_") || client.is_empty() {
        return None;
    }
    let mac = crate::devices::normalize_id(&mac.replace('_', ":"))?;
    crate::devices::valid_client_id(client).then(|| (mac, client.to_owned()))
}

/// The MQTT password of the approved device `id`: an HMAC of its identity keyed by the hash of
/// its current token, like its vision bearer. Nothing more is stored; it stops working when the
/// device is revoked or gets a new token.
pub fn password(state: &DeviceState, id: &str) -> Option<String> {
    let d = state.devices.iter().find(|d| d.id == id && d.state == State::Approved)?;
    derive(id, &d.client_id, &d.token_sha256)
}

/// The MQTT password that goes with a token just issued to device `id` (for its OTA answer).
pub fn password_for_token(id: &str, client: &str, token: &str) -> Option<String> {
    derive(id, client, &crate::devices::token_hash(token))
}

fn derive(id: &str, client: &str, token_sha256: &str) -> Option<String> {
    if token_sha256.is_empty() {
        return None;
    }
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token_sha256.as_bytes());
    let tag = ring::hmac::sign(&key, format!("chela mqtt|{id}|{client}").as_bytes());
    Some(tag.as_ref().iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether a CONNECT's login opens device `id` presented with `client`.
fn login_ok(state: &DeviceState, id: &str, client: &str, username: &str, pass: &str) -> bool {
    let Some(d) = state.devices.iter().find(|d| d.id == id && d.state == State::Approved) else { return false };
    let Some(expected) = password(state, id) else { return false };
    // Compared without an early exit, so the time taken tells nothing of where they differ.
    let same =
        |a: &str, b: &str| a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    same(&d.client_id, client) && username == id && same(&expected, pass)
}

/// Where devices reach the endpoint, and the live connections.
pub struct Endpoint {
    host: Host,
    hub: Arc<Hub>,
    /// The host named in hello answers' `udp.server`, and the UDP port.
    udp_public: (String, u16),
    /// Client id → (connection number, its "a newer one came" signal).
    clients: Mutex<HashMap<String, (u64, Arc<Notify>)>>,
    per_address: Mutex<HashMap<IpAddr, usize>>,
    next: std::sync::atomic::AtomicU64,
    /// With `xiaozhi.mqtt_tls_cert`/`key`: every connection is TLS first.
    tls: Option<TlsAcceptor>,
}

impl Endpoint {
    pub fn new(host: Host, hub: Arc<Hub>, udp_public: (String, u16), tls: Option<TlsAcceptor>) -> Arc<Endpoint> {
        Arc::new(Endpoint {
            host,
            hub,
            udp_public,
            clients: Mutex::default(),
            per_address: Mutex::default(),
            next: std::sync::atomic::AtomicU64::new(1),
            tls,
        })
    }

    /// Accepts devices until the daemon stops.
    pub async fn run(self: Arc<Self>, listener: TcpListener) {
        let shutdown = self.host.daemon.shutdown().clone();
        loop {
            let (stream, peer) = tokio::select! {
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(e) => {
                        chela_log::debug!("xiaozhi: MQTT accept: {e}");
                        // Out of descriptors: give the others a moment rather than spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = shutdown.wait() => return,
            };
            let Some(slot) = self.admit(peer.ip()) else {
                chela_log::info!("xiaozhi: an MQTT connection from {peer} was refused (too many)");
                continue;
            };
            let me = Arc::clone(&self);
            self.host.conns.spawn(async move {
                let _slot = slot;
                me.connection(stream).await;
            });
        }
    }

    fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let mut m = self.per_address.lock().unwrap_or_else(PoisonError::into_inner);
        let total: usize = m.values().sum();
        let here = m.get(&ip).copied().unwrap_or(0);
        if total >= MAX_CONNECTIONS || here >= MAX_PER_ADDRESS {
            return None;
        }
        *m.entry(ip).or_default() += 1;
        Some(Slot { ep: Arc::clone(self), ip })
    }

    async fn connection(self: &Arc<Self>, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let Ok(peer) = stream.peer_addr() else { return };
        let opened = tokio::time::Instant::now();
        let (mut rd, wr): (Box<dyn AsyncRead + Send + Unpin>, Box<dyn AsyncWrite + Send + Unpin>) = match &self.tls {
            None => {
                let (r, w) = stream.into_split();
                (Box::new(r), Box::new(w))
            }
            // The handshake counts against the CONNECT's time, so a client that stalls in it
            // holds its slot no longer than one that stalls before CONNECT.
            Some(tls) => match tokio::time::timeout(CONNECT_TIMEOUT, tls.accept(stream)).await {
                Ok(Ok(s)) => {
                    let (r, w) = tokio::io::split(s);
                    (Box::new(r), Box::new(w))
                }
                Ok(Err(e)) => {
                    chela_log::info!("xiaozhi: a TLS handshake on MQTT from {peer} failed: {e}");
                    return;
                }
                Err(_) => return,
            },
        };
        let mut wire = Wire::default();
        let first = tokio::time::timeout_at(opened + CONNECT_TIMEOUT, async {
            loop {
                if let Some(e) = wire.event() {
                    return Some(e);
                }
                match rd.read_buf(wire.buffer()).await {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                }
            }
        })
        .await;
        let Ok(Some(Event::Connect(connect))) = first else { return };
        let mut link = Link { wr, timeout: self.host.limits.write_timeout };
        if connect.protocol != mqttbytes::Protocol::V4 {
            let _ = link.packet(&Packet::ConnAck(ConnAck::new(ConnectReturnCode::RefusedProtocolVersion, false))).await;
            return;
        }
        let Some((device, client)) = parse_client_id(&connect.client_id) else {
            chela_log::info!("xiaozhi: an MQTT client id that is no device's was refused");
            let _ = link.packet(&Packet::ConnAck(ConnAck::new(ConnectReturnCode::BadClientId, false))).await;
            return;
        };
        let (user, pass) = connect.login.map(|l| (l.username, l.password)).unwrap_or_default();
        let store = Devices::open(self.host.daemon.workspace());
        let (id, cl) = (device.clone(), client.clone());
        let verdict = crate::tasks::blocking(move || {
            store.load().map(|s| login_ok(&s, &id, &cl, &user, &pass).then(|| s.vision_token(&id)))
        })
        .await;
        let vision = match verdict {
            Ok(Ok(Some(v))) => v.map(|t| (self.host.camera_url.clone(), t)),
            Ok(Ok(None)) => {
                chela_log::info!(%device, "xiaozhi: an MQTT login with wrong, revoked or unknown credentials was refused");
                let _ =
                    link.packet(&Packet::ConnAck(ConnAck::new(ConnectReturnCode::BadUserNamePassword, false))).await;
                return;
            }
            Ok(Err(e)) => {
                chela_log::error!("xiaozhi: {e}");
                let _ = link.packet(&Packet::ConnAck(ConnAck::new(ConnectReturnCode::ServiceUnavailable, false))).await;
                return;
            }
            Err(_) => return,
        };
        if link.packet(&Packet::ConnAck(ConnAck::new(ConnectReturnCode::Success, false))).await.is_err() {
            return;
        }
        let (number, kicked) = self.register(&connect.client_id);
        let keepalive = match connect.keep_alive {
            0 => MAX_KEEPALIVE,
            k => k.min(MAX_KEEPALIVE),
        };
        // The spec's 1.5 ×, in milliseconds so a short keep-alive keeps its half.
        let grace = Duration::from_millis(u64::from(keepalive) * 1500);
        chela_log::debug!(%device, "xiaozhi: a device connected over MQTT");
        let mut mq = Mq {
            link,
            topic: subscribe_topic(&device),
            hub: Arc::clone(&self.hub),
            device_ip: peer.ip().to_canonical(),
            udp_public: self.udp_public.clone(),
            channel: None,
            audio: None,
            downlink_ms: 0,
        };
        let mut c = Session::new(self.host.clone(), device.clone(), vision.clone());
        let shutdown = self.host.daemon.shutdown().clone();
        let mut deadline = Instant::now() + grace;
        let stop = loop {
            let step = tokio::select! {
                r = rd.read_buf(wire.buffer()) => match r {
                    Ok(0) | Err(_) => Err(Stop::Gone),
                    Ok(_) => {
                        deadline = Instant::now() + grace;
                        self.packets(&mut wire, &mut c, &mut mq, &vision).await
                    }
                },
                Some(opus) = recv(&mut mq.audio) => c.on_audio(&opus),
                work = c.next() => c.handle(work, &mut mq).await,
                () = kicked.notified() => {
                    chela_log::info!(%device, "xiaozhi: a newer MQTT connection of this device replaced this one");
                    Err(Stop::Gone)
                }
                () = sleep_until(deadline) => {
                    chela_log::info!(%device, "xiaozhi: nothing over MQTT for 1.5 × its keep-alive; the device is gone");
                    Err(Stop::Gone)
                }
                () = shutdown.wait() => Err(Stop::Close(Reason::Away, "Chela is stopping")),
            };
            if let Err(stop) = step {
                break stop;
            }
        };
        c.end_turn();
        if let Stop::Close(_, why) = stop
            && c.started()
        {
            let bye = json!({"session_id": c.session_id, "type": "goodbye"});
            chela_log::debug!(%device, "xiaozhi: MQTT conversation closed: {why}");
            let _ = mq.send_text(bye.to_string()).await;
        }
        drop(c);
        self.unregister(&connect.client_id, number);
        let _ = mq.link.wr.shutdown().await;
        chela_log::debug!(%device, "xiaozhi: a device left MQTT");
    }

    /// Every whole packet read so far.
    async fn packets(
        &self,
        wire: &mut Wire,
        c: &mut Session,
        mq: &mut Mq,
        vision: &Option<(String, String)>,
    ) -> Result<(), Stop> {
        while let Some(event) = wire.event() {
            match event {
                Event::Message(payload) => {
                    let Ok(text) = std::str::from_utf8(&payload) else {
                        c.bad_frame()?;
                        continue;
                    };
                    // A hello while a conversation runs starts a new one (the device thinks
                    // the old one closed): new keys, downlink numbered from 1 again.
                    if c.started() && is_hello(text) {
                        c.end_turn();
                        *c = Session::new(self.host.clone(), c.device.clone(), vision.clone());
                        mq.close_audio();
                    }
                    match c.on_text(text, mq).await {
                        // The conversation ends; the connection stays for the next hello.
                        Err(Stop::Goodbye) => {
                            c.end_turn();
                            *c = Session::new(self.host.clone(), c.device.clone(), vision.clone());
                            mq.close_audio();
                        }
                        other => other?,
                    }
                }
                Event::Reply(p) => mq.link.packet(&p).await?,
                Event::Nothing => {}
                Event::Gone => return Err(Stop::Gone),
                Event::Close(reason, why) => {
                    chela_log::info!(device = %c.device, "xiaozhi: MQTT connection closed: {why}");
                    return Err(Stop::Close(reason, why));
                }
                // The wire yields CONNECT only first.
                Event::Connect(_) => return Err(Stop::Close(Reason::Policy, "a second CONNECT")),
            }
        }
        Ok(())
    }

    /// Makes `client_id` this connection's, closing an older one; its number and kick signal.
    fn register(&self, client_id: &str) -> (u64, Arc<Notify>) {
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        let old = self
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(client_id.to_owned(), (number, Arc::clone(&notify)));
        if let Some((_, old)) = old {
            old.notify_one();
        }
        (number, notify)
    }

    fn unregister(&self, client_id: &str, number: u64) {
        let mut m = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if m.get(client_id).is_some_and(|(n, _)| *n == number) {
            m.remove(client_id);
        }
    }
}

/// One admitted connection's place in the per-address count.
struct Slot {
    ep: Arc<Endpoint>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut m = self.ep.per_address.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

fn is_hello(text: &str) -> bool {
    matches!(chela_proto::xiaozhi::message::parse(text), Ok(XzMessage::Hello(_)))
}

async fn recv(rx: &mut Option<mpsc::Receiver<Vec<u8>>>) -> Option<Vec<u8>> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The write half of a device's MQTT connection.
struct Link {
    wr: Box<dyn AsyncWrite + Send + Unpin>,
    timeout: Duration,
}

impl Link {
    async fn packet(&mut self, p: &Packet) -> Result<(), Stop> {
        let mut out = BytesMut::with_capacity(p.size() + 8);
        if p.write(&mut out, usize::MAX).is_err() {
            return Err(Stop::Gone);
        }
        // TLS holds records until flushed; a plain socket's flush does nothing.
        let sent = async {
            self.wr.write_all(&out).await?;
            self.wr.flush().await
        };
        match tokio::time::timeout(self.timeout, sent).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) | Err(_) => Err(Stop::Gone),
        }
    }
}

/// MQTT + UDP as a conversation's carrier.
struct Mq {
    link: Link,
    topic: String,
    hub: Arc<Hub>,
    /// The device's IP: its UDP audio must come from it.
    device_ip: IpAddr,
    udp_public: (String, u16),
    channel: Option<Arc<Channel>>,
    audio: Option<mpsc::Receiver<Vec<u8>>>,
    downlink_ms: u32,
}

impl Mq {
    fn close_audio(&mut self) {
        self.channel = None;
        self.audio = None;
    }
}

impl Transport for Mq {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn hello_answer(&mut self, session_id: &str, hello: &Hello) -> Result<String, Stop> {
        if hello.version.is_some_and(|v| v != 3) {
            return Err(Stop::Close(Reason::Policy, "an MQTT hello is version 3"));
        }
        let Some((channel, audio)) = self.hub.open(self.device_ip) else {
            chela_log::warn!("xiaozhi: no UDP audio channel is free");
            return Err(Stop::Close(Reason::Error, "no audio channel is free"));
        };
        let mut answer = serde_json::to_value(XzMessage::Hello(Hello::server(session_id, DOWNLINK_RATE, FRAME_MS)))
            .unwrap_or_default();
        answer["transport"] = json!("udp");
        answer["version"] = json!(3);
        answer["udp"] = json!({
            "server": self.udp_public.0, "port": self.udp_public.1, "encryption": "aes-128-ctr",
            "key": channel.key_hex(), "nonce": channel.nonce_hex(),
        });
        self.channel = Some(channel);
        self.audio = Some(audio);
        Ok(answer.to_string())
    }

    async fn send_text(&mut self, text: String) -> Result<(), Stop> {
        let p = Publish::new(self.topic.clone(), QoS::AtMostOnce, text.into_bytes());
        self.link.packet(&Packet::Publish(p)).await
    }

    async fn send_audio(&mut self, opus: &[u8]) -> Result<(), Stop> {
        if let Some(ch) = &self.channel {
            ch.send(opus, self.downlink_ms).await;
        }
        self.downlink_ms = self.downlink_ms.wrapping_add(FRAME_MS);
        Ok(())
    }

    fn reply_starts(&mut self) {
        self.downlink_ms = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_round_trip_and_strangers_do_not_parse() {
        let id = client_id("aa:bb:cc:dd:ee:ff", "3f1c2a4e-1111-4000-8000-000000000001");
        assert_eq!(id, "GID_chela@@@aa_bb_cc_dd_ee_ff@@@3f1c2a4e-1111-4000-8000-000000000001");
        assert_eq!(
            parse_client_id(&id),
            Some(("aa:bb:cc:dd:ee:ff".to_owned(), "3f1c2a4e-1111-4000-8000-000000000001".to_owned()))
        );
        assert_eq!(parse_client_id("GID_x@@@AA_BB_CC_DD_EE_FF@@@u").map(|p| p.0).as_deref(), Some("aa:bb:cc:dd:ee:ff"));
        for bad in [
            "",
            "anything",
            "GID_x@@@aa_bb@@@u",
            "X_x@@@aa_bb_cc_dd_ee_ff@@@u",
            "GID_x@@@aa_bb_cc_dd_ee_ff@@@",
            "GID_x@@@aa_bb_cc_dd_ee_ff@@@u@@@v",
        ] {
            assert_eq!(parse_client_id(bad), None, "{bad}");
        }
        assert_eq!(subscribe_topic("aa:bb:cc:dd:ee:ff"), "devices/p2p/aa_bb_cc_dd_ee_ff");
    }
}
