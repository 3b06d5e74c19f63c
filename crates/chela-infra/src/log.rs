//! Diagnostics on stderr: `chela_log`'s events, one line each after its UTC time.
//!
//! One line per event on stderr: the UTC time to the millisecond, the level padded to five
//! columns, the message, then the event's other fields as `name=value` (see `chela_log`, which
//! replaced `tracing` and, before it, `tracing-subscriber`: their dispatch, metadata and call
//! sites were about 150 KB of the small binary). Levels below the chosen one are turned off at
//! each call site, so they cost nothing but a check.

use std::io::Write as _;

pub use chela_log::Level;

/// The level for `-v` counted `verbose` times, unless `CHELA_LOG` names one (error … trace).
pub fn level(verbose: u8, chela_log: Option<&str>) -> Level {
    chela_log.and_then(|v| v.parse::<Level>().ok()).unwrap_or(match verbose {
        0 => Level::Warn,
        1 => Level::Info,
        2 => Level::Debug,
        _ => Level::Trace,
    })
}

/// The level of a process whose own default is `base` (`log.level` for `chela run`, warnings
/// for the other commands): `CHELA_LOG` wins, then `-q` (warnings and errors only), then each
/// `-v` one level more than `base`.
pub fn level_for(verbose: u8, quiet: bool, base: Level, chela_log: Option<&str>) -> Level {
    if let Some(l) = chela_log.and_then(|v| v.parse::<Level>().ok()) {
        return l;
    }
    if quiet {
        return Level::Warn;
    }
    const LOUDER: [Level; 5] = [Level::Error, Level::Warn, Level::Info, Level::Debug, Level::Trace];
    let at = LOUDER.iter().position(|l| *l == base).unwrap_or(1);
    LOUDER[(at + usize::from(verbose)).min(LOUDER.len() - 1)]
}

/// Sends events at `max` and above to stderr, for the whole process, each line after its time.
/// A second call changes nothing (the first sink stays).
pub fn init(max: Level) {
    let clock = crate::clock::Clock::system();
    chela_log::init(max, move |line| {
        let stamped = format!("{} {line}", stamp(clock.unix_millis()));
        // One write per line, so lines from different threads do not mix; a closed stderr is
        // nothing to report anywhere.
        let _ = std::io::stderr().lock().write_all(stamped.as_bytes());
    });
}

/// `2026-12-05T12:01:03.042Z`: a log line's time, UTC, so lines from a host and a container
/// compare without knowing their zones.
pub fn stamp(unix_ms: i64) -> String {
    let t = chela_core::zone::DateTime::from_seconds(unix_ms.div_euclid(1000));
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        unix_ms.rem_euclid(1000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_to_the_millisecond() {
        assert_eq!(stamp(1_796_472_063_042), "2026-12-05T12:01:03.042Z");
        assert_eq!(stamp(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn a_base_level_is_raised_by_v_and_lowered_to_warnings_by_q() {
        assert_eq!(level_for(0, false, Level::Info, None), Level::Info);
        assert_eq!(level_for(1, false, Level::Info, None), Level::Debug);
        assert_eq!(level_for(9, false, Level::Info, None), Level::Trace);
        assert_eq!(level_for(1, false, Level::Warn, None), Level::Info);
        assert_eq!(level_for(0, true, Level::Info, None), Level::Warn);
        assert_eq!(level_for(0, false, Level::Error, None), Level::Error);
        assert_eq!(level_for(2, true, Level::Info, Some("trace")), Level::Trace);
    }

    #[test]
    fn the_level_comes_from_chela_log_else_from_the_v_count() {
        assert_eq!(level(0, None), Level::Warn);
        assert_eq!(level(1, None), Level::Info);
        assert_eq!(level(2, None), Level::Debug);
        assert_eq!(level(3, None), Level::Trace);
        assert_eq!(level(0, Some("debug")), Level::Debug);
        assert_eq!(level(2, Some("ERROR")), Level::Error);
        // A value that is not a level leaves the flags in charge.
        assert_eq!(level(1, Some("loud")), Level::Info);
    }
}
