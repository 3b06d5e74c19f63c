//! Whether a `chela run` serves this workspace: the daemon holds a shared `flock` on the
//! workspace's `.run.lock` for as long as it runs, and a command asks by trying to take the
//! lock exclusively without waiting. The kernel drops the lock with the process, so a daemon
//! that crashed never counts as running, and a daemon of another workspace never counts.
//!
//! Beside the lock, `run.json` says which daemon it is (process id, version, start time,
//! address), for `chela status`. It is only believed while the lock says a daemon runs: a
//! crashed daemon leaves it behind, stale.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use rustix::fs::{FlockOperation, flock};

use crate::workspace::Workspace;

/// The lock file, in the workspace.
const LOCK_FILE: &str = ".run.lock";
/// Which daemon holds it, in the workspace.
const INFO_FILE: &str = "run.json";
/// The most of `run.json` read: it is a few hundred bytes.
const MAX_INFO: u64 = 16 * 1024;

/// What a running `chela run` says about itself.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunInfo {
    pub pid: u32,
    pub version: String,
    pub commit: String,
    /// Unix seconds.
    pub started: i64,
    /// `gateway.listen` as it was when the daemon started.
    pub listen: String,
}

impl RunInfo {
    /// This process, started now (`now` in Unix seconds), serving a gateway on `listen`.
    pub fn this_process(now: i64, listen: String) -> RunInfo {
        RunInfo {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            commit: env!("CHELA_COMMIT").to_owned(),
            started: now,
            listen,
        }
    }
}

/// How long `chela run` waits for a command that is looking (it holds the lock for a moment).
const ANNOUNCE_WAIT: Duration = Duration::from_secs(2);

fn lock_path(ws: &Workspace) -> PathBuf {
    ws.root().join(LOCK_FILE)
}

fn open(ws: &Workspace, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(0o600)
        // A symlink planted in the workspace must not make us create or lock a file elsewhere.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(lock_path(ws))
}

/// Held by `chela run` while it serves the workspace; dropping it (or the process ending)
/// says it no longer does.
pub struct Presence {
    _file: File,
}

/// Marks the workspace as served by this process and records `info` (atomically). Shared: a
/// second daemon on the same workspace is not refused here (its gateway port is what collides).
pub fn announce(ws: &Workspace, info: &RunInfo) -> io::Result<Presence> {
    let presence = hold(ws)?;
    let json = serde_json::to_vec_pretty(info).map_err(io::Error::other)?;
    // Only `chela status` reads it: a daemon that cannot write it still serves.
    if let Err(e) = crate::workspace::write_atomic(&ws.root().join(INFO_FILE), &json) {
        chela_log::warn!(
            "cannot write {INFO_FILE} in {}: {e}; `chela status` cannot say which daemon runs",
            ws.root().display()
        );
    }
    Ok(presence)
}

/// What the daemon serving `ws` recorded, when one does (see [`daemon_running`]).
pub fn running_info(ws: &Workspace) -> Option<RunInfo> {
    if !daemon_running(ws) {
        return None;
    }
    let text = crate::workspace::read_bounded(&ws.root().join(INFO_FILE), MAX_INFO).ok().flatten()?;
    serde_json::from_str(&text).ok()
}

fn hold(ws: &Workspace) -> io::Result<Presence> {
    let file = open(ws, true)?;
    let deadline = crate::clock::real_instant() + ANNOUNCE_WAIT;
    loop {
        match flock(&file, FlockOperation::NonBlockingLockShared) {
            Ok(()) => return Ok(Presence { _file: file }),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) if e == rustix::io::Errno::WOULDBLOCK && crate::clock::real_instant() < deadline => {
                // A command is looking; it lets go at once.
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(io::Error::new(e.kind(), format!("cannot lock {}: {e}", lock_path(ws).display()))),
        }
    }
}

/// Whether a `chela run` serves `ws` now. An error reading the lock counts as "no": this only
/// decides which notes are worth printing.
pub fn daemon_running(ws: &Workspace) -> bool {
    let Ok(file) = open(ws, false) else { return false };
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {
            let _ = flock(&file, FlockOperation::Unlock);
            false
        }
        Err(e) => e == rustix::io::Errno::WOULDBLOCK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_while_announced_and_not_after() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
        ws.ensure().unwrap();
        assert!(!daemon_running(&ws), "no lock file yet");
        let info = RunInfo::this_process(1000, "127.0.0.1:1".into());
        assert_eq!(running_info(&ws), None);
        let held = announce(&ws, &info).unwrap();
        assert_eq!(running_info(&ws), Some(info.clone()));
        assert!(daemon_running(&ws));
        assert!(daemon_running(&ws), "looking does not take it away");
        let second = announce(&ws, &info).unwrap();
        drop(held);
        assert!(daemon_running(&ws), "one daemon still serves");
        drop(second);
        assert!(!daemon_running(&ws));
        assert_eq!(running_info(&ws), None, "the file stays, but no daemon vouches for it");
        let other = Workspace::locate(Some(dir.path().join("other"))).unwrap();
        other.ensure().unwrap();
        let _held = announce(&ws, &info).unwrap();
        assert!(!daemon_running(&other), "a daemon of another workspace is not this one's");
    }
}
