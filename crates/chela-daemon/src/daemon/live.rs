//! Each channel's state as the running daemon sees it: connected since when, or failing and
//! why. Channels report here as they connect and fail; `GET /api/live` shows it to
//! `chela status`. Keyed by the channels' own names (a fixed set), so it cannot grow.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;

/// The longest reason kept: one sentence.
const MAX_REASON: usize = 300;

/// One channel's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct State {
    /// Whether its last attempt to reach its service worked.
    pub connected: bool,
    /// When it last connected (Unix seconds), 0 if never.
    pub since: i64,
    /// Why it last failed, and when; kept after it connects again, for the owner to see.
    pub last_error: Option<String>,
    pub error_at: i64,
}

#[derive(Debug, Default)]
pub struct Live {
    map: Mutex<BTreeMap<&'static str, State>>,
}

impl Live {
    /// `channel` reached its service at `now` (the first time after a failure counts).
    pub fn connected(&self, channel: &'static str, now: i64) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let s = map.entry(channel).or_default();
        if !s.connected {
            s.connected = true;
            s.since = now;
        }
    }

    /// `channel` cannot reach its service, because of `why`.
    pub fn failed(&self, channel: &'static str, why: &str, now: i64) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let s = map.entry(channel).or_default();
        s.connected = false;
        s.last_error = Some(why.chars().take(MAX_REASON).collect());
        s.error_at = now;
    }

    /// Every channel that reported, by name.
    pub fn snapshot(&self) -> BTreeMap<&'static str, State> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_kept_after_the_channel_connects_again() {
        let live = Live::default();
        live.connected("telegram", 10);
        live.connected("telegram", 20);
        assert_eq!(live.snapshot()["telegram"], State { connected: true, since: 10, last_error: None, error_at: 0 });
        live.failed("telegram", &"x".repeat(1000), 30);
        live.connected("telegram", 40);
        let s = &live.snapshot()["telegram"];
        assert_eq!((s.connected, s.since, s.error_at), (true, 40, 30));
        assert_eq!(s.last_error.as_ref().map(String::len), Some(MAX_REASON));
    }
}
