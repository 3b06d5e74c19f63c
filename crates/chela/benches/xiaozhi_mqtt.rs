//! xiaozhi over MQTT + UDP through the real `chela run` (`xiaozhi.transport = mqtt`), with
//! instant fakes (the scripted fake LLM, the testkit's fake OpenAI audio API), on 127.0.0.1:
//! 1. memory per idle connected device: the daemon's RSS before and after `DEVICES` devices
//!    connected over MQTT and said hello (a UDP channel each), divided by `DEVICES`;
//! 2. keep-alive CPU: the daemon's user + system time while those devices only ping
//!    (PINGREQ every `PING` seconds) for `WINDOW` seconds;
//! 3. end of the utterance → first downlink audio frame, MQTT + UDP against the WebSocket, one
//!    device of each on the same daemon, rounds alternating: a typed utterance (`listen
//!    detect`, so no VAD decides where speech ended) timed at the device from sending it to
//!    the first audio frame of the reply.
//!
//! Run: `cargo bench -p chela --bench xiaozhi_mqtt`. `CHELA_BENCH_ITERS`
//! sets the latency rounds per transport (default 50), `CHELA_BENCH_DEVICES` the idle devices
//! (default 250: the device store binds at most `MAX_DEVICES`, 256, and two talk). The endpoint
//! takes at most 64 connections per address, so the idle devices dial from 127.0.1.x, 60 to an
//! address.

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use chela::channels::xiaozhi::{mqtt, udp};
use chela_testkit::audio::FakeAudio;
use chela_testkit::daemon::Running;
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use rumqttc::mqttbytes::v4::{Connect, Login, Packet, Publish};
use rumqttc::mqttbytes::{self, QoS};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream, UdpSocket};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const CLIENT: &str = "3f1c2a4e-5555-4000-8000-000000000001";
const HELLO: &str = r#"{"type":"hello","version":3,"features":{"mcp":false},"transport":"udp","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;
const WS_HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":false},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;
const PING: u64 = 5;
const WINDOW: u64 = 30;

fn mac(i: usize) -> String {
    format!("aa:bb:cc:dd:{:02x}:{:02x}", i / 256, i % 256)
}

fn token(i: usize) -> String {
    format!("bench-token-{i}")
}

fn proc_status(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// User + system CPU of the process so far, in clock ticks (100 a second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

struct Run {
    daemon: Running,
    mqtt: SocketAddr,
    _dir: tempfile::TempDir,
    _home: tempfile::TempDir,
}

fn start(llm: &FakeLlm, audio: &FakeAudio, devices: usize) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let list: Vec<_> = (0..devices + 2)
        .map(|i| {
            json!({"id": mac(i), "client_id": CLIENT, "info": {}, "state": "approved",
                   "token_sha256": chela::devices::token_hash(&token(i)), "created": 1, "last_seen": 1})
        })
        .collect();
    std::fs::write(state.join("devices.json"), json!({"devices": list, "pending": []}).to_string()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut c = chela_testkit::daemon::command(env!("CARGO_BIN_EXE_chela"), dir.path(), home.path());
    c.arg("run")
        .env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0")
        .env("CHELA_LLM__PROVIDER", "anthropic")
        .env("CHELA_LLM__BASE_URL", llm.anthropic_base_url())
        .env("CHELA_LLM__API_KEY", "bench-key")
        .env("CHELA_VOICE__ASR_BASE_URL", audio.base_url())
        .env("CHELA_VOICE__TTS_BASE_URL", audio.base_url())
        .env("CHELA_XIAOZHI__TRANSPORT", "mqtt")
        .env("CHELA_XIAOZHI__MQTT_LISTEN", "127.0.0.1:0")
        .env("CHELA_XIAOZHI__UDP_LISTEN", "127.0.0.1:0");
    let daemon = Running::start(c, Duration::from_secs(30));
    let marker = "xiaozhi devices connect over MQTT to ";
    let deadline = Instant::now() + Duration::from_secs(30);
    let mqtt = loop {
        let log = daemon.log();
        if let Some(i) = log.find(marker)
            && let Some(rest) = log[i + marker.len()..].split_whitespace().next()
        {
            break rest.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no MQTT endpoint in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(10));
    };
    Run { daemon, mqtt, _dir: dir, _home: home }
}

/// A device on MQTT: its connection, and after the hello its UDP channel.
struct Dev {
    tcp: TcpStream,
    buf: BytesMut,
    udp: Option<UdpSocket>,
    key: [u8; 16],
    nonce: [u8; 16],
    server: SocketAddr,
    up: u32,
}

async fn send(tcp: &mut TcpStream, p: &Packet) {
    let mut out = BytesMut::new();
    p.write(&mut out, usize::MAX).unwrap();
    tcp.write_all(&out).await.unwrap();
}

impl Dev {
    async fn connect(at: SocketAddr, from: IpAddr, i: usize, keepalive: u16) -> Dev {
        let sock = TcpSocket::new_v4().unwrap();
        sock.bind(SocketAddr::new(from, 0)).unwrap();
        let mut tcp = sock.connect(at).await.unwrap();
        let mut c = Connect::new(mqtt::client_id(&mac(i), CLIENT));
        c.keep_alive = keepalive;
        let pass = mqtt::password_for_token(&mac(i), CLIENT, &token(i)).unwrap();
        c.login = Some(Login::new(mac(i), pass));
        send(&mut tcp, &Packet::Connect(c)).await;
        let mut d = Dev { tcp, buf: BytesMut::new(), udp: None, key: [0; 16], nonce: [0; 16], server: at, up: 0 };
        match d.packet().await {
            Packet::ConnAck(a) if a.code == mqttbytes::v4::ConnectReturnCode::Success => d,
            other => panic!("device {i} refused: {other:?}"),
        }
    }

    async fn packet(&mut self) -> Packet {
        loop {
            match Packet::read(&mut self.buf, 1 << 20) {
                Ok(p) => return p,
                Err(mqttbytes::Error::InsufficientBytes(_)) => {}
                Err(e) => panic!("{e}"),
            }
            assert!(self.tcp.read_buf(&mut self.buf).await.unwrap() > 0, "the endpoint closed a device");
        }
    }

    async fn json(&mut self) -> Value {
        loop {
            if let Packet::Publish(p) = self.packet().await {
                return serde_json::from_slice(&p.payload).unwrap();
            }
        }
    }

    async fn publish(&mut self, text: &str) {
        let p = Packet::Publish(Publish::new(mqtt::PUBLISH_TOPIC, QoS::AtMostOnce, text.as_bytes().to_vec()));
        send(&mut self.tcp, &p).await;
    }

    async fn hello(&mut self, with_udp: bool) {
        self.publish(HELLO).await;
        let a = self.json().await;
        let hex = |k: &str| -> [u8; 16] {
            let s = a["udp"][k].as_str().unwrap();
            let v: Vec<u8> = (0..16).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect();
            v.try_into().unwrap()
        };
        self.key = hex("key");
        self.nonce = hex("nonce");
        let port = u16::try_from(a["udp"]["port"].as_u64().unwrap()).unwrap();
        self.server = SocketAddr::new(a["udp"]["server"].as_str().unwrap().parse().unwrap(), port);
        self.up = 0;
        if with_udp && self.udp.is_none() {
            self.udp = Some(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        }
    }

    async fn send_audio(&mut self, opus: &[u8]) {
        self.up += 1;
        let d = udp::seal(&self.key, &self.nonce, self.up * 60, self.up, opus).unwrap();
        self.udp.as_ref().unwrap().send_to(&d, self.server).await.unwrap();
    }

    /// Waits for the first downlink datagram, then reads MQTT to `tts stop` and drains the
    /// rest of the audio; the time of that first datagram.
    async fn first_frame_then_stop(&mut self) -> Instant {
        let mut b = vec![0u8; 4096];
        self.udp.as_ref().unwrap().recv_from(&mut b).await.unwrap();
        let first = Instant::now();
        loop {
            let v = self.json().await;
            if v["type"] == "tts" && v["state"] == "stop" {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        while self.udp.as_ref().unwrap().try_recv_from(&mut b).is_ok() {}
        first
    }
}

type Ws = WebSocketStream<TcpStream>;

async fn ws_hello(addr: SocketAddr, i: usize) -> Ws {
    let mut req = format!("ws://{addr}/xiaozhi/v1/").into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("Authorization", format!("Bearer {}", token(i)).parse().unwrap());
    h.insert("Device-Id", mac(i).parse().unwrap());
    h.insert("Client-Id", CLIENT.parse().unwrap());
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(req, stream).await.unwrap();
    ws.send(Message::text(WS_HELLO)).await.unwrap();
    loop {
        if let Some(Ok(Message::Text(_))) = ws.next().await {
            return ws;
        }
    }
}

async fn ws_first_frame_then_stop(ws: &mut Ws) -> Instant {
    let mut first = None;
    loop {
        match ws.next().await.expect("open").expect("a frame") {
            Message::Binary(_) if first.is_none() => first = Some(Instant::now()),
            Message::Text(t) if t.as_str().contains(r#""state":"stop""#) => return first.expect("audio before stop"),
            _ => {}
        }
    }
}

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[((v.len() * p).div_ceil(100)).saturating_sub(1).min(v.len() - 1)]
}

fn show(what: &str, v: &mut [Duration]) {
    println!(
        "xiaozhi_mqtt: {what}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} rounds)",
        pct(v, 50).as_secs_f64() * 1e3,
        pct(v, 99).as_secs_f64() * 1e3,
        pct(v, 100).as_secs_f64() * 1e3,
        v.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let iters: usize = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let devices: usize = std::env::var("CHELA_BENCH_DEVICES").ok().and_then(|v| v.parse().ok()).unwrap_or(250);
    let llm = FakeLlm::start(vec![Step::text("Sure. It is noon."); 2 * iters + 2]);
    let audio = FakeAudio::start("what time is it");
    let run = start(&llm, &audio, devices);
    let pid = run.daemon.pid();
    let local = IpAddr::V4(Ipv4Addr::LOCALHOST);

    // The MQTT talking device first, so its set-up is not counted as idle memory.
    let mut mq = Dev::connect(run.mqtt, local, devices, 240).await;
    mq.hello(true).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 1. Idle devices.
    let before = proc_status(pid, "VmRSS:");
    let mut idle = Vec::with_capacity(devices);
    let started = Instant::now();
    for i in 0..devices {
        let from = IpAddr::V4(Ipv4Addr::new(127, 0, 1, u8::try_from(i / 60 + 1).unwrap()));
        let mut d = Dev::connect(run.mqtt, from, i, 60).await;
        d.hello(false).await;
        idle.push(d);
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = proc_status(pid, "VmRSS:");
    let per = after.saturating_sub(before) as f64 / devices as f64;
    println!(
        "xiaozhi_mqtt: RSS with 1 device {before} KiB, with {devices} more idle (connected, hello done) {after} KiB: \
         {per:.1} KiB per device; connecting them took {:.2} s",
        took.as_secs_f64()
    );

    // 2. Keep-alive: every idle device pings every PING s for WINDOW s.
    let cpu0 = cpu_ticks(pid);
    let t0 = Instant::now();
    let pingers: Vec<_> = idle
        .into_iter()
        .enumerate()
        .map(|(i, mut d)| {
            tokio::spawn(async move {
                // Spread over the period, as devices that connected at different times are.
                tokio::time::sleep(Duration::from_millis((i as u64 * PING * 1000) / devices as u64 % (PING * 1000)))
                    .await;
                let mut pings = 0u64;
                let end = t0 + Duration::from_secs(WINDOW);
                while Instant::now() + Duration::from_secs(PING) <= end {
                    tokio::time::sleep(Duration::from_secs(PING)).await;
                    send(&mut d.tcp, &Packet::PingReq).await;
                    assert!(matches!(d.packet().await, Packet::PingResp));
                    pings += 1;
                }
                (d, pings)
            })
        })
        .collect();
    let mut idle = Vec::new();
    let mut pings = 0;
    for p in pingers {
        let (d, n) = p.await.unwrap();
        pings += n;
        idle.push(d);
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu_ms = (cpu_ticks(pid) - cpu0) * 10;
    let rss = proc_status(pid, "VmRSS:");
    println!(
        "xiaozhi_mqtt: {devices} idle devices pinging every {PING} s for {wall:.1} s: {pings} pings, daemon CPU {cpu_ms} ms \
         ({:.1}% of one core; {:.1} us per ping), RSS {rss} KiB",
        cpu_ms as f64 / (wall * 10.0),
        cpu_ms as f64 * 1000.0 / pings.max(1) as f64
    );
    drop(idle);
    // The WebSocket device after the quiet window, which would outlast its idle limit.
    let mut ws = ws_hello(run.daemon.addr(), devices + 1).await;

    // 3. Latency, the transports alternating round by round.
    let mut enc = chela::voice::opus::Encoder::device(16_000).unwrap();
    let silence = enc.packets(&[0i16; 960]).unwrap().remove(0).to_vec();
    mq.send_audio(&silence).await; // the first uplink datagram gives the channel its address
    let (mut mq_typed, mut ws_typed) = (vec![], vec![]);
    let detect = r#"{"type":"listen","state":"detect","text":"what time is it"}"#;
    for _ in 0..iters {
        let sent = Instant::now();
        mq.publish(detect).await;
        mq_typed.push(mq.first_frame_then_stop().await - sent);
        let sent = Instant::now();
        ws.send(Message::text(detect)).await.unwrap();
        ws_typed.push(ws_first_frame_then_stop(&mut ws).await - sent);
    }
    show("MQTT+UDP typed utterance -> first downlink frame", &mut mq_typed);
    show("WebSocket typed utterance -> first downlink frame", &mut ws_typed);
}
