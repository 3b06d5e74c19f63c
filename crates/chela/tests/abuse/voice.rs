//! Hostile input for the voice pipeline: a TTS server that streams forever, one that announces
//! 100 MB, one that stalls, a missing espeak-ng, garbage uplink packets, and a long stream of
//! speech that never pauses. Each ends in a bounded, clear error or a cut, never a hang or
//! unbounded memory.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use chela::net::{ClientOptions, HttpClient};
use chela::voice::pipeline::{Heard, Mode, Output, Pipeline, Providers};
use chela::voice::tts::{MAX_AUDIO_BYTES, Tts};
use chela::voice::{AsrConfig, TtsConfig, VoiceConfig, VoiceError, resample, wav};
use chela_testkit::audio::{FakeAudio, Hostile};

fn openai_tts(fake: &FakeAudio, timeout: Duration) -> Tts {
    let cfg = TtsConfig::OpenAi {
        base_url: fake.base_url(),
        api_key: String::new(),
        model: "tts-1".into(),
        voice: "alloy".into(),
        timeout,
    };
    Tts::new(HttpClient::new(ClientOptions::default()), cfg)
}

#[tokio::test]
async fn a_speech_stream_that_never_ends_is_cut_at_the_bound() {
    let fake = FakeAudio::start("x");
    fake.push_hostile(Hostile::Endless);
    let mut pcm = Vec::new();
    let e = openai_tts(&fake, Duration::from_secs(60)).speak("Hello.", &mut pcm).await.unwrap_err();
    assert!(matches!(e, VoiceError::TooLarge { limit: MAX_AUDIO_BYTES, .. }), "{e}");
    assert!(pcm.len() * 2 <= MAX_AUDIO_BYTES, "no more than the bound was kept");
    assert_eq!(e.spoken(), "Sorry, that answer was too long to speak.");
}

#[tokio::test]
async fn a_100_mb_answer_is_refused_before_it_is_read() {
    let fake = FakeAudio::start("x");
    fake.push_hostile(Hostile::Huge(100 * 1024 * 1024));
    let mut pcm = Vec::new();
    let started = Instant::now();
    let e = openai_tts(&fake, Duration::from_secs(60)).speak("Hello.", &mut pcm).await.unwrap_err();
    assert!(matches!(e, VoiceError::TooLarge { .. }), "{e}");
    assert!(pcm.is_empty());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_stalled_speech_answer_times_out() {
    let fake = FakeAudio::start("x");
    fake.push_hostile(Hostile::Stall(Duration::from_secs(30)));
    let mut pcm = Vec::new();
    let started = Instant::now();
    let e = openai_tts(&fake, Duration::from_secs(1)).speak("Hello.", &mut pcm).await.unwrap_err();
    assert!(matches!(e, VoiceError::Tts { .. }), "{e}");
    assert!(e.to_string().contains("within 1 s"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_missing_espeak_reaches_the_device_as_a_short_message() {
    let fake = FakeAudio::start("x");
    let asr = AsrConfig {
        base_url: fake.base_url(),
        api_key: String::new(),
        model: "m".into(),
        timeout: Duration::from_secs(5),
    };
    let tts = TtsConfig::Espeak {
        program: "/nonexistent/espeak-ng".into(),
        voice: "en".into(),
        timeout: Duration::from_secs(5),
    };
    let cfg = VoiceConfig::new(asr, tts);
    let http = HttpClient::new(ClientOptions::default());
    let mut p = Pipeline::new(Arc::new(Providers::new(&http, &cfg)), Arc::new(cfg)).unwrap();
    let mut w = p.start_reply();
    w.push("Hello there.").await.unwrap();
    w.finish().await.unwrap();
    let mut outs = Vec::new();
    loop {
        let o = tokio::time::timeout(Duration::from_secs(10), p.next_output()).await.expect("no hang");
        let stop = o == Output::TtsStop;
        outs.push(o);
        if stop {
            break;
        }
    }
    let problem = outs.iter().find_map(|o| match o {
        Output::Problem { spoken, error } => Some((*spoken, error.to_string())),
        _ => None,
    });
    let (spoken, detail) = problem.expect("a problem is reported");
    assert_eq!(spoken, "Sorry, I cannot speak right now.");
    assert!(detail.contains("apt-get install espeak-ng"), "{detail}");
}

fn espeak_16k(text: &str) -> Vec<i16> {
    let out = std::process::Command::new("espeak-ng")
        .args(["--stdout", "-v", "en", text])
        .output()
        .expect("the voice tests need espeak-ng (Debian: apt-get install espeak-ng)");
    let (rate, pcm) = wav::decode(&out.stdout).unwrap();
    resample::resample(&pcm, rate, 16_000)
}

#[tokio::test]
async fn garbage_and_a_long_unbroken_stream_stay_bounded() {
    let fake = FakeAudio::start("part");
    let asr = AsrConfig {
        base_url: fake.base_url(),
        api_key: String::new(),
        model: "m".into(),
        timeout: Duration::from_secs(5),
    };
    let tts = TtsConfig::Espeak { program: "espeak-ng".into(), voice: "en".into(), timeout: Duration::from_secs(5) };
    let mut cfg = VoiceConfig::new(asr, tts);
    cfg.max_utterance = Duration::from_secs(5);
    let http = HttpClient::new(ClientOptions::default());
    let mut p = Pipeline::new(Arc::new(Providers::new(&http, &cfg)), Arc::new(cfg)).unwrap();
    p.handle_listen_start(Mode::Realtime);

    // Garbage: random-looking bytes, truncated packets, a huge one. Each is refused alone.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for len in [1usize, 2, 3, 17, 200, 1275, 4000, 70_000] {
        let junk: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        // Some random bytes happen to be valid Opus; what matters is no panic and no state change.
        let _ = p.handle_audio(&junk);
    }

    // A minute of speech without a pause, as 60 ms Opus packets: cut every 5 s (the bound is the
    // same code whatever its length; an hour would only take longer).
    let words = espeak_16k("one two three four five six seven eight nine ten eleven twelve");
    let mut enc = chela::voice::opus::Encoder::device(16_000).unwrap();
    let mut stream = Vec::new();
    while stream.len() < 16_000 * 60 {
        stream.extend_from_slice(&words);
    }
    let mut heard = 0;
    for chunk in stream.chunks_exact(960) {
        let packet = enc.packets(chunk).unwrap().remove(0);
        if p.handle_audio(&packet).unwrap() == Heard::SpeechEnded {
            // Read the transcript before the next cut (a device sends a packet per 60 ms).
            let o = tokio::time::timeout(Duration::from_secs(10), p.next_output()).await.expect("no hang");
            assert_eq!(o, Output::Heard("part".into()));
            heard += 1;
        }
    }
    assert!(heard >= 10, "{heard} utterances in a minute of unbroken speech");
    for call in fake.calls() {
        // 5 s of 16 kHz s16 plus the WAV header and one detector frame.
        assert!(call.file_bytes.unwrap() <= 44 + 5 * 32_000 + 512, "{:?}", call.file_bytes);
    }
}
