//! The abuse corpus of the MCP client: servers that send a line that is not JSON, a 50 MB
//! message, never answer, or answer with the wrong id. Each call through the real `chela`
//! binary gets a clear error naming what went wrong, within the configured time, and Chela
//! exits in order (no panic, no hang).
//!
//! The bad peer is `tests/mcp/fixtures/bad_peer.py` (Python standard library only).

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn peer() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/fixtures/bad_peer.py")
}

struct Ws {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Ws {
    fn new() -> Ws {
        let ws = Ws { dir: tempfile::tempdir().unwrap(), home: tempfile::tempdir().unwrap() };
        let mut toml = String::new();
        for mode in ["invalid-json", "huge", "silent", "wrong-id"] {
            let name = mode.replace('-', "_");
            toml.push_str(&format!(
                "[mcp.servers.{name}]\ncommand = \"python3\"\nargs = [{:?}, {mode:?}]\ntimeout_secs = 3\n\n",
                peer().display().to_string()
            ));
        }
        // One more, switched off: configured but never started.
        toml.push_str(&format!(
            "[mcp.servers.off]\ncommand = \"python3\"\nargs = [{:?}, \"silent\"]\nenabled = false\n",
            peer().display().to_string()
        ));
        fs::write(ws.path().join("chela.toml"), toml).unwrap();
        ws
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn run(&self, args: &[&str]) -> (Output, Duration) {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
        c.args(args).env_clear().env("HOME", self.home.path()).env("CHELA_HOME", self.path());
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = Instant::now();
        let out = c.output().expect("cannot run chela");
        (out, started.elapsed())
    }

    /// `chela cap call ID {}`: must fail cleanly with a message containing every one of `want`.
    fn call_fails(&self, id: &str, want: &[&str], within: Duration) {
        let (out, took) = self.run(&["cap", "call", id, "{}"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{id}: a clean failure, not a crash: {stderr}");
        for w in want {
            assert!(stderr.contains(w), "{id}: `{w}` missing from: {stderr}");
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(took < within, "{id} took {took:?}");
    }
}

#[test]
fn bad_mcp_servers_give_clear_tool_errors() {
    let ws = Ws::new();
    // Startup of 4 Python peers, the call, and an orderly stop: well under a minute each.
    let within = Duration::from_secs(60);
    ws.call_fails("mcp_invalid_json_go", &["MCP server invalid_json", "invalid JSON", "started again"], within);
    ws.call_fails(
        "mcp_huge_go",
        &["MCP server huge", "longer than 16777216 bytes", "reads at most 16777216 bytes"],
        within,
    );
    ws.call_fails("mcp_silent_go", &["MCP server silent did not answer tools/call within 3", "timeout_secs"], within);
    ws.call_fails(
        "mcp_wrong_id_go",
        &["MCP server wrong_id did not answer tools/call within 3", "which Chela did not ask for"],
        within,
    );
    // A server switched off is listed as such and has no tools.
    let (out, _) = ws.run(&["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("off  [stdio]  off (enabled = false)"), "{stdout}");
    for name in ["invalid_json", "huge", "silent", "wrong_id"] {
        assert!(
            stdout.contains(&format!("{name}  [stdio]  connected  era: 2025-06-18 (initialize)  tools: 1")),
            "{stdout}"
        );
    }
    ws.call_fails("mcp_off_go", &["no tool called `mcp_off_go`"], within);
}

#[test]
fn a_server_that_cannot_start_is_a_clear_error() {
    let ws = Ws::new();
    fs::write(ws.path().join("chela.toml"), "[mcp.servers.nope]\ncommand = \"/nonexistent/mcp\"\n").unwrap();
    let (out, _) = ws.run(&["mcp", "test", "nope"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("cannot start `/nonexistent/mcp` for MCP server nope"), "{stderr}");
    let (out, _) = ws.run(&["mcp", "test", "other"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no MCP server is called `other` (configured: nope)"));
    // A bad `connect` value is refused when the configuration is read.
    fs::write(ws.path().join("chela.toml"), "[mcp.servers.x]\ncommand = \"a\"\nconnect = \"sometimes\"\n").unwrap();
    let (out, _) = ws.run(&["mcp", "list"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("connect must be \"start\" or \"lazy\""));
}
