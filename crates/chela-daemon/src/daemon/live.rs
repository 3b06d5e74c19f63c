//! Each channel's state as the running daemon sees it: connected since when, or failing and
//! why. Channels report here as they connect and fail; `GET /api/live` shows it to
//! `chela status` and the console. Keyed by the channels' own names (a fixed set), so it
//! cannot grow. Devices connected now (xiaozhi) are kept too, each while its connection lasts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

/// The longest reason kept: one sentence.
const MAX_REASON: usize = 300;
/// Devices listed as online; the gateway's connection limits keep the real number far lower,
/// and beyond this they are still counted.
const MAX_DEVICES_LISTED: usize = 256;
/// The longest device id kept (a MAC is 17 bytes).
const MAX_DEVICE_ID: usize = 64;
/// Pairing requests and jobs in the daemon's report.
const MAX_LISTED: usize = 20;

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
    /// Device id → its open connections (a device may reconnect before its old one closes).
    devices: Arc<Mutex<BTreeMap<String, usize>>>,
}

/// A device's connection: the device counts as online until this is dropped.
#[derive(Debug)]
pub struct Online {
    devices: Arc<Mutex<BTreeMap<String, usize>>>,
    id: String,
}

impl Drop for Online {
    fn drop(&mut self) {
        let mut map = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.id);
            }
        }
    }
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

    /// Device `id` connected; it shows as online while the returned guard lives.
    pub fn device_online(&self, id: &str) -> Online {
        let id: String = id.chars().filter(|c| !c.is_control()).take(MAX_DEVICE_ID).collect();
        *self.devices.lock().unwrap_or_else(PoisonError::into_inner).entry(id.clone()).or_default() += 1;
        Online { devices: Arc::clone(&self.devices), id }
    }

    /// How many devices are connected now, and the first [`MAX_DEVICES_LISTED`] of them.
    pub fn devices_online(&self) -> (usize, Vec<String>) {
        let map = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
        (map.len(), map.keys().take(MAX_DEVICES_LISTED).cloned().collect())
    }
}

/// What `GET /api/live` answers: the channels' states, the devices connected now, and what the
/// running daemon holds for the owner (pairing requests waiting, the next jobs).
pub fn report(daemon: &crate::daemon::Daemon) -> serde_json::Value {
    let clock = daemon.clock();
    let now = clock.unix_secs();
    let (online, ids) = daemon.live().devices_online();
    let pairings: Vec<_> = match daemon.gate().list(clock.unix_secs_u64()) {
        Ok(l) => l
            .pending
            .into_iter()
            .take(MAX_LISTED)
            .map(|p| serde_json::json!({"sender": format!("{}:{}", p.channel, p.sender), "code": p.code}))
            .collect(),
        Err(e) => {
            chela_log::warn!("status: cannot read the pairing requests: {e}");
            Vec::new()
        }
    };
    let jobs: Vec<_> = daemon
        .scheduler()
        .upcoming(now)
        .into_iter()
        .take(MAX_LISTED)
        .map(|v| serde_json::json!({"id": v.job.id, "name": v.job.name, "next_run": v.next_fire_local}))
        .collect();
    serde_json::json!({
        "channels": daemon.live().snapshot(),
        "devices_online": {"count": online, "ids": ids},
        "pairing_requests": pairings,
        "next_jobs": jobs,
    })
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

    #[test]
    fn a_device_is_online_while_any_of_its_connections_lasts() {
        let live = Live::default();
        let first = live.device_online("aa:bb:cc:dd:ee:ff");
        let second = live.device_online("aa:bb:cc:dd:ee:ff");
        let other = live.device_online(&format!("\u{1b}[2J{}", "x".repeat(1000)));
        let (count, ids) = live.devices_online();
        assert_eq!(count, 2);
        assert!(ids.iter().all(|id| id.len() <= MAX_DEVICE_ID && !id.contains('\u{1b}')), "{ids:?}");
        drop(first);
        assert_eq!(live.devices_online().0, 2, "its second connection is still open");
        drop(second);
        drop(other);
        assert_eq!(live.devices_online(), (0, Vec::new()));
        let many: Vec<_> = (0..MAX_DEVICES_LISTED + 5).map(|i| live.device_online(&i.to_string())).collect();
        let (count, ids) = live.devices_online();
        assert_eq!((count, ids.len()), (MAX_DEVICES_LISTED + 5, MAX_DEVICES_LISTED));
        drop(many);
    }
}
