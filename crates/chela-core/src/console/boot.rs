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
mod tests;
