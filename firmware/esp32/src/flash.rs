//! The flash partitions the firmware uses, found in the partition table the bootloader used
//! (see `partitions.csv`), driven through esp-storage: the `chela` data partition Chela keeps its
//! sessions and memory in (handed to `chela_core::flash::FlashStore`), and for over-the-air
//! updates `otadata` and the two app slots (handed to `chela_chip::ota`).

use core::cell::RefCell;

use chela_core::flash::Flash;
use esp_bootloader_esp_idf::partitions;
use esp_storage::{FlashStorage, FlashStorageError};

/// The store partition's label in `partitions.csv`.
pub const LABEL: &str = "chela";

/// The store uses at most this much of its partition: its index lives in RAM (16 B a record),
/// and a 512 KiB store of short session lines could take tens of KiB of a 128 KiB heap. The
/// rest of the partition is kept for when the index's cost at that size is measured.
const STORE_MAX_BYTES: u32 = 128 * 1024;

const SECTOR: u32 = FlashStorage::SECTOR_SIZE;

/// The one SPI flash, shared by the partitions: the main task's store and the update written by
/// a gateway task. One executor on one core, and no borrow is held across an `.await`, so the
/// calls never overlap.
pub type Shared = &'static RefCell<FlashStorage<'static>>;

/// A partition. Offsets are from its start.
pub struct Partition {
    flash: Shared,
    start: u32,
    sectors: u32,
}

/// What over-the-air updates write: `otadata`, the two app slots, and the slot running now.
#[cfg(feature = "connected")]
pub struct OtaParts {
    pub otadata: Partition,
    pub slots: [Partition; 2],
    pub running: usize,
}

fn part(flash: Shared, offset: u32, len: u32) -> Result<Partition, &'static str> {
    if offset % SECTOR != 0 || len % SECTOR != 0 || len < 2 * SECTOR {
        return Err("a partition must be sector-aligned and at least two sectors");
    }
    Ok(Partition { flash, start: offset, sectors: len / SECTOR })
}

impl Partition {
    /// Finds the `chela` partition in the table the bootloader used.
    pub fn find(flash: Shared) -> Result<Partition, &'static str> {
        let mut table = [0u8; partitions::PARTITION_TABLE_MAX_LEN];
        let mut storage = flash.borrow_mut();
        let pt = partitions::read_partition_table(&mut *storage, &mut table)
            .map_err(|_| "the partition table could not be read")?;
        let store = pt.iter().find(|e| e.label_as_str() == LABEL).ok_or("there is no `chela` partition")?;
        part(flash, store.offset(), store.len().min(STORE_MAX_BYTES))
    }
}

/// The update partitions, or why updates are off.
#[cfg(feature = "connected")]
pub fn ota_parts(flash: Shared) -> Result<OtaParts, &'static str> {
    use esp_bootloader_esp_idf::partitions::{AppPartitionSubType, DataPartitionSubType, PartitionType};
    let mut table = [0u8; partitions::PARTITION_TABLE_MAX_LEN];
    let mut storage = flash.borrow_mut();
    let pt = partitions::read_partition_table(&mut *storage, &mut table)
        .map_err(|_| "the partition table could not be read")?;
    let find = |t| pt.find_partition(t).ok().flatten().ok_or("the partition table has no OTA partitions");
    let otadata = find(PartitionType::Data(DataPartitionSubType::Ota))?;
    let s0 = find(PartitionType::App(AppPartitionSubType::Ota0))?;
    let s1 = find(PartitionType::App(AppPartitionSubType::Ota1))?;
    let booted = pt.booted_partition().ok().flatten().ok_or("the running app slot is unknown")?;
    let running = match booted.partition_type() {
        PartitionType::App(AppPartitionSubType::Ota0) => 0,
        PartitionType::App(AppPartitionSubType::Ota1) => 1,
        _ => return Err("the running app is not in an OTA slot"),
    };
    Ok(OtaParts {
        otadata: part(flash, otadata.offset(), otadata.len())?,
        slots: [part(flash, s0.offset(), s0.len())?, part(flash, s1.offset(), s1.len())?],
        running,
    })
}

/// What went wrong at the flash chip.
#[derive(Debug)]
pub struct Error(pub FlashStorageError);

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The code by hand: a derived `Debug` of `Other(code)` is the variant's name alone in
        // this image (`-Z fmt-debug=shallow`, .cargo/config.toml).
        match self.0 {
            FlashStorageError::Other(code) => write!(f, "flash error: code {code}"),
            e => write!(f, "flash error: {e:?}"),
        }
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
        self.flash.borrow_mut().erase(from, from + SECTOR).map_err(Error)
    }

    fn program(&mut self, offset: u32, data: &[u8]) -> Result<(), Error> {
        self.flash.borrow_mut().write_nor(self.start + offset, data).map_err(Error)
    }
}
