//! The Model Context Protocol as a client: [`client`] turns each configured MCP server into a
//! capability group `mcp_<name>`. Chela as an MCP server, so other assistants (Claude Desktop,
//! Cursor, the MCP Inspector) can use its tools and talk to it, is a channel:
//! [`crate::channels::mcp`].
//!
//! Wire facts and gotchas are in `shared/docs/protocols.md` §4; the design is in
//! `docs/DESIGN.md` ("MCP client" and the server's section).

pub mod client;
pub mod device;
pub mod endpoint;
