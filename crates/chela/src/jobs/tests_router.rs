//! The rule router's task, with the scheduler's daemon (its tests live below the daemon, in
//! chela-daemon; this one needs the job runner above it).

use std::sync::Arc;

use serde_json::json;

use super::tests_scheduler::{ended, setup};

// A job run started by an event ends with the router task that started it (the scheduler's
// daemon with a held run; the run is dropped, not finished, when the daemon stops).
#[tokio::test]
async fn an_on_event_job_run_ends_with_the_router_that_started_it() {
    let s = setup(json!({"id": "on-ping", "trigger": {"type": "on_event", "event": "ping"},
        "action": {"type": "cap", "name": "hold"}}));
    let router = tokio::spawn(super::router::serve(Arc::clone(&s.daemon)));
    s.daemon.raise(chela_core::router::Event::new("ping").unwrap());
    s.started.await.expect("the job ran");
    s.daemon.shutdown().trigger();
    router.abort();
    ended(s.alive).await;
}
