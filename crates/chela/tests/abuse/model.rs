//! The escape and abuse corpus for the model side: a hostile model server stays a bounded cost.
//!
//! Each case runs the real `chela` binary against the fake LLM in a hostile mode and holds it
//! to a time bound, a memory bound (the child's own peak RSS, `VmHWM`) and a clear error.
//! Every case here failed before its fix: 2 million empty text blocks took 271 MB
//! and 26 s; 300,000 empty tool calls took 356 MB, over 120 s of CPU, wrote a 65 MB session
//! line and ignored Ctrl-C for 69 s; a server that pings forever never timed out.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, Step};

/// Far above what chela needs (about 10 MB) and far below what the floods took before.
const MAX_RSS_KB: i64 = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Anthropic,
    OpenAi,
}

const BOTH: [Format; 2] = [Format::Anthropic, Format::OpenAi];

/// A workspace configured for the fake.
struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    fn new(format: Format, llm: &FakeLlm, extra: &str) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let (name, url) = match format {
            Format::Anthropic => ("anthropic", llm.anthropic_base_url()),
            Format::OpenAi => ("openai", llm.openai_base_url()),
        };
        let config = format!("[llm]\nprovider = \"{name}\"\nbase_url = \"{url}\"\napi_key = \"k\"\n{extra}\n");
        std::fs::write(dir.path().join("chela.toml"), config).unwrap();
        std::fs::set_permissions(dir.path().join("chela.toml"), std::fs::Permissions::from_mode(0o600)).unwrap();
        Ws { dir }
    }

    fn spawn(&self, message: &str) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_chela"))
            .args(["chat", "-m", message])
            .env_clear()
            .env("HOME", self.dir.path())
            .env("CHELA_HOME", self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let read = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = r.read_to_string(&mut s);
                s
            })
        };
        let stdout = read(Box::new(child.stdout.take().unwrap()));
        let stderr = read(Box::new(child.stderr.take().unwrap()));
        Running { child, stdout, stderr, started: Instant::now() }
    }

    fn session_bytes(&self) -> u64 {
        std::fs::metadata(self.dir.path().join("sessions/cli_local.jsonl")).map_or(0, |m| m.len())
    }
}

struct Running {
    child: Child,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
    started: Instant,
}

#[derive(Debug)]
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
    max_rss_kb: i64,
}

impl Running {
    /// Waits for the exit within `limit` (else kills it and fails the test), with the child's
    /// peak memory: `VmHWM` of its own address space, read every few milliseconds while it runs.
    /// (`wait4`'s `ru_maxrss` would count this test process too: the child shares its memory
    /// between the spawn and the exec.) The high-water mark only grows, so a read after the peak
    /// sees it; a flood takes far longer than one polling gap to grow.
    fn finish(mut self, limit: Duration) -> Ended {
        let status_path = format!("/proc/{}/status", self.child.id());
        let deadline = Instant::now() + limit;
        let mut max_rss_kb = 0;
        loop {
            if let Some(kb) = std::fs::read_to_string(&status_path).ok().as_deref().and_then(vm_hwm_kb) {
                max_rss_kb = max_rss_kb.max(kb);
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                return Ended {
                    code: status.code(),
                    stdout: self.stdout.join().unwrap(),
                    stderr: self.stderr.join().unwrap(),
                    took: self.started.elapsed(),
                    max_rss_kb,
                };
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("chela did not end within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends SIGINT, as a terminal does on Ctrl-C.
    #[allow(unsafe_code)]
    fn interrupt(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
        let rc = unsafe { libc::kill(pid, libc::SIGINT) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }
}

impl Ended {
    #[track_caller]
    fn failed_with(&self, needle: &str) -> &Ended {
        assert_eq!(self.code, Some(1), "{self:#?}");
        assert_eq!(self.stdout, "", "{self:#?}");
        assert!(self.stderr.contains(needle), "stderr lacks {needle:?}: {self:#?}");
        self
    }

    #[track_caller]
    fn within(&self, time: Duration) -> &Ended {
        // The figures, for docs/BENCHMARKS.md (`--nocapture` shows them).
        eprintln!("  took {:?}, peak RSS {} KiB", self.took, self.max_rss_kb);
        assert!(self.took < time, "took {:?}, over {time:?}: {self:#?}", self.took);
        assert!(self.max_rss_kb < MAX_RSS_KB, "peak RSS {} KiB: {self:#?}", self.max_rss_kb);
        self
    }
}

/// The `VmHWM:` line of a `/proc/<pid>/status`, in KiB.
fn vm_hwm_kb(status: &str) -> Option<i64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Polls `cond` until it holds, within `limit`.
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn two_million_empty_text_blocks_are_refused_quickly_and_small() {
    let llm = FakeLlm::start(vec![Step::empty_blocks(2_000_000)]);
    let ws = Ws::new(Format::Anthropic, &llm, "");
    let end = ws.spawn("hi").finish(Duration::from_secs(20));
    end.failed_with("more than 256 content blocks").failed_with("will not hold").within(Duration::from_secs(5));
    assert_eq!(llm.requests().len(), 1, "a bound is not retried");
}

#[test]
fn three_hundred_thousand_empty_tool_calls_are_refused_quickly_and_small() {
    for format in BOTH {
        for stream in [true, false] {
            let llm = FakeLlm::start(vec![Step::empty_tool_calls(300_000)]);
            let ws = Ws::new(format, &llm, if stream { "" } else { "stream = false" });
            let end = ws.spawn("hi").finish(Duration::from_secs(30));
            // A whole body that large is refused by its size before its blocks are counted.
            let why = if stream { "more than 64 tool calls" } else { "will not hold" };
            end.failed_with(why).failed_with("will not hold").within(Duration::from_secs(10));
            assert!(ws.session_bytes() < 64 * 1024, "{format:?} stream={stream}: session {} bytes", ws.session_bytes());
        }
    }
}

#[test]
fn a_server_that_pings_forever_ends_at_the_deadline() {
    for format in BOTH {
        for stream in [true, false] {
            let llm = FakeLlm::start(vec![Step::pings_forever().chunk_delay_ms(100)]);
            let extra = format!("deadline_secs = 2\n{}", if stream { "" } else { "stream = false" });
            let ws = Ws::new(format, &llm, &extra);
            let end = ws.spawn("hi").finish(Duration::from_secs(20));
            end.failed_with("did not finish its answer within 2 s").failed_with("llm.deadline_secs");
            assert!(end.took >= Duration::from_secs(2), "{format:?} stream={stream}: {end:#?}");
            end.within(Duration::from_secs(5));
        }
    }
}

#[test]
fn a_slow_trickle_ends_at_the_deadline() {
    // Each byte comes well within the idle timeout; the whole would take minutes.
    let llm = FakeLlm::start(vec![Step::trickle("a slow answer ".repeat(200)).chunk_delay_ms(20)]);
    let ws = Ws::new(Format::OpenAi, &llm, "deadline_secs = 2\ntimeout_secs = 1");
    let end = ws.spawn("hi").finish(Duration::from_secs(20));
    end.failed_with("did not finish its answer within 2 s").within(Duration::from_secs(5));
}

// A guard rather than a regression test: this one passed before too (the old drain loop was
// inside the cancellable future). It keeps the exchange's driver yielding between pieces.
#[test]
fn ctrl_c_is_honoured_within_a_second_while_the_server_floods_real_time() {
    for format in BOTH {
        // Pings as fast as the socket takes them: nothing ends the reply but the person.
        let llm = FakeLlm::start(vec![Step::pings_forever()]);
        let ws = Ws::new(format, &llm, "");
        let run = ws.spawn("hi");
        wait_for("the model request", Duration::from_secs(10), || llm.requests().len() == 1);
        // Let the flood run a while, so the client is busy with it.
        std::thread::sleep(Duration::from_millis(300));
        let sent = Instant::now();
        run.interrupt();
        let end = run.finish(Duration::from_secs(10));
        assert!(sent.elapsed() < Duration::from_secs(1), "{format:?}: Ctrl-C took {:?}", sent.elapsed());
        assert_eq!(end.code, Some(130), "{format:?}: {end:#?}");
        assert!(end.max_rss_kb < MAX_RSS_KB, "{end:#?}");
    }
}

#[test]
fn ctrl_c_is_honoured_within_a_second_during_a_tool_call_flood() {
    let llm = FakeLlm::start(vec![Step::empty_tool_calls(300_000)]);
    let ws = Ws::new(Format::Anthropic, &llm, "");
    let run = ws.spawn("hi");
    wait_for("the model request", Duration::from_secs(10), || llm.requests().len() == 1);
    // Once the flood is sent and chela has hung up, what is left is chela's own work on the
    // reply. Before the fix that was over a minute of CPU outside any cancellable await, and
    // Ctrl-C went unheard for 69 s; now the reply was refused at its 65th call long before.
    wait_for("chela to hang up", Duration::from_secs(120), || llm.open_connections() == 0);
    let sent = Instant::now();
    run.interrupt();
    let end = run.finish(Duration::from_secs(90));
    // Cancelled, or already ended by the bound: either way at once, and small.
    assert!(sent.elapsed() < Duration::from_secs(1), "Ctrl-C took {:?}", sent.elapsed());
    assert!(matches!(end.code, Some(130 | 1)), "{end:#?}");
    assert!(end.max_rss_kb < MAX_RSS_KB, "{end:#?}");
}
