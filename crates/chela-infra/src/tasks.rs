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

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use tokio::task::{AbortHandle, JoinError, JoinHandle};

/// A spawned future with its type erased (see [`boxed`]).
pub type BoxTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `task` boxed, for `tokio::spawn` or a `JoinSet`: every boxed task shares one task type, so
/// tokio's task code (about a kilobyte a type) is compiled once, not once per kind of task.
pub fn boxed(task: impl Future<Output = ()> + Send + 'static) -> BoxTask {
    Box::pin(task)
}

/// Runs `work` on tokio's blocking pool, as `tokio::task::spawn_blocking(work)` does: started
/// at once, the future only waits for its result (dropping it does not stop the work).
pub fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, JoinError>> + Send {
    // Erased to one closure type that returns a box: the blocking task's code is compiled once
    // for every caller instead of once per closure (the extra allocation is nothing next to a
    // thread hop).
    let erased: Box<dyn FnOnce() -> Box<dyn Any + Send> + Send> = Box::new(move || Box::new(work()));
    unbox::<T>(tokio::task::spawn_blocking(erased))
}

/// The result of [`blocking`]'s work; a function of its own so that its future depends on `T`
/// only, not on the closure.
async fn unbox<T: 'static>(handle: JoinHandle<Box<dyn Any + Send>>) -> Result<T, JoinError> {
    let out = handle.await?;
    Ok(*out.downcast::<T>().unwrap_or_else(|_| unreachable!("the closure returns a T")))
}

/// A spawned task that is aborted when this handle is dropped.
#[must_use = "dropping the handle aborts the task at once"]
#[derive(Debug)]
pub struct TaskHandle(AbortHandle);

impl TaskHandle {
    /// Spawns `task` on the current runtime, owned by the returned handle.
    pub fn spawn(task: impl Future<Output = ()> + Send + 'static) -> TaskHandle {
        // Boxed, so every owned task shares one task type: tokio's task code is compiled once,
        // not once per kind of task.
        TaskHandle(tokio::spawn(boxed(task)).abort_handle())
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
    async fn blocking_work_gives_back_its_value_and_its_panic() {
        let value = blocking(|| (String::from("done"), 42u64)).await.unwrap();
        assert_eq!(value, (String::from("done"), 42));
        let failed = blocking(|| -> u8 { panic!("boom") }).await.unwrap_err();
        assert!(failed.is_panic());
    }

    #[tokio::test]
    async fn blocking_work_starts_before_it_is_awaited() {
        let (started_tx, started) = std::sync::mpsc::channel();
        let pending = blocking(move || started_tx.send(()).unwrap());
        // Not awaited yet: the work runs anyway, as with `spawn_blocking`.
        tokio::task::spawn_blocking(move || started.recv_timeout(std::time::Duration::from_secs(10)))
            .await
            .unwrap()
            .expect("the work ran before its future was polled");
        pending.await.unwrap();
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
