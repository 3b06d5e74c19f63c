//! The voice pipeline's figures (issue 14 §6), with instant fake providers (the testkit's fake
//! OpenAI audio API on 127.0.0.1):
//! 1. server time from the end of speech (the VAD's decision) to the first downlink frame: ASR
//!    upload and answer, the reply's first sentence through TTS and Opus, the pacer;
//! 2. pacing jitter: how far each downlink frame leaves from its ideal time (p50/p99);
//! 3. CPU per device-minute: decoding a minute of uplink Opus with the VAD, and encoding a
//!    minute of downlink Opus;
//! 4. heap per idle pipeline (a counting allocator; 100 pipelines made at once).
//!
//! Run: `cargo bench -p chela --bench voice` (needs `espeak-ng` for the speech). Set
//! `CHELA_BENCH_ITERS` for the number of end-of-speech rounds (default 30).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use chela::net::{ClientOptions, HttpClient};
use chela::voice::opus::{Decoder, Encoder};
use chela::voice::pipeline::{Heard, Mode, Output, Pipeline, Providers};
use chela::voice::vad::Endpointer;
use chela::voice::{AsrConfig, TtsConfig, VoiceConfig, resample, wav};
use chela_testkit::audio::FakeAudio;

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

fn espeak_16k(text: &str) -> Vec<i16> {
    let out = std::process::Command::new("espeak-ng")
        .args(["--stdout", "-v", "en", text])
        .output()
        .expect("the voice bench needs espeak-ng (Debian: apt-get install espeak-ng)");
    let (rate, pcm) = wav::decode(&out.stdout).expect("espeak-ng's WAV");
    resample::resample(&pcm, rate, 16_000)
}

fn packets(pcm: &[i16]) -> Vec<Vec<u8>> {
    let mut enc = opus::Encoder::new(16_000, opus::Channels::Mono, opus::Application::Voip).unwrap();
    pcm.chunks(960)
        .map(|c| {
            let mut f = c.to_vec();
            f.resize(960, 0);
            enc.encode_vec(&f, 4000).unwrap()
        })
        .collect()
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

    // 1. End of speech → first downlink frame.
    let mut utterance = vec![0i16; 16 * 300];
    utterance.extend(espeak_16k("What is the weather like today?"));
    utterance.extend(vec![0i16; 16 * 1500]);
    let uplink = packets(&utterance);
    let mut latencies = Vec::new();
    rt.block_on(async {
        for _ in 0..iters {
            let mut p = Pipeline::new(providers.clone(), cfg.clone()).unwrap();
            p.handle_listen_start(Mode::Auto);
            let mut ended_at = None;
            for packet in &uplink {
                if p.handle_audio(packet).unwrap() == Heard::SpeechEnded {
                    ended_at = Some(Instant::now());
                    break;
                }
            }
            let ended_at = ended_at.expect("the VAD ends the utterance");
            let Output::Heard(_) = p.next_output().await else { panic!("no transcript") };
            // The instant "LLM": the reply's first sentence is there at once.
            let mut w = p.start_reply();
            w.push("It is sunny. ").await.unwrap();
            loop {
                if let Output::Frame(_) = p.next_output().await {
                    break;
                }
            }
            latencies.push(ended_at.elapsed());
            drop(w);
        }
    });
    latencies.sort();
    println!(
        "end of speech → first downlink frame ({iters} rounds, fake ASR+TTS on 127.0.0.1): p50 {} p99 {} max {}",
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
        ms(*latencies.last().unwrap())
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
        minute.extend(vec![0i16; 16 * 500]);
    }
    minute.truncate(16_000 * 60);
    let minute_packets = packets(&minute);
    let start = Instant::now();
    let mut dec = Decoder::new(16_000).unwrap();
    let mut ep = Endpointer::new(Duration::from_millis(800), Duration::from_secs(30));
    let mut utterances = 0;
    for p in &minute_packets {
        let pcm = dec.decode(p).unwrap();
        utterances += usize::from(ep.push(pcm).ended.is_some());
    }
    let uplink_cpu = start.elapsed();
    let down = resample::resample(&minute, 16_000, 24_000);
    let start = Instant::now();
    let mut enc = Encoder::new().unwrap();
    let mut n = 0;
    enc.push(&down, &mut |_| n += 1).unwrap();
    enc.finish(&mut |_| n += 1).unwrap();
    let downlink_cpu = start.elapsed();
    println!(
        "CPU per device-minute: uplink decode + VAD {} ({} utterances), downlink encode {} ({n} frames), total {} ({:.3}% of one core)",
        ms(uplink_cpu),
        utterances,
        ms(downlink_cpu),
        ms(uplink_cpu + downlink_cpu),
        (uplink_cpu + downlink_cpu).as_secs_f64() / 60.0 * 100.0
    );

    // 4. Heap per idle pipeline.
    rt.block_on(async {
        let before = LIVE.load(Ordering::Relaxed);
        let pipelines: Vec<Pipeline> =
            (0..100).map(|_| Pipeline::new(providers.clone(), cfg.clone()).unwrap()).collect();
        let after = LIVE.load(Ordering::Relaxed);
        println!("heap per idle pipeline: {:.1} KiB (100 made at once)", (after - before) as f64 / 100.0 / 1024.0);
        drop(pipelines);
    });
}
