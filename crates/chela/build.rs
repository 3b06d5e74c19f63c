//! Link options for the `chela` binaries.
//!
//! Packed relative relocations (`DT_RELR`): a position-independent executable carries one
//! 24-byte `R_X86_64_RELATIVE` entry for every pointer in its read-only data (vtables, string
//! tables, the TLS root certificates), 212 KiB of the binary; packed, they take a few KiB. The
//! dynamic loader applies them at start-up either way. glibc understands the packed form from
//! 2.36 on and names that in the version `GLIBC_ABI_DT_RELR`, which the linker then requires;
//! so the option is only passed when building for the machine's own glibc and that glibc
//! defines the version: a binary built on an older system keeps the plain table and runs
//! there. A static musl build (`--target x86_64-unknown-linux-musl`, the Docker image and the
//! released binary) relocates itself at start with the musl that Rust bundles, which reads the
//! packed form since musl 1.2.4 (Rust 1.95 bundles 1.2.5), so it gets the option too: 229 KB
//! less file and 0.3 MiB less resident at idle. See docs/BENCHMARKS.md, "Binary size
//! and idle RSS".

use std::path::Path;

/// Where Debian, Fedora and Arch keep the C library.
const LIBC_PATHS: &[&str] = &[
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/aarch64-linux-gnu/libc.so.6",
    "/usr/lib/aarch64-linux-gnu/libc.so.6",
    "/lib64/libc.so.6",
    "/usr/lib64/libc.so.6",
    "/usr/lib/libc.so.6",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    let linux = var("CARGO_CFG_TARGET_OS") == "linux";
    let env = var("CARGO_CFG_TARGET_ENV");
    // musl targets link statically unless told not to (`CARGO_CFG_TARGET_FEATURE` leaves
    // `crt-static` out, so the flags are what says it). A dynamic musl build keeps the plain
    // table: the system's musl may predate 1.2.4.
    let static_musl = env == "musl" && !var("CARGO_ENCODED_RUSTFLAGS").contains("-crt-static");
    if linux && (static_musl || (native && env == "gnu" && glibc_has_relr())) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc defines `GLIBC_ABI_DT_RELR` (glibc 2.36 and later).
fn glibc_has_relr() -> bool {
    const NEEDLE: &[u8] = b"GLIBC_ABI_DT_RELR";
    LIBC_PATHS
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .take(1)
        .any(|p| std::fs::read(p).is_ok_and(|bytes| bytes.windows(NEEDLE.len()).any(|w| w == NEEDLE)))
}
