//! The pipeline end to end against the fake OpenAI audio API (real HTTP on 127.0.0.1) and
//! espeak-ng speech; pacing with tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use chela_testkit::audio::{FakeAudio, Hostile, MS_PER_CHAR};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};

use super::pacer::FRAME;
use super::pipeline::{EAR_IDLE, Heard, Mode, Output, Pipeline, Providers};
use super::{AsrConfig, TtsConfig, VoiceConfig, VoiceError};
use crate::testing::espeak_16k;
use chela_net::{ClientOptions, HttpClient};

fn config(fake: &FakeAudio) -> VoiceConfig {
    let asr = AsrConfig {
        base_url: fake.base_url(),
        api_key: "sk-test".into(),
        model: "whisper-1".into(),
        timeout: Duration::from_secs(5),
    };
    let tts = TtsConfig::OpenAi {
        base_url: fake.base_url(),
        api_key: "sk-test".into(),
        model: "tts-1".into(),
        voice: "alloy".into(),
        timeout: Duration::from_secs(5),
    };
    VoiceConfig::new(asr, tts)
}

fn pipeline(cfg: VoiceConfig) -> Pipeline {
    let http = HttpClient::new(ClientOptions::default());
    Pipeline::new(Arc::new(Providers::new(&http, &cfg)), Arc::new(cfg)).unwrap()
}

/// Outputs until `TtsStop` (included), with the time each came.
async fn until_stop(p: &mut Pipeline) -> Vec<(Output, Instant)> {
    let mut out = Vec::new();
    loop {
        let o = timeout(Duration::from_secs(20), p.next_output()).await.expect("an output");
        let stop = o == Output::TtsStop;
        out.push((o, Instant::now()));
        if stop {
            return out;
        }
    }
}

fn frames(out: &[(Output, Instant)]) -> usize {
    out.iter().filter(|(o, _)| matches!(o, Output::Frame(_))).count()
}

#[tokio::test]
async fn a_typed_utterance_and_a_spoken_reply_in_order() {
    let fake = FakeAudio::start("unused");
    fake.require_key("sk-test");
    let mut p = pipeline(config(&fake));
    p.handle_detect("hello");
    assert_eq!(p.next_output().await, Output::Heard("hello".into()));
    let mut w = p.start_reply();
    let writer = tokio::spawn(async move {
        for delta in ["Hello the", "re. How are", " you?"] {
            w.push(delta).await.unwrap();
        }
        w.finish().await.unwrap();
    });
    let out = until_stop(&mut p).await;
    writer.await.unwrap();
    let kinds: Vec<&Output> = out.iter().map(|(o, _)| o).filter(|o| !matches!(o, Output::Frame(_))).collect();
    assert_eq!(
        kinds,
        [
            &Output::TtsStart,
            &Output::SentenceStart("Hello there.".into()),
            &Output::SentenceStart("How are you?".into()),
            &Output::TtsStop
        ]
    );
    // 12 characters each → 600 ms of tone → 10 frames each.
    assert_eq!(frames(&out), 2 * (12 * MS_PER_CHAR as usize / 60));
    // Real-time pacing: 20 frames with a 5-frame burst take at least 15 frame times.
    let first = out.iter().find(|(o, _)| matches!(o, Output::Frame(_))).unwrap().1;
    let last = out.iter().rev().find(|(o, _)| matches!(o, Output::Frame(_))).unwrap().1;
    assert!(last - first >= FRAME * 14, "{:?}", last - first);
    let calls = fake.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].fields["response_format"], "pcm");
    assert_eq!(calls[0].fields["voice"], "alloy");
}

/// Opus packets of `pcm` (16 kHz), 60 ms each, as the device sends them.
fn opus_packets(pcm: &[i16]) -> Vec<Vec<u8>> {
    let mut enc = super::opus::Encoder::device(16_000).unwrap();
    enc.packets(pcm).unwrap().into_iter().map(Vec::from).collect()
}

#[tokio::test]
async fn spoken_speech_then_silence_is_recognised() {
    let fake = FakeAudio::start("what time is it");
    let mut p = pipeline(config(&fake));
    p.handle_listen_start(Mode::Auto);
    let mut pcm = vec![0i16; 16 * 300];
    pcm.extend(espeak_16k("What time is it?"));
    pcm.extend(vec![0i16; 16 * 1500]);
    let mut ended = 0;
    let mut started = 0;
    for packet in opus_packets(&pcm) {
        match p.handle_audio(&packet).unwrap() {
            Heard::SpeechEnded => ended += 1,
            Heard::SpeechStarted => started += 1,
            Heard::Nothing => {}
        }
    }
    assert_eq!((started, ended), (1, 1));
    let heard = timeout(Duration::from_secs(10), p.next_output()).await.unwrap();
    assert_eq!(heard, Output::Heard("what time is it".into()));
    let call = &fake.calls()[0];
    assert_eq!(call.path, "/v1/audio/transcriptions");
    assert!(call.file_is_wav);
    assert_eq!(call.fields["model"], "whisper-1");
    assert_eq!(call.fields["response_format"], "json");
    // About the speech's length (16 kHz s16 = 32 bytes per ms), not the silence around it.
    let ms = call.file_bytes.unwrap() / 32;
    assert!((500..3000).contains(&ms), "{ms} ms uploaded");
}

#[tokio::test]
async fn manual_mode_ends_at_listen_stop() {
    let fake = FakeAudio::start("turn on the light");
    let mut p = pipeline(config(&fake));
    p.handle_listen_start(Mode::Manual);
    for packet in opus_packets(&espeak_16k("Turn on the light.")) {
        assert_eq!(p.handle_audio(&packet).unwrap(), Heard::Nothing);
    }
    p.handle_listen_stop();
    let heard = timeout(Duration::from_secs(10), p.next_output()).await.unwrap();
    assert_eq!(heard, Output::Heard("turn on the light".into()));
}

#[tokio::test]
async fn provider_errors_become_short_messages() {
    let fake = FakeAudio::start("x");
    let mut p = pipeline(config(&fake));
    fake.fail_next_transcription(500);
    p.handle_listen_start(Mode::Manual);
    for packet in opus_packets(&espeak_16k("Hello.")) {
        p.handle_audio(&packet).unwrap();
    }
    p.handle_listen_stop();
    let out = timeout(Duration::from_secs(10), p.next_output()).await.unwrap();
    let Output::Problem { spoken, error } = out else { panic!("{out:?}") };
    assert_eq!(spoken, "Sorry, speech recognition is not working right now.");
    assert!(matches!(error, VoiceError::Asr { retryable: true, .. }), "{error}");

    fake.push_hostile(Hostile::Status(503));
    let mut w = p.start_reply();
    w.push("Hello there.").await.unwrap();
    w.finish().await.unwrap();
    let out: Vec<Output> = until_stop(&mut p).await.into_iter().map(|(o, _)| o).collect();
    assert_eq!(out[0], Output::TtsStart);
    assert_eq!(out[1], Output::SentenceStart("Hello there.".into()));
    assert!(matches!(&out[2], Output::Problem { spoken: "Sorry, I cannot speak right now.", .. }), "{:?}", out[2]);
    assert_eq!(out[3..], [Output::TtsStop]);
}

#[tokio::test]
async fn abort_drops_queued_audio_and_cancels_the_writer() {
    let fake = FakeAudio::start("x");
    let mut p = pipeline(config(&fake));
    let mut w = p.start_reply();
    // Ten seconds of speech: far more than the frame queue holds.
    w.push(&format!("{}. ", "word ".repeat(40))).await.unwrap();
    let mut got = Vec::new();
    while got.iter().filter(|o| matches!(o, Output::Frame(_))).count() < 8 {
        got.push(timeout(Duration::from_secs(5), p.next_output()).await.unwrap());
    }
    p.handle_abort();
    assert!(!p.speaking());
    assert_eq!(p.next_output().await, Output::TtsStop);
    // Nothing more: the queued frames are gone.
    assert!(timeout(Duration::from_millis(300), p.next_output()).await.is_err());
    // The turn learns the reply is gone (the channel closes once the speaker task is aborted).
    let mut closed = false;
    for _ in 0..20 {
        if w.push("More text. ").await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(closed);
}

#[tokio::test]
async fn garbage_packets_are_refused_and_listening_goes_on() {
    let fake = FakeAudio::start("still here");
    let mut p = pipeline(config(&fake));
    p.handle_listen_start(Mode::Manual);
    for garbage in [&b""[..], &[0xFF, 0xFF, 0x01], &[0u8; 5000][..]] {
        assert!(matches!(p.handle_audio(garbage), Err(VoiceError::BadAudio(_))));
    }
    for packet in opus_packets(&espeak_16k("Still here.")) {
        p.handle_audio(&packet).unwrap();
    }
    p.handle_listen_stop();
    assert_eq!(timeout(Duration::from_secs(10), p.next_output()).await.unwrap(), Output::Heard("still here".into()));
}

#[tokio::test]
async fn a_new_utterance_cancels_the_reply() {
    let fake = FakeAudio::start("x");
    let mut p = pipeline(config(&fake));
    let mut w = p.start_reply();
    w.push(&format!("{}. ", "word ".repeat(40))).await.unwrap();
    assert_eq!(timeout(Duration::from_secs(5), p.next_output()).await.unwrap(), Output::TtsStart);
    p.handle_detect("stop talking");
    assert_eq!(p.next_output().await, Output::TtsStop);
    assert_eq!(p.next_output().await, Output::Heard("stop talking".into()));
}

#[tokio::test(start_paused = true)]
async fn the_decoder_and_vad_exist_only_while_audio_comes() {
    let fake = FakeAudio::start("x");
    let mut p = pipeline(config(&fake));
    assert!(!p.listening_state(), "no decoder or VAD at hello");
    p.handle_listen_start(Mode::Auto);
    assert!(!p.listening_state(), "nor at listen start, before any audio");
    let silence = opus_packets(&vec![0i16; 16 * 600]);
    p.handle_audio(&silence[0]).unwrap();
    assert!(p.listening_state());
    assert!(timeout(EAR_IDLE - Duration::from_millis(60), p.next_output()).await.is_err());
    assert!(p.listening_state(), "kept while audio may still come");
    assert!(timeout(Duration::from_millis(120), p.next_output()).await.is_err());
    assert!(!p.listening_state(), "dropped after EAR_IDLE without audio and no speech going on");
    p.handle_audio(&silence[1]).unwrap();
    assert!(p.listening_state(), "made again by the next packet");
    p.handle_listen_stop();
    assert!(!p.listening_state(), "dropped at listen stop");
    // A push-to-talk utterance in progress is never dropped for being quiet.
    p.handle_listen_start(Mode::Manual);
    p.handle_audio(&silence[2]).unwrap();
    assert!(timeout(EAR_IDLE * 3, p.next_output()).await.is_err());
    assert!(p.listening_state(), "an utterance in progress keeps what it heard");
}

#[tokio::test(start_paused = true)]
async fn pacing_with_a_paused_clock() {
    // The espeak provider is never called: frames are fed straight into the reply.
    let fake = FakeAudio::start("x");
    let mut p = pipeline(config(&fake));
    let (tx, rx) = mpsc::channel(64);
    p.start_reply_from(rx);
    let t0 = Instant::now();
    tx.send(super::pipeline::test_frame(Some("One."))).await.unwrap();
    for _ in 0..30 {
        tx.send(super::pipeline::test_frame(None)).await.unwrap();
    }
    tx.send(super::pipeline::test_end()).await.unwrap();
    let out = until_stop(&mut p).await;
    assert_eq!(out[0].0, Output::TtsStart);
    assert_eq!(out[1].0, Output::SentenceStart("One.".into()));
    let times: Vec<Duration> =
        out.iter().filter(|(o, _)| matches!(o, Output::Frame(_))).map(|(_, t)| *t - t0).collect();
    assert_eq!(times.len(), 30);
    for (k, t) in times.iter().enumerate() {
        let due = FRAME * (k.saturating_sub(4) as u32);
        assert_eq!(*t, due, "frame {k}");
    }
    // Stop comes when the device has played the last frame: the last went at 25 frame times
    // with 4 more queued before it, so the queue runs dry at 30.
    assert_eq!(out.last().unwrap().1 - t0, FRAME * 30);

    // Abort mid-reply: no frame after it, and stop at once.
    let (tx, rx) = mpsc::channel(64);
    p.start_reply_from(rx);
    for _ in 0..30 {
        tx.send(super::pipeline::test_frame(None)).await.unwrap();
    }
    let mut n = 0;
    while n < 12 {
        if let Output::Frame(_) = p.next_output().await {
            n += 1;
        }
    }
    let at = Instant::now();
    p.handle_abort();
    assert_eq!(p.next_output().await, Output::TtsStop);
    assert_eq!(Instant::now(), at, "stop is immediate");
    assert!(tx.is_closed(), "the queued frames were dropped");
}
