//! `chela mcp list|test|endpoint`: the MCP servers Chela uses as capability groups, and the
//! tokens of tool hosts that dial the MCP endpoint.

use std::process::ExitCode;

use anyhow::Result;

use crate::app::Base;
use crate::args::McpCmd;

pub async fn run(base: Base, cmd: McpCmd) -> Result<ExitCode> {
    let (tb, mcp) = (&base.tools.toolbox, &base.tools.mcp);
    let code = match cmd {
        McpCmd::EndpointAdd(name) => {
            let store = crate::mcp::endpoint::Endpoints::open(&base.ws);
            let token = store.add(&name, base.clock.unix_secs_u64()).map_err(anyhow::Error::msg)?;
            outln!(
                "MCP endpoint `{name}`: token {token}\n(shown once; kept hashed). A tool host dials \
                 ws://<gateway.listen>{}?token={token} and its tools become the group endpoint_{name}, e.g.\n\
                 MCP_ENDPOINT='ws://127.0.0.1:18789{}?token={token}' mcp2xiaozhi run time",
                crate::mcp::endpoint::PATH,
                crate::mcp::endpoint::PATH
            );
            ExitCode::SUCCESS
        }
        McpCmd::EndpointList => {
            let state = crate::mcp::endpoint::Endpoints::open(&base.ws).load().map_err(anyhow::Error::msg)?;
            if state.endpoints.is_empty() {
                outln!("No MCP endpoint tokens are issued. Issue one with `chela mcp endpoint add NAME`.");
            }
            for e in state.endpoints {
                outln!("{}  group endpoint_{}  issued {}", e.name, e.name, e.created);
            }
            ExitCode::SUCCESS
        }
        McpCmd::EndpointRemove(name) => {
            if crate::mcp::endpoint::Endpoints::open(&base.ws).remove(&name).map_err(anyhow::Error::msg)? {
                outln!(
                    "The token of MCP endpoint `{name}` no longer works; a running `chela run` hangs up on a host \
                     connected with it within a second or two, and its tools go."
                );
                ExitCode::SUCCESS
            } else {
                outln!("No MCP endpoint is called `{name}` (see `chela mcp endpoint list`).");
                ExitCode::FAILURE
            }
        }
        McpCmd::List => {
            mcp.ensure(tb).await;
            let list = mcp.status();
            if list.is_empty() {
                outln!("No MCP servers are configured. Add one to chela.toml, e.g.\n\n{EXAMPLE}");
            }
            for s in list {
                let era = s.era.as_deref().unwrap_or("-");
                outln!("{}  [{}]  {}  era: {era}  tools: {}", s.name, s.transport, s.state, s.tools);
            }
            ExitCode::SUCCESS
        }
        McpCmd::Test(name) => match mcp.test(&name, tb).await {
            Ok((era, tools)) => {
                outln!("{name}: connected, protocol {}, {} tools", era.label(), tools.len());
                for (id, t) in tools {
                    let shown = if id.ends_with(&t.name) { String::new() } else { format!(" (MCP name: {})", t.name) };
                    outln!("    {id}{shown}: {}", t.description.lines().next().unwrap_or(""));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{name}: {e}");
                ExitCode::FAILURE
            }
        },
    };
    mcp.shutdown().await;
    Ok(code)
}

const EXAMPLE: &str = "\
[mcp.servers.time]
command = \"uvx\"
args = [\"mcp-server-time\", \"--local-timezone=UTC\"]";
