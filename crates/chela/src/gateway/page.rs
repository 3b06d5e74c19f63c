//! The web page at `/`. It is written apart (`gateway/page/index.html`, another piece of work);
//! until it is part of the build, `/` says where the gateway's endpoints are instead.

use super::{ApiError, Resp};

pub fn index() -> Result<Resp, ApiError> {
    Err(ApiError::NotFound(
        "This build of Chela has no web page yet. The gateway serves /ws (WebSocket chat), \
         /v1/chat/completions (OpenAI-compatible), /api/* and /health."
            .to_owned(),
    ))
}
