//! The Jobs tab's side of `/api/scheduler/jobs`: each job's trigger said in words ("every
//! weekday at 16:00 Europe/Paris") and the owner's actions on it, which are `chela cron
//! pause|resume|trigger|remove` applied to the running daemon's scheduler.

use chela_core::schedule::Trigger;
use chela_core::zone::Zone;
use serde_json::{Value, json};

use super::ApiError;
use crate::daemon::Daemon;
use crate::scheduler::{JobView, local_time};

/// What the owner does to a job: `POST /api/scheduler/jobs/{pause,resume,run,delete}` `{id}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    Pause,
    Resume,
    Run,
    Delete,
}

impl Act {
    pub fn from_path(word: &str) -> Result<Act, ApiError> {
        match word {
            "pause" => Ok(Act::Pause),
            "resume" => Ok(Act::Resume),
            "run" => Ok(Act::Run),
            "delete" => Ok(Act::Delete),
            _ => Err(ApiError::NotFound(
                "a job is approved, paused, resumed, run or deleted: POST /api/scheduler/jobs/{approve,pause,resume,run,delete}"
                    .into(),
            )),
        }
    }
}

pub fn act(d: &Daemon, id: &str, act: Act) -> Result<Value, ApiError> {
    let s = d.scheduler();
    let now = d.clock().unix_secs();
    let refused = |e: anyhow::Error| {
        if s.get(id, now).is_none() {
            ApiError::NotFound(format!("{e:#}"))
        } else {
            ApiError::BadRequest(format!("{e:#}"))
        }
    };
    match act {
        Act::Pause => s.update(id, now, |j| j.paused = true).map(drop),
        Act::Resume => s.update(id, now, |j| j.paused = false).map(drop),
        Act::Run => s.trigger(id),
        Act::Delete => s.remove(id),
    }
    .map_err(refused)?;
    let done = match act {
        Act::Pause => "paused",
        Act::Resume => "resumed",
        Act::Run => "started",
        Act::Delete => "deleted",
    };
    Ok(json!({"id": id, "done": done}))
}

/// A job as the API lists it: as the scheduler shows it, with `when`, its trigger in words.
pub fn shown(view: JobView, zone: &Zone) -> Value {
    let when = in_words(&view.job.trigger, zone);
    let mut v = serde_json::to_value(view).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("when".into(), Value::String(when));
    }
    v
}

/// A trigger as a person says it.
pub fn in_words(t: &Trigger, zone: &Zone) -> String {
    match t {
        Trigger::Once { at } => format!("once, at {}", local_time(*at, zone)),
        Trigger::Interval { every_s, .. } => every(*every_s),
        Trigger::Cron { expr, tz } => format!("{} {}", cron_words(expr), tz.as_deref().unwrap_or(zone.name())),
        Trigger::OnEvent { event, filter } => {
            let mut s = format!("when a {event} event arrives");
            for (i, (k, v)) in filter.iter().enumerate() {
                s.push_str(if i == 0 { " with " } else { " and " });
                s.push_str(&format!("{k} = {v}"));
            }
            s
        }
    }
}

fn every(secs: u64) -> String {
    let (n, unit) = [(86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second")]
        .into_iter()
        .find(|(u, _)| secs >= *u && secs.is_multiple_of(*u))
        .map_or((secs, "second"), |(u, name)| (secs / u, name));
    if n == 1 { format!("every {unit}") } else { format!("every {n} {unit}s") }
}

const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// A day-of-week field as day numbers (0 = Sunday), when it is a plain list or range.
fn days(field: &str) -> Option<Vec<usize>> {
    let day = |s: &str| -> Option<usize> {
        let up = s.to_ascii_uppercase();
        DAYS.iter().position(|d| d[..3].eq_ignore_ascii_case(&up)).or_else(|| s.parse::<usize>().ok().map(|n| n % 7))
    };
    let mut out = Vec::new();
    for part in field.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (day(a)?, day(b)?);
                // `5-7` ends on Sunday written as 7, which `% 7` made 0.
                let b = if b < a && b == 0 { 7 } else { b };
                out.extend((a..=b).map(|d| d % 7));
            }
            None => out.push(day(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A cron expression in words for the shapes people write; any other is quoted as it is.
fn cron_words(expr: &str) -> String {
    let expanded = match expr.trim() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        e => e,
    };
    let mut f: Vec<&str> = expanded.split_whitespace().collect();
    if f.len() == 6 && f[0] == "0" {
        f.remove(0);
    }
    let fallback = || format!("on the cron schedule {}", expr.trim());
    let [min, hour, dom, mon, dow] = f[..] else { return fallback() };
    let any = |s: &str| s == "*" || s == "?";
    let num = |s: &str, max: u32| s.parse::<u32>().ok().filter(|n| *n <= max);
    let step = |s: &str| s.strip_prefix("*/").and_then(|n| n.parse::<u32>().ok()).filter(|n| *n > 0);
    let every_day = any(dom) && any(mon) && any(dow);
    match (num(min, 59), num(hour, 23)) {
        (Some(m), Some(h)) if any(mon) => {
            let at = format!("at {h:02}:{m:02}");
            if any(dom) && any(dow) {
                return format!("every day {at}");
            }
            if let (Some(d), true) = (num(dom, 31).filter(|d| *d >= 1), any(dow)) {
                return format!("on day {d} of every month {at}");
            }
            if !any(dom) {
                return fallback();
            }
            match days(dow).as_deref() {
                Some([1, 2, 3, 4, 5]) => format!("every weekday {at}"),
                Some([0, 6]) => format!("every Saturday and Sunday {at}"),
                Some(list) if !list.is_empty() => {
                    let names: Vec<&str> = list.iter().map(|d| DAYS[*d]).collect();
                    format!("every {} {at}", and_list(&names))
                }
                _ => fallback(),
            }
        }
        (Some(m), None) if every_day && any(hour) => format!("every hour at minute {m}"),
        (Some(m), None) if every_day => match step(hour) {
            Some(n) => format!("every {n} hours at minute {m}"),
            None => fallback(),
        },
        (None, None) if every_day && any(hour) => match step(min) {
            Some(n) => every(u64::from(n) * 60),
            None if any(min) => "every minute".to_owned(),
            None => fallback(),
        },
        _ => fallback(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(expr: &str, tz: Option<&str>) -> Trigger {
        Trigger::Cron { expr: expr.into(), tz: tz.map(str::to_owned) }
    }

    #[test]
    fn triggers_read_as_a_person_says_them() {
        let z = Zone::utc();
        let cases = [
            (cron("0 16 * * 1-5", Some("Europe/Paris")), "every weekday at 16:00 Europe/Paris"),
            (cron("0 16 * * MON-FRI", Some("Europe/Paris")), "every weekday at 16:00 Europe/Paris"),
            (cron("30 7 * * *", None), "every day at 07:30 UTC"),
            (cron("@daily", None), "every day at 00:00 UTC"),
            (cron("0 9 * * 1,3,5", None), "every Monday, Wednesday and Friday at 09:00 UTC"),
            (cron("0 10 * * 6,0", None), "every Saturday and Sunday at 10:00 UTC"),
            (cron("0 10 * * 5-7", None), "every Sunday, Friday and Saturday at 10:00 UTC"),
            (cron("0 8 1 * *", None), "on day 1 of every month at 08:00 UTC"),
            (cron("*/15 * * * *", None), "every 15 minutes UTC"),
            (cron("5 * * * *", None), "every hour at minute 5 UTC"),
            (cron("0 */2 * * *", None), "every 2 hours at minute 0 UTC"),
            // Shapes without a short sentence are shown as written, never guessed at.
            (cron("0 9 1-7 * 1", None), "on the cron schedule 0 9 1-7 * 1 UTC"),
            (cron("0 9 * 3 *", None), "on the cron schedule 0 9 * 3 * UTC"),
            (Trigger::Interval { every_s: 300, anchor: 0 }, "every 5 minutes"),
            (Trigger::Interval { every_s: 3600, anchor: 0 }, "every hour"),
            (Trigger::Interval { every_s: 90, anchor: 0 }, "every 90 seconds"),
            (Trigger::Once { at: 1_798_761_600 }, "once, at 2027-01-01 00:00:00 +00:00"),
            (
                Trigger::OnEvent { event: "door".into(), filter: [("state".into(), "open".into())].into() },
                "when a door event arrives with state = open",
            ),
        ];
        for (t, want) in cases {
            assert_eq!(in_words(&t, &z), want, "{t:?}");
        }
    }

    #[test]
    fn an_unknown_action_is_not_found() {
        assert!(matches!(Act::from_path("explode"), Err(ApiError::NotFound(_))));
        assert_eq!(Act::from_path("run").unwrap(), Act::Run);
    }
}
