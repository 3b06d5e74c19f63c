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
const EXE: &str = "/usr/local/bin/chela";

fn r(start: usize, end: usize) -> Range<usize> {
    start..end
}

#[test]
fn clean_read_only_file_mappings_are_taken() {
    let text = entry(["7f0000000000-7f0000028000", "r--p", "1234", LIBC], [160, 0, 0], "rd mr mw me sd")
        + &entry(["7f0000028000-7f00001b0000", "r-xp", "1234", LIBC], [1200, 0, 0], "rd ex mr mw me sd")
        + &entry(["7f00001b0000-7f00001b1000", "---p", "1234", LIBC], [0, 0, 0], "mr mw me sd");
    assert_eq!(droppable(&text, EXE), [r(0x7f00_0000_0000, 0x7f00_0002_8000), r(0x7f00_0002_8000, 0x7f00_001b_0000)]);
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
        entry(
            ["7f0000700000-7f0000710000", "r-xp", "99", "/usr/local/bin/chela (deleted)"],
            [64, 0, 0],
            "rd ex mr mw me sd",
        ),
        // Shared, device and memfd mappings.
        entry(["7f0000800000-7f0000810000", "r--s", "77", "/var/tmp/libshared.so"], [64, 0, 0], "rd mr me ms sd"),
        entry(["7f0000900000-7f0000910000", "r--p", "5", "/dev/zero"], [64, 0, 0], "rd mr mw me sd"),
        entry(["7f0000a00000-7f0000a10000", "r--p", "6", "/memfd:buffer"], [64, 0, 0], "rd mr mw me sd"),
        // Locked pages stay.
        entry(["7f0000b00000-7f0000b10000", "r--p", "1234", LIBC], [64, 0, 0], "rd mr mw me lo sd"),
        // Nothing resident: nothing to give back.
        entry(["7f0000c00000-7f0000c10000", "r--p", "1234", LIBC], [0, 0, 0], "rd mr mw me sd"),
    ];
    for e in &refused {
        assert_eq!(droppable(e, EXE), [], "{e}");
    }
    // Among others, and next to a clean one that is taken.
    let clean = entry(["7f0000d00000-7f0000d10000", "r--p", "1234", LIBC], [64, 0, 0], "rd mr mw me sd");
    let all: String = refused.iter().flat_map(|e| [e.as_str(), clean.as_str()]).collect();
    assert_eq!(droppable(&all, EXE), vec![r(0x7f00_00d0_0000, 0x7f00_00d1_0000); refused.len()]);
}

#[test]
fn a_mapping_cut_short_or_with_unreadable_counters_is_left_alone() {
    let whole = entry(["7f0000000000-7f0000028000", "r--p", "1234", LIBC], [160, 0, 0], "rd mr mw me sd");
    // Every cut before `VmFlags` (the read's bound hit mid-mapping) takes nothing.
    let flags_at = whole.find("VmFlags").unwrap();
    for cut in 0..flags_at {
        assert_eq!(droppable(&whole[..cut], EXE), [], "cut at {cut}: {:?}", &whole[..cut]);
    }
    for (from, to) in
        [("Anonymous:            0 kB", "Anonymous:            0"), ("Swap:                 0 kB", "Swap: x kB")]
    {
        let bad = whole.replace(from, to);
        assert_ne!(bad, whole);
        assert_eq!(droppable(&bad, EXE), [], "{bad}");
    }
    let no_anon: String = whole.lines().filter(|l| !l.starts_with("Anonymous:")).map(|l| format!("{l}\n")).collect();
    assert_eq!(droppable(&no_anon, EXE), []);
    assert_eq!(droppable("garbage\n\n7f-\nzz-yy r--p 0 0 1 /x\n", EXE), []);
}

#[test]
fn only_the_program_s_own_file_and_shared_libraries_are_taken() {
    let clean = |path: &str| entry(["7f0000000000-7f0000010000", "r--p", "42", path], [64, 0, 0], "rd mr mw me sd");
    for taken in [
        EXE,
        LIBC,
        "/lib64/ld-linux-x86-64.so.2",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33",
        "/opt/app/lib/libplugin.so",
    ] {
        assert_eq!(droppable(&clean(taken), EXE), [r(0x7f00_0000_0000, 0x7f00_0001_0000)], "{taken}");
    }
    for kept in [
        // A data file some code mapped read-only and private: SQLite's mmap, a library's table.
        "/home/me/.chela/memory.db",
        "/usr/share/zoneinfo/Europe/Paris",
        "/usr/lib/locale/C.utf8/LC_CTYPE",
        // Names that only look like a library's.
        "/tmp/libfoo.so.txt",
        "/tmp/libfoo.so.1.txt",
        "/tmp/libfoo.so.",
        "/tmp/libfoo.so.1.",
        "/tmp/libfoo.so..1",
        "/tmp/libfoo.sox",
        "/tmp/.so",
        "/tmp/libfoo.so.6/data",
        // Another program, or one named like this one elsewhere.
        "/usr/local/bin/chela2",
        "/usr/local/bin/chela.old",
        "/tmp/usr/local/bin/chela",
    ] {
        assert_eq!(droppable(&clean(kept), EXE), [], "{kept}");
    }
    // No name for the program: nothing matches it, not even an empty path.
    assert_eq!(droppable(&clean(EXE), ""), []);
}

#[test]
fn only_pages_of_read_only_segments_outside_relro_count() {
    const LOAD: u32 = libc::PT_LOAD;
    let seg = |kind, flags, vaddr, memsz| Segment { kind, flags, vaddr, memsz };
    let (r, x, w) = (libc::PF_R, libc::PF_X, libc::PF_W);
    // A PIE as lld links it: rodata, text, RELRO (data.rel.ro + GOT), data + bss.
    let headers = [
        seg(libc::PT_PHDR, r, 0x40, 0x2a0),
        seg(LOAD, r, 0, 0x12_3456),
        seg(LOAD, r | x, 0x12_4460, 0x50_0000),
        seg(LOAD, r | w, 0x62_5460, 0x4_1000),
        seg(LOAD, r | w, 0x66_7460, 0x2000),
        seg(libc::PT_GNU_RELRO, r, 0x62_5460, 0x4_1000),
        seg(libc::PT_GNU_STACK, r | w, 0, 0),
    ];
    let base = 0x5555_0000_0000;
    assert_eq!(
        read_only_segments(base, &headers, 0x1000),
        [base..base + 0x12_4000, base + 0x12_4000..base + 0x62_5000]
    );
    // A read-only segment that shares a page with RELRO is left out whole.
    let shared = [seg(LOAD, r, 0, 0x1800), seg(LOAD, r | w, 0x1800, 0x800), seg(libc::PT_GNU_RELRO, r, 0x1800, 0x800)];
    assert_eq!(read_only_segments(0, &shared, 0x1000), []);
    // Empty and writable segments give nothing; a static binary's base is 0.
    assert_eq!(
        read_only_segments(0, &[seg(LOAD, r, 0x40_0000, 0), seg(LOAD, r | w | x, 0x50_0000, 0x1000)], 0x1000),
        []
    );
}

#[test]
fn a_path_with_spaces_is_read_whole() {
    let text = entry(["7f0000000000-7f0000001000", "r--p", "42", "/opt/my apps/lib.so"], [4, 0, 0], "rd mr mw me sd")
        + &entry(["7f0000001000-7f0000002000", "r--p", "42", "/opt/my apps/x (deleted)"], [4, 0, 0], "rd mr mw me sd");
    assert_eq!(droppable(&text, EXE), [r(0x7f00_0000_0000, 0x7f00_0000_1000)]);
}

#[test]
fn the_count_is_bounded() {
    let many: String = (0..MAX_MAPPINGS + 10)
        .map(|i| {
            let start = 0x7f00_0000_0000 + i * 0x1000;
            entry([&format!("{start:x}-{:x}", start + 0x1000), "r--p", "1", LIBC], [4, 0, 0], "rd mr mw me sd")
        })
        .collect();
    assert_eq!(droppable(&many, EXE).len(), MAX_MAPPINGS);
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

/// The resident KiB smaps shows for the mapping that starts at `start`.
fn rss_at(start: usize) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let head = format!("{start:x}-");
    let at = smaps.lines().position(|l| l.starts_with(&head)).expect("the mapping is in smaps");
    let rss = smaps.lines().skip(at + 1).find_map(|l| l.strip_prefix("Rss:")).unwrap();
    rss.trim().strip_suffix(" kB").unwrap().trim().parse().unwrap()
}

/// A file that is no loaded object, mapped read-only and private and read, keeps its pages through
/// a real trim: a data file, and one named like a library that the loader never loaded.
#[test]
#[allow(unsafe_code)]
fn a_trim_leaves_a_data_file_mapped_read_only_resident() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["memory.db", "libdata.so.txt", "libnot-loaded.so"] {
        let path = dir.path().join(name);
        std::fs::write(&path, vec![7u8; 64 << 10]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh read-only private mapping of a file this test owns, unmapped below.
        let at = unsafe {
            libc::mmap(std::ptr::null_mut(), 64 << 10, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0)
        };
        assert_ne!(at, libc::MAP_FAILED);
        // SAFETY: the mapping is 64 KiB long and readable.
        let bytes = unsafe { std::slice::from_raw_parts(at.cast::<u8>(), 64 << 10) };
        assert_eq!(bytes.iter().map(|&b| u64::from(b)).sum::<u64>(), 7 * (64 << 10));
        assert_eq!(rss_at(at as usize), 64, "{name}");
        trim().unwrap();
        assert_eq!(rss_at(at as usize), 64, "{name}: dropped by the trim");
        // SAFETY: `bytes` is not used after this; the mapping is this test's own.
        assert_eq!(unsafe { libc::munmap(at, 64 << 10) }, 0);
    }
}
