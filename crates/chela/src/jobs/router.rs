//! The router task of `chela run`: takes plans and events from the store's bounded queue and
//! runs the fired rules' actions; looks at `rules.json` every [`LOOK_EVERY`] for edits.
//!
//! Each plan runs in its own task (at most [`MAX_RUNNING`] at once; the queue waits meanwhile),
//! so a slow model answer does not hold back a `send`. Within a rule the actions run in order,
//! and `{{last.output}}` is the output of the latest `agent` (the answer) or `cap` (the result).
//! A failed action is logged and ends its rule (the next actions would read its output).
//!
//! After the rules, an event that none consumed goes to the scheduler's `on_event` jobs
//! ([`Scheduler::take_event`](crate::scheduler::Scheduler::take_event)); each fired job runs in
//! its own task, at most [`MAX_JOB_RUNS`] at once: more are dropped and logged, so a flood of
//! messages cannot start unbounded work.
//!
//! The plans' and the jobs' tasks belong to [`serve`]: it awaits them when the daemon stops and
//! aborts them when it is dropped, so no rule or job outlives the router.
//!
//! Depth: what a rule's actions raise (its `emit`s, the `cap_result` of its `cap` calls, the
//! tool calls of its `agent` turn) is one step deeper than the event that fired it; the core
//! fires no `emit` past `MAX_EMIT_DEPTH` and [`Daemon::raise`] raises nothing deeper, so rules
//! and jobs that answer each other's events stop.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use chela_core::router::{Action, Fired, Plan};

use super::scheduler::{call_cap, finish, reap, spawn_run, talk_answer};
use crate::daemon::Daemon;
use crate::router::Work;

/// How soon an edit of `rules.json` by another process is seen.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);
/// The most plans running at once.
pub const MAX_RUNNING: usize = 8;
/// The most `on_event` job runs going at once.
pub const MAX_JOB_RUNS: usize = 16;

/// Runs the router until the daemon stops.
pub async fn serve(daemon: Arc<Daemon>) -> Result<()> {
    let rules = Arc::clone(daemon.rules());
    let Some(mut queue) = rules.take_queue() else {
        anyhow::bail!("the router task runs once per daemon");
    };
    let running = Arc::new(tokio::sync::Semaphore::new(MAX_RUNNING));
    let jobs = Arc::new(tokio::sync::Semaphore::new(MAX_JOB_RUNS));
    let mut look = tokio::time::interval(LOOK_EVERY);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The plans and job runs going now; the semaphores bound them, and finished ones are reaped
    // at each pass.
    let mut runs = tokio::task::JoinSet::new();
    loop {
        reap(&mut runs);
        tokio::select! {
            work = queue.recv() => {
                let Some(work) = work else { break };
                let (plan, depth, event) = match work {
                    // A chat message: an outside event, depth 0.
                    Work::Plan(plan) => (plan, 0, None),
                    Work::Jobs(event) => (chela_core::router::Plan::default(), 0, Some(event)),
                    Work::Event(event) => {
                        let plan = rules.plan(&event);
                        let depth = event.depth();
                        let event = (!plan.consumed).then_some(event);
                        (plan, depth, event)
                    }
                };
                if !plan.fired.is_empty() {
                    let permit = Arc::clone(&running).acquire_owned().await?;
                    let daemon = Arc::clone(&daemon);
                    runs.spawn(crate::tasks::boxed(async move {
                        run_plan(&daemon, plan, depth.saturating_add(1)).await;
                        drop(permit);
                    }));
                }
                if let Some(event) = event {
                    start_jobs(&daemon, &jobs, &mut runs, event).await?;
                }
            }
            _ = look.tick() => {
                let r = Arc::clone(&rules);
                if crate::tasks::blocking(move || r.refresh()).await? {
                    chela_log::info!(rules = rules.len(), "{} changed; its rules apply from now on", crate::router::FILE);
                }
            }
            () = daemon.shutdown().wait() => break,
        }
    }
    // Their turns end at the stop's grace; `chela run` bounds this wait, and dropping this
    // future aborts what is left.
    finish(runs).await;
    Ok(())
}

/// Hands `event` to the scheduler's `on_event` jobs and starts those it fires.
async fn start_jobs(
    daemon: &Arc<Daemon>,
    jobs: &Arc<tokio::sync::Semaphore>,
    runs: &mut tokio::task::JoinSet<()>,
    event: chela_core::router::Event,
) -> Result<()> {
    let sched = Arc::clone(daemon.scheduler());
    if !sched.listens(event.kind()) {
        return Ok(());
    }
    let now = daemon.clock().unix_secs();
    // Noting the runs writes `cron.json`: off the async workers.
    let due = crate::tasks::blocking(move || sched.take_event(&event, now)).await?;
    for due in due {
        let Ok(permit) = Arc::clone(jobs).try_acquire_owned() else {
            chela_log::warn!(job = %due.job.id, "on_event job not run: {MAX_JOB_RUNS} job runs are already going");
            continue;
        };
        spawn_run(daemon, runs, due, Some(permit));
    }
    Ok(())
}

/// Runs every fired rule of `plan`, in order. `depth`: one more than the firing event's.
pub async fn run_plan(daemon: &Arc<Daemon>, plan: Plan, depth: u8) {
    for fired in plan.fired {
        let rule = fired.rule.clone();
        match run_rule(daemon, fired, depth).await {
            Ok(()) => chela_log::info!(rule = %rule, "router rule ran"),
            Err(why) => chela_log::warn!(rule = %rule, "router rule stopped: {why}"),
        }
    }
}

async fn run_rule(daemon: &Arc<Daemon>, fired: Fired, depth: u8) -> Result<(), String> {
    let mut last = String::new();
    let made_by = fired.made_by.as_ref();
    // The core holds a model-made rule to its own chat until the owner approves it; checked
    // again here, where the chat is reached.
    let own = |channel: &str, chat_id: &str| {
        if made_by.is_some_and(|m| m.confined() && !m.is_own(channel, chat_id)) {
            return Err(crate::automation::waiting_line("rule", &fired.rule, "chela rules approve"));
        }
        Ok(())
    };
    for action in fired.actions.iter().cloned() {
        match action {
            Action::Agent { channel, chat_id, message } => {
                own(&channel, &chat_id)?;
                last = talk_answer(daemon, &channel, &chat_id, message.render(&last), depth).await?;
            }
            Action::Cap { name, args } => {
                last = call_cap(daemon, &name, &args.render(&last).to_string(), depth, made_by).await?;
            }
            Action::Send { channel, chat_id, text } => {
                own(&channel, &chat_id)?;
                send(daemon, &channel, &chat_id, &text.render(&last)).await?;
            }
            Action::Emit(emit) => {
                let event = emit.event(&last).map_err(|e| format!("emit {}: {e}", emit.kind))?;
                daemon.raise(event);
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
