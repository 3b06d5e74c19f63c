//! `chela mcp serve`: Chela as an MCP server on stdin/stdout (see `crate::channels::mcp`).
//!
//! It loads the workspace as the daemon does (the same tools, the same turn path for `chat`),
//! but serves no channel and no gateway: the client that started it is its only user. stdout
//! carries the protocol alone; everything else Chela says goes to stderr.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;

use crate::daemon::Daemon;
use crate::workspace::Workspace;

pub async fn run(ws: Workspace) -> Result<ExitCode> {
    let daemon = Arc::new(Daemon::load(ws)?);
    if let Err(why) = daemon.app() {
        chela_log::warn!("no model is configured, so the chat tool answers with what to set: {why}");
    }
    crate::channels::mcp::stdio::serve(daemon, tokio::io::stdin(), tokio::io::stdout()).await?;
    Ok(ExitCode::SUCCESS)
}
