//! Chela's agent core: decisions without IO.
//!
//! What it is: the agent turn as a value you step ([`agent::AgentRun`]), history trimming and
//! repair ([`history`]) and compaction into a summary ([`compaction`]), the capability registry
//! with its enable and visibility controls ([`cap`]), the session file format ([`session`]) and
//! the storage contract ([`storage`]) that sessions and memory entries are read and written
//! through, the chip's wear-levelled record store on raw flash that implements it ([`flash`]),
//! the timing of automation: time zones without `std` ([`zone`]), scheduled jobs and their
//! next fire ([`schedule`]) and the heartbeat's rules ([`heartbeat`]), and the event router
//! ([`router`]): the rules of `rules.json` that act on events without the model; and the
//! tools the host and the chip both offer, as one contract ([`contract`]).
//!
//! What it is not: it opens no file or socket and reads no clock. Time comes in as an argument;
//! IO happens in the drivers (the `chela` binary on tokio, the firmware on embassy), which feed
//! results back. It is `no_std` + `alloc` so the same decisions run on an ESP32-C3.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod access;
pub mod agent;
pub mod cap;
pub mod compaction;
pub mod config;
pub mod console;
pub mod contract;
pub mod exchange;
pub mod flash;
pub mod heartbeat;
pub mod history;
pub mod memory;
pub mod prompt;
pub mod retry;
pub mod router;
pub mod schedule;
pub mod session;
pub mod skills;
pub mod sort;
pub mod storage;
pub mod text;
pub mod usage;
pub mod zone;

pub use chela_proto as proto;
