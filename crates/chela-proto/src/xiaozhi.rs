//! xiaozhi-esp32's device protocol: the JSON messages of its WebSocket channel ([`message`]),
//! the binary audio frames of protocol versions 1, 2 and 3 ([`frame`]), and the HTTP OTA check a
//! device makes after it joins Wi-Fi ([`ota`]).
//!
//! What it is: types and codecs both sides can use (the server in `chela`, a chip-side client
//! on `no_std`). What it is not: a connection. Nothing here reads a socket or a clock; the
//! driver hands in one WebSocket message (text or binary) or one HTTP body at a time, and sends
//! out what the encoders write. Every length is bounded before anything is allocated for it.
//!
//! How to drive it: for a text message call [`message::parse`] (an unknown `type` is
//! [`message::MessageError::UnknownType`], so the driver can log and ignore it); for a binary one
//! call [`frame::parse`] with the protocol version the device announced (`Protocol-Version`
//! header, or the `websocket.version` the OTA answer gave it). Encode the other way with
//! [`message::Message::to_json`] and [`frame::encode`].

pub mod frame;
pub mod message;
pub mod ota;
pub mod udp;
