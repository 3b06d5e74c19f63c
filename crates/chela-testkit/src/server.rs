//! The HTTP side: the handler that records a request, checks it, takes a script step and
//! renders it in the request's wire format, served by the fakes' shared accept loop
//! ([`crate::accept`]).
//!
//! Bounds: at most [`MAX_CONNECTIONS`] clients at once, [`MAX_BODY_BYTES`] per request body,
//! [`MAX_HEAD_BYTES`] of buffered head, and timeouts on reading the head and the body.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub use crate::accept::{MAX_CONNECTIONS, MAX_HEAD_BYTES};
use crate::answer::{Answer, Asked, Failure, tokens};
use crate::body::ReplyBody;
use crate::hostile::{self, Flood};
use crate::script::{Action, Step};
use crate::state::{Recorded, Shared};
use crate::{anthropic, demo, openai};

/// Largest request body; larger ones get 413.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a broken or dropped reply says.
const CUT_TEXT: &str = "This reply breaks off before it ends, as the script asked.";

/// Accepts connections until `stop` fires (or its sender is dropped).
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, stop: oneshot::Receiver<()>) {
    let counted = Arc::clone(&shared);
    crate::accept::serve_http1(
        listener,
        stop,
        move |req| handle(req, Arc::clone(&shared)),
        move || counted.open_connection(),
    )
    .await;
}

/// Which API a request speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Anthropic,
    OpenAi,
}

impl Format {
    fn of_path(path: &str) -> Option<Format> {
        match path {
            "/v1/messages" => Some(Format::Anthropic),
            "/v1/chat/completions" => Some(Format::OpenAi),
            _ => None,
        }
    }

    /// For errors on unknown paths: OpenAI clients send `Authorization`, Anthropic's do not.
    fn guess(headers: &HeaderMap) -> Format {
        if headers.contains_key(header::AUTHORIZATION) { Format::OpenAi } else { Format::Anthropic }
    }

    fn validate(self, req: &Value) -> Result<(), String> {
        match self {
            Format::Anthropic => anthropic::validate(req),
            Format::OpenAi => openai::validate(req),
        }
    }

    fn auth(self, headers: &HeaderMap, key: &str) -> Result<(), Failure> {
        let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let given = match self {
            Format::Anthropic => value("x-api-key"),
            Format::OpenAi => value("authorization").map(|v| v.strip_prefix("Bearer ").unwrap_or("")),
        };
        match given {
            None => Err(Failure::NoKey),
            Some(k) if k != key => Err(Failure::WrongKey),
            _ if self == Format::Anthropic && value("anthropic-version").is_none() => Err(Failure::NoVersion),
            _ => Ok(()),
        }
    }

    fn body(self, answer: &Answer, asked: &Asked, shared: &Shared) -> Value {
        match self {
            Format::Anthropic => anthropic::message(answer, asked, &shared.ids),
            Format::OpenAi => openai::completion(answer, asked, &shared.ids),
        }
    }

    fn events(self, answer: &Answer, asked: &Asked, shared: &Shared) -> Vec<Bytes> {
        match self {
            Format::Anthropic => anthropic::events(answer, asked, &shared.ids),
            Format::OpenAi => openai::events(answer, asked, &shared.ids),
        }
    }

    fn malformed_events(self, asked: &Asked, shared: &Shared) -> Vec<Bytes> {
        match self {
            Format::Anthropic => anthropic::malformed_events(asked, &shared.ids),
            Format::OpenAi => openai::malformed_events(asked, &shared.ids),
        }
    }

    fn demo(self, req: &Value) -> Answer {
        demo::answer(&match self {
            Format::Anthropic => anthropic::conversation(req),
            Format::OpenAi => openai::conversation(req),
        })
    }

    fn error(self, failure: &Failure, shared: &Shared) -> Response<ReplyBody> {
        let request_id = shared.ids.next("req_01", 22);
        let (status, body) = match self {
            Format::Anthropic => anthropic::error_for(failure, &request_id),
            Format::OpenAi => openai::error_for(failure),
        };
        let mut resp = self.json(status, &body, &request_id);
        if matches!(failure, Failure::NoKey | Failure::WrongKey) && self == Format::OpenAi {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }

    fn request_id_header(self) -> &'static str {
        match self {
            Format::Anthropic => "request-id",
            Format::OpenAi => "x-request-id",
        }
    }

    fn json(self, status: u16, body: &Value, request_id: &str) -> Response<ReplyBody> {
        self.respond(status, "application/json", request_id, ReplyBody::full(body.to_string()))
    }

    fn respond(
        self,
        status: u16,
        content_type: &'static str,
        request_id: &str,
        body: ReplyBody,
    ) -> Response<ReplyBody> {
        let mut resp = Response::new(body);
        *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = resp.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Ok(id) = HeaderValue::from_str(request_id) {
            headers.insert(self.request_id_header(), id);
        }
        resp
    }

    fn stream(self, frames: Vec<Bytes>, gap_ms: u64, shared: &Shared) -> Response<ReplyBody> {
        self.sse(ReplyBody::events(frames, gap_ms), shared)
    }

    fn sse(self, body: ReplyBody, shared: &Shared) -> Response<ReplyBody> {
        let mut resp = self.respond(200, "text/event-stream; charset=utf-8", &shared.ids.next("req_01", 22), body);
        resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        resp
    }
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<ReplyBody>, Infallible> {
    let at = Instant::now();
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let format = Format::of_path(&path);
    let errors_as = format.unwrap_or_else(|| Format::guess(&parts.headers));
    let read = read_body(&parts.headers, body).await;
    let bytes = read.as_ref().map_or(Bytes::new(), Bytes::clone);
    let parsed = serde_json::from_slice::<Value>(&bytes);
    shared.record(Recorded {
        method: parts.method.to_string(),
        path: path.clone(),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_ascii_lowercase(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
        body: bytes.to_vec(),
        json: parsed.as_ref().ok().cloned(),
        at,
    });
    if let Err(failure) = read {
        return Ok(errors_as.error(&failure, &shared));
    }
    let method = parts.method.to_string();
    let Some(format) = format else {
        return Ok(errors_as.error(&Failure::NotFound { method, path }, &shared));
    };
    if parts.method != Method::POST {
        return Ok(format.error(&Failure::MethodNotAllowed { method, path }, &shared));
    }
    if let Some(key) = &shared.expected_key
        && let Err(failure) = format.auth(&parts.headers, key)
    {
        return Ok(format.error(&failure, &shared));
    }
    let req = match parsed {
        Ok(req) => req,
        Err(e) => {
            let why = format!("The request body is not valid JSON: {e}");
            return Ok(format.error(&Failure::BadRequest(why), &shared));
        }
    };
    if let Err(why) = format.validate(&req) {
        return Ok(format.error(&Failure::BadRequest(why), &shared));
    }
    let asked = Asked {
        model: req["model"].as_str().unwrap_or_default().to_string(),
        stream: req["stream"] == true,
        include_usage: req["stream_options"]["include_usage"] == true,
        input_tokens: tokens(bytes.len()),
    };
    shared.released().await;
    Ok(match shared.next_step() {
        Some(step) => scripted(format, step, &asked, &shared).await,
        None => answer(format, &format.demo(&req), &asked, 0, &shared),
    })
}

/// Reads the whole body, within [`MAX_BODY_BYTES`] and [`BODY_TIMEOUT`].
async fn read_body(headers: &HeaderMap, body: Incoming) -> Result<Bytes, Failure> {
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    // Refuse before reading when the client says up front that the body is too big.
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(Failure::TooLarge);
    }
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(Failure::TooLarge),
        Ok(Err(e)) => Err(Failure::BadRequest(format!("The request body could not be read: {e}"))),
        Err(_) => Err(Failure::BadRequest(format!("The request body did not arrive within {BODY_TIMEOUT:?}."))),
    }
}

async fn scripted(format: Format, step: Step, asked: &Asked, shared: &Shared) -> Response<ReplyBody> {
    if step.delay_ms > 0 {
        // Dropped with the connection if the client hangs up (hyper watches for EOF while the
        // response is pending) or with the runtime when the server stops.
        tokio::time::sleep(Duration::from_millis(step.delay_ms)).await;
    }
    let gap = step.chunk_delay_ms;
    match step.action {
        Action::Text(text) => answer(format, &Answer::text(text), asked, gap, shared),
        Action::ToolCalls { text, calls } => answer(format, &Answer { text, calls }, asked, gap, shared),
        Action::Status { status, retry_after, retry_after_ms } => {
            let mut resp = format.error(&Failure::Status(status), shared);
            let headers = resp.headers_mut();
            if let Some(v) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
                headers.insert(header::RETRY_AFTER, v);
            }
            if let Some(ms) = retry_after_ms {
                headers.insert("retry-after-ms", HeaderValue::from(ms));
            }
            resp
        }
        Action::ContextTooLong => format.error(&Failure::ContextTooLong, shared),
        Action::Malformed if asked.stream => format.stream(format.malformed_events(asked, shared), gap, shared),
        Action::Malformed => {
            let whole = Bytes::from(format.body(&Answer::text(CUT_TEXT), asked, shared).to_string());
            let truncated = whole.slice(..whole.len() / 2);
            format.respond(200, "application/json", &shared.ids.next("req_01", 22), ReplyBody::full(truncated))
        }
        Action::DropAfterEvents(n) if asked.stream => {
            let mut frames = format.events(&Answer::text(CUT_TEXT), asked, shared);
            frames.truncate(n);
            format.sse(ReplyBody::cut_after(frames, gap), shared)
        }
        Action::EmptyBlocks(n) => hostile(format, Flood::EmptyBlocks(n), asked, gap, shared),
        Action::EmptyToolCalls(n) => hostile(format, Flood::EmptyToolCalls(n), asked, gap, shared),
        Action::PingsForever => hostile(format, Flood::Pings, asked, gap, shared),
        Action::Trickle(text) => {
            let answer = Answer::text(text);
            let (whole, content_type) = if asked.stream {
                (format.events(&answer, asked, shared), "text/event-stream; charset=utf-8")
            } else {
                (vec![Bytes::from(format.body(&answer, asked, shared).to_string())], "application/json")
            };
            let body = ReplyBody::lazy(hostile::trickle(whole), gap);
            format.respond(200, content_type, &shared.ids.next("req_01", 22), body)
        }
        Action::DropAfterEvents(_) => {
            let whole = Bytes::from(format.body(&Answer::text(CUT_TEXT), asked, shared).to_string());
            let half = whole.slice(..whole.len() / 2);
            let body = ReplyBody::cut_after(vec![half], 0);
            let mut resp = format.respond(200, "application/json", &shared.ids.next("req_01", 22), body);
            // The client is promised the whole body, and gets half of it.
            resp.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(whole.len()));
            resp
        }
    }
}

/// A hostile answer: made lazily as it is sent, streamed or whole as the request asked.
fn hostile(format: Format, flood: Flood, asked: &Asked, gap_ms: u64, shared: &Shared) -> Response<ReplyBody> {
    if asked.stream {
        let body = match format {
            Format::Anthropic => ReplyBody::lazy(hostile::anthropic_stream(flood, asked), gap_ms),
            Format::OpenAi => ReplyBody::lazy(hostile::openai_stream(flood, asked), gap_ms),
        };
        return format.sse(body, shared);
    }
    let id = shared.ids.next("req_01", 22);
    let body = match flood {
        // JSON allows any whitespace before the value: a body that never gets to it.
        Flood::Pings => ReplyBody::lazy(std::iter::repeat_with(|| Bytes::from_static(&[b' '; 1024])), gap_ms),
        _ => ReplyBody::lazy(hostile::whole(format == Format::Anthropic, flood), gap_ms),
    };
    format.respond(200, "application/json", &id, body)
}

/// A successful answer, streamed or whole as the request asked.
fn answer(format: Format, answer: &Answer, asked: &Asked, gap_ms: u64, shared: &Shared) -> Response<ReplyBody> {
    if asked.stream {
        format.stream(format.events(answer, asked, shared), gap_ms, shared)
    } else {
        format.json(200, &format.body(answer, asked, shared), &shared.ids.next("req_01", 22))
    }
}
