//! The HTTP server's low parts, below both the gateway's router and the channels it serves:
//! the response and error types, the bounds ([`http::Limits`]), bounded body reading, the
//! connection set a stop waits for ([`http::Conns`]), who gets a connection or a WebSocket
//! ([`admit`]) and a streamed response body ([`stream`]). A channel takes these from here, not
//! from the gateway, so the gateway can import the channels without an import running back.

pub mod admit;
pub mod http;
pub mod stream;
