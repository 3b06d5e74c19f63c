//! Stack high-water mark: the free stack is painted with a pattern at boot; at the end, the
//! lowest word no longer holding it is as deep as the stack went.

use core::arch::asm;

const PAINT: u32 = 0xA5A5_5A5A;
/// Words left unpainted just below the stack pointer at boot, for the painting loop's own frame.
const MARGIN: usize = 64;

unsafe extern "C" {
    /// Lowest stack address (riscv-rt's link.x): the stack may grow down to here.
    static __estack: u8;
    /// Highest stack address: where the stack starts.
    static __sstack: u8;
}

fn bottom() -> usize {
    &raw const __estack as usize
}

fn top() -> usize {
    &raw const __sstack as usize
}

pub fn size() -> usize {
    top() - bottom()
}

fn sp() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer register, nothing else.
    unsafe { asm!("mv {}, sp", out(reg) sp) };
    sp
}

/// Paints the unused stack. Call first thing in `main`.
pub fn paint() {
    let end = (sp() - MARGIN * 4) & !3;
    let mut p = bottom();
    while p < end {
        // SAFETY: `[bottom, end)` is stack below the current frame (and its margin): no live
        // data is there, and it is word-aligned RAM.
        unsafe { core::ptr::write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
}

/// Deepest stack use since [`paint`], in bytes.
pub fn used() -> usize {
    let mut p = bottom();
    // SAFETY: reads word-aligned RAM of the stack region below the current frame.
    while p < top() && unsafe { core::ptr::read_volatile(p as *const u32) } == PAINT {
        p += 4;
    }
    top() - p
}
