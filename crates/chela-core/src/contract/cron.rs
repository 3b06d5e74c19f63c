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
use chela_proto::json::read::{self, Reader, field, object, opt};

use super::{Args, unknown_field};

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
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AddArgs {
    pub name: String,
    pub schedule_type: Option<String>,
    pub message: String,
    pub interval_s: Option<i64>,
    pub at_epoch: Option<i64>,
    /// Wider than `i64`: a delay too large to add to the clock is refused with a sentence, not
    /// a schema error.
    pub delay_s: Option<i128>,
    pub cron_expr: Option<String>,
    pub delete_after_run: Option<bool>,
    pub channel: Option<String>,
    pub chat_id: Option<String>,
}

impl Args for AddArgs {
    const FIELDS: &'static [&'static str] = &[
        "name",
        "schedule_type",
        "message",
        "interval_s",
        "every_s",
        "at_epoch",
        "at",
        "delay_s",
        "in_s",
        "cron_expr",
        "cron",
        "delete_after_run",
        "channel",
        "chat_id",
    ];

    fn read(r: &mut Reader<'_>) -> read::Result<AddArgs> {
        let (mut a, mut message, mut seen) = (AddArgs::default(), None, 0);
        object(r, |r, key| {
            let s = &mut seen;
            match key {
                "name" => a.name = field(r, s, 1, Reader::string_owned)?,
                "schedule_type" => a.schedule_type = field(r, s, 2, Reader::string_opt)?,
                "message" => message = Some(field(r, s, 4, Reader::string_owned)?),
                "interval_s" | "every_s" => a.interval_s = field(r, s, 8, |r| opt(r, Reader::i64))?,
                "at_epoch" | "at" => a.at_epoch = field(r, s, 16, |r| opt(r, Reader::i64))?,
                "delay_s" | "in_s" => a.delay_s = field(r, s, 32, |r| opt(r, i128_of))?,
                "cron_expr" | "cron" => a.cron_expr = field(r, s, 64, Reader::string_opt)?,
                "delete_after_run" => a.delete_after_run = field(r, s, 128, |r| opt(r, Reader::bool))?,
                "channel" => a.channel = field(r, s, 256, Reader::string_opt)?,
                "chat_id" => a.chat_id = field(r, s, 512, Reader::string_opt)?,
                _ => return Err(unknown_field(r)),
            }
            Ok(())
        })?;
        a.message = message.ok_or_else(|| r.error("missing field `message`"))?;
        Ok(a)
    }
}

crate::serde_args!(AddArgs);

/// An integer as an `i128`, as serde_json reads one (from its text: `-0` is 0 here). No float
/// is parsed: the float parser would bring its tables into the chip's image.
fn i128_of(r: &mut Reader<'_>) -> read::Result<i128> {
    let at = r.offset();
    let text = r.number_text()?;
    if text.contains(['.', 'e', 'E']) {
        return Err(read::Error { what: "invalid type: expected i128", offset: at });
    }
    text.parse().map_err(|_| read::Error { what: "number out of range", offset: at })
}

/// `cron_remove`'s argument (`id` is read too).
#[derive(Debug, PartialEq, Eq)]
pub struct RemoveArgs {
    pub job_id: String,
}

impl RemoveArgs {
    /// The name read beside the schema's, from the chip's first `cron_remove`.
    pub const ALIASES: &'static [&'static str] = &["id"];
}

impl Args for RemoveArgs {
    const FIELDS: &'static [&'static str] = &["job_id", "id"];

    fn read(r: &mut Reader<'_>) -> read::Result<RemoveArgs> {
        let (mut job_id, mut seen) = (None, 0);
        object(r, |r, key| {
            match key {
                "job_id" | "id" => job_id = Some(field(r, &mut seen, 1, Reader::string_owned)?),
                _ => return Err(unknown_field(r)),
            }
            Ok(())
        })?;
        Ok(RemoveArgs { job_id: job_id.ok_or_else(|| r.error("missing field `job_id`"))? })
    }
}

crate::serde_args!(RemoveArgs);

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
