//! The linker script that release builds get from `startup-order.txt` (see `build.rs`): the
//! listed functions' sections in list order, and nothing lld could not read.

#[path = "../build/startup_order.rs"]
mod startup_order;

use startup_order::{linker_script, usable};

#[test]
fn the_script_places_the_listed_sections_first_in_list_order() {
    let list = "# a comment\n\n_start_c\n_ZN5chela4main17h*\n  unlikely._RNvCs*_3std5abort  \n";
    assert_eq!(
        linker_script(list, "glibc"),
        "SECTIONS {\n  .text : {\n    *(.text._start_c)\n    *(.text._ZN5chela4main17h*)\n    \
         *(.text.unlikely._RNvCs*_3std5abort)\n  }\n} INSERT BEFORE .fini;\n"
    );
}

#[test]
fn a_line_lld_could_not_read_is_left_out() {
    for bad in ["a)b", "two words", "x/y", "{", "a;b", "\"q\""] {
        assert!(!usable(bad), "{bad:?}");
        let script = linker_script(&format!("first\n{bad}\nlast\n"), "glibc");
        assert!(script.contains("*(.text.first)\n    *(.text.last)\n"), "{bad:?}: {script}");
    }
}

#[test]
fn every_name_in_the_committed_list_reaches_the_script() {
    let list = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/startup-order.txt")).unwrap();
    let names: Vec<&str> = list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert!(names.len() > 100, "the list has {} names", names.len());
    let dropped: Vec<&&str> = names.iter().filter(|n| !usable(n)).collect();
    assert!(dropped.is_empty(), "names the script would leave out: {dropped:?}");
    let unique: std::collections::HashSet<&&str> = names.iter().collect();
    for libc in ["glibc", "musl"] {
        assert_eq!(linker_script(&list, libc).matches("*(.text.").count(), unique.len(), "{libc}");
    }
    // Both C libraries have their section.
    for head in ["# Traced with glibc:", "# Traced with musl:"] {
        assert_eq!(list.lines().filter(|l| *l == head).count(), 1, "{head}");
    }
}

#[test]
fn the_build_s_own_libc_section_comes_first_and_a_name_goes_in_once() {
    let list = "# header\n# Traced with glibc:\ng1\nshared\n# Traced with musl:\nm1\nshared\nm2\n";
    let order = |libc| {
        let script = linker_script(list, libc);
        script
            .lines()
            .filter_map(|l| l.trim().strip_prefix("*(.text.")?.strip_suffix(')'))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(order("glibc"), ["g1", "shared", "m1", "m2"]);
    assert_eq!(order("musl"), ["m1", "shared", "m2", "g1"]);
    // A libc the list has no section for: the list in file order.
    assert_eq!(order("other"), ["g1", "shared", "m1", "m2"]);
}
