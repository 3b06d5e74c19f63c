//! The start-up ordering's linker script, made from `startup-order.txt` (shared by the build
//! script and its test, `tests/startup_order.rs`).

/// What starts each C library's section of the list (`# Traced with glibc:`).
pub const SECTION_HEAD: &str = "# Traced with ";

/// The linker script that puts the listed functions' sections first in `.text`, in list order,
/// the section traced with `libc` (`glibc` or `musl`) before the other: its exact generic
/// instances and C functions are this build's, and its idle-first order is what the build's
/// trim brings back. A name listed twice goes in once, where it first comes.
///
/// `INSERT` keeps lld's own layout for everything else: the sections no pattern names are
/// orphans of the same name and follow the listed ones in the same output section. A section
/// matched by two patterns goes with the first.
pub fn linker_script(list: &str, libc: &str) -> String {
    let mut out = String::from("SECTIONS {\n  .text : {\n");
    let mut seen = std::collections::HashSet::new();
    for name in own_first(list, libc).filter(|name| seen.insert(*name)) {
        if usable(name) {
            out.push_str(&format!("    *(.text.{name})\n"));
        }
    }
    out.push_str("  }\n} INSERT BEFORE .fini;\n");
    out
}

/// The list's names, the section for `libc` first, then the others in file order (a name
/// before any section head goes with the others).
fn own_first<'a>(list: &'a str, libc: &'a str) -> impl Iterator<Item = &'a str> {
    let names = |own: bool| {
        let mut section = None;
        list.lines().map(str::trim).filter(move |line| {
            if let Some(head) = line.strip_prefix(SECTION_HEAD) {
                section = head.split([':', ' ']).next();
                return false;
            }
            !line.is_empty() && !line.starts_with('#') && (section == Some(libc)) == own
        })
    };
    names(true).chain(names(false))
}

/// Whether a list line can go into the script as it is: only what a mangled name holds (and the
/// glob's `*`). Another character could make the script unreadable to lld and fail the link,
/// where a stale name only costs resident memory.
pub fn usable(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.$*".contains(&b))
}
