//! The real MCP peers that Chela's MCP tests and benchmarks run (PyPI's `mcp` SDK, its
//! fixture server, mcp-server-time, npm's server-everything), installed under the workspace's
//! `target/mcp-peers` by `tests/mcp/install-peers.sh` on first use. The script takes a lock
//! and keeps a stamp, so tests in parallel and later runs install once.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The repository's root (this crate lives in `crates/chela-testkit`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The installed peers' folder, after installing them if needed (once per process). Panics
/// with the reason when the install fails: a test without its peers cannot mean anything.
pub fn mcp_peers() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dest = repo_root().join("target/mcp-peers");
        let ok = std::process::Command::new("bash")
            .arg(repo_root().join("tests/mcp/install-peers.sh"))
            .arg(&dest)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "installing the MCP test peers failed (needs python3 with venv, npm, and the registries)");
        dest
    })
    .clone()
}

/// The Python of the peers' venv (it has the `mcp` SDK).
pub fn mcp_python() -> String {
    mcp_peers().join("venv/bin/python").display().to_string()
}
