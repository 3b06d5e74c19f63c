//! A wear-levelled, power-cut-safe record store on raw NOR flash, for the chip.
//!
//! What it is: the [`Flash`] contract (what the store needs from a flash partition), a RAM
//! model of it that can cut power after any byte and rot bits ([`RamFlash`]), and
//! [`FlashStore`], a log-structured store of records keyed by short names: session lines
//! (the oldest go first when the partition is full), kept entries (memory: copied forward,
//! never dropped) and whole-content replacements. It also implements the core's
//! [`Storage`](crate::storage::Storage) contract, so sessions and memory run on it unchanged.
//!
//! What it is not: a file system. Records are at most one sector; names are at most
//! [`MAX_KEY`] bytes; the index of live records lives in RAM (16 bytes a record).
//!
//! How to drive it: [`FlashStore::open`] scans the partition (that is the boot), then
//! `append_line` / `append_entry` / `replace` / `read`; every write is durable when it returns
//! `Ok`. After a flash error (power cut) drop the store and open it again. The layout and why
//! it survives a power cut at any byte are in `docs/DESIGN.md`, "The flash store".

use core::fmt;

mod crc;
mod files;
mod ram;
mod store;
#[cfg(test)]
mod tests;

pub use crc::crc32;
pub use ram::{RamError, RamFlash};
pub use store::{Error, FlashStore, KeyStats, Kind, Limits, MAX_KEY, Order, Record, Stats};

/// Programming granularity: [`Flash::program`] offsets and lengths are multiples of this.
pub const WORD: u32 = 4;

/// A partition of NOR flash: `sector_count` sectors of `sector_size` bytes, addressed from 0.
///
/// What every implementation MUST guarantee:
/// - [`sector_size`](Flash::sector_size) is a multiple of [`WORD`] between 256 and 65,536 and
///   never changes; [`sector_count`](Flash::sector_count) neither.
/// - [`erase`](Flash::erase) sets every byte of one sector to `0xFF`. It is the only way a
///   bit goes from 0 to 1.
/// - [`program`](Flash::program) can only clear bits: each byte becomes `old & new`. Its
///   offset and length are multiples of [`WORD`] and it stays within one sector. When it
///   returns `Ok` the bytes are durable.
/// - [`read`](Flash::read) returns what is stored, at any offset and length inside the
///   partition. It takes `&self`: a driver whose bus needs `&mut` wraps it in a `RefCell`.
/// - A power cut during `program` leaves a prefix of the bytes programmed and the byte after
///   it with some of its bits cleared; during `erase` it leaves the sector in any state. The
///   call (and every later one, until power returns) fails.
pub trait Flash {
    type Error: fmt::Debug + fmt::Display;

    /// Bytes in one erasable sector.
    fn sector_size(&self) -> u32;
    /// Sectors in the partition.
    fn sector_count(&self) -> u32;
    /// Fills `buf` with the bytes at `offset` (from the partition's start).
    fn read(&self, offset: u32, buf: &mut [u8]) -> Result<(), Self::Error>;
    /// Sets sector `sector` to all `0xFF`.
    fn erase(&mut self, sector: u32) -> Result<(), Self::Error>;
    /// Clears the bits of `data` that are 0 at `offset`. See the trait docs.
    fn program(&mut self, offset: u32, data: &[u8]) -> Result<(), Self::Error>;
}
