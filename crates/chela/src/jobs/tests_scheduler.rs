//! The scheduler and router tasks own their runs: stopping them ends every job they started.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;

use crate::daemon::Daemon;
use crate::tools::testing::fake::{NoArgs, group};
use crate::tools::{Tool, ToolCtx, ToolResult};
use crate::workspace::Workspace;

/// One call's ends: it says when it started, holds `alive` until the call is dropped (the
/// test's receiver resolves when the run that called it is gone), and returns once `release`
/// fires.
struct Call {
    started: oneshot::Sender<()>,
    alive: oneshot::Sender<()>,
    release: oneshot::Receiver<()>,
}

struct Hold(Mutex<Option<Call>>);

impl Tool for Hold {
    const NAME: &'static str = "hold";
    const DESCRIPTION: &'static str = "Holds its call open until the test releases it.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    type Args = NoArgs;

    async fn call<'a>(&'a self, _: &'a ToolCtx, _: NoArgs) -> ToolResult {
        let taken = self.0.lock().unwrap().take();
        let Some(Call { started, alive, release }) = taken else { return Ok("called twice".into()) };
        let _ = started.send(());
        let _alive = alive;
        let _ = release.await;
        Ok("released".into())
    }
}

pub(crate) struct Setup {
    _dir: tempfile::TempDir,
    pub(crate) daemon: Arc<Daemon>,
    pub(crate) started: oneshot::Receiver<()>,
    pub(crate) alive: oneshot::Receiver<()>,
    pub(crate) release: oneshot::Sender<()>,
}

/// A daemon whose toolbox has the `hold` tool and whose scheduler has `job`.
pub(crate) fn setup(job: serde_json::Value) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    let daemon = Arc::new(Daemon::load(ws).unwrap());
    let (started_tx, started) = oneshot::channel();
    let (alive_tx, alive) = oneshot::channel();
    let (release, release_rx) = oneshot::channel();
    let call = Call { started: started_tx, alive: alive_tx, release: release_rx };
    daemon.toolbox().register(group("test_hold", Hold(Mutex::new(Some(call))))).unwrap();
    let now = daemon.clock().unix_secs();
    daemon.scheduler().upsert(serde_json::from_value(job).unwrap(), now).unwrap();
    Setup { _dir: dir, daemon, started, alive, release }
}

/// Fails the test instead of hanging it when the run is never dropped; passing tests wait on
/// the event itself.
pub(crate) async fn ended(alive: oneshot::Receiver<()>) {
    let gone = tokio::time::timeout(Duration::from_secs(30), alive).await.expect("the run ended with its owner");
    assert!(gone.is_err(), "the run was dropped, not finished");
}

#[tokio::test]
async fn a_job_run_ends_with_the_scheduler_that_started_it() {
    let s = setup(json!({"id": "stuck", "trigger": {"type": "interval", "every_s": 3600},
        "action": {"type": "cap", "name": "hold"}}));
    let scheduler = tokio::spawn(super::scheduler::serve(Arc::clone(&s.daemon)));
    s.daemon.scheduler().trigger("stuck").unwrap();
    s.started.await.expect("the job ran");
    // Stopping: the scheduler waits for its runs, and `chela run` aborts it when its bound runs
    // out. The run goes with it instead of holding its tool call open after the stop.
    s.daemon.shutdown().trigger();
    scheduler.abort();
    ended(s.alive).await;
}

#[tokio::test]
async fn at_stop_the_scheduler_returns_only_once_its_runs_ended() {
    let s = setup(json!({"id": "stuck", "trigger": {"type": "interval", "every_s": 3600},
        "action": {"type": "cap", "name": "hold"}}));
    let scheduler = tokio::spawn(super::scheduler::serve(Arc::clone(&s.daemon)));
    s.daemon.scheduler().trigger("stuck").unwrap();
    s.started.await.expect("the job ran");
    s.daemon.shutdown().trigger();
    // A scheduler that did not wait for its run would have returned after a few turns of the
    // runtime (it has nothing else to do); this one is still there, whatever the count.
    for _ in 0..100 {
        tokio::task::yield_now().await;
        assert!(!scheduler.is_finished(), "the scheduler returned while its run was going");
    }
    // The turn of a real run ends at the stop's grace; this one when released.
    s.release.send(()).unwrap();
    scheduler.await.unwrap().unwrap();
    // The run finished, outcome kept, before the scheduler said it stopped.
    let status = s.daemon.scheduler().get("stuck", s.daemon.clock().unix_secs()).and_then(|v| v.status);
    let status = status.expect("the run's outcome was kept before the scheduler returned");
    assert!(status.contains("hold answered"), "{status}");
}
