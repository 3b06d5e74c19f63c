//! Why a model call failed, classified by what the caller does next, and the sentence that
//! tells the person.

use alloc::format;
use alloc::string::{String, ToString};
use core::fmt;
use core::time::Duration;

use chela_proto::error::{ApiError, ErrorClass, classify_stream_error};
use chela_proto::stream::StreamError;

/// Why a model call failed. Each variant says what the caller does next:
/// - retried inside the exchange already (and now given up): `RateLimited`, `Overloaded`,
///   `Network`;
/// - the run shrinks its history and asks again once: `ContextTooLong`;
/// - tell the person at once: everything else.
///
/// `Display` is a short clause without context; [`ModelError::explain`] is the whole sentence.
/// Neither ever shows a Rust `Debug` form: the sentence is also written into the session, and
/// the model reads it next turn.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelError {
    /// Too many requests (429 and friends), still so after the retries.
    RateLimited { status: Option<u16>, retry_after: Option<Duration>, retries: u32 },
    /// The provider is down or overloaded (5xx, `overloaded_error`), still so after the retries.
    Overloaded { status: Option<u16>, retries: u32 },
    /// The key was rejected.
    Unauthorized { status: Option<u16> },
    /// No credit or quota left.
    Quota { status: Option<u16>, message: String },
    /// The request is larger than the model's context window.
    ContextTooLong { status: Option<u16> },
    /// The model or endpoint does not exist.
    NotFound { message: String },
    /// The provider refused the request.
    BadRequest { status: Option<u16>, message: String },
    /// The name did not resolve or nothing listens there: not retried, since asking again at
    /// once fails the same way.
    Unreachable { url: String, reason: String },
    /// A transient network failure (reset, timeout before the answer, proxy), after the retries;
    /// or one that retrying cannot fix (TLS, an invalid URL).
    Network { reason: String, retries: u32 },
    /// The whole call ran past its overall deadline (`llm.deadline_secs`).
    Timeout { after: Duration },
    /// The server answered with something that is not the format.
    Malformed(String),
    /// The answer failed after part of it was shown; retrying would show it twice.
    Interrupted(String),
    /// The reply broke one of its bounds (bytes, content blocks, tool calls, body size).
    TooLarge(String),
}

/// The facts a sentence needs that only the driver has.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The provider as the person knows it: "anthropic (https://api.anthropic.com)".
    pub who: &'a str,
    /// The model name.
    pub model: &'a str,
    /// How to fix a rejected key, completing "set a valid one with `…`": e.g. " or the
    /// ANTHROPIC_API_KEY environment variable".
    pub key_fix: &'a str,
}

fn tried(retries: u32) -> String {
    match retries {
        0 => String::new(),
        1 => " after 1 retry".into(),
        n => format!(" after {n} retries"),
    }
}

fn code(status: Option<u16>) -> String {
    status.map(|s| format!(" (HTTP {s})")).unwrap_or_default()
}

impl ModelError {
    /// The error a provider's class and message stand for.
    pub fn from_class(class: ErrorClass, status: Option<u16>, message: String, retry_after: Option<Duration>) -> Self {
        match class {
            ErrorClass::RateLimited => ModelError::RateLimited { status, retry_after, retries: 0 },
            ErrorClass::Unavailable => ModelError::Overloaded { status, retries: 0 },
            ErrorClass::Auth => ModelError::Unauthorized { status },
            ErrorClass::Quota => ModelError::Quota { status, message },
            ErrorClass::ContextTooLong => ModelError::ContextTooLong { status },
            ErrorClass::NotFound => ModelError::NotFound { message },
            ErrorClass::BadRequest => ModelError::BadRequest { status, message },
        }
    }

    /// A decoder's failure: a provider error inside a stream, a broken body, or a bound.
    pub fn from_stream(e: StreamError) -> ModelError {
        match e {
            StreamError::Api(api) => {
                let class = classify_stream_error(&api);
                let ApiError { kind, message, .. } = api;
                ModelError::from_class(class, None, if message.is_empty() { kind } else { message }, None)
            }
            e @ (StreamError::TooLarge { .. } | StreamError::TooMany { .. }) => ModelError::TooLarge(e.to_string()),
            other => ModelError::Malformed(other.to_string()),
        }
    }

    /// Whether the same request, sent again a little later, may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ModelError::RateLimited { .. } | ModelError::Overloaded { .. } | ModelError::Network { .. })
    }

    /// Whether this is the provider rejecting the key.
    pub fn is_auth(&self) -> bool {
        matches!(self, ModelError::Unauthorized { .. })
    }

    /// Whether the run should shrink its history and ask again.
    pub fn is_context_too_long(&self) -> bool {
        matches!(self, ModelError::ContextTooLong { .. })
    }

    /// The server's `retry-after`, when it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The same error, saying how many retries came before it; or, when text was already
    /// shown and the failure was of the kind a retry would have fixed, [`ModelError::Interrupted`].
    pub(crate) fn settle(self, retries: u32, shown: bool) -> ModelError {
        if shown && self.is_transient() {
            return ModelError::Interrupted(self.to_string());
        }
        match self {
            ModelError::RateLimited { status, retry_after, .. } => {
                ModelError::RateLimited { status, retry_after, retries }
            }
            ModelError::Overloaded { status, .. } => ModelError::Overloaded { status, retries },
            ModelError::Network { reason, .. } => ModelError::Network { reason, retries },
            other => other,
        }
    }

    /// What to tell the person, in one sentence.
    pub fn explain(&self, ctx: &Context<'_>) -> String {
        let who = ctx.who;
        match self {
            ModelError::Unauthorized { status } => format!(
                "The provider {who} rejected the API key{}; set a valid one with `chela config set llm.api_key <KEY>`{}.",
                code(*status),
                ctx.key_fix
            ),
            ModelError::RateLimited { status, retries, .. } => format!(
                "The provider {who} is rate-limiting requests{}{}; wait a minute and try again.",
                code(*status),
                tried(*retries)
            ),
            ModelError::Overloaded { status, retries } => {
                format!("The provider {who} is unavailable{}{}; try again later.", code(*status), tried(*retries))
            }
            ModelError::Quota { status, message } => {
                format!("The provider {who} says the account has no credit or quota left{}: {message}", code(*status))
            }
            ModelError::ContextTooLong { status } => format!(
                "The conversation is too long for {}'s context window{}; start a fresh one with `/new` (or `chela chat --new`), or lower `agent.history_budget`.",
                ctx.model,
                code(*status)
            ),
            ModelError::NotFound { message } => format!(
                "The provider {who} answered 404 ({message}); check `llm.model` ({}) and `llm.base_url`.",
                ctx.model
            ),
            ModelError::BadRequest { status, message } => {
                format!("The provider {who} refused the request{}: {message}", code(*status))
            }
            ModelError::Unreachable { reason, .. } => {
                format!("Could not reach {who}: {reason}. Check `llm.base_url` and that the server is running.")
            }
            ModelError::Network { reason, retries } => format!(
                "Could not reach {who}{}: {reason}. Check the network, `llm.base_url` and `proxy.url`.",
                tried(*retries)
            ),
            ModelError::Timeout { after } => format!(
                "The provider {who} did not finish its answer within {} s; try again, or raise `llm.deadline_secs`.",
                after.as_secs()
            ),
            ModelError::Malformed(detail) => {
                format!("The provider {who} sent a response Chela could not read ({detail}).")
            }
            ModelError::Interrupted(detail) => {
                format!("The answer from {who} broke off midway ({detail}); send the message again.")
            }
            ModelError::TooLarge(detail) => format!(
                "The provider {who} sent a reply Chela will not hold ({detail}); the call was stopped. Ask for a shorter answer, or check that `llm.base_url` is a real model server."
            ),
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::RateLimited { status, .. } => write!(f, "rate limited{}", code(*status)),
            ModelError::Overloaded { status, .. } => write!(f, "unavailable{}", code(*status)),
            ModelError::Unauthorized { status } => write!(f, "the API key was rejected{}", code(*status)),
            ModelError::Quota { message, .. } => write!(f, "no credit or quota left: {message}"),
            ModelError::ContextTooLong { .. } => f.write_str("the conversation is too long for the context window"),
            ModelError::NotFound { message } => write!(f, "not found: {message}"),
            ModelError::BadRequest { status, message } => write!(f, "request refused{}: {message}", code(*status)),
            ModelError::Unreachable { url, reason } => write!(f, "could not reach {url}: {reason}"),
            ModelError::Network { reason, .. } => f.write_str(reason),
            ModelError::Timeout { after } => write!(f, "no complete answer within {} s", after.as_secs()),
            ModelError::Malformed(d) | ModelError::Interrupted(d) | ModelError::TooLarge(d) => f.write_str(d),
        }
    }
}

impl core::error::Error for ModelError {}
