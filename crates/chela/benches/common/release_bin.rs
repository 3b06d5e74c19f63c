//! Which `chela` binary a bench measures: `$CHELA_BIN`, else the first argument that is not a
//! flag (`cargo bench` passes `--bench`), else `target/release-small/chela` (or under
//! `$CARGO_TARGET_DIR`). Included by the benches that time the real binary.

use std::path::{Path, PathBuf};

pub fn chela_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CHELA_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::args().skip(1).find(|a| !a.starts_with("--")) {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|p| !p.is_empty()).map(PathBuf::from) {
        Some(t) if t.is_absolute() => t,
        Some(t) => root.join(t),
        None => root.join("target"),
    };
    target.join("release-small").join("chela")
}
