//! The messaging platforms `chela run` serves, one module each. A channel turns platform
//! events into [`crate::daemon::Incoming`] messages and answers back; it never runs a turn
//! itself.

pub mod telegram;
