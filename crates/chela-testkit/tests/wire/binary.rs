//! The `chela-fake-llm` binary: its one output line, serving, scripts, keys, argument errors
//! and the ways it stops.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::Api;

const BIN: &str = env!("CARGO_BIN_EXE_chela-fake-llm");

/// Starts the binary and reads its listening line.
fn spawn(args: &[&str]) -> (Child, BufReader<std::process::ChildStdout>, SocketAddr) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chela-fake-llm");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let addr: SocketAddr = addr.parse().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    (child, out, addr)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Waits for the child to exit by itself.
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let since = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(since.elapsed() < Duration::from_secs(5), "chela-fake-llm did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn prints_one_line_then_serves_the_demo_until_killed() {
    let (mut child, mut out, addr) = spawn(&[]);
    let reply = runtime().block_on(Api::Anthropic.ask(addr, false));
    assert_eq!(reply.json()["content"][0]["text"], "You said: hello");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "", "exactly one line on stdout");
}

#[test]
fn serves_a_script_file_with_a_key_and_stops_at_stdin_eof() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"[{"text": "from the file"}, {"status": 429, "retry_after": "3"}]"#).unwrap();
    let (mut child, _out, addr) =
        spawn(&["--script", script.to_str().unwrap(), "--key", "sk-bin", "--exit-on-stdin-eof", "--port", "0"]);
    let rt = runtime();
    let body = Api::OpenAi.request("hi", false).to_string().into_bytes();
    let unauthorized = rt.block_on(crate::client::send(addr, hyper::Method::POST, "/v1/chat/completions", &[], body));
    assert_eq!(unauthorized.status, 401);
    let headers = [("authorization", "Bearer sk-bin")];
    let send = |api: Api| {
        let body = api.request("hi", false).to_string().into_bytes();
        rt.block_on(crate::client::send(addr, hyper::Method::POST, api.path(), &headers, body))
    };
    assert_eq!(send(Api::OpenAi).json()["choices"][0]["message"]["content"], "from the file");
    let limited = send(Api::OpenAi);
    assert_eq!((limited.status, limited.header("retry-after")), (429, Some("3")));

    drop(child.stdin.take());
    assert!(wait_exit(&mut child).success());
}

#[test]
fn a_port_in_use_is_an_error_not_a_hang() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(BIN).args(["--port", &port]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen on 127.0.0.1"), "{out:?}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_arguments_and_scripts_exit_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad_script = dir.path().join("bad.json");
    std::fs::write(&bad_script, r#"[{"txt": "typo"}]"#).unwrap();
    let bad_script = bad_script.to_str().unwrap();
    let missing = dir.path().join("missing.json");
    let cases: [(&[&str], &str); 4] = [
        (&["--port", "web"], "--port takes a port number"),
        (&["--frobnicate"], "--frobnicate"),
        (&["--script", bad_script], "step 1: unknown field `txt`"),
        (&["--script", missing.to_str().unwrap()], "cannot use the script"),
    ];
    for (args, want) in cases {
        let out = Command::new(BIN).args(args).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_prints_usage() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("usage: chela-fake-llm"));
}

#[cfg(unix)]
#[test]
fn sigterm_stops_it_cleanly() {
    let (mut child, _out, _addr) = spawn(&[]);
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert!(wait_exit(&mut child).success());
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(stderr, "");
}
