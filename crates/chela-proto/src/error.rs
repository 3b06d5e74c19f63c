//! Provider error bodies, and what the caller should do about them.
//!
//! Both vendors put a JSON error object in failed responses (and Anthropic also in an `error`
//! stream event). [`ApiError::parse`] reads either shape; [`classify`] turns a status and an
//! error into an [`ErrorClass`] that says whether to retry, shrink the context, or tell the person.

use alloc::borrow::ToOwned;
use alloc::string::String;
use serde::Deserialize;

/// An error the provider described.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ApiError {
    /// Anthropic's `error.type` or OpenAI's `error.type`, e.g. `rate_limit_error`.
    pub kind: String,
    /// OpenAI's `error.code`, e.g. `context_length_exceeded`.
    pub code: String,
    pub message: String,
}

#[derive(Deserialize)]
struct Envelope {
    error: Inner,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Inner {
    Object {
        #[serde(default, rename = "type")]
        kind: Option<String>,
        #[serde(default)]
        code: Option<serde_json::Value>,
        #[serde(default)]
        message: Option<String>,
    },
    // Some OpenAI-compatible servers send `{"error": "text"}`.
    Text(String),
}

impl ApiError {
    /// Reads `{"type":"error","error":{...}}` (Anthropic) or `{"error":{...}}` (OpenAI and
    /// compatible servers). `None` when the body is not such an object.
    pub fn parse(body: &[u8]) -> Option<ApiError> {
        let env: Envelope = serde_json::from_slice(body).ok()?;
        Some(match env.error {
            Inner::Object { kind, code, message } => ApiError {
                kind: kind.unwrap_or_default(),
                code: match code {
                    Some(serde_json::Value::String(s)) => s,
                    Some(serde_json::Value::Number(n)) => alloc::format!("{n}"),
                    _ => String::new(),
                },
                message: message.unwrap_or_default(),
            },
            Inner::Text(message) => ApiError { kind: String::new(), code: String::new(), message },
        })
    }

    /// An error with only a message (for bodies that are not JSON).
    pub fn from_text(text: &str) -> ApiError {
        ApiError { message: text.to_owned(), ..ApiError::default() }
    }

    fn says_context_too_long(&self) -> bool {
        if self.code == "context_length_exceeded" || self.kind == "exceed_context_size_error" {
            return true;
        }
        let m = self.message.to_ascii_lowercase();
        [
            "prompt is too long",
            "maximum context length",
            "context length",
            "context window",
            "exceed context limit",
            "exceeds the available context",
            "too many tokens",
        ]
        .iter()
        .any(|p| m.contains(p))
    }

    fn says_quota(&self) -> bool {
        self.code == "insufficient_quota" || self.kind == "insufficient_quota" || self.kind == "billing_error"
    }
}

/// What the caller should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// Too many requests now: wait (honour `retry-after`) and retry.
    RateLimited,
    /// The provider is down or overloaded: back off and retry.
    Unavailable,
    /// The key was rejected: tell the person to fix it. Retrying will not help.
    Auth,
    /// The account has no credit or quota left. Retrying will not help.
    Quota,
    /// The request is larger than the model's context window.
    ContextTooLong,
    /// The model or endpoint does not exist (often a wrong `base_url` or model name).
    NotFound,
    /// The provider refused the request as malformed.
    BadRequest,
}

impl ErrorClass {
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorClass::RateLimited | ErrorClass::Unavailable)
    }
}

/// Classifies an HTTP status with the error the body described, if any.
pub fn classify(status: u16, err: Option<&ApiError>) -> ErrorClass {
    if let Some(e) = err {
        if e.says_quota() {
            return ErrorClass::Quota;
        }
        if (status == 400 || status == 413 || status == 422) && e.says_context_too_long() {
            return ErrorClass::ContextTooLong;
        }
    }
    match status {
        401 | 403 => ErrorClass::Auth,
        402 => ErrorClass::Quota,
        404 => ErrorClass::NotFound,
        408 | 409 | 425 | 429 => ErrorClass::RateLimited,
        413 => ErrorClass::ContextTooLong,
        500..=599 => ErrorClass::Unavailable,
        _ => ErrorClass::BadRequest,
    }
}

/// Classifies an error that arrived inside a stream (no status), by its type.
pub fn classify_stream_error(err: &ApiError) -> ErrorClass {
    match err.kind.as_str() {
        "rate_limit_error" => ErrorClass::RateLimited,
        "overloaded_error" | "api_error" | "server_error" | "timeout_error" => ErrorClass::Unavailable,
        "authentication_error" | "permission_error" => ErrorClass::Auth,
        "not_found_error" => ErrorClass::NotFound,
        "request_too_large" => ErrorClass::ContextTooLong,
        _ if err.says_quota() => ErrorClass::Quota,
        _ if err.says_context_too_long() => ErrorClass::ContextTooLong,
        _ => ErrorClass::BadRequest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_error_shape() {
        let e = ApiError::parse(
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        )
        .unwrap();
        assert_eq!(e.kind, "invalid_request_error");
        assert_eq!(classify(400, Some(&e)), ErrorClass::ContextTooLong);
        let e = ApiError::parse(
            br#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        )
        .unwrap();
        assert_eq!(classify(401, Some(&e)), ErrorClass::Auth);
        let e =
            ApiError::parse(br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#).unwrap();
        assert_eq!(classify(529, Some(&e)), ErrorClass::Unavailable);
        assert_eq!(classify_stream_error(&e), ErrorClass::Unavailable);
    }

    #[test]
    fn openai_error_shape() {
        let e = ApiError::parse(
            br#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        )
        .unwrap();
        assert_eq!(e.code, "context_length_exceeded");
        assert_eq!(classify(400, Some(&e)), ErrorClass::ContextTooLong);
        let q = ApiError::parse(br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#).unwrap();
        assert_eq!(classify(429, Some(&q)), ErrorClass::Quota);
        let t = ApiError::parse(br#"{"error":"model 'x' not found"}"#).unwrap();
        assert_eq!(t.message, "model 'x' not found");
        assert_eq!(classify(404, Some(&t)), ErrorClass::NotFound);
        let n = ApiError::parse(br#"{"error":{"message":"bad","code":400}}"#).unwrap();
        assert_eq!(n.code, "400");
    }

    proptest::proptest! {
        #[test]
        fn any_body_is_parsed_or_refused_without_panicking(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), status in 100u16..600) {
            let e = ApiError::parse(&body);
            let _ = classify(status, e.as_ref());
        }
    }

    #[test]
    fn statuses_without_bodies() {
        assert_eq!(classify(429, None), ErrorClass::RateLimited);
        assert!(classify(503, None).is_retryable());
        assert!(!classify(401, None).is_retryable());
        assert_eq!(classify(418, None), ErrorClass::BadRequest);
        assert!(ApiError::parse(b"<html>").is_none());
    }
}
