//! What a hostile or broken device can do to xiaozhi's MQTT + UDP transport of the real
//! `chela run`: wrong credentials, a client id that is no device's, a revoked device, a second
//! connection with one client id, an oversized packet, a first packet that is not CONNECT, a
//! flood of UDP datagrams (garbage payloads under the session's ssrc from another address,
//! wrong ssrcs, replayed sequences, datagrams before any hello), and a device that vanishes
//! without a word. Each is refused or dropped, and `/health` and another device's spoken turn
//! carry on. The device is the testkit's (`xiaozhi_mqtt::Device`), whose AES-128-CTR is written
//! from `ctr` directly, not borrowed from Chela. The model is the scripted fake LLM, speech the testkit's `FakeAudio`; all on
//! 127.0.0.1.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use chela_testkit::audio::FakeAudio;
use chela_testkit::daemon::Running;
use chela_testkit::xiaozhi_mqtt::{self, Device as Dev};
use chela_testkit::{FakeLlm, Step};
use rumqttc::mqttbytes::v4::{ConnectReturnCode, Packet};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::timeout;

const A: &str = "aa:bb:cc:dd:ee:4a";
const B: &str = "aa:bb:cc:dd:ee:4b";
const GONE: &str = "aa:bb:cc:dd:ee:4c";
const CLIENT: &str = "3f1c2a4e-4444-4000-8000-000000000001";

fn token(mac: &str) -> String {
    format!("token-of-{mac}")
}

/// The password the OTA answer gives with `token(mac)`.
fn password(mac: &str) -> String {
    xiaozhi_mqtt::password(mac, CLIENT, &token(mac))
}

fn client_id(mac: &str) -> String {
    xiaozhi_mqtt::client_id(mac, CLIENT)
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
        let (mqtt, udp) = xiaozhi_mqtt::endpoints(&run);
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

async fn connect(addr: SocketAddr, id: &str, user: &str, pass: &str, keepalive: u16) -> Result<Dev, ConnectReturnCode> {
    Dev::connect(addr, None, id, user, pass, keepalive).await
}

async fn device(addr: SocketAddr, mac: &str) -> Dev {
    connect(addr, &client_id(mac), mac, &password(mac), 60).await.expect("an approved device is let in")
}

/// A typed turn: its `stt` text and how many audio datagrams came for it.
async fn turn(d: &mut Dev, text: &str) -> (String, usize) {
    d.detect(text).await;
    let (js, audio) = d.until_tts_stop().await;
    let stt = js.iter().rev().find(|v| v["type"] == "stt").map(|v| v["text"].as_str().unwrap().to_owned());
    (stt.unwrap_or_default(), audio.len())
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
    xiaozhi_mqtt::write(&mut raw, &Packet::PingReq).await;
    let mut one = [0u8; 1];
    assert_eq!(timeout(Duration::from_secs(20), raw.read(&mut one)).await.unwrap().unwrap(), 0);
    for _ in 0..100 {
        drop(TcpStream::connect(d.mqtt).await.unwrap());
    }
    d.healthy();
    let mut b = device(d.mqtt, B).await;
    b.hello().await;
    b.send_audio(&silence()).await;
    assert_eq!(turn(&mut b, "are you there").await.0, "are you there");
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
        b.send_audio(&silence()).await;
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
    let (stt, frames) = turn(&mut b, "still there").await;
    assert_eq!(stt, "still there");
    assert!(frames > 0, "the device, not the forger, hears the answer");
    let mut buf = [0u8; 64];
    assert!(flood.try_recv_from(&mut buf).is_err(), "nothing went to the forger");
    assert!(neighbour.try_recv_from(&mut buf).is_err(), "nor to the neighbour");
    d.healthy();
}
