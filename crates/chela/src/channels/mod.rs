//! The ways people and programs talk to Chela, one module each: the messaging platforms and
//! MCP-serve's `chat`. A channel turns platform
//! events into [`crate::daemon::Incoming`] messages and sends the answers back; it never runs a
//! turn itself.

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
