//! The always-on assistant: one process that serves every channel (`chela run`).
//!
//! A channel turns platform events into [`Incoming`] messages and calls [`Daemon::submit`] in
//! the order they arrived; the daemon decides who may talk (the channel's `allow_from`, pairing
//! and the rate limit: [`crate::access::Gate`]), and
//! queues the turn with the conversation's owner in [`SessionHub`], whose bounded inboxes are
//! the message bus: the turns of one chat run in order, different chats at once, and a chat
//! that floods gets a "busy" answer rather than growing a queue. The channel gives
//! [`Daemon::converse`] a [`Reply`] (a chat through its [`Outlet`], or the connection the message
//! came on) and the daemon delivers the answer there, in per-chat order, from one task set that
//! a graceful stop flushes ([`deliver`]).
//!
//! Settings follow the files: [`Daemon::reload`] (called every second by `chela run`) swaps in
//! a new [`App`] when `chela.toml` or `overrides.toml` changed, so `chela config set llm.model …`
//! and `chela cap disable …` apply to the next turn without a restart. Turns already running
//! keep the settings they started with. The same reload hangs up on MCP endpoint hosts whose
//! token `chela mcp endpoint remove` took away.
//!
//! Stopping: [`Shutdown::trigger`] tells every service to stop taking work; `chela run` then
//! waits for [`SessionHub::drained`], cancels what is still running and [`Daemon::flush`]es the
//! answers on their way (see `cmd/run.rs`).

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use anyhow::Result;
use chela_core::cap::Caller;
use chela_proto::chat::Message;

use crate::access::{Gate, OWNER_CHANNELS};
use crate::app::{App, Base};
use crate::clock::Clock;
use crate::config::{Config, ConfigWatch};
use crate::router::Rules;
use crate::scheduler::{Scheduler, Settings};
use crate::session::{HubError, HubLimits, Pending, SessionHub};
use crate::tools::Toolbox;
use crate::turn::{Cancel, Observer, TurnEnd, TurnRequest};
use crate::workspace::Workspace;

pub mod deliver;
#[cfg(feature = "files")]
pub mod im;
pub mod live;
pub mod outlet;
pub mod send;

pub use crate::shutdown::Shutdown;
pub use deliver::{Answer, OutletReply, Reply, Waiter};
pub use outlet::{BoxFuture, Outlet, Outlets};

/// One message from a channel.
pub struct Incoming {
    /// `telegram`, `feishu`, `ws`, `api`, `cli`.
    pub channel: String,
    /// The platform's chat, where the answer goes; the session is `(channel, chat_id)`.
    pub chat_id: String,
    /// The platform's user id: what `allow_from` and pairing name.
    pub sender: String,
    /// Text and images.
    pub user: Message,
    pub cancel: Cancel,
}

/// What became of a submitted message.
pub enum Submitted {
    /// Queued: await `Pending::finish`, then send [`Daemon::reply_text`] of it.
    Queued(Pending<TurnEnd>),
    /// Not for the model (not allowed yet, too many messages, busy, stopping): send this as is.
    Answer(String),
    /// Send nothing.
    Drop,
}

impl std::fmt::Debug for Submitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Submitted::Queued(_) => f.write_str("Queued"),
            Submitted::Answer(a) => f.debug_tuple("Answer").field(a).finish(),
            Submitted::Drop => f.write_str("Drop"),
        }
    }
}

/// The settings now: the configuration, and the app built from it unless it names no model.
struct Current {
    cfg: Arc<Config>,
    app: Result<Arc<App>, String>,
}

pub struct Daemon {
    ws: Arc<Workspace>,
    tools: crate::app::Tools,
    current: RwLock<Current>,
    watch: Mutex<ConfigWatch>,
    hub: SessionHub,
    /// Shared with the tools that send, which ask it before every message.
    gate: Arc<Gate>,
    shutdown: Shutdown,
    /// Shared with the `im` tools, which send through them.
    outlets: Arc<Outlets>,
    /// The scheduled jobs, shared with the `scheduler` tools and the dashboard.
    scheduler: Arc<Scheduler>,
    /// The event router's rules and queue, shared with the `router` tools and the scheduler.
    rules: Arc<Rules>,
    /// The tool hosts connected to the MCP endpoint, checked against their tokens at each reload.
    endpoint_hosts: Arc<crate::mcp::endpoint::Hosts>,
    /// Each channel's connection state, for `chela status`.
    live: live::Live,
    /// Where every part of the daemon reads the time.
    clock: Clock,
    /// The answers on their way to every channel, in per-chat order.
    deliveries: deliver::Deliveries,
}

/// What [`Daemon::converse`] did with a message, for a channel that answers on the request it
/// came on and must choose the response's status before the answer exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversed {
    /// A turn runs; its answer will reach the reply.
    Queued,
    /// The daemon answered itself (not allowed yet, busy, stopping); that sentence will reach the reply.
    Said,
    /// Nothing will reach the reply (a router rule took the message, or a stranger is ignored).
    Dropped,
}

/// What a delivery task waits for before it sends.
enum Coming {
    Turn(Pending<TurnEnd>),
    Restart(Pending<()>),
    Said(String),
}

impl Daemon {
    /// Loads the workspace's settings. A missing provider key is not an error here: the daemon
    /// starts so the owner can finish the setup from the web page, and turns are answered with
    /// what to set until then.
    pub fn load(ws: Workspace) -> Result<Daemon> {
        Daemon::load_with(ws, Clock::system())
    }

    /// [`Daemon::load`] reading the time from `clock`: a test's manual clock makes schedules,
    /// pairing codes and expiries happen when the test moves it, not after real waiting.
    pub fn load_with(ws: Workspace, clock: Clock) -> Result<Daemon> {
        let base = Base::load_with(ws.clone(), clock.clone())?;
        let gate = Arc::new(Gate::open(&ws)?);
        let watch = ConfigWatch::new(ws)?;
        let (ws, tools, cfg) = (Arc::clone(&base.ws), base.tools.clone(), Arc::clone(&base.cfg));
        let toolbox = Arc::clone(&tools.toolbox);
        let app = App::from_base(base).map(Arc::new).map_err(|e| format!("{e:#}"));
        let limits = HubLimits::from_config(&cfg);
        let hub = match &app {
            Ok(app) => SessionHub::new(Arc::clone(app), limits),
            Err(why) => SessionHub::unconfigured(Arc::clone(&ws), limits, why.clone()),
        };
        let outlets = Arc::new(Outlets::default());
        // The tools that send exist only where channels run: here, not in `chela chat`.
        #[cfg(feature = "files")]
        toolbox
            .register(im::group(Arc::clone(&outlets), Arc::clone(&gate)))
            .map_err(|e| anyhow::anyhow!("cannot add the im tools: {e}"))?;
        let scheduler = Arc::new(Scheduler::open(&ws, Settings::or_utc(&cfg), clock.unix_secs()));
        toolbox
            .register(crate::scheduler::tools::group(Arc::clone(&scheduler)))
            .map_err(|e| anyhow::anyhow!("cannot add the scheduler tools: {e}"))?;
        let rules = Arc::new(Rules::open(&ws));
        toolbox
            .register(crate::router::tools::group(Arc::clone(&rules)))
            .map_err(|e| anyhow::anyhow!("cannot add the router tools: {e}"))?;
        toolbox
            .on_result(crate::router::cap_results(Arc::clone(&rules), Arc::clone(&scheduler)))
            .map_err(anyhow::Error::msg)?;
        // Sensor readings become router events.
        #[cfg(feature = "board")]
        tools.board.connect({
            let rules = Arc::clone(&rules);
            move |e| {
                rules.raise(e);
            }
        });
        Ok(Daemon {
            ws,
            tools,
            current: RwLock::new(Current { cfg, app }),
            watch: Mutex::new(watch),
            hub,
            gate,
            shutdown: Shutdown::default(),
            outlets,
            scheduler,
            rules,
            endpoint_hosts: Arc::default(),
            live: live::Live::default(),
            clock,
            deliveries: deliver::Deliveries::default(),
        })
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.ws
    }

    /// The tools, shared by every turn; groups are switched here at runtime.
    pub fn toolbox(&self) -> &Arc<Toolbox> {
        &self.tools.toolbox
    }

    /// The toolbox with the services behind its groups (the MCP servers, the board, Lua).
    pub fn tools(&self) -> &crate::app::Tools {
        &self.tools
    }

    /// The configuration now.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.read().cfg)
    }

    /// The app now, or why there is none (no provider key yet).
    pub fn app(&self) -> Result<Arc<App>, String> {
        self.read().app.clone()
    }

    pub fn hub(&self) -> &SessionHub {
        &self.hub
    }

    /// Who may talk: pairing requests, approvals and rate counters (`/api/pairing`).
    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    pub fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    pub fn outlets(&self) -> &Outlets {
        &self.outlets
    }

    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    pub fn rules(&self) -> &Arc<Rules> {
        &self.rules
    }

    /// Each channel's connection state.
    pub fn live(&self) -> &live::Live {
        &self.live
    }

    /// The tool hosts connected to the MCP endpoint.
    pub fn endpoint_hosts(&self) -> &Arc<crate::mcp::endpoint::Hosts> {
        &self.endpoint_hosts
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Re-reads the settings if a file changed: `Ok(true)` when new ones took effect. A file
    /// that became invalid is reported (once) and the last good settings stay.
    pub fn reload(&self) -> Result<bool> {
        // A tool host whose endpoint token was removed is hung up on.
        self.endpoint_hosts.check(&crate::mcp::endpoint::Endpoints::open(&self.ws));
        let cfg = {
            let mut watch = self.watch.lock().unwrap_or_else(PoisonError::into_inner);
            match watch.poll()? {
                Some(cfg) => cfg,
                None => return Ok(false),
            }
        };
        self.apply(cfg);
        Ok(true)
    }

    /// Makes `cfg` the settings of the next turns.
    pub fn apply(&self, cfg: Arc<Config>) {
        for w in &cfg.warnings {
            chela_log::warn!("{w}");
        }
        // The capability switches apply even when the provider settings are incomplete.
        self.tools.toolbox.apply(&cfg);
        self.scheduler.set_settings(Settings::or_utc(&cfg));
        let previous = self.read().app.clone();
        let app = match &previous {
            Ok(app) => app.with_config(Arc::clone(&cfg)),
            Err(_) => Base::with_config(Arc::clone(&self.ws), self.tools.clone(), Arc::clone(&cfg), self.clock.clone())
                .and_then(App::from_base),
        }
        .map(Arc::new)
        .map_err(|e| format!("{e:#}"));
        match &app {
            Ok(app) => self.hub.set_app(Some(Arc::clone(app))),
            Err(why) => {
                chela_log::warn!("the new settings name no usable model: {why}");
                self.hub.set_unconfigured(why.clone());
                self.hub.set_app(None);
            }
        }
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Current { cfg, app };
    }

    /// Decides whether `msg` may reach the model, and queues its turn. Synchronous: a channel
    /// that submits in arrival order keeps its chats' turns in order.
    pub fn submit(&self, msg: Incoming, observer: Box<dyn Observer + Send>) -> Submitted {
        self.submit_with(msg, observer, None)
    }

    /// [`Daemon::submit`] with what an API client brings besides its message.
    pub fn submit_with(
        &self,
        msg: Incoming,
        observer: Box<dyn Observer + Send>,
        client: Option<Box<crate::turn::ClientTurn>>,
    ) -> Submitted {
        if self.shutdown.is_triggered() {
            return Submitted::Answer("Chela is stopping; send this again in a moment.".to_owned());
        }
        // Checked before anything of the message is kept: a stranger's words reach no session,
        // no model and no tool.
        if !OWNER_CHANNELS.contains(&msg.channel.as_str()) {
            let now = self.clock.unix_secs_u64();
            let verdict = self.gate.admit(&self.config(), &msg.channel, &msg.sender, now);
            if !verdict.admits() {
                log_refusal(&msg.channel, &msg.sender, &verdict);
                return verdict.reply_text().map_or(Submitted::Drop, Submitted::Answer);
            }
            // Chela may write to this chat on its own from now on, while this sender may talk.
            self.gate.note_chat(&msg.channel, &msg.chat_id, &msg.sender, now);
        }
        // The router sees the message before the agent: a rule that consumes it answers instead.
        if self.raise_message(&msg) {
            chela_log::info!(channel = %msg.channel, chat = %msg.chat_id, "a router rule consumed the message");
            return Submitted::Drop;
        }
        let req = TurnRequest {
            channel: msg.channel,
            chat_id: msg.chat_id,
            user: msg.user,
            scope: Vec::new(),
            caller: Caller::Manual,
            depth: 0,
            cancel: msg.cancel,
            observer,
            client,
        };
        match self.hub.submit(req) {
            Ok(pending) => Submitted::Queued(pending),
            Err(e) => Submitted::Answer(e.to_string()),
        }
    }

    /// The one way a conversation goes: submits `msg` ([`Daemon::submit`]) and delivers what
    /// comes of it to `reply` (the turn's answer, or the daemon's own sentence: a pairing code,
    /// "busy", "stopping"), after the chat's earlier answers. A message the daemon drops (a
    /// router rule consumed it, a stranger over the limits) drops `reply` unused.
    pub fn converse(
        self: &Arc<Self>,
        msg: Incoming,
        observer: Box<dyn Observer + Send>,
        reply: Box<dyn Reply>,
    ) -> Conversed {
        self.converse_with(msg, None, observer, reply)
    }

    /// [`Daemon::converse`] with what an API client brings besides its message.
    pub fn converse_with(
        self: &Arc<Self>,
        msg: Incoming,
        client: Option<Box<crate::turn::ClientTurn>>,
        observer: Box<dyn Observer + Send>,
        reply: Box<dyn Reply>,
    ) -> Conversed {
        let (channel, chat_id, sender) = (msg.channel.clone(), msg.chat_id.clone(), msg.sender.clone());
        match self.submit_with(msg, observer, client) {
            Submitted::Queued(pending) => {
                self.deliver(&channel, &chat_id, Some(sender), Coming::Turn(pending), reply);
                Conversed::Queued
            }
            // The gate's answers go to strangers by design, so their admission is not asked again.
            Submitted::Answer(text) => {
                self.deliver(&channel, &chat_id, None, Coming::Said(text), reply);
                Conversed::Said
            }
            Submitted::Drop => Conversed::Dropped,
        }
    }

    /// Delivers the answer of a turn Chela started itself (a scheduled job, a router action) to
    /// `reply`, in the chat's order with the answers to the people in it.
    pub fn deliver_turn(
        self: &Arc<Self>,
        channel: &str,
        chat_id: &str,
        pending: Pending<TurnEnd>,
        reply: Box<dyn Reply>,
    ) {
        self.deliver(channel, chat_id, None, Coming::Turn(pending), reply);
    }

    /// Sends a channel's own answer (a command's, a refusal) to `reply`, in the chat's order.
    pub fn say(self: &Arc<Self>, channel: &str, chat_id: &str, text: String, reply: Box<dyn Reply>) {
        self.deliver(channel, chat_id, None, Coming::Said(text), reply);
    }

    /// `/new` for a channel: restarts the chat's session after its queued turns ([`Daemon::restart`])
    /// and tells `reply` how it went, in the chat's order.
    pub fn restart_then(self: &Arc<Self>, channel: &str, chat_id: &str, sender: &str, reply: Box<dyn Reply>) {
        let coming = match self.restart(channel, chat_id) {
            Ok(pending) => Coming::Restart(pending),
            Err(e) => Coming::Said(e.to_string()),
        };
        self.deliver(channel, chat_id, Some(sender.to_owned()), coming, reply);
    }

    /// Runs one delivery in the daemon's task set. `sender`, when given, must still be allowed to
    /// talk when the answer is ready: a revoke that lands while the model works keeps the rest of
    /// that turn, previews included, from the revoked person.
    fn deliver(
        self: &Arc<Self>,
        channel: &str,
        chat_id: &str,
        sender: Option<String>,
        coming: Coming,
        mut reply: Box<dyn Reply>,
    ) {
        let deliver::Place { mut before, done } = self.deliveries.place(channel, chat_id);
        let (daemon, channel, chat_id) = (Arc::clone(self), channel.to_owned(), chat_id.to_owned());
        self.deliveries.spawn(crate::tasks::boxed(async move {
            let may_send = || sender.as_deref().is_none_or(|s| daemon.may_talk(&channel, s));
            let answer = match coming {
                Coming::Said(text) => Answer::said(text),
                Coming::Restart(pending) => Answer::said(match pending.finish().await {
                    Ok(()) => "Started a new conversation; the previous one is archived.".to_owned(),
                    Err(e) => format!("The conversation could not be restarted: {e:#}"),
                }),
                Coming::Turn(pending) => {
                    let (ended_tx, mut ended) = tokio::sync::oneshot::channel();
                    let working = reply.working();
                    let turn = async {
                        let finish = pending.finish();
                        tokio::pin!(finish);
                        // A sign that gives up early leaves the turn to finish unwatched.
                        let end = tokio::select! {
                            end = &mut finish => end,
                            () = working => (&mut finish).await,
                        };
                        let _ = ended_tx.send(());
                        end
                    };
                    let show = async {
                        // The chat's earlier answer goes first, previews included.
                        tokio::select! {
                            biased;
                            _ = &mut ended => return,
                            () = deliver::Place::wait_before(&mut before) => {}
                        }
                        reply.preview(ended, &may_send).await;
                    };
                    let (end, ()) = tokio::join!(turn, show);
                    Answer { text: daemon.reply_text(&end), end: Some(end) }
                }
            };
            deliver::Place::wait_before(&mut before).await;
            if may_send() {
                reply.send(answer).await;
            } else {
                chela_log::warn!(%channel, chat = %chat_id, "an answer was not sent: its sender may no longer talk to Chela");
            }
            drop(done);
        }));
    }

    /// How many answers are on their way to their channels.
    pub fn deliveries_in_flight(&self) -> usize {
        self.deliveries.in_flight()
    }

    /// Waits until every answer on its way was delivered: called at a graceful stop, after the
    /// turns ended, under the stop's time bound (dropping this future aborts what is left).
    pub async fn flush(&self) {
        self.deliveries.flush().await;
    }

    /// Raises the `message` event of an admitted message (source and channel: the channel's
    /// name); whether a rule consumed it. Text past the core's bound is cut for the event.
    fn raise_message(&self, msg: &Incoming) -> bool {
        let for_jobs = self.scheduler.listens("message");
        if self.rules.is_empty() && !for_jobs {
            return false;
        }
        let text = msg.user.text();
        let text = chela_core::text::prefix(&text, chela_core::router::MAX_TEXT);
        let event = chela_core::router::Event::new("message")
            .and_then(|e| e.with_source(&msg.channel))
            .and_then(|e| e.with_chat(&msg.channel, &msg.chat_id))
            .and_then(|e| e.with_text(text))
            .and_then(|e| e.with("sender", chela_core::router::Value::Str(msg.sender.clone())));
        match event {
            Ok(event) => self.rules.raise_message(&event, for_jobs),
            Err(e) => {
                chela_log::warn!(channel = %msg.channel, "the message raised no router event: {e}");
                false
            }
        }
    }

    /// Whether a router rule or an `on_event` job may want events of type `kind`: sources ask
    /// before building an event, so one nobody listens to costs nothing.
    pub fn listens(&self, kind: &str) -> bool {
        crate::router::listened(&self.rules, &self.scheduler, kind)
    }

    /// Queues `event` for the router task (see [`crate::router::raise`]).
    pub fn raise(&self, event: chela_core::router::Event) {
        crate::router::raise(&self.rules, &self.scheduler, event);
    }

    /// Whether `sender` may talk on `channel` now, decided without side effects (no pairing
    /// code is issued): for a channel that must know before doing work for a message
    /// (downloading a photo) or before a command that touches the session (`/new`).
    pub fn may_talk(&self, channel: &str, sender: &str) -> bool {
        OWNER_CHANNELS.contains(&channel) || self.gate.allows(&self.config(), channel, sender)
    }

    /// `/new`: archives the chat's session and starts it over, after its queued turns.
    pub fn restart(&self, channel: &str, chat_id: &str) -> Result<Pending<()>, HubError> {
        self.hub.restart(channel, chat_id)
    }

    /// What to send back for a finished turn: the answer, or a sentence saying why there is none.
    pub fn reply_text(&self, end: &Result<TurnEnd>) -> String {
        match end {
            Ok(TurnEnd::Done(o)) if o.cancelled => "(stopped before answering)".to_owned(),
            Ok(TurnEnd::Done(o)) if o.text.trim().is_empty() => "(no answer)".to_owned(),
            Ok(TurnEnd::Done(o)) => o.text.clone(),
            Ok(TurnEnd::Failed(e)) => match self.app() {
                Ok(app) => app.explain(e),
                Err(why) => why,
            },
            Err(e) => format!("{e:#}"),
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_deliver;
#[cfg(test)]
mod tests_device;

/// One log line, in words, for a message the pairing gate kept from the model.
fn log_refusal(channel: &str, sender: &str, verdict: &chela_core::access::Admission) {
    use chela_core::access::Admission as A;
    match verdict {
        A::NewCode { code } => {
            chela_log::info!("pairing: {channel}:{sender} asks to talk; approve with `chela pairing approve {code}`")
        }
        A::StillPending { code } => chela_log::info!("pairing: {channel}:{sender} is still waiting (code {code})"),
        A::TooManyPending => chela_log::info!("pairing: {channel}:{sender} was turned away: too many requests waiting"),
        A::RateLimited { retry_after_secs } => {
            chela_log::info!("{channel}:{sender} is over the rate limit for {retry_after_secs} s more")
        }
        A::Silent | A::Denied | A::Allowed => chela_log::debug!("a message of {channel}:{sender} was dropped"),
    }
}
