//! End-to-end tests: the real `chela` binary against the scripted fake LLM of `chela-testkit`.
//!
//! Every test gets its own workspace in a temporary folder and runs `chela` with a cleared
//! environment (see [`Ws::cmd`]), so nothing from the developer's shell (API keys, `CHELA_*`,
//! proxies, `~/.chela`) can leak in. Tests wait by polling with a deadline, never by sleeping
//! for a guessed time.
//!
//! One test binary with modules keeps link time down.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

// These two use the optional tool groups (files, memory, web, http): the default build's.
#[cfg(all(feature = "files", feature = "memory", feature = "web", feature = "http"))]
mod board;
mod broken_pipe;
mod cap;
#[cfg(feature = "files")]
mod chat;
mod compaction;
mod config;
mod crash;
mod ctrl_c;
mod doctor;
mod errors;
mod feishu;
mod first_request;
mod gateway;
mod interactive;
mod line_editor;
mod logs;
#[cfg(feature = "lua")]
mod lua;
mod mcp;
mod mcp_image;
#[cfg(feature = "memory")]
mod mcp_inspector;
#[cfg(feature = "memory")]
mod mcp_listen;
#[cfg(feature = "memory")]
mod mcp_serve;
mod mimiclaw_ws;
mod newuser;
mod openai_sdk;
mod owner;
mod proxy;
mod router;
mod run;
#[cfg(feature = "files")]
mod saved;
mod scheduler;
mod service;
mod sessions;
mod setup;
mod shared_session;
mod skills;
mod stop;

mod telegram;
#[cfg(target_os = "linux")]
mod trim;
mod usage;
mod voice_fake;
mod xiaozhi_mqtt;
mod xiaozhi_sdk;

use std::fs;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chela_testkit::FakeLlm;
use serde_json::Value;

/// The key the tests configure; `sk-ant-…` looks like a real one so masking is exercised.
pub const KEY: &str = "sk-ant-api03-e2e-test-key";
/// `gateway.token` of every daemon these tests start.
pub const GATEWAY_TOKEN: &str = "e2e-gateway-token";

/// The model name the tests configure, so requests can be checked for it.
pub const MODEL: &str = "e2e-model";

/// The two wire formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
}

impl Provider {
    pub const BOTH: [Provider; 2] = [Provider::Anthropic, Provider::OpenAi];

    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
        }
    }

    pub fn base_url(self, llm: &FakeLlm) -> String {
        match self {
            Provider::Anthropic => llm.anthropic_base_url(),
            Provider::OpenAi => llm.openai_base_url(),
        }
    }

    /// The path the client must post to.
    pub fn path(self) -> &'static str {
        match self {
            Provider::Anthropic => "/v1/messages",
            Provider::OpenAi => "/v1/chat/completions",
        }
    }
}

/// What a finished `chela` run left behind.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Panics with both streams shown unless the exit code is `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Out {
        assert_eq!(
            self.code(),
            Some(code),
            "exit status {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn expect_ok(&self) -> &Out {
        self.expect_code(0)
    }

    #[track_caller]
    pub fn stderr_has(&self, needle: &str) -> &Out {
        assert!(self.stderr.contains(needle), "stderr lacks {needle:?}:\n{}", self.stderr);
        self
    }

    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Out {
        assert!(self.stdout.contains(needle), "stdout lacks {needle:?}:\n{}", self.stdout);
        self
    }
}

/// A workspace in a temporary folder, and how to run `chela` on it.
pub struct Ws {
    dir: tempfile::TempDir,
    /// `HOME` for the child: a second empty folder, so `~/.chela` can never be the real one.
    home: tempfile::TempDir,
    /// Extra environment variables for every run.
    env: Vec<(String, String)>,
}

impl Ws {
    /// An empty workspace: no `chela.toml`, nothing else.
    pub fn empty() -> Ws {
        let dir = tempfile::tempdir().unwrap();
        // Private, as `chela` makes the workspaces it creates, so `chela doctor` has no reason to warn.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        Ws { dir, home: tempfile::tempdir().unwrap(), env: Vec::new() }
    }

    /// A workspace whose `chela.toml` points at `llm` with [`KEY`] and [`MODEL`], plus `extra`
    /// TOML lines under `[llm]` (e.g. `stream = false`).
    pub fn for_llm(provider: Provider, llm: &FakeLlm, extra: &str) -> Ws {
        let ws = Ws::empty();
        ws.write_config(&format!(
            "[llm]\nprovider = \"{}\"\nbase_url = \"{}\"\napi_key = \"{KEY}\"\nmodel = \"{MODEL}\"\n{extra}\n",
            provider.name(),
            provider.base_url(llm)
        ));
        ws
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Sets an environment variable for every later run.
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.push((name.to_owned(), value.to_owned()));
    }

    /// Writes `chela.toml`, private to the user as `chela doctor` wants it.
    pub fn write_config(&self, text: &str) {
        write_private(&self.path().join("chela.toml"), text);
    }

    /// `chela` with `args`, on this workspace, with nothing inherited from the test's environment
    /// but `PATH`. `CHELA_HOME` names the workspace; `--workspace` overrides it where a test
    /// passes one.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
        c.args(args).env_clear().env("HOME", self.home()).env("CHELA_HOME", self.path());
        // Every `chela run` gets a port of its own, so tests running at once never collide on
        // the default one; a test that talks to the gateway reads the port from stderr.
        c.env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0");
        // The gateway asks for its token on loopback too; tests that talk to it send this one.
        c.env("CHELA_GATEWAY__TOKEN", GATEWAY_TOKEN);
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    /// Runs `chela args` to the end, within [`RUN_LIMIT`].
    pub fn run(&self, args: &[&str]) -> Out {
        finish(self.cmd(args).spawn().expect("cannot start chela"), RUN_LIMIT)
    }

    /// `chela chat -m message` (plus `more` flags).
    pub fn chat(&self, message: &str, more: &[&str]) -> Out {
        let mut args = vec!["chat", "-m", message];
        args.extend_from_slice(more);
        self.run(&args)
    }

    pub fn session_path(&self, session: &str) -> PathBuf {
        self.path().join("sessions").join(format!("cli_{session}.jsonl"))
    }

    /// The messages in a session file, one JSON value per line.
    pub fn session(&self, session: &str) -> Vec<Value> {
        let text = fs::read_to_string(self.session_path(session))
            .unwrap_or_else(|e| panic!("cannot read session {session}: {e}"));
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad session line {l:?}: {e}")))
            .collect()
    }
}

/// The longest any single run may take before the test calls it hung: generous, because a run
/// may start a Python MCP peer, which takes seconds on a loaded machine.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

pub fn write_private(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Waits for `child` to exit (killing it after `limit`) and collects its output.
pub fn finish(mut child: Child, limit: Duration) -> Out {
    let stdout = Capture::start(child.stdout.take());
    let stderr = Capture::start(child.stderr.take());
    let status = wait_exit(&mut child, limit);
    Out { status, stdout: stdout.finish(), stderr: stderr.finish() }
}

/// Waits for `child` to exit; kills it and panics after `limit`.
pub fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chela did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls `cond` until it holds; panics with `what` after `limit`.
#[track_caller]
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A child's output stream, read on a thread as it arrives so a test can watch it live and
/// the child never blocks on a full pipe.
pub struct Capture {
    text: Arc<Mutex<String>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Capture {
    pub fn start(stream: Option<impl Read + Send + 'static>) -> Capture {
        let text = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&text);
        let thread = stream.map(|mut s| {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            })
        });
        Capture { text, thread }
    }

    /// What arrived so far.
    pub fn now(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Everything, once the stream has closed.
    pub fn finish(mut self) -> String {
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.now()
    }
}

/// The text of a message in either wire format or a session line (a string, or the
/// concatenated `text` blocks) as it was said: the turn's context Chela sends in front of the
/// newest message of a request is not part of it ([`sent_text_of`] keeps it).
pub fn text_of(message: &Value) -> String {
    chela_testkit::person_text(&sent_text_of(message)).to_owned()
}

/// The text of a message exactly as sent, with the turn's context where there is one.
pub fn sent_text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The body of the `i`th recorded request, as JSON.
#[track_caller]
pub fn body(llm: &FakeLlm, i: usize) -> Value {
    let reqs = llm.requests();
    let r = reqs.get(i).unwrap_or_else(|| panic!("only {} request(s) recorded, wanted #{i}", reqs.len()));
    r.json.clone().unwrap_or_else(|| panic!("request #{i} is not JSON: {}", String::from_utf8_lossy(&r.body)))
}

/// The conversation messages of a request body (without OpenAI's leading system message).
pub fn conversation(provider: Provider, body: &Value) -> Vec<Value> {
    let all = body["messages"].as_array().cloned().unwrap_or_default();
    match provider {
        Provider::Anthropic => all,
        Provider::OpenAi => all.into_iter().filter(|m| m["role"] != "system").collect(),
    }
}

/// The names of the tools a request offers.
pub fn tool_names(provider: Provider, body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .filter_map(|t| match provider {
            Provider::Anthropic => t["name"].as_str(),
            Provider::OpenAi => t["function"]["name"].as_str(),
        })
        .map(str::to_owned)
        .collect()
}
