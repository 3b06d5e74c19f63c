//! `chela cron list`: the jobs in `cron.json`, and when each fires next.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use chela_core::config as keys;
use chela_core::schedule::file::CronFile;
use chela_core::schedule::{Action, Job, Trigger};
use chela_core::zone::{DateTime, Zone};

use crate::automation::{cron_path, load_cron, load_zone};
use crate::config::Config;
use crate::workspace::Workspace;

pub fn list(ws: &Workspace) -> Result<ExitCode> {
    let cfg = Config::load(ws)?;
    let user_zone = load_zone(cfg.get(keys::TIMEZONE))?;
    let Some(file) = load_cron(ws)? else {
        println!("No scheduled jobs ({} does not exist).", cron_path(ws).display());
        return Ok(ExitCode::SUCCESS);
    };
    let now = i64::try_from(crate::access::now_secs()).unwrap_or(i64::MAX);
    print!("{}", render(&file, &user_zone, &|name| load_zone(name).map_err(|e| format!("{e:#}")), now));
    Ok(ExitCode::SUCCESS)
}

/// The listing of `file` at `now`; `zone` loads a cron job's own zone.
fn render(file: &CronFile, user_zone: &Zone, zone: &dyn Fn(&str) -> Result<Zone, String>, now: i64) -> String {
    let mut out = String::new();
    if file.jobs.is_empty() {
        out.push_str("No valid jobs in cron.json.\n");
    } else {
        let _ = writeln!(out, "{:<20} {:<6} {:<28} {:<34} ACTION", "ID", "STATE", "NEXT FIRE", "TRIGGER");
    }
    for loaded in &file.jobs {
        let job = &loaded.job;
        let own = match &job.trigger {
            Trigger::Cron { tz: Some(tz), .. } => Some(zone(tz)),
            _ => None,
        };
        let next = match &own {
            Some(Err(e)) => format!("- ({e})"),
            Some(Ok(z)) => shown(job.next_fire(&loaded.schedule, now, z), z),
            None => shown(job.next_fire(&loaded.schedule, now, user_zone), user_zone),
        };
        let state = match (job.enabled, job.paused) {
            (false, _) => "off",
            (true, true) => "paused",
            (true, false) => "on",
        };
        let _ = writeln!(out, "{:<20} {state:<6} {next:<28} {:<34} {}", job.id, trigger(job), action(job));
    }
    for bad in &file.bad {
        let _ = writeln!(out, "not valid: cron.json {bad}");
    }
    out
}

fn shown(at: Option<i64>, zone: &Zone) -> String {
    let Some(at) = at else { return "-".to_owned() };
    let off = zone.offset_at(at);
    let sign = if off < 0 { '-' } else { '+' };
    let off = off.unsigned_abs();
    format!("{} {sign}{:02}:{:02}", DateTime::from_seconds(zone.to_local(at)), off / 3600, off / 60 % 60)
}

fn trigger(job: &Job) -> String {
    match &job.trigger {
        Trigger::Once { at } => format!("once at {}", shown(Some(*at), &Zone::utc())),
        Trigger::Interval { every_s, .. } => format!("every {every_s} s"),
        Trigger::Cron { expr, tz: Some(tz) } => format!("cron `{expr}` {tz}"),
        Trigger::Cron { expr, tz: None } => format!("cron `{expr}`"),
        Trigger::OnEvent { event, .. } => format!("on event {event}"),
    }
}

fn action(job: &Job) -> String {
    match &job.action {
        Action::Agent { channel, chat_id, .. } => format!(
            "agent message to {}:{}",
            channel.as_deref().unwrap_or("(default channel)"),
            chat_id.as_deref().unwrap_or("(default chat)")
        ),
        Action::Cap { name, .. } => format!("call {name}"),
        Action::Emit { event, .. } => format!("emit {event}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_core::schedule::file::load;

    #[test]
    fn lists_jobs_with_their_next_fire_in_their_zone_and_the_bad_entries() {
        let text = r#"{"jobs": [
  {"id": "morning", "trigger": {"type": "cron", "expr": "0 8 * * 1-5", "tz": "Europe/Berlin"}, "action": {"type": "agent", "message": "Plan", "channel": "telegram", "chat_id": "42"}},
  {"id": "tick", "paused": true, "trigger": {"type": "interval", "every_s": 300}, "action": {"type": "cap", "name": "time_now"}},
  {"id": "later", "trigger": {"type": "once", "at": 1796040000}, "action": {"type": "emit", "event": "x"}},
  {"id": "mars", "trigger": {"type": "cron", "expr": "0 8 * * *", "tz": "Mars/Olympus"}, "action": {"type": "emit", "event": "x"}},
  {"id": "broken", "trigger": {"type": "cron", "expr": "0 8 * *"}, "action": {"type": "emit", "event": "x"}}
]}"#;
        let file = load(text).unwrap();
        // Monday 30 November 2026, 11:00 UTC.
        let now = 1_796_040_000 - 3600;
        let ny = load_zone("America/New_York").unwrap();
        let out = render(&file, &ny, &|name| load_zone(name).map_err(|e| format!("{e:#}")), now);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("ID"), "{out}");
        assert!(lines[1].starts_with("morning") && lines[1].contains("on     2026-12-01 08:00:00 +01:00"), "{out}");
        assert!(
            lines[1].contains("cron `0 8 * * 1-5` Europe/Berlin") && lines[1].ends_with("agent message to telegram:42"),
            "{out}"
        );
        assert!(lines[2].starts_with("tick") && lines[2].contains("paused -"), "{out}");
        // The user's zone (New York, UTC-5) shows the once job.
        assert!(lines[3].contains("2026-11-30 07:00:00 -05:00") && lines[3].ends_with("emit x"), "{out}");
        assert!(lines[4].starts_with("mars") && lines[4].contains("Mars/Olympus\" is not in"), "{out}");
        assert!(
            lines[5].starts_with(
                "not valid: cron.json line 6: job 5 (\"broken\"): trigger.expr: expression field: has 4 fields"
            ),
            "{out}"
        );
    }
}
