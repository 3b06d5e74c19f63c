//! The messaging platforms `chela run` serves, one module each. A channel turns platform
//! events into [`crate::daemon::Incoming`] messages and sends the answers back; it never runs a
//! turn itself.

pub mod feishu;
pub mod telegram;
