//! Owned tasks: every task the host spawns belongs to a value that ends it.
//!
//! Two shapes cover the host. A task that lives exactly as long as one value (a connection's
//! reader, a peer's setup, a signal watcher) is a [`TaskHandle`] field of that value: dropping
//! the value aborts the task, so nothing outlives what it works for. Tasks an owner starts in
//! numbers (the scheduler's job runs, the router's plans) go into a `tokio::task::JoinSet` that
//! the owner awaits when it stops and that aborts whatever is left when it is dropped.
//!
//! A plain `tokio::spawn` whose handle is thrown away is the one thing not to write: such a task
//! is awaited by nobody at stop and may keep a process, a socket or a turn going after its owner
//! is gone.

use std::future::Future;
use std::pin::Pin;

use tokio::task::AbortHandle;

/// A spawned task that is aborted when this handle is dropped.
#[must_use = "dropping the handle aborts the task at once"]
#[derive(Debug)]
pub struct TaskHandle(AbortHandle);

impl TaskHandle {
    /// Spawns `task` on the current runtime, owned by the returned handle.
    pub fn spawn(task: impl Future<Output = ()> + Send + 'static) -> TaskHandle {
        // Boxed, so every owned task shares one task type: tokio's task code is compiled once,
        // not once per kind of task.
        let task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(task);
        TaskHandle(tokio::spawn(task).abort_handle())
    }

    /// Whether the task ended (or was aborted).
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Drop for TaskHandle {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn dropping_the_handle_ends_the_task_and_frees_what_it_held() {
        let held = Arc::new(());
        let (entered_tx, entered) = tokio::sync::oneshot::channel();
        let task = TaskHandle::spawn({
            let held = Arc::clone(&held);
            async move {
                let _held = held;
                let _ = entered_tx.send(());
                std::future::pending::<()>().await;
            }
        });
        entered.await.unwrap();
        assert_eq!(Arc::strong_count(&held), 2, "the task holds its clone while it runs");
        assert!(!task.is_finished());
        drop(task);
        // The abort takes effect when the runtime next drops the task; yielding lets it. The
        // timeout only turns a regression into a failure instead of a hang.
        let freed = async {
            while Arc::strong_count(&held) > 1 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), freed).await.expect("the task was dropped");
    }

    #[tokio::test]
    async fn a_task_that_ended_by_itself_is_finished() {
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let task = TaskHandle::spawn(async move {
            let _ = done_tx.send(());
        });
        done.await.unwrap();
        let finished = async {
            while !task.is_finished() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), finished).await.expect("the task finished");
    }
}
