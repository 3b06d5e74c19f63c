//! The scheduler task on the daemon's clock: with a manual clock and paused tokio time, a job
//! fires when the test moves time to it, without waiting for real seconds.

use std::sync::Arc;
use std::time::Duration;

use super::serve;
use crate::clock::Clock;
use crate::daemon::Daemon;
use crate::workspace::Workspace;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn view(d: &Daemon) -> crate::scheduler::JobView {
    d.scheduler().get("later", d.clock().unix_secs()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_job_fires_when_the_injected_clock_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().to_owned())).unwrap();
    let daemon = Arc::new(Daemon::load_with(ws, Clock::manual(T0 * 1000)).unwrap());
    let job = serde_json::from_value(serde_json::json!({"id": "later", "trigger": {"type": "once", "at": T0 + 120},
        "action": {"type": "cap", "name": "memory_append_today", "args": {"content": "standup"}}}))
    .unwrap();
    daemon.scheduler().upsert(job, T0).unwrap();
    let serving = tokio::spawn(serve(Arc::clone(&daemon)));
    // Two minutes less a second on the paused clock: not yet.
    tokio::time::sleep(Duration::from_secs(119)).await;
    assert!(view(&daemon).last_outcome.is_none(), "fired early at {}", daemon.clock().unix_secs());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut outcome = None;
    for _ in 0..100 {
        outcome = view(&daemon).last_outcome;
        if outcome.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outcome = outcome.expect("the job ran once its time came");
    assert!(outcome.ok, "{}", outcome.message);
    assert!((T0 + 120..T0 + 130).contains(&outcome.at), "ran at {}", outcome.at);
    // The tool read the same clock: the note went into the injected day's file, not today's.
    let note = std::fs::read_to_string(dir.path().join("memory/2027-01-15.md")).unwrap();
    assert!(note.ends_with(" standup\n"), "{note}");
    daemon.shutdown().trigger();
    tokio::time::timeout(Duration::from_secs(5), serving).await.unwrap().unwrap().unwrap();
}
