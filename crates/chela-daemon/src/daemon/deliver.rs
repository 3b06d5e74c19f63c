//! Delivery: the one place where answers leave the daemon, for every channel.
//!
//! A channel hands [`Daemon::converse`](super::Daemon::converse) its message and a [`Reply`]:
//! where the answer goes. That is a chat of a messaging platform (an [`OutletReply`], or the
//! channel's own type when it answers in a thread or edits a preview) or the connection the
//! message came on (a [`Waiter`], awaited by an HTTP or WebSocket handler). Either way the
//! daemon runs the delivery in its own task set, so:
//!
//! - the answers of one chat go out in the order its messages came, even when an earlier
//!   answer is long or held up by the platform ([`Place`]);
//! - a sender revoked while the model worked gets nothing more of that turn (asked again just
//!   before delivering);
//! - a graceful stop sends what is still on its way ([`Deliveries::flush`]) instead of
//!   dropping it with the channel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::BoxFuture;
use super::outlet::Outlet;
use crate::turn::TurnEnd;

/// What a [`Reply`] is given to deliver.
pub struct Answer {
    /// What to show the person: the model's answer, or a sentence saying why there is none.
    pub text: String,
    /// How the turn ended, when the message reached the model; `None` for an answer the daemon
    /// or the channel gave itself (a pairing code, "busy", a command's reply).
    pub end: Option<Result<TurnEnd>>,
}

impl Answer {
    /// An answer that did not come from the model.
    pub fn said(text: impl Into<String>) -> Answer {
        Answer { text: text.into(), end: None }
    }

    /// Whether a turn ran and finished (not failed, not refused before it started).
    pub fn is_done(&self) -> bool {
        matches!(self.end, Some(Ok(TurnEnd::Done(_))))
    }
}

/// Where one message's answer goes.
///
/// Calling order, all from the daemon's delivery task: [`Reply::working`] while the turn runs;
/// [`Reply::preview`] once the chat's earlier answers are out, until `ended` fires; then
/// [`Reply::send`] exactly once, again after the earlier answers. A reply the daemon decides
/// not to deliver (the sender was revoked meanwhile, or the stop's bound ran out) is dropped.
pub trait Reply: Send + 'static {
    /// Runs while the turn works and is dropped when it ends: a "typing" sign.
    fn working(&self) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }

    /// Shows the answer while it is written. Must return soon after `ended` fires, having
    /// finished any request it had started. `may_send` is the sender's admission, now.
    fn preview<'a>(
        &'a mut self,
        ended: oneshot::Receiver<()>,
        may_send: &'a (dyn Fn() -> bool + Sync),
    ) -> BoxFuture<'a, ()> {
        let _ = (ended, may_send);
        Box::pin(async {})
    }

    /// Delivers the answer; failures are the reply's to report (the person is not there to ask).
    fn send(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()>;
}

/// Sends the answer to a chat through the channel's [`Outlet`].
pub struct OutletReply {
    pub outlet: Arc<dyn Outlet>,
    pub chat_id: String,
}

impl Reply for OutletReply {
    fn send(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if let Err(e) = self.outlet.send_text(&self.chat_id, &answer.text).await {
                chela_log::warn!(channel = self.outlet.channel(), chat = %self.chat_id, "an answer was not delivered: {e}");
            }
        })
    }
}

/// Hands the answer to whoever awaits the other end: the handler of the request or connection
/// the message came on. Dropped undelivered, the receiver sees its sender gone.
pub struct Waiter(oneshot::Sender<Answer>);

impl Waiter {
    pub fn new() -> (Waiter, oneshot::Receiver<Answer>) {
        let (tx, rx) = oneshot::channel();
        (Waiter(tx), rx)
    }
}

impl Reply for Waiter {
    fn send(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        // A handler that stopped waiting (the client left) needs nothing.
        let _ = self.0.send(answer);
        Box::pin(async {})
    }
}

/// Chats remembered for ordering before those with nothing in flight are forgotten.
const MAX_ORDERED: usize = 1024;

/// A reply's place in its chat: the turns of a chat end in order, but their answers are sent
/// by separate tasks, and a long one (or one held up by a 429) must not be overtaken.
pub(super) struct Place {
    pub before: Option<oneshot::Receiver<()>>,
    /// Dropped once this answer is sent (or given up): the next one may go.
    pub done: oneshot::Sender<()>,
}

impl Place {
    /// Waits for the chat's previous answer. Cancel-safe: given up midway (the turn ended
    /// first), the wait is still there to finish later.
    pub async fn wait_before(before: &mut Option<oneshot::Receiver<()>>) {
        if let Some(earlier) = before.as_mut() {
            // Dropped (sent or failed) is all that is waited for.
            let _ = earlier.await;
            *before = None;
        }
    }
}

/// The answers on their way, and each chat's latest one.
#[derive(Default)]
pub(super) struct Deliveries {
    tasks: Mutex<JoinSet<()>>,
    /// Per `(channel, chat)`, the signal that its latest answer was sent. Bounded by pruning
    /// the chats with nothing in flight; what is in flight is bounded by the session hub.
    order: Mutex<HashMap<(String, String), oneshot::Receiver<()>>>,
}

impl Deliveries {
    pub fn place(&self, channel: &str, chat_id: &str) -> Place {
        let mut order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        if order.len() >= MAX_ORDERED {
            order.retain(|_, sent| matches!(sent.try_recv(), Err(oneshot::error::TryRecvError::Empty)));
        }
        let (done, next) = oneshot::channel();
        Place { before: order.insert((channel.to_owned(), chat_id.to_owned()), next), done }
    }

    /// Runs `task` in the set; finished tasks are reaped first, so the set holds only what is
    /// in flight.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        while tasks.try_join_next().is_some() {}
        tasks.spawn(crate::tasks::boxed(task));
    }

    /// How many deliveries are on their way.
    pub fn in_flight(&self) -> usize {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        while tasks.try_join_next().is_some() {}
        tasks.len()
    }

    /// Waits until every delivery is done, including those started meanwhile. The caller bounds
    /// it; when it gives up, the tasks taken so far are aborted as this future is dropped.
    pub async fn flush(&self) {
        loop {
            let mut set = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
            if set.is_empty() {
                return;
            }
            while let Some(done) = set.join_next().await {
                if let Err(e) = done
                    && e.is_panic()
                {
                    chela_log::warn!("a delivery failed: {e}");
                }
            }
        }
    }
}
