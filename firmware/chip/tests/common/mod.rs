//! The test chains of `tests/fixtures/make-pki.sh`, for the pki and TLS tests and the pki bench.

use std::path::PathBuf;
use std::process::Command;

/// Runs make-pki.sh into `NAME` under cargo's scratch folder for tests and benches, remade on
/// each call (fresh keys; one fixed folder, so runs do not pile up), and returns the folder.
pub fn make_pki(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/make-pki.sh");
    let out = Command::new("sh").arg(script).arg(&dir).output().expect("sh runs");
    assert!(
        out.status.success(),
        "make-pki.sh failed (it needs the openssl CLI: apt-get install openssl): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}
