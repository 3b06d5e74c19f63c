//! `chela cron list|add|remove|trigger|pause|resume|approve`, `chela rules list|approve|remove`
//! and `chela heartbeat trigger`: the scheduled jobs and the router's rules, on the same
//! `cron.json` and `rules.json` the running daemon reads (it sees a change within a second).
//! Running a job or a heartbeat is the daemon's: those verbs leave it a request. Approving
//! what the assistant made is the owner's, here (never a tool's).

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use chela_core::schedule::Job;

use crate::args::{CronCmd, RulesCmd};
use crate::config::Config;
use crate::scheduler::{Scheduler, Settings, request};
use crate::workspace::Workspace;

pub fn run(ws: &Workspace, cmd: CronCmd) -> Result<ExitCode> {
    ws.ensure()?;
    let cfg = Config::load(ws)?;
    let now = crate::clock::Clock::system().unix_secs();
    let sched = Scheduler::open(ws, Settings::from_config(&cfg)?, now);
    let out = match cmd {
        CronCmd::List => list(&sched, now),
        CronCmd::Add(json) => {
            let job: Job =
                serde_json::from_str(&json).context("the job is not valid JSON of a job (see `chela cron --help`)")?;
            let id = job.id.clone();
            let replaced = sched.upsert(job, now)?;
            let next =
                sched.get(&id, now).and_then(|v| v.next_fire_local).unwrap_or_else(|| "never on its own".to_owned());
            format!("{} job {id}; next run: {next}\n", if replaced { "Replaced" } else { "Added" })
        }
        CronCmd::Remove(id) => {
            sched.remove(&id)?;
            format!("Removed job {id}.\n")
        }
        CronCmd::Pause(id) => {
            sched.update(&id, now, |j| j.paused = true)?;
            format!("Paused job {id}.\n")
        }
        CronCmd::Resume(id) => {
            sched.update(&id, now, |j| j.paused = false)?;
            format!("Resumed job {id}.\n")
        }
        CronCmd::Approve(id) => {
            sched.approve(&id, now)?;
            format!("Approved job {id}: it may now act beyond the chat it was made in.\n")
        }
        CronCmd::Trigger(id) => {
            if sched.get(&id, now).is_none() {
                bail!("there is no job {id:?}; `chela cron list` lists them");
            }
            request(ws, &format!("run.{id}"))?;
            format!("Asked the running daemon to run job {id} now (`chela run` picks it up within a second).\n")
        }
    };
    out!("{out}");
    Ok(ExitCode::SUCCESS)
}

fn list(sched: &Scheduler, now: i64) -> String {
    let mut out = String::new();
    let jobs = sched.list(now);
    if jobs.is_empty() {
        out.push_str("No scheduled jobs.\n");
    }
    for v in &jobs {
        let j = &v.job;
        let state = if !j.enabled {
            "disabled"
        } else if j.paused {
            "paused"
        } else {
            "active"
        };
        let when = serde_json::to_string(&j.trigger).unwrap_or_default();
        let next = v.next_fire_local.as_deref().unwrap_or("-");
        let _ = writeln!(out, "{}  {state}  next: {next}  {when}", j.id);
        if !j.name.trim().is_empty() {
            // The model may have named the job: no control character reaches the terminal.
            let name: String = j.name.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
            let _ = writeln!(out, "    name: {}", name.trim());
        }
        if let Some(m) = &j.made_by {
            let approval = if v.pending {
                format!("; acts on another chat: waits for your approval (`chela cron approve {}`)", j.id)
            } else if m.approved {
                "; approved".to_owned()
            } else {
                "; acts in that chat only".to_owned()
            };
            let _ = writeln!(out, "    made by the assistant in {}{approval}", m.chat());
        }
        if let Some(status) = &v.status {
            let _ = writeln!(out, "    last: {status}");
        }
    }
    left_out(&mut out, "cron.json", sched.problems().lines());
    out
}

pub fn rules(ws: &Workspace, cmd: RulesCmd) -> Result<ExitCode> {
    ws.ensure()?;
    let rules = crate::router::Rules::open(ws);
    let out = match cmd {
        RulesCmd::List => rules_list(&rules),
        RulesCmd::Approve(id) => {
            rules.approve(&id)?;
            format!("Approved rule {id}: it may now act beyond the chat it was made in.\n")
        }
        RulesCmd::Remove(id) => {
            rules.remove(&id)?;
            format!("Removed rule {id}.\n")
        }
    };
    out!("{out}");
    Ok(ExitCode::SUCCESS)
}

fn rules_list(rules: &crate::router::Rules) -> String {
    let mut out = String::new();
    let list = rules.list();
    if list.is_empty() {
        out.push_str("No router rules.\n");
    }
    for r in &list {
        let id = r["id"].as_str().unwrap_or_default();
        let state = if r["enabled"] == true { "enabled" } else { "disabled" };
        let by = r["made_by"].as_str().unwrap_or_default();
        let wait = if r["pending"] == true {
            format!("  acts on another chat: waits for your approval (`chela rules approve {id}`)")
        } else {
            String::new()
        };
        let _ = writeln!(out, "{id}  {state}  made by {by}{wait}");
    }
    left_out(&mut out, "rules.json", rules.problems().lines());
    out
}

/// The entries of `file` its loader left out, after a listing.
fn left_out<P: std::fmt::Display>(out: &mut String, file: &str, problems: Vec<P>) {
    if !problems.is_empty() {
        let _ = writeln!(out, "\nLeft out of {file} (fix them; `chela doctor` lists them too):");
        for p in problems {
            let _ = writeln!(out, "  {p}");
        }
    }
}

pub fn heartbeat(ws: &Workspace) -> Result<ExitCode> {
    ws.ensure()?;
    request(ws, "heartbeat")?;
    outln!("Asked the running daemon for a heartbeat now (`chela run` picks it up within a second).");
    Ok(ExitCode::SUCCESS)
}
