//! The messaging platforms `chela run` serves: each turns its events into
//! [`crate::daemon::Incoming`] messages and sends the answers back.

pub mod feishu;
