//! `chela status [--json]`: whether a `chela run` serves this workspace (and only this one),
//! which one (process, version, uptime), whether its gateway answers, and what waits for the
//! owner: pairing requests, devices to approve, the next scheduled jobs. When a daemon runs, its
//! gateway (`GET /api/live`, with the gateway token) tells the channels' states, the devices
//! connected now, the pairing requests and the next jobs as it holds them; otherwise they are
//! read from the workspace's files and the daemon's lock (see `presence`). Nothing is changed.
//!
//! Exit status: 0 when a daemon serves the workspace, 3 when none does (as `systemctl status`
//! says "not running"), so a script can ask with `chela status >/dev/null`.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Value, json};

use super::presence::{RunInfo, running_info};
use crate::config::Config;
use crate::workspace::Workspace;

/// Exit status when no daemon serves the workspace.
const EXIT_NOT_RUNNING: u8 = 3;
/// Jobs listed, soonest first.
const NEXT_JOBS: usize = 5;

pub async fn run(ws: &Workspace, as_json: bool) -> Result<ExitCode> {
    let cfg = Config::load(ws)?;
    let now = crate::clock::Clock::system().unix_secs();
    let info = running_info(ws);
    let gateway = match &info {
        Some(i) => Some(super::doctor::gateway_answers(&i.listen, &cfg.settings().gateway.token).await),
        None => None,
    };
    let live = match (&info, &gateway) {
        (Some(i), Some(Ok(()))) => {
            super::doctor::gateway_json(&i.listen, "/api/live", &cfg.settings().gateway.token).await.ok()
        }
        _ => None,
    };
    let mut report = Report::gather(ws, &cfg, now, info, gateway)?;
    if let Some(live) = live {
        report.take_daemons_view(&live);
    }
    // Today's tokens and cost, from the usage log (`chela usage` has the rest).
    let tz = crate::localtime::zone(cfg.get(chela_core::config::TIMEZONE));
    let today =
        chela_runtime::usage::Filter { session: None, since: Some(chela_runtime::usage::today_start(&tz, now)) };
    let usage = chela_runtime::usage::Report::gather(ws, &cfg, &today)?;
    if as_json {
        let mut v = report.json(now);
        v["usage_today"] = usage.json()["total"].clone();
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        out!("{}", report.text(ws, now));
        outln!("Today: {}", chela_runtime::usage::describe(&usage.all));
    }
    Ok(if report.info.is_some() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_NOT_RUNNING) })
}

struct Report {
    info: Option<RunInfo>,
    /// Whether the running daemon's gateway answered `/health` (why not, when it did not).
    gateway: Option<Result<(), String>>,
    /// Each channel: its name and whether it is configured.
    channels: Vec<(&'static str, bool)>,
    /// The running daemon's view of its channels (`GET /api/live`): name → state.
    live: Option<Value>,
    /// Pairing requests waiting: `channel:sender` and code.
    pairings: Vec<(String, String)>,
    devices_approved: usize,
    /// Approved devices that made an OTA check in the last [`SEEN_RECENTLY`] seconds.
    devices_seen: usize,
    devices_waiting: usize,
    /// The devices connected to the running daemon now: how many, and their ids.
    devices_online: Option<(u64, Vec<String>)>,
    /// The next jobs: id, name, next run (local time).
    jobs: Vec<(String, String, String)>,
}

/// A device checks in at start and then hourly at most; "seen" means within this long.
const SEEN_RECENTLY: u64 = 10 * 60;

impl Report {
    fn gather(
        ws: &Workspace,
        cfg: &Config,
        now: i64,
        info: Option<RunInfo>,
        gateway: Option<Result<(), String>>,
    ) -> Result<Report> {
        let unow = now.max(0).unsigned_abs();
        let channels = vec![
            ("telegram", crate::channels::telegram::configured(cfg)),
            ("feishu", crate::channels::feishu::configured(cfg)),
            ("xiaozhi", cfg.bool(chela_core::config::XIAOZHI_ENABLED)),
        ];
        let pairings = crate::access::Gate::open(ws)?
            .list(unow)?
            .pending
            .into_iter()
            .map(|p| (format!("{}:{}", p.channel, p.sender), p.code))
            .collect();
        let devices = crate::devices::Devices::open(ws).load()?;
        let approved: Vec<_> = devices.devices.iter().filter(|d| d.state == crate::devices::State::Approved).collect();
        let devices_seen = approved.iter().filter(|d| unow.saturating_sub(d.last_seen) <= SEEN_RECENTLY).count();
        let devices_waiting = devices.pending.iter().filter(|p| p.expires_at > unow).count();
        let sched = crate::scheduler::Scheduler::open(ws, crate::scheduler::Settings::from_config(cfg)?, now);
        let jobs = sched
            .upcoming(now)
            .into_iter()
            .take(NEXT_JOBS)
            .map(|v| (v.job.id, printable(&v.job.name), v.next_fire_local.unwrap_or_default()))
            .collect();
        Ok(Report {
            info,
            gateway,
            channels,
            live: None,
            pairings,
            devices_approved: approved.len(),
            devices_seen,
            devices_waiting,
            devices_online: None,
            jobs,
        })
    }

    /// Takes what the running daemon reports (`GET /api/live`) over what the files say.
    fn take_daemons_view(&mut self, live: &Value) {
        self.live = Some(live["channels"].clone());
        let text = |v: &Value| printable(v.as_str().unwrap_or_default());
        if let Some(d) = live["devices_online"].as_object() {
            let ids = d["ids"].as_array().map(|a| a.iter().map(text).collect()).unwrap_or_default();
            self.devices_online = Some((d["count"].as_u64().unwrap_or(0), ids));
        }
        if let Some(p) = live["pairing_requests"].as_array() {
            self.pairings = p.iter().map(|p| (text(&p["sender"]), text(&p["code"]))).collect();
        }
        if let Some(j) = live["next_jobs"].as_array() {
            self.jobs =
                j.iter().take(NEXT_JOBS).map(|j| (text(&j["id"]), text(&j["name"]), text(&j["next_run"]))).collect();
        }
    }

    fn text(&self, ws: &Workspace, now: i64) -> String {
        let mut out = String::new();
        match &self.info {
            Some(i) => {
                let _ = writeln!(
                    out,
                    "chela run: running on {} (pid {}, up {}, version {} commit {})",
                    ws.root().display(),
                    i.pid,
                    uptime(now - i.started),
                    i.version,
                    i.commit
                );
                let answer = match &self.gateway {
                    Some(Ok(())) => "answers".to_owned(),
                    Some(Err(why)) => format!("does not answer: {why}"),
                    None => "not asked".to_owned(),
                };
                let _ = writeln!(out, "gateway:   http://{} {answer}", i.listen);
            }
            None => {
                let _ = writeln!(
                    out,
                    "chela run: not running on {} (start it with `chela run`, or `chela service install`)",
                    ws.root().display()
                );
            }
        }
        let channels: Vec<String> =
            self.channels.iter().map(|(n, on)| format!("{n} {}", self.state(n, *on, now))).collect();
        let _ = writeln!(out, "channels:  {}", channels.join(", "));
        if let Some((count, ids)) = &self.devices_online {
            let listed = if ids.is_empty() { String::new() } else { format!(": {}", ids.join(", ")) };
            let _ = writeln!(out, "online:    {count} device(s) connected now{listed}");
        }
        let _ = writeln!(
            out,
            "devices:   {} approved ({} seen in the last {} min), {} waiting for approval{}",
            self.devices_approved,
            self.devices_seen,
            SEEN_RECENTLY / 60,
            self.devices_waiting,
            if self.devices_waiting > 0 { " (`chela device list`)" } else { "" }
        );
        if self.pairings.is_empty() {
            out.push_str("pairing:   no requests waiting\n");
        } else {
            let who: Vec<String> = self.pairings.iter().map(|(w, c)| format!("{w} ({c})")).collect();
            let _ = writeln!(out, "pairing:   {} waiting: {} (`chela pairing list`)", who.len(), who.join(", "));
        }
        if self.jobs.is_empty() {
            out.push_str("next jobs: none\n");
        } else {
            out.push_str("next jobs:\n");
            for (id, name, when) in &self.jobs {
                let named = if name.is_empty() { String::new() } else { format!("  {name}") };
                let _ = writeln!(out, "  {when}  {id}{named}");
            }
        }
        out
    }

    fn json(&self, now: i64) -> Value {
        json!({
            "running": self.info.is_some(),
            "daemon": self.info.as_ref().map(|i| json!({
                "pid": i.pid,
                "version": i.version,
                "commit": i.commit,
                "started": i.started,
                "uptime_secs": (now - i.started).max(0),
                "listen": i.listen,
                "gateway_answers": matches!(self.gateway, Some(Ok(()))),
            })),
            "channels": self.channels.iter().map(|(n, on)| {
                let live = self.live.as_ref().map(|l| &l[*n]).filter(|v| v.is_object());
                json!({
                    "name": n,
                    "configured": on,
                    "connected": live.map(|l| l["connected"].clone()),
                    "since": live.map(|l| l["since"].clone()),
                    "last_error": live.map(|l| l["last_error"].clone()),
                    "error_at": live.map(|l| l["error_at"].clone()),
                })
            }).collect::<Vec<_>>(),
            "devices": {
                "approved": self.devices_approved,
                "seen_recently": self.devices_seen,
                "waiting": self.devices_waiting,
                "online": self.devices_online.as_ref().map(|(n, _)| n),
                "online_ids": self.devices_online.as_ref().map(|(_, ids)| ids),
            },
            "pairing_requests": self.pairings.iter().map(|(w, c)| json!({"sender": w, "code": c})).collect::<Vec<_>>(),
            "next_jobs": self.jobs.iter().map(|(id, name, when)| json!({"id": id, "name": name, "next_run": when})).collect::<Vec<_>>(),
        })
    }
}

impl Report {
    /// A channel's state in words: off, configured, or as the running daemon reports it.
    fn state(&self, name: &str, configured: bool, now: i64) -> String {
        if !configured {
            return "off".to_owned();
        }
        let Some(live) = self.live.as_ref().map(|l| &l[name]).filter(|v| v.is_object()) else {
            return "configured".to_owned();
        };
        let ago = |key: &str| uptime(now - live[key].as_i64().unwrap_or(now));
        let error = live["last_error"].as_str().map(printable);
        match (live["connected"].as_bool() == Some(true), error) {
            (true, None) => format!("connected for {}", ago("since")),
            (true, Some(e)) => format!("connected for {} (last error {} ago: {e})", ago("since"), ago("error_at")),
            (false, Some(e)) => format!("failing: {e} ({} ago)", ago("error_at")),
            (false, None) => "not connected".to_owned(),
        }
    }
}

/// Seconds as people read an uptime: `42 s`, `7 min`, `3 h 5 min`, `2 d 4 h`.
fn uptime(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A name the model may have written, safe for a terminal.
fn printable(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptimes_read_as_people_say_them() {
        assert_eq!(uptime(-5), "0 s");
        assert_eq!(uptime(42), "42 s");
        assert_eq!(uptime(7 * 60 + 3), "7 min");
        assert_eq!(uptime(3 * 3600 + 5 * 60), "3 h 5 min");
        assert_eq!(uptime(2 * 86_400 + 4 * 3600), "2 d 4 h");
        assert_eq!(printable(" a\u{1b}[2Jb\n"), "a [2Jb");
    }
}
