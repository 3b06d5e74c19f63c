//! Feishu / Lark: the long connection's protobuf frames ([`frame`]), the joining of events split
//! over several frames ([`parts`]), and the event JSON ([`event`]).
//!
//! The long connection is a WebSocket whose binary messages are [`frame::Frame`]s. Control
//! frames (`method` 0) carry ping and pong; data frames (`method` 1) carry events, possibly in
//! parts, and each is acknowledged with [`frame::Frame::ack`]. No IO here: the host owns the
//! socket and the clock.

pub mod event;
pub mod frame;
pub mod parts;
