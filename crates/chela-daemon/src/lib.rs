//! Chela's daemon: what sits between the runtime and the channels.
//!
//! From the bottom: the served HTTP API's request rules (`serve`: limits, admission, streamed
//! bodies), the job store (`scheduler`) and the rule store with its event queue (`router`), and
//! the daemon itself (`daemon`: who may talk, the sessions' inboxes, answers delivered in
//! per-chat order and flushed at stop). A module imports only modules listed before it here. The
//! `chela` crate above adds the channels, the gateway, the job and rule tasks and the commands,
//! and re-exports these modules under their old names (`chela::daemon`, …).

// The ground floor and the runtime; `crate::config::…` and `crate::tools::…` paths read as they
// did inside `chela`.
use chela_infra::{authority, clock, config, shutdown, tasks, tzdb, workspace};
#[cfg(all(test, feature = "board"))]
use chela_runtime::board;
#[cfg(test)]
use chela_runtime::testing;
use chela_runtime::{access, app, automation, mcp, session, tools, turn};

pub mod serve;

pub mod scheduler;

pub mod router;

pub mod daemon;

// After start-up and when quiet: the clean file pages given back (Linux).
#[cfg(target_os = "linux")]
pub mod trim;
