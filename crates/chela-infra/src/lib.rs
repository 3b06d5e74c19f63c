//! The ground floor of Chela's host: what every other part stands on and which knows none of
//! them. The workspace folder and its files (whole-or-nothing writes, bounded reads, locks,
//! the authority rule and its seals), the configuration layers, session storage, the clock,
//! time zones, owned tasks, the stop signal, the log and command output.
//!
//! It depends on `chela-core` and, for its URL and proxy parsers, on `chela-net`; nothing of
//! the host. The `chela` crate re-exports every module under its old name
//! (`chela::workspace`, `chela::config`, …).

// First, so its `outln!`/`out!` macros (exported at this crate's root) are documented with it.
pub mod out;

// The authority rule: the files the model never changes, and the seals of Chela's records.
pub mod authority;
pub mod clock;
pub mod config;
// Whole-or-nothing file writes and bounded reads, under the workspace and the seals.
pub mod fsio;
// When a provider needs no API key.
pub mod keyrule;
pub mod localtime;
pub mod lock;
pub mod log;
// The one stop signal: the daemon triggers it, every long-running part below it watches it.
pub mod shutdown;
// One stable sort instance for the cold lists of every host crate.
pub mod sort;
pub mod storage;
// Chela's own TOML reader and writer, for the configuration files.
pub mod toml;
// Owned tasks: what every spawn in the host goes through.
pub mod tasks;
// Time zones from the system's tz database.
pub mod tzdb;
pub mod workspace;
