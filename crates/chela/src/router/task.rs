//! The router task of `chela run`: takes plans and events from the store's bounded queue and
//! runs the fired rules' actions; looks at `rules.json` every [`LOOK_EVERY`] for edits.
//!
//! Each plan runs in its own task (at most [`MAX_RUNNING`] at once; the queue waits meanwhile),
//! so a slow model answer does not hold back a `send`. Within a rule the actions run in order,
//! and `{{last.output}}` is the output of the latest `agent` (the answer) or `cap` (the result).
//! A failed action is logged and ends its rule (the next actions would read its output).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use chela_core::router::{Action, Fired, Plan};

use super::Work;
use crate::daemon::Daemon;
use crate::scheduler::task::{call_cap, talk_answer};

/// How soon an edit of `rules.json` by another process is seen.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);
/// The most plans running at once.
pub const MAX_RUNNING: usize = 8;

/// Runs the router until the daemon stops.
pub async fn serve(daemon: Arc<Daemon>) -> Result<()> {
    let rules = Arc::clone(daemon.rules());
    let Some(mut queue) = rules.take_queue() else {
        anyhow::bail!("the router task runs once per daemon");
    };
    let running = Arc::new(tokio::sync::Semaphore::new(MAX_RUNNING));
    let mut look = tokio::time::interval(LOOK_EVERY);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            work = queue.recv() => {
                let Some(work) = work else { return Ok(()) };
                let plan = match work {
                    Work::Plan(plan) => plan,
                    Work::Event(event) => rules.plan(&event),
                };
                if plan.fired.is_empty() {
                    continue;
                }
                let permit = Arc::clone(&running).acquire_owned().await?;
                let daemon = Arc::clone(&daemon);
                tokio::spawn(async move {
                    run_plan(&daemon, plan).await;
                    drop(permit);
                });
            }
            _ = look.tick() => {
                let r = Arc::clone(&rules);
                if tokio::task::spawn_blocking(move || r.refresh()).await? {
                    tracing::info!(rules = rules.len(), "{} changed; its rules apply from now on", super::FILE);
                }
            }
            () = daemon.shutdown().wait() => return Ok(()),
        }
    }
}

/// Runs every fired rule of `plan`, in order.
pub async fn run_plan(daemon: &Arc<Daemon>, plan: Plan) {
    for fired in plan.fired {
        let rule = fired.rule.clone();
        match run_rule(daemon, fired).await {
            Ok(()) => tracing::info!(rule = %rule, "router rule ran"),
            Err(why) => tracing::warn!(rule = %rule, "router rule stopped: {why}"),
        }
    }
}

async fn run_rule(daemon: &Arc<Daemon>, fired: Fired) -> Result<(), String> {
    let mut last = String::new();
    for action in fired.actions {
        match action {
            Action::Agent { channel, chat_id, message } => {
                last = talk_answer(daemon, &channel, &chat_id, message.render(&last)).await?;
            }
            Action::Cap { name, args } => {
                last = call_cap(daemon, &name, &args.render(&last).to_string()).await?;
            }
            Action::Send { channel, chat_id, text } => send(daemon, &channel, &chat_id, &text.render(&last)).await?,
            Action::Emit(emit) => {
                let event = emit.event(&last).map_err(|e| format!("emit {}: {e}", emit.kind))?;
                daemon.rules().raise(event);
            }
            // Actions a newer core may add: said, not silently skipped.
            other => return Err(format!("this Chela cannot run the action {other:?}")),
        }
    }
    Ok(())
}

/// Sends `text` to the chat through its channel's outlet, if Chela may write there.
async fn send(daemon: &Arc<Daemon>, channel: &str, chat_id: &str, text: &str) -> Result<(), String> {
    if channel.is_empty() || chat_id.is_empty() {
        return Err("send: the event names no chat and the rule gives no channel and chat_id".to_owned());
    }
    let outlet = daemon
        .outlets()
        .get(channel)
        .ok_or_else(|| format!("send: the {channel} channel is not running, so chat {chat_id} cannot be reached"))?;
    if !daemon.gate().may_send(&daemon.config(), channel, chat_id) {
        return Err(format!("send: {channel}/{chat_id} is not a chat allowed to talk to Chela (unpaired or gone)"));
    }
    outlet.send_text(chat_id, text).await.map_err(|e| format!("send to {channel}/{chat_id}: {e}"))
}
