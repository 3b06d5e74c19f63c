//! `chela mcp list|test`: the MCP servers Chela uses as capability groups.

use std::process::ExitCode;

use anyhow::Result;

use crate::app::Base;
use crate::args::McpCmd;

pub async fn run(base: Base, cmd: McpCmd) -> Result<ExitCode> {
    let tb = &base.toolbox;
    let code = match cmd {
        McpCmd::List => {
            tb.mcp().ensure(tb).await;
            let list = tb.mcp().status();
            if list.is_empty() {
                outln!("No MCP servers are configured. Add one to chela.toml, e.g.\n\n{EXAMPLE}");
            }
            for s in list {
                let era = s.era.as_deref().unwrap_or("-");
                outln!("{}  [{}]  {}  era: {era}  tools: {}", s.name, s.transport, s.state, s.tools);
            }
            ExitCode::SUCCESS
        }
        McpCmd::Test(name) => match tb.mcp().test(&name, tb).await {
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
    tb.mcp().shutdown().await;
    Ok(code)
}

const EXAMPLE: &str = "\
[mcp.servers.time]
command = \"uvx\"
args = [\"mcp-server-time\", \"--local-timezone=UTC\"]";
