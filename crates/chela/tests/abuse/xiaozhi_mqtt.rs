//! What a hostile or broken device can do to xiaozhi's MQTT + UDP transport of the real
//! `chela run`: wrong credentials, a client id that is no device's, a revoked device, a second
//! connection with one client id, an oversized packet, a first packet that is not CONNECT, a
//! flood of UDP datagrams (garbage payloads under the session's ssrc from another address,
//! wrong ssrcs, replayed sequences, datagrams before any hello), and a device that vanishes
//! without a word. Each is refused or dropped, and `/health` and another device's spoken turn
//! carry on. The device side's AES-128-CTR is written here from `ctr` directly, not borrowed
//! from Chela. The model is the scripted fake LLM, speech the testkit's `FakeAudio`; all on
//! 127.0.0.1.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use aes::cipher::{KeyIvInit, StreamCipher};
use bytes::BytesMut;
use chela_testkit::audio::FakeAudio;
use chela_testkit::daemon::Running;
use chela_testkit::{FakeLlm, Step};
use rumqttc::mqttbytes::v4::{Connect, ConnectReturnCode, Login, Packet, Publish};
use rumqttc::mqttbytes::{self, QoS};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::timeout;

const A: &str = "aa:bb:cc:dd:ee:4a";
const B: &str = "aa:bb:cc:dd:ee:4b";
const GONE: &str = "aa:bb:cc:dd:ee:4c";
const CLIENT: &str = "3f1c2a4e-4444-4000-8000-000000000001";
const HELLO: &str = r#"{"type":"hello","version":3,"features":{"mcp":false},"transport":"udp","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;

fn token(mac: &str) -> String {
    format!("token-of-{mac}")
}

/// The password the OTA answer gives with `token(mac)`: HMAC-SHA256 keyed by the token's hash.
fn password(mac: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, chela::devices::token_hash(&token(mac)).as_bytes());
    let tag = ring::hmac::sign(&key, format!("chela mqtt|{mac}|{CLIENT}").as_bytes());
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn client_id(mac: &str) -> String {
    format!("GID_chela@@@{}@@@{CLIENT}", mac.replace(':', "_"))
}

struct Daemon {
    _dir: tempfile::TempDir,
    _home: tempfile::TempDir,
    run: Running,
    addr: SocketAddr,
    mqtt: SocketAddr,
    udp: SocketAddr,
    _llm: FakeLlm,
    _audio: FakeAudio,
}

impl Daemon {
    fn start(script: Vec<Step>) -> Daemon {
        let llm = FakeLlm::start(script);
        let audio = FakeAudio::start("unused");
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let device = |mac: &str, st: &str| {
            json!({"id": mac, "client_id": CLIENT, "info": {}, "state": st,
                   "token_sha256": chela::devices::token_hash(&token(mac)), "created": 1, "last_seen": 1})
        };
        let store =
            json!({"devices": [device(A, "approved"), device(B, "approved"), device(GONE, "revoked")], "pending": []});
        std::fs::write(state.join("devices.json"), store.to_string()).unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut c = chela_testkit::daemon::command(env!("CARGO_BIN_EXE_chela"), dir.path(), home.path());
        c.arg("run")
            .env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0")
            .env("CHELA_GATEWAY__TOKEN", "abuse-xiaozhi-mqtt-token")
            .env("CHELA_LLM__PROVIDER", "anthropic")
            .env("CHELA_LLM__BASE_URL", llm.anthropic_base_url())
            .env("CHELA_LLM__API_KEY", "test-key")
            .env("CHELA_LLM__MAX_RETRIES", "0")
            .env("CHELA_VOICE__ASR_BASE_URL", audio.base_url())
            .env("CHELA_VOICE__TTS_BASE_URL", audio.base_url())
            .env("CHELA_XIAOZHI__TRANSPORT", "mqtt")
            .env("CHELA_XIAOZHI__MQTT_LISTEN", "127.0.0.1:0")
            .env("CHELA_XIAOZHI__UDP_LISTEN", "127.0.0.1:0");
        let run = Running::start(c, Duration::from_secs(30));
        let addr = run.addr();
        let (mqtt, udp) = endpoints(&run);
        Daemon { _dir: dir, _home: home, run, addr, mqtt, udp, _llm: llm, _audio: audio }
    }

    fn healthy(&mut self) {
        assert!(self.run.alive(), "chela run died:\n{}", self.run.log());
        let mut s = std::net::TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    }
}

/// The MQTT and UDP addresses `chela run` says it listens on.
fn endpoints(run: &Running) -> (SocketAddr, SocketAddr) {
    const LINE: &str = "xiaozhi devices connect over MQTT to ";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = run.log();
        if let Some(i) = log.find(LINE)
            && let Some((line, _)) = log[i + LINE.len()..].split_once('\n')
        {
            let (tcp, rest) = line.split_once(" (UDP audio on ").unwrap();
            return (tcp.parse().unwrap(), rest.trim_end_matches(')').parse().unwrap());
        }
        assert!(Instant::now() < deadline, "no MQTT endpoint:\n{log}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

struct Dev {
    tcp: TcpStream,
    buf: BytesMut,
    udp: UdpSocket,
    key: [u8; 16],
    nonce: [u8; 16],
    up: u32,
    sid: String,
}

async fn write(tcp: &mut TcpStream, p: &Packet) {
    let mut out = BytesMut::new();
    p.write(&mut out, usize::MAX).unwrap();
    tcp.write_all(&out).await.unwrap();
}

async fn connect(addr: SocketAddr, id: &str, user: &str, pass: &str, keepalive: u16) -> Result<Dev, ConnectReturnCode> {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut c = Connect::new(id);
    c.keep_alive = keepalive;
    c.login = Some(Login::new(user, pass));
    write(&mut tcp, &Packet::Connect(c)).await;
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut d = Dev { tcp, buf: BytesMut::new(), udp, key: [0; 16], nonce: [0; 16], up: 0, sid: String::new() };
    match d.packet().await {
        Some(Packet::ConnAck(a)) if a.code == ConnectReturnCode::Success => Ok(d),
        Some(Packet::ConnAck(a)) => Err(a.code),
        other => panic!("expected CONNACK, got {other:?}"),
    }
}

async fn device(addr: SocketAddr, mac: &str) -> Dev {
    connect(addr, &client_id(mac), mac, &password(mac), 60).await.expect("an approved device is let in")
}

impl Dev {
    async fn packet(&mut self) -> Option<Packet> {
        loop {
            match Packet::read(&mut self.buf, 1 << 20) {
                Ok(p) => return Some(p),
                Err(mqttbytes::Error::InsufficientBytes(_)) => {}
                Err(e) => panic!("{e}"),
            }
            let n = timeout(Duration::from_secs(30), self.tcp.read_buf(&mut self.buf)).await.expect("in time");
            if n.map_or(true, |n| n == 0) {
                return None;
            }
        }
    }

    async fn json(&mut self) -> Value {
        loop {
            if let Packet::Publish(p) = self.packet().await.expect("the connection stays open") {
                return serde_json::from_slice(&p.payload).unwrap();
            }
        }
    }

    async fn publish(&mut self, text: &str) {
        write(
            &mut self.tcp,
            &Packet::Publish(Publish::new("device-server", QoS::AtMostOnce, text.as_bytes().to_vec())),
        )
        .await;
    }

    async fn hello(&mut self) -> Value {
        self.publish(HELLO).await;
        let a = self.json().await;
        let hex = |s: &str| -> [u8; 16] {
            let v: Vec<u8> = (0..16).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect();
            v.try_into().unwrap()
        };
        self.key = hex(a["udp"]["key"].as_str().unwrap());
        self.nonce = hex(a["udp"]["nonce"].as_str().unwrap());
        self.sid = a["session_id"].as_str().unwrap().to_owned();
        a
    }

    /// A datagram the firmware's way: the nonce with length, timestamp and sequence written
    /// over it, then the payload encrypted with that header as the IV.
    fn datagram(&self, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut h = self.nonce;
        h[2..4].copy_from_slice(&u16::try_from(payload.len()).unwrap().to_be_bytes());
        h[12..16].copy_from_slice(&seq.to_be_bytes());
        let mut out = h.to_vec();
        out.extend_from_slice(payload);
        ctr::Ctr128BE::<aes::Aes128>::new((&self.key).into(), (&h).into()).apply_keystream(&mut out[16..]);
        out
    }

    async fn send_audio(&mut self, server: SocketAddr, payload: &[u8]) {
        self.up += 1;
        let d = self.datagram(self.up, payload);
        self.udp.send_to(&d, server).await.unwrap();
    }

    /// A typed turn: its `stt` text and how many audio datagrams came for it.
    async fn turn(&mut self, text: &str) -> (String, usize) {
        let detect = json!({"session_id": self.sid, "type": "listen", "state": "detect", "text": text});
        self.publish(&detect.to_string()).await;
        let mut stt = String::new();
        loop {
            let v = self.json().await;
            if v["type"] == "stt" {
                stt = v["text"].as_str().unwrap().to_owned();
            }
            if v["type"] == "tts" && v["state"] == "stop" {
                break;
            }
        }
        let mut frames = 0;
        let mut buf = [0u8; 2048];
        while self.udp.try_recv_from(&mut buf).is_ok() {
            frames += 1;
        }
        (stt, frames)
    }
}

/// One 60 ms packet of silence, as the device's encoder makes it.
fn silence() -> Vec<u8> {
    let mut enc = chela_voice::opus::Encoder::device(16_000).unwrap();
    enc.packets(&[0i16; 960]).unwrap().remove(0).to_vec()
}

#[tokio::test]
async fn hostile_mqtt_clients_are_refused_and_the_daemon_and_other_devices_carry_on() {
    let mut d = Daemon::start(vec![Step::text("B is fine.")]);
    let refused = |r: Result<Dev, ConnectReturnCode>| r.err();
    assert_eq!(
        refused(connect(d.mqtt, &client_id(A), A, "wrong", 60).await),
        Some(ConnectReturnCode::BadUserNamePassword)
    );
    assert_eq!(
        refused(connect(d.mqtt, &client_id(A), B, &password(A), 60).await),
        Some(ConnectReturnCode::BadUserNamePassword)
    );
    assert_eq!(
        refused(connect(d.mqtt, "mosquitto_sub-1234", A, &password(A), 60).await),
        Some(ConnectReturnCode::BadClientId)
    );
    assert_eq!(
        refused(connect(d.mqtt, &client_id(GONE), GONE, &password(GONE), 60).await),
        Some(ConnectReturnCode::BadUserNamePassword),
        "a revoked device's password is dead"
    );
    // One client id, two connections: the newer wins.
    let mut first = device(d.mqtt, A).await;
    let _second = device(d.mqtt, A).await;
    assert!(first.packet().await.is_none(), "the older connection is closed");
    // An oversized packet closes its connection only.
    let mut big = device(d.mqtt, A).await;
    // Past the 256 KiB message bound plus the packet's own fields.
    big.publish(&"x".repeat(258 * 1024)).await;
    assert!(big.packet().await.is_none());
    // A first packet that is not CONNECT, and 100 connections that say nothing and leave.
    let mut raw = TcpStream::connect(d.mqtt).await.unwrap();
    write(&mut raw, &Packet::PingReq).await;
    let mut one = [0u8; 1];
    assert_eq!(timeout(Duration::from_secs(20), raw.read(&mut one)).await.unwrap().unwrap(), 0);
    for _ in 0..100 {
        drop(TcpStream::connect(d.mqtt).await.unwrap());
    }
    d.healthy();
    let mut b = device(d.mqtt, B).await;
    b.hello().await;
    b.send_audio(d.udp, &silence()).await;
    assert_eq!(b.turn("are you there").await.0, "are you there");
    d.healthy();
}

#[tokio::test]
async fn a_udp_flood_and_a_vanished_device_move_nothing() {
    let mut d = Daemon::start(vec![Step::text("Still here.")]);
    // From another loopback address: another machine as far as the endpoint can tell.
    let flood = UdpSocket::bind("127.0.0.2:0").await.unwrap();
    let mut b = device(d.mqtt, B).await;
    // Before any hello there is no channel: well-formed and garbage datagrams alike are dropped.
    for i in 0..500u32 {
        let mut g = vec![1u8, 0, 0, 4];
        g.extend_from_slice(&i.to_be_bytes());
        g.extend_from_slice(&[0; 8]);
        g.extend_from_slice(&[0xEE; 4]);
        flood.send_to(&g, d.udp).await.unwrap();
        flood.send_to(&[0xFF; 40], d.udp).await.unwrap();
    }
    b.hello().await;
    for _ in 0..3 {
        b.send_audio(d.udp, &silence()).await;
    }
    // A forger on the device's own IP but another port, and one elsewhere.
    let neighbour = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    neighbour.send_to(&b.datagram(b.up + 1, &[0xAB; 40]), d.udp).await.unwrap();
    // The forger knows the ssrc (it is in clear in every datagram) but not the key, and sends
    // from elsewhere: garbage under the right ssrc, wrong ssrcs, and the device's own datagram
    // replayed.
    let replay = b.datagram(1, &silence());
    for i in 0..2000u32 {
        flood.send_to(&b.datagram(b.up + 1 + i, &[0xAB; 40]), d.udp).await.unwrap();
        let mut wrong = b.datagram(b.up + 1 + i, &[0xCD; 40]);
        wrong[4..8].copy_from_slice(&(i ^ 0x5A5A_5A5A).to_be_bytes());
        flood.send_to(&wrong, d.udp).await.unwrap();
        flood.send_to(&replay, d.udp).await.unwrap();
    }
    // A device that vanishes (no DISCONNECT, no pings): gone after 1.5 × its keep-alive.
    let mut vanishing = connect(d.mqtt, &client_id(A), A, &password(A), 1).await.unwrap();
    assert!(vanishing.packet().await.is_none(), "a silent device's connection is ended");
    d.healthy();
    let (stt, frames) = b.turn("still there").await;
    assert_eq!(stt, "still there");
    assert!(frames > 0, "the device, not the forger, hears the answer");
    let mut buf = [0u8; 64];
    assert!(flood.try_recv_from(&mut buf).is_err(), "nothing went to the forger");
    assert!(neighbour.try_recv_from(&mut buf).is_err(), "nor to the neighbour");
    d.healthy();
}
