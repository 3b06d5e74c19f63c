//! The voice pipeline's figures, with instant fake providers (the testkit's fake
//! OpenAI audio API on 127.0.0.1):
//! 1. server time from the end of speech (the VAD's decision) to the first downlink frame: ASR
//!    upload and answer, the reply's first sentence through TTS and Opus, the pacer. Each round
//!    is followed by the providers' own time for the same work, taken by a bare HTTP/1.1 client
//!    on one keep-alive connection per provider (the same upload size, the same sentence, up to
//!    the first 60 ms of speech); the difference is what Chela adds (target ≤ 20 ms);
//! 2. pacing jitter: how far each downlink frame leaves from its ideal time (p50/p99);
//! 3. CPU per device-minute: the thread's CPU time (not wall time) to decode a minute of
//!    uplink Opus through the VAD, and to encode a minute of downlink Opus;
//! 4. memory per idle pipeline, 100 made at once: the Rust heap (a counting allocator) and all
//!    of malloc (glibc's `mallinfo2`, which would also see a C library's allocations).
//!
//! Run: `cargo bench -p chela --bench voice` (needs `espeak-ng` for the speech). Set
//! `CHELA_BENCH_ITERS` for the number of end-of-speech rounds (default 30).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use chela::net::{ClientOptions, HttpClient};
use chela::voice::opus::{Decoder, Encoder};
use chela::voice::pipeline::{Heard, Mode, Output, Pipeline, Providers};
use chela::voice::vad::Endpointer;
use chela::voice::{AsrConfig, TtsConfig, VoiceConfig, resample, wav};
use chela_testkit::audio::FakeAudio;

#[path = "common/speech.rs"]
mod speech;
use speech::{espeak_16k, packets};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator, only counting bytes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// CPU time of the calling thread (user + system).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Bytes malloc has handed out and not taken back (every arena, mmapped chunks included).
fn malloc_in_use() -> isize {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    #[allow(unsafe_code)]
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as isize
}

/// A bare HTTP/1.1 client on one keep-alive connection: the providers' own time, with as
/// little client in it as can be.
struct Bare {
    conn: TcpStream,
    host: String,
    buf: Vec<u8>,
}

impl Bare {
    fn connect(base_url: &str) -> Bare {
        let host = base_url.trim_start_matches("http://").split('/').next().unwrap().to_owned();
        let conn = TcpStream::connect(&host).expect("connect to the fake audio API");
        conn.set_nodelay(true).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Bare { conn, host, buf: Vec::new() }
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.conn.read(&mut chunk).expect("read from the fake audio API");
        assert!(n > 0, "the fake audio API closed the connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return line;
            }
            self.fill();
        }
    }

    /// POSTs and reads the whole answer; returns the time until the head and the first
    /// `first_bytes` of the body had arrived, and the time until the end.
    fn post(&mut self, path: &str, content_type: &str, body: &[u8], first_bytes: usize) -> (Duration, Duration) {
        let t0 = Instant::now();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        self.conn.write_all(head.as_bytes()).unwrap();
        self.conn.write_all(body).unwrap();
        let status = self.line();
        assert!(status.starts_with("HTTP/1.1 200"), "the fake audio API answered {status}");
        let (mut length, mut chunked) = (None, false);
        loop {
            let l = self.line().to_ascii_lowercase();
            if l.is_empty() {
                break;
            }
            if let Some(v) = l.strip_prefix("content-length:") {
                length = v.trim().parse::<usize>().ok();
            }
            chunked |= l.starts_with("transfer-encoding:") && l.contains("chunked");
        }
        let mut got = 0usize;
        let mut first = None;
        let seen = |got: usize, first: &mut Option<Duration>| {
            if first.is_none() && got >= first_bytes {
                *first = Some(t0.elapsed());
            }
        };
        if let Some(n) = length {
            while self.buf.len() < n {
                self.fill();
                seen(self.buf.len().min(n), &mut first);
            }
            self.buf.drain(..n);
            seen(n.max(first_bytes), &mut first);
        } else {
            assert!(chunked, "an answer with neither a length nor chunks");
            loop {
                let size = usize::from_str_radix(self.line().split(';').next().unwrap().trim(), 16).unwrap();
                if size == 0 {
                    assert!(self.line().is_empty(), "trailers after the last chunk");
                    break;
                }
                while self.buf.len() < size + 2 {
                    self.fill();
                }
                self.buf.drain(..size + 2);
                got += size;
                seen(got, &mut first);
            }
        }
        let total = t0.elapsed();
        (first.unwrap_or(total), total)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn config(fake: &FakeAudio) -> VoiceConfig {
    let asr = AsrConfig {
        base_url: fake.base_url(),
        api_key: String::new(),
        model: "whisper-1".into(),
        timeout: Duration::from_secs(10),
    };
    let tts = TtsConfig::OpenAi {
        base_url: fake.base_url(),
        api_key: String::new(),
        model: "tts-1".into(),
        voice: "alloy".into(),
        timeout: Duration::from_secs(10),
    };
    VoiceConfig::new(asr, tts)
}

fn main() {
    let iters: usize = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let fake = FakeAudio::start("what is the weather");
    let cfg = config(&fake);
    let http = HttpClient::new(ClientOptions::default());
    let providers = Arc::new(Providers::new(&http, &cfg));
    let cfg = Arc::new(cfg);

    // 1. End of speech → first downlink frame, and the providers' own time for the same work.
    let mut utterance = vec![0i16; 16 * 300];
    utterance.extend(espeak_16k("What is the weather like today?"));
    utterance.extend(vec![0i16; 16 * 1500]);
    let uplink = packets(&utterance);
    let sentence = "It is sunny. ";
    let mut asr_bare = Bare::connect(&fake.base_url());
    let mut tts_bare = Bare::connect(&fake.base_url());
    let speech_body =
        serde_json::json!({"model": "tts-1", "input": sentence.trim(), "voice": "alloy", "response_format": "pcm"})
            .to_string();
    // The first downlink frame is 60 ms of 24 kHz s16 speech.
    let first_frame_bytes = chela::voice::DOWNLINK_FRAME_SAMPLES * 2;
    let (mut totals, mut providers_time, mut added, mut cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..iters + 3 {
        let (total, on_cpu) = rt.block_on(async {
            let mut p = Pipeline::new(providers.clone(), cfg.clone()).unwrap();
            p.handle_listen_start(Mode::Auto);
            let mut ended_at = None;
            for packet in &uplink {
                if p.handle_audio(packet).unwrap() == Heard::SpeechEnded {
                    ended_at = Some((Instant::now(), thread_cpu()));
                    break;
                }
            }
            let (ended_at, cpu_at) = ended_at.expect("the VAD ends the utterance");
            let Output::Heard(_) = p.next_output().await else { panic!("no transcript") };
            // The instant "LLM": the reply's first sentence is there at once.
            let mut w = p.start_reply();
            w.push(sentence).await.unwrap();
            // The whole pipeline runs on this thread (the fakes have their own): its CPU time
            // over the window is Chela's work on the path, whatever the machine's load.
            let total = loop {
                if let Output::Frame(_) = p.next_output().await {
                    break (ended_at.elapsed(), thread_cpu() - cpu_at);
                }
            };
            // Play the reply out, as a conversation would, so its connection goes back to the pool.
            w.finish().await.unwrap();
            while p.next_output().await != Output::TtsStop {}
            total
        });
        // The providers alone: the same upload (its size as the fake recorded it), the same sentence.
        let uploaded = fake
            .calls()
            .iter()
            .rev()
            .find_map(|c| c.file_bytes.filter(|_| c.path == "/v1/audio/transcriptions"))
            .expect("the pipeline's upload");
        let samples = (uploaded.saturating_sub(44) / 2).min(utterance.len());
        let file = wav::encode(&utterance[..samples], 16_000);
        let (content_type, form) =
            chela::voice::asr::multipart(&[("model", "whisper-1"), ("response_format", "json")], &file);
        let (_, asr) = asr_bare.post("/v1/audio/transcriptions", &content_type, &form, 0);
        let (tts_first, _) =
            tts_bare.post("/v1/audio/speech", "application/json", speech_body.as_bytes(), first_frame_bytes);
        // The first rounds warm both clients' connections and the caches.
        if round >= 3 {
            totals.push(total);
            providers_time.push(asr + tts_first);
            added.push(total.saturating_sub(asr + tts_first));
            cpu.push(on_cpu);
        }
    }
    for v in [&mut totals, &mut providers_time, &mut added, &mut cpu] {
        v.sort();
    }
    println!("end of speech → first downlink frame ({iters} rounds, fake ASR+TTS on 127.0.0.1):");
    println!(
        "  server time                      p50 {} p99 {} max {}",
        ms(percentile(&totals, 0.5)),
        ms(percentile(&totals, 0.99)),
        ms(*totals.last().unwrap())
    );
    println!(
        "  providers' own (ASR + TTS first) p50 {} p99 {} max {}",
        ms(percentile(&providers_time, 0.5)),
        ms(percentile(&providers_time, 0.99)),
        ms(*providers_time.last().unwrap())
    );
    let verdict = if percentile(&added, 0.99) <= Duration::from_millis(20) { "PASS" } else { "FAIL" };
    println!(
        "  added by chela                   p50 {} p99 {} max {}   target p99 ≤ 20 ms: {verdict}",
        ms(percentile(&added, 0.5)),
        ms(percentile(&added, 0.99)),
        ms(*added.last().unwrap())
    );
    println!(
        "  chela's CPU time on that path    p50 {} p99 {} max {}",
        ms(percentile(&cpu, 0.5)),
        ms(percentile(&cpu, 0.99)),
        ms(*cpu.last().unwrap())
    );

    // 2. Pacing jitter over a 30 s reply.
    let mut deviations = Vec::new();
    rt.block_on(async {
        let mut p = Pipeline::new(providers.clone(), cfg.clone()).unwrap();
        let mut w = p.start_reply();
        // 30 s of tone at 50 ms per character: 600 characters in sentences of 60.
        let text = format!("{}. ", "a".repeat(59)).repeat(10);
        let writer = tokio::spawn(async move {
            w.push(&text).await.unwrap();
            w.finish().await.unwrap();
        });
        let mut sent = Vec::new();
        loop {
            match p.next_output().await {
                Output::Frame(_) => sent.push(Instant::now()),
                Output::TtsStop => break,
                _ => {}
            }
        }
        writer.await.unwrap();
        let t0 = sent[0];
        for (k, at) in sent.iter().enumerate() {
            let ideal = t0 + Duration::from_millis(60 * k.saturating_sub(4) as u64);
            deviations.push(if *at > ideal { *at - ideal } else { ideal - *at });
        }
    });
    deviations.sort();
    println!(
        "pacing jitter ({} frames of a 30 s reply): p50 {} p99 {} max {}",
        deviations.len(),
        ms(percentile(&deviations, 0.5)),
        ms(percentile(&deviations, 0.99)),
        ms(*deviations.last().unwrap())
    );

    // 3. CPU per device-minute.
    let speech = espeak_16k("The quick brown fox jumps over the lazy dog, and then it rests for a while.");
    let mut minute = Vec::with_capacity(16_000 * 60);
    while minute.len() < 16_000 * 60 {
        minute.extend_from_slice(&speech);
        minute.extend(vec![0i16; 16 * 1000]);
    }
    minute.truncate(16_000 * 60);
    let minute_packets = packets(&minute);
    let down = resample::resample(&minute, 16_000, 24_000);
    // Best of three: the machine is shared, and CPU time still grows with cache misses and
    // preemption.
    let (mut uplink_cpu, mut downlink_cpu) = (Duration::MAX, Duration::MAX);
    let (mut utterances, mut n, mut bytes) = (0, 0, 0);
    for _ in 0..3 {
        let start = thread_cpu();
        let mut dec = Decoder::new(16_000).unwrap();
        let mut ep = Endpointer::new(cfg.silence, cfg.max_utterance);
        ep.start_auto(cfg.silence);
        utterances = 0;
        for p in &minute_packets {
            let pcm = dec.decode(p).unwrap();
            utterances += usize::from(ep.push(pcm).ended.is_some());
        }
        uplink_cpu = uplink_cpu.min(thread_cpu() - start);
        let start = thread_cpu();
        let mut enc = Encoder::new().unwrap();
        (n, bytes) = (0, 0);
        let mut count = |p: bytes::Bytes| (n, bytes) = (n + 1, bytes + p.len());
        enc.push(&down, &mut count).unwrap();
        enc.finish(&mut count).unwrap();
        downlink_cpu = downlink_cpu.min(thread_cpu() - start);
    }
    assert!(utterances > 0, "the VAD heard none of the minute's sentences");
    println!(
        "CPU per device-minute (thread CPU time, best of 3): uplink decode + VAD {} ({} utterances), downlink encode {} ({n} frames, {:.1} kb/s), total {} ({:.3}% of one core)",
        ms(uplink_cpu),
        utterances,
        ms(downlink_cpu),
        bytes as f64 * 8.0 / 60.0 / 1000.0,
        ms(uplink_cpu + downlink_cpu),
        (uplink_cpu + downlink_cpu).as_secs_f64() / 60.0 * 100.0
    );

    // 4. Memory per idle pipeline.
    rt.block_on(async {
        let (heap0, malloc0) = (LIVE.load(Ordering::Relaxed), malloc_in_use());
        let pipelines: Vec<Pipeline> =
            (0..100).map(|_| Pipeline::new(providers.clone(), cfg.clone()).unwrap()).collect();
        let (heap1, malloc1) = (LIVE.load(Ordering::Relaxed), malloc_in_use());
        let per_malloc = (malloc1 - malloc0) as f64 / 100.0 / 1024.0;
        let verdict = if per_malloc <= 256.0 { "PASS" } else { "FAIL" };
        println!(
            "memory per idle pipeline (100 made at once): Rust heap {:.1} KiB, all of malloc {per_malloc:.1} KiB   target ≤ 256 KiB per idle device: {verdict} for the pipeline's share",
            (heap1 - heap0) as f64 / 100.0 / 1024.0
        );
        drop(pipelines);
    });
}
