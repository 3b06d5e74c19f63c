//! The `time` group: what time it is, in the person's zone.

use chela_core::contract::time::{CURRENT_TIME, TimeArgs};
use chela_core::zone::Zone;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};

pub fn group() -> Group {
    Group::new("time", "The current date and time.").core().with(GetCurrentTime)
}

pub struct GetCurrentTime;

impl Tool for GetCurrentTime {
    const NAME: &'static str = CURRENT_TIME.name;
    const DESCRIPTION: &'static str = CURRENT_TIME.description;
    const SCHEMA: &'static str = CURRENT_TIME.input_schema;
    type Args = TimeArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, args: TimeArgs) -> ToolResult {
        let tz = match args.zone() {
            Some(name) => std::sync::Arc::new(crate::tzdb::named_zone(name).map_err(|_| {
                ToolError::invalid_args(format!("`{name}` is not an IANA time zone name (try e.g. Europe/Paris)."))
            })?),
            None => ctx.tz.clone(),
        };
        Ok(describe(ctx.clock.unix_secs(), &tz))
    }
}

/// The tool's answer for instant `now` (Unix seconds) in `tz`, as JSON: the contract's, the
/// chip answers the same in UTC.
pub fn describe(now: i64, tz: &Zone) -> String {
    chela_core::contract::time::describe(now, tz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_with_offset_and_unix_seconds() {
        let t = 1_796_037_920; // 2026-11-30T11:25:20Z
        let out: serde_json::Value =
            serde_json::from_str(&describe(t, &crate::tzdb::load_zone("Asia/Shanghai").unwrap())).unwrap();
        assert_eq!(out["iso"], "2026-11-30T19:25:20+08:00");
        assert_eq!(out["unix"], 1_796_037_920);
        assert_eq!(out["timezone"], "Asia/Shanghai");
        assert_eq!(out["weekday"], "Monday");
        let out: serde_json::Value =
            serde_json::from_str(&describe(t, &crate::tzdb::load_zone("America/New_York").unwrap())).unwrap();
        assert_eq!(out["iso"], "2026-11-30T06:25:20-05:00");
    }
}
