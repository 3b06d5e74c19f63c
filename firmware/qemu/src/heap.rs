//! The heap: one fixed arena (the linker's `.heap`, sized by `_heap_size` in `memory.x`) under
//! embedded-alloc's first-fit linked-list allocator, wrapped to count what the turn uses.
//!
//! Counted: live bytes as asked for (`Layout::size`), their peak, the allocator's own `used()`
//! figure (sizes rounded up to its block granularity) and its peak, and the arena high-water mark:
//! the highest arena offset ever handed out, which is what fragmentation costs on top of the live
//! bytes. `realloc` is the `GlobalAlloc` default (allocate, copy, free), which is what this
//! allocator does on the chip too, so the old and new blocks are both counted while both are held.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;

use critical_section::Mutex;
use embedded_alloc::LlffHeap;

#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Bytes live now, as requested.
    pub live: usize,
    /// Most bytes live at once since the last [`reset_peak`].
    pub peak: usize,
    /// The allocator's `used()` (block-rounded) peak since the last [`reset_peak`].
    pub used_peak: usize,
    /// Highest arena offset (end of a block) ever handed out, since boot.
    pub high_water: usize,
    /// Allocations since boot.
    pub allocations: u32,
    /// Allocations that failed (arena exhausted): always 0 in a good run.
    pub failures: u32,
}

struct Counting {
    heap: LlffHeap,
    start: Mutex<Cell<usize>>,
    size: Mutex<Cell<usize>>,
    stats: Mutex<Cell<Stats>>,
}

#[global_allocator]
static HEAP: Counting = Counting {
    heap: LlffHeap::empty(),
    start: Mutex::new(Cell::new(0)),
    size: Mutex::new(Cell::new(0)),
    stats: Mutex::new(Cell::new(Stats { live: 0, peak: 0, used_peak: 0, high_water: 0, allocations: 0, failures: 0 })),
};

unsafe extern "C" {
    /// Start of the `.heap` region (riscv-rt's link.x).
    static __sheap: u8;
    /// Its size, set in memory.x; the symbol's address is the value.
    static _heap_size: u8;
}

/// Hands the arena to the allocator. Call once, first thing at boot, before any allocation.
pub fn init() {
    let start = &raw const __sheap as usize;
    let size = &raw const _heap_size as usize;
    critical_section::with(|cs| {
        assert_eq!(HEAP.size.borrow(cs).get(), 0, "heap::init called twice");
        HEAP.start.borrow(cs).set(start);
        HEAP.size.borrow(cs).set(size);
    });
    // SAFETY: `[__sheap, __sheap + _heap_size)` is the linker's NOLOAD `.heap` region: nothing
    // else uses it, and this runs once (checked above) before the first allocation.
    unsafe { HEAP.heap.init(start, size) }
}

/// The arena's size in bytes.
pub fn arena_size() -> usize {
    critical_section::with(|cs| HEAP.size.borrow(cs).get())
}

pub fn stats() -> Stats {
    critical_section::with(|cs| HEAP.stats.borrow(cs).get())
}

/// Starts a new peak measurement from what is live now.
pub fn reset_peak() {
    let used = HEAP.heap.used();
    critical_section::with(|cs| {
        let cell = HEAP.stats.borrow(cs);
        let mut s = cell.get();
        s.peak = s.live;
        s.used_peak = used;
        cell.set(s);
    });
}

/// Runs `f` without counting its allocations towards the peaks: for the emulated server's
/// checks, which on the chip happen on another machine. `f` must free what it allocates.
pub fn uncounted<T>(f: impl FnOnce() -> T) -> T {
    let before = stats();
    let out = f();
    critical_section::with(|cs| {
        let cell = HEAP.stats.borrow(cs);
        let mut s = cell.get();
        assert_eq!(s.live, before.live, "the server's checks kept heap memory");
        s.peak = before.peak;
        s.used_peak = before.used_peak;
        cell.set(s);
    });
    out
}

// SAFETY: allocation and deallocation are forwarded unchanged to the wrapped allocator; the
// wrapper only counts, inside a critical section.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        let p = unsafe { self.heap.alloc(layout) };
        let used = self.heap.used();
        critical_section::with(|cs| {
            let cell = self.stats.borrow(cs);
            let mut s = cell.get();
            if p.is_null() {
                s.failures += 1;
                // Said before the out-of-memory panic that follows, which knows only the size.
                crate::println!(
                    "chela-qemu: the arena could not give {} B ({} B live, {} B in use by the allocator, {} B free)",
                    layout.size(),
                    s.live,
                    used,
                    self.heap.free()
                );
            } else {
                s.allocations += 1;
                s.live += layout.size();
                s.peak = s.peak.max(s.live);
                s.used_peak = s.used_peak.max(used);
                let end = p as usize + layout.size() - self.start.borrow(cs).get();
                s.high_water = s.high_water.max(end);
            }
            cell.set(s);
        });
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`, as the caller guarantees.
        unsafe { self.heap.dealloc(ptr, layout) };
        critical_section::with(|cs| {
            let cell = self.stats.borrow(cs);
            let mut s = cell.get();
            s.live -= layout.size();
            cell.set(s);
        });
    }
}
