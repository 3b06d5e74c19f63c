//! Feishu on the chip: the long connection (a WebSocket of `pbbp2` frames, read with the host's
//! own `chela_proto::feishu` code) and the open API calls it needs, over the board's [`Link`].
//!
//! - [`Api::endpoint`] asks `/callback/ws/endpoint` for the connection's URL and settings;
//! - [`socket`] opens the WebSocket and runs [`conn::Conn`] on it: pings, acks, events;
//!   [`duplex`] runs it on a reader and a writer at once (the ESP32's TLS halves);
//! - [`Api::send`] answers a chat with `im/v1/messages`, with a tenant token fetched and
//!   refreshed as needed ([`Api::token`]).
//!
//! Who may talk to the device is [`Access`]: the `feishu_allow` open_ids. Unknown senders get
//! nothing: their events are acknowledged (so Feishu does not send them again) and dropped.

pub mod conn;
#[cfg(feature = "tls")]
pub mod duplex;
#[cfg(feature = "tls")]
pub mod socket;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use chela_core::console::{ChipConfig, Field};
use chela_core::exchange::Head;
use chela_proto::json::read::{self, Reader, field, object, opt, read_all};
use chela_proto::json::{self, Writer};

use crate::link::{Collected, Link, LinkError};

/// Where the open API lives.
pub const BASE: &str = "https://open.feishu.cn";
/// Largest API answer read: the answers the chip asks for are a few hundred bytes.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024;
/// Largest text sent in one message; a longer reply goes in several.
pub const MAX_SEND_BYTES: usize = 8 * 1024;
/// Token answers that mean "this tenant token is no longer good": fetch one and try again.
const INVALID_TOKEN_CODES: &[i64] = &[99_991_661, 99_991_663];
/// A token is renewed this long before Feishu says it expires.
const REFRESH_MARGIN_MS: u64 = 5 * 60 * 1000;

/// The Feishu users the device answers: `feishu_allow`. Nobody when it is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub allow: Vec<String>,
}

impl Access {
    pub fn from_config(config: &ChipConfig) -> Access {
        let allow = config.get(Field::FeishuAllow).split(',').filter(|s| !s.is_empty()).map(String::from).collect();
        Access { allow }
    }

    pub fn admits(&self, open_id: &str) -> bool {
        !open_id.is_empty() && self.allow.iter().any(|a| a == open_id)
    }
}

/// What the server asks of the client, from the endpoint answer and later pongs. Out-of-range
/// values are clamped where they are used, so a hostile server can neither spin nor stall us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Seconds between pings.
    pub ping_interval: u64,
    /// Longest back-off between reconnections, in seconds.
    pub reconnect_interval: u64,
    /// Seconds of random wait before the first reconnection.
    pub reconnect_nonce: u64,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig { ping_interval: 120, reconnect_interval: 120, reconnect_nonce: 30 }
    }
}

/// Pings between 1 s and 10 min apart, whatever the server says.
pub const PING_RANGE_S: (u64, u64) = (1, 600);
/// The back-off never waits longer than this.
pub const BACKOFF_CEILING_MS: u64 = 600_000;

impl ClientConfig {
    pub fn ping_ms(&self) -> u64 {
        self.ping_interval.clamp(PING_RANGE_S.0, PING_RANGE_S.1) * 1000
    }

    /// Reads a `ClientConfig` object; absent members keep their current values.
    fn read_into(&mut self, r: &mut Reader<'_>) -> read::Result<()> {
        let mut seen = 0;
        object(r, |r, key| match key {
            "PingInterval" => field(r, &mut seen, 1, Reader::u64).map(|v| self.ping_interval = v),
            "ReconnectInterval" => field(r, &mut seen, 2, Reader::u64).map(|v| self.reconnect_interval = v),
            "ReconnectNonce" => field(r, &mut seen, 4, Reader::u64).map(|v| self.reconnect_nonce = v),
            _ => r.skip(),
        })
    }

    /// A pong's payload may carry a new `ClientConfig`; garbage leaves this one as it is.
    pub fn update_from(&mut self, payload: &[u8]) {
        let mut next = *self;
        if read_all(payload, |r| next.read_into(r)).is_ok() {
            *self = next;
        }
    }
}

/// Milliseconds to wait before reconnection number `failures` (from 1): doubling from 1 s up to
/// the server's `ReconnectInterval` (at most [`BACKOFF_CEILING_MS`]); the first also waits a
/// random part of `ReconnectNonce`, so many devices do not come back at the same instant.
pub fn backoff_ms(failures: u32, config: &ClientConfig, random: u64) -> u64 {
    let ceiling = config.reconnect_interval.max(1).saturating_mul(1000).min(BACKOFF_CEILING_MS);
    let base = 1000u64.saturating_mul(1 << failures.saturating_sub(1).min(20)).min(ceiling);
    let nonce_ms = config.reconnect_nonce.min(600) * 1000;
    let jitter = if failures <= 1 && nonce_ms > 0 { random % nonce_ms } else { 0 };
    base + jitter
}

/// The long connection's address and settings, as `/callback/ws/endpoint` hands them out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub config: ClientConfig,
}

/// Why an API call failed.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// The network or the server failed: try again later.
    Net(String),
    /// Feishu said no (wrong app id or secret, a permission missing): no retry will mend it.
    Refused(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Net(s) | Failure::Refused(s) => f.write_str(s),
        }
    }
}

/// The common head of every open API answer: `code` (0 is success) and `msg`, with the members
/// a call wants read by `extra`.
fn read_answer<'a>(
    body: &'a [u8],
    mut extra: impl FnMut(&mut Reader<'a>, &str) -> read::Result<bool>,
) -> Result<(i64, String), String> {
    let (mut code, mut msg) = (None, String::new());
    read_all(body, |r| {
        object(r, |r, key| match key {
            "code" => r.i64().map(|c| code = Some(c)),
            "msg" => r.string_opt().map(|m| msg = m.unwrap_or_default()),
            _ => {
                if !extra(r, key)? {
                    r.skip()?;
                }
                Ok(())
            }
        })
    })
    .map_err(|e| alloc::format!("Feishu answered what is not its JSON ({e})"))?;
    let code = code.ok_or_else(|| String::from("Feishu's answer has no code"))?;
    // The message is Feishu's text: bounded, so a long one cannot fill the console.
    let msg = String::from(chela_core::text::prefix(&msg, 200));
    Ok((code, msg))
}

/// Reads the endpoint answer: `{"code":0,"data":{"URL":…,"ClientConfig":{…}}}`.
pub fn parse_endpoint(body: &[u8]) -> Result<Endpoint, Failure> {
    let (mut url, mut config) = (None, ClientConfig::default());
    let (code, msg) = read_answer(body, |r, key| {
        if key != "data" {
            return Ok(false);
        }
        opt(r, |r| {
            object(r, |r, key| match key {
                "URL" => r.string_owned().map(|u| url = Some(u)),
                "ClientConfig" => opt(r, |r| config.read_into(r)).map(drop),
                _ => r.skip(),
            })
        })?;
        Ok(true)
    })
    .map_err(Failure::Net)?;
    if code != 0 {
        return Err(Failure::Refused(alloc::format!(
            "Feishu refused the long connection (code {code}: {msg}); check the app id and secret, and that the app receives events by long connection"
        )));
    }
    let url = url.ok_or_else(|| Failure::Net("Feishu's endpoint answer has no URL".into()))?;
    Ok(Endpoint { url, config })
}

/// Reads the token answer: the token and its life in seconds.
pub fn parse_token(body: &[u8]) -> Result<(String, u64), Failure> {
    let (mut token, mut expire) = (None, 0);
    let (code, msg) = read_answer(body, |r, key| match key {
        "tenant_access_token" => r.string_owned().map(|t| {
            token = Some(t);
            true
        }),
        "expire" => r.u64().map(|e| {
            expire = e;
            true
        }),
        _ => Ok(false),
    })
    .map_err(Failure::Net)?;
    match (token, code) {
        (Some(t), 0) if !t.is_empty() && t.len() <= 512 => Ok((t, expire)),
        _ => Err(Failure::Refused(alloc::format!("Feishu refused the app's credentials (code {code}: {msg})"))),
    }
}

/// The `im/v1/messages` body that sends `text` to `chat_id`: the content is itself JSON text.
pub fn send_body(chat_id: &str, text: &str) -> String {
    let content = json::to_string(|w| {
        w.begin_object().field_str("text", text).end_object();
    });
    json::to_string(|w: &mut Writer<'_, String>| {
        w.begin_object()
            .field_str("receive_id", chat_id)
            .field_str("msg_type", "text")
            .field_str("content", &content)
            .end_object();
    })
}

/// `text` in pieces of at most [`MAX_SEND_BYTES`], cut at a character boundary (a newline or a
/// space when one is near).
pub fn chunks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = if text.trim().is_empty() { "(no reply)" } else { text };
    while rest.len() > MAX_SEND_BYTES {
        let mut cut = MAX_SEND_BYTES;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let soft = rest[..cut].rfind(['\n', ' ']).filter(|&i| i > cut / 2);
        let at = soft.map_or(cut, |i| i + 1);
        out.push(&rest[..at]);
        rest = &rest[at..];
    }
    out.push(rest);
    out
}

/// A Feishu id in a URL query: letters, digits, `_` and `-` only.
fn id_ok(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The app's credentials and its tenant token. Nothing here shows the secret or the token.
pub struct Api {
    base: String,
    app_id: String,
    secret: String,
    /// The token and the board time (ms) after which it is renewed.
    token: Option<(String, u64)>,
}

impl fmt::Debug for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api").field("base", &self.base).field("app_id", &self.app_id).finish_non_exhaustive()
    }
}

impl Api {
    /// `base`: [`BASE`] on the chip (a local fake in tests).
    pub fn new(base: &str, app_id: &str, secret: &str) -> Api {
        Api { base: base.trim_end_matches('/').into(), app_id: app_id.into(), secret: secret.into(), token: None }
    }

    /// The settings' app, or what is missing.
    pub fn from_config(config: &ChipConfig) -> Result<Api, String> {
        let (id, secret) = (config.get(Field::FeishuAppId), config.get(Field::FeishuSecret));
        if id.is_empty() || secret.is_empty() {
            return Err("not set: the Feishu app (set_feishu_app APP_ID SECRET on the serial console)".into());
        }
        Ok(Api::new(BASE, id, secret))
    }

    /// Whether this is the app the settings name now: a connection opened with another one
    /// (`set_feishu_app` since) is closed and opened again with it.
    pub fn is_current(&self, config: &ChipConfig) -> bool {
        self.app_id == config.get(Field::FeishuAppId) && self.secret == config.get(Field::FeishuSecret)
    }

    async fn post<L: Link>(
        &self,
        link: &mut L,
        path: &str,
        body: &str,
        token: Option<&str>,
    ) -> Result<Collected, Failure> {
        let mut headers = alloc::vec![("content-type", String::from("application/json; charset=utf-8"))];
        if let Some(t) = token {
            headers.push(("authorization", alloc::format!("Bearer {t}")));
        }
        let head = Head { url: alloc::format!("{}{path}", self.base), headers };
        let bytes = body.as_bytes();
        let mut writer = |from: usize, buf: &mut Vec<u8>| {
            buf.clear();
            let end = bytes.len().min(from + crate::turn::WINDOW);
            buf.extend_from_slice(&bytes[from.min(end)..end]);
        };
        let mut answer = Collected::up_to(MAX_ANSWER_BYTES);
        link.post(&head, bytes.len(), &mut writer, &mut answer).await.map_err(|e| match e {
            LinkError::Net(_) | LinkError::Broken(_) => Failure::Net(alloc::format!("Feishu {path}: {e}")),
        })?;
        if answer.over {
            return Err(Failure::Net(alloc::format!("Feishu {path} answered over {MAX_ANSWER_BYTES} bytes")));
        }
        if answer.status >= 500 || answer.status == 429 {
            return Err(Failure::Net(alloc::format!("Feishu {path} answered {}", answer.status)));
        }
        Ok(answer)
    }

    /// The long connection's URL and settings.
    pub async fn endpoint<L: Link>(&self, link: &mut L) -> Result<Endpoint, Failure> {
        let body = json::to_string(|w| {
            w.begin_object().field_str("AppID", &self.app_id).field_str("AppSecret", &self.secret).end_object();
        });
        let answer = self.post(link, "/callback/ws/endpoint", &body, None).await?;
        parse_endpoint(&answer.body)
    }

    /// A tenant token good for a while yet: the one held, or a new one.
    pub async fn token<L: Link>(&mut self, link: &mut L, now_ms: u64) -> Result<String, Failure> {
        if let Some((t, renew_ms)) = &self.token
            && now_ms < *renew_ms
        {
            return Ok(t.clone());
        }
        let body = json::to_string(|w| {
            w.begin_object().field_str("app_id", &self.app_id).field_str("app_secret", &self.secret).end_object();
        });
        let answer = self.post(link, "/open-apis/auth/v3/tenant_access_token/internal", &body, None).await?;
        let (token, life_s) = parse_token(&answer.body)?;
        let life_ms = life_s.saturating_mul(1000);
        let renew_ms = now_ms.saturating_add(life_ms.saturating_sub(REFRESH_MARGIN_MS.min(life_ms / 2)));
        self.token = Some((token.clone(), renew_ms));
        Ok(token)
    }

    /// Sends `text` to `chat_id` (in several messages when long): a chat (`oc_…`), or a user
    /// (`ou_…`, an open_id: the bot's chat with them, where the heartbeat talks to the owner).
    /// A token Feishu calls invalid is replaced once.
    pub async fn send<L: Link>(&mut self, link: &mut L, chat_id: &str, text: &str, now_ms: u64) -> Result<(), Failure> {
        if !id_ok(chat_id) {
            return Err(Failure::Refused("a Feishu chat id has characters no Feishu id has".into()));
        }
        let path = if chat_id.starts_with("ou_") {
            "/open-apis/im/v1/messages?receive_id_type=open_id"
        } else {
            "/open-apis/im/v1/messages?receive_id_type=chat_id"
        };
        for chunk in chunks(text) {
            let body = send_body(chat_id, chunk);
            let mut attempt = 0;
            loop {
                let token = self.token(link, now_ms).await?;
                let answer = self.post(link, path, &body, Some(&token));
                let answer = answer.await?;
                let (code, msg) = read_answer(&answer.body, |_, _| Ok(false))
                    .map_err(|e| Failure::Net(alloc::format!("im/v1/messages answered {}: {e}", answer.status)))?;
                if code == 0 {
                    break;
                }
                if INVALID_TOKEN_CODES.contains(&code) && attempt == 0 {
                    self.token = None;
                    attempt += 1;
                    continue;
                }
                return Err(Failure::Refused(alloc::format!("Feishu refused the reply (code {code}: {msg})")));
            }
        }
        Ok(())
    }
}
