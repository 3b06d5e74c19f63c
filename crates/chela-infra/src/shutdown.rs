//! The one shutdown signal every task of the daemon watches. It lives on the ground floor so
//! the parts below the daemon (the board, MCP endpoint hosts) can watch it without importing
//! the daemon.

use std::sync::Arc;

use tokio::sync::watch;

/// Clones share one switch: [`Shutdown::trigger`] once, and every [`Shutdown::wait`] returns.
#[derive(Clone, Debug)]
pub struct Shutdown(Arc<watch::Sender<bool>>);

impl Default for Shutdown {
    fn default() -> Shutdown {
        Shutdown(Arc::new(watch::Sender::new(false)))
    }
}

impl Shutdown {
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the daemon is stopping, at once if it already is.
    pub async fn wait(&self) {
        let mut rx = self.0.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|&down| down).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_clone_sees_the_trigger_even_one_made_after_it() {
        let s = Shutdown::default();
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.wait().await }
        });
        assert!(!s.is_triggered());
        s.trigger();
        waiter.await.unwrap();
        let late = s.clone();
        assert!(late.is_triggered());
        late.wait().await;
    }
}
