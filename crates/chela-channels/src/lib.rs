//! The ways people and programs talk to Chela, one module each: the messaging platforms and
//! MCP-serve's `chat`. A channel turns platform
//! events into [`crate::daemon::Incoming`] messages and sends the answers back; it never runs a
//! turn itself.
//!
//! The crate sits on the daemon (`chela-daemon`) and the runtime below it; the `chela` crate above
//! adds the gateway, the job and rule tasks and the commands, and re-exports this crate as
//! `chela::channels`.

// The lower crates' modules under the names they have inside `chela`, so `crate::daemon::…`,
// `crate::serve::…` and `crate::turn::…` paths read as they did there; and the crate itself as
// `channels`, so `crate::channels::…` paths still name a sibling channel.
use crate as channels;
use chela_daemon::{daemon, serve};
use chela_infra::{clock, config, tasks, workspace};
use chela_net as net;
#[cfg(feature = "voice")]
use chela_runtime::devices;
#[cfg(test)]
use chela_runtime::testing;
use chela_runtime::{access, app, tools, turn};
#[cfg(feature = "voice")]
use chela_voice as voice;

pub mod feishu;
// What each channel reports of its connection: kept by the daemon, below the channels.
pub use crate::daemon::live;
pub mod mcp;
pub mod openai;
pub mod telegram;
pub mod ws;
#[cfg(feature = "voice")]
pub mod xiaozhi;

#[cfg(test)]
mod tests_send_tools;
