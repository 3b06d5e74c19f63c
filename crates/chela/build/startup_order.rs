//! The start-up ordering's linker script, made from `startup-order.txt` (shared by the build
//! script and its test, `tests/startup_order.rs`).

/// The linker script that puts the listed functions' sections first in `.text`, in list order.
///
/// `INSERT` keeps lld's own layout for everything else: the sections no pattern names are
/// orphans of the same name and follow the listed ones in the same output section. A section
/// matched by two patterns goes with the first.
pub fn linker_script(list: &str) -> String {
    let mut out = String::from("SECTIONS {\n  .text : {\n");
    for name in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if usable(name) {
            out.push_str(&format!("    *(.text.{name})\n"));
        }
    }
    out.push_str("  }\n} INSERT BEFORE .fini;\n");
    out
}

/// Whether a list line can go into the script as it is: only what a mangled name holds (and the
/// glob's `*`). Another character could make the script unreadable to lld and fail the link,
/// where a stale name only costs resident memory.
pub fn usable(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.$*".contains(&b))
}
