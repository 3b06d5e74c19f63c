//! What the `release-small` profile's link leaves out (shared by the build script and its test,
//! `tests/small_build.rs`).
//!
//! That profile is `panic = "abort"`: no frame is ever unwound, so the unwinding tables
//! (`.eh_frame`, its index `.eh_frame_hdr`, the landing pads' `.gcc_except_table`; 0.74 MB of
//! the binary; the prebuilt standard library keeps its own whatever the flags say, so
//! `-C force-unwind-tables=no` would not remove them all) are dead weight. A panic still prints its message and aborts; only
//! `RUST_BACKTRACE` gets the first frame alone, where a stripped binary printed bare addresses
//! anyway. Lua's errors are `longjmp`s and SQLite, ring and Lua are C: none of them reads the
//! tables. A build that unwinds must keep them (a panic would find no frame and abort), so the
//! tables go only when the profile is known to abort.
//!
//! Not taken: lld's `--icf=all` (fold functions with identical code) saves 47 KB but scatters the
//! start-up ordering's functions: 0.6 MiB more peak RSS in the e2e bench.

/// The profile whose link drops the tables; its `panic` must stay `"abort"` (a test checks
/// the workspace's `Cargo.toml`).
pub const PROFILE: &str = "release-small";

/// Added to the start-up ordering's script, lld's `INSERT` form: everything else keeps lld's
/// own layout.
pub const DISCARD_UNWIND_TABLES: &str = "SECTIONS {\n  /DISCARD/ : { *(.eh_frame) *(.eh_frame_hdr) \
     *(.gcc_except_table .gcc_except_table.*) }\n}\nINSERT AFTER .text;\n";

/// Whether this is a `release-small` build that aborts on panic. Cargo does not tell a build
/// script the profile's name or its panic strategy (`CARGO_CFG_PANIC` says "unwind" for a
/// profile set to abort), so the name is read from `OUT_DIR`
/// (`target/[TRIPLE/]PROFILE/build/PKG-HASH/out`), and an override back to unwinding, in the
/// environment (`CARGO_PROFILE_RELEASE_SMALL_PANIC`) or the flags (`-C panic=unwind`), keeps
/// the tables.
pub fn aborting_small_build(out_dir: &str, panic_override: Option<&str>, encoded_rustflags: &str) -> bool {
    let profile = std::path::Path::new(out_dir).ancestors().nth(3).and_then(|p| p.file_name());
    let flags: Vec<&str> = encoded_rustflags.split('\x1f').collect();
    let unwind_flag = flags.iter().enumerate().any(|(i, f)| {
        let value =
            if *f == "-C" { flags.get(i + 1).copied().unwrap_or("") } else { f.strip_prefix("-C").unwrap_or("") };
        value == "panic=unwind"
    });
    let unwinds = unwind_flag || panic_override.is_some_and(|p| p.trim() != "abort");
    profile.is_some_and(|p| p == PROFILE) && !unwinds
}
