//! The gateway's one error type: each variant is an HTTP status, each carries the sentence the
//! person (or the script's author) reads, sent as `{"error": "…"}`.

use std::fmt;

use hyper::StatusCode;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};

use super::{Resp, json};

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiError {
    /// 400: the request is malformed (bad JSON, a missing field, a bad name).
    BadRequest(String),
    /// 401: a token is needed and none (or a wrong one) was given.
    Unauthorized,
    /// 403: refused whoever asks (another site's page, a host name that is not this machine).
    Forbidden(String),
    NotFound(String),
    MethodNotAllowed(String),
    /// 408: the body did not arrive in time.
    Timeout(String),
    /// 409: the request fits, but the state does not allow it (a core group).
    Conflict(String),
    /// 413
    TooLarge(String),
    /// 429 / 503: Chela is busy or stopping; try again.
    Busy(String),
    /// 502: the model could not answer.
    Upstream(String),
    /// 500: something on this machine failed (a file could not be written).
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Upstream(_) => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn into_response(self) -> Resp {
        let status = self.status();
        let mut resp = json(status, &serde_json::json!({ "error": self.to_string() }));
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"chela\""));
        }
        resp
    }

    /// A failure of this machine, logged in full and told in a sentence.
    pub fn internal(what: &str, e: impl fmt::Display) -> ApiError {
        tracing::warn!("gateway: {what}: {e}");
        ApiError::Internal(format!("{what}: {e}"))
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Unauthorized => f.write_str(
                "This gateway needs its token: send `Authorization: Bearer <gateway.token>` (or `?token=` on a \
                 WebSocket URL). `chela console` prints a one-time login link for the web page; \
                 `chela config get gateway.token` shows where the token is set.",
            ),
            ApiError::BadRequest(s)
            | ApiError::Forbidden(s)
            | ApiError::NotFound(s)
            | ApiError::MethodNotAllowed(s)
            | ApiError::Timeout(s)
            | ApiError::Conflict(s)
            | ApiError::TooLarge(s)
            | ApiError::Busy(s)
            | ApiError::Upstream(s)
            | ApiError::Internal(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ApiError {}
