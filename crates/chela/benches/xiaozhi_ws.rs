//! The xiaozhi conversation's figures through the real `chela run` and its
//! `/xiaozhi/v1/` endpoint, with instant fakes (the scripted fake LLM, the testkit's fake
//! OpenAI audio API), everything on 127.0.0.1:
//! 1. memory per connected idle device: the daemon's RSS (`/proc/PID/status` VmRSS) before and
//!    after 100 devices connected at once and said hello, divided by 100;
//! 2. time to the first downlink audio frame, measured at the device: from a typed utterance
//!    (`listen detect`, no VAD/ASR), and from the last uplink frame of spoken espeak-ng speech
//!    plus silence in `auto` mode (the frames go out at once, so the VAD's end of speech falls
//!    just before that moment: an upper bound of end of speech → first frame).
//!
//! Run: `cargo bench -p chela --bench xiaozhi_ws` (needs `espeak-ng`). `CHELA_BENCH_ITERS` sets
//! the rounds of each latency (default 20).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use chela_testkit::audio::FakeAudio;
use chela_testkit::daemon::Running;
use chela_testkit::xiaozhi_mqtt::{Approved, voice_daemon};
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

#[path = "common/speech.rs"]
mod speech;
use speech::{espeak_16k, packets};

const DEVICES: usize = 100;
const CLIENT: &str = "3f1c2a4e-4444-4000-8000-000000000001";
const HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;

fn mac(i: usize) -> String {
    format!("aa:bb:cc:dd:{:02x}:{:02x}", i / 256, i % 256)
}

fn token(i: usize) -> String {
    format!("bench-token-{i}")
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

struct Run {
    daemon: Running,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
    _home: tempfile::TempDir,
}

fn start(llm: &FakeLlm, audio: &FakeAudio) -> Run {
    let devices: Vec<_> =
        (0..=DEVICES).map(|i| Approved { mac: mac(i), client: CLIENT.into(), token: token(i) }).collect();
    let (daemon, dir, home) =
        voice_daemon(env!("CARGO_BIN_EXE_chela"), &llm.anthropic_base_url(), &audio.base_url(), &devices, &[]);
    let addr = daemon.addr();
    Run { daemon, addr, _dir: dir, _home: home }
}

type Ws = WebSocketStream<TcpStream>;

async fn hello(addr: SocketAddr, i: usize) -> Ws {
    let mut req = format!("ws://{addr}/xiaozhi/v1/").into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("Authorization", format!("Bearer {}", token(i)).parse().unwrap());
    h.insert("Device-Id", mac(i).parse().unwrap());
    h.insert("Client-Id", CLIENT.parse().unwrap());
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(req, stream).await.unwrap();
    ws.send(Message::text(HELLO)).await.unwrap();
    loop {
        if let Some(Ok(Message::Text(_))) = ws.next().await {
            return ws;
        }
    }
}

/// Waits for the first audio frame, then reads to `tts stop`; the time of that first frame.
async fn first_frame_then_stop(ws: &mut Ws) -> Instant {
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
    v[(v.len() * p / 100).min(v.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let iters: usize = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let llm = FakeLlm::start(vec![Step::text("Sure. It is noon."); 2 * iters + 2]);
    let audio = FakeAudio::start("what time is it");
    let run = start(&llm, &audio);
    let pid = run.daemon.pid();

    // Memory per idle device.
    let mut warm = hello(run.addr, DEVICES).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let mut conns = Vec::new();
    for i in 0..DEVICES {
        conns.push(hello(run.addr, i).await);
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = rss_kib(pid);
    let per = (after.saturating_sub(before)) as f64 / DEVICES as f64;
    println!("xiaozhi_ws: RSS before {before} KiB, with {DEVICES} idle devices {after} KiB: {per:.1} KiB per device");
    drop(conns);

    // Typed utterance → first downlink frame.
    let mut typed = Vec::new();
    for _ in 0..iters {
        let sent = Instant::now();
        warm.send(Message::text(r#"{"type":"listen","state":"detect","text":"what time is it"}"#)).await.unwrap();
        typed.push(first_frame_then_stop(&mut warm).await - sent);
    }
    // Spoken utterance (auto mode) → first downlink frame.
    let mut pcm = vec![0i16; 16 * 300];
    pcm.extend(espeak_16k("What time is it?"));
    pcm.extend(vec![0i16; 16 * 900]);
    let frames = packets(&pcm);
    let mut spoken = Vec::new();
    for _ in 0..iters {
        warm.send(Message::text(r#"{"type":"listen","state":"start","mode":"auto"}"#)).await.unwrap();
        for f in &frames {
            warm.send(Message::binary(f.clone())).await.unwrap();
        }
        let last = Instant::now();
        spoken.push(first_frame_then_stop(&mut warm).await - last);
    }
    println!(
        "xiaozhi_ws: typed utterance -> first downlink frame: p50 {:?} p90 {:?} max {:?} ({iters} rounds)",
        pct(&mut typed, 50),
        pct(&mut typed, 90),
        pct(&mut typed, 100)
    );
    println!(
        "xiaozhi_ws: last uplink frame of speech (auto, VAD + ASR) -> first downlink frame: p50 {:?} p90 {:?} max {:?} ({iters} rounds)",
        pct(&mut spoken, 50),
        pct(&mut spoken, 90),
        pct(&mut spoken, 100)
    );
}
