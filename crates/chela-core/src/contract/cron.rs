//! `cron_add`, `cron_list` and `cron_remove`: MimiClaw's job tools with MimiClaw's argument
//! names, plus a cron expression. The names the chip used before (`every_s`, `in_s`, `at`,
//! `cron`, `id`) are still read, as aliases; `schedule_type` may be left out when exactly one
//! timing is given.
//!
//! [`AddArgs::plan`] turns the arguments into a trigger; each side then adds its own limits
//! (the chip's shortest interval and longest message) and stores the job.

use alloc::format;
use alloc::string::String;

use chela_proto::chat::ToolSpec;
use serde::Deserialize;

use crate::schedule::Trigger;

pub const ADD: ToolSpec<'static> = ToolSpec {
    name: "cron_add",
    description: "Schedule a recurring (every N seconds, or a cron expression) or one-shot (at a Unix time, or after a delay) task; when it fires, its message comes to you in the chat.",
    input_schema: r#"{"type":"object","properties":{"name":{"type":"string"},"schedule_type":{"type":"string","enum":["every","at","cron"]},"message":{"type":"string","description":"What you are told when the job fires"},"interval_s":{"type":"integer","description":"every: seconds between runs"},"at_epoch":{"type":"integer","description":"at: Unix seconds"},"delay_s":{"type":"integer","description":"at: seconds from now (instead of at_epoch)"},"cron_expr":{"type":"string","description":"cron: minute hour day-of-month month day-of-week (the device's zone; UTC on a chip)"},"delete_after_run":{"type":"boolean","description":"at: remove after running (default true)"},"channel":{"type":"string"},"chat_id":{"type":"string"}},"required":["message"]}"#,
};

pub const LIST: ToolSpec<'static> = ToolSpec {
    name: "cron_list",
    description: "List all scheduled cron jobs with their next run.",
    input_schema: r#"{"type":"object","properties":{}}"#,
};

pub const REMOVE: ToolSpec<'static> = ToolSpec {
    name: "cron_remove",
    description: "Remove a cron job by its id.",
    input_schema: r#"{"type":"object","properties":{"job_id":{"type":"string"}},"required":["job_id"]}"#,
};

/// `cron_add`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddArgs {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub schedule_type: Option<String>,
    pub message: String,
    #[serde(default, alias = "every_s")]
    pub interval_s: Option<i64>,
    #[serde(default, alias = "at")]
    pub at_epoch: Option<i64>,
    /// Wider than `i64`: a delay too large to add to the clock is refused with a sentence, not
    /// a schema error.
    #[serde(default, alias = "in_s")]
    pub delay_s: Option<i128>,
    #[serde(default, alias = "cron")]
    pub cron_expr: Option<String>,
    #[serde(default)]
    pub delete_after_run: Option<bool>,
    #[serde(default)]
    pub channel: Option<String>,
    #[serde(default)]
    pub chat_id: Option<String>,
}

/// `cron_remove`'s argument (`id` is read too).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveArgs {
    #[serde(alias = "id")]
    pub job_id: String,
}

impl RemoveArgs {
    /// The name read beside the schema's, from the chip's first `cron_remove`.
    pub const ALIASES: &'static [&'static str] = &["id"];
}

/// When a new job runs, and whether it goes once it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub trigger: Trigger,
    pub delete_after_run: bool,
}

impl AddArgs {
    /// The names read beside the schema's, from the chip's first `cron_add`.
    pub const ALIASES: &'static [&'static str] = &["every_s", "at", "in_s", "cron"];

    /// The job's trigger at `now` (Unix seconds), or the sentence the model is told. A cron
    /// expression is only carried here; the job's validation reads it.
    pub fn plan(&self, now: i64) -> Result<Plan, String> {
        let kind = match self.schedule_type.as_deref() {
            Some(kind) => kind,
            None => {
                let given = [
                    (self.interval_s.is_some(), "every"),
                    (self.at_epoch.is_some() || self.delay_s.is_some(), "at"),
                    (self.cron_expr.is_some(), "cron"),
                ];
                let mut kinds = given.iter().filter(|(g, _)| *g).map(|(_, k)| *k);
                match (kinds.next(), kinds.next(), self.at_epoch.is_some() && self.delay_s.is_some()) {
                    (Some(kind), None, false) => kind,
                    _ => {
                        return Err(
                            "Error: give schedule_type, or exactly one of interval_s, at_epoch, delay_s or cron_expr"
                                .into(),
                        );
                    }
                }
            }
        };
        match kind {
            "every" => match self.interval_s {
                Some(i) if i > 0 => Ok(Plan {
                    trigger: Trigger::Interval { every_s: i.unsigned_abs(), anchor: now },
                    delete_after_run: false,
                }),
                Some(i) => Err(format!("Error: interval_s must be positive (got {i})")),
                None => Err("Error: 'every' jobs need interval_s".into()),
            },
            "at" => {
                let at = match (self.at_epoch, self.delay_s) {
                    (Some(at), _) => at,
                    (None, Some(d)) if d > 0 => {
                        i64::try_from(i128::from(now) + d).map_err(|_| format!("Error: delay_s {d} is too large"))?
                    }
                    (None, Some(d)) => return Err(format!("Error: delay_s must be positive (got {d})")),
                    (None, None) => return Err("Error: 'at' jobs need at_epoch or delay_s".into()),
                };
                if at <= now {
                    return Err(format!(
                        "Error: at_epoch {at} is in the past, not in the future (now is {now}); pick a later time"
                    ));
                }
                Ok(Plan { trigger: Trigger::Once { at }, delete_after_run: self.delete_after_run.unwrap_or(true) })
            }
            "cron" => match self.cron_expr.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
                Some(expr) => Ok(Plan {
                    trigger: Trigger::Cron { expr: expr.into(), tz: None },
                    delete_after_run: self.delete_after_run.unwrap_or(false),
                }),
                None => Err("Error: 'cron' jobs need cron_expr".into()),
            },
            other => Err(format!("Error: schedule_type must be \"every\", \"at\" or \"cron\", not {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests;
