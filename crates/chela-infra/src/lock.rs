//! One lock for every read-modify-write of a shared state file.
//!
//! Several writers may change the same file at once: two `chela` processes (a `config set`
//! while the daemon runs), or several tool calls of one reply (`memory_store` twenty times).
//! Each writes the whole file atomically, so no file is ever torn, but without a lock the
//! writers read the same old content and the last rename wins: the others' changes are lost.
//!
//! [`with_file_lock`] holds an advisory `flock(LOCK_EX)` on a sidecar file (`.NAME.lock`
//! beside `NAME`) across the read and the write. `flock` belongs to the open file description,
//! so each call opens its own descriptor: the lock then works between processes AND between
//! threads of one process. The lock is released when the descriptor closes, also when the
//! process dies, so a crashed writer never leaves a stale lock behind. The sidecar is never
//! deleted: removing it while another writer waits on it would let a third lock a new file.
//!
//! Every state file that is read, changed and written back uses it: `overrides.toml`,
//! `memory/entries.jsonl`, and the files still to come (jobs, rules, pairing, offsets).
//! Appends of whole lines (`append_durable`) need no lock.
//!
//! The call blocks: call it from blocking code (`tokio::task::spawn_blocking` in a tool) and
//! keep the closure short and free of network calls. A lock held across await points (a
//! session's whole turn, which calls the model) is taken with [`hold`] instead.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{FlockOperation, flock};

/// How long a writer waits for another before giving up. Critical sections are a read and an
/// atomic write of a small file (milliseconds); a holder this slow is stuck.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// The sidecar lock file for `path`: `.NAME.lock` in the same folder.
pub fn lock_path(path: &Path) -> PathBuf {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(|| "state".into(), |n| n.to_string_lossy());
    dir.join(format!(".{name}.lock"))
}

/// Runs `f` while holding the exclusive lock for `path` (the state file itself, not the
/// sidecar). The folder of `path` must exist. Errors opening or taking the lock come back as
/// `E` through `From<io::Error>`, with the file named.
pub fn with_file_lock<T, E: From<io::Error>>(path: &Path, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    let _held = acquire(&lock_path(path), LOCK_WAIT)?;
    f()
}

/// An open, locked sidecar; dropping it closes the descriptor, which releases the lock.
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// Why [`hold`] did not get the lock.
#[derive(Debug)]
pub enum LockWait {
    /// Another holder kept it for the whole wait.
    TimedOut,
    /// The sidecar could not be opened or locked (the message names it).
    Io(io::Error),
}

/// Takes the exclusive lock for `path` to hold across await points (a session's whole turn),
/// waiting at most `wait` without blocking a worker: the sidecar is opened on the blocking
/// pool, then the lock is tried without blocking, with pauses between tries. Dropping the
/// future gives up the wait.
pub async fn hold(path: &Path, wait: Duration) -> Result<Held, LockWait> {
    let lock = lock_path(path);
    // Opening an empty sidecar is one quick syscall with nothing to flush: cheaper here than a
    // hand-off to the blocking pool, which a one-shot chat would pay on every turn.
    let file = open_sidecar(&lock).map_err(LockWait::Io)?;
    let deadline = tokio::time::Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(Held { _file: file }),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(LockWait::TimedOut);
                }
                tokio::time::sleep(pause).await;
                // Short pauses at first (a turn's append is quick), then a few tries a second.
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            Err(e) => {
                let e = io::Error::from(e);
                return Err(LockWait::Io(io::Error::new(e.kind(), format!("cannot lock {}: {e}", lock.display()))));
            }
        }
    }
}

/// Opens (creating) the sidecar `lock`, never through a symlink.
fn open_sidecar(lock: &Path) -> io::Result<File> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("cannot lock {}: {e}", lock.display()));
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // A symlink planted in the workspace must not make us create or lock a file elsewhere.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(lock)
        .map_err(named)
}

fn acquire(lock: &Path, wait: Duration) -> io::Result<Held> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("cannot lock {}: {e}", lock.display()));
    let file = open_sidecar(lock)?;
    let deadline = crate::clock::real_instant() + wait;
    // Why poll rather than block: a blocking flock cannot be bounded, and a stuck holder must
    // become an error the person can act on, not a command that hangs forever.
    let mut pause = Duration::from_millis(1);
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(Held { _file: file }),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                if crate::clock::real_instant() >= deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "another Chela process has held the lock {} for over {} s; \
                             if none is running, the lock is free and this is a bug",
                            lock.display(),
                            wait.as_secs()
                        ),
                    ));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => return Err(named(e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// Without the lock, the threads read the same count and most increments are lost; with it
    /// every one of them is kept. Each thread opens its own descriptor, as separate processes do.
    #[test]
    fn parallel_read_modify_writes_keep_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("counter");
        std::fs::write(&counter, "0").unwrap();
        let n = 16;
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (counter, barrier) = (counter.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    with_file_lock(&counter, || -> io::Result<()> {
                        let v: u32 = std::fs::read_to_string(&counter)?.parse().unwrap();
                        // Widen the window between read and write so a missing lock shows.
                        std::thread::yield_now();
                        crate::workspace::write_atomic(&counter, (v + 1).to_string().as_bytes())
                    })
                    .unwrap();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(std::fs::read_to_string(&counter).unwrap(), n.to_string());
        assert!(dir.path().join(".counter.lock").exists());
    }

    #[test]
    fn a_held_lock_times_out_with_a_message_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let lock = lock_path(&dir.path().join("entries.jsonl"));
        let first = acquire(&lock, Duration::ZERO).unwrap();
        let e = acquire(&lock, Duration::from_millis(5)).expect_err("the second writer must wait");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains(".entries.jsonl.lock"), "{e}");
        drop(first);
        acquire(&lock, Duration::ZERO).expect("free again once the holder is gone");
    }

    #[test]
    fn the_lock_file_is_never_followed_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, dir.path().join(".state.lock")).unwrap();
        let e = with_file_lock(&dir.path().join("state"), || Ok::<_, io::Error>(())).unwrap_err();
        assert!(e.to_string().contains("cannot lock"), "{e}");
        assert!(!target.exists());
    }
}
