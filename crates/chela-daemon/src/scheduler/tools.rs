//! The `scheduler` group: the model keeps its own jobs in `cron.json` (see
//! [`crate::scheduler`]). Registered by the daemon, whose scheduler task runs the jobs.
//!
//! `cron_add`, `cron_list` and `cron_remove` are MimiClaw's tools with MimiClaw's argument
//! names, over the same store, as `chela_core::contract::cron` gives them to the host and the
//! chip alike. A job's channel and chat default to the conversation the tool is called from.

use std::sync::Arc;

use chela_core::contract::cron;
use chela_core::schedule::{Action, Job, Trigger};

use crate::scheduler::Scheduler;
use crate::tools::{Group, Tool, ToolCtx, ToolError, ToolResult};
use chela_runtime::read_args;

pub fn group(sched: Arc<Scheduler>) -> Group {
    let s = || Arc::clone(&sched);
    Group::new("scheduler", "Scheduled jobs: run a prompt or a tool at set times.")
        .hidden("reminders, cron")
        .guidance(
            "SCHEDULER: scheduler_add_job makes a job that runs later on its own: `once` at a Unix time, \
             `interval` every N seconds, or `cron` (5 or 6 fields, in the user's zone). An `agent` job puts \
             its message into this chat as if from the scheduler and you answer it then; a `cap` job calls a \
             tool. Use get_current_time for the current Unix time.",
        )
        .with(AddJob(s()))
        .with(ListJobs(s()))
        .with(GetJob(s()))
        .with(RemoveJob(s()))
        .with(EnableJob(s()))
        .with(DisableJob(s()))
        .with(PauseJob(s()))
        .with(ResumeJob(s()))
        .with(TriggerNow(s()))
        .with(CronAdd(s()))
        .with(CronList(s()))
        .with(CronRemove(s()))
}

fn failed(e: anyhow::Error) -> ToolError {
    ToolError::invalid_args(format!("{e:#}"))
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Fills an `agent` action's missing channel and chat from the conversation. `on_event`: the
/// job may go without one (it then talks in the chat of the event that fired it).
fn default_target(ctx: &ToolCtx, action: &mut Action, on_event: bool) -> Result<(), ToolError> {
    if let Action::Agent { channel, chat_id, .. } = action {
        if let Some((c, id)) = &ctx.conversation
            && channel.is_none()
        {
            *channel = Some(c.clone());
            if chat_id.is_none() {
                *chat_id = Some(id.clone());
            }
        }
        if (channel.is_none() || chat_id.is_none()) && !on_event {
            return Err(ToolError::invalid_args(
                "an agent job needs action.channel and action.chat_id (there is no current conversation to default to)",
            ));
        }
    }
    Ok(())
}

pub struct AddJob(Arc<Scheduler>);

pub struct AddArgs {
    id: String,
    name: String,
    trigger: Trigger,
    action: Action,
    enabled: Option<bool>,
    grace_s: Option<u64>,
    delete_after_run: bool,
}

read_args!(strict AddArgs { id: need, name: or_default, trigger: need, action: need, enabled: opt, grace_s: opt, delete_after_run: or_default });

impl Tool for AddJob {
    const NAME: &'static str = "scheduler_add_job";
    const DESCRIPTION: &'static str = "Add a scheduled job, or replace the job with the same id.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"id":{"type":"string","description":"Letters, digits, _ - . (at most 64)"},"name":{"type":"string"},"trigger":{"type":"object","description":"{\"type\":\"once\",\"at\":UNIX_SECONDS} | {\"type\":\"interval\",\"every_s\":N} | {\"type\":\"cron\",\"expr\":\"0 8 * * 1-5\",\"tz\":\"optional IANA zone\"} | {\"type\":\"on_event\",\"event\":\"message\",\"match\":{\"field\":\"exact value\"}}"},"action":{"type":"object","description":"{\"type\":\"agent\",\"message\":\"...\",\"channel\":\"optional\",\"chat_id\":\"optional\"} (default: this chat) | {\"type\":\"cap\",\"name\":\"tool\",\"args\":{}} | {\"type\":\"emit\",\"event\":\"type\",\"data\":{\"text\":\"...\",\"field\":\"value\"}} (an event for the router's rules)"},"enabled":{"type":"boolean"},"grace_s":{"type":"integer","description":"How late a run missed while Chela was down may still happen"},"delete_after_run":{"type":"boolean","description":"Remove a once job after it ran"}},"required":["id","trigger","action"]}"#;
    const BLOCKING: bool = true;
    type Args = AddArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: AddArgs) -> ToolResult {
        let made_by = crate::automation::made_by(ctx).map_err(ToolError::refused)?;
        let mut action = a.action;
        default_target(ctx, &mut action, matches!(a.trigger, Trigger::OnEvent { .. }))?;
        let job = Job {
            id: a.id,
            name: a.name,
            enabled: a.enabled.unwrap_or(true),
            paused: false,
            trigger: a.trigger,
            action,
            grace_s: a.grace_s,
            delete_after_run: a.delete_after_run,
            created_at: None,
            last_run: None,
            made_by,
        };
        let id = job.id.clone();
        let now = ctx.clock.unix_secs();
        let replaced = self.0.upsert(job, now).map_err(failed)?;
        let view = self.0.get(&id, now).ok_or_else(|| ToolError::new("the job vanished as it was added"))?;
        Ok(format!("{} job {id}.{} {}", if replaced { "Replaced" } else { "Added" }, waits(&view), json(&view)))
    }
}

pub struct NoArgs {}

read_args!(strict NoArgs {});

pub struct ListJobs(Arc<Scheduler>);

impl Tool for ListJobs {
    const NAME: &'static str = "scheduler_list_jobs";
    const DESCRIPTION: &'static str =
        "List the scheduled jobs with their next fire times, and any bad entries of cron.json.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    const BLOCKING: bool = true;
    type Args = NoArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, _: NoArgs) -> ToolResult {
        Ok(list(&self.0, ctx.clock.unix_secs()))
    }
}

fn list(s: &Scheduler, now: i64) -> String {
    s.refresh(now);
    let problems = s.problems().lines();
    json(&serde_json::json!({ "jobs": s.list(now), "problems": problems }))
}

/// A tool that takes a job id and does one thing with it: `$run(scheduler, id)`.
macro_rules! id_tool {
    ($ty:ident, $name:literal, $desc:literal, $run:path) => {
        pub struct $ty(Arc<Scheduler>);

        impl Tool for $ty {
            const NAME: &'static str = $name;
            const DESCRIPTION: &'static str = $desc;
            const SCHEMA: &'static str =
                r#"{"type":"object","properties":{"id":{"type":"string","description":"The job's id"}},"required":["id"]}"#;
            const BLOCKING: bool = true;
            type Args = IdArgs;

            async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: IdArgs) -> ToolResult {
                let now = ctx.clock.unix_secs();
                self.0.refresh(now);
                $run(&self.0, &a.id, now)
            }
        }
    };
}

pub struct IdArgs {
    id: String,
}

read_args!(strict IdArgs { id: need });

fn updated(s: &Scheduler, id: &str, now: i64, what: &str, f: impl FnOnce(&mut Job)) -> ToolResult {
    s.update(id, now, f).map_err(failed)?;
    let view = s.get(id, now).ok_or_else(|| ToolError::new("the job vanished"))?;
    Ok(format!("Job {id} {what}. {}", json(&view)))
}

fn get(s: &Scheduler, id: &str, now: i64) -> ToolResult {
    s.get(id, now)
        .map(|v| json(&v))
        .ok_or_else(|| ToolError::invalid_args(format!("there is no job {id:?} (the job list shows the ids)")))
}

fn remove(s: &Scheduler, id: &str, _now: i64) -> ToolResult {
    s.remove(id).map_err(failed)?;
    Ok(format!("Removed job {id}."))
}

fn enable(s: &Scheduler, id: &str, now: i64) -> ToolResult {
    updated(s, id, now, "enabled", |j| j.enabled = true)
}

fn disable(s: &Scheduler, id: &str, now: i64) -> ToolResult {
    updated(s, id, now, "disabled", |j| j.enabled = false)
}

fn pause(s: &Scheduler, id: &str, now: i64) -> ToolResult {
    updated(s, id, now, "paused", |j| j.paused = true)
}

fn resume(s: &Scheduler, id: &str, now: i64) -> ToolResult {
    updated(s, id, now, "resumed", |j| j.paused = false)
}

fn trigger(s: &Scheduler, id: &str, _now: i64) -> ToolResult {
    s.trigger(id).map_err(failed)?;
    Ok(format!("Job {id} runs now (its outcome shows in scheduler_get_job)."))
}

id_tool!(GetJob, "scheduler_get_job", "One scheduled job, its next fire time and the outcome of its last run.", get);
id_tool!(RemoveJob, "scheduler_remove_job", "Remove a scheduled job.", remove);
id_tool!(EnableJob, "scheduler_enable_job", "Enable a scheduled job.", enable);
id_tool!(DisableJob, "scheduler_disable_job", "Disable a scheduled job: it never fires until enabled.", disable);
id_tool!(PauseJob, "scheduler_pause_job", "Pause a scheduled job until it is resumed.", pause);
id_tool!(ResumeJob, "scheduler_resume_job", "Resume a paused job (runs missed while paused are not made up).", resume);
id_tool!(TriggerNow, "scheduler_trigger_now", "Run a scheduled job now, once, without changing its schedule.", trigger);

pub struct CronAdd(Arc<Scheduler>);

impl Tool for CronAdd {
    const NAME: &'static str = cron::ADD.name;
    const DESCRIPTION: &'static str = cron::ADD.description;
    const SCHEMA: &'static str = cron::ADD.input_schema;
    const ALIASES: &'static [&'static str] = cron::AddArgs::ALIASES;
    const BLOCKING: bool = true;
    type Args = cron::AddArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: cron::AddArgs) -> ToolResult {
        let now = ctx.clock.unix_secs();
        let cron::Plan { trigger, delete_after_run } = a.plan(now).map_err(ToolError::invalid_args)?;
        let made_by = crate::automation::made_by(ctx).map_err(ToolError::refused)?;
        let mut action = Action::Agent { message: a.message, channel: a.channel, chat_id: a.chat_id };
        default_target(ctx, &mut action, false)?;
        let id = free_id(&self.0, now);
        let job = Job {
            id: id.clone(),
            name: a.name,
            enabled: true,
            paused: false,
            trigger,
            action,
            grace_s: None,
            delete_after_run,
            created_at: None,
            last_run: None,
            made_by,
        };
        self.0.upsert(job, now).map_err(failed)?;
        let view = self.0.get(&id, now).ok_or_else(|| ToolError::new("the job vanished as it was added"))?;
        Ok(format!("OK: added cron job {id}.{} {}", waits(&view), json(&view)))
    }
}

/// What the model is told of a job that does nothing until the owner approves it.
fn waits(view: &crate::scheduler::JobView) -> &'static str {
    if view.pending {
        " It acts on another chat, so it waits for the owner's approval (`chela cron approve`) and does nothing until then."
    } else {
        ""
    }
}

/// An id no job has: MimiClaw's kind, eight hex digits.
fn free_id(s: &Scheduler, now: i64) -> String {
    // At most `scheduler.max_jobs` ids: a list is enough.
    let taken: Vec<String> = s.list(now).into_iter().map(|v| v.job.id).collect();
    let mut n = (now as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    loop {
        let id = format!("{:08x}", n as u32);
        if !taken.contains(&id) {
            return id;
        }
        n = n.wrapping_add(1);
    }
}

pub struct CronList(Arc<Scheduler>);

impl Tool for CronList {
    const NAME: &'static str = cron::LIST.name;
    const DESCRIPTION: &'static str = cron::LIST.description;
    const SCHEMA: &'static str = cron::LIST.input_schema;
    const BLOCKING: bool = true;
    type Args = NoArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, _: NoArgs) -> ToolResult {
        Ok(list(&self.0, ctx.clock.unix_secs()))
    }
}

pub struct CronRemove(Arc<Scheduler>);

impl Tool for CronRemove {
    const NAME: &'static str = cron::REMOVE.name;
    const DESCRIPTION: &'static str = cron::REMOVE.description;
    const SCHEMA: &'static str = cron::REMOVE.input_schema;
    const ALIASES: &'static [&'static str] = cron::RemoveArgs::ALIASES;
    const BLOCKING: bool = true;
    type Args = cron::RemoveArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: cron::RemoveArgs) -> ToolResult {
        self.0.refresh(ctx.clock.unix_secs());
        self.0.remove(&a.job_id).map_err(failed)?;
        Ok(format!("OK: removed cron job {}.", a.job_id))
    }
}

#[cfg(test)]
mod tests;
