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
            let url = format!(
                "ws://{}{}?token={token}",
                dial_addr(base.cfg.settings().gateway.addr()),
                crate::mcp::endpoint::PATH
            );
            outln!(
                "MCP endpoint `{name}`: token {token}\n(shown once; kept hashed). A tool host dials \
                 {url} and its tools become the group endpoint_{name}, e.g.\n\
                 MCP_ENDPOINT='{url}' mcp2xiaozhi run time"
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
                eprintln!("chela: {name}: {e}");
                ExitCode::FAILURE
            }
        },
    };
    mcp.shutdown().await;
    Ok(code)
}

/// Where a tool host on this machine reaches the gateway listening on `listen`: a wildcard
/// address (`0.0.0.0`, `[::]`) is dialled through loopback; a host elsewhere uses this
/// machine's name or address with the same port.
fn dial_addr(listen: std::net::SocketAddr) -> std::net::SocketAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, listen.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, listen.port()).into(),
        _ => listen,
    }
}

const EXAMPLE: &str = "\
[mcp.servers.time]
command = \"uvx\"
args = [\"mcp-server-time\", \"--local-timezone=UTC\"]";
