//! The client against real peers: the fixture server written with the official Python SDK
//! (`tests/mcp/fixtures/server.py`, both eras), PyPI's mcp-server-time and npm's
//! server-everything. `tests/mcp/install-peers.sh` installs them under target/ on first use.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use chela_core::cap::{Caller, Scope};
use serde_json::json;

use super::Clients;
use super::wire::Era;
use crate::config::McpServer;
use crate::testing::Fixture;
use crate::tools::{ToolErrorKind, ToolResult};

use chela_testkit::peers::mcp_peers as peers;

fn python() -> String {
    chela_testkit::peers::mcp_python()
}

fn fixture_path() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/fixtures/server.py").display().to_string()
}

fn server(command: String, args: &[&str], log: Option<&std::path::Path>, timeout: u64) -> McpServer {
    let mut s = McpServer::default();
    s.command = command;
    s.args = args.iter().map(|a| (*a).to_owned()).collect();
    if let Some(log) = log {
        s.env.insert("FIXTURE_LOG".into(), log.display().to_string());
    }
    s.timeout_secs = timeout;
    s
}

fn fixture(era: &str, log: &std::path::Path, timeout: u64) -> McpServer {
    server(python(), &[&fixture_path(), "--era", era], Some(log), timeout)
}

struct Setup {
    fx: Fixture,
    clients: Clients,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(servers: impl FnOnce(&std::path::Path) -> Vec<(&'static str, McpServer)>) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let map: BTreeMap<String, McpServer> =
            servers(dir.path()).into_iter().map(|(n, s)| (n.to_owned(), s)).collect();
        Setup {
            fx: Fixture::new(&[("tools.timeout_secs", "120")]),
            clients: Clients::new(&map, &crate::net::HttpClient::new(crate::net::ClientOptions::default())),
            dir,
        }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("fixture.log")
    }

    async fn call(&self, id: &str, args: serde_json::Value) -> ToolResult {
        self.fx.toolbox.call(&self.fx.ctx(), id, &args.to_string(), Caller::Model, Scope::default()).await
    }

    fn era(&self, name: &str) -> Option<String> {
        self.clients.status().into_iter().find(|s| s.name == name).and_then(|s| s.era)
    }

    fn tool_ids(&self, group: &str) -> Vec<String> {
        self.fx.toolbox.registry().in_group(group).map(|c| c.id.to_string()).collect()
    }
}

/// Waits (bounded) until `f` holds.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn log_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_fixture_lists_every_page_and_converts_results() {
    let s = Setup::new(|d| vec![("fx", fixture("legacy", &d.join("fixture.log"), 60))]);
    s.clients.ensure(&s.fx.toolbox).await;
    assert_eq!(s.era("fx").as_deref(), Some("2025-11-25 (initialize)"), "{:?}", s.clients.status());
    let ids = s.tool_ids("mcp_fx");
    // 15 tools come 4 to a page: every page was read.
    assert_eq!(ids.len(), 15, "{ids:?}");
    assert!(ids.contains(&"mcp_fx_many_t6".to_owned()), "dotted names are mapped: {ids:?}");

    let out = s.call("mcp_fx_echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(out, "echo: hi (era 2025-11-25)");
    // A dotted name reaches the server under its own name.
    assert_eq!(s.call("mcp_fx_many_t6", json!({})).await.unwrap(), "many.t6 ran");
    let img = s.call("mcp_fx_tiny_image", json!({})).await.unwrap();
    assert!(img.starts_with("[image: image/png, "), "{img}");
    assert_eq!(s.call("mcp_fx_structured", json!({})).await.unwrap(), r#"{"answer":42}"#);
    let e = s.call("mcp_fx_fail", json!({})).await.unwrap_err();
    assert_eq!((e.kind(), e.0.as_str()), (ToolErrorKind::Failed, "the fixture tool failed on purpose"));
    s.clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_era_fixture_speaks_the_stateless_revision() {
    let s = Setup::new(|d| vec![("fx", fixture("dual", &d.join("fixture.log"), 60))]);
    s.clients.ensure(&s.fx.toolbox).await;
    assert_eq!(s.era("fx").as_deref(), Some("2026-07-28 (stateless)"), "{:?}", s.clients.status());
    assert_eq!(s.tool_ids("mcp_fx").len(), 15);
    assert_eq!(s.call("mcp_fx_echo", json!({"text": "hi"})).await.unwrap(), "echo: hi (era 2026-07-28)");
    assert!(s.call("mcp_fx_fail", json!({})).await.is_err());
    // The era is kept: a restart goes straight to it (no probe), and still works.
    s.clients.shutdown().await;
    assert_eq!(s.call("mcp_fx_echo", json!({"text": "again"})).await.unwrap(), "echo: again (era 2026-07-28)");
    s.clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_listed_again() {
    let s = Setup::new(|d| vec![("fx", fixture("legacy", &d.join("fixture.log"), 60))]);
    s.clients.ensure(&s.fx.toolbox).await;
    assert!(!s.tool_ids("mcp_fx").contains(&"mcp_fx_extra_tool".to_owned()));
    assert_eq!(s.call("mcp_fx_add_tool", json!({})).await.unwrap(), "added");
    until("the new tool is registered", || s.tool_ids("mcp_fx").contains(&"mcp_fx_extra_tool".to_owned())).await;
    assert_eq!(s.call("mcp_fx_extra_tool", json!({})).await.unwrap(), "extra.tool ran");
    s.clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_times_out_and_the_server_is_told_to_cancel() {
    let s = Setup::new(|d| vec![("fx", fixture("legacy", &d.join("fixture.log"), 2))]);
    s.clients.ensure(&s.fx.toolbox).await;
    let e = s.call("mcp_fx_slow", json!({"seconds": 60})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::TimedOut, "{e}");
    assert!(e.0.contains("did not answer tools/call within 2") && e.0.contains("timeout_secs"), "{e}");
    until("the fixture saw notifications/cancelled", || log_lines(&s.log()).contains(&"cancelled".to_owned())).await;

    // A call dropped by its caller (a stopped turn) is cancelled too.
    std::fs::remove_file(s.log()).unwrap();
    let fx = &s;
    let stopped =
        tokio::time::timeout(Duration::from_millis(1500), fx.call("mcp_fx_slow", json!({"seconds": 60}))).await;
    assert!(stopped.is_err());
    until("the dropped call was cancelled", || log_lines(&s.log()).contains(&"cancelled".to_owned())).await;
    // The connection is still good.
    assert!(s.call("mcp_fx_echo", json!({"text": "x"})).await.is_ok());
    s.clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_mid_call_is_started_again() {
    let s = Setup::new(|d| vec![("fx", fixture("legacy", &d.join("fixture.log"), 60))]);
    s.clients.ensure(&s.fx.toolbox).await;
    // The start succeeded: nothing holds the next one back, however soon the crash comes.
    let server = Arc::clone(&s.clients.servers[0]);
    assert_eq!(server.state().failures, 0);
    let e = s.call("mcp_fx_crash", json!({})).await.unwrap_err();
    assert!(e.0.contains("started again on the next call"), "{e}");
    assert!(e.0.contains("exited") || e.0.contains("closed its output"), "{e}");
    assert_eq!(s.call("mcp_fx_echo", json!({"text": "back"})).await.unwrap(), "echo: back (era 2025-11-25)");
    let started = log_lines(&s.log()).iter().filter(|l| *l == "started").count();
    assert_eq!(started, 2, "{:?}", log_lines(&s.log()));
    s.clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_failing_to_start_is_retried_with_backoff() {
    let s = Setup::new(|_| vec![("gone", server("/nonexistent/mcp-server".into(), &[], None, 60))]);
    s.clients.ensure(&s.fx.toolbox).await;
    let st = &s.clients.status()[0];
    assert!(st.state.contains("cannot start `/nonexistent/mcp-server`"), "{st:?}");
    // Straight after the failure the backoff holds: no new try.
    let server = Arc::clone(&s.clients.servers[0]);
    assert!(!server.wants_connect());
    let e = server.conn().await.err().expect("the backoff refuses a new start");
    assert!(e.contains("next start is tried in"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_servers_time_and_everything() {
    let p = peers();
    let everything = p.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js").display().to_string();
    let s = Setup::new(|_| {
        vec![
            ("time", server(python(), &["-m", "mcp_server_time", "--local-timezone=UTC"], None, 60)),
            ("everything", server("node".into(), &[&everything, "stdio"], None, 60)),
        ]
    });
    s.clients.ensure(&s.fx.toolbox).await;
    // mcp-server-time 2026.10.19 is dual-era: the probe finds the stateless revision.
    assert_eq!(s.era("time").as_deref(), Some("2026-07-28 (stateless)"), "{:?}", s.clients.status());
    let out = s.call("mcp_time_get_current_time", json!({"timezone": "Asia/Tokyo"})).await.unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["timezone"], "Asia/Tokyo");
    let e = s.call("mcp_time_get_current_time", json!({"timezone": "Not/AZone"})).await.unwrap_err();
    assert!(e.0.contains("Not/AZone"), "{e}");

    assert!(s.era("everything").is_some_and(|e| e.ends_with("(initialize)")), "{:?}", s.clients.status());
    assert_eq!(s.call("mcp_everything_echo", json!({"message": "hello"})).await.unwrap(), "Echo: hello");
    let sum = s.call("mcp_everything_get-sum", json!({"a": 2, "b": 3})).await.unwrap();
    assert!(sum.contains('5'), "{sum}");
    let img = s.call("mcp_everything_get-tiny-image", json!({})).await.unwrap();
    assert!(img.contains("[image: image/png, "), "{img}");
    let links = s.call("mcp_everything_get-resource-links", json!({"count": 2})).await.unwrap();
    assert!(links.contains("[link: "), "{links}");
    s.clients.shutdown().await;
    assert!(s.clients.status().iter().all(|st| st.state.starts_with("stopped")), "{:?}", s.clients.status());
}

#[test]
fn an_unknown_era_label_is_readable() {
    assert_eq!(Era::Legacy("2024-11-05".into()).label(), "2024-11-05 (initialize)");
}
