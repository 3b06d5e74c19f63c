//! The Model Context Protocol as a client: [`client`] turns each configured MCP server into a
//! capability group `mcp_<name>`. Chela as an MCP server, so other assistants (Claude Desktop,
//! Cursor, the MCP Inspector) can use its tools and talk to it, is a channel:
//! [`crate::channels::mcp`].
//!
//! The design, with the wire facts and the peers' quirks, is in `docs/DESIGN.md` ("MCP").

pub mod client;
pub mod device;
pub mod endpoint;
