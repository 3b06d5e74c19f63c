//! An image built without the `feishu` feature (`CHELA_FIRMWARE_FEATURES` without it; both
//! chips' default images have it): the same items as `feishu.rs`, with nothing behind them. The console
//! refuses Feishu's commands (`Status::feishu` is false); these say so for a `channel feishu`
//! saved by an image that had it, and never pretend to run it.

use chela_chip::{Board, say};
use embassy_executor::Spawner;
use embassy_net::Stack;

use crate::Device;
use crate::board::Esp;

pub const FEISHU: bool = false;
pub const SOCKETS: usize = 0;

/// When the console last said that this image leaves out Feishu (once a minute at most).
pub type State = Option<u64>;

/// What the console's log says: how to get an image with Feishu, and what to do meanwhile.
const LEFT_OUT: &str = "[feishu] this image leaves out Feishu (build it with the feishu feature, both chips' \
                        default); `channel telegram` on the console";

pub fn start(_: Spawner, _: Stack<'static>, _: &Esp) {}

impl Device {
    /// Reached only with `channel feishu` saved by an image that had it: said, then idle.
    pub(crate) async fn feishu(&mut self) {
        let now = self.chip.board.now_ms();
        if self.feishu.is_none_or(|t| now >= t + 60_000) {
            say!(&self.chip.board, "{LEFT_OUT}");
            self.feishu = Some(now);
        }
        self.idle(1000).await;
    }

    pub(crate) fn feishu_off(&mut self) {}

    pub(crate) async fn feishu_job(&mut self, id: &str, _: &str, _: &str, _: &str) {
        say!(&self.chip.board, "[cron] {id}: its chat is on Feishu, which this image leaves out; skipped");
    }
}
