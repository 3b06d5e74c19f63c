//! The LLM providers: Anthropic Messages and OpenAI-compatible Chat Completions over HTTP.
//!
//! Everything about a call that is not IO (URL and headers, retries and backoff, the shown-text
//! rule, idle and overall deadlines, classifying errors, the reply bounds) is
//! `chela_core::exchange`'s; this module is its tokio driver: it sends, reads, waits, and yields
//! between body pieces so a cancel is noticed whatever the server sends.

use std::time::Duration;

use bytes::Bytes;
use chela_core::agent::ModelCall;
use chela_core::config as keys;
use chela_core::exchange::{Context, Endpoint, Exchange, NetFailure, Options, Outcome};
use chela_core::retry::Backoff;
use chela_proto::chat::{Message, Reply, ToolChoice, ToolSpec, Update};
use hyper::http::Method;
use tokio::time::{Instant, sleep_until};

pub use chela_core::exchange::Kind;
/// Why a model call failed: the core's typed error.
pub use chela_core::exchange::ModelError as ProviderError;

use crate::config::{Config, Layer};
use crate::net::{Guard, HttpClient, NetError, Request as HttpRequest};

/// The defaults live in `chela_core::config`, so `chela config show` prints the same ones.
fn default_base_url(kind: Kind) -> &'static str {
    keys::default_base_url(kind_name(kind))
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Anthropic => "anthropic",
        Kind::OpenAi => "openai",
    }
}

fn default_model(kind: Kind) -> &'static str {
    keys::default_model(kind_name(kind))
}

fn key_env(kind: Kind) -> &'static str {
    match kind {
        Kind::Anthropic => "ANTHROPIC_API_KEY",
        Kind::OpenAi => "OPENAI_API_KEY",
    }
}

/// A configured provider.
#[derive(Clone)]
pub struct Provider {
    endpoint: Endpoint,
    pub model: String,
    options: Options,
    http: HttpClient,
    /// Where the key came from, for the sentence about a rejected one.
    key_layer: Layer,
    /// `llm.prompt_cache`: mark the stable prefix (Anthropic breakpoints).
    cache_marks: bool,
    /// Whether this provider is sent OpenAI's `prompt_cache_key` (`llm.prompt_cache_key`).
    cache_key: bool,
}

impl Provider {
    /// Builds the provider from the configuration, or explains what to set.
    pub fn from_config(cfg: &Config, http: HttpClient) -> anyhow::Result<Provider> {
        let kind = match cfg.get(keys::LLM_PROVIDER) {
            "openai" => Kind::OpenAi,
            _ => Kind::Anthropic,
        };
        let api_key = cfg.get(keys::LLM_API_KEY).to_owned();
        let base_url = match cfg.get(keys::LLM_BASE_URL) {
            "" => default_base_url(kind).to_owned(),
            url => url.to_owned(),
        };
        // Local servers (Ollama, llama.cpp, vLLM) usually need no key; hosted ones do.
        let (api_key, local) = crate::keyrule::api_key_rule(&api_key, &base_url);
        if api_key.is_empty() && !local {
            anyhow::bail!(
                "No API key is configured for {}. Set one with `chela config set llm.api_key <KEY>` or the {} environment variable \
                 (or choose another provider with `chela config set llm.provider openai` and `llm.base_url`).",
                cfg.get(keys::LLM_PROVIDER),
                key_env(kind)
            );
        }
        let model = match cfg.get(keys::LLM_MODEL) {
            "" => default_model(kind).to_owned(),
            m => m.to_owned(),
        };
        let secs = |key| Duration::from_secs(cfg.int(key).unsigned_abs());
        let options = Options {
            backoff: Backoff {
                max_retries: u32::try_from(cfg.int(keys::LLM_MAX_RETRIES)).unwrap_or(4),
                ..Options::HOST.backoff
            },
            idle: secs(keys::LLM_TIMEOUT_SECS),
            deadline: secs(keys::LLM_DEADLINE_SECS),
            ..Options::HOST
        };
        let endpoint = Endpoint {
            kind,
            base_url,
            api_key,
            model: model.clone(),
            max_tokens: u32::try_from(cfg.int(keys::LLM_MAX_TOKENS)).unwrap_or(4096),
            stream: cfg.bool(keys::LLM_STREAM),
        };
        let cache_key = kind == Kind::OpenAi
            && match cfg.get(keys::LLM_PROMPT_CACHE_KEY) {
                "on" => true,
                "off" => false,
                // Only OpenAI itself is known to take it; a strict compatible server would refuse
                // every request over one unknown field.
                _ => endpoint.openai_dialect() == chela_proto::openai::Dialect::OPENAI,
            };
        Ok(Provider {
            endpoint,
            model,
            options,
            http,
            key_layer: cfg.entry(keys::LLM_API_KEY).layer.clone(),
            cache_marks: cfg.bool(keys::LLM_PROMPT_CACHE),
            cache_key,
        })
    }

    /// The same provider answering with `model` (the chat's `/model NAME`).
    pub fn with_model(&self, model: &str) -> Provider {
        let mut p = self.clone();
        model.clone_into(&mut p.model);
        model.clone_into(&mut p.endpoint.model);
        p
    }

    /// The same provider set up for a cheap check: one token, no streaming, no retries.
    pub fn probe(&self) -> Provider {
        let mut p = self.clone();
        p.endpoint.max_tokens = 1;
        p.endpoint.stream = false;
        p.options.backoff.max_retries = 0;
        p.options.idle = p.options.idle.min(Duration::from_secs(20));
        p.options.deadline = p.options.deadline.min(Duration::from_secs(30));
        p
    }

    /// The same provider asking for whole replies instead of streams: for calls whose text
    /// nobody watches arrive (a summary).
    pub fn unstreamed(&self) -> Provider {
        let mut p = self.clone();
        p.endpoint.stream = false;
        p
    }

    /// A short name for messages: "anthropic (https://api.anthropic.com)".
    pub fn describe(&self) -> String {
        format!("{} ({})", kind_name(self.endpoint.kind), self.endpoint.base_url)
    }

    /// Makes one model call, retrying what is worth retrying. Text is reported through
    /// `on_update` as it streams in. Dropping the future cancels the call.
    // Boxed behind a plain function: an async fn's state machine is compiled into every crate
    // that awaits it (fat LTO cannot merge the copies); a boxed one only here. One allocation
    // per model call.
    #[inline(never)]
    pub fn complete<'a>(
        &'a self,
        call: &'a ModelCall<'_>,
        tools: &'a [ToolSpec<'_>],
        on_update: &'a mut (dyn FnMut(Update<'_>) + Send),
    ) -> crate::net::BoxFuture<'a, Result<Reply, ProviderError>> {
        Box::pin(self.complete_call(call, tools, on_update))
    }

    async fn complete_call(
        &self,
        call: &ModelCall<'_>,
        tools: &[ToolSpec<'_>],
        on_update: &mut (dyn FnMut(Update<'_>) + Send),
    ) -> Result<Reply, ProviderError> {
        let mut body = String::with_capacity(4096);
        self.endpoint.write_body(&self.cache_policy(call), tools, &mut body);
        let body = Bytes::from(body);
        let clock = Clock(Instant::now());
        let mut ex = Exchange::new(self.endpoint.clone(), self.options, clock.now(), seed());
        loop {
            ex.start(clock.now());
            if ex.wants_input() {
                self.attempt(&mut ex, body.clone(), &clock, on_update).await;
            }
            match ex.poll_outcome() {
                Some(Outcome::Reply(reply)) => return Ok(reply),
                Some(Outcome::Failed(e)) => return Err(e),
                Some(Outcome::RetryAt(t)) => {
                    let why = ex.last_failure().map(ToString::to_string).unwrap_or_default();
                    let wait = Duration::from_millis(t.saturating_sub(clock.now()));
                    chela_log::info!("{} failed ({why}); retry {} in {wait:?}", self.describe(), ex.retries());
                    on_update(Update::Retrying {
                        why: &why,
                        wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    });
                    sleep_until(clock.at(t)).await;
                }
                // `attempt` reads until the exchange wants no more, so an outcome is there.
                None => return Err(ProviderError::Malformed("the call ended without an answer".into())),
            }
        }
    }

    /// One message, no system prompt, no tools: the call that checks a provider's settings
    /// (`chela doctor`, `chela setup`, the console's setup form).
    pub async fn ask(&self, text: &str) -> Result<Reply, ProviderError> {
        let messages = [Message::user_text(text)];
        let call = ModelCall {
            system: "",
            messages: &messages,
            tool_choice: ToolChoice::Auto,
            cache: Default::default(),
            format: None,
        };
        self.complete(&call, &[], &mut |_| {}).await
    }

    /// `call` with the cache hints this provider takes: marks unless switched off, the key only
    /// where it is accepted.
    fn cache_policy<'a>(&self, call: &ModelCall<'a>) -> ModelCall<'a> {
        let mut call = *call;
        call.cache.mark &= self.cache_marks;
        if !self.cache_key {
            call.cache.key = None;
        }
        call
    }

    /// One HTTP exchange, fed into `ex` until it has its outcome.
    async fn attempt(
        &self,
        ex: &mut Exchange,
        body: Bytes,
        clock: &Clock,
        on_update: &mut (dyn FnMut(Update<'_>) + Send),
    ) {
        let head = ex.head();
        let headers = head.headers.into_iter().map(|(n, v)| (n.to_owned(), v)).collect();
        // The exchange's idle gap also bounds the wait for the head; its deadline bounds both.
        let req = HttpRequest {
            method: Method::POST,
            url: head.url,
            headers,
            body,
            timeout: self.options.idle,
            guard: Guard::AllowAll,
        };
        let wake = clock.at(ex.poll_timeout().unwrap_or(u64::MAX));
        let mut resp = tokio::select! {
            r = self.http.send(req) => match r {
                Ok(resp) => resp,
                Err(e) => return ex.handle_net_error(net_failure(&e), clock.now()),
            },
            () = sleep_until(wake) => return ex.handle_timeout(clock.now()),
        };
        {
            let headers: Vec<(&str, &str)> =
                resp.headers.iter().filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?))).collect();
            ex.handle_head(resp.status, &headers, clock.now());
        }
        while ex.wants_input() {
            let wake = clock.at(ex.poll_timeout().unwrap_or(u64::MAX));
            tokio::select! {
                // The exchange keeps the idle clock; the read itself only ends with the deadline.
                piece = resp.chunk(self.options.deadline) => match piece {
                    Ok(Some(bytes)) => ex.handle_body(&bytes, clock.now(), on_update),
                    Ok(None) => ex.handle_end(clock.now(), on_update),
                    Err(e) => ex.handle_net_error(net_failure(&e), clock.now()),
                },
                () = sleep_until(wake) => ex.handle_timeout(clock.now()),
            }
            // Each piece is bounded work; yielding between them lets a cancel (Ctrl-C) in while
            // a server floods the socket.
            tokio::task::yield_now().await;
        }
    }

    /// What to tell the person about `err`, in one sentence.
    pub fn explain(&self, err: &ProviderError, key_layer: &Layer) -> String {
        let key_fix = match key_layer {
            Layer::Env(var) => format!(" or fix the {var} environment variable, which is where this key came from"),
            _ => format!(" or the {} environment variable", key_env(self.endpoint.kind)),
        };
        err.explain(&Context { who: &self.describe(), model: &self.model, key_fix: &key_fix })
    }

    /// [`Provider::explain`] with the key's own origin: the sentence the session records.
    pub fn tell(&self, err: &ProviderError) -> String {
        self.explain(err, &self.key_layer)
    }
}

/// Milliseconds since the call began: the exchange's clock.
struct Clock(Instant);

impl Clock {
    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn at(&self, ms: u64) -> Instant {
        // Far enough for "never" without overflowing `Instant`.
        self.0 + Duration::from_millis(ms.min(u64::from(u32::MAX)))
    }
}

/// Sorts a network error by what the exchange does next.
fn net_failure(e: &NetError) -> NetFailure {
    let reason = e.to_string();
    if e.is_unreachable() {
        NetFailure::Unreachable(reason)
    } else if e.is_retryable() {
        NetFailure::Transient(reason)
    } else {
        NetFailure::Fatal(reason)
    }
}

/// A seed that differs between calls and processes, for the backoff jitter.
fn seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    RandomState::new().hash_one(N.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
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
        let call = ModelCall {
            system: "s",
            messages: &messages,
            tool_choice: ToolChoice::Auto,
            cache: Default::default(),
            format: None,
        };
        let mut body = String::new();
        p.endpoint.write_body(&call, &[], &mut body);
        serde_json::from_str(&body).unwrap()
    }

    /// The body `p` sends for a call with every cache hint set.
    fn cached_body(p: &Provider) -> String {
        let messages = [Message::user_text("before"), Message::assistant_text("ok"), Message::user_text("hi")];
        let cache =
            chela_proto::chat::Cache { mark: true, system_stable: 2, history_end: Some(1), key: Some("chela-k") };
        let call =
            ModelCall { system: "st|rest", messages: &messages, tool_choice: ToolChoice::Auto, cache, format: None };
        let mut body = String::new();
        p.endpoint.write_body(&p.cache_policy(&call), &[], &mut body);
        body
    }

    #[test]
    fn the_cache_key_goes_only_where_it_is_accepted_and_marks_can_be_switched_off() {
        let official = provider("[llm]\nprovider = \"openai\"\napi_key = \"k\"");
        assert!(cached_body(&official).contains(r#""prompt_cache_key":"chela-k""#));
        let local = provider("[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"");
        assert!(!cached_body(&local).contains("prompt_cache_key"), "a compatible server may refuse unknown fields");
        let forced =
            provider("[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nprompt_cache_key = \"on\"");
        assert!(cached_body(&forced).contains("prompt_cache_key"));
        let never = provider("[llm]\nprovider = \"openai\"\napi_key = \"k\"\nprompt_cache_key = \"off\"");
        assert!(!cached_body(&never).contains("prompt_cache_key"));
        let anthropic = provider("[llm]\napi_key = \"k\"");
        let body = cached_body(&anthropic);
        assert_eq!(body.matches("cache_control").count(), 2, "the stable system block and the history end: {body}");
        assert!(!body.contains("prompt_cache_key"));
        let off = provider("[llm]\napi_key = \"k\"\nprompt_cache = false");
        assert!(!cached_body(&off).contains("cache_control"));
    }

    #[test]
    fn openai_itself_gets_max_completion_tokens_and_compatible_servers_max_tokens() {
        let official = provider("[llm]\nprovider = \"openai\"\napi_key = \"k\"");
        assert_eq!(official.endpoint.url(), "https://api.openai.com/v1/chat/completions");
        assert_eq!(body(&official)["max_completion_tokens"], 4096);
        let local = provider("[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"");
        assert_eq!(local.endpoint.url(), "http://127.0.0.1:11434/v1/chat/completions");
        assert_eq!(body(&local)["max_tokens"], 4096);
        let anthropic = provider("[llm]\napi_key = \"k\"");
        assert_eq!(anthropic.endpoint.url(), "https://api.anthropic.com/v1/messages");
        assert_eq!(body(&anthropic)["max_tokens"], 4096);
    }

    #[test]
    fn a_hosted_provider_without_a_key_says_how_to_set_one() {
        let cfg = Config::from_layers(None, None, &[]).unwrap();
        let e = Provider::from_config(&cfg, HttpClient::new(ClientOptions::default())).err().unwrap().to_string();
        assert!(e.contains("chela config set llm.api_key") && e.contains("ANTHROPIC_API_KEY"), "{e}");
    }
}
