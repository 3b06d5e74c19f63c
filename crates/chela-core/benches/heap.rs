//! Peak heap of one agent turn with the history the firmware carries: 16 KiB of conversation
//! and 12 tools, the same turn as the `turn` benchmark (request encoded, streamed reply
//! decoded, one tool round, second round). The figure is for the chip's driver, which sends the
//! request body in `json::Window` pieces; the host's way (the body held in a `String` for
//! retries) is printed next to it for comparison.
//!
//! A counting global allocator tracks live bytes. A `realloc` is counted as the chip's
//! allocator performs it: the new block is allocated while the old one is still held, then the
//! old one is freed. The peak if every `realloc` grew in place is printed next to it.
//!
//! Reported: the bytes held before the turn (history, system prompt, tool registry), the peak
//! during the turn above that, and where the bytes go phase by phase. The SSE bytes the
//! decoder is fed are the network's buffers, allocated before the turn and not counted.
//!
//! Run: `cargo bench -p chela-core --bench heap`.
// Unsafe only for the allocator wrapper, which must implement `GlobalAlloc`.
#![allow(unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use chela_core::session;
use common::{BodyMode, Fixture, Format, Probe};

static CURRENT: AtomicUsize = AtomicUsize::new(0);
/// Peak with `realloc` as allocate-copy-free.
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Peak if every `realloc` resized in place.
static PEAK_IN_PLACE: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

struct Counting;

fn grow(n: usize) {
    let now = CURRENT.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(now, Relaxed);
    PEAK_IN_PLACE.fetch_max(now, Relaxed);
}

fn shrink(n: usize) {
    CURRENT.fetch_sub(n, Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; the wrapper only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            ALLOCATIONS.fetch_add(1, Relaxed);
            grow(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            ALLOCATIONS.fetch_add(1, Relaxed);
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and `new_size` is valid for `layout.align()`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            ALLOCATIONS.fetch_add(1, Relaxed);
            let old = layout.size();
            let cur = CURRENT.load(Relaxed);
            PEAK.fetch_max(cur + new_size, Relaxed);
            PEAK_IN_PLACE.fetch_max(cur - old + new_size, Relaxed);
            if new_size >= old {
                CURRENT.fetch_add(new_size - old, Relaxed);
            } else {
                CURRENT.fetch_sub(old - new_size, Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> usize {
    CURRENT.load(Relaxed)
}

/// Starts a new peak window at the current level.
fn reset_peak() {
    let now = live();
    PEAK.store(now, Relaxed);
    PEAK_IN_PLACE.store(now, Relaxed);
}

/// Heap bytes `f`'s result holds.
fn held<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = live();
    let v = f();
    (v, live().saturating_sub(before))
}

const TOOLS: usize = 12;
const HISTORY_BYTES: usize = 16 * 1024;
const TARGET: usize = 48 * 1024;

struct Phase {
    at: Probe,
    /// Live bytes above the baseline at the end of the phase.
    live: usize,
    /// Peak above the baseline during the phase.
    peak: usize,
    peak_in_place: usize,
}

struct Measured {
    phases: Vec<Phase>,
    peak: usize,
    peak_in_place: usize,
    allocations: usize,
}

fn measure(fx: &Fixture, session_text: &str, system: &str) -> Measured {
    // Loaded as the driver loads it, before the turn: part of what is held.
    let history = session::parse(session_text).messages;
    let system = system.to_owned();
    // Allocated before the baseline; the probe below must not allocate.
    let mut phases = Vec::with_capacity(16);
    let baseline = live();
    reset_peak();
    let allocations = ALLOCATIONS.load(Relaxed);
    let mut probe = |at: Probe| {
        let (now, peak, peak_in_place) = (live(), PEAK.load(Relaxed), PEAK_IN_PLACE.load(Relaxed));
        phases.push(Phase {
            at,
            live: now.saturating_sub(baseline),
            peak: peak.saturating_sub(baseline),
            peak_in_place: peak_in_place.saturating_sub(baseline),
        });
        reset_peak();
    };
    let run = common::turn(fx, history, system, &mut probe);
    let allocations = ALLOCATIONS.load(Relaxed) - allocations;
    common::check(&run);
    drop(run);
    let peak = phases.iter().map(|p| p.peak).max().unwrap_or(0);
    let peak_in_place = phases.iter().map(|p| p.peak_in_place).max().unwrap_or(0);
    Measured { phases, peak, peak_in_place, allocations }
}

fn describe(p: Probe) -> String {
    match p {
        Probe::Started => "AgentRun::new (history + message)".to_owned(),
        Probe::Encoded { round, body_len, body_capacity } => {
            format!("round {} request encoded: body {body_len} B in {body_capacity} B", round + 1)
        }
        Probe::Decoded { round } => format!("round {} reply decoded (a held body is still alive)", round + 1),
        Probe::Handled { round } => format!("round {} reply handled, any body dropped", round + 1),
        Probe::ToolsDone => "tool result recorded".to_owned(),
        Probe::Done => "turn done".to_owned(),
    }
}

fn kib(n: usize) -> String {
    format!("{:.1} KiB", n as f64 / 1024.0)
}

fn main() {
    // The tool texts are generated once and stand for constants; not part of the registry.
    drop(common::registry(TOOLS));
    let (registry, registry_bytes) = held(|| common::registry(TOOLS));
    let (system, system_bytes) = held(|| common::system_prompt(&registry));
    let generated = common::history(usize::MAX, HISTORY_BYTES);
    let session_text = common::session_text(&generated);
    let (history, history_bytes) = held(|| session::parse(&session_text).messages);
    println!(
        "heap: history of {} messages ({} request bytes, {} bytes as a session file), {} tools, system prompt {} bytes",
        history.len(),
        chela_core::history::bytes(&history),
        session_text.len(),
        registry.tools_for(Default::default()).len(),
        system.len()
    );
    for format in Format::BOTH {
        let (total, system_part, tools_part) = common::body_split(format, &system, &history, &registry);
        println!(
            "{} first request body {total} B: system prompt {system_part} B, tool definitions {tools_part} B, messages and framing {} B",
            format.name(),
            total - system_part - tools_part
        );
    }
    drop(history);
    drop(generated);
    let held_before = history_bytes + system_bytes + registry_bytes;
    println!(
        "held before the turn: history {} B + system prompt {} B + registry {} B = {} B ({})",
        history_bytes,
        system_bytes,
        registry_bytes,
        held_before,
        kib(held_before)
    );

    let mut pass = true;
    for mode in [BodyMode::Windowed, BodyMode::Host, BodyMode::Counted] {
        println!("\n== {}", mode.describe());
        for format in Format::BOTH {
            let mut fx = Fixture::new(format, common::registry(TOOLS));
            fx.body = mode;
            // Once to warm up anything lazily allocated, once to measure.
            measure(&fx, &session_text, &system);
            let m = measure(&fx, &session_text, &system);
            let total = held_before + m.peak;
            println!(
                "{}: peak {} B above the pre-turn baseline ({} if realloc grew in place); with what is held: {} B ({}); {} allocations",
                format.name(),
                m.peak,
                m.peak_in_place,
                total,
                kib(total),
                m.allocations
            );
            // The target is about what the chip carries; the host rows are for comparison.
            if mode == BodyMode::Windowed {
                pass &= total < TARGET;
                println!(
                    "  {:<58} {:>10} {:>10} {:>10}",
                    "phase (bytes above baseline)", "live after", "peak", "in place"
                );
                for p in &m.phases {
                    println!("  {:<58} {:>10} {:>10} {:>10}", describe(p.at), p.live, p.peak, p.peak_in_place);
                }
            }
        }
    }
    println!(
        "\ntarget: peak during the turn, with the history held, under {}: {}",
        kib(TARGET),
        if pass { "PASS" } else { "FAIL" }
    );
}
