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

/// The venv with the official `openai` Python SDK, made once as `openai-venv` under `tmp` (the
/// test's `CARGO_TARGET_TMPDIR`, so every test that checks a fake against the SDK shares it).
/// CI must be able to make it: a missing python3 or pip fails the test with what to install,
/// never skips it.
pub fn openai_python(tmp: &std::path::Path) -> PathBuf {
    use std::path::Path;
    use std::process::Command;
    let venv = tmp.join("openai-venv");
    let python = venv.join("bin/python");
    // Tests in other processes (nextest runs each test in its own) make the same venv: one
    // makes it under this lock while the others wait, then find it ready. The lock goes with
    // the file handle when this returns.
    let lock = std::fs::File::create(tmp.join("openai-venv.lock")).expect("cannot create the venv's lock file");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("cannot lock the venv's lock file");
    let ready = |p: &Path| Command::new(p).args(["-c", "import openai"]).status().is_ok_and(|s| s.success());
    if ready(&python) {
        return python;
    }
    let made = Command::new("python3").arg("-m").arg("venv").arg(&venv).status();
    assert!(
        made.is_ok_and(|s| s.success()),
        "this test needs python3 with venv (Debian: apt-get install python3 python3-venv); scripts/test.sh installs them"
    );
    let pip = Command::new(venv.join("bin/pip")).args(["install", "--quiet", "openai"]).status();
    assert!(pip.is_ok_and(|s| s.success()), "`pip install openai` failed in {}; it needs PyPI", venv.display());
    assert!(ready(&python), "the openai package does not import after installing it");
    python
}

/// The Python of the xiaozhi device simulator's venv (PyPI `xiaozhi-sdk`, pinned in
/// `tests/xiaozhi/requirements.txt`), installed under the workspace's `target/xiaozhi-peer` by
/// `tests/xiaozhi/install.sh` on first use (once per process; the script's lock and stamp make
/// it once per machine). Panics with the reason when the install fails: CI must be able to make
/// it, so a missing python3 or PyPI fails the test, never skips it.
pub fn xiaozhi_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let dest = repo_root().join("target/xiaozhi-peer");
            let ok = std::process::Command::new("bash")
                .arg(repo_root().join("tests/xiaozhi/install.sh"))
                .arg(&dest)
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                ok,
                "installing xiaozhi-sdk failed (needs python3 with venv, Debian python3-venv, and PyPI): run tests/xiaozhi/install.sh"
            );
            dest.join("venv/bin/python")
        })
        .clone()
}

/// The device driver the xiaozhi interop tests spawn with [`xiaozhi_python`].
pub fn xiaozhi_driver() -> PathBuf {
    repo_root().join("tests/xiaozhi/device.py")
}

/// The MQTT + UDP device driver (`tests/xiaozhi/mqtt_device.py`), run with [`xiaozhi_python`].
pub fn xiaozhi_mqtt_driver() -> PathBuf {
    repo_root().join("tests/xiaozhi/mqtt_device.py")
}
