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

// The ground floor (workspace, files, configuration, storage, clock, tasks, log, output) is
// its own crate; every `crate::workspace::…` path of the host still works through these names.
// `#[macro_use]` puts its `outln!`/`out!` macros in scope for every module below.
#[macro_use]
extern crate chela_infra;
use chela_infra::tasks;
pub use chela_infra::{
    authority, clock, config, fsio, localtime, lock, log, out, outln, shutdown, storage, toml, tzdb, workspace,
};

// The runtime (toolbox and tools, skills, Lua, the MCP client, providers, turns, sessions, the
// board): its own crate; every `crate::tools::…` path of the host still works through these names.
#[cfg(feature = "board")]
pub use chela_runtime::board;
#[cfg(feature = "lua")]
pub use chela_runtime::lua;
pub use chela_runtime::{access, devices, mcp, memory, skills};
use chela_runtime::{app, automation, provider, session, tools, turn, vision};

// The daemon (admission, per-chat delivery, the job and rule stores, the served API's request
// rules): its own crate; every `crate::daemon::…` path of the host still works through these names.
// Public while the services that drive it land one by one; channels are its callers.
pub use chela_daemon::{daemon, scheduler};
use chela_daemon::{router, serve};

pub mod args;
pub mod cmd;
// The voice pipeline: its own crate (it needs only chela-net and the core's keys); `crate::voice::…` still works.
#[cfg(feature = "voice")]
pub use chela_voice as voice;

// The channels: their own crate; every `crate::channels::…` path of the host still works through
// this name. Public for the fuzz targets (the MQTT connection rules of a xiaozhi device), not an API.
#[doc(hidden)]
pub use chela_channels as channels;
mod chat;
mod gateway;
// The scheduler and router tasks: above the daemon, which their stores sit below.
mod jobs;
// Outbound HTTP: its own crate (it imports nothing of the host); `crate::net::…` still works.
pub use chela_net as net;

/// For the escape-and-abuse corpus of the file tools (`tests/abuse/files.rs`) only.
#[cfg(feature = "files")]
#[doc(hidden)]
pub use chela_runtime::app::ManualCalls;
