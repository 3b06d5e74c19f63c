//! [`RamFlash`]: NOR flash in RAM, for tests, the emulator and benchmarks. It keeps the
//! [`Flash`] contract strictly (it refuses misaligned programs) and can fail the way real
//! flash fails: power cut after a budget of work, and bits that rot.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use super::{Flash, WORD};

/// Why a [`RamFlash`] call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RamError {
    /// The power was cut (see [`RamFlash::cut_after`]); call [`RamFlash::power_on`].
    PowerCut,
    /// The range is outside the partition or crosses a sector's end.
    OutOfRange { offset: u32, len: usize },
    /// A program whose offset or length is not a multiple of [`WORD`].
    Misaligned { offset: u32, len: usize },
}

impl fmt::Display for RamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RamError::PowerCut => f.write_str("the power was cut"),
            RamError::OutOfRange { offset, len } => write!(f, "{len} bytes at {offset} are outside the flash"),
            RamError::Misaligned { offset, len } => {
                write!(f, "program of {len} bytes at {offset} is not aligned to {WORD} bytes")
            }
        }
    }
}

/// See the module docs. Work is counted in units: one programmed byte or one sector erase.
#[derive(Clone, Debug)]
pub struct RamFlash {
    bytes: Vec<u8>,
    sector_size: u32,
    /// Units left before the power is cut; `None`: never.
    budget: Option<u64>,
    off: bool,
    work: u64,
    erases: Vec<u32>,
}

impl RamFlash {
    /// A blank partition (all `0xFF`) of `sectors` sectors of `sector_size` bytes.
    ///
    /// # Panics
    /// If the geometry is one no flash has (see [`Flash::sector_size`]'s contract); the store
    /// itself refuses such a flash with a typed error, this panics to keep tests honest.
    pub fn new(sector_size: u32, sectors: u32) -> RamFlash {
        assert!(sector_size.is_multiple_of(WORD) && sector_size > 0, "sector size {sector_size}");
        RamFlash {
            bytes: vec![0xFF; sector_size as usize * sectors as usize],
            sector_size,
            budget: None,
            off: false,
            work: 0,
            erases: vec![0; sectors as usize],
        }
    }

    /// Cuts the power once `units` more units of work are done: a program then stops after
    /// the budget's last byte and leaves the next byte half programmed; an erase hit by it
    /// leaves the sector's first half erased and the rest as it was.
    pub fn cut_after(&mut self, units: u64) {
        self.budget = Some(units);
    }

    /// The power comes back: calls work again and no cut is planned.
    pub fn power_on(&mut self) {
        self.off = false;
        self.budget = None;
    }

    /// True once a planned cut has happened (until [`power_on`](RamFlash::power_on)).
    pub fn is_off(&self) -> bool {
        self.off
    }

    /// Units of work done so far (programmed bytes plus erases), for planning cuts.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// Flips one bit, as charge leaking out of a cell does.
    ///
    /// # Panics
    /// If `offset` is outside the partition.
    pub fn rot(&mut self, offset: u32, bit: u8) {
        self.bytes[offset as usize] ^= 1 << (bit % 8);
    }

    /// How many times each sector was erased.
    pub fn erase_counts(&self) -> &[u32] {
        &self.erases
    }

    /// The raw contents.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn range(&self, offset: u32, len: usize) -> Result<core::ops::Range<usize>, RamError> {
        let start = offset as usize;
        match start.checked_add(len) {
            Some(end) if end <= self.bytes.len() => Ok(start..end),
            _ => Err(RamError::OutOfRange { offset, len }),
        }
    }

    /// Takes `want` units from the budget; returns how many may be done before the cut.
    fn spend(&mut self, want: u64) -> Result<u64, RamError> {
        if self.off {
            return Err(RamError::PowerCut);
        }
        let allowed = match &mut self.budget {
            Some(left) => {
                let allowed = want.min(*left);
                *left -= allowed;
                allowed
            }
            None => want,
        };
        self.work += allowed;
        if allowed < want {
            self.off = true;
        }
        Ok(allowed)
    }
}

impl Flash for RamFlash {
    type Error = RamError;

    fn sector_size(&self) -> u32 {
        self.sector_size
    }

    fn sector_count(&self) -> u32 {
        u32::try_from(self.erases.len()).unwrap_or(u32::MAX)
    }

    fn read(&self, offset: u32, buf: &mut [u8]) -> Result<(), RamError> {
        if self.off {
            return Err(RamError::PowerCut);
        }
        let r = self.range(offset, buf.len())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn erase(&mut self, sector: u32) -> Result<(), RamError> {
        let size = self.sector_size as usize;
        let r = self.range(sector.saturating_mul(self.sector_size), size)?;
        if self.spend(1)? == 0 {
            let half = r.start + size / 2;
            self.bytes[r.start..half].fill(0xFF);
            return Err(RamError::PowerCut);
        }
        self.bytes[r].fill(0xFF);
        self.erases[sector as usize] += 1;
        Ok(())
    }

    fn program(&mut self, offset: u32, data: &[u8]) -> Result<(), RamError> {
        if !offset.is_multiple_of(WORD) || !data.len().is_multiple_of(WORD as usize) {
            return Err(RamError::Misaligned { offset, len: data.len() });
        }
        let r = self.range(offset, data.len())?;
        let sector_end = (offset / self.sector_size + 1) as usize * self.sector_size as usize;
        if r.end > sector_end {
            return Err(RamError::OutOfRange { offset, len: data.len() });
        }
        let done = usize::try_from(self.spend(data.len() as u64)?).unwrap_or(usize::MAX);
        for (cell, &b) in self.bytes[r.clone()].iter_mut().zip(&data[..done]) {
            *cell &= b;
        }
        if done < data.len() {
            // The byte being programmed when the power went: only its high bits made it.
            self.bytes[r.start + done] &= data[done] | 0x0F;
            return Err(RamError::PowerCut);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
