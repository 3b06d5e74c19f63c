//! The Bot API client: one method per call the channel makes, over the pooled
//! [`HttpClient`], each bounded in time and in the bytes it reads, with Telegram's answers
//! classified by what the caller should do next ([`ApiError`]). The envelope and the request
//! bodies the chip sends too are `chela_proto::telegram::wire`'s.
//!
//! The token is part of every URL (`/bot<TOKEN>/method`), so no error text here ever carries a
//! URL: they name the method instead, and anything from below is masked.

use std::time::Duration;

use bytes::Bytes;
use chela_proto::telegram::wire::{ChatId, Envelope, GetUpdates, LinkPreview, SendMessage};
use hyper::http::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::net::{Guard, HttpClient, NetError, Request};

/// How long `getUpdates` waits for an update on Telegram's side.
pub const POLL_SECS: u64 = 30;
/// The most a `getUpdates` answer may hold: 100 updates of at most 4096 characters each fit
/// many times over; more is not Telegram.
const MAX_UPDATES_BYTES: usize = 4 * 1024 * 1024;
/// The most any other answer may hold.
const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// Waiting for the headers of an ordinary call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Silence allowed between two pieces of a body.
const BODY_IDLE: Duration = Duration::from_secs(30);

/// What went wrong with a call, by what to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 401/404 on every method: the token is wrong or was revoked. Retrying will not help.
    Unauthorized,
    /// 429: Telegram asks to wait this long before the next call.
    RateLimited { retry_after: Duration },
    /// Telegram refused this call (400, 403, …) and said why.
    Refused { status: u16, description: String },
    /// The network, a timeout, or an answer over its size bound. `retryable` says whether
    /// the same call may succeed later.
    Net { what: String, retryable: bool },
    /// An answer (or a file) over the bound it is read with.
    TooLarge,
    /// An answer that is not the Bot API's JSON.
    Malformed(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Unauthorized => f.write_str(
                "Telegram rejected the bot token (401). Get one from @BotFather and set it with \
                 `chela config set channels.telegram.token -`",
            ),
            ApiError::RateLimited { retry_after } => {
                write!(f, "Telegram asked to slow down (429, retry after {} s)", retry_after.as_secs())
            }
            ApiError::Refused { status, description } => {
                write!(f, "Telegram refused the call ({status}): {description}")
            }
            ApiError::Net { what, .. } => f.write_str(what),
            ApiError::TooLarge => f.write_str("Telegram's answer was larger than Chela reads"),
            ApiError::Malformed(why) => write!(f, "Telegram's answer could not be read: {why}"),
        }
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// Telegram could not parse the message's HTML.
    pub fn is_bad_markup(&self) -> bool {
        matches!(self, ApiError::Refused { status: 400, description } if description.contains("can't parse entities"))
    }
}

/// A file Telegram holds, as `getFile` describes it.
#[derive(Debug, Clone, Deserialize)]
pub struct FileInfo {
    pub file_path: Option<String>,
    pub file_size: Option<u64>,
}

/// A file to upload; cheap to clone for a retry.
#[derive(Clone)]
pub struct Upload<'a> {
    pub field: &'a str,
    pub file_name: &'a str,
    pub bytes: Bytes,
}

#[derive(Clone)]
pub struct Api {
    http: HttpClient,
    base: String,
    token: String,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").field("base", &self.base).finish_non_exhaustive()
    }
}

impl Api {
    pub fn new(http: HttpClient, base: &str, token: &str) -> Api {
        Api { http, base: base.trim_end_matches('/').to_owned(), token: token.to_owned() }
    }

    fn net(&self, method: &str, e: &NetError) -> ApiError {
        if matches!(e, NetError::BodyTooLarge { .. }) {
            return ApiError::TooLarge;
        }
        let what = format!("Telegram {method}: {e}").replace(&self.token, "<token>");
        ApiError::Net { what, retryable: e.is_retryable() || matches!(e, NetError::Timeout { .. }) }
    }

    /// Calls `method` with a JSON body; the `result` on success.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value, ApiError> {
        self.post(
            method,
            "application/json".to_owned(),
            Bytes::from(params.to_string()),
            CALL_TIMEOUT,
            MAX_ANSWER_BYTES,
        )
        .await
    }

    async fn post(
        &self,
        method: &str,
        content_type: String,
        body: Bytes,
        timeout: Duration,
        limit: usize,
    ) -> Result<Value, ApiError> {
        let req = Request {
            method: Method::POST,
            url: format!("{}/bot{}/{method}", self.base, self.token),
            headers: vec![("content-type".to_owned(), content_type)],
            body,
            timeout,
            // The API base is configured by the owner (a local Bot API server is common).
            guard: Guard::AllowAll,
        };
        let resp = self.http.send(req).await.map_err(|e| self.net(method, &e))?;
        let status = resp.status;
        let body = resp.bytes(limit, BODY_IDLE).await.map_err(|e| self.net(method, &e))?;
        answer(status, &body)
    }

    pub async fn get_me(&self) -> Result<Value, ApiError> {
        self.call("getMe", &json!({})).await
    }

    /// Updates from `offset` on, waiting up to [`POLL_SECS`] for one.
    pub async fn get_updates(&self, offset: i64) -> Result<Vec<Value>, ApiError> {
        let poll = GetUpdates { offset, timeout: POLL_SECS as u32, limit: None, allowed_updates: GetUpdates::MESSAGES };
        let params = serde_json::to_value(poll).unwrap_or_default();
        let wait = Duration::from_secs(POLL_SECS) + CALL_TIMEOUT;
        let result = self
            .post("getUpdates", "application/json".to_owned(), Bytes::from(params.to_string()), wait, MAX_UPDATES_BYTES)
            .await?;
        match result {
            Value::Array(updates) => Ok(updates),
            other => Err(ApiError::Malformed(format!("getUpdates gave {} instead of a list", kind(&other)))),
        }
    }

    /// Sends `text` (HTML when `html`); the new message's id.
    pub async fn send_message(&self, chat_id: &str, text: &str, html: bool) -> Result<i64, ApiError> {
        let body = SendMessage {
            chat_id: ChatId::Text(chat_id),
            text,
            parse_mode: html.then_some("HTML"),
            link_preview_options: Some(LinkPreview { is_disabled: true }),
        };
        let message = self.call("sendMessage", &serde_json::to_value(body).unwrap_or_default()).await?;
        Ok(message["message_id"].as_i64().unwrap_or_default())
    }

    /// Replaces the text of the bot's message `message_id` (HTML when `html`). Telegram's "message
    /// is not modified" (the same text again) counts as done.
    pub async fn edit_message_text(
        &self,
        chat_id: &str,
        message_id: i64,
        text: &str,
        html: bool,
    ) -> Result<(), ApiError> {
        let mut params = json!({"chat_id": chat_id, "message_id": message_id, "text": text,
            "link_preview_options": {"is_disabled": true}});
        if html {
            params["parse_mode"] = "HTML".into();
        }
        match self.call("editMessageText", &params).await {
            Err(ApiError::Refused { status: 400, description }) if description.contains("message is not modified") => {
                Ok(())
            }
            other => other.map(drop),
        }
    }

    pub async fn send_chat_action(&self, chat_id: &str, action: &str) -> Result<(), ApiError> {
        self.call("sendChatAction", &json!({"chat_id": chat_id, "action": action})).await.map(drop)
    }

    pub async fn get_file(&self, file_id: &str) -> Result<FileInfo, ApiError> {
        let result = self.call("getFile", &json!({ "file_id": file_id })).await?;
        serde_json::from_value(result).map_err(|e| ApiError::Malformed(format!("getFile: {e}")))
    }

    /// Downloads a file `getFile` described, refusing it past `limit` bytes.
    pub async fn download(&self, file_path: &str, limit: usize) -> Result<Bytes, ApiError> {
        let req = Request {
            method: Method::GET,
            url: format!("{}/file/bot{}/{}", self.base, self.token, file_path.trim_start_matches('/')),
            headers: Vec::new(),
            body: Bytes::new(),
            timeout: CALL_TIMEOUT,
            guard: Guard::AllowAll,
        };
        let resp = self.http.send(req).await.map_err(|e| self.net("file download", &e))?;
        if resp.status == 401 || resp.status == 404 {
            return Err(ApiError::Refused { status: resp.status, description: "the file is not available".to_owned() });
        }
        if resp.status != 200 {
            return Err(ApiError::Refused { status: resp.status, description: "the file download failed".to_owned() });
        }
        resp.bytes(limit, BODY_IDLE).await.map_err(|e| self.net("file download", &e))
    }

    /// Uploads a file with `multipart/form-data` (`sendDocument`, `sendPhoto`).
    pub async fn send_file(&self, method: &str, fields: &[(&str, &str)], file: Upload<'_>) -> Result<Value, ApiError> {
        let mut random = [0u8; 8];
        // A boundary the file's bytes cannot contain by chance; a zero one is still valid.
        let _ = rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty());
        let boundary = format!("chela-{:016x}", u64::from_le_bytes(random));
        let mut body = Vec::with_capacity(file.bytes.len() + 512);
        for (name, value) in fields {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                    .as_bytes(),
            );
        }
        // Quotes and line ends would end the header early; the name is only shown, so they go.
        let file_name: String = file.file_name.chars().filter(|c| !matches!(c, '"' | '\r' | '\n' | '\\')).collect();
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"; filename=\"{file_name}\"\r\n\
                 Content-Type: application/octet-stream\r\n\r\n",
                file.field
            )
            .as_bytes(),
        );
        body.extend_from_slice(&file.bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let content_type = format!("multipart/form-data; boundary={boundary}");
        self.post(method, content_type, Bytes::from(body), CALL_TIMEOUT * 4, MAX_ANSWER_BYTES).await
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The most a 429 makes us wait, whatever it says: an hour of silence is a bug somewhere.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Classifies an answer: `result` when `ok`, else what the caller should do.
pub fn answer(status: u16, body: &[u8]) -> Result<Value, ApiError> {
    let envelope: Envelope<Value> = match serde_json::from_slice(body) {
        Ok(e) => e,
        Err(_) if status == 401 => return Err(ApiError::Unauthorized),
        Err(e) => return Err(ApiError::Malformed(format!("status {status}, not JSON ({e})"))),
    };
    if envelope.ok {
        return Ok(envelope.result.unwrap_or_default());
    }
    let code = envelope.error_code.unwrap_or(status);
    match code {
        401 => Err(ApiError::Unauthorized),
        429 => {
            let secs = envelope.parameters.and_then(|p| p.retry_after).unwrap_or(1);
            Err(ApiError::RateLimited { retry_after: Duration::from_secs(secs).min(MAX_RETRY_AFTER) })
        }
        _ => Err(ApiError::Refused { status: code, description: envelope.description }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_classified_by_what_to_do_next() {
        assert_eq!(answer(200, br#"{"ok":true,"result":[1]}"#), Ok(json!([1])));
        assert_eq!(
            answer(401, br#"{"ok":false,"error_code":401,"description":"Unauthorized"}"#),
            Err(ApiError::Unauthorized)
        );
        assert_eq!(
            answer(429, br#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#),
            Err(ApiError::RateLimited { retry_after: Duration::from_secs(7) })
        );
        assert_eq!(
            answer(429, br#"{"ok":false,"error_code":429,"parameters":{"retry_after":86400}}"#),
            Err(ApiError::RateLimited { retry_after: MAX_RETRY_AFTER })
        );
        let bad = answer(400, br#"{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: x"}"#);
        assert!(bad.unwrap_err().is_bad_markup());
        assert!(matches!(answer(502, b"<html>Bad Gateway</html>"), Err(ApiError::Malformed(_))));
    }

    #[test]
    fn errors_never_show_the_token() {
        let api = Api::new(HttpClient::new(Default::default()), "http://x", "123:SECRET");
        let e =
            api.net("getMe", &NetError::InvalidUrl { url: "http://x/bot123:SECRET/getMe".into(), reason: "r".into() });
        assert!(!e.to_string().contains("SECRET"), "{e}");
    }
}
