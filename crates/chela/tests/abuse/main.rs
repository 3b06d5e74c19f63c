//! The abuse corpus: hostile input against the real `chela` binary and the library's public
//! parts (oversize and broken bodies, floods, planted files, escapes from the workspace, hostile
//! peers), one module per surface. Each case checks the refusal, the bound, and that Chela still
//! serves afterwards.
//!
//! One test binary with modules keeps link time down.

mod access;
mod authority;
mod board;
mod config;
mod files;
mod gateway;
mod loopback;
mod mcp;
mod mcp_endpoint;
mod mcp_serve;
mod model;
mod router;
#[cfg(feature = "voice")]
mod voice;
mod xiaozhi;
mod xiaozhi_identity;
#[cfg(feature = "voice")]
mod xiaozhi_mqtt;
mod xiaozhi_ws;
