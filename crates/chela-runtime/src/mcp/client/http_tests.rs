//! The client over HTTP against real peers: npm's server-everything (`streamableHttp` and the
//! older `sse` transport) and the Python SDK fixture served over Streamable HTTP in each era.
//! Each server gets a free loopback port (bound, released, handed over) and runs until the test
//! ends (`kill_on_drop`).

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use chela_core::cap::{Caller, Scope};
use serde_json::json;

use super::Clients;
use crate::config::McpServer;
use crate::net::{ClientOptions, HttpClient};
use crate::testing::Fixture;
use crate::tools::{ToolErrorKind, ToolResult};
use chela_testkit::peers::mcp_peers as peers;

/// A peer listening on `port`, stopped when dropped.
struct Peer {
    _child: tokio::process::Child,
    port: u16,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

async fn start(command: &str, args: &[&str], env: &[(&str, String)]) -> Peer {
    let port = free_port();
    let child = tokio::process::Command::new(command)
        .args(args)
        .args(if command.ends_with("python") { vec!["--http".to_owned(), port.to_string()] } else { vec![] })
        .envs(env.iter().map(|(k, v)| (*k, v.clone())))
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Python imports its SDK for seconds on a busy machine: wait (bounded) until it listens.
    let deadline = Instant::now() + Duration::from_secs(90);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "{command} did not listen on {port}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Peer { _child: child, port }
}

fn everything() -> String {
    peers().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js").display().to_string()
}

async fn fixture(era: &str, log: &std::path::Path) -> Peer {
    let python = peers().join("venv/bin/python").display().to_string();
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/fixtures/server.py")
        .display()
        .to_string();
    start(&python, &[&script, "--era", era], &[("FIXTURE_LOG", log.display().to_string())]).await
}

fn remote(url: String, timeout: u64) -> McpServer {
    let mut s = McpServer::default();
    s.url = url;
    s.timeout_secs = timeout;
    s
}

struct Setup {
    fx: Fixture,
    clients: Clients,
}

impl Setup {
    fn new(servers: Vec<(&str, McpServer)>) -> Setup {
        let map: BTreeMap<String, McpServer> = servers.into_iter().map(|(n, s)| (n.to_owned(), s)).collect();
        let http = HttpClient::new(ClientOptions::default());
        Setup { fx: Fixture::new(&[("tools.timeout_secs", "120")]), clients: Clients::new(&map, &http) }
    }

    async fn call(&self, id: &str, args: serde_json::Value) -> ToolResult {
        self.fx.toolbox.call(&self.fx.ctx(), id, &args.to_string(), Caller::Model, Scope::default()).await
    }

    fn status(&self, name: &str) -> super::Status {
        self.clients.status().into_iter().find(|s| s.name == name).unwrap()
    }

    fn tool_ids(&self, group: &str) -> Vec<String> {
        self.fx.toolbox.registry().in_group(group).map(|c| c.id.to_string()).collect()
    }
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn log_has(path: &std::path::Path, line: &str) -> bool {
    std::fs::read_to_string(path).unwrap_or_default().lines().any(|l| l == line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http_and_over_http_sse() {
    let node = "node";
    let streamable = start(node, &[&everything(), "streamableHttp"], &[]).await;
    let sse = start(node, &[&everything(), "sse"], &[]).await;
    let s = Setup::new(vec![
        ("ev", remote(format!("http://127.0.0.1:{}/mcp", streamable.port), 60)),
        ("old", remote(format!("http://127.0.0.1:{}/sse", sse.port), 60)),
    ]);
    s.clients.ensure(&s.fx.toolbox).await;
    let ev = s.status("ev");
    assert_eq!((ev.transport.as_str(), ev.state.as_str()), ("http", "connected"), "{ev:?}");
    assert!(ev.era.as_deref().is_some_and(|e| e.ends_with("(initialize)")), "{ev:?}");
    assert_eq!(s.call("mcp_ev_echo", json!({"message": "over http"})).await.unwrap(), "Echo: over http");
    let sum = s.call("mcp_ev_get-sum", json!({"a": 2, "b": 40})).await.unwrap();
    assert!(sum.contains("42"), "{sum}");
    let img = s.call("mcp_ev_get-tiny-image", json!({})).await.unwrap();
    assert!(img.contains("[image: image/png, "), "{img}");

    // The 2024-11-05 transport: the POST of initialize is refused, the GET stream is used.
    let old = s.status("old");
    assert_eq!((old.transport.as_str(), old.state.as_str()), ("http+sse", "connected"), "{old:?}");
    assert!(old.tools > 3, "{old:?}");
    assert_eq!(s.call("mcp_old_echo", json!({"message": "over sse"})).await.unwrap(), "Echo: over sse");
    s.clients.shutdown().await;
    assert!(s.clients.status().iter().all(|st| st.state.starts_with("stopped")), "{:?}", s.clients.status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_fixture_over_http_pages_relists_and_cancels() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fixture.log");
    let peer = fixture("legacy", &log).await;
    let s = Setup::new(vec![("fx", remote(format!("http://127.0.0.1:{}/mcp", peer.port), 3))]);
    s.clients.ensure(&s.fx.toolbox).await;
    let st = s.status("fx");
    // The stateless probe got a plain 400: the handshake era, with a session.
    assert_eq!(st.era.as_deref(), Some("2025-11-25 (initialize)"), "{st:?}");
    assert_eq!(s.tool_ids("mcp_fx").len(), 15, "every page of 4 was read");
    assert_eq!(s.call("mcp_fx_echo", json!({"text": "hi"})).await.unwrap(), "echo: hi (era 2025-11-25)");
    assert_eq!(s.call("mcp_fx_many_t6", json!({})).await.unwrap(), "many.t6 ran");
    let e = s.call("mcp_fx_fail", json!({})).await.unwrap_err();
    assert_eq!(e.0, "the fixture tool failed on purpose");

    assert_eq!(s.call("mcp_fx_add_tool", json!({})).await.unwrap(), "added");
    until("the new tool is registered", || s.tool_ids("mcp_fx").contains(&"mcp_fx_extra_tool".to_owned())).await;
    assert_eq!(s.call("mcp_fx_extra_tool", json!({})).await.unwrap(), "extra.tool ran");

    let e = s.call("mcp_fx_slow", json!({"seconds": 60})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::TimedOut, "{e}");
    assert!(e.0.contains("did not answer tools/call within 3"), "{e}");
    until("the fixture saw notifications/cancelled", || log_has(&log, "cancelled")).await;
    assert!(s.call("mcp_fx_echo", json!({"text": "x"})).await.is_ok());
    s.clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_fixture_over_http_is_stateless_and_listens_for_changes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fixture.log");
    let peer = fixture("dual", &log).await;
    let s = Setup::new(vec![("fx", remote(format!("http://127.0.0.1:{}/mcp", peer.port), 3))]);
    s.clients.ensure(&s.fx.toolbox).await;
    let st = s.status("fx");
    assert_eq!(st.era.as_deref(), Some("2026-07-28 (stateless)"), "{st:?}");
    assert_eq!(s.tool_ids("mcp_fx").len(), 15);
    assert_eq!(s.call("mcp_fx_echo", json!({"text": "hi"})).await.unwrap(), "echo: hi (era 2026-07-28)");
    // The change comes on the subscriptions/listen stream.
    assert_eq!(s.call("mcp_fx_add_tool", json!({})).await.unwrap(), "added");
    until("the new tool is registered", || s.tool_ids("mcp_fx").contains(&"mcp_fx_extra_tool".to_owned())).await;
    let e = s.call("mcp_fx_slow", json!({"seconds": 60})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::TimedOut, "{e}");
    assert!(s.call("mcp_fx_echo", json!({"text": "x"})).await.is_ok());
    s.clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_nobody_listens_on_gets_a_sentence_naming_the_url() {
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    let s = Setup::new(vec![("gone", remote(url.clone(), 5))]);
    s.clients.ensure(&s.fx.toolbox).await;
    let st = s.status("gone");
    assert!(st.state.contains(&format!("MCP server gone at {url} cannot be reached")), "{st:?}");
    assert!(st.state.contains("could not connect"), "{st:?}");
}
