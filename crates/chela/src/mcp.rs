//! The Model Context Protocol, both ways: [`client`] turns each configured MCP server into a
//! capability group `mcp_<name>`.
//!
//! Wire facts and gotchas are in `shared/docs/protocols.md` §4; the design is in
//! `docs/DESIGN.md` ("MCP client").

pub mod client;
