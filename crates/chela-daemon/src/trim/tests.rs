use super::*;

/// One smaps entry as the kernel writes it (6.x): the header, then the counters, `VmFlags` last.
/// `[range, perms, inode, path]`, `[Rss, Anonymous, Swap]` in kB, the `VmFlags`.
fn entry([range, perms, inode, path]: [&str; 4], [rss, anon, swap]: [u64; 3], flags: &str) -> String {
    format!(
        "{range} {perms} 00002000 fe:00 {inode}                     {path}\n\
         Size:                160 kB\nKernelPageSize:        4 kB\nMMUPageSize:           4 kB\n\
         Rss:             {rss:>6} kB\nPss:                  10 kB\nPss_Dirty:             0 kB\n\
         Shared_Clean:        100 kB\nShared_Dirty:          0 kB\nPrivate_Clean:        60 kB\n\
         Private_Dirty:         0 kB\nReferenced:          160 kB\nAnonymous:       {anon:>6} kB\n\
         KSM:                   0 kB\nLazyFree:              0 kB\nAnonHugePages:         0 kB\n\
         ShmemPmdMapped:        0 kB\nFilePmdMapped:         0 kB\nShared_Hugetlb:        0 kB\n\
         Private_Hugetlb:       0 kB\nSwap:            {swap:>6} kB\nSwapPss:               0 kB\n\
         Locked:                0 kB\nTHPeligible:           0\nVmFlags: {flags} \n"
    )
}

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

fn r(start: usize, end: usize) -> Range<usize> {
    start..end
}

#[test]
fn clean_read_only_file_mappings_are_taken() {
    let text = entry(["7f0000000000-7f0000028000", "r--p", "1234", LIBC], [160, 0, 0], "rd mr mw me sd")
        + &entry(["7f0000028000-7f00001b0000", "r-xp", "1234", LIBC], [1200, 0, 0], "rd ex mr mw me sd")
        + &entry(["7f00001b0000-7f00001b1000", "---p", "1234", LIBC], [0, 0, 0], "mr mw me sd");
    assert_eq!(droppable(&text), [r(0x7f00_0000_0000, 0x7f00_0002_8000), r(0x7f00_0002_8000, 0x7f00_001b_0000)]);
}

#[test]
fn nothing_with_a_copied_page_write_permission_or_no_file_is_ever_taken() {
    let refused = [
        // Writable: the process may have written any page of it.
        entry(["7f0000200000-7f0000202000", "rw-p", "1234", LIBC], [8, 0, 0], "rd wr mr mw me ac sd"),
        // Read-only now but relocated at start (RELRO): its copied pages are the only right ones.
        entry(["7f0000300000-7f0000304000", "r--p", "1234", LIBC], [16, 4, 0], "rd mr mw me ac sd"),
        // A page copied on write that went to swap counts there, not as anonymous.
        entry(["7f0000400000-7f0000404000", "r--p", "1234", LIBC], [12, 0, 4], "rd mr mw me sd"),
        // A breakpoint written into code: anonymous pages in an r-x mapping.
        entry(["7f0000500000-7f0000510000", "r-xp", "1234", LIBC], [64, 4, 0], "rd ex mr mw me sd"),
        // Not files.
        entry(["7ffd00000000-7ffd00021000", "rw-p", "0", "[stack]"], [40, 40, 0], "rd wr mr mw me gd ac"),
        entry(["7ffd00100000-7ffd00102000", "r-xp", "0", "[vdso]"], [8, 0, 0], "rd ex mr mw me de sd"),
        entry(["7ffd00200000-7ffd00204000", "r--p", "0", "[vvar]"], [4, 0, 0], "rd mr pf io de dd sd"),
        entry(["7f0000600000-7f0000610000", "r--p", "0", ""], [64, 0, 0], "rd mr mw me sd"),
        // The file is gone: what the kernel would read back is no longer the file's name.
        entry(["7f0000700000-7f0000710000", "r-xp", "99", "/usr/bin/chela (deleted)"], [64, 0, 0], "rd ex mr mw me sd"),
        // Shared, device and memfd mappings.
        entry(["7f0000800000-7f0000810000", "r--s", "77", "/var/tmp/shared"], [64, 0, 0], "rd mr me ms sd"),
        entry(["7f0000900000-7f0000910000", "r--p", "5", "/dev/zero"], [64, 0, 0], "rd mr mw me sd"),
        entry(["7f0000a00000-7f0000a10000", "r--p", "6", "/memfd:buffer"], [64, 0, 0], "rd mr mw me sd"),
        // Locked pages stay.
        entry(["7f0000b00000-7f0000b10000", "r--p", "1234", LIBC], [64, 0, 0], "rd mr mw me lo sd"),
        // Nothing resident: nothing to give back.
        entry(["7f0000c00000-7f0000c10000", "r--p", "1234", LIBC], [0, 0, 0], "rd mr mw me sd"),
    ];
    for e in &refused {
        assert_eq!(droppable(e), [], "{e}");
    }
    // Among others, and next to a clean one that is taken.
    let clean = entry(["7f0000d00000-7f0000d10000", "r--p", "1234", LIBC], [64, 0, 0], "rd mr mw me sd");
    let all: String = refused.iter().flat_map(|e| [e.as_str(), clean.as_str()]).collect();
    assert_eq!(droppable(&all), vec![r(0x7f00_00d0_0000, 0x7f00_00d1_0000); refused.len()]);
}

#[test]
fn a_mapping_cut_short_or_with_unreadable_counters_is_left_alone() {
    let whole = entry(["7f0000000000-7f0000028000", "r--p", "1234", LIBC], [160, 0, 0], "rd mr mw me sd");
    // Every cut before `VmFlags` (the read's bound hit mid-mapping) takes nothing.
    let flags_at = whole.find("VmFlags").unwrap();
    for cut in 0..flags_at {
        assert_eq!(droppable(&whole[..cut]), [], "cut at {cut}: {:?}", &whole[..cut]);
    }
    for (from, to) in
        [("Anonymous:            0 kB", "Anonymous:            0"), ("Swap:                 0 kB", "Swap: x kB")]
    {
        let bad = whole.replace(from, to);
        assert_ne!(bad, whole);
        assert_eq!(droppable(&bad), [], "{bad}");
    }
    let no_anon: String = whole.lines().filter(|l| !l.starts_with("Anonymous:")).map(|l| format!("{l}\n")).collect();
    assert_eq!(droppable(&no_anon), []);
    assert_eq!(droppable("garbage\n\n7f-\nzz-yy r--p 0 0 1 /x\n"), []);
}

#[test]
fn a_path_with_spaces_is_read_whole() {
    let text = entry(["7f0000000000-7f0000001000", "r--p", "42", "/opt/my apps/lib.so"], [4, 0, 0], "rd mr mw me sd")
        + &entry(["7f0000001000-7f0000002000", "r--p", "42", "/opt/my apps/x (deleted)"], [4, 0, 0], "rd mr mw me sd");
    assert_eq!(droppable(&text), [r(0x7f00_0000_0000, 0x7f00_0000_1000)]);
}

#[test]
fn the_count_is_bounded() {
    let many: String = (0..MAX_MAPPINGS + 10)
        .map(|i| {
            let start = 0x7f00_0000_0000 + i * 0x1000;
            entry([&format!("{start:x}-{:x}", start + 0x1000), "r--p", "1", LIBC], [4, 0, 0], "rd mr mw me sd")
        })
        .collect();
    assert_eq!(droppable(&many).len(), MAX_MAPPINGS);
}

/// The real thing on this test process: the trim runs, drops mappings, and the code and constant
/// data it dropped read back the same.
#[test]
fn a_trim_of_this_process_drops_pages_and_changes_nothing_it_reads() {
    static TABLE: [u64; 512] = {
        let mut t = [0u64; 512];
        let mut i = 0;
        while i < 512 {
            t[i] = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            i += 1;
        }
        t
    };
    let sum = |t: &[u64]| t.iter().fold(0u64, |a, &x| a.wrapping_add(x).rotate_left(7));
    let before = sum(std::hint::black_box(&TABLE));
    let done = trim().unwrap();
    assert!(done.mappings > 0, "{done:?}");
    assert!(done.rss_before_kib > 0 && done.rss_after_kib > 0, "{done:?}");
    assert_eq!(sum(std::hint::black_box(&TABLE)), before);
    assert_eq!(format!("{:x}", 255), "ff");
}
