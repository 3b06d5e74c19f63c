//! `chela doctor`'s checks of what `chela run` serves: the gateway, then one line per channel.
//!
//! A channel adds its check as one line in [`check`]: an `async fn(&Config, &mut Report)` of
//! its own module that reports with [`Report::ok`], [`Report::warn`] or [`Report::fail`]
//! (each failure with the command that fixes it) and returns without a word when the channel
//! is not configured.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Report;
use crate::config::Config;
use crate::workspace::Workspace;

/// The checks of every service `chela run` starts, in the order it starts them.
pub(super) async fn check(ws: &Workspace, cfg: &Config, r: &mut Report) {
    gateway(ws, cfg, r).await;
}

/// How long a running daemon has to answer `/health`: it answers from memory at once.
const HEALTH_WAIT: Duration = Duration::from_secs(2);

/// The most of a `/health` answer read.
const MAX_HEALTH_ANSWER: u64 = 16 * 1024;

/// Where the gateway listens, as `chela run` reads it.
fn listen_addr(cfg: &Config) -> SocketAddr {
    cfg.settings().gateway.addr()
}

async fn gateway(ws: &Workspace, cfg: &Config, r: &mut Report) {
    let addr = listen_addr(cfg);
    // The daemon of this workspace, when it listens there; another workspace's does not count.
    let ours = crate::cmd::presence::running_info(ws).filter(|i| i.listen.parse() == Ok(addr)).map(|i| i.pid);
    gateway_at(addr, &cfg.settings().gateway.token, ours, r).await;
}

/// Whether `chela run` can listen on `addr`: it is free, or this workspace's running Chela
/// (process `ours`) already serves it.
async fn gateway_at(addr: SocketAddr, token: &str, ours: Option<u32>, r: &mut Report) {
    let other_port = "chela config set gateway.listen 127.0.0.1:PORT   (another free port)";
    // Bound and let go at once. The standard listener sets SO_REUSEADDR, as the gateway's does,
    // so a port in TIME_WAIT counts as free and only a live listener counts as taken.
    let err = match std::net::TcpListener::bind(addr) {
        Ok(listener) => {
            drop(listener);
            r.ok(&format!("gateway address {addr} is free for `chela run`"));
            return;
        }
        Err(e) => e,
    };
    match err.kind() {
        std::io::ErrorKind::AddrInUse => match health(addr, token).await {
            Ok(()) => match ours {
                Some(pid) => r.ok(&format!(
                    "gateway address {addr} is served by a running `chela run` of this workspace (pid {pid})"
                )),
                None => r.fail(
                    &format!(
                        "gateway address {addr} is served by a Chela that is not this workspace's (`chela status` here \
                         says none runs); `chela run` here could not start"
                    ),
                    &format!("stop that one, or {other_port}"),
                ),
            },
            Err(why) => r.fail(
                &format!("gateway address {addr} is taken by another program ({why}); `chela run` could not start"),
                &format!("stop that program, or {other_port}"),
            ),
        },
        std::io::ErrorKind::PermissionDenied => {
            r.fail(&format!("`chela run` may not listen on {addr}: ports below 1024 need privileges"), other_port)
        }
        std::io::ErrorKind::AddrNotAvailable => r.fail(
            &format!("gateway address {addr} is not an address of this machine"),
            "chela config set gateway.listen 127.0.0.1:18789   (or an address of this machine)",
        ),
        _ => r.fail(&format!("`chela run` cannot listen on {addr}: {err}"), other_port),
    }
}

/// Asks whatever listens on `addr` for the gateway's `GET /health`: `Ok` when it answers as a
/// Chela gateway does (200, `{"status":"ok"}`), else what it did instead.
pub(super) async fn health(addr: SocketAddr, token: &str) -> Result<(), String> {
    health_at(addr, "/health", token).await
}

/// [`health`] on `path`: `/healthz` needs no token.
pub(super) async fn health_at(addr: SocketAddr, path: &str, token: &str) -> Result<(), String> {
    let (status, body) = get(addr, path, token).await?;
    let ok = status.split_whitespace().nth(1) == Some("200");
    let chela = serde_json::from_str::<serde_json::Value>(body.trim()).is_ok_and(|v| v["status"] == "ok");
    if ok && chela {
        Ok(())
    } else if status.is_empty() {
        Err("it does not answer HTTP".to_owned())
    } else {
        Err(format!("it answers GET {path} with {status:?}, not as Chela does"))
    }
}

/// `GET path` on the gateway at `addr` (a wildcard address through loopback): the status line
/// and the body, within [`HEALTH_WAIT`] and [`MAX_HEALTH_ANSWER`] bytes.
pub(super) async fn get(addr: SocketAddr, path: &str, token: &str) -> Result<(String, String), String> {
    let target = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
        _ => addr,
    };
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(target).await.map_err(|e| format!("cannot connect: {e}"))?;
        let auth = if token.is_empty() { String::new() } else { format!("Authorization: Bearer {token}\r\n") };
        let request = format!("GET {path} HTTP/1.1\r\nHost: {target}\r\n{auth}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.map_err(|e| format!("cannot send: {e}"))?;
        let mut answer = Vec::new();
        stream.take(MAX_HEALTH_ANSWER).read_to_end(&mut answer).await.map_err(|e| format!("cannot read: {e}"))?;
        Ok::<_, String>(String::from_utf8_lossy(&answer).into_owned())
    };
    let answer = match tokio::time::timeout(HEALTH_WAIT, ask).await {
        Ok(answer) => answer?,
        Err(_) => return Err(format!("no answer to GET {path} within {} s", HEALTH_WAIT.as_secs())),
    };
    let status = answer.lines().next().unwrap_or_default().to_owned();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server on 127.0.0.1 that answers every connection with `answer`; returns its address.
    async fn server(answer: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        addr
    }

    async fn report(addr: SocketAddr) -> (Report, String) {
        let mut r = Report::default();
        gateway_at(addr, "", Some(4242), &mut r).await;
        let text = r.lines.join("\n");
        (r, text)
    }

    #[tokio::test]
    async fn a_free_address_is_ok() {
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (r, text) = report(addr).await;
        assert_eq!(r.failures, 0, "{text}");
        assert!(text.contains("is free"), "{text}");
    }

    #[tokio::test]
    async fn an_address_a_running_chela_serves_is_ok() {
        let addr = server("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"status\":\"ok\"}").await;
        let (r, text) = report(addr).await;
        assert_eq!(r.failures, 0, "{text}");
        assert!(text.contains("served by a running `chela run` of this workspace (pid 4242)"), "{text}");
    }

    #[tokio::test]
    async fn a_chela_of_another_workspace_is_not_ours() {
        let addr = server("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"status\":\"ok\"}").await;
        let mut r = Report::default();
        gateway_at(addr, "", None, &mut r).await;
        let text = r.lines.join("\n");
        assert_eq!(r.failures, 1, "{text}");
        assert!(text.contains("not this workspace's") && text.contains("fix: stop that one"), "{text}");
    }

    #[tokio::test]
    async fn an_address_another_program_holds_fails_with_the_fix() {
        let addr = server("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").await;
        let (r, text) = report(addr).await;
        assert_eq!(r.failures, 1, "{text}");
        assert!(text.contains("taken by another program") && text.contains("404"), "{text}");
        assert!(text.contains("fix: stop that program"), "{text}");
    }

    #[test]
    fn the_listen_address_is_read_from_the_settings() {
        let g = |listen: &str| {
            let file = format!("[gateway]\nlisten = {listen:?}\n");
            Config::from_layers(Some(&file), None, &[]).map(|cfg| listen_addr(&cfg))
        };
        assert_eq!(g("127.0.0.1:18789").unwrap(), "127.0.0.1:18789".parse().unwrap());
        assert_eq!(g("[::1]:9000").unwrap(), "[::1]:9000".parse().unwrap());
        assert!(g("my-box:80").is_err(), "a name is refused when the settings load");
    }
}
