//! The open platform's HTTP API as the channel uses it: the tenant access token (fetched, and
//! fetched again before it expires or when an answer says it is invalid), the long connection's
//! endpoint, the bot's own id, and sending text (as a reply to a message, or to a chat).

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use hyper::http::Method;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::net::{Guard, HttpClient, Request};

/// Answers that mean the tenant token is no longer good: get a new one and try once more.
const INVALID_TOKEN_CODES: &[i64] = &[99_991_661, 99_991_663];
/// Largest API answer read; the channel's answers are a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 256 * 1024;
const TIMEOUT: Duration = Duration::from_secs(15);
/// A token is replaced this long before it expires (or at half its life, if that is sooner), so
/// a request never leaves with a token that expires on the way.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// What the endpoint request hands out for the long connection.
#[derive(Debug, Clone, Deserialize)]
pub struct Endpoint {
    #[serde(rename = "URL")]
    pub url: String,
    #[serde(rename = "ClientConfig", default)]
    pub config: ClientConfig,
}

/// The server's settings for the long connection, in seconds; absent fields keep the SDKs'
/// defaults.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default)]
pub struct ClientConfig {
    #[serde(rename = "PingInterval")]
    pub ping_interval: u64,
    #[serde(rename = "ReconnectCount")]
    pub reconnect_count: i64,
    #[serde(rename = "ReconnectInterval")]
    pub reconnect_interval: u64,
    #[serde(rename = "ReconnectNonce")]
    pub reconnect_nonce: u64,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig { ping_interval: 120, reconnect_count: -1, reconnect_interval: 120, reconnect_nonce: 30 }
    }
}

/// Feishu answered the token request and said no: the app id or secret is wrong, which no
/// retry will mend (unlike an unreachable server).
#[derive(Debug)]
pub struct CredentialsRefused(String);

impl std::fmt::Display for CredentialsRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Feishu refused the app credentials ({}). Check channels.feishu.app_id and channels.feishu.app_secret",
            self.0
        )
    }
}

impl std::error::Error for CredentialsRefused {}

struct Token {
    value: String,
    refresh_at: Instant,
}

pub struct Api {
    http: HttpClient,
    base: String,
    app_id: String,
    app_secret: String,
    token: Mutex<Option<Token>>,
}

impl Api {
    pub fn new(http: HttpClient, base: &str, app_id: &str, app_secret: &str) -> Api {
        Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            app_id: app_id.to_owned(),
            app_secret: app_secret.to_owned(),
            token: Mutex::new(None),
        }
    }

    /// POSTs JSON (or GETs without a body) and returns the answer's JSON, whatever its `code`.
    async fn raw(&self, method: Method, path: &str, body: Option<&Value>, token: Option<&str>) -> Result<Value> {
        let body = Body::Json(body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string())));
        self.send(method, path, body, token).await
    }

    async fn send(&self, method: Method, path: &str, body: Body, token: Option<&str>) -> Result<Value> {
        let (content_type, body) = match body {
            Body::Json(b) => ("application/json; charset=utf-8".to_owned(), b),
            Body::Multipart { boundary, bytes } => (format!("multipart/form-data; boundary={boundary}"), bytes),
        };
        let mut headers = vec![("content-type".to_owned(), content_type)];
        if let Some(t) = token {
            headers.push(("authorization".to_owned(), format!("Bearer {t}")));
        }
        let req = Request {
            method,
            url: format!("{}{path}", self.base),
            headers,
            body,
            timeout: TIMEOUT,
            guard: Guard::AllowAll,
        };
        let resp = self.http.send(req).await.with_context(|| format!("Feishu ({}) cannot be reached", self.base))?;
        let status = resp.status;
        let bytes = resp.bytes(MAX_ANSWER_BYTES, TIMEOUT).await?;
        serde_json::from_slice(&bytes).map_err(|_| {
            anyhow!("Feishu answered {path} with HTTP {status} and a body that is not JSON; is channels.feishu.api_base right?")
        })
    }

    /// A tenant token that is good for a while yet.
    pub async fn token(&self) -> Result<String> {
        let mut slot = self.token.lock().await;
        if let Some(t) = slot.as_ref().filter(|t| Instant::now() < t.refresh_at) {
            return Ok(t.value.clone());
        }
        let body = json!({"app_id": self.app_id, "app_secret": self.app_secret});
        let answer =
            self.raw(Method::POST, "/open-apis/auth/v3/tenant_access_token/internal", Some(&body), None).await?;
        let code = answer["code"].as_i64().unwrap_or(-1);
        let (Some(value), 0) = (answer["tenant_access_token"].as_str(), code) else {
            let msg = answer["msg"].as_str().unwrap_or("no message");
            return Err(CredentialsRefused(format!("code {code}: {msg}")).into());
        };
        let life = Duration::from_secs(answer["expire"].as_u64().unwrap_or(0));
        let refresh_at = Instant::now() + life.saturating_sub(REFRESH_MARGIN.min(life / 2));
        *slot = Some(Token { value: value.to_owned(), refresh_at });
        Ok(value.to_owned())
    }

    /// Calls an API with the tenant token; an answer that the token is invalid gets a new token
    /// and one more try. Returns the answer's `data` (or the whole answer) when `code` is 0.
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value> {
        let body = Body::Json(body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string())));
        self.call_with(method, path, body).await
    }

    async fn call_with(&self, method: Method, path: &str, body: Body) -> Result<Value> {
        for attempt in 0..2 {
            let token = self.token().await?;
            let answer = self.send(method.clone(), path, body.clone(), Some(&token)).await?;
            let code = answer["code"].as_i64().unwrap_or(-1);
            if code == 0 {
                return Ok(answer);
            }
            if INVALID_TOKEN_CODES.contains(&code) && attempt == 0 {
                chela_log::info!("Feishu says the tenant token is invalid (code {code}); fetching a new one");
                self.forget_token(&token).await;
                continue;
            }
            bail!("Feishu refused {path} (code {code}: {})", answer["msg"].as_str().unwrap_or("no message"));
        }
        bail!("Feishu refused a fresh tenant token for {path}")
    }

    async fn forget_token(&self, used: &str) {
        let mut slot = self.token.lock().await;
        // Another request may already have replaced it.
        if slot.as_ref().is_some_and(|t| t.value == used) {
            *slot = None;
        }
    }

    /// The long connection's URL and settings.
    pub async fn endpoint(&self) -> Result<Endpoint> {
        let body = json!({"AppID": self.app_id, "AppSecret": self.app_secret});
        let answer = self.raw(Method::POST, "/callback/ws/endpoint", Some(&body), None).await?;
        let code = answer["code"].as_i64().unwrap_or(-1);
        if code != 0 {
            bail!(
                "Feishu refused the long connection (code {code}: {}). Check the app credentials, and that the app subscribes to events by long connection",
                answer["msg"].as_str().unwrap_or("no message")
            );
        }
        serde_json::from_value(answer["data"].clone())
            .map_err(|_| anyhow!("Feishu's long-connection endpoint answer has no URL"))
    }

    /// The bot's `open_id`, to tell whether a group message mentions it.
    pub async fn bot_open_id(&self) -> Result<String> {
        let answer = self.call(Method::GET, "/open-apis/bot/v3/info", None).await?;
        answer["bot"]["open_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("Feishu's bot info has no open_id; is the app's bot feature on?"))
    }

    /// Replies to message `message_id` with text.
    pub async fn reply_text(&self, message_id: &str, text: &str) -> Result<()> {
        let body = json!({"msg_type": "text", "content": json!({"text": text}).to_string()});
        self.call(Method::POST, &format!("/open-apis/im/v1/messages/{}/reply", path_segment(message_id)?), Some(&body))
            .await
            .map(drop)
    }

    /// Sends text to chat `chat_id`.
    pub async fn send_text(&self, chat_id: &str, text: &str) -> Result<()> {
        let body = json!({"receive_id": chat_id, "msg_type": "text", "content": json!({"text": text}).to_string()});
        self.call(Method::POST, "/open-apis/im/v1/messages?receive_id_type=chat_id", Some(&body)).await.map(drop)
    }
}

/// A request body; `Bytes` clones share the buffer, so a retry does not copy a file.
#[derive(Clone)]
enum Body {
    Json(Bytes),
    Multipart { boundary: String, bytes: Bytes },
}

/// Largest file sent; Feishu's own limit for `im/v1/files` is 30 MB.
pub const MAX_FILE_BYTES: u64 = 30 * 1024 * 1024;

impl Api {
    /// Uploads `data` as file `name` and sends it to chat `chat_id`.
    pub async fn send_file(&self, chat_id: &str, name: &str, data: Bytes) -> Result<()> {
        let (boundary, bytes) = multipart(name, &data);
        let answer =
            self.call_with(Method::POST, "/open-apis/im/v1/files", Body::Multipart { boundary, bytes }).await?;
        let key =
            answer["data"]["file_key"].as_str().ok_or_else(|| anyhow!("Feishu's upload answer has no file_key"))?;
        let body = json!({"receive_id": chat_id, "msg_type": "file", "content": json!({"file_key": key}).to_string()});
        self.call(Method::POST, "/open-apis/im/v1/messages?receive_id_type=chat_id", Some(&body)).await.map(drop)
    }
}

/// The `multipart/form-data` body of an upload: `file_type=stream`, `file_name`, `file`.
fn multipart(name: &str, data: &[u8]) -> (String, Bytes) {
    let mut nonce = [0u8; 12];
    // A fixed boundary would do as well unless the file holds it; random makes that unlikely.
    let _ = rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty());
    let boundary: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let boundary = format!("chela-{boundary}");
    // Quotes and line breaks would end the header early.
    let name: String = name.chars().map(|c| if matches!(c, '"' | '\r' | '\n' | '\\') { '_' } else { c }).collect();
    let mut out = Vec::with_capacity(data.len() + 512);
    for (field, value) in [("file_type", "stream"), ("file_name", name.as_str())] {
        out.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    out.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(data);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (boundary, Bytes::from(out))
}

/// Feishu ids are letters, digits, `_` and `-`; anything else must not reach a URL path.
fn path_segment(id: &str) -> Result<&str> {
    if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        Ok(id)
    } else {
        bail!("`{id}` is not a Feishu message id")
    }
}
