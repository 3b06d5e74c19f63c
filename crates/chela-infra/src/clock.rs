//! The host's one source of time: the wall clock (Unix seconds and milliseconds, what files,
//! schedules and pairing codes record) and the monotonic clock (deadlines, idle limits, pacing).
//!
//! Every service gets its [`Clock`] from whoever built it (the daemon, a command, a test), so a
//! test can start the wall clock on a date it chooses and move it, instead of waiting for real
//! seconds to pass. The monotonic side is tokio's clock ([`tokio::time::Instant`]), which tests
//! already control with paused time (`#[tokio::test(start_paused = true)]`,
//! `tokio::time::advance`); a manual wall clock follows it too, so one `advance` moves both.
//!
//! Reading `std::time::SystemTime::now` or `std::time::Instant::now` anywhere else in the host is
//! refused by clippy (`disallowed-methods` in the crate's `clippy.toml`): a direct read is time a
//! test cannot control.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// A cheap-to-clone handle on the time: the system's in production, a manual one in tests.
///
/// The wall clock may jump (NTP, a test's [`Clock::set`]); durations are measured on
/// [`Clock::instant`], which never goes back.
#[derive(Clone, Default)]
pub struct Clock {
    /// `None`: the system's wall clock.
    manual: Option<Arc<Manual>>,
}

/// A wall clock that stands at `origin_ms` at the monotonic instant `origin` and runs on with
/// the monotonic clock (so paused tokio time moves it), plus whatever `advance`/`set` added.
struct Manual {
    origin: tokio::time::Instant,
    origin_ms: AtomicI64,
}

impl Clock {
    /// The system's clock.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock whose wall side reads `unix_ms` now and then runs with tokio's clock: in a test
    /// with paused time it stands still until the test advances it.
    pub fn manual(unix_ms: i64) -> Clock {
        Clock {
            manual: Some(Arc::new(Manual { origin: tokio::time::Instant::now(), origin_ms: AtomicI64::new(unix_ms) })),
        }
    }

    /// Moves a manual wall clock forward by `by` (the monotonic side is tokio's: advance it with
    /// `tokio::time::advance`). Does nothing to the system clock.
    pub fn advance(&self, by: Duration) {
        if let Some(m) = &self.manual {
            m.origin_ms.fetch_add(i64::try_from(by.as_millis()).unwrap_or(i64::MAX), Ordering::Relaxed);
        }
    }

    /// Sets a manual wall clock to `unix_ms` (it may go back, as a real one can). Does nothing
    /// to the system clock.
    pub fn set(&self, unix_ms: i64) {
        if let Some(m) = &self.manual {
            m.origin_ms.store(unix_ms - m.elapsed_ms(), Ordering::Relaxed);
        }
    }

    /// Milliseconds since the Unix epoch (0 for a system clock set before 1970).
    pub fn unix_millis(&self) -> i64 {
        match &self.manual {
            Some(m) => m.origin_ms.load(Ordering::Relaxed).saturating_add(m.elapsed_ms()),
            #[allow(clippy::disallowed_methods)] // the one read of the system's wall clock
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        }
    }

    /// Seconds since the Unix epoch.
    pub fn unix_secs(&self) -> i64 {
        self.unix_millis().div_euclid(1000)
    }

    /// Seconds since the Unix epoch, for the records that keep them unsigned (pairing codes,
    /// tokens); a time before 1970 reads as 0.
    pub fn unix_secs_u64(&self) -> u64 {
        u64::try_from(self.unix_secs()).unwrap_or(0)
    }

    /// Now on the monotonic clock: tokio's, so paused time in tests moves it.
    pub fn instant(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

/// Now on the real monotonic clock, for limits on work that runs on a thread of its own and waits
/// through the OS (a Lua script's time limit, a blocking lock wait, a child process): paused tokio
/// time does not move while such work runs, so measured on it a runaway script would never stop.
pub fn real_instant() -> std::time::Instant {
    #[allow(clippy::disallowed_methods)] // the one read of the real monotonic clock
    std::time::Instant::now()
}

impl Manual {
    fn elapsed_ms(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.manual {
            None => f.write_str("Clock::system"),
            Some(_) => write!(f, "Clock::manual({} ms)", self.unix_millis()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_reads_the_system_time() {
        #[allow(clippy::disallowed_methods)] // the reference the clock is checked against
        let real = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let read = Clock::system().unix_secs_u64();
        assert!(read.abs_diff(real) <= 1, "{read} vs {real}");
        assert!(read > 1_700_000_000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_manual_clock_moves_only_when_told_or_with_paused_time() {
        let clock = Clock::manual(1_000_000);
        let copy = clock.clone();
        assert_eq!(clock.unix_millis(), 1_000_000);
        clock.advance(Duration::from_millis(1500));
        assert_eq!(copy.unix_millis(), 1_001_500, "clones share one clock");
        assert_eq!(copy.unix_secs(), 1001);
        let before = clock.instant();
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(clock.unix_millis(), 1_061_500, "the wall clock runs with tokio's");
        assert_eq!(clock.instant() - before, Duration::from_secs(60));
        clock.set(5_000);
        assert_eq!(clock.unix_millis(), 5_000, "a clock may be set back");
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(clock.unix_millis(), 5_250);
        clock.set(-1500);
        assert_eq!((clock.unix_secs(), clock.unix_secs_u64()), (-2, 0), "before 1970");
    }
}
