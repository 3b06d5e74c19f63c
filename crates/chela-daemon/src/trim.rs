//! Giving the kernel back what an idle daemon keeps resident but does not use (Linux).
//!
//! Most of an idle `chela run`'s resident memory is clean file pages: the code and read-only
//! data of the binary and of libc that start-up or the last turn touched, each touched page
//! pulling in its neighbours (the kernel's fault-around). Once the daemon is ready, and again
//! when it has been quiet for `daemon.trim_idle_secs` after some work (never while a turn runs),
//! [`trim`] drops those pages with `madvise(MADV_DONTNEED)` and gives glibc's free heap back
//! (`malloc_trim`). The pages stay in the page cache: the next touch is a minor fault, no disk
//! read.
//!
//! Why it cannot corrupt the process: on a private file mapping, `MADV_DONTNEED` throws away
//! the process's own copies of pages and the next access maps the file's page again. That is
//! harmless exactly when the process has no copy that differs from the file. [`droppable`] takes
//! a mapping only when smaps shows it has none: not writable (so nothing can be written into it
//! without an `mprotect` first), no anonymous pages (no page was copied on write, as relocated
//! data is, or as a debugger's breakpoint is), nothing swapped out (a copied page that went to
//! swap counts there, not as anonymous), and backed by the program's own file or a shared
//! library (`*.so`, `*.so.N`) that still exists under its name: never a data file some code
//! mapped read-only (SQLite's mmap, a library's table), whose pages are not the trim's to judge,
//! nor `[stack]`, `[vdso]`, a device, a memfd or a deleted file. A mapping with even one copied
//! page is left whole.
//!
//! The race between reading smaps and the `madvise`: [`trim`] drops a mapping only where it lies
//! inside a segment that the program's or a library's ELF headers load read-only (not `PF_W`, not
//! `PT_GNU_RELRO`), taken from the loader's list of loaded objects (`dl_iterate_phdr`), and does
//! the read and the drops from within that walk. The loader writes only into writable and RELRO
//! segments (a library that `dlopen` is mapping and relocating meanwhile is no exception: its
//! RELRO is never taken, whatever smaps said a moment before), and glibc holds its lock on the
//! list for the whole walk, so no library leaves it and has its addresses reused by a new mapping
//! before the drops are done (musl never unloads one; a static binary has no loader). What is
//! left: code that `mprotect`s a read-only segment of the program or a library writable and
//! writes it (a JIT patching itself, or a debugger's breakpoint, which it writes without one) in
//! the milliseconds between; a breakpoint dropped so is the original code again, not a wrong
//! byte. The daemon patches none of its code, and the trim runs only when no turn is running.

use std::io::Read;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::daemon::Daemon;

/// The most of `/proc/self/smaps` read: a daemon has a few hundred mappings, about 1 KiB of
/// text each. A longer file is cut, and its last, incomplete mapping left alone.
const MAX_SMAPS: u64 = 4 << 20;
/// Mappings dropped at most by one trim.
const MAX_MAPPINGS: usize = 4096;
/// How long start-up waits for the channels to report (connected or failing) before it trims.
const READY_WITHIN: Duration = Duration::from_secs(10);
/// The start-up trim comes no sooner: what the services do once (their first poll, the
/// scheduler's first look) is done by then, so only the idle loop's pages come back.
const SETTLE: Duration = Duration::from_secs(2);
const READY_POLL: Duration = Duration::from_millis(100);

/// What a trim did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trimmed {
    /// Mappings whose pages were dropped.
    pub mappings: usize,
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
}

/// Whether a mapping's file is one whose read-only pages are code or constant data the trim may
/// drop: the program's own file (`exe`, as `/proc/self/exe` reads) or a shared library, named
/// `NAME.so` or `NAME.so.N[.N...]` (`libc.so.6`, `ld-linux-x86-64.so.2`); not `libfoo.so.txt`.
fn code_file(path: &str, exe: &str) -> bool {
    if !exe.is_empty() && path == exe {
        return true;
    }
    let name = path.rsplit('/').next().unwrap_or("");
    let Some(at) = name.find(".so") else { return false };
    let version = &name[at + 3..];
    at > 0
        && (version.is_empty()
            || version
                .strip_prefix('.')
                .is_some_and(|v| v.split('.').all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))))
}

/// One mapping of smaps as read so far.
#[derive(Default)]
struct Mapping {
    range: Range<usize>,
    /// What the header line allows: private, not writable, a regular file still there.
    candidate: bool,
    rss: Option<u64>,
    anonymous: Option<u64>,
    swap: Option<u64>,
    /// `VmFlags` is the last line of a mapping: without it the mapping was cut short.
    flags: Option<bool>,
}

impl Mapping {
    fn header(line: &str, exe: &str) -> Option<Mapping> {
        // `start-end perms offset dev inode    path`: the first five are separated by one space.
        let mut fields = line.splitn(6, ' ');
        let (start, end) = fields.next()?.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        let perms = fields.next()?.as_bytes();
        let _offset = fields.next()?;
        let _dev = fields.next()?;
        let inode = fields.next()?;
        let path = fields.next().unwrap_or("").trim_start();
        if perms.len() != 4 || inode.is_empty() || !inode.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let candidate = perms[1] == b'-'
            && perms[3] == b'p'
            && (perms[0] == b'r' || perms[2] == b'x')
            && inode != "0"
            && path.starts_with('/')
            && !path.ends_with(" (deleted)")
            && !path.starts_with("/dev/")
            && !path.starts_with("/memfd:")
            && code_file(path, exe)
            && end > start;
        Some(Mapping { range: start..end, candidate, ..Mapping::default() })
    }

    fn field(&mut self, line: &str) {
        let Some((name, value)) = line.split_once(':') else { return };
        if name == "VmFlags" {
            // Locked pages cannot be dropped (madvise refuses); `io`/`pf` mappings are not file pages.
            let refused = value.split_ascii_whitespace().any(|f| matches!(f, "lo" | "io" | "pf" | "wr" | "sh"));
            self.flags = Some(!refused);
            return;
        }
        let slot = match name {
            "Rss" => &mut self.rss,
            "Anonymous" => &mut self.anonymous,
            "Swap" => &mut self.swap,
            _ => return,
        };
        // `   12 kB`: a value that does not read so is as good as missing, which refuses the mapping.
        *slot = value.trim().strip_suffix(" kB").and_then(|n| n.trim().parse().ok());
    }

    fn droppable(&self) -> bool {
        self.candidate
            && self.flags == Some(true)
            && self.anonymous == Some(0)
            && self.swap == Some(0)
            && self.rss.is_some_and(|r| r > 0)
    }
}

/// The mappings of an smaps text whose resident pages can be dropped without changing what the
/// process reads there (see the module's doc), at most [`MAX_MAPPINGS`]; `exe` is the program's
/// own file (`/proc/self/exe`).
pub fn droppable(smaps: &str, exe: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut current: Option<Mapping> = None;
    for line in smaps.lines() {
        if let Some(next) = Mapping::header(line, exe) {
            if let Some(done) = current.replace(next)
                && done.droppable()
            {
                out.push(done.range);
            }
        } else if let Some(m) = current.as_mut() {
            m.field(line);
        }
        if out.len() >= MAX_MAPPINGS {
            return out;
        }
    }
    if let Some(done) = current
        && done.droppable()
    {
        out.push(done.range);
    }
    out
}

/// One program header of a loaded object: `p_type`, `p_flags`, `p_vaddr`, `p_memsz`.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub kind: u32,
    pub flags: u32,
    pub vaddr: usize,
    pub memsz: usize,
}

/// The address ranges, whole pages, of an object loaded at `base` that its program headers load
/// read-only: `PT_LOAD` without `PF_W`, less any page of `PT_GNU_RELRO` (written by the loader
/// before it is made read-only). The loader never writes into them.
pub fn read_only_segments(base: usize, headers: &[Segment], page: usize) -> Vec<Range<usize>> {
    let pages = |s: &Segment| {
        let start = base.wrapping_add(s.vaddr);
        (start & !(page - 1))..start.saturating_add(s.memsz).saturating_add(page - 1) & !(page - 1)
    };
    let relro: Vec<Range<usize>> = headers.iter().filter(|s| s.kind == libc::PT_GNU_RELRO).map(pages).collect();
    headers
        .iter()
        .filter(|s| s.kind == libc::PT_LOAD && s.flags & libc::PF_W == 0 && s.memsz > 0)
        .map(pages)
        .filter(|r| r.start < r.end && !relro.iter().any(|x| x.start < r.end && r.start < x.end))
        .collect()
}

/// Drops the clean file pages of this process and trims glibc's heap.
// Never inlined: scripts/startup-order.py finds the moment of the trim in a trace by its name.
#[inline(never)]
pub fn trim() -> std::io::Result<Trimmed> {
    let rss_before_kib = rss_kib()?;
    let exe = std::fs::read_link("/proc/self/exe")?;
    let mut walk = Walk { exe: exe.to_str().unwrap_or("").to_owned(), mappings: None, dropped: 0 };
    #[allow(unsafe_code)]
    // SAFETY: the callback gets `walk` back as its data, only during this call, and reads the
    // loader's headers only while the loader reports them.
    unsafe {
        libc::dl_iterate_phdr(Some(each_object), (&raw mut walk).cast());
    }
    if let Some(Err(e)) = walk.mappings {
        return Err(e);
    }
    release_heap();
    Ok(Trimmed { mappings: walk.dropped, rss_before_kib, rss_after_kib: rss_kib()? })
}

/// What the walk over the loaded objects carries.
struct Walk {
    exe: String,
    /// The droppable mappings, read from smaps at the first object (within the walk).
    mappings: Option<std::io::Result<Vec<Range<usize>>>>,
    dropped: usize,
}

fn read_droppable(exe: &str) -> std::io::Result<Vec<Range<usize>>> {
    let mut bytes = Vec::new();
    std::fs::File::open("/proc/self/smaps")?.take(MAX_SMAPS).read_to_end(&mut bytes)?;
    Ok(droppable(&String::from_utf8_lossy(&bytes), exe))
}

/// For each loaded object (the program, then each library): drops the droppable mappings that
/// lie inside its read-only segments.
#[allow(unsafe_code)]
unsafe extern "C" fn each_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `Walk` that `trim` passed, alive and not otherwise used during the walk.
    let walk = unsafe { &mut *data.cast::<Walk>() };
    if walk.mappings.is_none() {
        walk.mappings = Some(read_droppable(&walk.exe));
    }
    let Some(Ok(mappings)) = &walk.mappings else { return 1 };
    // SAFETY: the loader passes a valid `info` whose `dlpi_phdr` points to `dlpi_phnum` headers.
    let (base, headers) = unsafe {
        let info = &*info;
        let headers: &[_] = if info.dlpi_phdr.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum))
        };
        (info.dlpi_addr as usize, headers)
    };
    let headers: Vec<Segment> = headers
        .iter()
        .map(|h| Segment { kind: h.p_type, flags: h.p_flags, vaddr: h.p_vaddr as usize, memsz: h.p_memsz as usize })
        .collect();
    for segment in read_only_segments(base, &headers, page_size()) {
        for range in mappings.iter().filter(|m| segment.start <= m.start && m.end <= segment.end) {
            if dont_need(range) {
                walk.dropped += 1;
            }
        }
    }
    0
}

#[allow(unsafe_code)]
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|n| n.is_power_of_two()).unwrap_or(4096)
}

/// False when the kernel refused: nothing was dropped.
#[allow(unsafe_code)]
fn dont_need(range: &Range<usize>) -> bool {
    // SAFETY: the range is a whole mapping smaps listed as private, not writable, backed by the
    // program's or a library's file and holding no page of the process's own (no anonymous or
    // swapped page), inside a segment the loader never writes, read during the loader's walk
    // (see the module's doc): dropping its pages changes no byte the process can read there,
    // the next access maps the file's page again. No Rust reference can point into memory that
    // madvise unmaps, because nothing is unmapped.
    unsafe { libc::madvise(range.start as *mut libc::c_void, range.end - range.start, libc::MADV_DONTNEED) == 0 }
}

/// glibc keeps freed heap (the last turn's buffers) mapped; musl has no such call and returns
/// large frees at once.
#[allow(unsafe_code)]
fn release_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory of glibc's own arenas; it takes their locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn rss_kib() -> std::io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix(" kB"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no VmRSS in /proc/self/status"))
}

/// Trims once the channels have reported after start-up (and [`SETTLE`] has passed), then each
/// time the daemon has been quiet for `daemon.trim_idle_secs` after work; returns when the daemon
/// stops. `channels` are the names the started channels report under in [`Daemon::live`].
pub async fn serve(daemon: Arc<Daemon>, channels: Vec<&'static str>) -> anyhow::Result<()> {
    let secs = daemon.config().int(chela_core::config::DAEMON_TRIM_IDLE_SECS).unsigned_abs();
    if secs == 0 {
        chela_log::debug!("memory trim: off (daemon.trim_idle_secs = 0)");
        daemon.shutdown().wait().await;
        return Ok(());
    }
    let started = tokio::time::Instant::now();
    let reported = || channels.iter().all(|c| daemon.live().snapshot().contains_key(c));
    while started.elapsed() < READY_WITHIN && (started.elapsed() < SETTLE || !reported()) {
        tokio::select! {
            () = tokio::time::sleep(READY_POLL) => {}
            () = daemon.shutdown().wait() => return Ok(()),
        }
    }
    let hub = daemon.hub();
    if hub.busy() == 0 {
        run("start-up");
    }
    let period = Duration::from_secs(secs);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = hub.activity();
    let mut worked = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = daemon.shutdown().wait() => return Ok(()),
        }
        // Quiet for a whole period: no message came in and none is running now.
        let now = hub.activity();
        if now != seen || hub.busy() > 0 {
            seen = now;
            worked = true;
        } else if worked {
            worked = false;
            run("idle");
        }
    }
}

fn run(when: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    match trim() {
        Ok(t) => chela_log::debug!(
            "memory trimmed ({when}): {} mappings of file pages dropped, RSS {} -> {} KiB",
            t.mappings,
            t.rss_before_kib,
            t.rss_after_kib
        ),
        Err(e) if !WARNED.swap(true, Ordering::Relaxed) => {
            chela_log::warn!("cannot trim the daemon's memory ({e}); it keeps running, using more");
        }
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests;
