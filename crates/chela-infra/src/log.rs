//! Diagnostics on stderr: a small `tracing` subscriber of our own.
//!
//! One line per event on stderr: the UTC time to the millisecond, the level padded to five
//! columns, the message, then the event's other fields as `name=value` (what `tracing-subscriber`'s `fmt` printed without time and target,
//! which this replaced: its formatting layers and span registry were about 100 KB of a binary
//! that must stay under 3 MiB, and Chela opens no spans). Spans are accepted and not shown.
//! Levels below the chosen one are turned off at each call site, so they cost nothing.

use std::fmt::{self, Write as _};
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// The level for `-v` counted `verbose` times, unless `CHELA_LOG` names one (error … trace).
pub fn level(verbose: u8, chela_log: Option<&str>) -> Level {
    chela_log.and_then(|v| v.parse::<Level>().ok()).unwrap_or(match verbose {
        0 => Level::WARN,
        1 => Level::INFO,
        2 => Level::DEBUG,
        _ => Level::TRACE,
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
        return Level::WARN;
    }
    const LOUDER: [Level; 5] = [Level::ERROR, Level::WARN, Level::INFO, Level::DEBUG, Level::TRACE];
    let at = LOUDER.iter().position(|l| *l == base).unwrap_or(1);
    LOUDER[(at + usize::from(verbose)).min(LOUDER.len() - 1)]
}

/// Sends events at `max` and above to stderr, for the whole process, each line after its time.
/// A second call changes nothing (the first subscriber stays).
pub fn init(max: Level) {
    let clock = crate::clock::Clock::system();
    let _ = tracing::subscriber::set_global_default(Lines::new(max, move |line| {
        let stamped = format!("{} {line}", stamp(clock.unix_millis()));
        // One write per line, so lines from different threads do not mix; a closed stderr is
        // nothing to report anywhere.
        let _ = std::io::stderr().lock().write_all(stamped.as_bytes());
    }));
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

/// The subscriber: formats each enabled event as one line and hands it to `sink`.
pub struct Lines<F> {
    max: LevelFilter,
    sink: F,
}

impl<F: Fn(&str) + Send + Sync + 'static> Lines<F> {
    pub fn new(max: Level, sink: F) -> Lines<F> {
        Lines { max: LevelFilter::from_level(max), sink }
    }
}

impl<F: Fn(&str) + Send + Sync + 'static> Subscriber for Lines<F> {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        // Spans are not tracked, so one id serves them all.
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = Line(format!("{:>5} ", event.metadata().level()));
        let start = line.0.len();
        event.record(&mut line);
        let mut text = line.0;
        // Fields come after the message with a space before each; without a message the first
        // field's space would double the one after the level.
        if text[start..].starts_with(' ') {
            text.remove(start);
        }
        text.push('\n');
        (self.sink)(&text);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Collects an event's fields into its line.
struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // Writing to a String cannot fail.
        let _ = if field.name() == "message" {
            write!(self.0, "{value:?}")
        } else {
            write!(self.0, " {}={value:?}", field.name())
        };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The lines `f` logs at `max`.
    fn logged(max: Level, f: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&out);
        tracing::subscriber::with_default(Lines::new(max, move |l| sink.lock().unwrap().push_str(l)), f);
        out.lock().unwrap().clone()
    }

    #[test]
    fn one_line_per_event_with_the_level_the_message_and_the_fields() {
        let out = logged(Level::TRACE, || {
            let call = "get_current_time";
            tracing::warn!("cannot read {}: gone", "MEMORY.md");
            tracing::debug!(tool = %call, kind = ?Some(3), "tool call failed");
            tracing::info!(n = 2);
            tracing::trace!(name = "a \"b\"", "str fields are quoted");
        });
        assert_eq!(
            out,
            " WARN cannot read MEMORY.md: gone\n\
             DEBUG tool call failed tool=get_current_time kind=Some(3)\n \
             INFO n=2\n\
             TRACE str fields are quoted name=\"a \\\"b\\\"\"\n"
        );
    }

    #[test]
    fn events_below_the_level_are_left_out() {
        let out = logged(Level::INFO, || {
            tracing::error!("e");
            tracing::warn!("w");
            tracing::info!("i");
            tracing::debug!("d");
            tracing::trace!("t");
            let _span = tracing::info_span!("a span", x = 1).entered();
            tracing::info!("in a span");
        });
        assert_eq!(out, "ERROR e\n WARN w\n INFO i\n INFO in a span\n");
    }

    #[test]
    fn times_are_utc_to_the_millisecond() {
        assert_eq!(stamp(1_796_472_063_042), "2026-12-05T12:01:03.042Z");
        assert_eq!(stamp(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn a_base_level_is_raised_by_v_and_lowered_to_warnings_by_q() {
        assert_eq!(level_for(0, false, Level::INFO, None), Level::INFO);
        assert_eq!(level_for(1, false, Level::INFO, None), Level::DEBUG);
        assert_eq!(level_for(9, false, Level::INFO, None), Level::TRACE);
        assert_eq!(level_for(1, false, Level::WARN, None), Level::INFO);
        assert_eq!(level_for(0, true, Level::INFO, None), Level::WARN);
        assert_eq!(level_for(0, false, Level::ERROR, None), Level::ERROR);
        assert_eq!(level_for(2, true, Level::INFO, Some("trace")), Level::TRACE);
    }

    #[test]
    fn the_level_comes_from_chela_log_else_from_the_v_count() {
        assert_eq!(level(0, None), Level::WARN);
        assert_eq!(level(1, None), Level::INFO);
        assert_eq!(level(2, None), Level::DEBUG);
        assert_eq!(level(3, None), Level::TRACE);
        assert_eq!(level(0, Some("debug")), Level::DEBUG);
        assert_eq!(level(2, Some("ERROR")), Level::ERROR);
        // A value that is not a level leaves the flags in charge.
        assert_eq!(level(1, Some("loud")), Level::INFO);
    }
}
