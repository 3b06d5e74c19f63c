//! An image built without the `connected` feature (`CHELA_FIRMWARE_FEATURES=""
//! firmware/build.sh`): the same items as `connected.rs`, with nothing behind them. The console
//! answers their commands with [`LEFT_OUT`]; nothing here pretends to do their work.

use alloc::string::String;

use chela_chip::say;
use chela_chip::turn::Chip;
use chela_core::console::{ChipConfig, Console};
use embassy_executor::Spawner;
use embassy_net::Stack;
use esp_hal::peripherals::{GPIO9, WIFI};

use crate::Device;
use crate::board::Esp;
use crate::flash::{self, Partition};

pub use chela_chip::turn::run as run_turn;

/// What the console's commands for OTA, the gateway, web_search, the heartbeat and the proxy say.
pub const LEFT_OUT: Option<&str> = Some(chela_chip::console::WITHOUT_CONNECTED);
pub const SOCKETS: usize = 0;
pub const GATEWAY: bool = false;

/// No gateway: no client ever asks.
pub enum Ask {}

pub struct Parts;
pub struct Booted;

pub fn boot(_: flash::Shared) -> Booted {
    Booted
}

pub async fn portal_if_wanted(
    _: Spawner,
    wifi: WIFI<'static>,
    _: GPIO9<'static>,
    _: &mut Chip<Partition, Esp>,
    _: &mut Console,
    _: u64,
) -> WIFI<'static> {
    wifi
}

pub fn start(_: Spawner, _: Stack<'static>, _: Booted, _: &Chip<Partition, Esp>) -> Parts {
    Parts
}

pub fn take_settings(_: &ChipConfig) {}

/// Reached only if the console's check is bypassed: said, never silently dropped.
pub fn want_update(board: &Esp, _: String, _: bool) {
    say!(board, "[ota] this image leaves out over-the-air updates");
}

pub async fn asks() -> Ask {
    core::future::pending().await
}

impl Device {
    pub(crate) async fn answer_gateway(&mut self, ask: Ask) {
        match ask {}
    }

    pub(crate) async fn connected_up(&mut self, _: u64) {}

    pub(crate) async fn beat(&mut self, _: chela_chip::console::Channels) {}

    /// Never reached: without the gateway no chat is on it (`Cron::route` refuses "ws" jobs).
    pub(crate) async fn gateway_job(&mut self, id: &str, _: &str, _: &str) {
        say!(&self.chip.board, "[cron] {id}: its chat is on the gateway, which this image leaves out");
    }
}
