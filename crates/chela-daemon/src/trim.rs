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
//! swap counts there, not as anonymous), and backed by a regular file that still exists under
//! its name (not `[stack]`, `[vdso]`, a device, a memfd or a deleted file). A mapping with even
//! one copied page is left whole. What remains is a race with code that changes its mappings
//! between the read of smaps and the `madvise` (a few milliseconds); the daemon does not map
//! or unprotect files at run time, and the trim runs only when no turn is running.

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
    fn header(line: &str) -> Option<Mapping> {
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
/// process reads there (see the module's doc), at most [`MAX_MAPPINGS`].
pub fn droppable(smaps: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut current: Option<Mapping> = None;
    for line in smaps.lines() {
        if let Some(next) = Mapping::header(line) {
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

/// Drops the clean file pages of this process and trims glibc's heap.
// Never inlined: scripts/startup-order.py finds the moment of the trim in a trace by its name.
#[inline(never)]
pub fn trim() -> std::io::Result<Trimmed> {
    let rss_before_kib = rss_kib()?;
    let mut bytes = Vec::new();
    std::fs::File::open("/proc/self/smaps")?.take(MAX_SMAPS).read_to_end(&mut bytes)?;
    let mut mappings = 0;
    for range in droppable(&String::from_utf8_lossy(&bytes)) {
        if dont_need(&range) {
            mappings += 1;
        }
    }
    release_heap();
    Ok(Trimmed { mappings, rss_before_kib, rss_after_kib: rss_kib()? })
}

/// False when the kernel refused (the mapping changed since smaps was read): nothing was dropped.
#[allow(unsafe_code)]
fn dont_need(range: &Range<usize>) -> bool {
    // SAFETY: the range is a whole mapping smaps listed as private, not writable, backed by a
    // file and holding no page of the process's own (no anonymous or swapped page): dropping its
    // pages changes no byte the process can read there, the next access maps the file's page
    // again. No Rust reference can point into memory that madvise unmaps, because nothing is
    // unmapped.
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
        tracing::debug!("memory trim: off (daemon.trim_idle_secs = 0)");
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
        Ok(t) => tracing::debug!(
            "memory trimmed ({when}): {} mappings of file pages dropped, RSS {} -> {} KiB",
            t.mappings,
            t.rss_before_kib,
            t.rss_after_kib
        ),
        Err(e) if !WARNED.swap(true, Ordering::Relaxed) => {
            tracing::warn!("cannot trim the daemon's memory ({e}); it keeps running, using more");
        }
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests;
