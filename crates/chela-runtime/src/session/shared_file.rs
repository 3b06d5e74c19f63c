//! One session file, several processes: the daemon and `chela chat` may serve the same
//! conversation at once (a person answers on Telegram and in the terminal).
//!
//! Two rules keep the file well-formed and the turns whole and in order:
//! - A turn (and a restart) holds the session's lock, an `flock` on the `.NAME.jsonl.lock`
//!   sidecar (see [`crate::lock`]), from before its history is read until its messages are
//!   appended. A turn of another process waits for it, and then starts from it.
//! - An owner's history in memory is only a cache of the file: under the lock, the file's
//!   [`Stamp`] is compared with the one the owner left, and a file that changed under it
//!   (another process appended, archived or rotated it) is read again.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::lock::{Held, LockWait, hold};
use crate::turn::Cancel;

/// How long a turn waits for another process's turn in the same conversation: long enough for
/// a slow model's answer with tool calls, short of forever.
pub(super) const TURN_LOCK_WAIT: Duration = Duration::from_secs(15 * 60);

/// What identifies one version of a session file; any append, replacement or removal changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

/// The file's stamp now; `None` when there is no file.
pub(super) fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp { dev: m.dev(), ino: m.ino(), len: m.len(), mtime: (m.mtime(), m.mtime_nsec()) })
}

/// Takes the conversation's lock for one turn, waiting for another process's turn to end.
/// A cancelled wait (Ctrl-C, the daemon stopping) and a wait that never ends are errors that
/// say so.
pub(super) async fn lock_turn(path: &Path, cancel: &Cancel) -> anyhow::Result<Held> {
    if let Some(dir) = path.parent() {
        let dir = dir.to_owned();
        crate::tasks::blocking(move || {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)
        })
        .await
        .map_err(|e| anyhow::anyhow!("file work stopped unexpectedly: {e}"))?
        .map_err(|e| anyhow::anyhow!("cannot create the sessions folder: {e}"))?;
    }
    tokio::select! {
        held = hold(path, TURN_LOCK_WAIT) => held.map_err(|e| match e {
            LockWait::TimedOut => anyhow::anyhow!(
                "another Chela process has been answering in this conversation for over {} minutes; \
                 try again when it is done ({})",
                TURN_LOCK_WAIT.as_secs() / 60,
                path.display()
            ),
            LockWait::Io(e) => anyhow::anyhow!("{e}"),
        }),
        () = cancel.cancelled() => Err(anyhow::anyhow!(
            "stopped while waiting for another Chela process to finish its turn in this conversation"
        )),
    }
}
