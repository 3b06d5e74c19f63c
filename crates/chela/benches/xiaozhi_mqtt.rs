//! xiaozhi over MQTT + UDP through the real `chela run` (`xiaozhi.transport = mqtt`), with
//! instant fakes (the scripted fake LLM, the testkit's fake OpenAI audio API), on 127.0.0.1:
//! 1. memory per idle connected device: the daemon's RSS before and after `DEVICES` devices
//!    connected over MQTT and said hello (a UDP channel each), divided by `DEVICES`;
//! 2. keep-alive CPU: the daemon's user + system time while those devices only ping
//!    (PINGREQ every `PING` seconds) for `WINDOW` seconds;
//! 3. end of the utterance → first downlink audio frame, MQTT + UDP against the WebSocket, one
//!    device of each on the same daemon, rounds alternating: a typed utterance (`listen
//!    detect`, so no VAD decides where speech ended) timed at the device from sending it to
//!    the first audio frame of the reply; and a spoken one (`listen start` in `auto` mode,
//!    espeak-ng speech, its quiet tail cut, as 60 ms Opus frames sent at real time, then
//!    silence frames at real time as a device's open microphone sends) timed from the last
//!    frame of speech, so it includes the VAD's 800 ms of silence that ends an utterance;
//! 4. CPU per device-minute over MQTT: the daemon's CPU during the MQTT device's spoken rounds
//!    (decode, VAD, ASR, turn, TTS, encode, UDP) over their wall time.
//!
//! Run: `cargo bench -p chela --bench xiaozhi_mqtt` (needs `espeak-ng`). `CHELA_BENCH_ITERS`
//! sets the typed rounds per transport (default 50), `CHELA_BENCH_SPOKEN` the spoken ones
//! (default 20), `CHELA_BENCH_DEVICES` the idle devices (default 500). The endpoint takes at
//! most 64 connections per address, so the idle devices dial from 127.0.1.x, 60 to an address.

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use chela_testkit::audio::FakeAudio;
use chela_testkit::daemon::Running;
use chela_testkit::xiaozhi_mqtt::{Approved, Device, client_id, password, voice_daemon};
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use rumqttc::mqttbytes::v4::Packet;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

#[path = "common/speech.rs"]
mod speech;
use speech::{espeak_16k, packets};

const CLIENT: &str = "3f1c2a4e-5555-4000-8000-000000000001";
const WS_HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":false},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;
const LISTEN_AUTO: &str = r#"{"type":"listen","state":"start","mode":"auto"}"#;
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
    let approved: Vec<_> =
        (0..devices + 2).map(|i| Approved { mac: mac(i), client: CLIENT.into(), token: token(i) }).collect();
    let (daemon, dir, home) = voice_daemon(
        env!("CARGO_BIN_EXE_chela"),
        &llm.anthropic_base_url(),
        &audio.base_url(),
        &approved,
        &[
            ("CHELA_XIAOZHI__TRANSPORT", "mqtt"),
            ("CHELA_XIAOZHI__MQTT_LISTEN", "127.0.0.1:0"),
            ("CHELA_XIAOZHI__UDP_LISTEN", "127.0.0.1:0"),
        ],
    );
    let (mqtt, _) = chela_testkit::xiaozhi_mqtt::endpoints(&daemon);
    Run { daemon, mqtt, _dir: dir, _home: home }
}

/// Device `i` connected from `from` with keep-alive `keepalive`.
async fn connect(at: SocketAddr, from: IpAddr, i: usize, keepalive: u16) -> Device {
    let pass = password(&mac(i), CLIENT, &token(i));
    match Device::connect(at, Some(from), &client_id(&mac(i), CLIENT), &mac(i), &pass, keepalive).await {
        Ok(d) => d,
        Err(code) => panic!("device {i} refused: {code:?}"),
    }
}

/// Waits for the first downlink datagram, then reads MQTT to `tts stop` and drains the rest of
/// the audio; the time of that first datagram.
async fn first_frame_then_stop(d: &mut Device) -> Instant {
    let mut b = vec![0u8; 4096];
    d.udp.recv_from(&mut b).await.unwrap();
    let first = Instant::now();
    until_stop(d).await;
    first
}

async fn until_stop(d: &mut Device) {
    loop {
        let v = d.json().await;
        if v["type"] == "tts" && v["state"] == "stop" {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut b = vec![0u8; 4096];
    while d.udp.try_recv_from(&mut b).is_ok() {}
}

/// A spoken utterance at real time, then silence until the reply's first datagram; the time
/// from the last frame of speech to it. Reads on to `tts stop`.
async fn spoken(d: &mut Device, speech: &[Vec<u8>], silence: &[u8]) -> Duration {
    d.publish(LISTEN_AUTO).await;
    let mut tick = tokio::time::interval(Duration::from_millis(60));
    for f in speech {
        tick.tick().await;
        d.send_audio(f).await;
    }
    let end = Instant::now();
    let mut b = vec![0u8; 4096];
    let first = loop {
        tokio::select! {
            r = d.udp.recv_from(&mut b) => {
                r.unwrap();
                break Instant::now();
            }
            _ = tick.tick() => d.send_audio(silence).await,
        }
    };
    until_stop(d).await;
    first - end
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

/// The WebSocket twin of [`spoken`].
async fn ws_spoken(ws: &mut Ws, speech: &[Vec<u8>], silence: &[u8]) -> Duration {
    ws.send(Message::text(LISTEN_AUTO)).await.unwrap();
    let mut tick = tokio::time::interval(Duration::from_millis(60));
    for f in speech {
        tick.tick().await;
        ws.send(Message::binary(f.clone())).await.unwrap();
    }
    let end = Instant::now();
    let mut first = None;
    loop {
        tokio::select! {
            m = ws.next() => match m.expect("open").expect("a frame") {
                Message::Binary(_) if first.is_none() => first = Some(Instant::now()),
                Message::Text(t) if t.as_str().contains(r#""state":"stop""#) => break,
                _ => {}
            },
            _ = tick.tick(), if first.is_none() => ws.send(Message::binary(silence.to_vec())).await.unwrap(),
        }
    }
    first.expect("audio before stop") - end
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
    let rounds: usize = std::env::var("CHELA_BENCH_SPOKEN").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let devices: usize = std::env::var("CHELA_BENCH_DEVICES").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
    let llm = FakeLlm::start(vec![Step::text("Sure. It is noon."); 2 * (iters + rounds) + 2]);
    let audio = FakeAudio::start("what time is it");
    let run = start(&llm, &audio, devices);
    let pid = run.daemon.pid();
    let local = IpAddr::V4(Ipv4Addr::LOCALHOST);

    // The MQTT talking device first, so its set-up is not counted as idle memory.
    let mut mq = connect(run.mqtt, local, devices, 240).await;
    mq.hello().await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 1. Idle devices.
    let before = proc_status(pid, "VmRSS:");
    let mut idle = Vec::with_capacity(devices);
    let started = Instant::now();
    for i in 0..devices {
        let from = IpAddr::V4(Ipv4Addr::new(127, 0, 1, u8::try_from(i / 60 + 1).unwrap()));
        let mut d = connect(run.mqtt, from, i, 60).await;
        d.hello().await;
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
                    d.send(&Packet::PingReq).await;
                    assert!(matches!(d.packet().await, Some(Packet::PingResp)));
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
        mq_typed.push(first_frame_then_stop(&mut mq).await - sent);
        let sent = Instant::now();
        ws.send(Message::text(detect)).await.unwrap();
        ws_typed.push(ws_first_frame_then_stop(&mut ws).await - sent);
    }
    show("MQTT+UDP typed utterance -> first downlink frame", &mut mq_typed);
    show("WebSocket typed utterance -> first downlink frame", &mut ws_typed);

    // 4. Spoken, at real time; the MQTT rounds' daemon CPU too.
    let mut pcm = vec![0i16; 16 * 300];
    let mut said = espeak_16k("What time is it?");
    // espeak-ng ends its clip with quiet; cut it so the last frame sent is the end of speech.
    let voiced = said.iter().rposition(|s| s.unsigned_abs() > 300).map_or(said.len(), |i| i + 1);
    said.truncate(voiced);
    pcm.extend(said);
    let speech = packets(&pcm);
    let (mut mq_spoken, mut ws_spoken_t) = (vec![], vec![]);
    let (mut ticks, mut wall) = (0, Duration::ZERO);
    for _ in 0..rounds {
        let (cpu0, t0) = (cpu_ticks(pid), Instant::now());
        mq_spoken.push(spoken(&mut mq, &speech, &silence).await);
        ticks += cpu_ticks(pid) - cpu0;
        wall += t0.elapsed();
        ws_spoken_t.push(ws_spoken(&mut ws, &speech, &silence).await);
    }
    show("MQTT+UDP spoken, last frame of speech -> first downlink frame (800 ms VAD silence included)", &mut mq_spoken);
    show(
        "WebSocket spoken, last frame of speech -> first downlink frame (800 ms VAD silence included)",
        &mut ws_spoken_t,
    );
    let per_minute = (ticks * 10) as f64 / (wall.as_secs_f64() / 60.0);
    println!(
        "xiaozhi_mqtt: daemon CPU while one MQTT device talks ({rounds} spoken rounds, {:.1} s): {} ms, \
         {per_minute:.0} ms per device-minute ({:.2}% of one core)",
        wall.as_secs_f64(),
        ticks * 10,
        per_minute / 600.0
    );
}
