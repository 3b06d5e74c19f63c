//! MCP, the Model Context Protocol: Chela as an MCP server ([`serve`]), so other assistants
//! (Claude Desktop, Cursor, the MCP Inspector) can use its tools and talk to it.

pub mod serve;
