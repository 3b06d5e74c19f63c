//! Chela's diagnostics: one line per event, at a level, with a message and named fields.
//!
//! `chela_log::warn!(device = %id, "xiaozhi: a turn failed: {why}")` reads like `tracing`'s
//! macros (which this replaced) for the forms Chela uses: `name = %value` (shown with
//! `Display`), `name = ?value` and `name = value` (`Debug`), `%name` and `?name` (a variable
//! under its own name), then an optional message with format arguments. A call site costs a
//! load, a compare and, when its level is on, one call with the fields as `&dyn Debug`: the
//! formatting is compiled once, here, not at every site (in the small build `tracing`'s call
//! sites, metadata and dispatch were about 150 KB).
//!
//! The process's sink is set once by [`init`] (`chela_infra::log::init` writes lines to stderr
//! with their time); [`capture`] sends one thread's events somewhere else for a while, which is
//! how tests read what was logged. Before [`init`], and below the level, events cost nothing
//! but the check.

use std::cell::RefCell;
use std::fmt::{self, Debug, Display, Write as _};
use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// How much an event matters; a sink at one level takes that level and the ones above it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

impl Level {
    /// `ERROR`, `WARN`, `INFO`, `DEBUG` or `TRACE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }
}

impl Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so `{:>5}` lines the levels up.
        f.pad(self.as_str())
    }
}

/// A level's name in any case (`warn`, `WARN`) or its number, 1 (error) to 5 (trace).
impl FromStr for Level {
    type Err = ParseLevelError;

    fn from_str(s: &str) -> Result<Level, ParseLevelError> {
        const ALL: [Level; 5] = [Level::Error, Level::Warn, Level::Info, Level::Debug, Level::Trace];
        ALL.into_iter()
            .find(|l| s.eq_ignore_ascii_case(l.as_str()) || s == (*l as u8).to_string())
            .ok_or(ParseLevelError)
    }
}

/// A text that names no level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseLevelError;

impl Display for ParseLevelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a log level (error, warn, info, debug or trace)")
    }
}

impl std::error::Error for ParseLevelError {}

/// The most detailed level anything takes now: the process's sink or a [`capture`] (0 is
/// none). Each call site checks it before building its event.
static ON: AtomicU8 = AtomicU8::new(0);

type Sink = Box<dyn Fn(&str) + Send + Sync>;

/// The process's sink and its level, set once.
static PROCESS: OnceLock<(Level, Sink)> = OnceLock::new();

/// A [`capture`]: its level and where its lines go.
type Capture = (Level, Box<dyn FnMut(&str)>);

thread_local! {
    /// This thread's capture, while one runs.
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// Sends the process's events at `max` and above to `sink`, one line each (ending in `\n`). The
/// first call wins; a later one changes nothing and returns false.
pub fn init(max: Level, sink: impl Fn(&str) + Send + Sync + 'static) -> bool {
    let first = PROCESS.set((max, Box::new(sink))).is_ok();
    if first {
        ON.fetch_max(max as u8, Ordering::Relaxed);
    }
    first
}

/// Runs `f` with this thread's events at `max` and above going to `sink` instead of the
/// process's sink (other threads are not affected); the previous capture, if any, comes back
/// after.
pub fn capture<R>(max: Level, sink: impl FnMut(&str) + 'static, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Capture>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CAPTURE.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CAPTURE.with(|c| c.borrow_mut().replace((max, Box::new(sink))));
    let _restore = Restore(previous);
    // Left raised afterwards: other sinks still drop what is below their own level.
    ON.fetch_max(max as u8, Ordering::Relaxed);
    f()
}

/// Whether anything takes events at `level`: the check at each call site.
#[inline]
pub fn enabled(level: Level) -> bool {
    level as u8 <= ON.load(Ordering::Relaxed)
}

/// A value shown with `Display` where fields are `Debug` (the `%` form).
pub struct Shown<'a, T: ?Sized>(pub &'a T);

impl<T: Display + ?Sized> Debug for Shown<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(self.0, f)
    }
}

/// One event, as the macros give it: formats the line and hands it to this thread's capture or
/// the process's sink, whichever takes its level.
pub fn emit(level: Level, message: Option<fmt::Arguments<'_>>, fields: &[(&str, &dyn Debug)]) {
    let line = line(level, message, fields);
    let captured = CAPTURE.with(|c| match c.try_borrow_mut().as_deref_mut() {
        // An event logged from inside the capture's own sink goes to the process instead.
        Ok(Some((max, sink))) => {
            if level <= *max {
                sink(&line);
            }
            true
        }
        _ => false,
    });
    if !captured
        && let Some((max, sink)) = PROCESS.get()
        && level <= *max
    {
        sink(&line);
    }
}

/// `" WARN message name=value other=value\n"`: the level right-aligned in five columns, the
/// message, each field after a space.
fn line(level: Level, message: Option<fmt::Arguments<'_>>, fields: &[(&str, &dyn Debug)]) -> String {
    let mut out = String::with_capacity(64);
    // Writing to a String cannot fail.
    let _ = write!(out, "{level:>5}");
    if let Some(message) = message {
        let _ = write!(out, " {message}");
    }
    for (name, value) in fields {
        let _ = write!(out, " {name}={value:?}");
    }
    out.push('\n');
    out
}

/// An event at [`Level::Error`]: `error!(name = %value, "message {x}")`.
#[macro_export]
macro_rules! error {
    ($($t:tt)+) => { $crate::__event!($crate::Level::Error, $($t)+) };
}

/// An event at [`Level::Warn`]: `warn!(name = %value, "message {x}")`.
#[macro_export]
macro_rules! warn {
    ($($t:tt)+) => { $crate::__event!($crate::Level::Warn, $($t)+) };
}

/// An event at [`Level::Info`]: `info!(name = %value, "message {x}")`.
#[macro_export]
macro_rules! info {
    ($($t:tt)+) => { $crate::__event!($crate::Level::Info, $($t)+) };
}

/// An event at [`Level::Debug`]: `debug!(name = %value, "message {x}")`.
#[macro_export]
macro_rules! debug {
    ($($t:tt)+) => { $crate::__event!($crate::Level::Debug, $($t)+) };
}

/// An event at [`Level::Trace`]: `trace!(name = %value, "message {x}")`.
#[macro_export]
macro_rules! trace {
    ($($t:tt)+) => { $crate::__event!($crate::Level::Trace, $($t)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __event {
    ($level:expr, $($t:tt)+) => {
        if $crate::enabled($level) {
            $crate::__fields!($level, [], $($t)+)
        }
    };
}

// Reads the fields one by one into a list, then the message, and calls `emit`.
#[doc(hidden)]
#[macro_export]
macro_rules! __fields {
    ($level:expr, [$($f:expr,)*], $message:literal $(, $($arg:tt)*)?) => {
        $crate::emit($level, Some(format_args!($message $(, $($arg)*)?)), &[$($f,)*])
    };
    ($level:expr, [$($f:expr,)*] $(,)?) => {
        $crate::emit($level, None, &[$($f,)*])
    };
    ($level:expr, [$($f:expr,)*], $name:ident = % $value:expr $(, $($rest:tt)*)?) => {
        $crate::__fields!($level, [$($f,)* (stringify!($name), &$crate::Shown(&$value) as &dyn ::core::fmt::Debug),] $(, $($rest)*)?)
    };
    ($level:expr, [$($f:expr,)*], $name:ident = ? $value:expr $(, $($rest:tt)*)?) => {
        $crate::__fields!($level, [$($f,)* (stringify!($name), &$value as &dyn ::core::fmt::Debug),] $(, $($rest)*)?)
    };
    ($level:expr, [$($f:expr,)*], $name:ident = $value:expr $(, $($rest:tt)*)?) => {
        $crate::__fields!($level, [$($f,)* (stringify!($name), &$value as &dyn ::core::fmt::Debug),] $(, $($rest)*)?)
    };
    ($level:expr, [$($f:expr,)*], % $name:ident $(, $($rest:tt)*)?) => {
        $crate::__fields!($level, [$($f,)* (stringify!($name), &$crate::Shown(&$name) as &dyn ::core::fmt::Debug),] $(, $($rest)*)?)
    };
    ($level:expr, [$($f:expr,)*], ? $name:ident $(, $($rest:tt)*)?) => {
        $crate::__fields!($level, [$($f,)* (stringify!($name), &$name as &dyn ::core::fmt::Debug),] $(, $($rest)*)?)
    };
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The lines `f` logs at `max`, captured on this thread.
    fn logged(max: Level, f: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&out);
        capture(max, move |l| sink.lock().unwrap().push_str(l), f);
        out.lock().unwrap().clone()
    }

    #[test]
    fn one_line_per_event_with_the_level_the_message_and_the_fields() {
        let out = logged(Level::Trace, || {
            let call = "get_current_time";
            let peer = std::net::Ipv4Addr::LOCALHOST;
            let list = vec![1, 2];
            crate::warn!("cannot read {}: gone", "MEMORY.md");
            crate::debug!(tool = %call, kind = ?Some(3), "tool call failed");
            crate::info!(n = 2);
            crate::trace!(name = "a \"b\"", "str fields are quoted");
            crate::error!(%peer, ?list, "{call} {}", 7);
            crate::info!(a = 1, b = %"x",);
        });
        assert_eq!(
            out,
            " WARN cannot read MEMORY.md: gone\n\
             DEBUG tool call failed tool=get_current_time kind=Some(3)\n \
             INFO n=2\n\
             TRACE str fields are quoted name=\"a \\\"b\\\"\"\n\
             ERROR get_current_time 7 peer=127.0.0.1 list=[1, 2]\n \
             INFO a=1 b=x\n"
        );
    }

    #[test]
    fn events_below_the_level_are_left_out() {
        let out = logged(Level::Info, || {
            crate::error!("e");
            crate::warn!("w");
            crate::info!("i");
            crate::debug!(n = 1, "d");
            crate::trace!("t");
        });
        assert_eq!(out, "ERROR e\n WARN w\n INFO i\n");
    }

    #[test]
    fn a_capture_is_for_its_thread_and_ends_with_its_closure() {
        let out = logged(Level::Trace, || {
            let inner = logged(Level::Error, || {
                crate::error!("inner error");
                crate::warn!("inner warning, below the inner level");
            });
            assert_eq!(inner, "ERROR inner error\n");
            crate::info!("outer again");
            std::thread::spawn(|| crate::error!("another thread")).join().unwrap();
        });
        assert_eq!(out, " INFO outer again\n");
    }

    #[test]
    fn levels_parse_by_name_in_any_case_or_by_number() {
        assert_eq!("warn".parse(), Ok(Level::Warn));
        assert_eq!("TRACE".parse(), Ok(Level::Trace));
        assert_eq!("Debug".parse(), Ok(Level::Debug));
        assert_eq!("1".parse(), Ok(Level::Error));
        assert_eq!("5".parse(), Ok(Level::Trace));
        assert_eq!("loud".parse::<Level>(), Err(ParseLevelError));
        assert_eq!("0".parse::<Level>(), Err(ParseLevelError));
        assert_eq!("".parse::<Level>(), Err(ParseLevelError));
        assert_eq!(format!("[{:>5}]", Level::Warn), "[ WARN]");
        assert!(Level::Error < Level::Trace);
    }
}
