//! `proxy.url` carries all outbound traffic, the provider's included: the real `chela` binary
//! talks to the fake LLM through real proxies (Debian's `tinyproxy` for HTTP CONNECT and
//! `microsocks` for SOCKS5), and fails when the proxy refuses or is down, even though the
//! provider itself is reachable directly.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, Step};

struct Proxy {
    child: Child,
    port: u16,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start(name: &str, cmd: &mut Command, port: u16) -> Proxy {
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap_or_else(|e| {
        panic!("cannot run `{name}` ({e}); install the test peers with `apt-get install -y tinyproxy microsocks`")
    });
    let mut p = Proxy { child, port };
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{name} did not start listening");
        assert!(p.child.try_wait().unwrap().is_none(), "{name} exited at start-up");
        std::thread::sleep(Duration::from_millis(10));
    }
    p
}

fn tinyproxy(dir: &Path, allowed_port: u16) -> Proxy {
    let port = free_port();
    let conf = format!(
        "Port {port}\nListen 127.0.0.1\nAllow 127.0.0.1\nDisableViaHeader Yes\nConnectPort {allowed_port}\nLogLevel Connect\nLogFile \"{}\"\n",
        dir.join("tinyproxy.log").display()
    );
    std::fs::write(dir.join("tinyproxy.conf"), conf).unwrap();
    start("tinyproxy", Command::new("tinyproxy").arg("-d").arg("-c").arg(dir.join("tinyproxy.conf")), port)
}

fn microsocks(user: &str, pass: &str) -> Proxy {
    let port = free_port();
    start(
        "microsocks",
        Command::new("microsocks").args(["-i", "127.0.0.1", "-p", &port.to_string(), "-u", user, "-P", pass]),
        port,
    )
}

fn chat(ws: &Path, llm: &FakeLlm, proxy: &str) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
    for (k, _) in std::env::vars() {
        if k.starts_with("CHELA_") {
            c.env_remove(k);
        }
    }
    c.env("CHELA_HOME", ws)
        .env_remove("ANTHROPIC_API_KEY")
        .env("CHELA_LLM__BASE_URL", llm.anthropic_base_url())
        .env("CHELA_LLM__API_KEY", "k")
        .env("CHELA_LLM__MAX_RETRIES", "1")
        .env("CHELA_PROXY__URL", proxy)
        .args(["chat", "-m", "hi"])
        .output()
        .unwrap()
}

#[test]
fn provider_traffic_goes_through_an_http_connect_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![Step::text("via tinyproxy")]);
    let proxy = tinyproxy(dir.path(), llm.addr().port());
    let out = chat(&dir.path().join("ws"), &llm, &format!("http://127.0.0.1:{}", proxy.port));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "via tinyproxy\n");
    let log = std::fs::read_to_string(dir.path().join("tinyproxy.log")).unwrap();
    assert!(log.contains(&format!("CONNECT 127.0.0.1:{} HTTP/1.1", llm.addr().port())), "{log}");
}

#[test]
fn one_tunnel_carries_every_model_call_of_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Step::tool_call("get_current_time", serde_json::json!({})),
        Step::tool_call("get_current_time", serde_json::json!({})),
        Step::text("it is late"),
    ]);
    let proxy = tinyproxy(dir.path(), llm.addr().port());
    let out = chat(&dir.path().join("ws"), &llm, &format!("http://127.0.0.1:{}", proxy.port));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "it is late\n");
    assert_eq!(llm.requests().len(), 3);
    // Keep-alive: the three model calls share one connection, so the proxy saw one CONNECT.
    let log = std::fs::read_to_string(dir.path().join("tinyproxy.log")).unwrap();
    assert_eq!(log.matches("CONNECT 127.0.0.1:").count(), 1, "{log}");
}

#[test]
fn provider_traffic_goes_through_a_socks5_proxy_with_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![Step::text("via socks")]);
    let proxy = microsocks("chela", "s3cret");
    let ws = dir.path().join("ws");
    let out = chat(&ws, &llm, &format!("socks5://chela:s3cret@127.0.0.1:{}", proxy.port));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "via socks\n");
    // The same provider, reachable directly, is not used when the proxy says no.
    let out = chat(&ws, &llm, &format!("socks5://chela:wrong@127.0.0.1:{}", proxy.port));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rejected the user name and password") && !err.contains("wrong"), "{err}");
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn a_proxy_that_is_down_is_reported_and_not_bypassed() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![Step::text("never")]);
    let out = chat(&dir.path().join("ws"), &llm, &format!("http://127.0.0.1:{}", free_port()));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Could not reach") && err.contains("proxy"), "{err}");
    assert!(llm.requests().is_empty(), "no direct connection behind the user's back");
}
