//! The real `chela run` for integration tests and benchmarks: [`command`] makes a `chela`
//! command with a cleared environment on a test's workspace, and [`Running::start`] spawns the
//! daemon, reads its gateway address from stderr and kills it when dropped.
//!
//! What it is not: a way to find the binary (the caller passes `env!("CARGO_BIN_EXE_chela")`
//! or its own) or to make a workspace (the caller writes its `chela.toml`).

use std::ffi::OsStr;
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The line `chela run` prints once its gateway listens; the address follows it.
pub const LISTENING: &str = "the gateway listens on http://";
/// Most stderr kept; past it the older half is dropped, so a chatty daemon cannot fill memory.
pub const MAX_LOG_BYTES: usize = 4 * 1024 * 1024;

/// `bin` on the workspace `root` with `home` as `HOME` and nothing else from the caller's
/// environment but `PATH`, so only the test's own settings count.
pub fn command(bin: impl AsRef<OsStr>, root: &Path, home: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env_clear().env("HOME", home).env("CHELA_HOME", root);
    if let Some(path) = std::env::var_os("PATH") {
        c.env("PATH", path);
    }
    c
}

/// A running `chela run`, killed (and reaped) when dropped.
#[derive(Debug)]
pub struct Running {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Running {
    /// Spawns `cmd` (a `chela run` command, e.g. from [`command`]; its stdin and stdout are set
    /// to null and its stderr is read here to its end) and waits up to `wait` for the gateway's
    /// address. Panics with everything the daemon said if it does not come.
    pub fn start(mut cmd: Command, wait: Duration) -> Running {
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("cannot start chela run");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        // Read stderr on a thread until the address line is whole, then keep draining it so the
        // daemon never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut text = sink.lock().unwrap_or_else(PoisonError::into_inner);
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                if text.len() > MAX_LOG_BYTES {
                    let mut cut = text.len() - MAX_LOG_BYTES / 2;
                    while !text.is_char_boundary(cut) {
                        cut += 1;
                    }
                    text.drain(..cut);
                }
            }
        });
        let deadline = Instant::now() + wait;
        let addr = loop {
            let text = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
            if let Some(i) = text.find(LISTENING)
                && let Some(line) = text[i + LISTENING.len()..].split_once('\n')
            {
                break line.0.trim().parse().expect("the gateway's address");
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chela run did not start its gateway within {wait:?}:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Running { child, addr, log }
    }

    /// Where the gateway listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The daemon's process id (for a benchmark reading its memory from /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the daemon is still running (it has not exited).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// What the daemon wrote to stderr so far (the newest [`MAX_LOG_BYTES`] at most).
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
