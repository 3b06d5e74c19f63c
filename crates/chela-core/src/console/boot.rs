//! The boot guard: a crash loop ends in safe mode, not in a chip that resets
//! forever.
//!
//! A counter of boots that have not yet lived long enough is kept in flash under
//! [`BOOT_KEY`]. Each boot adds one before the channels start; an uptime of
//! [`BootPolicy::stable_after_ms`] sets it back to 0, and so does a restart asked for on the
//! console (that is not a crash). When a boot finds more than [`BootPolicy::max_quick_resets`]
//! quick resets in a row, it starts in [`BootMode::Safe`]: channels off, the serial console on.
//! A safe boot that lives long enough clears the counter too, so the next restart tries again.
//!
//! How to drive it: [`BootGuard::boot`] once, right after the flash store opens; then
//! [`BootGuard::handle_uptime`] from time to time (every few seconds is plenty).

use alloc::format;
use core::ops::ControlFlow;

use crate::flash::{self, Flash, FlashStore, Order};

/// The store key of the boot counter.
pub const BOOT_KEY: &str = "chip/boot";

/// When a run of boots is a crash loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootPolicy {
    /// Quick resets in a row that are still tried normally; one more means safe mode.
    pub max_quick_resets: u32,
    /// Uptime after which a boot counts as good.
    pub stable_after_ms: u64,
}

impl Default for BootPolicy {
    /// Three quick resets, then safe mode; a minute up is a good boot.
    fn default() -> BootPolicy {
        BootPolicy { max_quick_resets: 3, stable_after_ms: 60_000 }
    }
}

/// How this boot runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootMode {
    /// Everything on.
    Normal,
    /// Channels and the agent off; the serial console on, to fix the settings.
    Safe {
        /// The quick resets in a row that led here.
        quick_resets: u32,
    },
}

/// See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootGuard {
    policy: BootPolicy,
    mode: BootMode,
    /// Boots counted without a good uptime, this one included.
    boots: u32,
    /// The counter is back at 0 for this boot.
    settled: bool,
}

impl BootGuard {
    /// Counts this boot in flash and decides its mode. Call it before starting any channel;
    /// if it fails (the flash cannot be written), boot in safe mode.
    pub fn boot<F: Flash>(store: &mut FlashStore<F>, policy: BootPolicy) -> Result<BootGuard, flash::Error<F::Error>> {
        let before = read_count(store)?;
        let boots = before.saturating_add(1);
        store.replace(BOOT_KEY, format!("boots {boots}\n").as_bytes())?;
        // `boots - 1` boots before this one ended without a good uptime: the quick resets.
        let quick_resets = boots - 1;
        let mode =
            if quick_resets > policy.max_quick_resets { BootMode::Safe { quick_resets } } else { BootMode::Normal };
        Ok(BootGuard { policy, mode, boots, settled: false })
    }

    pub fn mode(&self) -> BootMode {
        self.mode
    }

    /// Boots in a row without a good uptime, this one included.
    pub fn boots(&self) -> u32 {
        self.boots
    }

    /// Tells the guard how long the chip has been up. Once it passes the policy's bound, the
    /// counter goes back to 0 (one write per boot). Returns whether it wrote.
    pub fn handle_uptime<F: Flash>(
        &mut self,
        store: &mut FlashStore<F>,
        uptime_ms: u64,
    ) -> Result<bool, flash::Error<F::Error>> {
        if self.settled || uptime_ms < self.policy.stable_after_ms {
            return Ok(false);
        }
        settle(store)?;
        self.settled = true;
        Ok(true)
    }
}

/// A restart the person asked for is not a crash: the counter goes back to 0 before it.
pub fn before_deliberate_restart<F: Flash>(store: &mut FlashStore<F>) -> Result<(), flash::Error<F::Error>> {
    settle(store)
}

fn settle<F: Flash>(store: &mut FlashStore<F>) -> Result<(), flash::Error<F::Error>> {
    if read_count(store)? == 0 {
        return Ok(());
    }
    store.replace(BOOT_KEY, b"boots 0\n")
}

/// The counter in flash; a missing or unreadable record is 0 (a damaged counter must not
/// lock the chip in safe mode, nor can it hide more than one crash loop's worth of resets).
fn read_count<F: Flash>(store: &FlashStore<F>) -> Result<u32, flash::Error<F::Error>> {
    let mut count = 0;
    store.read(BOOT_KEY, Order::NewestFirst, &mut |r| {
        count = core::str::from_utf8(r.payload)
            .ok()
            .and_then(|t| t.trim().strip_prefix("boots "))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        ControlFlow::Break(())
    })?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::RamFlash;

    type Store = FlashStore<RamFlash>;

    fn reboot(s: Store) -> Store {
        FlashStore::open(s.into_flash()).unwrap()
    }

    #[test]
    fn quick_resets_in_a_row_end_in_safe_mode_and_a_good_uptime_ends_it() {
        let policy = BootPolicy { max_quick_resets: 3, stable_after_ms: 60_000 };
        let mut s = FlashStore::open(RamFlash::new(512, 4)).unwrap();
        let mut modes = alloc::vec::Vec::new();
        for _ in 0..6 {
            let g = BootGuard::boot(&mut s, policy).unwrap();
            modes.push(g.mode());
            // A crash after 2 s: the next boot is a quick reset.
            s = reboot(s);
        }
        assert_eq!(
            modes,
            [
                BootMode::Normal,
                BootMode::Normal,
                BootMode::Normal,
                BootMode::Normal,
                BootMode::Safe { quick_resets: 4 },
                BootMode::Safe { quick_resets: 5 },
            ]
        );
        // The safe boot lives a minute: the counter is cleared, once.
        let mut g = BootGuard::boot(&mut s, policy).unwrap();
        assert_eq!(g.mode(), BootMode::Safe { quick_resets: 6 });
        assert!(!g.handle_uptime(&mut s, 59_999).unwrap());
        assert!(g.handle_uptime(&mut s, 60_000).unwrap());
        assert!(!g.handle_uptime(&mut s, 120_000).unwrap(), "one write per boot");
        let mut s = reboot(s);
        let g = BootGuard::boot(&mut s, policy).unwrap();
        assert_eq!((g.mode(), g.boots()), (BootMode::Normal, 1));
    }

    #[test]
    fn a_deliberate_restart_does_not_count_and_a_damaged_counter_reads_as_zero() {
        let policy = BootPolicy::default();
        let mut s = FlashStore::open(RamFlash::new(512, 4)).unwrap();
        for _ in 0..10 {
            BootGuard::boot(&mut s, policy).unwrap();
            before_deliberate_restart(&mut s).unwrap();
            s = reboot(s);
        }
        assert_eq!(BootGuard::boot(&mut s, policy).unwrap().mode(), BootMode::Normal);
        s.replace(BOOT_KEY, b"boots lots\n").unwrap();
        assert_eq!(BootGuard::boot(&mut s, policy).unwrap().boots(), 1);
    }
}
