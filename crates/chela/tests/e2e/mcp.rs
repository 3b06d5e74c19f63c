//! A turn through an MCP server: the fake LLM calls a tool of the fixture server written with
//! the official Python SDK (`tests/mcp/fixtures/server.py`), and the tool's result reaches
//! the next request, on both wire formats.

use std::path::PathBuf;

use chela_testkit::{FakeLlm, Step};
use serde_json::json;

use crate::{Provider, Ws, body, tool_names};

#[test]
fn the_model_calls_an_mcp_tool_and_sees_its_result() {
    let python = chela_testkit::peers::mcp_python();
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/fixtures/server.py");
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![
            Step::tool_call("mcp_fx_echo", json!({"text": "from the model"})),
            Step::text("The server said it."),
        ]);
        let ws = Ws::for_llm(provider, &llm, "");
        let config = std::fs::read_to_string(ws.path().join("chela.toml")).unwrap();
        ws.write_config(&format!(
            "{config}\n[mcp.servers.fx]\ncommand = {python:?}\nargs = [{:?}, \"--era\", \"legacy\"]\n",
            server.display().to_string()
        ));
        let out = ws.chat("Ask the fixture to echo.", &[]);
        out.expect_ok();
        assert_eq!(out.stdout, "The server said it.\n", "{provider:?}");
        let first = body(&llm, 0);
        let offered = tool_names(provider, &first);
        assert!(
            offered.contains(&"mcp_fx_echo".to_owned()) && offered.contains(&"mcp_fx_many_t6".to_owned()),
            "{offered:?}"
        );
        let second = body(&llm, 1).to_string();
        assert!(second.contains("echo: from the model (era 2025-11-25)"), "{provider:?}: {second}");
    }
}

/// A child process killed when the test ends, pass or fail.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_model_calls_a_tool_of_a_remote_server_over_http() {
    // Installs the peers on first use (npm's server-everything among them).
    let everything =
        chela_testkit::peers::mcp_peers().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _server = Killed(
        std::process::Command::new("node")
            .arg(&everything)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "server-everything did not listen on {port}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![
            Step::tool_call("mcp_ev_echo", json!({"message": "from the model"})),
            Step::text("The remote server said it."),
        ]);
        let ws = Ws::for_llm(provider, &llm, "");
        let config = std::fs::read_to_string(ws.path().join("chela.toml")).unwrap();
        ws.write_config(&format!(
            "{config}\n[mcp.servers.ev]\nurl = \"http://127.0.0.1:{port}/mcp\"\nbearer = \"e2e-bearer-secret\"\n"
        ));
        let out = ws.chat("Ask the remote server to echo.", &[]);
        out.expect_ok();
        assert_eq!(out.stdout, "The remote server said it.\n", "{provider:?}");
        assert!(tool_names(provider, &body(&llm, 0)).contains(&"mcp_ev_echo".to_owned()));
        let second = body(&llm, 1).to_string();
        assert!(second.contains("Echo: from the model"), "{provider:?}: {second}");
        assert!(!out.stderr.contains("e2e-bearer-secret"), "{}", out.stderr);
    }
}

#[test]
fn cap_list_shows_a_servers_tools_logs_its_stderr_and_kills_a_server_that_ignores_sigterm() {
    let ws = Ws::empty();
    let bad_peer = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/fixtures/bad_peer.py");
    let pid_file = ws.path().join("peer.pid");
    let config = std::fs::read_to_string(ws.path().join("chela.toml")).unwrap_or_default();
    ws.write_config(&format!(
        "{config}\n[mcp.servers.bad]\ncommand = \"python3\"\nargs = [{:?}, \"stubborn\", {:?}]\n",
        bad_peer.display().to_string(),
        pid_file.display().to_string()
    ));
    let started = std::time::Instant::now();
    let mut cmd = ws.cmd(&["cap", "list"]);
    cmd.env("CHELA_LOG", "info");
    let out = crate::finish(cmd.spawn().unwrap(), crate::RUN_LIMIT);
    let took = started.elapsed();
    out.expect_ok();
    // The server's tools are listed as its group's.
    out.stdout_has("mcp_bad").stdout_has("mcp_bad_go");
    // Its stderr is kept in the log, named.
    out.stderr_has("MCP server bad (stderr): bad-peer: stubborn, ignoring SIGTERM");
    // The stop: stdin closed (it lingers), SIGTERM (ignored), then SIGKILL; each wait is 1 s.
    assert!(took >= std::time::Duration::from_secs(2), "stopped in {took:?}: the grace waits were skipped");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    crate::wait_for("the stubborn server to be gone", std::time::Duration::from_secs(10), || {
        !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists()
    });
}
