//! Provider error bodies. The first two bytes choose the HTTP status, the rest is the body.
//! What a body says may refine the status's class but never turns a failure the person must fix
//! into one worth retrying, or the reverse; and a parsed error written back in either vendor's
//! shape parses to the same error.
#![no_main]

use chela_proto::error::{ApiError, ErrorClass, classify, classify_stream_error};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (status, body) = match data {
        [a, b, rest @ ..] => (100 + u16::from_le_bytes([*a, *b]) % 500, rest),
        _ => (500, data),
    };
    let err = ApiError::parse(body);
    let class = classify(status, err.as_ref());
    let bare = classify(status, None);
    if class != bare {
        // A body may only say "no quota" or "too long for the context", and the latter only on
        // the statuses a provider uses for a refused request.
        assert!(
            class == ErrorClass::Quota || (class == ErrorClass::ContextTooLong && matches!(status, 400 | 413 | 422)),
            "status {status} is {bare:?} alone but {class:?} with {err:?}"
        );
    }
    let Some(e) = err else { return };
    let _ = classify_stream_error(&e);

    let inner = serde_json::json!({"type": e.kind, "code": e.code, "message": e.message});
    let openai = serde_json::to_vec(&serde_json::json!({ "error": inner })).unwrap_or_default();
    assert_eq!(ApiError::parse(&openai).as_ref(), Some(&e), "OpenAI shape did not round-trip");
    let anthropic = serde_json::to_vec(&serde_json::json!({"type": "error", "error": inner})).unwrap_or_default();
    assert_eq!(ApiError::parse(&anthropic).as_ref(), Some(&e), "Anthropic shape did not round-trip");
});
