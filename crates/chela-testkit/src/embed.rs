//! [`FakeEmbeddings`]: a deterministic OpenAI embeddings API on 127.0.0.1, for the memory
//! index's semantic search.
//!
//! What it is: `POST /v1/embeddings` with OpenAI's JSON body (`model`, `input` as a string or an
//! array of strings, `encoding_format` `float` or `base64`), answered in OpenAI's list shape
//! (`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[…]}],"model":…,
//! "usage":{…}}`) and its error shape (`{"error":{"message","type","param","code"}}`) for a
//! wrong key, a missing model, an empty or too long input list, an empty string. The vector of a
//! text is its hashed character trigrams (each word padded with a space on both sides, lower
//! case; in Chinese, Japanese and Korean text its characters and character pairs),
//! [`DIMENSIONS`] of them, scaled to length 1: texts that share spellings are near, so a
//! misspelled or reworded query that keeps parts of the words finds its fact. The same text
//! always has the same vector, whatever the model name.
//!
//! The next answers can be made hostile ([`Hostile`]): an error status, a `NaN`, values no
//! `f32` holds, a vector of another length, fewer items than inputs, a body that never ends, a
//! stall. Every request is recorded (model, the inputs).
//!
//! What it is not: a language model. Meaning is only as near as spelling. The format is written
//! from OpenAI's API reference and shares no code with Chela.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::body::ReplyBody;
use crate::running::Running;

/// Length of every vector.
pub const DIMENSIONS: usize = 256;
/// OpenAI's limit on the inputs of one request.
pub const MAX_INPUTS: usize = 2048;
const MAX_BODY: usize = 32 * 1024 * 1024;
const MAX_RECORDED: usize = 10_000;

/// How the next answer misbehaves (each used once, in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hostile {
    /// This status with OpenAI's error JSON.
    Status(u16),
    /// The first vector's first value is the bare word `NaN`.
    NaN,
    /// The first vector's first value is `1e39`, beyond `f32`.
    Huge,
    /// The first vector has this many values instead of [`DIMENSIONS`].
    Dimensions(usize),
    /// One item fewer than the inputs.
    Fewer,
    /// 200, then JSON that never ends.
    Endless,
    /// Nothing at all for this long, then the answer.
    Stall(Duration),
}

/// One request as the fake saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbedCall {
    pub model: String,
    pub inputs: Vec<String>,
}

#[derive(Default)]
struct State {
    hostile: VecDeque<Hostile>,
    calls: VecDeque<EmbedCall>,
    key: Option<String>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running fake. Dropping it stops the server and every connection.
#[derive(Debug)]
pub struct FakeEmbeddings {
    server: Running<Mutex<State>>,
}

impl FakeEmbeddings {
    /// Starts on `127.0.0.1:0`.
    ///
    /// # Panics
    /// If no port can be bound or the runtime cannot start.
    pub fn start() -> FakeEmbeddings {
        FakeEmbeddings::try_start(0)
            .unwrap_or_else(|e| panic!("chela-testkit: cannot start the fake embeddings API on 127.0.0.1: {e}"))
    }

    pub fn try_start(port: u16) -> io::Result<FakeEmbeddings> {
        let serve = |listener, state: Arc<Mutex<State>>, stopped| {
            crate::accept::serve_http1(listener, stopped, move |req| handle(req, Arc::clone(&state)), || ())
        };
        Ok(FakeEmbeddings { server: Running::start("chela-fake-embed", port, Mutex::default(), serve)? })
    }

    /// `http://127.0.0.1:PORT/v1`, what `memory.embeddings_url` is set to.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.addr())
    }

    /// Requests must carry `Authorization: Bearer KEY` from now on.
    pub fn require_key(&self, key: &str) {
        lock(self.server.shared()).key = Some(key.into());
    }

    /// The next answer misbehaves.
    pub fn push_hostile(&self, h: Hostile) {
        lock(self.server.shared()).hostile.push_back(h);
    }

    /// The requests so far, oldest first (the last [`MAX_RECORDED`]).
    pub fn calls(&self) -> Vec<EmbedCall> {
        lock(self.server.shared()).calls.iter().cloned().collect()
    }

    /// Every input embedded so far, in order.
    pub fn inputs(&self) -> Vec<String> {
        lock(self.server.shared()).calls.iter().flat_map(|c| c.inputs.iter().cloned()).collect()
    }
}

/// The vector the fake gives `text`: hashed character trigrams, length 1 (all zero for a text
/// without a letter or digit).
pub fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIMENSIONS];
    let lower = text.to_lowercase();
    let mut add = |gram: &[char]| {
        // FNV-1a: stable across Rust versions, unlike the standard hasher.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for c in gram {
            for b in (*c as u32).to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[(h % DIMENSIONS as u64) as usize] += sign;
    };
    for word in lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let chars: Vec<char> = word.chars().collect();
        if chars.iter().any(|c| is_cjk(*c)) {
            // Chinese and Japanese are written without spaces and a word is one to three
            // characters: single characters and pairs play the part of an alphabet's trigrams.
            chars.iter().for_each(|c| add(std::slice::from_ref(c)));
            chars.windows(2).for_each(&mut add);
        } else {
            let padded: Vec<char> = std::iter::once(' ').chain(chars).chain(std::iter::once(' ')).collect();
            padded.windows(3).for_each(&mut add);
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// The CJK ideographs, kana and hangul.
fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30ff | 0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xac00..=0xd7af | 0xf900..=0xfaff)
}

fn error(status: u16, message: &str, kind: &str, code: Option<&str>) -> Response<ReplyBody> {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    let mut resp = Response::new(ReplyBody::full(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn invalid_input() -> Response<ReplyBody> {
    error(
        400,
        "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.",
        "invalid_request_error",
        None,
    )
}

async fn handle(req: Request<Incoming>, state: Arc<Mutex<State>>) -> Result<Response<ReplyBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let key = lock(&state).key.clone();
    if let Some(key) = key {
        let given = parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
        if given != format!("Bearer {key}") {
            return Ok(error(401, "Incorrect API key provided.", "invalid_request_error", Some("invalid_api_key")));
        }
    }
    if parts.method != hyper::Method::POST || parts.uri.path() != "/v1/embeddings" {
        let msg = format!("Invalid URL ({} {})", parts.method, parts.uri.path());
        return Ok(error(404, &msg, "invalid_request_error", None));
    }
    let Ok(bytes) = Limited::new(body, MAX_BODY).collect().await.map(|b| b.to_bytes()) else {
        return Ok(error(413, "Maximum content size limit exceeded.", "invalid_request_error", None));
    };
    let json: Value = match serde_json::from_slice(&bytes) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            let msg = "We could not parse the JSON body of your request.";
            return Ok(error(400, msg, "invalid_request_error", None));
        }
    };
    let Some(model) = json["model"].as_str().filter(|m| !m.is_empty()) else {
        return Ok(error(400, "you must provide a model parameter", "invalid_request_error", None));
    };
    let inputs: Vec<String> = match &json["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) if !items.is_empty() && items.len() <= MAX_INPUTS => {
            match items.iter().map(|i| i.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>() {
                Some(list) => list,
                None => return Ok(invalid_input()),
            }
        }
        _ => return Ok(invalid_input()),
    };
    if inputs.iter().any(String::is_empty) {
        return Ok(invalid_input());
    }
    let base64 = match json.get("encoding_format").and_then(Value::as_str).unwrap_or("float") {
        "float" => false,
        "base64" => true,
        other => {
            let msg = format!("Invalid value for 'encoding_format': {other}. Expected float or base64.");
            return Ok(error(400, &msg, "invalid_request_error", None));
        }
    };
    let hostile = {
        let mut st = lock(&state);
        if st.calls.len() >= MAX_RECORDED {
            st.calls.pop_front();
        }
        st.calls.push_back(EmbedCall { model: model.to_owned(), inputs: inputs.clone() });
        st.hostile.pop_front()
    };
    Ok(answer(model, &inputs, base64, hostile).await)
}

async fn answer(model: &str, inputs: &[String], base64: bool, hostile: Option<Hostile>) -> Response<ReplyBody> {
    let mut vectors: Vec<Vec<f32>> = inputs.iter().map(|t| vector(t)).collect();
    let mut first_value: Option<&str> = None;
    match hostile {
        Some(Hostile::Status(status)) => {
            return error(status, "The server had an error while processing your request.", "server_error", None);
        }
        Some(Hostile::Stall(d)) => tokio::time::sleep(d).await,
        Some(Hostile::Endless) => {
            let head = Bytes::from_static(
                b"{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,\"embedding\":[0.5",
            );
            let more = std::iter::once(head).chain(std::iter::repeat_with(|| Bytes::from_static(b",0.5")));
            let mut resp = Response::new(ReplyBody::lazy(more, 0));
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return resp;
        }
        Some(Hostile::Dimensions(n)) => vectors[0].resize(n, 0.1),
        Some(Hostile::Fewer) => {
            vectors.pop();
        }
        Some(Hostile::NaN) => first_value = Some("NaN"),
        Some(Hostile::Huge) => first_value = Some("1e39"),
        None => {}
    }
    let tokens: usize = inputs.iter().map(|t| t.split_whitespace().count().max(1)).sum();
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let embedding = if base64 {
                let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::String(base64::engine::general_purpose::STANDARD.encode(raw))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let mut body =
        json!({"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
            .to_string();
    if let Some(bad) = first_value {
        // JSON has no NaN and serde_json writes no 1e39 for an f32: the bad value is put in the
        // text by hand, as a careless server would write it.
        let at = body.find("\"embedding\":[").map(|i| i + "\"embedding\":[".len());
        if let Some(at) = at {
            let end = body[at..].find([',', ']']).map_or(at, |e| at + e);
            body.replace_range(at..end, bad);
        }
    }
    let mut resp = Response::new(ReplyBody::full(body));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_has_the_same_unit_vector_and_spellings_are_near() {
        let a = vector("The dentist appointment is on Thursday");
        assert_eq!(a, vector("The dentist appointment is on Thursday"));
        assert!((a.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f32>();
        let near = dot(&a, &vector("dentsit apointment thursdy"));
        let far = dot(&a, &vector("green kiwi needle"));
        assert!(near > far + 0.2, "near {near}, far {far}");
        assert!(vector("!!!").iter().all(|x| *x == 0.0));
        let tea = vector("我每天早上喝绿茶");
        let (near, far) = (dot(&tea, &vector("绿茶")), dot(&tea, &vector("护照号码")));
        assert!(near > far + 0.2, "near {near}, far {far}");
    }
}
