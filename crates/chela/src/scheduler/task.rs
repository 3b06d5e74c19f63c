//! The scheduler and heartbeat tasks of `chela run`.
//!
//! The scheduler sleeps until the earliest next fire (tokio time), or until the jobs change
//! (a tool notifies it), or at most [`LOOK_EVERY`] so that edits from other processes and
//! `chela cron trigger` requests are seen. At start it runs, once each, the jobs missed while
//! Chela was down within their grace window. Each due job runs in its own task, so a slow
//! model does not hold back the next job.
//!
//! An `agent` job puts its message into its chat through the daemon's session hub, as if the
//! scheduler had written it, and sends the answer through the chat's channel outlet. A job
//! whose channel is not running or whose chat may not be written to is not run: that is logged
//! and kept as the job's status.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use chela_core::cap::{Caller, Scope};
use chela_core::heartbeat::{ActiveHours, actionable_items};
use chela_core::schedule::Action;
use chela_proto::chat::Message;

use super::{Due, now_secs};
use crate::daemon::Daemon;
use crate::turn::{Cancel, Observer, TurnRequest};

/// The longest sleep: how soon a file edited by another process is seen.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);
/// The largest `HEARTBEAT.md` read.
pub const MAX_HEARTBEAT_BYTES: u64 = 64 * 1024;
/// The session the heartbeat talks in when no chat is set for its answer.
pub const HEARTBEAT_SESSION: (&str, &str) = ("heartbeat", "heartbeat");

/// Runs the scheduler until the daemon stops.
pub async fn serve(daemon: Arc<Daemon>) -> Result<()> {
    let sched = Arc::clone(daemon.scheduler());
    let now = now_secs();
    // The store stats, reads and fsyncs files: that runs on the blocking pool, never on the
    // async thread the channels share.
    let s = Arc::clone(&sched);
    let missed = tokio::task::spawn_blocking(move || {
        let missed = s.catch_up(now);
        for due in &missed {
            s.record(&due.job.id, now);
        }
        missed
    })
    .await?;
    for due in missed {
        tracing::info!(job = %due.job.id, at = due.at, "running a job missed while Chela was down");
        spawn_run(&daemon, due);
    }
    let mut heartbeat = Heartbeat::new(&daemon);
    loop {
        let now = now_secs();
        let s = Arc::clone(&sched);
        let (beat, due, next) = tokio::task::spawn_blocking(move || {
            s.refresh(now);
            let (_, beat) = s.take_requests();
            let due = s.take_due(now);
            (beat, due, s.next_wake(now))
        })
        .await?;
        if beat {
            heartbeat.spawn(&daemon, true);
        }
        for due in due {
            spawn_run(&daemon, due);
        }
        if heartbeat.due(&daemon, now) {
            heartbeat.spawn(&daemon, false);
        }
        let wake = next.into_iter().chain(heartbeat.next).min();
        let sleep =
            wake.map_or(LOOK_EVERY, |t| Duration::from_secs(t.saturating_sub(now).unsigned_abs()).min(LOOK_EVERY));
        tokio::select! {
            () = tokio::time::sleep(sleep.max(Duration::from_millis(50))) => {}
            () = sched.changed.notified() => {}
            () = daemon.shutdown().wait() => return Ok(()),
        }
    }
}

fn spawn_run(daemon: &Arc<Daemon>, due: Due) {
    let daemon = Arc::clone(daemon);
    tokio::spawn(async move {
        let id = due.job.id.clone();
        let status = match run_job(&daemon, &due).await {
            Ok(s) => {
                tracing::info!(job = %id, "scheduled job ran: {s}");
                format!("{} at {}: {s}", if due.manual { "ran by hand" } else { "ran" }, now_secs())
            }
            Err(why) => {
                tracing::warn!(job = %id, "scheduled job not run: {why}");
                format!("not run at {}: {why}", now_secs())
            }
        };
        daemon.scheduler().set_status(&id, status);
    });
}

async fn run_job(daemon: &Arc<Daemon>, due: &Due) -> Result<String, String> {
    let job = &due.job;
    match &job.action {
        Action::Agent { message, channel, chat_id } => {
            let (Some(channel), Some(chat_id)) = (channel, chat_id) else {
                return Err("the job names no channel and chat to talk in".to_owned());
            };
            let label = if job.name.is_empty() { job.id.clone() } else { format!("{} ({})", job.name, job.id) };
            let text = format!("[Scheduled job {label}] {message}");
            talk(daemon, channel, chat_id, text).await
        }
        Action::Cap { name, args } => {
            // A job written without `args` calls the tool with none.
            let input = if args.is_null() { "{}".to_owned() } else { args.to_string() };
            let out = call_cap(daemon, name, &input).await?;
            Ok(format!("{name} answered {} bytes", out.len()))
        }
        Action::Emit { .. } => Err("emit actions need the event router, which this Chela does not have yet".to_owned()),
    }
}

/// Calls the tool `name` with `input` as Chela itself (`Caller::Internal`), with the
/// settings of now; its output.
pub(crate) async fn call_cap(daemon: &Arc<Daemon>, name: &str, input: &str) -> Result<String, String> {
    let cfg = daemon.config();
    let skills = Arc::new(crate::skills::Skills::new(&cfg));
    let base = crate::app::Base::with_config(Arc::clone(daemon.workspace()), Arc::clone(daemon.toolbox()), skills, cfg)
        .map_err(|e| format!("{e:#}"))?;
    let ctx = base.tool_ctx();
    daemon
        .toolbox()
        .call(&ctx, name, input, Caller::Internal, Scope::default())
        .await
        .map_err(|e| format!("{name}: {e}"))
}

/// Puts `text` into the chat as a turn and sends the answer through the channel's outlet.
/// The chat must be one Chela may write to (`Gate::may_send`, as for the send tools), and its
/// channel running.
async fn talk(daemon: &Arc<Daemon>, channel: &str, chat_id: &str, text: String) -> Result<String, String> {
    talk_answer(daemon, channel, chat_id, text).await?;
    Ok(format!("answer sent to {channel}/{chat_id}"))
}

/// [`talk`], answering with the model's answer that was sent.
pub(crate) async fn talk_answer(
    daemon: &Arc<Daemon>,
    channel: &str,
    chat_id: &str,
    text: String,
) -> Result<String, String> {
    let outlet = daemon
        .outlets()
        .get(channel)
        .ok_or_else(|| format!("the {channel} channel is not running, so chat {chat_id} cannot be reached"))?;
    if !daemon.gate().may_send(&daemon.config(), channel, chat_id) {
        return Err(format!("{channel}/{chat_id} is not a chat allowed to talk to Chela (unpaired or gone)"));
    }
    let answer = turn(daemon, channel, chat_id, text).await?;
    outlet.send_text(chat_id, &answer).await.map_err(|e| format!("the answer could not be sent: {e}"))?;
    Ok(answer)
}

/// One turn in `(channel, chat_id)`, queued behind that chat's other turns; its answer.
async fn turn(daemon: &Arc<Daemon>, channel: &str, chat_id: &str, text: String) -> Result<String, String> {
    let req = TurnRequest {
        channel: channel.to_owned(),
        chat_id: chat_id.to_owned(),
        user: Message::user_text(text),
        scope: Vec::new(),
        caller: Caller::Internal,
        cancel: Cancel::default(),
        observer: Box::new(Quiet),
    };
    let pending = daemon.hub().submit(req).map_err(|e| e.to_string())?;
    let end = pending.finish().await;
    if let Ok(crate::turn::TurnEnd::Failed(_)) | Err(_) = &end {
        return Err(daemon.reply_text(&end));
    }
    Ok(daemon.reply_text(&end))
}

struct Quiet;

impl Observer for Quiet {
    fn text(&mut self, _: &str) {}
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &chela_core::agent::ToolCall) {}
    fn tool_finished(&mut self, _: &chela_core::agent::ToolCall, _: &chela_core::agent::ToolResult, _: Duration) {}
}

/// The heartbeat's timer: `heartbeat.interval` minutes after the last one.
struct Heartbeat {
    next: Option<i64>,
}

impl Heartbeat {
    fn new(daemon: &Daemon) -> Heartbeat {
        Heartbeat { next: interval(daemon).map(|i| now_secs() + i) }
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

    fn spawn(&self, daemon: &Arc<Daemon>, by_hand: bool) {
        let daemon = Arc::clone(daemon);
        tokio::spawn(async move {
            match beat(&daemon, now_secs(), by_hand).await {
                Ok(what) => tracing::info!("heartbeat: {what}"),
                Err(why) => tracing::warn!("heartbeat: {why}"),
            }
        });
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
    let mut prompt = String::from(
        "[Heartbeat] HEARTBEAT.md has these open items. Act on the ones you can now, and mark what is \
         done there as `- [x]`:\n",
    );
    for item in &items {
        prompt.push_str(item);
        prompt.push('\n');
    }
    let channel = cfg.get(chela_core::config::HEARTBEAT_CHANNEL).to_owned();
    let chat_id = cfg.get(chela_core::config::HEARTBEAT_CHAT_ID).to_owned();
    if channel.is_empty() || chat_id.is_empty() {
        let answer = turn(daemon, HEARTBEAT_SESSION.0, HEARTBEAT_SESSION.1, prompt).await?;
        return Ok(format!("{} items; the answer (no heartbeat.channel set): {answer}", items.len()));
    }
    talk(daemon, &channel, &chat_id, prompt).await.map(|s| format!("{} items; {s}", items.len()))
}
