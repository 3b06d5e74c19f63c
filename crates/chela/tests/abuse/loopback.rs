//! Another user's process on the same machine, against the loopback gateway: it
//! reaches 127.0.0.1 like the owner's browser does, so loopback alone proves nothing. Each
//! test runs the real `chela run` on its own workspace with the fake LLM standing in for the
//! provider and a second fake for the attacker's server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use chela_testkit::daemon::{Running, command};
use chela_testkit::{FakeLlm, Step};

/// The owner's API key, in `chela.toml`.
const SECRET: &str = "sk-ant-loopback-owner-key";

struct Daemon {
    run: Running,
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    // Kept alive for the daemon, which talks to it.
    _llm: FakeLlm,
    addr: SocketAddr,
}

impl Daemon {
    /// `chela run` with the key in `chela.toml` and no `gateway.token` set.
    fn start(script: Vec<Step>) -> Daemon {
        let llm = FakeLlm::start(script);
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let text = format!(
            "[llm]\nprovider = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"{SECRET}\"\nmax_retries = \"0\"\n",
            llm.anthropic_base_url()
        );
        std::fs::write(dir.path().join("chela.toml"), text).unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut c = command(env!("CARGO_BIN_EXE_chela"), dir.path(), home.path());
        c.arg("run").env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0");
        let run = Running::start(c, Duration::from_secs(20));
        let addr = run.addr();
        Daemon { run, dir, home, _llm: llm, addr }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The token `chela run` made and stored, as the owner reads it from their workspace.
    fn token(&self) -> String {
        let text = std::fs::read_to_string(self.root().join("overrides.toml")).expect("a token was stored");
        let table = chela::toml::parse(&text).unwrap();
        table["gateway"]["token"].as_str().unwrap().to_owned()
    }

    /// One raw HTTP/1.1 request; `token` goes in `Authorization` when given.
    fn http(&self, method: &str, path: &str, token: Option<&str>, extra: &str, body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{auth}{extra}Content-Type: application/json\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr.port(),
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        assert!(!text.contains(SECRET), "a response carried the API key: {text}");
        let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
    }

    /// A one-shot turn through `/v1/chat/completions` as the owner; the answer's text.
    fn ask(&self, token: &str) -> String {
        let body = r#"{"model":"chela","user":"owner-script","messages":[{"role":"user","content":"hello"}]}"#;
        let (status, body) = self.http("POST", "/v1/chat/completions", Some(token), "", body);
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned()
    }
}

fn point_at(thief: &FakeLlm) -> String {
    format!(r#"{{"key":"llm.base_url","value":"{}"}}"#, thief.anthropic_base_url())
}

#[test]
fn a_local_process_without_the_token_can_change_and_see_nothing() {
    let d = Daemon::start(vec![Step::text("from the owner's provider")]);
    let thief = FakeLlm::start(vec![Step::text("stolen")]);
    // The attack that worked: point llm.base_url at itself, then wait for the key.
    let (status, body) = d.http("POST", "/api/config", None, "", &point_at(&thief));
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("chela console"), "the refusal says how to get in: {body}");
    let upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    for (method, path, extra, body) in [
        ("GET", "/api/config", "", ""),
        ("GET", "/api/pairing", "", ""),
        ("POST", "/api/pairing/approve", "", r#"{"code":"ABCDEFGH"}"#),
        ("POST", "/api/pairing/revoke", "", r#"{"channel":"telegram","sender":"1"}"#),
        ("GET", "/api/devices", "", ""),
        ("GET", "/api/sessions", "", ""),
        ("GET", "/api/memory/MEMORY.md", "", ""),
        ("POST", "/api/setup", "", r#"{"provider":"anthropic","base_url":"http://127.0.0.1:9"}"#),
        ("POST", "/api/cap/groups/runtime", "", r#"{"group_id":"web","enabled":true}"#),
        ("POST", "/mcp", "Accept: application/json, text/event-stream\r\n", init),
        ("POST", "/v1/chat/completions", "", r#"{"messages":[{"role":"user","content":"hi"}]}"#),
        ("GET", "/ws", upgrade, ""),
    ] {
        let (status, answer) = d.http(method, path, None, extra, body);
        assert_eq!(status, 401, "{method} {path} without the token: {answer}");
        // A wrong token is no better.
        let (status, answer) = d.http(method, path, Some("guess"), extra, body);
        assert_eq!(status, 401, "{method} {path} with a wrong token: {answer}");
    }
    // What holds no secret stays open: the page and /health. This client takes no gzip, so it
    // gets the page inflated from the gzip file the binary carries: all of it.
    let (status, page) = d.http("GET", "/", None, "", "");
    assert_eq!(status, 200);
    assert!(page.to_ascii_lowercase().starts_with("<!doctype html>") && page.trim_end().ends_with("</html>"), "{page}");
    assert_eq!(d.http("GET", "/health", None, "", "").0, 200);
    // Nothing changed: the owner's turn still goes to the owner's provider, and the thief
    // never heard from Chela.
    assert_eq!(d.ask(&d.token()), "from the owner's provider");
    assert!(thief.requests().is_empty(), "the thief was called: {:?}", thief.requests());
    let overrides = std::fs::read_to_string(d.root().join("overrides.toml")).unwrap();
    assert!(!overrides.contains("base_url"), "{overrides}");
}

/// The `#login=` code in what `chela run` printed.
fn login_code(log: &str) -> String {
    let start = log.find("#login=").expect("chela run printed a login link") + "#login=".len();
    log[start..].split_whitespace().next().unwrap().to_owned()
}

#[test]
fn the_login_link_printed_at_start_trades_for_the_token_once() {
    let d = Daemon::start(vec![]);
    let log = d.run.log();
    let code = login_code(&log);
    assert!(!log.contains(&d.token()), "the token itself is not printed on loopback: {log}");
    let origin = format!("Origin: http://127.0.0.1:{}\r\n", d.addr.port());
    let body = format!(r#"{{"code":"{code}"}}"#);
    let (status, answer) = d.http("POST", "/api/login", None, &origin, &body);
    assert_eq!(status, 200, "{answer}");
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["token"], d.token().as_str());
    assert_eq!(d.http("GET", "/api/config", Some(&d.token()), "", "").0, 200);
    // Once only, and only codes the daemon's token signed.
    let (status, again) = d.http("POST", "/api/login", None, &origin, &body);
    assert_eq!(status, 403, "{again}");
    assert!(again.contains("already used") && again.contains("chela console"), "{again}");
    let forged = format!(r#"{{"code":"{}.{}.{}"}}"#, u64::MAX, "0".repeat(32), "0".repeat(64));
    assert_eq!(d.http("POST", "/api/login", None, "", &forged).0, 401);
    // Another site's page cannot trade a code it got hold of.
    let evil = "Origin: http://evil.example\r\n";
    assert_eq!(d.http("POST", "/api/login", None, evil, &body).0, 403);

    // `chela console` makes a fresh link the running daemon takes.
    let out = chela(d.dir.path(), d.home.path(), &["console"], &[("CHELA_GATEWAY__LISTEN", &d.addr.to_string())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(printed.starts_with(&format!("http://127.0.0.1:{}/#login=", d.addr.port())), "{printed}");
    let body = format!(r#"{{"code":"{}"}}"#, login_code(&printed));
    assert_eq!(d.http("POST", "/api/login", None, "", &body).0, 200);
}

#[test]
fn a_new_base_url_gets_the_key_only_when_the_owner_says_so() {
    let d = Daemon::start(vec![Step::text("owner's provider")]);
    let thief = FakeLlm::start(vec![Step::text("new host")]);
    let token = d.token();
    // Even with the token, the stored key does not follow the URL on its own.
    let (status, body) = d.http("POST", "/api/config", Some(&token), "", &point_at(&thief));
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("keep_key") && body.contains("drop_key"), "the refusal says what to do: {body}");
    let setup = format!(r#"{{"provider":"anthropic","base_url":"{}"}}"#, thief.anthropic_base_url());
    let (status, body) = d.http("POST", "/api/setup", Some(&token), "", &setup);
    assert_eq!(status, 409, "the first-run form too: {body}");
    assert_eq!(d.ask(&token), "owner's provider");
    assert!(thief.requests().is_empty());

    // The owner moves to the new host without the key: it gets a request, but not the key.
    let drop = format!(r#"{{"key":"llm.base_url","value":"{}","drop_key":true}}"#, thief.anthropic_base_url());
    let (status, body) = d.http("POST", "/api/config", Some(&token), "", &drop);
    assert_eq!(status, 200, "{body}");
    assert_eq!(d.ask(&token), "new host");
    let seen = thief.requests();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].headers.iter().all(|(_, v)| !v.contains(SECRET)), "the key went along: {:?}", seen[0].headers);
}

fn chela(root: &Path, home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command(env!("CARGO_BIN_EXE_chela"), root, home);
    c.args(args).envs(env.iter().copied());
    c.output().expect("cannot run chela")
}

#[test]
fn chela_config_set_keeps_the_key_off_a_new_host_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let root = dir.path();
    let file = format!("[llm]\nprovider = \"openai\"\napi_key = \"{SECRET}\"\n");
    std::fs::write(root.join("chela.toml"), file).unwrap();
    let set = ["config", "set", "llm.base_url", "http://127.0.0.1:9/v1"];
    let out = chela(root, home.path(), &set, &[]);
    assert!(!out.status.success(), "a new host with the old key was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("https://api.openai.com") && err.contains("--keep-key") && err.contains("--drop-key"),
        "{err}"
    );
    assert!(
        !root.join("overrides.toml").exists()
            || !std::fs::read_to_string(root.join("overrides.toml")).unwrap().contains("127.0.0.1:9")
    );
    // The key from the environment counts the same, and cannot be dropped from here.
    let env_key = [("CHELA_LLM__API_KEY", SECRET)];
    let keyless = "[llm]\nprovider = \"openai\"\n";
    std::fs::write(root.join("chela.toml"), keyless).unwrap();
    assert!(!chela(root, home.path(), &set, &env_key).status.success());
    let dropped = chela(root, home.path(), &[&set[..], &["--drop-key"]].concat(), &env_key);
    assert!(String::from_utf8_lossy(&dropped.stderr).contains("CHELA_LLM__API_KEY"));
    assert!(!dropped.status.success());
    // The owner's explicit choices work.
    std::fs::write(root.join("chela.toml"), format!("[llm]\nprovider = \"openai\"\napi_key = \"{SECRET}\"\n")).unwrap();
    let out = chela(root, home.path(), &[&set[..], &["--drop-key"]].concat(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let key = chela(root, home.path(), &["config", "get", "llm.api_key"], &[]);
    assert_eq!(String::from_utf8_lossy(&key.stdout).trim(), "", "the key is dropped for the new host");
    std::fs::remove_file(root.join("overrides.toml")).unwrap();
    let out = chela(root, home.path(), &[&set[..], &["--keep-key"]].concat(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
