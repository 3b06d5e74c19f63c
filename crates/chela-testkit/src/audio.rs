//! [`FakeAudio`]: a fake OpenAI audio API on 127.0.0.1, for the voice pipeline's tests.
//!
//! What it is: `POST /v1/audio/transcriptions` (a `multipart/form-data` upload with `file`,
//! `model` and `response_format`, as in OpenAI's API reference) answering `{"text": …}` with the
//! transcript the test set, and `POST /v1/audio/speech` (JSON `model`, `input`, `voice`,
//! `response_format`) answering real audio: a 440 Hz tone, [`MS_PER_CHAR`] per character of
//! `input`, as `pcm` (raw 24 kHz s16le, streamed in 60 ms chunks) or `wav`. Other formats
//! (mp3, opus, aac, flac) get OpenAI's 400 error shape, since the fake carries no encoders. A
//! `Bearer` key is checked when one was set. Each request is recorded (path, form fields, the
//! uploaded file's size and whether it is a WAV, the JSON body).
//!
//! The next speech answers can be made hostile ([`Hostile`]): an error status, a body that never
//! ends, a huge `Content-Length`, a stall.
//!
//! What it is not: a recogniser or a synthesiser. The transcript is whatever the test set,
//! whatever the audio said. The formats are written from OpenAI's API reference and checked
//! against the `openai` Python SDK (`crates/chela/tests/e2e/voice_fake.rs`); they share no code with Chela.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::body::ReplyBody;
use crate::running::Running;

/// Length of the tone per character of speech input.
pub const MS_PER_CHAR: u32 = 50;
/// The speech rate of `pcm` and `wav` answers.
pub const SPEECH_RATE: u32 = 24_000;
/// OpenAI's upload limit for transcriptions.
const MAX_UPLOAD: usize = 25 * 1024 * 1024;
const MAX_RECORDED: usize = 1000;

/// How the next speech answer misbehaves (each used once, in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hostile {
    /// This status with OpenAI's error JSON.
    Status(u16),
    /// 200 and PCM that never ends.
    Endless,
    /// 200 with `Content-Length` of this many bytes; the bytes are sent lazily (as many as the
    /// client reads).
    Huge(u64),
    /// Headers, then nothing, for this long.
    Stall(Duration),
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct AudioCall {
    pub path: String,
    /// Form fields (transcriptions) or the JSON body (speech).
    pub fields: Value,
    /// The uploaded file's length in bytes, for transcriptions.
    pub file_bytes: Option<usize>,
    /// Whether the upload starts like a RIFF/WAVE file.
    pub file_is_wav: bool,
}

#[derive(Default)]
struct State {
    transcripts: VecDeque<String>,
    default_transcript: String,
    hostile: VecDeque<Hostile>,
    asr_status: VecDeque<u16>,
    calls: VecDeque<AudioCall>,
    key: Option<String>,
    chunk_gap_ms: u64,
    asr_delay: Duration,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running fake. Dropping it stops the server and every connection.
#[derive(Debug)]
pub struct FakeAudio {
    server: Running<Mutex<State>>,
}

impl FakeAudio {
    /// Starts on `127.0.0.1:0`; every transcription answers `transcript` until others are queued.
    ///
    /// # Panics
    /// If no port can be bound or the runtime cannot start.
    pub fn start(transcript: &str) -> FakeAudio {
        FakeAudio::try_start(transcript, 0)
            .unwrap_or_else(|e| panic!("chela-testkit: cannot start the fake audio API on 127.0.0.1: {e}"))
    }

    pub fn try_start(transcript: &str, port: u16) -> io::Result<FakeAudio> {
        let state = Mutex::new(State { default_transcript: transcript.into(), ..State::default() });
        Ok(FakeAudio { server: Running::start("chela-fake-audio", port, state, serve)? })
    }

    /// `http://127.0.0.1:PORT/v1`, what `voice.asr_base_url` / `voice.tts_base_url` are set to.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.addr())
    }

    /// Requests must carry `Authorization: Bearer KEY` from now on.
    pub fn require_key(&self, key: &str) {
        lock(self.server.shared()).key = Some(key.into());
    }

    /// The next transcriptions answer these, in order (then the default again).
    pub fn push_transcript(&self, text: &str) {
        lock(self.server.shared()).transcripts.push_back(text.into());
    }

    /// The next transcription answers this error status.
    pub fn fail_next_transcription(&self, status: u16) {
        lock(self.server.shared()).asr_status.push_back(status);
    }

    /// Every transcription waits this long before answering.
    pub fn set_transcription_delay(&self, delay: Duration) {
        lock(self.server.shared()).asr_delay = delay;
    }

    /// The next speech answer misbehaves.
    pub fn push_hostile(&self, h: Hostile) {
        lock(self.server.shared()).hostile.push_back(h);
    }

    /// Pause between the 60 ms chunks of a streamed `pcm` answer (0: as fast as possible).
    pub fn set_chunk_gap_ms(&self, ms: u64) {
        lock(self.server.shared()).chunk_gap_ms = ms;
    }

    pub fn calls(&self) -> Vec<AudioCall> {
        lock(self.server.shared()).calls.iter().cloned().collect()
    }
}

async fn serve(listener: TcpListener, state: Arc<Mutex<State>>, stop: oneshot::Receiver<()>) {
    crate::accept::serve_http1(listener, stop, move |req| handle(req, Arc::clone(&state)), || ()).await;
}

fn error(status: u16, message: &str, kind: &str) -> Response<ReplyBody> {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    let mut resp = Response::new(ReplyBody::full(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn record(state: &Mutex<State>, call: AudioCall) {
    let mut st = lock(state);
    if st.calls.len() >= MAX_RECORDED {
        st.calls.pop_front();
    }
    st.calls.push_back(call);
}

async fn handle(req: Request<Incoming>, state: Arc<Mutex<State>>) -> Result<Response<ReplyBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let key = lock(&state).key.clone();
    if let Some(key) = key {
        let given = parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
        if given != format!("Bearer {key}") {
            return Ok(error(401, "Incorrect API key provided.", "invalid_request_error"));
        }
    }
    if parts.method != hyper::Method::POST {
        return Ok(error(405, "Method not allowed.", "invalid_request_error"));
    }
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let Ok(bytes) = Limited::new(body, MAX_UPLOAD).collect().await.map(|b| b.to_bytes()) else {
        return Ok(error(413, "Maximum content size limit exceeded.", "invalid_request_error"));
    };
    Ok(match parts.uri.path() {
        "/v1/audio/transcriptions" => transcription(&state, &content_type, &bytes).await,
        "/v1/audio/speech" => speech(&state, &bytes),
        path => error(404, &format!("Invalid URL (POST {path})"), "invalid_request_error"),
    })
}

async fn transcription(state: &Mutex<State>, content_type: &str, body: &[u8]) -> Response<ReplyBody> {
    let Some(boundary) = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .filter(|_| content_type.trim_start().starts_with("multipart/form-data"))
    else {
        return error(400, "Expected a multipart/form-data body.", "invalid_request_error");
    };
    let mut fields = serde_json::Map::new();
    let mut file: Option<Vec<u8>> = None;
    for (name, filename, data) in multipart(body, boundary.trim_matches('"')) {
        if name == "file" && filename.is_some() {
            file = Some(data);
        } else {
            fields.insert(name, Value::String(String::from_utf8_lossy(&data).into_owned()));
        }
    }
    let file_bytes = file.as_ref().map(Vec::len);
    let file_is_wav = file.as_ref().is_some_and(|f| f.len() >= 12 && &f[..4] == b"RIFF" && &f[8..12] == b"WAVE");
    let format = fields.get("response_format").and_then(Value::as_str).unwrap_or("json").to_owned();
    let has_model = fields.contains_key("model");
    record(
        state,
        AudioCall { path: "/v1/audio/transcriptions".into(), fields: Value::Object(fields), file_bytes, file_is_wav },
    );
    if file.is_none() {
        return error(400, "Missing required parameter: 'file'.", "invalid_request_error");
    }
    if !has_model {
        return error(400, "Missing required parameter: 'model'.", "invalid_request_error");
    }
    if !file_is_wav {
        return error(400, "Invalid file format.", "invalid_request_error");
    }
    let (status, text, delay) = {
        let mut st = lock(state);
        let text = st.transcripts.pop_front().unwrap_or_else(|| st.default_transcript.clone());
        (st.asr_status.pop_front(), text, st.asr_delay)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(status) = status {
        return error(status, "The server had an error while processing your request.", "server_error");
    }
    let (body, mime) = match format.as_str() {
        "json" => (json!({"text": text}).to_string(), "application/json"),
        "verbose_json" => (
            json!({"task": "transcribe", "language": "english", "duration": 1.0, "text": text, "segments": []})
                .to_string(),
            "application/json",
        ),
        "text" => (text, "text/plain"),
        other => return error(400, &format!("Unsupported response_format: {other}"), "invalid_request_error"),
    };
    let mut resp = Response::new(ReplyBody::full(body));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    resp
}

/// `len` samples of a 440 Hz tone starting at sample `from`, as s16le bytes.
fn tone_bytes(from: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len as usize * 2);
    for i in from..from + len {
        let s = ((i as f64 * 440.0 * std::f64::consts::TAU / f64::from(SPEECH_RATE)).sin() * 8000.0) as i16;
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

fn speech(state: &Mutex<State>, body: &[u8]) -> Response<ReplyBody> {
    let json: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => return error(400, "We could not parse the JSON body of your request.", "invalid_request_error"),
    };
    record(
        state,
        AudioCall { path: "/v1/audio/speech".into(), fields: json.clone(), file_bytes: None, file_is_wav: false },
    );
    for required in ["model", "input", "voice"] {
        if !json[required].is_string() {
            return error(400, &format!("Missing required parameter: '{required}'."), "invalid_request_error");
        }
    }
    let input = json["input"].as_str().unwrap_or("");
    if input.chars().count() > 4096 {
        return error(400, "'input' is too long: at most 4096 characters.", "invalid_request_error");
    }
    let format = json["response_format"].as_str().unwrap_or("mp3");
    let (hostile, gap) = {
        let mut st = lock(state);
        (st.hostile.pop_front(), st.chunk_gap_ms)
    };
    let chunk = u64::from(SPEECH_RATE) * 60 / 1000;
    let mut resp = match hostile {
        Some(Hostile::Status(status)) => return error(status, "The server is overloaded.", "server_error"),
        Some(Hostile::Endless) => {
            let mut at = 0;
            Response::new(ReplyBody::lazy(
                std::iter::from_fn(move || {
                    at += chunk;
                    Some(Bytes::from(tone_bytes(at - chunk, chunk)))
                }),
                gap,
            ))
        }
        Some(Hostile::Huge(len)) => {
            let mut left = len;
            let mut resp = Response::new(ReplyBody::lazy(
                std::iter::from_fn(move || {
                    let n = left.min(64 * 1024);
                    left -= n;
                    (n > 0).then(|| Bytes::from(vec![0u8; n as usize]))
                }),
                0,
            ));
            resp.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            resp
        }
        Some(Hostile::Stall(d)) => Response::new(ReplyBody::lazy(
            std::iter::once(Bytes::new()).chain(std::iter::once(Bytes::from(tone_bytes(0, 10)))),
            d.as_millis() as u64,
        )),
        None => {
            let samples = u64::from(SPEECH_RATE) * u64::from(MS_PER_CHAR) * input.chars().count() as u64 / 1000;
            match format {
                "pcm" => {
                    let frames = (0..samples)
                        .step_by(chunk as usize)
                        .map(|at| Bytes::from(tone_bytes(at, chunk.min(samples - at))));
                    Response::new(ReplyBody::events(frames.collect(), gap))
                }
                "wav" => Response::new(ReplyBody::full(wav(&tone_bytes(0, samples)))),
                other => {
                    return error(
                        400,
                        &format!("The fake audio API serves response_format pcm and wav, not {other}."),
                        "invalid_request_error",
                    );
                }
            }
        }
    };
    let mime = if format == "wav" { "audio/wav" } else { "audio/pcm" };
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    resp
}

fn wav(pcm: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(44 + pcm.len());
    let len = pcm.len() as u32;
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    for v in [1u16, 1] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [SPEECH_RATE, SPEECH_RATE * 2] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [2u16, 16] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(b"data");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(pcm);
    out
}

/// The parts of a multipart body: (name, filename, data).
fn multipart(body: &[u8], boundary: &str) -> Vec<(String, Option<String>, Vec<u8>)> {
    let delim = format!("\r\n--{boundary}");
    // The first delimiter has no CRLF before it; add one so every part is found the same way.
    let mut framed = b"\r\n".to_vec();
    framed.extend_from_slice(body);
    let find = |hay: &[u8], from: usize| {
        hay[from..].windows(delim.len()).position(|w| w == delim.as_bytes()).map(|p| p + from)
    };
    let mut parts = Vec::new();
    let mut at = match find(&framed, 0) {
        Some(p) => p + delim.len(),
        None => return parts,
    };
    while let Some(next) = find(&framed, at) {
        let part = &framed[at..next];
        at = next + delim.len();
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let Some(split) = part.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&part[..split]);
        let Some(disposition) = head.lines().find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))
        else {
            continue;
        };
        let attr = |name: &str| {
            disposition
                .split(';')
                .find_map(|p| p.trim().strip_prefix(name)?.strip_prefix('=').map(|v| v.trim_matches('"').to_owned()))
        };
        let Some(name) = attr("name") else { continue };
        parts.push((name, attr("filename"), part[split + 4..].to_vec()));
        if framed[at..].starts_with(b"--") {
            break;
        }
    }
    parts
}
