//! `get_current_time`: the instant in the person's zone. The host reads the zone from its
//! settings (or the call's `timezone`); the chip knows only UTC and refuses another zone.

use alloc::format;
use alloc::string::String;

use chela_proto::chat::ToolSpec;
use chela_proto::json::read::{self, Reader, field, object};

use super::Args;

use crate::zone::Zone;

pub const CURRENT_TIME: ToolSpec<'static> = ToolSpec {
    name: "get_current_time",
    description: "Current date and time: ISO 8601 with UTC offset, unix seconds, weekday.",
    input_schema: r#"{"type":"object","properties":{"timezone":{"type":"string","description":"IANA zone, e.g. Europe/Paris. Default: the user's zone."}}}"#,
};

#[derive(Debug, Default, PartialEq, Eq)]
pub struct TimeArgs {
    pub timezone: Option<String>,
}

impl Args for TimeArgs {
    const FIELDS: &'static [&'static str] = &["timezone"];

    fn read(r: &mut Reader<'_>) -> read::Result<TimeArgs> {
        let (mut a, mut seen) = (TimeArgs::default(), 0);
        object(r, |r, key| {
            match key {
                "timezone" => a.timezone = field(r, &mut seen, 1, Reader::string_opt)?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(a)
    }
}

crate::serde_args!(TimeArgs);

impl TimeArgs {
    /// The zone asked for, if any (blank counts as none).
    pub fn zone(&self) -> Option<&str> {
        self.timezone.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }
}

const WEEKDAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];

/// The tool's answer for instant `now` (Unix seconds) in `zone`, as JSON: `iso` (RFC 3339 with
/// the zone's offset), `unix`, `timezone` and `weekday`.
pub fn describe(now: i64, zone: &Zone) -> String {
    let offset = zone.offset_at(now);
    let local = now + i64::from(offset);
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, m, d) = crate::zone::civil::civil_from_days(days);
    let sign = if offset < 0 { '-' } else { '+' };
    let off = offset.unsigned_abs() / 60;
    let iso = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{sign}{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        off / 60,
        off % 60
    );
    let weekday = WEEKDAYS[days.rem_euclid(7) as usize];
    chela_proto::json::to_string(|w| {
        w.begin_object().field_str("iso", &iso).key("unix").raw(&format!("{now}"));
        w.field_str("timezone", zone.name()).field_str("weekday", weekday).end_object();
    })
}

#[cfg(test)]
mod tests;
