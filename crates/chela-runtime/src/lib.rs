//! Chela's runtime: what one conversation turn needs, with no channel, daemon or command in it.
//!
//! From the bottom: the services (`access`, `devices`, `provider`, `skills`, `memory`), the
//! toolbox and the groups that need only a `ToolCtx` (`tools`), the tool hosts with their groups
//! (`lua`, `mcp`, `vision`, `automation`, `board`), and the conversation (`turn`, `app`,
//! `compact`, `session`). A module imports only modules listed before it here; the `chela` crate
//! above wires them into the daemon, the channels and the commands, and re-exports them under
//! their old names (`chela::tools`, …).

// The ground floor; `crate::workspace::…` paths read as they did inside `chela`.
use chela_infra::{authority, clock, config, keyrule, localtime, lock, shutdown, storage, tasks, tzdb, workspace};
// Outbound HTTP.
use chela_net as net;

pub mod access;
pub mod devices;
pub mod memory;
pub mod provider;
pub mod skills;
pub mod tools;
pub mod usage;

pub mod automation;
#[cfg(feature = "board")]
pub mod board;
#[cfg(feature = "lua")]
pub mod lua;
pub mod mcp;
// Images and the model: the bounds of a turn, and one-shot questions about an image.
pub mod vision;

pub mod app;
pub mod compact;
pub mod session;
pub mod turn;

#[cfg(test)]
mod fake_app;

/// The fixtures of the tests of this crate and of the crates above it.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
