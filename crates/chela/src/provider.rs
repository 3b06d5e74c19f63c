//! The LLM providers: Anthropic Messages and OpenAI-compatible Chat Completions over HTTP,
//! with retries, and errors explained in one sentence.
//!
//! Encoding and decoding are `chela_proto`'s; this module does the HTTP, the waiting and the
//! deciding whether to try again.

use std::time::Duration;

use bytes::Bytes;
use chela_core::agent::ModelCall;
use chela_core::config as keys;
use chela_core::retry::{Backoff, parse_retry_after};
use chela_proto::chat::{Reply, Request, ToolSpec, Update};
use chela_proto::error::{ApiError, ErrorClass, classify, classify_stream_error};
use chela_proto::stream::{Accumulate, Decoder, Limits, StreamError};
use chela_proto::{anthropic, openai};
use hyper::http::Method;

use crate::config::{Config, Layer};
use crate::net::{Guard, HttpClient, NetError, Request as HttpRequest, Response};

/// The two wire formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Anthropic,
    OpenAi,
}

impl Kind {
    fn default_base_url(self) -> &'static str {
        match self {
            Kind::Anthropic => "https://api.anthropic.com",
            Kind::OpenAi => "https://api.openai.com/v1",
        }
    }

    fn default_model(self) -> &'static str {
        match self {
            Kind::Anthropic => "claude-sonnet-4-5",
            Kind::OpenAi => "gpt-4.1-mini",
        }
    }

    fn key_env(self) -> &'static str {
        match self {
            Kind::Anthropic => "ANTHROPIC_API_KEY",
            Kind::OpenAi => "OPENAI_API_KEY",
        }
    }
}

/// A configured provider.
#[derive(Clone)]
pub struct Provider {
    pub kind: Kind,
    pub base_url: String,
    api_key: String,
    pub model: String,
    pub max_tokens: u32,
    pub stream: bool,
    backoff: Backoff,
    /// Longest silence from the server before the call is given up.
    idle: Duration,
    http: HttpClient,
    limits: Limits,
}

/// Largest non-streamed body or error body read.
const MAX_BODY: usize = 8 * 1024 * 1024;
const MAX_ERROR_BODY: usize = 64 * 1024;

impl Provider {
    /// Builds the provider from the configuration, or explains what to set.
    pub fn from_config(cfg: &Config, http: HttpClient) -> anyhow::Result<Provider> {
        let kind = match cfg.get(keys::LLM_PROVIDER) {
            "openai" => Kind::OpenAi,
            _ => Kind::Anthropic,
        };
        let api_key = cfg.get(keys::LLM_API_KEY).to_owned();
        let base_url = match cfg.get(keys::LLM_BASE_URL) {
            "" => kind.default_base_url().to_owned(),
            url => url.to_owned(),
        };
        // Local servers (Ollama, llama.cpp, vLLM) usually need no key; hosted ones do.
        let (api_key, local) = crate::keyrule::api_key_rule(&api_key, &base_url);
        if api_key.is_empty() && !local {
            anyhow::bail!(
                "No API key is configured for {}. Set one with `chela config set llm.api_key <KEY>` or the {} environment variable \
                 (or choose another provider with `chela config set llm.provider openai` and `llm.base_url`).",
                cfg.get(keys::LLM_PROVIDER),
                kind.key_env()
            );
        }
        let model = match cfg.get(keys::LLM_MODEL) {
            "" => kind.default_model().to_owned(),
            m => m.to_owned(),
        };
        Ok(Provider {
            kind,
            base_url,
            api_key,
            model,
            max_tokens: u32::try_from(cfg.int(keys::LLM_MAX_TOKENS)).unwrap_or(4096),
            stream: cfg.bool(keys::LLM_STREAM),
            backoff: Backoff {
                max_retries: u32::try_from(cfg.int(keys::LLM_MAX_RETRIES)).unwrap_or(4),
                ..Backoff::default()
            },
            idle: Duration::from_secs(cfg.int(keys::LLM_TIMEOUT_SECS).unsigned_abs()),
            http,
            limits: Limits::default(),
        })
    }

    /// The same provider set up for a cheap check: one token, no streaming, no retries.
    pub fn probe(&self) -> Provider {
        Provider {
            max_tokens: 1,
            stream: false,
            backoff: Backoff { max_retries: 0, ..self.backoff },
            idle: self.idle.min(Duration::from_secs(20)),
            ..self.clone()
        }
    }

    /// A short name for messages: "anthropic (https://api.anthropic.com)".
    pub fn describe(&self) -> String {
        let name = match self.kind {
            Kind::Anthropic => "anthropic",
            Kind::OpenAi => "openai",
        };
        format!("{name} ({})", self.base_url)
    }

    fn url(&self) -> String {
        match self.kind {
            Kind::Anthropic => format!("{}{}", self.base_url, anthropic::PATH),
            Kind::OpenAi => format!("{}{}", self.base_url, openai::PATH),
        }
    }

    /// Encodes the request body for `call`.
    pub fn body(&self, call: &ModelCall<'_>, tools: &[ToolSpec<'_>], stream: bool) -> String {
        let req = Request {
            model: &self.model,
            max_tokens: self.max_tokens,
            system: call.system,
            messages: call.messages,
            tools,
            tool_choice: call.tool_choice,
            stream,
        };
        let mut body = String::with_capacity(4096);
        match self.kind {
            Kind::Anthropic => anthropic::write_request(&req, &mut body),
            Kind::OpenAi => openai::write_request_for(&req, self.openai_dialect(), &mut body),
        }
        body
    }

    /// OpenAI's own API takes `max_completion_tokens`; compatible servers take `max_tokens`.
    fn openai_dialect(&self) -> openai::Dialect {
        if self.base_url.starts_with("https://api.openai.com") {
            openai::Dialect::OPENAI
        } else {
            openai::Dialect::COMPATIBLE
        }
    }

    fn http_request(&self, body: Bytes, stream: bool) -> HttpRequest {
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if stream {
            headers.push(("accept".to_owned(), "text/event-stream".to_owned()));
        }
        match self.kind {
            Kind::Anthropic => {
                headers.push(("anthropic-version".to_owned(), chela_proto::ANTHROPIC_VERSION.to_owned()));
                if !self.api_key.is_empty() {
                    headers.push(("x-api-key".to_owned(), self.api_key.clone()));
                }
            }
            Kind::OpenAi => {
                if !self.api_key.is_empty() {
                    headers.push(("authorization".to_owned(), format!("Bearer {}", self.api_key)));
                }
            }
        }
        HttpRequest { method: Method::POST, url: self.url(), headers, body, timeout: self.idle, guard: Guard::AllowAll }
    }

    /// Makes one model call, retrying what is worth retrying. Text and tool starts are
    /// reported through `on_update` as they stream in. Dropping the future cancels the call.
    pub async fn complete(
        &self,
        call: &ModelCall<'_>,
        tools: &[ToolSpec<'_>],
        on_update: &mut dyn FnMut(Update<'_>),
    ) -> Result<Reply, ProviderError> {
        let body = Bytes::from(self.body(call, tools, self.stream));
        let mut retry = 0u32;
        loop {
            let mut shown = false;
            let mut track = |u: Update<'_>| {
                // Only text reaches the person; a tool call that started is not shown yet.
                shown |= matches!(u, Update::Text(_));
                on_update(u);
            };
            let failure = match self.attempt(body.clone(), &mut track).await {
                Ok(reply) => return Ok(reply),
                Err(f) => f,
            };
            let (err, retry_after) = failure;
            // Once text was shown, a retry would show it twice; say what happened instead.
            let retryable = err.retryable() && !shown;
            let wait = retryable.then(|| self.backoff.delay(retry, retry_after, jitter())).flatten();
            match wait {
                Some(d) => {
                    tracing::info!("{} failed ({err}); retry {} in {:?}", self.describe(), retry + 1, d);
                    tokio::time::sleep(d).await;
                    retry += 1;
                }
                None => return Err(err.with_retries(retry, shown)),
            }
        }
    }

    /// One HTTP exchange. On failure, also returns the server's retry-after.
    async fn attempt(
        &self,
        body: Bytes,
        on_update: &mut dyn FnMut(Update<'_>),
    ) -> Result<Reply, (ProviderError, Option<Duration>)> {
        let resp = self
            .http
            .send(self.http_request(body, self.stream))
            .await
            .map_err(|e| (ProviderError::network(e), None))?;
        if resp.status != 200 {
            return Err(self.http_failure(resp).await);
        }
        let is_sse = resp
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_sse {
            self.read_stream(resp, on_update).await.map_err(|e| (e, None))
        } else {
            // Some compatible servers ignore `stream: true`; a whole JSON body is fine too.
            let bytes = resp.bytes(MAX_BODY, self.idle).await.map_err(|e| (ProviderError::network(e), None))?;
            let reply = match self.kind {
                Kind::Anthropic => anthropic::parse_response(&bytes),
                Kind::OpenAi => openai::parse_response(&bytes),
            }
            .map_err(|e| (ProviderError::from_stream(e), None))?;
            for b in &reply.content {
                if let chela_proto::chat::Block::Text { text } = b {
                    on_update(Update::Text(text));
                }
            }
            Ok(reply)
        }
    }

    async fn read_stream(&self, resp: Response, on_update: &mut dyn FnMut(Update<'_>)) -> Result<Reply, ProviderError> {
        match self.kind {
            Kind::Anthropic => self.drain(resp, anthropic::StreamDecoder::new(self.limits), on_update).await,
            Kind::OpenAi => self.drain(resp, openai::StreamDecoder::new(self.limits), on_update).await,
        }
    }

    /// Feeds the body to `decoder` as it arrives, then finishes the reply.
    async fn drain<A: Accumulate>(
        &self,
        mut resp: Response,
        mut decoder: Decoder<A>,
        on_update: &mut dyn FnMut(Update<'_>),
    ) -> Result<Reply, ProviderError> {
        while let Some(chunk) = resp.chunk(self.idle).await.map_err(ProviderError::network)? {
            decoder.handle_bytes(&chunk, on_update).map_err(ProviderError::from_stream)?;
        }
        decoder.finish().map_err(ProviderError::from_stream)
    }

    async fn http_failure(&self, resp: Response) -> (ProviderError, Option<Duration>) {
        let status = resp.status;
        let header = |n: &str| resp.headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let retry_after = parse_retry_after(header("retry-after").as_deref(), header("retry-after-ms").as_deref());
        let body = match resp.bytes_truncated(MAX_ERROR_BODY, self.idle).await {
            Ok((b, _)) => b,
            Err(e) => return (ProviderError::network(e), retry_after),
        };
        let api = ApiError::parse(&body);
        let class = classify(status, api.as_ref());
        let message = match api {
            Some(a) if !a.message.is_empty() => a.message,
            _ => chela_core::text::prefix(String::from_utf8_lossy(&body).trim(), 300).to_owned(),
        };
        (ProviderError::Api { class, status: Some(status), message, retries: 0 }, retry_after)
    }

    /// What to tell the person about `err`, in one sentence.
    pub fn explain(&self, err: &ProviderError, key_layer: &Layer) -> String {
        let who = self.describe();
        let tried = |retries: u32| match retries {
            0 => String::new(),
            1 => " after 1 retry".to_owned(),
            n => format!(" after {n} retries"),
        };
        match err {
            ProviderError::Api { class, status, message, retries } => {
                let code = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
                match class {
                    ErrorClass::Auth => format!(
                        "The provider {who} rejected the API key{code}; set a valid one with `chela config set llm.api_key <KEY>`{}.",
                        match key_layer {
                            Layer::Env(var) =>
                                format!(" or fix the {var} environment variable, which is where this key came from"),
                            _ => format!(" or the {} environment variable", self.kind.key_env()),
                        }
                    ),
                    ErrorClass::RateLimited => format!(
                        "The provider {who} is rate-limiting requests{code}{}; wait a minute and try again.",
                        tried(*retries)
                    ),
                    ErrorClass::Unavailable => {
                        format!("The provider {who} is unavailable{code}{}; try again later.", tried(*retries))
                    }
                    ErrorClass::Quota => {
                        format!("The provider {who} says the account has no credit or quota left{code}: {message}")
                    }
                    ErrorClass::ContextTooLong => format!(
                        "The conversation is too long for {}'s context window{code}; start a fresh one with `/new` (or `chela chat --new`), or lower `agent.history_budget`.",
                        self.model
                    ),
                    ErrorClass::NotFound => format!(
                        "The provider {who} answered 404 ({message}); check `llm.model` ({}) and `llm.base_url`.",
                        self.model
                    ),
                    ErrorClass::BadRequest => format!("The provider {who} refused the request{code}: {message}"),
                }
            }
            ProviderError::Network { error, retries } => format!(
                "Could not reach {who}{}: {error}. Check the network, `llm.base_url` and `proxy.url`.",
                tried(*retries)
            ),
            ProviderError::Malformed(detail) => {
                format!("The provider {who} sent a response Chela could not read ({detail}).")
            }
            ProviderError::Interrupted(detail) => {
                format!("The answer from {who} broke off midway ({detail}); send the message again.")
            }
        }
    }
}

/// Why a model call failed, classified by what to do about it.
#[derive(Debug)]
pub enum ProviderError {
    Api {
        class: ErrorClass,
        status: Option<u16>,
        message: String,
        retries: u32,
    },
    Network {
        error: NetError,
        retries: u32,
    },
    Malformed(String),
    /// The stream failed after part of the answer was shown.
    Interrupted(String),
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderError::Api { class, status, message, .. } => write!(f, "{class:?} ({status:?}): {message}"),
            ProviderError::Network { error, .. } => write!(f, "{error}"),
            ProviderError::Malformed(d) | ProviderError::Interrupted(d) => f.write_str(d),
        }
    }
}

impl ProviderError {
    fn network(error: NetError) -> ProviderError {
        ProviderError::Network { error, retries: 0 }
    }

    fn from_stream(e: StreamError) -> ProviderError {
        match e {
            StreamError::Api(api) => ProviderError::Api {
                class: classify_stream_error(&api),
                status: None,
                message: if api.message.is_empty() { api.kind } else { api.message },
                retries: 0,
            },
            other => ProviderError::Malformed(other.to_string()),
        }
    }

    fn retryable(&self) -> bool {
        match self {
            ProviderError::Api { class, .. } => class.is_retryable(),
            ProviderError::Network { error, .. } => error.is_retryable(),
            ProviderError::Malformed(_) | ProviderError::Interrupted(_) => false,
        }
    }

    fn with_retries(self, n: u32, shown: bool) -> ProviderError {
        match self {
            ProviderError::Api { class, status, message, .. } if !shown || !class.is_retryable() => {
                ProviderError::Api { class, status, message, retries: n }
            }
            ProviderError::Network { error, .. } if !shown => ProviderError::Network { error, retries: n },
            ProviderError::Malformed(d) => ProviderError::Malformed(d),
            other if shown => ProviderError::Interrupted(other.to_string()),
            other => other,
        }
    }

    /// Whether this is the provider rejecting the key.
    pub fn is_auth(&self) -> bool {
        matches!(self, ProviderError::Api { class: ErrorClass::Auth, .. })
    }
}

/// A number in [0, 1) that differs between calls and processes, for backoff jitter.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, RandomState};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let h = RandomState::new().hash_one(n);
    // The top 53 bits fill an f64 mantissa exactly.
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::ClientOptions;
    use chela_proto::chat::{Message, ToolChoice};

    fn provider(toml: &str) -> Provider {
        let cfg = Config::from_layers(Some(toml), None, &[]).unwrap();
        Provider::from_config(&cfg, HttpClient::new(ClientOptions::default())).unwrap()
    }

    fn body(p: &Provider) -> serde_json::Value {
        let messages = [Message::user_text("hi")];
        let call = ModelCall { system: "s", messages: &messages, tool_choice: ToolChoice::Auto };
        serde_json::from_str(&p.body(&call, &[], true)).unwrap()
    }

    #[test]
    fn openai_itself_gets_max_completion_tokens_and_compatible_servers_max_tokens() {
        let official = provider("[llm]\nprovider = \"openai\"\napi_key = \"k\"");
        assert_eq!(official.url(), "https://api.openai.com/v1/chat/completions");
        assert_eq!(body(&official)["max_completion_tokens"], 4096);
        let local = provider("[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"");
        assert_eq!(local.url(), "http://127.0.0.1:11434/v1/chat/completions");
        assert_eq!(body(&local)["max_tokens"], 4096);
        let anthropic = provider("[llm]\napi_key = \"k\"");
        assert_eq!(anthropic.url(), "https://api.anthropic.com/v1/messages");
        assert_eq!(body(&anthropic)["max_tokens"], 4096);
    }

    #[test]
    fn a_hosted_provider_without_a_key_says_how_to_set_one() {
        let cfg = Config::from_layers(None, None, &[]).unwrap();
        let e = Provider::from_config(&cfg, HttpClient::new(ClientOptions::default())).err().unwrap().to_string();
        assert!(e.contains("chela config set llm.api_key") && e.contains("ANTHROPIC_API_KEY"), "{e}");
    }
}
