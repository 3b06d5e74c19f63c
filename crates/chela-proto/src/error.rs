//! Provider error bodies, and what the caller should do about them.
//!
//! Both vendors put a JSON error object in failed responses (and Anthropic also in an `error`
//! stream event). [`ApiError::parse`] reads either shape; [`classify`] turns a status and an
//! error into an [`ErrorClass`] that says whether to retry, shrink the context, or tell the person.

use alloc::borrow::ToOwned;
use alloc::string::String;

use crate::json::read::{self, Kind, Reader};

/// An error the provider described.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ApiError {
    /// Anthropic's `error.type` or OpenAI's `error.type`, e.g. `rate_limit_error`.
    pub kind: String,
    /// OpenAI's `error.code`, e.g. `context_length_exceeded`.
    pub code: String,
    pub message: String,
}

/// `error`: an object (`type`, `code`, `message`, each optional) or, from some OpenAI-compatible
/// servers, `{"error": "text"}`.
///
/// Read with the pull reader rather than a serde derive (the untagged derive buffered the value
/// in serde's `Content` tree, and any derive links a monomorph of serde_json's parser into the
/// chip's image). What it accepts is what `#[serde(untagged)]` accepted, held against it in the
/// tests: an object whose fields have the right types (`null` counts as absent; unknown keys
/// ignored; a repeated key refused) or a string; not an array.
#[derive(Debug, PartialEq)]
enum Inner {
    Object { kind: Option<String>, code: Option<Code>, message: Option<String> },
    Text(String),
}

/// `error.code`: only a string or a number says anything.
#[derive(Debug, PartialEq)]
enum Code {
    Text(String),
    /// The number as written. An integer is written the one way serde_json printed it (JSON has
    /// no leading zeros); a fraction or an exponent (never seen from a provider) stays as
    /// written, so no float parser or printer is linked for it.
    Number(String),
    Other,
}

fn read_code(r: &mut Reader<'_>) -> read::Result<Option<Code>> {
    Ok(Some(match r.peek()? {
        Kind::Null => {
            r.null()?;
            return Ok(None);
        }
        Kind::String => Code::Text(r.string_owned()?),
        Kind::Number => Code::Number(r.number_text()?.to_owned()),
        _ => {
            r.skip()?;
            Code::Other
        }
    }))
}

fn read_inner(r: &mut Reader<'_>) -> read::Result<Inner> {
    if r.peek()? == Kind::String {
        return r.string_owned().map(Inner::Text);
    }
    if r.peek()? != Kind::Object {
        return Err(r.error("invalid type: expected an error object or text"));
    }
    let (mut kind, mut code, mut message, mut seen) = (None, None, None, 0);
    read::object(r, |r, key| {
        match key {
            "type" => kind = read::field(r, &mut seen, 1, Reader::string_opt)?,
            "code" => code = read::field(r, &mut seen, 2, read_code)?,
            "message" => message = read::field(r, &mut seen, 4, Reader::string_opt)?,
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(Inner::Object { kind, code, message })
}

/// `{"error": …}` with any other keys ignored, as the derived `struct Envelope { error: Inner }`
/// read it; that derive also took the one-element array `[error]`, so this does too.
fn read_envelope(r: &mut Reader<'_>) -> read::Result<Inner> {
    if r.peek()? == Kind::Array {
        r.begin_array()?;
        if !r.next_item()? {
            return Err(r.error("invalid length 0, expected struct Envelope with 1 element"));
        }
        let inner = read_inner(r)?;
        if r.next_item()? {
            return Err(r.error("trailing characters"));
        }
        return Ok(inner);
    }
    let (mut error, mut seen) = (None, 0);
    read::object(r, |r, key| {
        if key == "error" {
            error = Some(read::field(r, &mut seen, 1, read_inner)?);
            Ok(())
        } else {
            r.skip()
        }
    })?;
    error.ok_or_else(|| r.error("missing field `error`"))
}

impl ApiError {
    /// Reads `{"type":"error","error":{...}}` (Anthropic) or `{"error":{...}}` (OpenAI and
    /// compatible servers). `None` when the body is not such an object.
    pub fn parse(body: &[u8]) -> Option<ApiError> {
        Some(match read::read_all(body, read_envelope).ok()? {
            Inner::Object { kind, code, message } => ApiError {
                kind: kind.unwrap_or_default(),
                code: match code {
                    Some(Code::Text(s) | Code::Number(s)) => s,
                    Some(Code::Other) | None => String::new(),
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

    // The untagged derive `Inner` replaced: the hand-written visitor must accept and refuse
    // exactly what it did.
    mod against_untagged {
        use super::*;
        use alloc::string::ToString;
        use alloc::vec::Vec;
        use proptest::prelude::*;

        #[derive(serde::Deserialize, Debug, PartialEq)]
        #[serde(untagged)]
        enum Reference {
            Object {
                #[serde(default, rename = "type")]
                kind: Option<String>,
                #[serde(default)]
                code: Option<serde_json::Value>,
                #[serde(default)]
                message: Option<String>,
            },
            Text(String),
        }

        #[derive(serde::Deserialize)]
        struct RefEnvelope {
            error: Reference,
        }

        /// What a body read as: the object's fields, or the text.
        type Read = Option<(Option<String>, Option<Code>, Option<String>, Option<String>)>;

        fn ours(body: &str) -> Read {
            Some(match read::read_all(body.as_bytes(), read_envelope).ok()? {
                Inner::Object { kind, code, message } => (kind, code, message, None),
                Inner::Text(t) => (None, None, None, Some(t)),
            })
        }

        fn reference(body: &str) -> Read {
            let e: RefEnvelope = serde_json::from_slice(body.as_bytes()).ok()?;
            Some(match e.error {
                Reference::Object { kind, code, message } => {
                    let code = code.map(|c| match c {
                        serde_json::Value::String(s) => Code::Text(s),
                        serde_json::Value::Number(n) => Code::Number(n.to_string()),
                        _ => Code::Other,
                    });
                    (kind, code, message, None)
                }
                Reference::Text(t) => (None, None, None, Some(t)),
            })
        }

        fn scalar() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("null".to_owned()),
                Just("true".to_owned()),
                any::<i32>().prop_map(|n| alloc::format!("{n}")),
                Just("1.5".to_owned()),
                r#"[a-z\\"é]{0,6}"#.prop_map(|t| serde_json::Value::from(t).to_string()),
                Just("[]".to_owned()),
                Just("{}".to_owned()),
                Just(r#"{"a":[1]}"#.to_owned()),
            ]
        }

        fn error_value() -> impl Strategy<Value = String> {
            let key = prop_oneof![Just("type"), Just("code"), Just("message"), Just("other"), Just("typ\\u0065")];
            prop_oneof![
                scalar(),
                proptest::collection::vec(scalar(), 0..5).prop_map(|v| alloc::format!("[{}]", v.join(","))),
                proptest::collection::vec((key, scalar()), 0..5).prop_map(|kv| {
                    let fields: Vec<String> = kv.iter().map(|(k, v)| alloc::format!("\"{k}\":{v}")).collect();
                    alloc::format!("{{{}}}", fields.join(","))
                }),
            ]
        }

        #[test]
        fn shapes_the_untagged_derive_took_and_refused() {
            for e in [
                r#"{"type":"t","code":400,"message":"m"}"#,
                r#""text""#,
                r#"["t","c","m"]"#,
                r#"["t","c","m","x"]"#,
                r#"[]"#,
                r#"{"message":null,"message":"b"}"#,
                r#"{"type":5}"#,
                r#"null"#,
                r#"7"#,
            ] {
                let body = alloc::format!(r#"{{"error":{e}}}"#);
                assert_eq!(ours(&body), reference(&body), "{body}");
            }
            assert!(ours(r#"{"error":["t","c","m"]}"#).is_none());
            assert!(ours(r#"{"error":{"message":null,"message":"b"}}"#).is_none());
        }

        proptest! {
            #[test]
            fn any_error_value_reads_as_the_untagged_derive_read_it(e in error_value()) {
                let body = alloc::format!(r#"{{"type":"error","error":{e}}}"#);
                prop_assert_eq!(ours(&body), reference(&body), "{}", body);
            }

            /// The envelope as the derived struct read it: other keys, a repeated `error`, a
            /// missing one, the array form, trailing bytes.
            #[test]
            fn any_body_reads_as_the_derived_envelope_read_it(
                parts in proptest::collection::vec(
                    (prop_oneof![Just("error"), Just("type"), Just("err\\u006fr"), Just("x")], error_value()),
                    0..4,
                ),
                array in any::<bool>(),
                tail in prop_oneof![Just(""), Just(" \n"), Just("x"), Just("{}")],
            ) {
                let body = if array {
                    let items: Vec<&str> = parts.iter().map(|(_, v)| v.as_str()).collect();
                    alloc::format!("[{}]{tail}", items.join(","))
                } else {
                    let fields: Vec<String> = parts.iter().map(|(k, v)| alloc::format!("\"{k}\":{v}")).collect();
                    alloc::format!("{{{}}}{tail}", fields.join(","))
                };
                prop_assert_eq!(ours(&body), reference(&body), "{}", body);
                prop_assert_eq!(ApiError::parse(body.as_bytes()).is_some(), reference(&body).is_some());
            }
        }

        #[test]
        fn a_fractional_code_stays_as_written() {
            // serde_json printed the float it parsed ("1.5" for "1.50"); no provider sends one.
            let e = ApiError::parse(br#"{"error":{"code":1.50,"message":"m"}}"#).unwrap();
            assert_eq!(e.code, "1.50");
            let e = ApiError::parse(br#"{"error":{"code":-42}}"#).unwrap();
            assert_eq!(e.code, "-42");
        }
    }

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

    // Structured properties: error bodies in each vendor's real shape, with the status the
    // vendor sends, random extra fields, key order and layout, and filler text. Each generated
    // case carries the class it is meant to have; classification must agree.
    mod generated {
        use super::*;
        use alloc::vec::Vec;
        use proptest::prelude::*;
        use serde_json::{Map, Value, json};

        /// Filler for messages. It has no `p`, `x` or `y`, so it can never spell one of the
        /// phrases that mean "context too long" by chance; quotes and backslashes test escaping.
        fn filler() -> impl Strategy<Value = String> {
            r#"[a-oq-wz0-9 .,:'"\\é世]{0,30}"#
        }

        /// (vendor shape, status, type, code, message prefix, intended class)
        const CASES: &[(&str, u16, &str, &str, &str, ErrorClass)] = &[
            (
                "anthropic",
                429,
                "rate_limit_error",
                "",
                "Number of request tokens has exceeded your per-minute rate limit",
                ErrorClass::RateLimited,
            ),
            ("anthropic", 529, "overloaded_error", "", "Overloaded", ErrorClass::Unavailable),
            ("anthropic", 500, "api_error", "", "Internal server error", ErrorClass::Unavailable),
            ("anthropic", 401, "authentication_error", "", "invalid x-api-key", ErrorClass::Auth),
            ("anthropic", 403, "permission_error", "", "Your API key does not have permission", ErrorClass::Auth),
            ("anthropic", 404, "not_found_error", "", "model: claude-nope", ErrorClass::NotFound),
            (
                "anthropic",
                413,
                "request_too_large",
                "",
                "Request exceeds the maximum allowed number of bytes",
                ErrorClass::ContextTooLong,
            ),
            (
                "anthropic",
                400,
                "invalid_request_error",
                "",
                "prompt is too long: 210000 tokens > 200000 maximum",
                ErrorClass::ContextTooLong,
            ),
            ("anthropic", 400, "invalid_request_error", "", "messages: roles must alternate", ErrorClass::BadRequest),
            ("anthropic", 400, "billing_error", "", "Your credit balance is too low", ErrorClass::Quota),
            (
                "openai",
                400,
                "invalid_request_error",
                "context_length_exceeded",
                "This model's maximum context length is 128000 tokens",
                ErrorClass::ContextTooLong,
            ),
            (
                "openai",
                429,
                "insufficient_quota",
                "insufficient_quota",
                "You exceeded your current quota",
                ErrorClass::Quota,
            ),
            (
                "openai",
                429,
                "requests",
                "rate_limit_exceeded",
                "Rate limit reached for gpt-4o",
                ErrorClass::RateLimited,
            ),
            ("openai", 401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided", ErrorClass::Auth),
            (
                "openai",
                404,
                "invalid_request_error",
                "model_not_found",
                "The model `gpt-9` does not exist",
                ErrorClass::NotFound,
            ),
            ("openai", 500, "server_error", "", "The server had an error", ErrorClass::Unavailable),
            (
                "openai",
                400,
                "exceed_context_size_error",
                "",
                "the request exceeds the available context size",
                ErrorClass::ContextTooLong,
            ),
            (
                "openai",
                422,
                "invalid_request_error",
                "",
                "Input validation error: too many tokens",
                ErrorClass::ContextTooLong,
            ),
            ("openai", 400, "invalid_request_error", "", "Invalid value for tool_choice", ErrorClass::BadRequest),
            ("text", 404, "", "", "model 'llama9' not found, try pulling it first", ErrorClass::NotFound),
            ("text", 503, "", "", "upstream unavailable", ErrorClass::Unavailable),
            ("text", 401, "", "", "unauthorized", ErrorClass::Auth),
        ];

        /// A body in the case's shape, with the extras some servers add, in a random key order,
        /// compact or pretty. Returns it with the message it carries.
        fn body(
            case: usize,
            tail: &str,
            extras: &[(String, i64)],
            numeric_code: bool,
            pretty: bool,
            rotate: usize,
        ) -> (Vec<u8>, String) {
            let (shape, _, kind, code, prefix, _) = CASES[case];
            let message = alloc::format!("{prefix}{tail}");
            let mut inner: Vec<(String, Value)> = Vec::new();
            inner.push(("message".into(), Value::from(message.as_str())));
            if !kind.is_empty() {
                inner.push(("type".into(), Value::from(kind)));
            }
            if shape == "openai" {
                inner.push(("param".into(), Value::Null));
                inner.push((
                    "code".into(),
                    if code.is_empty() {
                        if numeric_code { Value::from(400) } else { Value::Null }
                    } else {
                        Value::from(code)
                    },
                ));
            }
            for (k, v) in extras {
                inner.push((alloc::format!("x_{k}"), Value::from(*v)));
            }
            let n = inner.len();
            inner.rotate_left(rotate % n);
            let inner: Map<String, Value> = inner.into_iter().collect();
            let top = match shape {
                "anthropic" => json!({"type": "error", "error": inner, "request_id": "req_011"}),
                "openai" => json!({"error": inner}),
                _ => json!({"error": message}),
            };
            let bytes = if pretty { serde_json::to_vec_pretty(&top) } else { serde_json::to_vec(&top) };
            (bytes.unwrap(), message)
        }

        fn any_case() -> impl Strategy<Value = (usize, String, Vec<(String, i64)>, bool, bool, usize)> {
            (
                0..CASES.len(),
                filler(),
                proptest::collection::vec(("[a-z]{1,5}", any::<i64>()), 0..3),
                any::<bool>(),
                any::<bool>(),
                0usize..8,
            )
        }

        proptest::proptest! {
            #[test]
            fn generated_bodies_parse_and_classify_as_intended((case, tail, extras, numeric, pretty, rotate) in any_case()) {
                let (_, status, kind, code, _, class) = CASES[case];
                let (bytes, message) = body(case, &tail, &extras, numeric, pretty, rotate);
                let e = ApiError::parse(&bytes).expect("a vendor-shaped error body parses");
                prop_assert_eq!(&e.message, &message);
                prop_assert_eq!(e.kind.as_str(), kind);
                if !code.is_empty() {
                    prop_assert_eq!(e.code.as_str(), code);
                } else if numeric && CASES[case].0 == "openai" {
                    prop_assert_eq!(e.code.as_str(), "400");
                }
                prop_assert_eq!(classify(status, Some(&e)), class, "{}", String::from_utf8_lossy(&bytes));
                prop_assert_eq!(classify(status, Some(&e)).is_retryable(), matches!(class, ErrorClass::RateLimited | ErrorClass::Unavailable));
                // Anthropic sends the same objects inside a stream, where there is no status.
                if CASES[case].0 == "anthropic" {
                    prop_assert_eq!(classify_stream_error(&e), class);
                }
            }

            #[test]
            fn a_truncated_or_damaged_body_falls_back_to_the_status(
                (case, tail, extras, numeric, pretty, rotate) in any_case(),
                at in any::<proptest::sample::Index>(),
                flip in any::<proptest::sample::Index>(),
                bit in 0u8..8,
            ) {
                let status = CASES[case].1;
                let (bytes, _) = body(case, &tail, &extras, numeric, pretty, rotate);
                // Cut short (a body that ended early) it is not an error object at all.
                let cut = &bytes[..at.index(bytes.len())];
                prop_assert_eq!(ApiError::parse(cut), None);
                prop_assert_eq!(classify(status, None), classify(status, ApiError::parse(cut).as_ref()));
                // With one byte flipped it may still parse; then it says no more than it says.
                let mut flipped = bytes.clone();
                let i = flip.index(flipped.len());
                flipped[i] ^= 1 << bit;
                if let Some(e) = ApiError::parse(&flipped) {
                    let class = classify(status, Some(&e));
                    prop_assert!(class == classify(status, None) || class == ErrorClass::Quota || class == ErrorClass::ContextTooLong, "{:?} for {}", class, String::from_utf8_lossy(&flipped));
                    prop_assert!(e.message.len() <= flipped.len());
                }
            }
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
