//! The UART (QEMU virt's 16550 at 0x1000_0000) and the exit through the sifive_test device.

use core::fmt::{self, Write};

const UART_THR: *mut u8 = 0x1000_0000 as *mut u8;
const SIFIVE_TEST: *mut u32 = 0x0010_0000 as *mut u32;

pub struct Uart;

impl Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            // SAFETY: QEMU virt maps the 16550's transmit register here; a byte write sends it.
            unsafe { core::ptr::write_volatile(UART_THR, b) };
        }
        Ok(())
    }
}

#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {{
        let _ = core::fmt::Write::write_fmt(&mut $crate::console::Uart, format_args!($($arg)*));
    }};
}

#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => {{
        $crate::print!($($arg)*);
        $crate::print!("\n");
    }};
}

/// Ends QEMU: status 0 for `code` 0, else `code` (the device's FAIL with the code in bits 16+).
pub fn exit(code: u16) -> ! {
    let value = if code == 0 { 0x5555 } else { (u32::from(code) << 16) | 0x3333 };
    // SAFETY: QEMU virt maps the sifive_test finisher here; the write stops the machine.
    unsafe { core::ptr::write_volatile(SIFIVE_TEST, value) };
    loop {
        core::hint::spin_loop();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let _ = writeln!(Uart, "chela-qemu: FAILED: panic: {info}");
    exit(2)
}
