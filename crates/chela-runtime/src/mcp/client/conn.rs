//! One stdio connection to an MCP server: the child process, a writer task that owns its stdin,
//! a reader task that matches answers to requests, and a task that copies its stderr into
//! Chela's log. Every read is bounded; a server that breaks the framing (invalid JSON, a line
//! over [`MAX_MESSAGE`]) is stopped and every waiting call gets the reason.
//!
//! Calling order: [`Conn::spawn`], then [`Conn::request`] / [`Conn::notify`] from any task;
//! [`Conn::shutdown`] once at the end (closing stdin, then SIGTERM, then SIGKILL).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::wire::{self, Incoming, RpcError};
use crate::tasks::TaskHandle;

/// The longest message read from a server (one line). Tool results with images are large, but
/// a server sending more than this is broken or hostile.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// The longest stderr line kept in the log; the rest of such a line is dropped.
const MAX_LOG_LINE: usize = 2048;
/// Lines waiting for the server's stdin.
const WRITE_QUEUE: usize = 64;
/// Requests waiting for an answer at once.
const MAX_PENDING: usize = 256;

/// What to start.
#[derive(Clone, Debug)]
pub struct Spawn {
    pub server: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// Why a request got no result.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// The server answered with a JSON-RPC error.
    Rpc(RpcError),
    /// The connection is gone or broke the protocol; the text says how.
    Broken(String),
    /// No answer in time; the text says how long and any stray answer seen.
    TimedOut(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Rpc(e) => match e.code {
                Some(c) => write!(f, "the server answered with error {c}: {}", e.message),
                None => write!(f, "the server answered with an error: {}", e.message),
            },
            CallError::Broken(s) | CallError::TimedOut(s) => f.write_str(s),
        }
    }
}

type Reply = Result<Value, CallError>;

#[derive(Default)]
struct Pending {
    waiting: HashMap<u64, oneshot::Sender<Reply>>,
    /// Set once the connection is unusable.
    dead: Option<String>,
    /// The last answer whose id matched no request, for the timeout message.
    stray: Option<String>,
}

struct Shared {
    server: String,
    pending: Mutex<Pending>,
    /// `notifications/tools/list_changed` arrived.
    list_changed: Notify,
    /// Becomes true when the connection is unusable.
    gone: watch::Sender<bool>,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the connection dead and fails every waiting call with `why`. The first reason wins.
    fn fail(&self, why: String) {
        let mut p = self.pending();
        let why = p.dead.get_or_insert(why).clone();
        for (_, tx) in p.waiting.drain() {
            let _ = tx.send(Err(CallError::Broken(why.clone())));
        }
        self.gone.send_replace(true);
    }
}

pub struct Conn {
    shared: Arc<Shared>,
    tx: mpsc::Sender<String>,
    next_id: AtomicU64,
    pid: Option<u32>,
    /// The child's exit, once it happened.
    exited: watch::Receiver<Option<String>>,
    /// Closing stdin: taken by `shutdown`.
    close: Mutex<Option<oneshot::Sender<()>>>,
    /// The writer, reader, stderr logger and reaper. Dropped with the connection, they are
    /// aborted, and the reaper's child with them (`kill_on_drop`): a connection dropped without
    /// `shutdown` (a cancelled connect) leaves no process or task behind.
    _tasks: [TaskHandle; 4],
}

impl Conn {
    /// Starts the server. Its environment is Chela's plus `env`; it gets its own process group
    /// so a stop reaches what it started (npx starts node).
    pub fn spawn(s: &Spawn) -> Result<Arc<Conn>, String> {
        let mut cmd = Command::new(&s.command);
        cmd.args(&s.args)
            .envs(s.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &s.cwd {
            cmd.current_dir(dir);
        }
        let mut child =
            cmd.spawn().map_err(|e| format!("cannot start `{}` for MCP server {}: {e}", s.command, s.server))?;
        let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(stdin), Some(stdout), Some(stderr)) = (stdin, stdout, stderr) else {
            return Err("the server's pipes were not set up".into());
        };
        let shared = Arc::new(Shared {
            server: s.server.clone(),
            pending: Mutex::new(Pending::default()),
            list_changed: Notify::new(),
            gone: watch::Sender::new(false),
        });
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let (close_tx, close_rx) = oneshot::channel();
        let (exit_tx, exit_rx) = watch::channel(None);
        let pid = child.id();
        let tasks = [
            TaskHandle::spawn(write_loop(stdin, rx, close_rx, Arc::clone(&shared))),
            TaskHandle::spawn(read_loop(stdout, tx.clone(), Arc::clone(&shared))),
            TaskHandle::spawn(log_stderr(stderr, s.server.clone())),
            TaskHandle::spawn(reap(child, exit_tx, Arc::clone(&shared))),
        ];
        Ok(Arc::new(Conn {
            shared,
            tx,
            next_id: AtomicU64::new(1),
            pid,
            exited: exit_rx,
            close: Mutex::new(Some(close_tx)),
            _tasks: tasks,
        }))
    }

    /// Why the connection is unusable, if it is.
    pub fn dead(&self) -> Option<String> {
        self.shared.pending().dead.clone()
    }

    /// Resolves when the server says its tool list changed.
    pub async fn list_changed(&self) {
        self.shared.list_changed.notified().await;
    }

    /// Resolves once the connection is unusable (the server exited or broke the protocol).
    pub async fn closed(&self) {
        let mut rx = self.shared.gone.subscribe();
        let _ = rx.wait_for(|gone| *gone).await;
    }

    /// Sends a notification (no answer).
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), CallError> {
        self.tx
            .send(wire::encode(None, method, &params))
            .await
            .map_err(|_| CallError::Broken(self.dead().unwrap_or_else(|| "the server's input is closed".into())))
    }

    /// Sends a request and waits at most `timeout` for its answer. If the answer does not
    /// come (timeout, or the caller drops this future because the turn was stopped) the server
    /// is told with `notifications/cancelled`.
    pub async fn request(&self, method: &str, params: Value, timeout: Duration) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.shared.pending();
            if let Some(why) = &p.dead {
                return Err(CallError::Broken(why.clone()));
            }
            if p.waiting.len() >= MAX_PENDING {
                return Err(CallError::Broken(format!(
                    "{MAX_PENDING} requests to MCP server {} are already waiting; try again later",
                    self.shared.server
                )));
            }
            p.waiting.insert(id, tx);
        }
        let mut guard = Inflight { conn: self, id, reason: "the call was stopped", done: false };
        if self.tx.send(wire::encode(Some(id), method, &params)).await.is_err() {
            guard.done = true;
            self.shared.pending().waiting.remove(&id);
            return Err(CallError::Broken(self.dead().unwrap_or_else(|| "the server's input is closed".into())));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => {
                guard.done = true;
                reply
            }
            Ok(Err(_)) => {
                guard.done = true;
                Err(CallError::Broken(self.dead().unwrap_or_else(|| "the connection closed".into())))
            }
            Err(_) => {
                guard.reason = "timed out";
                let stray = self.shared.pending().stray.clone();
                let mut msg = format!(
                    "MCP server {} did not answer {method} within {} s",
                    self.shared.server,
                    timeout.as_secs_f32()
                );
                if let Some(s) = stray {
                    msg.push_str(&format!(" ({s})"));
                }
                Err(CallError::TimedOut(msg))
            }
        }
    }

    /// Stops the server in order: close its stdin and wait, then SIGTERM and wait, then
    /// SIGKILL. Each wait is at most `grace`.
    pub async fn shutdown(&self, grace: Duration) {
        self.shared.fail(format!("MCP server {} was stopped", self.shared.server));
        if let Some(close) = self.close.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = close.send(());
        }
        let mut exited = self.exited.clone();
        for signal in [None, Some(rustix::process::Signal::TERM), Some(rustix::process::Signal::KILL)] {
            if let (Some(sig), Some(pid)) = (signal, self.pid.and_then(|p| rustix::process::Pid::from_raw(p as i32))) {
                // The whole group: what the server started goes too.
                let _ = rustix::process::kill_process_group(pid, sig);
            }
            if tokio::time::timeout(grace, exited.wait_for(Option::is_some)).await.is_ok() {
                return;
            }
        }
    }
}

/// Removes a request that will get no answer and tells the server to stop working on it.
struct Inflight<'a> {
    conn: &'a Conn,
    id: u64,
    reason: &'static str,
    done: bool,
}

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.conn.shared.pending().waiting.remove(&self.id);
        // Best effort: a full queue means the server is not reading anyway.
        let params = json!({"requestId": self.id, "reason": self.reason});
        let _ = self.conn.tx.try_send(wire::encode(None, "notifications/cancelled", &params));
    }
}

async fn write_loop(
    mut stdin: tokio::process::ChildStdin,
    mut rx: mpsc::Receiver<String>,
    mut close: oneshot::Receiver<()>,
    shared: Arc<Shared>,
) {
    loop {
        let line = tokio::select! {
            line = rx.recv() => line,
            _ = &mut close => None,
        };
        let Some(mut line) = line else { break };
        line.push('\n');
        if let Err(e) = stdin.write_all(line.as_bytes()).await {
            shared.fail(format!("cannot write to MCP server {}: {e}", shared.server));
            break;
        }
        let _ = stdin.flush().await;
    }
    // Dropping stdin closes it: the server's cue to exit.
}

/// Reads one line of at most `max` bytes into `buf` (without the newline). `Ok(None)` at the
/// end of input; an error names the limit when the line is longer.
pub async fn read_bounded<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<()>> {
    buf.clear();
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if buf.is_empty() { None } else { Some(()) });
        }
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a message longer than {max} bytes"),
            ));
        }
        buf.extend_from_slice(&chunk[..take]);
        r.consume(if end { take + 1 } else { take });
        if end {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Some(()));
        }
    }
}

async fn read_loop(stdout: tokio::process::ChildStdout, tx: mpsc::Sender<String>, shared: Arc<Shared>) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let server = shared.server.clone();
    let why = loop {
        match read_bounded(&mut r, &mut line, MAX_MESSAGE).await {
            Ok(None) => break format!("MCP server {server} closed its output (it exited or crashed)"),
            Err(e) => {
                break format!("MCP server {server} sent {e}; Chela reads at most {MAX_MESSAGE} bytes per message");
            }
            Ok(Some(())) if line.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(Some(())) => {}
        }
        match wire::decode(&line) {
            Ok(Incoming::Response { id, outcome }) => {
                let mut p = shared.pending();
                match id.as_u64().and_then(|n| p.waiting.remove(&n)) {
                    Some(waiter) => {
                        let _ = waiter.send(outcome.map_err(CallError::Rpc));
                    }
                    None => {
                        // Normal after a timeout or a cancellation (the answer crossed the notice).
                        chela_log::debug!("MCP server {server} answered request id {id}, which is not waiting");
                        p.stray =
                            Some(format!("it answered id {id}, which Chela did not ask for or no longer waits on"));
                    }
                }
            }
            Ok(Incoming::Notification { method, params }) => match method.as_str() {
                "notifications/tools/list_changed" => shared.list_changed.notify_one(),
                "notifications/message" => {
                    chela_log::info!("MCP server {server}: {}", bounded(&params.to_string()));
                }
                _ => {}
            },
            Ok(Incoming::Request { id, method }) => {
                // Chela declares no client capabilities; it answers pings and refuses the rest.
                let reply = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Chela does not offer {method}")}})
                };
                let _ = tx.try_send(reply.to_string());
            }
            Err(e) => break format!("MCP server {server}: {e}"),
        }
    };
    // After our own stop the end of output is expected, not news.
    if shared.pending().dead.is_none() {
        chela_log::warn!("{why}");
    }
    shared.fail(why);
}

fn bounded(s: &str) -> &str {
    match s.char_indices().nth(MAX_LOG_LINE) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

async fn log_stderr(stderr: tokio::process::ChildStderr, server: String) {
    let mut r = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        // Keep at most MAX_LOG_LINE bytes of a line; the rest of it is dropped.
        line.clear();
        loop {
            let chunk = match r.fill_buf().await {
                Ok([]) | Err(_) => return,
                Ok(c) => c,
            };
            let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            let room = MAX_LOG_LINE.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..take.min(room)]);
            r.consume(if end { take + 1 } else { take });
            if end {
                break;
            }
        }
        let text = String::from_utf8_lossy(&line);
        chela_log::info!("MCP server {server} (stderr): {}", text.trim_end());
    }
}

async fn reap(mut child: Child, exit: watch::Sender<Option<String>>, shared: Arc<Shared>) {
    let status = match child.wait().await {
        Ok(s) => s.to_string(),
        Err(e) => e.to_string(),
    };
    shared.fail(format!("MCP server {} exited ({status})", shared.server));
    let _ = exit.send(Some(status));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether process `pid` is still running (gone, or a zombie waiting to be reaped, is not).
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    }

    #[tokio::test]
    async fn a_connection_dropped_without_shutdown_ends_its_tasks_and_its_process() {
        let spawn = Spawn {
            server: "sleeper".into(),
            command: "sleep".into(),
            args: vec!["3600".into()],
            env: Vec::new(),
            cwd: None,
        };
        let conn = Conn::spawn(&spawn).unwrap();
        let pid = conn.pid.unwrap();
        let shared = Arc::downgrade(&conn.shared);
        assert!(running(pid));
        drop(conn);
        // The tasks hold `shared` until they end; the reaper's child goes with the last of them.
        // The timeout only turns a regression into a failure instead of a hang.
        tokio::time::timeout(Duration::from_secs(10), async {
            while shared.strong_count() > 0 || running(pid) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the reader, writer and reaper ended and the server was killed");
    }

    #[tokio::test]
    async fn lines_are_bounded() {
        let data = b"short\r\n0123456789\nlast".to_vec();
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        assert!(read_bounded(&mut r, &mut buf, 8).await.unwrap().is_some());
        assert_eq!(buf, b"short");
        let e = read_bounded(&mut r, &mut buf, 8).await.unwrap_err();
        assert!(e.to_string().contains("longer than 8 bytes"));
        let data = b"a\n\nlast".to_vec();
        let mut r = BufReader::new(&data[..]);
        assert!(read_bounded(&mut r, &mut buf, 8).await.unwrap().is_some());
        assert!(read_bounded(&mut r, &mut buf, 8).await.unwrap().is_some());
        assert!(buf.is_empty());
        assert!(read_bounded(&mut r, &mut buf, 8).await.unwrap().is_some());
        assert_eq!(buf, b"last");
        assert!(read_bounded(&mut r, &mut buf, 8).await.unwrap().is_none());
    }
}
