//! What the fake's handle ([`crate::FakeLlm`]) and its server's tasks share: the script, the
//! recording of every request and the count of open connections. Below both, so the server
//! does not reach up into the handle's module.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::watch;

use crate::answer::Ids;
use crate::script::Step;

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// In arrival order, names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body, if it is JSON.
    pub json: Option<Value>,
    /// When the request head arrived.
    pub at: Instant,
}

impl Recorded {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// State shared between the handle and the server's tasks.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) script: Mutex<VecDeque<Step>>,
    pub(crate) recorded: Mutex<VecDeque<Recorded>>,
    pub(crate) max_recorded: usize,
    pub expected_key: Option<String>,
    pub ids: Ids,
    pub(crate) open_connections: AtomicUsize,
    /// `true` while [`FakeLlm::hold`] keeps answers back.
    pub(crate) held: watch::Sender<bool>,
}

/// The data behind these locks stays consistent even if a holder panicked (each critical
/// section is a single push or pop), so a poisoned lock is used as is.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// The next scripted step, or `None` when the demo should answer.
    pub fn next_step(&self) -> Option<Step> {
        lock(&self.script).pop_front()
    }

    /// Returns once no [`FakeLlm::hold`] keeps answers back.
    pub async fn released(&self) {
        let mut rx = self.held.subscribe();
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = rx.wait_for(|held| !*held).await;
    }

    pub fn record(&self, r: Recorded) {
        let mut recorded = lock(&self.recorded);
        if recorded.len() >= self.max_recorded {
            recorded.pop_front();
        }
        recorded.push_back(r);
    }

    /// Counts a connection as open until the guard is dropped.
    pub fn open_connection(self: &Arc<Shared>) -> OpenConnection {
        self.open_connections.fetch_add(1, Ordering::SeqCst);
        OpenConnection(Arc::clone(self))
    }
}

pub(crate) struct OpenConnection(Arc<Shared>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::SeqCst);
    }
}
