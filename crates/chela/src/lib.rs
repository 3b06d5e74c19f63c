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
pub use chela_infra::{
    authority, clock, config, fsio, localtime, lock, log, out, outln, shutdown, storage, tzdb, workspace,
};
use chela_infra::{keyrule, tasks};

pub mod access;
pub mod args;
pub mod cmd;
pub mod devices;
#[cfg(feature = "lua")]
pub mod lua;
pub mod memory;
mod router;
pub mod scheduler;
pub mod skills;
// The voice pipeline: its own crate (it needs only chela-net and the core's keys); `crate::voice::…` still works.
#[cfg(feature = "voice")]
pub use chela_voice as voice;

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
// Public for benches/mcp.rs (the connection and the wire decisions).
pub mod mcp;
// Outbound HTTP: its own crate (it imports nothing of the host); `crate::net::…` still works.
pub use chela_net as net;
mod provider;
mod serve;
mod session;
mod tools;
mod turn;
// Images and the model: the bounds of a turn, and one-shot questions about an image.
mod vision;

/// For the fuzz targets only: the MQTT side of a xiaozhi device connection, bytes in, events out.
#[cfg(feature = "voice")]
#[doc(hidden)]
pub use channels::xiaozhi::mqtt_wire as xiaozhi_mqtt_wire;

/// For the escape-and-abuse corpus of the file tools (`tests/abuse/files.rs`) only.
#[cfg(feature = "files")]
#[doc(hidden)]
pub use app::ManualCalls;
