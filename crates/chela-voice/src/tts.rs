//! Speech synthesis: an OpenAI-compatible `POST {base}/audio/speech` client and the local
//! `espeak-ng`. Both deliver 24 kHz mono PCM to a [`PcmSink`] as it becomes available.
//!
//! OpenAI-compatible: `{"model","input","voice","response_format":"pcm"}`; the answer is raw
//! 24 kHz s16le, streamed, handed on piece by piece so the first frame leaves before the last
//! byte arrives. A `wav` answer (some servers ignore the format asked for) is recognised by its
//! `RIFF` header and decoded whole. espeak-ng: the text goes on standard input (never on the
//! command line, so a reply can't pass options), the WAV comes back on `--stdout` at 22.05 kHz
//! and is resampled. Bounds: [`MAX_AUDIO_BYTES`] of audio per sentence, the configured timeout
//! per sentence, and [`MAX_INPUT_BYTES`] of text. Dropping the future kills espeak-ng and closes
//! the HTTP connection (that is how `abort` cancels).

use std::future::Future;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use hyper::http::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::resample::Resampler;
use super::{DOWNLINK_RATE, TtsConfig, VoiceError, wav};
use chela_net::{Guard, HttpClient, NetError, Request};

/// Two minutes of 24 kHz s16 mono, far beyond one sentence: a server that sends more is broken.
pub const MAX_AUDIO_BYTES: usize = 2 * 60 * 24_000 * 2;
/// OpenAI's own limit on `input`.
pub const MAX_INPUT_BYTES: usize = 4096;
/// Longest wait for the next piece of a streamed answer.
const IDLE: Duration = Duration::from_secs(10);

/// Where synthesized PCM goes. `push` may wait (a full downlink queue); it fails once the
/// listener is gone (the reply was aborted), which stops the synthesis.
pub trait PcmSink: Send {
    fn push(&mut self, pcm: &[i16]) -> impl Future<Output = Result<(), Closed>> + Send;
}

/// The sink's reader went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// A sink that keeps everything (tests and benchmarks).
impl PcmSink for Vec<i16> {
    async fn push(&mut self, pcm: &[i16]) -> Result<(), Closed> {
        self.extend_from_slice(pcm);
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct Tts {
    http: HttpClient,
    cfg: TtsConfig,
}

impl Tts {
    pub fn new(http: HttpClient, cfg: TtsConfig) -> Tts {
        Tts { http, cfg }
    }

    /// Speaks `text` into `sink` at 24 kHz. `Ok` also when the sink closed (nobody listens).
    pub async fn speak(&self, text: &str, sink: &mut impl PcmSink) -> Result<(), VoiceError> {
        let text = clip(text);
        let timeout = match &self.cfg {
            TtsConfig::OpenAi { timeout, .. } | TtsConfig::Espeak { timeout, .. } => *timeout,
        };
        let work = async {
            match &self.cfg {
                TtsConfig::OpenAi { base_url, api_key, model, voice, .. } => {
                    self.openai(text, OpenAi { base_url, api_key, model, voice, timeout }, sink).await
                }
                TtsConfig::Espeak { program, voice, .. } => espeak(program, voice, text, sink).await,
            }
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(Err(VoiceError::Tts { reason })) if reason == CLOSED => Ok(()),
            Ok(r) => r,
            Err(_) => Err(VoiceError::Tts { reason: format!("no complete audio within {} s", timeout.as_secs_f32()) }),
        }
    }

    async fn openai(&self, text: &str, o: OpenAi<'_>, sink: &mut impl PcmSink) -> Result<(), VoiceError> {
        let body = serde_json::json!({"model": o.model, "input": text, "voice": o.voice, "response_format": "pcm"});
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if !o.api_key.is_empty() {
            headers.push(("authorization".to_owned(), format!("Bearer {}", o.api_key)));
        }
        let req = Request {
            method: Method::POST,
            url: format!("{}/audio/speech", o.base_url.trim_end_matches('/')),
            headers,
            body: Bytes::from(body.to_string()),
            timeout: o.timeout,
            guard: Guard::AllowAll,
        };
        let mut resp = self.http.send(req).await.map_err(net)?;
        if resp.status != 200 {
            let status = resp.status;
            let body = resp.bytes_truncated(4096, IDLE).await.map(|(b, _)| b).unwrap_or_default();
            let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
            let message = json
                .as_ref()
                .and_then(|j| j["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
            return Err(VoiceError::Tts { reason: format!("the provider answered {status}: {message}") });
        }
        let length = resp.headers.get("content-length").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if length.is_some_and(|l| l > MAX_AUDIO_BYTES as u64) {
            return Err(VoiceError::TooLarge { what: "the speech answer", limit: MAX_AUDIO_BYTES });
        }
        let mut got = 0usize;
        let mut odd: Option<u8> = None;
        let mut wav_body: Option<Vec<u8>> = None;
        let mut pcm = Vec::new();
        while let Some(piece) = resp.chunk(IDLE).await.map_err(net)? {
            got += piece.len();
            if got > MAX_AUDIO_BYTES {
                return Err(VoiceError::TooLarge { what: "the speech answer", limit: MAX_AUDIO_BYTES });
            }
            if got == piece.len() && piece.starts_with(b"RIFF") {
                wav_body = Some(Vec::new());
            }
            if let Some(w) = &mut wav_body {
                w.extend_from_slice(&piece);
                continue;
            }
            pcm.clear();
            let mut bytes = &piece[..];
            if let Some(first) = odd.take() {
                pcm.push(i16::from_le_bytes([first, bytes[0]]));
                bytes = &bytes[1..];
            }
            let mut pairs = bytes.chunks_exact(2);
            pcm.extend(pairs.by_ref().map(|p| i16::from_le_bytes([p[0], p[1]])));
            odd = pairs.remainder().first().copied();
            sink.push(&pcm).await.map_err(|_| closed())?;
        }
        if let Some(w) = wav_body {
            let (rate, pcm) = wav::decode(&w)?;
            push_at(rate, &pcm, sink).await?;
        }
        Ok(())
    }
}

struct OpenAi<'a> {
    base_url: &'a str,
    api_key: &'a str,
    model: &'a str,
    voice: &'a str,
    timeout: Duration,
}

/// The marker reason for "the sink closed", turned back into `Ok` by `speak`.
const CLOSED: &str = "the listener went away";

fn closed() -> VoiceError {
    VoiceError::Tts { reason: CLOSED.into() }
}

fn net(e: NetError) -> VoiceError {
    VoiceError::Tts { reason: e.to_string() }
}

/// At most `MAX_INPUT_BYTES`, cut at a character boundary.
fn clip(text: &str) -> &str {
    if text.len() <= MAX_INPUT_BYTES {
        return text;
    }
    let mut end = MAX_INPUT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Hands `pcm` at `rate` to the sink at 24 kHz, in 60 ms pieces so a full sink applies back-pressure early.
async fn push_at(rate: u32, pcm: &[i16], sink: &mut impl PcmSink) -> Result<(), VoiceError> {
    let mut resampler = Resampler::new(rate, DOWNLINK_RATE);
    let mut out = Vec::new();
    for piece in pcm.chunks(rate as usize * 60 / 1000) {
        out.clear();
        resampler.process(piece, &mut out);
        sink.push(&out).await.map_err(|_| closed())?;
    }
    Ok(())
}

async fn espeak(program: &std::path::Path, voice: &str, text: &str, sink: &mut impl PcmSink) -> Result<(), VoiceError> {
    let mut child = tokio::process::Command::new(program)
        .args(["--stdout", "-v", voice])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Dropped on cancel (abort, timeout): the process goes with it.
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| VoiceError::EspeakMissing { program: program.display().to_string(), reason: e.to_string() })?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(VoiceError::Tts { reason: "espeak-ng's pipes were not opened".into() });
    };
    // espeak-ng reads its text to the end of input; the text is small, so one write suffices.
    stdin.write_all(text.as_bytes()).await.map_err(|e| VoiceError::Tts { reason: format!("espeak-ng: {e}") })?;
    drop(stdin);
    let mut audio = Vec::new();
    // One byte past the limit tells "too much" from "exactly the limit".
    stdout
        .take(MAX_AUDIO_BYTES as u64 + 1)
        .read_to_end(&mut audio)
        .await
        .map_err(|e| VoiceError::Tts { reason: format!("reading espeak-ng: {e}") })?;
    if audio.len() > MAX_AUDIO_BYTES {
        return Err(VoiceError::TooLarge { what: "espeak-ng's audio", limit: MAX_AUDIO_BYTES });
    }
    let status = child.wait().await.map_err(|e| VoiceError::Tts { reason: format!("espeak-ng: {e}") })?;
    if !status.success() {
        return Err(VoiceError::Tts {
            reason: format!("espeak-ng exited with {status} (is the voice `{voice}` installed?)"),
        });
    }
    let (rate, pcm) = wav::decode(&audio)?;
    push_at(rate, &pcm, sink).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn espeak_cfg(program: &str) -> TtsConfig {
        TtsConfig::Espeak { program: program.into(), voice: "en".into(), timeout: Duration::from_secs(20) }
    }

    fn client(cfg: TtsConfig) -> Tts {
        Tts::new(HttpClient::new(chela_net::ClientOptions::default()), cfg)
    }

    #[tokio::test]
    async fn espeak_speaks_at_24k() {
        let mut pcm = Vec::new();
        client(espeak_cfg("espeak-ng")).speak("Hello from Chela.", &mut pcm).await.unwrap();
        // About a second of speech, at 24 kHz, and not silence.
        assert!(pcm.len() > 12_000 && pcm.len() < 24_000 * 4, "{} samples", pcm.len());
        assert!(pcm.iter().any(|s| s.unsigned_abs() > 1000));
    }

    #[tokio::test]
    async fn text_that_looks_like_options_is_spoken_not_obeyed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("pwned.wav");
        let mut pcm = Vec::new();
        let text = format!("-w {} --stdout", target.display());
        client(espeak_cfg("espeak-ng")).speak(&text, &mut pcm).await.unwrap();
        assert!(!target.exists());
        assert!(!pcm.is_empty());
    }

    #[tokio::test]
    async fn a_missing_espeak_is_a_clear_error() {
        let mut pcm = Vec::new();
        let e = client(espeak_cfg("/nonexistent/espeak-ng")).speak("Hi.", &mut pcm).await.unwrap_err();
        assert!(matches!(e, VoiceError::EspeakMissing { .. }));
        assert!(e.to_string().contains("apt-get install espeak-ng"), "{e}");
        assert_eq!(e.spoken(), "Sorry, I cannot speak right now.");
    }

    #[test]
    fn long_input_is_clipped_at_a_char_boundary() {
        let text = "é".repeat(3000);
        let c = clip(&text);
        assert!(c.len() <= MAX_INPUT_BYTES && c.len() >= MAX_INPUT_BYTES - 1);
    }
}
