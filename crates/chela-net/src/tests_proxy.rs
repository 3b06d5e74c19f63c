//! Proxy tests against the real programs from Debian: `tinyproxy` (HTTP CONNECT) and
//! `microsocks` (SOCKS5). Each test starts its own proxy on a free 127.0.0.1 port.
//!
//! To show traffic really goes through the proxy, the proxies make their outgoing connections
//! from 127.0.0.2 (`Bind` / `-b`), still on loopback: the target server sees that address only
//! when the request was relayed, while a direct connection comes from 127.0.0.1. A missing
//! program fails the test with instructions instead of skipping it.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::tests::{LONG, SHORT, echo_server, get, tls_server};
use super::*;

const RELAY_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// A proxy process, killed when the test ends (also on panic).
struct Running {
    child: Child,
    name: &'static str,
    port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn start(name: &'static str, command: &mut Command, port: u16) -> Running {
        let child = command.spawn().unwrap_or_else(|e| {
            panic!(
                "cannot run `{name}` ({e}). The proxy tests use the real program: install it with \
                 `apt-get install -y tinyproxy microsocks`"
            )
        });
        Running { child, name, port }
    }

    /// Waits (briefly, polling) until the proxy accepts connections.
    async fn ready(mut self) -> Running {
        for _ in 0..300 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                return self;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited during start-up: {status}", self.name);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{} did not listen on 127.0.0.1:{} within 3 s", self.name, self.port);
    }

    fn url(&self, scheme: &str, auth: &str) -> String {
        format!("{scheme}://{auth}127.0.0.1:{}", self.port)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn tinyproxy(dir: &Path, connect_ports: &[u16], basic_auth: Option<&str>) -> Running {
    let port = free_port();
    let mut conf = format!(
        "Port {port}\nListen 127.0.0.1\nBind 127.0.0.2\nAllow 127.0.0.1\nDisableViaHeader Yes\nMaxClients 20\n\
         LogLevel Connect\nLogFile \"{}\"\n",
        dir.join("tinyproxy.log").display()
    );
    for p in connect_ports {
        conf.push_str(&format!("ConnectPort {p}\n"));
    }
    if let Some(user_pass) = basic_auth {
        conf.push_str(&format!("BasicAuth {user_pass}\n"));
    }
    let path = dir.join("tinyproxy.conf");
    std::fs::write(&path, conf).unwrap();
    let mut command = Command::new("tinyproxy");
    command.arg("-d").arg("-c").arg(&path).stdout(Stdio::null()).stderr(Stdio::null());
    Running::start("tinyproxy", &mut command, port).ready().await
}

async fn microsocks(auth: Option<(&str, &str)>) -> Running {
    let port = free_port();
    let mut command = Command::new("microsocks");
    command.args(["-i", "127.0.0.1", "-b", "127.0.0.2", "-p", &port.to_string()]);
    if let Some((user, pass)) = auth {
        command.args(["-u", user, "-P", pass]);
    }
    command.stdout(Stdio::null()).stderr(Stdio::null());
    Running::start("microsocks", &mut command, port).ready().await
}

fn via(proxy: &str) -> HttpClient {
    HttpClient::new(ClientOptions { proxy: Some(Proxy::parse(proxy).unwrap()), ..ClientOptions::default() })
}

#[tokio::test]
async fn http_connect_proxy_carries_http_and_https() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, mut seen) = echo_server().await;
    let (tls_port, pem) = tls_server().await;
    let proxy = tinyproxy(dir.path(), &[addr.port(), tls_port], None).await;

    let resp = via(&proxy.url("http", "")).send(get(format!("http://{addr}/through"))).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    let s = seen.recv().await.unwrap();
    assert_eq!(s.peer.ip(), RELAY_IP, "the request must arrive from the proxy");
    assert_eq!(s.target, "/through", "tunnelled, so the server sees an origin-form target");

    // TLS inside the tunnel: SNI and certificate checks use the URL's host.
    let options = ClientOptions {
        proxy: Some(Proxy::parse(&proxy.url("http", "")).unwrap()),
        extra_root_pem: Some(pem.into_bytes()),
        ..ClientOptions::default()
    };
    let resp = HttpClient::new(options).send(get(format!("https://localhost:{tls_port}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "over tls");

    let log = std::fs::read_to_string(dir.path().join("tinyproxy.log")).unwrap();
    assert!(log.contains(&format!("CONNECT 127.0.0.1:{} HTTP/1.1", addr.port())), "{log}");
    assert!(log.contains(&format!("CONNECT localhost:{tls_port} HTTP/1.1")), "the proxy resolves names: {log}");

    // A port the proxy does not allow: its 403 is a policy answer, not worth retrying.
    let err = via(&proxy.url("http", "")).send(get("http://127.0.0.1:9/")).await.unwrap_err();
    assert!(matches!(err, NetError::Proxy { retryable: false, .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!("proxy {} refused CONNECT 127.0.0.1:9", proxy.url("http", ""))),
        "{err}"
    );
}

#[tokio::test]
async fn http_connect_proxy_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, mut seen) = echo_server().await;
    let proxy = tinyproxy(dir.path(), &[addr.port()], Some("chela s3cret")).await;
    let url = format!("http://{addr}/");

    let resp = via(&proxy.url("http", "chela:s3cret@")).send(get(&url)).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(seen.recv().await.unwrap().peer.ip(), RELAY_IP);

    let err = via(&proxy.url("http", "chela:wrong@")).send(get(&url)).await.unwrap_err();
    assert!(!err.is_retryable() && err.to_string().contains("rejected the user name and password"), "{err}");
    let err = via(&proxy.url("http", "")).send(get(&url)).await.unwrap_err();
    assert!(!err.is_retryable() && err.to_string().contains("requires a user name and password"), "{err}");
    assert!(seen.try_recv().is_err(), "rejected requests must not reach the server");
}

#[tokio::test]
async fn socks5_proxies_relay_by_name_and_by_address() {
    let (addr, mut seen) = echo_server().await;
    let proxy = microsocks(None).await;
    for (scheme, url) in [
        ("socks5h", format!("http://localhost:{}/by-name", addr.port())),
        ("socks5", format!("http://localhost:{}/resolved-here", addr.port())),
        ("socks5", format!("http://{addr}/literal")),
    ] {
        let resp = via(&proxy.url(scheme, "")).send(get(&url)).await.unwrap_or_else(|e| panic!("{scheme} {url}: {e}"));
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
        let s = seen.recv().await.unwrap();
        assert_eq!(s.peer.ip(), RELAY_IP, "{scheme} {url} must arrive from the proxy");
        assert!(url.ends_with(&s.target), "{url} vs {}", s.target);
    }
}

#[tokio::test]
async fn socks5_proxy_credentials() {
    let (addr, mut seen) = echo_server().await;
    let proxy = microsocks(Some(("chela", "s3cret"))).await;
    let url = format!("http://{addr}/");

    let resp = via(&proxy.url("socks5h", "chela:s3cret@")).send(get(&url)).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(seen.recv().await.unwrap().peer.ip(), RELAY_IP);

    let err = via(&proxy.url("socks5h", "chela:wrong@")).send(get(&url)).await.unwrap_err();
    assert!(matches!(err, NetError::Proxy { retryable: false, .. }), "{err:?}");
    assert!(err.to_string().contains("rejected the user name and password"), "{err}");
    let err = via(&proxy.url("socks5h", "")).send(get(&url)).await.unwrap_err();
    assert!(err.to_string().contains("requires a user name and password"), "{err}");
    assert!(seen.try_recv().is_err(), "rejected requests must not reach the server");
}

#[tokio::test]
async fn guard_applies_before_the_proxy_is_asked() {
    let (addr, mut seen) = echo_server().await;
    let proxy = microsocks(None).await;
    for url in [format!("http://localhost:{}/", addr.port()), format!("http://{addr}/")] {
        let req = Request { guard: Guard::PublicOnly, ..get(url.clone()) };
        let err = via(&proxy.url("socks5h", "")).send(req).await.unwrap_err();
        assert!(matches!(err, NetError::Refused { .. }), "{url}: {err:?}");
    }
    assert!(seen.try_recv().is_err());
}

#[tokio::test]
async fn unreachable_proxy_is_a_retryable_connect_error_naming_the_proxy() {
    let (addr, mut seen) = echo_server().await;
    let proxy = format!("socks5h://127.0.0.1:{}", free_port());
    let req = Request { timeout: LONG, ..get(format!("http://{addr}/")) };
    let err = via(&proxy).send(req).await.unwrap_err();
    assert!(matches!(err, NetError::Connect { .. }) && err.is_retryable(), "{err:?}");
    assert_eq!(err.to_string(), format!("could not connect to proxy {proxy}: connection refused"));
    assert!(seen.try_recv().is_err(), "no direct connection behind the user's back");
}
