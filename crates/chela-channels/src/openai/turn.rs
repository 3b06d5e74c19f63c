//! One request's turn through the daemon, the same for both endpoints: the session it runs in,
//! then either the whole answer or a stream whose end each endpoint writes in its own shape.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use chela_core::agent::{Outcome, ToolCall, ToolResult};
use http_body_util::BodyExt;
use hyper::Response;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::sync::{mpsc, oneshot};

use super::{OneShot, Refusal, check_format, check_model, request, session};
use crate::daemon::{Answer, BoxFuture, Conversed, Daemon, Incoming, Reply, Waiter};
use crate::serve::http::{ApiError, Resp};
use crate::serve::stream::ChannelBody;
use crate::turn::{Cancel, ClientTurn, Observer, TurnEnd};

/// A checked request, ready to run as one Chela turn.
pub(super) struct Turn {
    daemon: Arc<Daemon>,
    incoming: Incoming,
    client: ClientTurn,
    /// Closes a one-shot request's session once answered.
    close: OneShot,
    pub stream: bool,
    pub include_usage: bool,
}

impl Turn {
    /// Checks the model and the answer's format, and names the session: the one the request
    /// names keeps its history; otherwise the client's messages are the whole conversation.
    pub fn new(daemon: &Arc<Daemon>, headers: &HeaderMap, mut req: request::Chat) -> Result<Turn, Refusal> {
        check_model(daemon, req.model.as_deref())?;
        check_format(daemon, req.format.as_ref())?;
        let (chat, one_shot) = session(req.user_field.as_deref(), headers)?;
        let client = ClientTurn {
            history: if one_shot { Some(req.stateless_history()?) } else { None },
            instructions: req.instructions,
            tools: req.tools,
            format: req.format,
        };
        let incoming = Incoming {
            channel: "api".to_owned(),
            chat_id: chat.clone(),
            sender: "owner".to_owned(),
            user: req.user,
            cancel: Cancel::default(),
        };
        let close = OneShot { daemon: Arc::clone(daemon), chat: one_shot.then_some(chat) };
        Ok(Turn {
            daemon: Arc::clone(daemon),
            incoming,
            client,
            close,
            stream: req.stream,
            include_usage: req.include_usage,
        })
    }

    /// Runs the turn to its end; the daemon's own sentence (busy, stopping), a refused client and
    /// a failed turn become the matching error.
    pub async fn whole(self) -> Result<Whole, Refusal> {
        let Turn { daemon, incoming, client, close, .. } = self;
        let handed = Arc::new(Mutex::new(Vec::new()));
        let observer = Box::new(Collect(Arc::clone(&handed)));
        let (reply, answer) = Waiter::new();
        let conversed = daemon.converse_with(incoming, Some(Box::new(client)), observer, Box::new(reply));
        let answer = answer.await;
        close.close().await;
        let answer = match (conversed, answer) {
            (Conversed::Queued, Ok(a)) => a,
            (_, Ok(a)) => return Err(ApiError::Busy(a.text).into()),
            (_, Err(_)) => return Err(refused().into()),
        };
        match answer.end {
            Some(Ok(TurnEnd::Done(outcome))) => {
                let calls = std::mem::take(&mut *handed.lock().unwrap_or_else(PoisonError::into_inner));
                Ok(Whole { text: answer.text, outcome, calls })
            }
            _ => Err(ApiError::Upstream(answer.text).into()),
        }
    }

    /// Starts the turn streamed: `observer` sends the text as it comes and `end` writes the
    /// stream's last events once the turn ends. The daemon's own sentence (busy, stopping) is
    /// answered with an error status instead of a stream. `first` are the events sent before any
    /// text.
    pub async fn streamed(
        self,
        rx: mpsc::Receiver<Bytes>,
        observer: Box<dyn Observer + Send>,
        end: Box<dyn StreamEnd>,
        first: impl FnOnce(),
    ) -> Result<Resp, Refusal> {
        let Turn { daemon, incoming, client, close, .. } = self;
        let (said_tx, said) = oneshot::channel();
        let reply = Ending { end, close, said: Some(said_tx) };
        match daemon.converse_with(incoming, Some(Box::new(client)), observer, Box::new(reply)) {
            Conversed::Queued => {}
            Conversed::Said => {
                let text = said.await.unwrap_or_else(|_| "Chela did not answer".to_owned());
                return Err(ApiError::Busy(text).into());
            }
            Conversed::Dropped => return Err(refused().into()),
        }
        first();
        let mut resp = Response::new(ChannelBody(rx).boxed());
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Ok(resp)
    }
}

/// A turn's whole answer.
pub(super) struct Whole {
    pub text: String,
    pub outcome: Outcome,
    /// The calls of the client's own tools, handed back to it.
    pub calls: Vec<ToolCall>,
}

/// Keeps the calls handed back to the client, for an answer sent whole.
struct Collect(Arc<Mutex<Vec<ToolCall>>>);

impl Observer for Collect {
    fn text(&mut self, _: &str) {}
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
    fn handed_back(&mut self, calls: &[ToolCall]) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(calls);
    }
}

fn refused() -> ApiError {
    ApiError::Forbidden("this client may not talk to Chela".to_owned())
}

/// Writes a streamed answer's last events, after the one-shot session is closed.
pub(super) trait StreamEnd: Send + 'static {
    fn finish(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()>;
}

/// The reply of a streamed turn. The daemon's own sentence comes without a turn end: it goes
/// back to [`Turn::streamed`], which answers with a status.
struct Ending {
    end: Box<dyn StreamEnd>,
    close: OneShot,
    said: Option<oneshot::Sender<String>>,
}

impl Reply for Ending {
    fn send(mut self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if answer.end.is_none() {
                if let Some(said) = self.said.take() {
                    let _ = said.send(answer.text);
                }
                return;
            }
            let Ending { end, close, .. } = *self;
            close.close().await;
            end.finish(answer).await;
        })
    }
}
