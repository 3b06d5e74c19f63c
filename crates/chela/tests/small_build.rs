//! When the build script drops the unwinding tables (`build/small.rs`): only for the
//! `release-small` profile, and only while it aborts on panic.

#[path = "../build/small.rs"]
mod small;

use small::{DISCARD_UNWIND_TABLES, PROFILE, aborting_small_build};

const NATIVE: &str = "/w/target/release-small/build/chela-0123abcd/out";
const CROSS: &str = "/w/target/x86_64-unknown-linux-musl/release-small/build/chela-0123abcd/out";

#[test]
fn the_small_profile_drops_the_tables_natively_and_for_a_target() {
    assert!(aborting_small_build(NATIVE, None, ""));
    assert!(aborting_small_build(CROSS, None, "-Ctarget-cpu=native"));
    assert!(aborting_small_build(NATIVE, Some("abort"), ""));
}

#[test]
fn other_profiles_keep_them() {
    for dir in [
        "/w/target/release/build/chela-0123abcd/out",
        "/w/target/debug/build/chela-0123abcd/out",
        "/w/target/x86_64-unknown-linux-musl/release/build/chela-0123abcd/out",
        "/w/release-small/target/bench/build/chela-0123abcd/out",
        "",
    ] {
        assert!(!aborting_small_build(dir, None, ""), "{dir}");
    }
}

#[test]
fn a_small_build_told_to_unwind_keeps_them() {
    assert!(!aborting_small_build(NATIVE, Some("unwind"), ""));
    assert!(!aborting_small_build(NATIVE, None, "-Cpanic=unwind"));
    assert!(!aborting_small_build(NATIVE, None, "-Copt-level=s\x1f-C\x1fpanic=unwind"));
    assert!(aborting_small_build(NATIVE, None, "-C\x1fpanic=abort"));
}

#[test]
fn the_workspace_small_profile_aborts_on_panic() {
    // Unwinding through a binary without its tables finds no frame and aborts: the profile must
    // keep `panic = "abort"` for as long as the build script drops them.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml")).unwrap();
    let manifest = chela::toml::parse(&text).unwrap();
    let panic = manifest["profile"][PROFILE].get("panic").and_then(|p| p.as_str());
    assert_eq!(panic, Some("abort"));
}

#[test]
fn the_small_profile_is_built_for_size_but_the_voice_codec_for_speed() {
    // "z" everywhere saves 0.70 MB; opus-rs at "z" encodes 20-40 % slower than at "s", at "s"
    // it is as fast as before and no bigger (docs/BENCHMARKS.md, "2026-12-06 (eighth round)").
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml")).unwrap();
    let manifest = chela::toml::parse(&text).unwrap();
    let profile = &manifest["profile"][PROFILE];
    assert_eq!(profile.get("opt-level").and_then(|o| o.as_str()), Some("z"));
    let codec = profile.get("package").and_then(|p| p.get("opus-rs")).and_then(|p| p.get("opt-level"));
    assert_eq!(codec.and_then(|o| o.as_str()), Some("s"));
}

#[test]
fn the_script_discards_the_three_unwinding_sections_and_nothing_else() {
    let kept: String = DISCARD_UNWIND_TABLES.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        kept,
        "SECTIONS { /DISCARD/ : { *(.eh_frame) *(.eh_frame_hdr) *(.gcc_except_table .gcc_except_table.*) } } \
         INSERT AFTER .text;"
    );
}
