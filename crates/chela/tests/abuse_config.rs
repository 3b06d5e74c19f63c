//! The permanent escape and abuse corpus for settings, secrets and writers that run at once.
//!
//! Every test runs the real `chela` binary on its own temporary workspace with a cleared
//! environment, and each item failed before the fix it guards: a secret shown in some output
//! path, a change lost to a parallel writer, a file that stopped every command.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A workspace in a temporary folder and the environment `chela` runs with.
struct Ws {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Ws {
    fn new() -> Ws {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        Ws { dir, home: tempfile::tempdir().unwrap(), env: Vec::new() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) {
        let path = self.path().join(name);
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
        c.args(args).env_clear().env("HOME", self.home.path()).env("CHELA_HOME", self.path());
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        Run::from(self.cmd(args).output().expect("cannot run chela"))
    }

    /// Runs `chela args` with `input` on standard input.
    fn run_with_stdin(&self, args: &[&str], input: &str) -> Run {
        let mut child = self.cmd(args).stdin(Stdio::piped()).spawn().expect("cannot run chela");
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        Run::from(child.wait_with_output().unwrap())
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    #[track_caller]
    fn ok(&self) -> &Run {
        assert_eq!(self.code, Some(0), "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }

    #[track_caller]
    fn failed(&self) -> &Run {
        assert_eq!(self.code, Some(1), "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }

    /// Neither stream shows `secret`.
    #[track_caller]
    fn hides(&self, secret: &str) -> &Run {
        assert!(
            !self.stdout.contains(secret) && !self.stderr.contains(secret),
            "`{secret}` was shown:\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    fn says(&self, needle: &str) -> &Run {
        assert!(
            self.stdout.contains(needle) || self.stderr.contains(needle),
            "expected `{needle}`:\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

// ---- Writers that run at once -------------------------------------------------------------

/// Ten processes set ten different keys at the same moment: all ten are kept.
#[test]
fn parallel_config_sets_of_different_keys_are_all_kept() {
    let ws = Ws::new();
    let keys = [
        ("llm.model", "m-parallel"),
        ("llm.max_tokens", "1234"),
        ("llm.max_retries", "2"),
        ("llm.timeout_secs", "77"),
        ("agent.max_iterations", "9"),
        ("agent.max_tool_calls", "7"),
        ("search.max_results", "3"),
        ("http.timeout_secs", "11"),
        ("memory.recent_days", "5"),
        ("timezone", "Europe/Berlin"),
    ];
    let children: Vec<_> =
        keys.iter().map(|(k, v)| ws.cmd(&["config", "set", k, v]).spawn().expect("cannot run chela")).collect();
    for child in children {
        Run::from(child.wait_with_output().unwrap()).ok();
    }
    for (k, v) in keys {
        let got = ws.run(&["config", "get", k]);
        got.ok();
        assert_eq!(got.stdout.trim(), v, "{k} was lost");
    }
}

/// Twenty processes each store a fact at the same moment: twenty entries, twenty ids.
#[test]
#[cfg(feature = "memory")]
fn parallel_memory_stores_from_processes_are_all_kept() {
    let ws = Ws::new();
    let children: Vec<_> = (0..20)
        .map(|i| {
            let args = format!("{{\"content\":\"process fact {i}\"}}");
            ws.cmd(&["cap", "call", "memory_store", &args]).spawn().expect("cannot run chela")
        })
        .collect();
    let mut ids: Vec<String> = children
        .into_iter()
        .map(|c| {
            let run = Run::from(c.wait_with_output().unwrap());
            run.ok();
            run.stdout.trim().strip_prefix("stored as ").expect("stored as ID").to_owned()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 20, "{ids:?}");
    let text = fs::read_to_string(ws.path().join("memory/entries.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 20, "{text}");
    for i in 0..20 {
        assert!(text.contains(&format!("\"process fact {i}\"")), "fact {i} lost:\n{text}");
    }
}
