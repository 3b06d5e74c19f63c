//! The scheduler and heartbeat tasks of `chela run`.
//!
//! The scheduler sleeps until the earliest next fire (tokio time), or until the jobs change
//! (a tool notifies it), or at most [`LOOK_EVERY`] so that edits from other processes and
//! `chela cron trigger` requests are seen. At start it runs, once each, the jobs missed while
//! Chela was down within their grace window. Each due job runs in its own task, so a slow
//! model does not hold back the next job; those tasks (and the heartbeat's) belong to
//! [`serve`], which awaits them when the daemon stops (their turns end at the stop's grace) and
//! aborts them when it is dropped, so no run outlives the scheduler.
//!
//! An `agent` job puts its message into its chat through the daemon's session hub, as if the
//! scheduler had written it, and sends the answer through the chat's channel outlet. A job
//! whose channel is not running or whose chat may not be written to is not run: that is logged
//! and kept as the job's outcome (`state/jobs.json`). An `emit` job raises its event into the
//! router's queue; `on_event` jobs are started by the router task ([`spawn_run`]). After each
//! run a `scheduler` event (source `scheduler`, fields `job`, `action`, `ok`, the outcome as its
//! text) is raised for the rules and jobs that listen to it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use chela_core::cap::{Caller, Scope};
use chela_core::heartbeat::{ActiveHours, actionable_items};
use chela_core::schedule::Action;
use chela_proto::chat::Message;
use tokio::task::JoinSet;

use crate::daemon::{Answer, BoxFuture, Daemon, Outlet, Reply};
use crate::scheduler::{Due, Outcome};
use crate::turn::{Cancel, Quiet, TurnRequest};

/// The longest sleep: how soon a file edited by another process is seen.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);
/// The largest `HEARTBEAT.md` read.
pub const MAX_HEARTBEAT_BYTES: u64 = 64 * 1024;
/// The session the heartbeat talks in when no chat is set for its answer.
pub const HEARTBEAT_SESSION: (&str, &str) = ("heartbeat", "heartbeat");

/// Runs the scheduler until the daemon stops.
pub async fn serve(daemon: Arc<Daemon>) -> Result<()> {
    let sched = Arc::clone(daemon.scheduler());
    let now = daemon.clock().unix_secs();
    // The store stats, reads and fsyncs files: that runs on the blocking pool, never on the
    // async thread the channels share.
    let s = Arc::clone(&sched);
    let missed = crate::tasks::blocking(move || {
        let missed = s.catch_up(now);
        for due in &missed {
            s.record(&due.job.id, now);
        }
        missed
    })
    .await?;
    // The runs going now. Finished ones are reaped once per pass, so the set holds only the
    // runs in flight plus those of one `LOOK_EVERY`.
    let mut runs = JoinSet::new();
    for due in missed {
        chela_log::info!(job = %due.job.id, at = due.at, "running a job missed while Chela was down");
        spawn_run(&daemon, &mut runs, due, None);
    }
    let mut heartbeat = Heartbeat::new(&daemon);
    loop {
        reap(&mut runs);
        let now = daemon.clock().unix_secs();
        let s = Arc::clone(&sched);
        let (beat, due, next) = crate::tasks::blocking(move || {
            s.refresh(now);
            let (_, beat) = s.take_requests();
            let due = s.take_due(now);
            (beat, due, s.next_wake(now))
        })
        .await?;
        if beat {
            heartbeat.spawn(&daemon, &mut runs, true);
        }
        for due in due {
            spawn_run(&daemon, &mut runs, due, None);
        }
        if heartbeat.due(&daemon, now) {
            heartbeat.spawn(&daemon, &mut runs, false);
        }
        let wake = next.into_iter().chain(heartbeat.next).min();
        let sleep =
            wake.map_or(LOOK_EVERY, |t| Duration::from_secs(t.saturating_sub(now).unsigned_abs()).min(LOOK_EVERY));
        tokio::select! {
            () = tokio::time::sleep(sleep.max(Duration::from_millis(50))) => {}
            () = sched.changed.notified() => {}
            () = daemon.shutdown().wait() => break,
        }
    }
    // The runs' turns are cancelled by the stop's grace, so this wait ends; `chela run` bounds
    // it anyway, and dropping this future aborts what is left.
    finish(runs).await;
    Ok(())
}

/// Forgets the runs that ended, saying which of them panicked.
pub(crate) fn reap(runs: &mut JoinSet<()>) {
    while let Some(done) = runs.try_join_next() {
        if let Err(e) = done {
            chela_log::warn!("an automation run stopped unexpectedly: {e}");
        }
    }
}

/// Waits for every run of `runs` to end.
pub(crate) async fn finish(mut runs: JoinSet<()>) {
    while let Some(done) = runs.join_next().await {
        if let Err(e) = done {
            chela_log::warn!("an automation run stopped unexpectedly: {e}");
        }
    }
}

/// Runs `due` as a task of `runs`; its outcome is kept and a `scheduler` event raised.
/// `permit`: held while it runs (the router task bounds the `on_event` runs with it).
pub(crate) fn spawn_run(
    daemon: &Arc<Daemon>,
    runs: &mut JoinSet<()>,
    due: Due,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
) {
    let daemon = Arc::clone(daemon);
    runs.spawn(crate::tasks::boxed(async move {
        let _permit = permit;
        let id = due.job.id.clone();
        let result = run_job(&daemon, &due).await;
        let (ok, message) = match &result {
            Ok(s) => {
                chela_log::info!(job = %id, "scheduled job ran: {s}");
                (true, s.as_str())
            }
            Err(why) => {
                chela_log::warn!(job = %id, "scheduled job not run: {why}");
                (false, why.as_str())
            }
        };
        let outcome = Outcome::new(daemon.clock().unix_secs(), ok, message, due.manual);
        let s = Arc::clone(daemon.scheduler());
        let (id2, o) = (id.clone(), outcome.clone());
        // The outcome file is written with fsync: off the async workers.
        if let Err(e) = crate::tasks::blocking(move || s.set_outcome(&id2, o)).await {
            chela_log::warn!(job = %id, "the job's outcome was not kept: {e}");
        }
        if daemon.listens(SCHEDULER_EVENT) {
            match scheduler_event(&due, &outcome) {
                Ok(event) => daemon.raise(event),
                Err(e) => chela_log::warn!(job = %id, "no scheduler event for the run: {e}"),
            }
        }
    }));
}

/// The type of the event raised after each run of a job.
pub const SCHEDULER_EVENT: &str = "scheduler";

/// The `scheduler` event of a finished run: source `scheduler`, the job's chat when it has
/// one, the outcome's message as text, fields `job`, `name`, `action` and `ok`.
fn scheduler_event(due: &Due, outcome: &Outcome) -> Result<chela_core::router::Event, String> {
    use chela_core::router::{Event, Value};
    let (channel, chat_id) = match (&due.job.action, &due.chat) {
        (Action::Agent { channel: Some(c), chat_id: Some(id), .. }, _) => (c.as_str(), id.as_str()),
        (_, Some((c, id))) => (c.as_str(), id.as_str()),
        _ => ("", ""),
    };
    let action = match &due.job.action {
        Action::Agent { .. } => "agent",
        Action::Cap { .. } => "cap",
        Action::Emit { .. } => "emit",
    };
    let text = chela_core::text::prefix(&outcome.message, chela_core::router::MAX_TEXT);
    Event::new(SCHEDULER_EVENT)
        .and_then(|e| e.with_source("scheduler"))
        .and_then(|e| e.with_chat(channel, chat_id))
        .and_then(|e| e.with_text(text))
        .and_then(|e| e.with("job", Value::Str(due.job.id.clone())))
        .and_then(|e| e.with("name", Value::Str(due.job.name.clone())))
        .and_then(|e| e.with("action", Value::Str(action.to_owned())))
        .and_then(|e| e.with("ok", Value::Bool(outcome.ok)))
        .map(|e| e.with_depth(due.depth))
        .map_err(|e| e.to_string())
}

async fn run_job(daemon: &Arc<Daemon>, due: &Due) -> Result<String, String> {
    let job = &due.job;
    if job.pending() {
        return Err(crate::automation::waiting_line("job", &job.id, "chela cron approve"));
    }
    // A model-made job the owner has not approved acts in its own conversation only.
    let confined = job.made_by.as_ref().filter(|m| m.confined());
    match &job.action {
        Action::Agent { message, channel, chat_id } => {
            // An `on_event` job without a chat of its own talks in the event's.
            let event_chat = due.chat.as_ref().map(|(c, id)| (c, id));
            let Some((channel, chat_id)) = channel.as_ref().zip(chat_id.as_ref()).or(event_chat) else {
                return Err("the job names no channel and chat to talk in".to_owned());
            };
            if confined.is_some_and(|m| !m.is_own(channel, chat_id)) {
                return Err(crate::automation::waiting_line("job", &job.id, "chela cron approve"));
            }
            let label = if job.name.is_empty() { job.id.clone() } else { format!("{} ({})", job.name, job.id) };
            let text = format!("[Scheduled job {label}] {message}");
            talk_answer(daemon, channel, chat_id, text, due.depth).await?;
            Ok(format!("answer sent to {channel}/{chat_id}"))
        }
        Action::Cap { name, args } => {
            // A job written without `args` calls the tool with none.
            let input = if args.is_null() { "{}".to_owned() } else { args.to_string() };
            let out = call_cap(daemon, name, &input, due.depth, job.made_by.as_ref()).await?;
            Ok(format!("{name} answered {} bytes", out.len()))
        }
        Action::Emit { event, .. } => {
            let ev = crate::scheduler::emit_event(job, due.depth)?;
            if !daemon.listens(event) {
                return Ok(format!("raised a {event} event; no rule or job listens to it"));
            }
            if !daemon.rules().raise(ev) {
                return Err(format!("the {event} event was dropped: the router's queue is full"));
            }
            Ok(format!("raised a {event} event"))
        }
    }
}

/// Calls the tool `name` with `input`, with the settings of now; its output. The owner's rules
/// and jobs (`made_by` `None`) call as Chela itself (`Caller::Internal`); the model's call as
/// the model, in the conversation they were made in and with the groups it could call then,
/// so a rule or job never does more than its maker could.
/// `depth`: how many automation steps led to the call (its `cap_result` event carries it).
pub(crate) async fn call_cap(
    daemon: &Arc<Daemon>,
    name: &str,
    input: &str,
    depth: u8,
    made_by: Option<&chela_core::router::MadeBy>,
) -> Result<String, String> {
    let cfg = daemon.config();
    let base = crate::app::Base::with_config(
        Arc::clone(daemon.workspace()),
        daemon.tools().clone(),
        cfg,
        daemon.clock().clone(),
    )
    .map_err(|e| format!("{e:#}"))?;
    let mut ctx = base.tool_ctx();
    ctx.depth = depth;
    let (caller, extra) = match made_by {
        None => (Caller::Internal, Vec::new()),
        Some(m) => (Caller::Model, crate::automation::model_ctx(&mut ctx, m)),
    };
    daemon
        .toolbox()
        .call(&ctx, name, input, caller, Scope { extra_visible: &extra })
        .await
        .map_err(|e| format!("{name}: {e}"))
}

/// Puts `text` into the chat as a turn and sends the answer through the channel's outlet.
/// The chat must be one Chela may write to (`Gate::may_send`, as for the send tools), and its
/// channel running.
async fn talk(daemon: &Arc<Daemon>, channel: &str, chat_id: &str, text: String) -> Result<String, String> {
    talk_answer(daemon, channel, chat_id, text, 0).await?;
    Ok(format!("answer sent to {channel}/{chat_id}"))
}

/// [`talk`], answering with the model's answer that was sent.
pub(crate) async fn talk_answer(
    daemon: &Arc<Daemon>,
    channel: &str,
    chat_id: &str,
    text: String,
    depth: u8,
) -> Result<String, String> {
    let outlet = daemon
        .outlets()
        .get(channel)
        .ok_or_else(|| format!("the {channel} channel is not running, so chat {chat_id} cannot be reached"))?;
    if !daemon.gate().may_send(&daemon.config(), channel, chat_id) {
        return Err(format!("{channel}/{chat_id} is not a chat allowed to talk to Chela (unpaired or gone)"));
    }
    let pending = daemon.hub().submit(request(channel, chat_id, text, depth)).map_err(|e| e.to_string())?;
    let (reported, report) = tokio::sync::oneshot::channel();
    daemon.deliver_turn(
        channel,
        chat_id,
        pending,
        Box::new(Reported { outlet, chat_id: chat_id.to_owned(), reported }),
    );
    report.await.map_err(|_| "the answer was not delivered: Chela stopped first".to_owned())?
}

/// Sends a job's answer through the outlet, like any answer in that chat, and tells the job
/// what became of it: the answer sent, or why none was.
struct Reported {
    outlet: Arc<dyn Outlet>,
    chat_id: String,
    reported: tokio::sync::oneshot::Sender<Result<String, String>>,
}

impl Reply for Reported {
    fn send(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let failed = !matches!(answer.end, Some(Ok(crate::turn::TurnEnd::Done(_))));
            let result = if failed {
                Err(answer.text)
            } else {
                match self.outlet.send_text(&self.chat_id, &answer.text).await {
                    Ok(()) => Ok(answer.text),
                    Err(e) => Err(format!("the answer could not be sent: {e}")),
                }
            };
            let _ = self.reported.send(result);
        })
    }
}

/// One turn in `(channel, chat_id)`, queued behind that chat's other turns; its answer.
async fn turn(daemon: &Arc<Daemon>, channel: &str, chat_id: &str, text: String, depth: u8) -> Result<String, String> {
    let pending = daemon.hub().submit(request(channel, chat_id, text, depth)).map_err(|e| e.to_string())?;
    let end = pending.finish().await;
    if let Ok(crate::turn::TurnEnd::Failed(_)) | Err(_) = &end {
        return Err(daemon.reply_text(&end));
    }
    Ok(daemon.reply_text(&end))
}

/// A turn Chela starts itself in `(channel, chat_id)`.
fn request(channel: &str, chat_id: &str, text: String, depth: u8) -> TurnRequest {
    TurnRequest {
        channel: channel.to_owned(),
        chat_id: chat_id.to_owned(),
        user: Message::user_text(text),
        scope: Vec::new(),
        caller: Caller::Internal,
        depth,
        cancel: Cancel::default(),
        observer: Box::new(Quiet),
        client: None,
    }
}

/// The heartbeat's timer: `heartbeat.interval` minutes after the last one.
struct Heartbeat {
    next: Option<i64>,
}

impl Heartbeat {
    fn new(daemon: &Daemon) -> Heartbeat {
        Heartbeat { next: interval(daemon).map(|i| daemon.clock().unix_secs() + i) }
    }

    /// Whether a heartbeat is due now; arms the next one.
    fn due(&mut self, daemon: &Daemon, now: i64) -> bool {
        let every = interval(daemon);
        match (self.next, every) {
            (_, None) => {
                self.next = None;
                false
            }
            (None, Some(i)) => {
                self.next = Some(now + i);
                false
            }
            (Some(at), Some(i)) if at <= now => {
                self.next = Some(now + i);
                true
            }
            _ => false,
        }
    }

    fn spawn(&self, daemon: &Arc<Daemon>, runs: &mut JoinSet<()>, by_hand: bool) {
        let daemon = Arc::clone(daemon);
        runs.spawn(crate::tasks::boxed(async move {
            match beat(&daemon, daemon.clock().unix_secs(), by_hand).await {
                Ok(what) => chela_log::info!("heartbeat: {what}"),
                Err(why) => chela_log::warn!("heartbeat: {why}"),
            }
        }));
    }
}

/// In seconds; `None` when heartbeats are off.
fn interval(daemon: &Daemon) -> Option<i64> {
    let minutes = daemon.config().int(chela_core::config::HEARTBEAT_INTERVAL);
    (minutes > 0).then_some(minutes * 60)
}

/// One heartbeat: reads `HEARTBEAT.md` and, inside the active hours, prompts the agent with
/// its open items. `chela heartbeat trigger` (`by_hand`) runs one outside them too.
pub async fn beat(daemon: &Arc<Daemon>, now: i64, by_hand: bool) -> Result<String, String> {
    let cfg = daemon.config();
    let hours = match cfg.get(chela_core::config::HEARTBEAT_ACTIVE_HOURS) {
        "" => ActiveHours::ALWAYS,
        text => ActiveHours::parse(text).map_err(|e| e.to_string())?,
    };
    if !by_hand && !hours.contains(now, &daemon.scheduler().zone()) {
        return Ok("outside heartbeat.active_hours; skipped".to_owned());
    }
    let path = daemon.workspace().root().join("HEARTBEAT.md");
    let text = crate::workspace::read_bounded(&path, MAX_HEARTBEAT_BYTES)
        .map_err(|e| format!("cannot read HEARTBEAT.md: {e}"))?
        .unwrap_or_default();
    let items = actionable_items(&text);
    if items.is_empty() {
        return Ok("HEARTBEAT.md has no open items".to_owned());
    }
    let prompt = chela_core::heartbeat::prompt(&items, true);
    let channel = cfg.get(chela_core::config::HEARTBEAT_CHANNEL).to_owned();
    let chat_id = cfg.get(chela_core::config::HEARTBEAT_CHAT_ID).to_owned();
    if channel.is_empty() || chat_id.is_empty() {
        let answer = turn(daemon, HEARTBEAT_SESSION.0, HEARTBEAT_SESSION.1, prompt, 0).await?;
        return Ok(format!("{} items; the answer (no heartbeat.channel set): {answer}", items.len()));
    }
    talk(daemon, &channel, &chat_id, prompt).await.map(|s| format!("{} items; {s}", items.len()))
}

#[cfg(test)]
#[path = "tests_clock.rs"]
mod tests;
