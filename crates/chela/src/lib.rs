//! The modules of the `chela` binary.
//!
//! What it is: the host side of Chela (std + tokio): the command line, configuration layers,
//! the workspace files, the HTTP client, the providers, the tools and the driver that steps
//! `chela_core::agent::AgentRun`. `src/main.rs` is a thin wrapper around [`cmd::run`].
//!
//! What it is not: a library with a stable API. It is a library target only so the benchmarks
//! can measure the real code (`benches/prompt.rs` calls [`memory::system_prompt`],
//! `benches/history.rs` loads a session through [`storage::FileStorage`]); only what
//! they and `main` need is public, so the compiler still reports dead code everywhere else.

// First, so its `outln!`/`out!` macros are in scope for every module below.
#[macro_use]
pub mod out;
pub mod access;
// The authority rule: the files the model never changes, and the seals of Chela's records.
pub mod args;
pub mod authority;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod devices;
pub mod localtime;
pub mod lock;
pub mod log;
#[cfg(feature = "lua")]
pub mod lua;
pub mod memory;
mod router;
pub mod scheduler;
pub mod skills;
pub mod storage;
// Time zones from the system's tz database; public for benches/prompt.rs.
pub mod tzdb;
// The voice pipeline: its own crate (it needs only chela-net and the core's keys); `crate::voice::…` still works.
#[cfg(feature = "voice")]
pub use chela_voice as voice;
pub mod workspace;
// Whole-or-nothing file writes and bounded reads, under the workspace and the seals.
pub mod fsio;

mod app;
mod automation;
#[cfg(feature = "board")]
pub mod board;
mod channels;
mod chat;
mod compact;
// Public while the services that drive it land one by one; channels are its callers.
pub mod daemon;
mod gateway;
mod keyrule;
// Public for benches/mcp.rs (the connection and the wire decisions).
pub mod mcp;
// Outbound HTTP: its own crate (it imports nothing of the host); `crate::net::…` still works.
pub use chela_net as net;
mod provider;
mod session;
// Owned tasks: what every spawn in the host goes through.
mod tasks;
mod tools;
mod turn;
// Images and the model: the bounds of a turn, and one-shot questions about an image.
mod vision;

/// For the escape-and-abuse corpus of the file tools (`tests/abuse/files.rs`) only.
#[cfg(feature = "files")]
#[doc(hidden)]
pub use app::ManualCalls;
