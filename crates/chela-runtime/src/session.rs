//! One owner per conversation: a task per `(channel, chat)` with a bounded inbox.
//!
//! The owner loads the session's history once, keeps it in memory between turns, runs the
//! turns it is sent strictly one after another and appends each to the session file. So two
//! messages to one chat never interleave (neither in the file nor in what the model sees), and
//! different chats run at the same time. Everything is bounded: the waiting turns per chat
//! ([`HubLimits::inbox`]), the live conversations ([`HubLimits::max_live`]); an owner with
//! nothing to do for [`HubLimits::idle`] ends and frees its history.
//!
//! When every slot is taken, the owner used least recently that has nothing queued or running
//! is ended to make room, rather than refusing the new conversation: otherwise one client
//! naming many chats would lock everyone else out until the idle time passes. Nothing is lost:
//! every turn is already in the session file, which the next owner of that chat reads again.
//! Only when every live conversation has a turn in flight is a new one refused.
//!
//! Drive it with [`SessionHub::submit`] (a turn) and [`SessionHub::restart`] (archive and start
//! over, `/new`); both go through the same inbox, so a restart lands between two turns.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinSet;

use chela_core::config as keys;

use crate::app::App;
use crate::config::Config;
use crate::skills::SessionRef;
use crate::turn::{Cancel, FileWork, History, TurnEnd, TurnRequest, load_history, run_turn};
use crate::workspace::{Workspace, archive_session};

mod shared_file;

use shared_file::{Stamp, lock_turn, stamp};

/// The bounds of a [`SessionHub`].
#[derive(Clone, Copy, Debug)]
pub struct HubLimits {
    /// Turns that may wait behind the running one in one chat.
    pub inbox: usize,
    /// Conversations with a live owner at once.
    pub max_live: usize,
    /// How long an owner with nothing to do stays.
    pub idle: Duration,
    /// Where the owners do their file work: the pool, unless the process has one conversation.
    pub files: FileWork,
}

impl HubLimits {
    /// `sessions.max_waiting` and `sessions.max_live`; owners leave after ten quiet minutes.
    pub fn from_config(cfg: &Config) -> HubLimits {
        HubLimits {
            inbox: cfg.usize(keys::SESSIONS_MAX_WAITING),
            max_live: cfg.usize(keys::SESSIONS_MAX_LIVE),
            // Long enough that a conversation's history stays in memory while it goes on, short
            // enough that a day of chats does not keep every one.
            idle: Duration::from_secs(600),
            files: FileWork::Pool,
        }
    }
}

/// Why a request was not queued.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubError {
    /// The chat's inbox is full.
    Busy { channel: String, chat: String, waiting: usize },
    /// Every live conversation has a turn queued or running, so none could be closed.
    Full { live: usize },
}

impl fmt::Display for HubError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HubError::Busy { channel, chat, waiting } => write!(
                f,
                "The conversation {channel}/{chat} is busy: {waiting} message(s) are already waiting for \
                 their answer (sessions.max_waiting). Send this one again once those are answered."
            ),
            HubError::Full { live } => write!(
                f,
                "{live} conversations are open at once, the most Chela keeps (sessions.max_live), and \
                 every one is in the middle of a turn; try again when one of them has answered."
            ),
        }
    }
}

impl std::error::Error for HubError {}

type Key = (String, String);

enum Job {
    Turn(Box<TurnRequest>, oneshot::Sender<anyhow::Result<TurnEnd>>),
    /// Archive the session file and start over.
    Restart(oneshot::Sender<anyhow::Result<()>>),
    /// Archive the session file and end the owner: a one-shot conversation is over.
    Close(oneshot::Sender<anyhow::Result<()>>),
}

struct Live {
    id: u64,
    inbox: mpsc::Sender<Job>,
    /// Jobs queued or running; changed under the `live` lock when one is queued, by the owner
    /// when one ends. Zero means the owner may be ended to make room.
    jobs: Arc<AtomicUsize>,
    /// When a job was last queued here ([`Shared::clock`]): the least recent goes first.
    used: u64,
}

struct Shared {
    /// The settings turns start with; the daemon swaps in a new one when a file changes. `None`
    /// while no model is configured (a daemon's first run): turns are refused with `unconfigured`.
    app: RwLock<Option<Arc<App>>>,
    unconfigured: RwLock<String>,
    ws: Arc<Workspace>,
    limits: HubLimits,
    live: Mutex<HashMap<Key, Live>>,
    next_id: AtomicU64,
    /// Ticks once per queued job: the order conversations were last used in.
    clock: AtomicU64,
    /// Requests queued or running, and a wake-up for [`SessionHub::drained`].
    busy: AtomicUsize,
    idle: Notify,
    /// Cancels the running turns and refuses queued ones: the daemon is stopping.
    stop: Cancel,
    /// The owners' tasks, awaited by [`SessionHub::close_all`]. Ended ones are reaped whenever an
    /// owner starts, so this holds at most `max_live` running owners and the few that left since.
    owners: Mutex<JoinSet<()>>,
}

impl Shared {
    fn app(&self) -> Option<Arc<App>> {
        self.app.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// One request fewer in flight.
    fn done(&self) {
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
}

/// Routes requests to the owner of their conversation, starting owners as needed.
#[derive(Clone)]
pub struct SessionHub {
    shared: Arc<Shared>,
}

/// A queued request; await [`Pending::finish`] for its result.
pub struct Pending<T>(oneshot::Receiver<anyhow::Result<T>>);

impl<T> Pending<T> {
    pub async fn finish(self) -> anyhow::Result<T> {
        self.0.await.unwrap_or_else(|_| {
            Err(anyhow::anyhow!("the conversation's owner stopped unexpectedly; the message was not answered"))
        })
    }
}

impl SessionHub {
    pub fn new(app: Arc<App>, limits: HubLimits) -> SessionHub {
        let ws = Arc::clone(&app.base.ws);
        let hub = SessionHub::unconfigured(ws, limits, String::new());
        hub.set_app(Some(app));
        hub
    }

    /// A hub with no model yet: every turn is answered with `why` until [`SessionHub::set_app`].
    pub fn unconfigured(ws: Arc<Workspace>, limits: HubLimits, why: String) -> SessionHub {
        let limits = HubLimits { inbox: limits.inbox.max(1), max_live: limits.max_live.max(1), ..limits };
        SessionHub {
            shared: Arc::new(Shared {
                app: RwLock::new(None),
                unconfigured: RwLock::new(why),
                ws,
                limits,
                live: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
                clock: AtomicU64::new(0),
                busy: AtomicUsize::new(0),
                idle: Notify::new(),
                stop: Cancel::default(),
                owners: Mutex::default(),
            }),
        }
    }

    /// The settings the next turns start with (turns already running keep theirs).
    pub fn set_app(&self, app: Option<Arc<App>>) {
        *self.shared.app.write().unwrap_or_else(PoisonError::into_inner) = app;
    }

    /// What turns are answered while there is no app.
    pub fn set_unconfigured(&self, why: String) {
        *self.shared.unconfigured.write().unwrap_or_else(PoisonError::into_inner) = why;
    }

    /// Stops: running turns are cancelled (they still save what they did) and queued ones are
    /// answered with a sentence instead of running.
    pub fn stop(&self) {
        self.shared.stop.cancel();
    }

    /// Ends every conversation's owner once its queued jobs are done, and waits for them: the
    /// last step of a stop, after [`SessionHub::drained`], so no owner task outlives the hub's
    /// daemon. Dropping this future aborts the owners still going.
    pub async fn close_all(&self) {
        // Their inboxes' senders go with the entries: each owner sees its inbox end and returns.
        self.shared.live.lock().unwrap_or_else(PoisonError::into_inner).clear();
        let mut owners = std::mem::take(&mut *self.shared.owners.lock().unwrap_or_else(PoisonError::into_inner));
        while let Some(done) = owners.join_next().await {
            if let Err(e) = done {
                chela_log::warn!("a conversation's owner stopped unexpectedly: {e}");
            }
        }
    }

    /// Resolves when no request is queued or running.
    pub async fn drained(&self) {
        loop {
            let notified = self.shared.idle.notified();
            if self.shared.busy.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Requests queued or running now.
    pub fn busy(&self) -> usize {
        self.shared.busy.load(Ordering::Acquire)
    }

    /// Requests ever offered to the hub (refused ones too): unchanged between two looks means
    /// no message came in between, which is how the daemon tells that it has been quiet.
    pub fn activity(&self) -> u64 {
        self.shared.clock.load(Ordering::Acquire)
    }

    /// Queues a turn behind the others of its chat.
    pub fn submit(&self, req: TurnRequest) -> Result<Pending<TurnEnd>, HubError> {
        let key = (req.channel.clone(), req.chat_id.clone());
        let (tx, rx) = oneshot::channel();
        self.send(key, Job::Turn(Box::new(req), tx))?;
        Ok(Pending(rx))
    }

    /// Archives the conversation's file and starts it over, after the turns queued before.
    pub fn restart(&self, channel: &str, chat: &str) -> Result<Pending<()>, HubError> {
        let (tx, rx) = oneshot::channel();
        self.send((channel.to_owned(), chat.to_owned()), Job::Restart(tx))?;
        Ok(Pending(rx))
    }

    /// Archives the conversation's file and frees its owner, after the turns queued before: for
    /// one-shot conversations (an OpenAI-style request without a session), so they neither
    /// hold a live slot for [`HubLimits::idle`] nor stay in `sessions/`.
    pub fn close(&self, channel: &str, chat: &str) -> Result<Pending<()>, HubError> {
        let (tx, rx) = oneshot::channel();
        self.send((channel.to_owned(), chat.to_owned()), Job::Close(tx))?;
        Ok(Pending(rx))
    }

    fn send(&self, key: Key, job: Job) -> Result<(), HubError> {
        let shared = &self.shared;
        // Held only for map work, never across an await. Owners leave under it too, so a job is
        // never handed to an owner that is on its way out.
        let mut live = shared.live.lock().unwrap_or_else(PoisonError::into_inner);
        let mut job = job;
        // Counted before it can run, so `drained` never misses it.
        shared.busy.fetch_add(1, Ordering::AcqRel);
        let used = shared.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(l) = live.get_mut(&key) {
            // Counted before the owner can take it, so its count never goes below zero.
            l.jobs.fetch_add(1, Ordering::AcqRel);
            match l.inbox.try_send(job) {
                Ok(()) => {
                    l.used = used;
                    return Ok(());
                }
                Err(TrySendError::Full(_)) => {
                    l.jobs.fetch_sub(1, Ordering::AcqRel);
                    shared.done();
                    return Err(HubError::Busy { channel: key.0, chat: key.1, waiting: shared.limits.inbox });
                }
                // The owner died (a panic in a turn); a new one takes over.
                Err(TrySendError::Closed(j)) => {
                    job = j;
                    live.remove(&key);
                }
            }
        }
        if live.len() >= shared.limits.max_live && !evict_one(&mut live) {
            shared.done();
            return Err(HubError::Full { live: live.len() });
        }
        let (tx, rx) = mpsc::channel(shared.limits.inbox);
        // A new inbox has room for one job; were it somehow refused, `Pending` reports the loss.
        let _ = tx.try_send(job);
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let jobs = Arc::new(AtomicUsize::new(1));
        live.insert(key.clone(), Live { id, inbox: tx, jobs: Arc::clone(&jobs), used });
        let mut owners = shared.owners.lock().unwrap_or_else(PoisonError::into_inner);
        while owners.try_join_next().is_some() {}
        owners.spawn(crate::tasks::boxed(own(Arc::clone(shared), key, id, rx, jobs)));
        Ok(())
    }

    /// Conversations with a live owner now.
    #[cfg(test)]
    pub fn live(&self) -> usize {
        self.shared.live.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether the test channel's `chat` has a live owner now.
    #[cfg(test)]
    pub fn is_live(&self, chat: &str) -> bool {
        let key = ("test".to_owned(), chat.to_owned());
        self.shared.live.lock().unwrap_or_else(PoisonError::into_inner).contains_key(&key)
    }
}

/// Ends the least recently used owner with nothing queued or running, to make room; false when
/// every one is busy. Dropping its inbox's only sender is the signal: its `recv` sees the end
/// between jobs, never during one.
fn evict_one(live: &mut HashMap<Key, Live>) -> bool {
    let idle = live.iter().filter(|(_, l)| l.jobs.load(Ordering::Acquire) == 0).min_by_key(|(_, l)| l.used);
    let Some(key) = idle.map(|(k, _)| k.clone()) else { return false };
    chela_log::debug!(channel = %key.0, chat = %key.1, "sessions: a quiet conversation was closed to make room");
    live.remove(&key);
    true
}

/// The owner of one conversation.
async fn own(shared: Arc<Shared>, key: Key, id: u64, mut inbox: mpsc::Receiver<Job>, jobs: Arc<AtomicUsize>) {
    let path = shared.ws.session_path(&key.0, &key.1);
    let mut history: Option<History> = None;
    // The session file as this owner last read or wrote it.
    let mut seen: Option<Stamp> = None;
    loop {
        let job = match tokio::time::timeout(shared.limits.idle, inbox.recv()).await {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(_idle) => {
                let mut live = shared.live.lock().unwrap_or_else(PoisonError::into_inner);
                if !inbox.is_empty() {
                    continue;
                }
                if live.get(&key).is_some_and(|l| l.id == id) {
                    live.remove(&key);
                }
                return;
            }
        };
        match job {
            Job::Turn(mut req, reply) => {
                let result = match shared.app() {
                    _ if shared.stop.is_cancelled() => Err(anyhow::anyhow!(
                        "Chela is stopping; this message was not answered. Send it again in a moment."
                    )),
                    None => {
                        Err(anyhow::anyhow!(shared.unconfigured.read().unwrap_or_else(PoisonError::into_inner).clone()))
                    }
                    Some(app) => {
                        let cancel = req.cancel.clone();
                        let fut = turn(&app, &path, &mut history, &mut seen, &mut req, shared.limits.files);
                        tokio::pin!(fut);
                        // A stop cancels the turn and lets it finish saving, rather than dropping it.
                        tokio::select! {
                            r = &mut fut => r,
                            () = shared.stop.cancelled() => {
                                cancel.cancel();
                                fut.await
                            }
                        }
                    }
                };
                // Free to be closed before the answer goes: whoever reads it may start another
                // conversation at once and needs this slot.
                jobs.fetch_sub(1, Ordering::AcqRel);
                // The requester may have gone (a closed terminal); the turn is saved either way.
                let _ = reply.send(result);
            }
            Job::Restart(reply) => {
                let result = restart(&path, shared.limits.files).await;
                if result.is_ok() {
                    history = Some(History { path: path.clone(), messages: Vec::new(), summary: None });
                    seen = None;
                }
                jobs.fetch_sub(1, Ordering::AcqRel);
                let _ = reply.send(result);
            }
            Job::Close(reply) => {
                let result = restart(&path, shared.limits.files).await;
                history = None;
                let gone = {
                    let mut live = shared.live.lock().unwrap_or_else(PoisonError::into_inner);
                    // A job queued behind the close keeps the owner (and the chat) going.
                    let last = inbox.is_empty() && live.get(&key).is_some_and(|l| l.id == id);
                    if last {
                        live.remove(&key);
                    }
                    last
                };
                jobs.fetch_sub(1, Ordering::AcqRel);
                let _ = reply.send(result);
                if gone {
                    shared.done();
                    return;
                }
            }
        }
        shared.done();
    }
}

/// One turn under the conversation's lock (see [`shared_file`]): another process's turn in it
/// is waited for, and read back first if it changed the file.
async fn turn(
    app: &Arc<App>,
    path: &Path,
    history: &mut Option<History>,
    seen: &mut Option<Stamp>,
    req: &mut TurnRequest,
    files: FileWork,
) -> anyhow::Result<TurnEnd> {
    let _held = lock_turn(path, &req.cancel).await?;
    // One stat: cheaper than a hand-off to the blocking pool, and it never waits on a disk flush.
    if stamp(path) != *seen {
        // Another process wrote the file since: what this owner kept is out of date.
        *history = None;
    }
    let end = locked_turn(app, path, history, req, files).await;
    // Read again even after a failure: whatever reached the file is what the next turn compares.
    *seen = stamp(path);
    if end.is_err() {
        *history = None;
    }
    end
}

async fn locked_turn(
    app: &Arc<App>,
    path: &Path,
    history: &mut Option<History>,
    req: &mut TurnRequest,
    files: FileWork,
) -> anyhow::Result<TurnEnd> {
    // The history (on the owner's first turn) and the memory files the prompt reads, in one
    // piece of file work: on the pool each piece is a hand-off, and they are needed together.
    let load = history.is_none().then(|| (path.to_owned(), app.limits().history_budget));
    let (a, channel, chat) = (Arc::clone(app), req.channel.clone(), req.chat_id.clone());
    let (loaded, system, skills) = files
        .run("reading the conversation", move || {
            let loaded = load.map(|(p, budget)| load_history(&p, budget)).transpose()?;
            let b = &a.base;
            let skills = b.tools.skills.for_session(&b.ws, &b.cfg, &channel, &chat);
            Ok((loaded, a.system_prompt(&channel, &chat), skills))
        })
        .await?;
    // A skill's instructions and the summary change from turn to turn: after the stable part.
    let mut system = system;
    system.push_tail(&skills.prompt);
    let history = match (history, loaded) {
        (Some(h), _) => h,
        (slot, loaded) => slot.insert(loaded.unwrap_or_else(|| History {
            path: path.to_owned(),
            messages: Vec::new(),
            summary: None,
        })),
    };
    let mut agent = app.agent();
    agent.ctx.session = Some(Arc::new(SessionRef::new(&req.channel, &req.chat_id, skills.named_groups)));
    // Compaction wraps the turn: the summary of the folded turns rides in the system prompt,
    // and a turn that finished may fold the oldest ones (a cancelled turn asks for nothing more).
    system.text = crate::compact::system_with_summary(system.text, history.summary.as_ref());
    let end = run_turn(&agent, history, system, req, files).await?;
    if matches!(&end, TurnEnd::Done(o) if !o.cancelled) {
        crate::compact::after_turn(&agent, history, &req.cancel).await;
    }
    Ok(end)
}

async fn restart(path: &Path, files: FileWork) -> anyhow::Result<()> {
    // Not in the middle of another process's turn; a restart is never cancelled.
    let _held = lock_turn(path, &Cancel::default()).await?;
    let p: PathBuf = path.to_owned();
    files
        .run("archiving the conversation", move || {
            archive_session(&p).map(drop).map_err(|e| anyhow::anyhow!("cannot archive {}: {e}", p.display()))
        })
        .await
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
