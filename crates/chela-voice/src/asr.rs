//! Speech recognition through an OpenAI-compatible `POST {base}/audio/transcriptions`
//! (OpenAI, Groq, SiliconFlow, the OpenAI-compatible modes of FunASR and faster-whisper servers):
//! a multipart form with the utterance as a WAV `file`, `model` and `response_format=json`;
//! the answer is `{"text": "…"}`.
//!
//! Bounded: the answer is read up to [`MAX_ANSWER_BYTES`], and the whole exchange up to the
//! configured timeout. Errors say what happened for the log; [`super::VoiceError::spoken`] gives
//! the device its short sentence.

use bytes::Bytes;
use hyper::http::Method;

use super::{AsrConfig, UPLINK_RATE, VoiceError, wav};
use chela_net::{Guard, HttpClient, NetError, Request};

/// A transcription is a few sentences; a larger answer is not one.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

#[derive(Clone, Debug)]
pub struct AsrClient {
    http: HttpClient,
    cfg: AsrConfig,
}

impl AsrClient {
    pub fn new(http: HttpClient, cfg: AsrConfig) -> AsrClient {
        AsrClient { http, cfg }
    }

    /// The text said in `pcm` (16 kHz mono); empty when the provider heard nothing.
    pub async fn transcribe(&self, pcm: &[i16]) -> Result<String, VoiceError> {
        let file = wav::encode(pcm, UPLINK_RATE);
        let (content_type, body) = multipart(&[("model", &self.cfg.model), ("response_format", "json")], &file);
        let mut headers = vec![("content-type".to_owned(), content_type)];
        if !self.cfg.api_key.is_empty() {
            headers.push(("authorization".to_owned(), format!("Bearer {}", self.cfg.api_key)));
        }
        let req = Request {
            method: Method::POST,
            url: format!("{}/audio/transcriptions", self.cfg.base_url.trim_end_matches('/')),
            headers,
            body: Bytes::from(body),
            timeout: self.cfg.timeout,
            // A configured endpoint, often a model server on the LAN.
            guard: Guard::AllowAll,
        };
        let exchange = async {
            let resp = self.http.send(req).await.map_err(net)?;
            let status = resp.status;
            let body = resp.bytes(MAX_ANSWER_BYTES, self.cfg.timeout).await.map_err(|e| match e {
                NetError::BodyTooLarge { limit } => VoiceError::TooLarge { what: "the transcription answer", limit },
                e => net(e),
            })?;
            answer(status, &body)
        };
        tokio::time::timeout(self.cfg.timeout, exchange).await.unwrap_or_else(|_| {
            Err(VoiceError::Asr {
                reason: format!("no complete answer within {} s", self.cfg.timeout.as_secs_f32()),
                retryable: true,
            })
        })
    }
}

fn net(e: NetError) -> VoiceError {
    VoiceError::Asr { retryable: e.is_retryable(), reason: e.to_string() }
}

/// The text of a 200 answer, or the provider's own error message.
fn answer(status: u16, body: &[u8]) -> Result<String, VoiceError> {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    if status != 200 {
        let message = json
            .as_ref()
            .and_then(|j| j["error"]["message"].as_str().or_else(|| j["detail"].as_str()).map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
        return Err(VoiceError::Asr {
            reason: format!("the provider answered {status}: {message}"),
            retryable: status == 429 || status >= 500,
        });
    }
    match json.as_ref().and_then(|j| j["text"].as_str()) {
        Some(text) => Ok(text.trim().to_owned()),
        None => Err(VoiceError::Asr { reason: "the answer has no \"text\" string".into(), retryable: false }),
    }
}

/// A `multipart/form-data` body with text `fields` and the WAV as `file`; returns the content
/// type (with its boundary) and the body.
pub fn multipart(fields: &[(&str, &str)], wav: &[u8]) -> (String, Vec<u8>) {
    // The boundary must not occur in the audio; a counter makes a new one in the unlikely case.
    let mut n = 0u32;
    let boundary = loop {
        let b = format!("chela-voice-{n:08x}-boundary");
        if !wav.windows(b.len()).any(|w| w == b.as_bytes()) {
            break b;
        }
        n += 1;
    };
    let mut body = Vec::with_capacity(wav.len() + 512);
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"speech.wav\"\r\nContent-Type: audio/wav\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(wav);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_map_to_text_or_errors() {
        assert_eq!(answer(200, br#"{"text":" hello "}"#).unwrap(), "hello");
        let e = answer(401, br#"{"error":{"message":"Incorrect API key provided"}}"#).unwrap_err();
        assert!(e.to_string().contains("401: Incorrect API key"), "{e}");
        assert!(matches!(answer(503, b"busy"), Err(VoiceError::Asr { retryable: true, .. })));
        assert!(matches!(answer(200, b"<html>"), Err(VoiceError::Asr { retryable: false, .. })));
        assert_eq!(e.spoken(), "Sorry, speech recognition is not working right now.");
    }

    #[test]
    fn the_boundary_avoids_the_payload() {
        let evil = b"xx--chela-voice-00000000-boundaryxx".to_vec();
        let (ct, body) = multipart(&[("model", "m")], &evil);
        assert!(ct.ends_with("chela-voice-00000001-boundary"));
        assert!(body.windows(evil.len()).any(|w| w == evil.as_slice()));
    }
}
