//! Console input: bytes typed on the USB-Serial-JTAG port (the C3's and C6's built-in USB) or on
//! UART0 (the dev boards' USB-to-UART bridge) go into one bounded pipe the main loop reads.
//! Output needs nothing here: esp-println writes to whichever of the two a host listens on.

use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::pipe::Pipe;
use esp_hal::Async;
use esp_hal::uart::UartRx;
use esp_hal::usb::usb_serial_jtag::UsbSerialJtagRx;

/// Typed bytes not yet read by the main loop. A full pipe makes the reader wait (the USB host
/// or the UART's FIFO holds the rest), so nothing typed is silently dropped while it is bounded.
pub static INPUT: Pipe<CriticalSectionRawMutex, 256> = Pipe::new();

#[embassy_executor::task]
pub async fn input_task(mut usb: UsbSerialJtagRx<'static, Async>, mut uart: Option<UartRx<'static, Async>>) {
    let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
    loop {
        let got = match uart.as_mut() {
            Some(u) => match select(embedded_io_async::Read::read(&mut usb, &mut a), u.read_async(&mut b)).await {
                Either::First(Ok(n)) => &a[..n],
                Either::Second(Ok(n)) => &b[..n],
                // A framing or overrun error on the UART (noise, a wrong baud rate): the bytes
                // are lost; the console's own errors tell the person to type again.
                Either::First(Err(_)) | Either::Second(Err(_)) => continue,
            },
            None => match embedded_io_async::Read::read(&mut usb, &mut a).await {
                Ok(n) => &a[..n],
                Err(_) => continue,
            },
        };
        INPUT.write_all(got).await;
    }
}

/// The bytes waiting, without blocking; at most `buf.len()`.
pub fn take(buf: &mut [u8]) -> usize {
    INPUT.try_read(buf).unwrap_or(0)
}

/// Waits until something was typed; at most `buf.len()` bytes.
pub async fn read(buf: &mut [u8]) -> usize {
    INPUT.read(buf).await
}
