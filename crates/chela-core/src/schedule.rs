//! Scheduled jobs: triggers, next-fire times in a zone, enable and pause state, and the
//! missed-run rule.
//!
//! What it is: the decisions. [`Job::next_fire`] says when a job fires next after `now`;
//! [`Job::catch_up`] says, once at start, whether a run missed while Chela was down should
//! happen now (at most one, and only within the job's grace window); [`Job::record_run`]
//! notes a run. [`file::load`] reads a hand-editable `cron.json`, keeping the good jobs and
//! reporting the bad entries with their line.
//!
//! What it is not: it holds no timer and reads no clock or file. The host keeps the jobs, sleeps
//! until the earliest next fire, runs the action, records the run and writes the file.
//!
//! Times are seconds since the Unix epoch (UTC). A job's zone matters only for `cron`
//! triggers; the host resolves the job's `tz` (or the user's zone) to a [`Zone`].

pub mod cron;
pub mod file;
pub mod json;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use core::fmt;

pub use cron::{Cron, CronError};

use crate::router::MadeBy;
use crate::zone::{Zone, check_zone_name, civil};

/// Grace window for a missed run when a job names none: one hour.
pub const DEFAULT_GRACE_S: u64 = 3600;
/// Bounds on a job's text fields.
pub const MAX_ID_LEN: usize = 64;
pub const MAX_NAME_LEN: usize = 200;
pub const MAX_MESSAGE_LEN: usize = 8 * 1024;
pub const MAX_EVENT_FILTERS: usize = 16;
/// The longest interval: ten years.
pub const MAX_INTERVAL_S: u64 = 10 * 366 * 86_400;

/// When a job fires: `{"type": "cron", "expr": …}` (read by [`json::trigger`] in one
/// pass, written by [`json::write_job`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Once, at an instant.
    Once { at: i64 },
    /// Every `every_s` seconds, at `anchor + k * every_s` (the anchor defaults to the epoch, so
    /// `every_s: 300` fires on the five minutes).
    Interval { every_s: u64, anchor: i64 },
    /// A cron expression in a zone (`tz`, an IANA name; the user's zone when absent).
    Cron { expr: String, tz: Option<String> },
    /// When an event of this type arrives whose fields equal every entry of `match`.
    OnEvent { event: String, filter: BTreeMap<String, String> },
}

/// What a job does when it fires: `{"type": "agent", …}` (read by [`json::action`] in one
/// pass, written by [`json::write_job`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Put `message` into a chat as if from the scheduler.
    Agent { message: String, channel: Option<String>, chat_id: Option<String> },
    /// Call a capability with JSON arguments.
    Cap { name: String, args: serde_json::Value },
    /// Raise an event.
    Emit { event: String, data: serde_json::Value },
}

/// One scheduled job, as stored in `cron.json` (read by [`json::job`], which refuses unknown
/// fields and gives the defaults below; written by [`json::write_job`], which leaves out an empty
/// name and absent options).
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub id: String,
    pub name: String,
    /// A disabled job never fires (absent: enabled).
    pub enabled: bool,
    /// A paused job does not fire until resumed.
    pub paused: bool,
    pub trigger: Trigger,
    pub action: Action,
    /// How late a run missed while Chela was down may still happen ([`DEFAULT_GRACE_S`] when
    /// absent).
    pub grace_s: Option<u64>,
    /// Remove the job after it has run (for `once` jobs).
    pub delete_after_run: bool,
    pub created_at: Option<i64>,
    pub last_run: Option<i64>,
    /// The conversation the model made it in (set by the tools, never by the model); `None`
    /// for the owner's jobs. See [`MadeBy`].
    pub made_by: Option<MadeBy>,
}

/// The timing of a validated job, ready to compute with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    Once(i64),
    Interval { every: i64, anchor: i64 },
    Cron(Cron),
    OnEvent,
}

impl Schedule {
    /// The first firing instant strictly after `t`, ignoring the job's state.
    /// Answers `None` outside years 1 to 9999.
    pub fn next_after(&self, t: i64, zone: &Zone) -> Option<i64> {
        if !(civil::min_seconds()..civil::max_seconds()).contains(&t) {
            return None;
        }
        let next = match self {
            Schedule::Once(at) => (*at > t).then_some(*at),
            Schedule::Interval { every, anchor } => {
                let k = t.checked_sub(*anchor)?.div_euclid(*every).checked_add(1)?;
                anchor.checked_add(k.checked_mul(*every)?)
            }
            Schedule::Cron(cron) => cron.next_fire(t, zone),
            Schedule::OnEvent => None,
        };
        next.filter(|&at| at <= civil::max_seconds())
    }
}

/// A job that is not valid; `field` is the path of the field at fault (`trigger.expr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl core::error::Error for JobError {}

fn bad(field: &str, message: String) -> JobError {
    JobError { field: String::from(field), message }
}

fn check_len(field: &str, value: &str, min: usize, max: usize) -> Result<(), JobError> {
    if value.len() < min {
        return Err(bad(field, String::from("must not be empty")));
    }
    if value.len() > max {
        return Err(bad(field, format!("is {} bytes; the limit is {max}", value.len())));
    }
    Ok(())
}

impl Job {
    /// Checks every field and compiles the trigger. Errors name the field.
    pub fn validate(&self) -> Result<Schedule, JobError> {
        check_len("id", &self.id, 1, MAX_ID_LEN)?;
        if !self.id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')) {
            return Err(bad("id", format!("{:?} may hold only letters, digits, `_`, `-` and `.`", self.id)));
        }
        check_len("name", &self.name, 0, MAX_NAME_LEN)?;
        if let Some(m) = &self.made_by {
            m.check().map_err(|e| bad("made_by", e))?;
        }
        match &self.action {
            Action::Agent { message, channel, chat_id } => {
                check_len("action.message", message, 1, MAX_MESSAGE_LEN)?;
                check_len("action.channel", channel.as_deref().unwrap_or("-"), 1, MAX_ID_LEN)?;
                check_len("action.chat_id", chat_id.as_deref().unwrap_or("-"), 1, 256)?;
            }
            Action::Cap { name, .. } => check_len("action.name", name, 1, MAX_ID_LEN)?,
            Action::Emit { event, .. } => check_len("action.event", event, 1, MAX_ID_LEN)?,
        }
        Ok(match &self.trigger {
            Trigger::Once { at } => Schedule::Once(*at),
            Trigger::Interval { every_s, anchor } => {
                if *every_s == 0 || *every_s > MAX_INTERVAL_S {
                    return Err(bad(
                        "trigger.every_s",
                        format!("{every_s} must be from 1 second to 10 years ({MAX_INTERVAL_S})"),
                    ));
                }
                Schedule::Interval { every: *every_s as i64, anchor: *anchor }
            }
            Trigger::Cron { expr, tz } => {
                if let Some(tz) = tz {
                    check_zone_name(tz).map_err(|e| bad("trigger.tz", format!("{e}")))?;
                }
                Schedule::Cron(Cron::parse(expr).map_err(|e| bad("trigger.expr", format!("{e}")))?)
            }
            Trigger::OnEvent { event, filter } => {
                check_len("trigger.event", event, 1, MAX_ID_LEN)?;
                if filter.len() > MAX_EVENT_FILTERS {
                    return Err(bad(
                        "trigger.match",
                        format!("{} entries; the limit is {MAX_EVENT_FILTERS}", filter.len()),
                    ));
                }
                Schedule::OnEvent
            }
        })
    }

    /// Made by the model, not approved, and its action reaches a chat other than the one it was
    /// made in (talks there, or raises an event naming it): it does nothing until the owner
    /// approves it. (An `agent` job that talks in the chat of the event that fired it is
    /// checked when it runs.)
    pub fn pending(&self) -> bool {
        let Some(m) = self.made_by.as_ref().filter(|m| m.confined()) else { return false };
        match &self.action {
            Action::Agent { channel: Some(c), chat_id: Some(id), .. } => !m.is_own(c, id),
            Action::Agent { .. } | Action::Cap { .. } => false,
            Action::Emit { data, .. } => {
                let field = |k: &str| data.get(k).and_then(serde_json::Value::as_str);
                let other = |k: &str, mine: &str| data.get(k).is_some_and(|_| field(k) != Some(mine));
                other("channel", &m.channel) || other("chat_id", &m.chat_id)
            }
        }
    }

    /// Whether an event of `(channel, chat_id)` may reach the job: a model-made job not
    /// approved by the owner sees only its own conversation's events.
    pub fn sees_chat(&self, channel: &str, chat_id: &str) -> bool {
        self.made_by.as_ref().is_none_or(|m| !m.confined() || m.is_own(channel, chat_id))
    }

    /// Whether the job fires on its own (enabled and not paused).
    pub fn active(&self) -> bool {
        self.enabled && !self.paused
    }

    /// The next instant strictly after `now` at which this job fires, or `None` (disabled,
    /// paused, a `once` job that has run or whose time has passed, an `on_event` job).
    pub fn next_fire(&self, schedule: &Schedule, now: i64, zone: &Zone) -> Option<i64> {
        if !self.active() || (matches!(schedule, Schedule::Once(_)) && self.last_run.is_some()) {
            return None;
        }
        schedule.next_after(now, zone)
    }

    /// Called once when Chela starts: the scheduled instant of a run missed while it was down
    /// that should run now, if any. Only fires after the last run (or the job's creation) and no
    /// older than the grace window count; however many were missed, the answer is one run.
    pub fn catch_up(&self, schedule: &Schedule, now: i64, zone: &Zone) -> Option<i64> {
        if !self.active() || (matches!(schedule, Schedule::Once(_)) && self.last_run.is_some()) {
            return None;
        }
        let grace = i64::try_from(self.grace_s.unwrap_or(DEFAULT_GRACE_S)).unwrap_or(i64::MAX);
        let window_start = now.saturating_sub(grace);
        // Fires at exactly `window_start` are in the window: search from one second before.
        let mut from = window_start.saturating_sub(1);
        if let Some(seen) = self.last_run.or(self.created_at) {
            from = from.max(seen);
        }
        schedule.next_after(from, zone).filter(|&at| at <= now)
    }

    /// Notes that the job ran at `at`.
    pub fn record_run(&mut self, at: i64) {
        self.last_run = Some(at);
    }

    /// Whether the host should remove the job now that it has run.
    pub fn finished(&self, schedule: &Schedule) -> bool {
        self.delete_after_run && self.last_run.is_some() && matches!(schedule, Schedule::Once(_))
    }

    /// Whether the router event `event` triggers this `on_event` job: its type is the trigger's
    /// `event` and every `match` entry equals the field of that name exactly, as the router's
    /// exact `match` compares (a fixed field, or an extra one written as a template shows it:
    /// `21`, `true`).
    pub fn fires_on(&self, event: &crate::router::Event) -> bool {
        let Trigger::OnEvent { event: want, filter } = &self.trigger else { return false };
        self.active()
            && want == event.kind()
            && self.sees_chat(event.channel(), event.chat_id())
            && filter.iter().all(|(k, v)| event.field_text(k).is_some_and(|f| f == v.as_str()))
    }

    /// Whether an event of type `event`, whose fields `field` looks up, triggers this job.
    pub fn matches_event<'a>(&self, event: &str, field: impl Fn(&str) -> Option<&'a str>) -> bool {
        let Trigger::OnEvent { event: want, filter } = &self.trigger else { return false };
        self.active()
            && want == event
            && self.sees_chat(field("channel").unwrap_or_default(), field("chat_id").unwrap_or_default())
            && filter.iter().all(|(k, v)| field(k) == Some(v.as_str()))
    }
}

#[cfg(test)]
mod tests;
