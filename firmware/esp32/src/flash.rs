//! The flash partition Chela keeps its sessions and memory in: a data partition labelled
//! `chela` in the partition table (see `partitions.csv`), driven through esp-storage and
//! handed to `chela_core::flash::FlashStore`.

use core::cell::RefCell;

use chela_core::flash::Flash;
use esp_bootloader_esp_idf::partitions;
use esp_storage::{FlashStorage, FlashStorageError};

/// The partition's label in `partitions.csv`.
pub const LABEL: &str = "chela";

/// The store uses at most this much of its partition: its index lives in RAM (16 B a record),
/// and a 512 KiB store of short session lines could take tens of KiB of a 128 KiB heap. The
/// rest of the partition is kept for when the index's cost at that size is measured.
const STORE_MAX_BYTES: u32 = 128 * 1024;

const SECTOR: u32 = FlashStorage::SECTOR_SIZE;

/// The `chela` data partition. Offsets are from its start.
pub struct Partition {
    flash: RefCell<FlashStorage<'static>>,
    start: u32,
    sectors: u32,
}

impl Partition {
    /// Finds the `chela` partition in the table the bootloader used.
    pub fn find(mut flash: FlashStorage<'static>) -> Result<Partition, &'static str> {
        let mut table = [0u8; partitions::PARTITION_TABLE_MAX_LEN];
        let (start, len) = {
            let pt = partitions::read_partition_table(&mut flash, &mut table)
                .map_err(|_| "the partition table could not be read")?;
            let entry = pt.iter().find(|e| e.label_as_str() == LABEL).ok_or("there is no `chela` partition")?;
            (entry.offset(), entry.len().min(STORE_MAX_BYTES))
        };
        if start % SECTOR != 0 || len < 2 * SECTOR {
            return Err("the `chela` partition must be sector-aligned and at least two sectors");
        }
        Ok(Partition { flash: RefCell::new(flash), start, sectors: len / SECTOR })
    }
}

/// What went wrong at the flash chip.
#[derive(Debug)]
pub struct Error(pub FlashStorageError);

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "flash error: {:?}", self.0)
    }
}

impl Flash for Partition {
    type Error = Error;

    fn sector_size(&self) -> u32 {
        SECTOR
    }

    fn sector_count(&self) -> u32 {
        self.sectors
    }

    fn read(&self, offset: u32, buf: &mut [u8]) -> Result<(), Error> {
        self.flash.borrow_mut().read_nor(self.start + offset, buf).map_err(Error)
    }

    fn erase(&mut self, sector: u32) -> Result<(), Error> {
        let from = self.start + sector * SECTOR;
        self.flash.get_mut().erase(from, from + SECTOR).map_err(Error)
    }

    fn program(&mut self, offset: u32, data: &[u8]) -> Result<(), Error> {
        self.flash.get_mut().write_nor(self.start + offset, data).map_err(Error)
    }
}
