//! Who may use the gateway.
//!
//! Every request needs `gateway.token` (`Authorization: Bearer <token>`; browsers' WebSockets
//! cannot set headers, so `?token=` on the upgrade URL counts too), on loopback as anywhere
//! else: on a shared machine a loopback port is reachable by every user's processes, and the
//! console can approve strangers, change settings and reveal where the API key goes. Open to
//! anyone are only the page itself (it holds no data and asks for the token), the login
//! exchange (`POST /api/login`, see [`super::login`]), `/favicon.ico` (there is none), on
//! loopback `GET /health`, and everywhere `GET /healthz`: a container's health check, which
//! holds no token, and whose answer is `ok` and nothing else.
//!
//! Two browser attacks reach a loopback port whatever the token, and both are refused here:
//! another site's page posting to it (CSRF: a state-changing request or a WebSocket upgrade
//! whose `Origin` is not the gateway itself), and a site whose name was re-pointed at
//! 127.0.0.1 (DNS rebinding: a `Host` that is not `127.0.0.1`, `localhost` or `[::1]`).
//!
//! The token is compared in constant time. When none is set, [`token_for`] makes one and
//! stores it in the runtime layer; it is printed once only when the gateway listens beyond
//! this machine (on loopback the printed login link is how the owner gets in).

use std::net::SocketAddr;

use anyhow::Context;
use chela_core::config::GATEWAY_TOKEN;
/// The token rules the chip's gateway shares.
pub use chela_proto::gateway::query_param;
use chela_proto::gateway::{bearer, token_matches};
use hyper::header::{AUTHORIZATION, HOST, ORIGIN};
use hyper::{Method, Request};

use super::{ApiError, Gateway};
use crate::daemon::Daemon;
use crate::serve::http::Who;

/// The token clients must present on `listen`. Generates and stores one when none is set.
pub fn token_for(daemon: &Daemon, listen: SocketAddr) -> anyhow::Result<String> {
    let cfg = daemon.config();
    let set = cfg.get(GATEWAY_TOKEN).trim();
    if !set.is_empty() {
        return Ok(set.to_owned());
    }
    let token = ensure_token(daemon.workspace(), &cfg)?;
    if !listen.ip().is_loopback() {
        // Printed once, to the person starting the daemon: it is how they learn it.
        eprintln!(
            "The gateway listens on {listen}, which other machines can reach, so it needs a token. A new one was \
             stored in overrides.toml (gateway.token):\n\n    {token}\n\nSend it as `Authorization: Bearer <token>`, \
             or paste it into the web page when it asks."
        );
    }
    Ok(token)
}

/// `gateway.token`, made and stored in the runtime layer first when it is not set.
pub fn ensure_token(ws: &crate::workspace::Workspace, cfg: &crate::config::Config) -> anyhow::Result<String> {
    let set = cfg.get(GATEWAY_TOKEN).trim();
    if !set.is_empty() {
        return Ok(set.to_owned());
    }
    let token = new_token()?;
    crate::config::set_override(ws, GATEWAY_TOKEN.name, &token)
        .context("cannot store the new gateway.token in overrides.toml")?;
    Ok(token)
}

/// Where a browser on this machine reaches a gateway bound to `bound`.
pub fn base_url(bound: SocketAddr) -> String {
    let ip = bound.ip();
    match ip {
        _ if ip.is_unspecified() || ip.is_loopback() => format!("http://127.0.0.1:{}", bound.port()),
        std::net::IpAddr::V6(v6) => format!("http://[{v6}]:{}", bound.port()),
        std::net::IpAddr::V4(v4) => format!("http://{v4}:{}", bound.port()),
    }
}

/// `chela console`: a fresh link to the gateway `cfg` describes, making and storing
/// `gateway.token` first if none is set.
pub fn console_link(ws: &crate::workspace::Workspace, cfg: &crate::config::Config) -> anyhow::Result<String> {
    let listen = cfg.settings().gateway.addr();
    if listen.port() == 0 {
        anyhow::bail!(
            "gateway.listen is {listen}: the port is chosen when `chela run` starts, so only the link it prints \
             can name it. Set a fixed port (`chela config set gateway.listen 127.0.0.1:18789`) to use `chela console`."
        );
    }
    let token = ensure_token(ws, cfg)?;
    super::login::link(&base_url(listen), &token, crate::clock::Clock::system().unix_secs_u64())
}

/// Prints the one-time console login link for a gateway bound to `bound`: the one line where
/// a login code is ever written out.
pub fn announce(token: &str, bound: SocketAddr) {
    match super::login::link(&base_url(bound), token, crate::clock::Clock::system().unix_secs_u64()) {
        Ok(link) => eprintln!(
            "chela: open the console with this link (it works once, within {} minutes; `chela console` prints \
             a new one):\n\n    {link}\n",
            super::login::LINK_LIFETIME_SECS / 60
        ),
        Err(e) => eprintln!("chela: no console login link: {e:#}"),
    }
}

/// 32 random bytes as hex.
pub fn new_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())
        .context("cannot read random bytes for a gateway token")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Decides whether `req` may be served. `open` requests (the page, devices with their own
/// credentials) need no token.
pub fn check<B>(gw: &Gateway, peer: SocketAddr, req: &Request<B>, open: bool) -> Result<Who, ApiError> {
    let host = req.headers().get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let loopback = gw.listen.ip().is_loopback();
    if loopback && !is_local_host(host) {
        return Err(ApiError::Forbidden(format!(
            "This gateway answers only to 127.0.0.1, localhost or [::1], not to the host name `{}`.",
            clip(host)
        )));
    }
    let changes = !matches!(*req.method(), Method::GET | Method::HEAD) || crate::serve::http::is_upgrade(req);
    if changes && let Some(origin) = req.headers().get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !same_origin(origin, host) {
            return Err(ApiError::Forbidden(format!(
                "A page from {} may not use this gateway; open Chela's own page instead.",
                clip(origin)
            )));
        }
    }
    let who = if loopback { Who::Owner } else { Who::TokenHolder };
    let path = req.uri().path();
    let health = *req.method() == Method::GET && (path == HEALTHZ || (loopback && path == "/health"));
    // Browsers ask for it by themselves; it is answered 404 (there is none), not 401.
    let icon = *req.method() == Method::GET && path == "/favicon.ico";
    let login = *req.method() == Method::POST && path == LOGIN_PATH;
    if open || health || login || icon {
        return Ok(who);
    }
    // The token of the settings now, not of the start: after `chela gateway token --rotate` the
    // old one is refused from the next request on.
    let live = gw.live_token.current(gw.daemon.workspace());
    // No token configured: nobody is let in (the gateway is always started with one).
    let token = live.as_deref().or(gw.token.as_deref()).unwrap_or("");
    let bearer = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer);
    let query =
        crate::serve::http::is_upgrade(req).then(|| query_param(req.uri().query().unwrap_or(""), "token")).flatten();
    match bearer.or(query.as_deref()) {
        Some(given) if token_matches(given, token) => Ok(who),
        _ => {
            chela_log::info!(%peer, "gateway: a request without the right token was refused");
            Err(ApiError::Unauthorized)
        }
    }
}

/// `gateway.token` as the settings files say now. The files are looked at (two `stat`s) on each
/// check and read again only when one changed; a file that cannot be read, or names no token,
/// leaves the token the gateway started with.
#[derive(Debug, Default)]
pub struct LiveToken {
    seen: std::sync::Mutex<Option<Seen>>,
}

/// The two files' stamps when last read, and the token they named.
type Seen = ([Option<Stamp>; 2], Option<String>);

/// What tells a changed file: inode (an atomic write renames a new one in), size, time.
type Stamp = (u64, u64, i64, i64);

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

impl LiveToken {
    pub fn current(&self, ws: &crate::workspace::Workspace) -> Option<String> {
        let now = [stamp(&ws.config_path()), stamp(&ws.overrides_path())];
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*seen {
            Some((stamps, token)) if *stamps == now => token.clone(),
            _ => {
                let token = crate::config::Config::load(ws)
                    .ok()
                    .map(|c| c.get(GATEWAY_TOKEN).trim().to_owned())
                    .filter(|t| !t.is_empty());
                *seen = Some((now, token.clone()));
                token
            }
        }
    }
}

/// The health answer anyone may ask for: `{"status":"ok"}`, no state, no secrets.
pub const HEALTHZ: &str = "/healthz";

/// Where the page trades a one-time login code for the token.
pub const LOGIN_PATH: &str = "/api/login";

/// A `Host` header naming this machine: `127.0.0.1`, `localhost` or `[::1]`, any port.
fn is_local_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().map(|h| format!("[{h}]")).unwrap_or_default(),
        None => host.split(':').next().unwrap_or("").to_owned(),
    };
    matches!(name.to_ascii_lowercase().as_str(), "127.0.0.1" | "localhost" | "[::1]")
}

/// Whether `origin` (`http://host:port`) is the gateway itself, as the request's `Host` names it.
fn same_origin(origin: &str, host: &str) -> bool {
    let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    rest.is_some_and(|r| !host.is_empty() && r.eq_ignore_ascii_case(host))
}

/// A header value as it may be quoted in an error: bounded.
fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_host_names_with_and_without_ports() {
        for h in ["127.0.0.1", "127.0.0.1:18789", "localhost:1", "LOCALHOST", "[::1]:80", "[::1]"] {
            assert!(is_local_host(h), "{h}");
        }
        for h in ["", "evil.example", "evil.example:18789", "127.0.0.1.evil.example", "[::2]:80", "0.0.0.0"] {
            assert!(!is_local_host(h), "{h}");
        }
    }

    #[test]
    fn origins_must_be_the_gateway_itself() {
        assert!(same_origin("http://127.0.0.1:18789", "127.0.0.1:18789"));
        assert!(!same_origin("http://127.0.0.1:18790", "127.0.0.1:18789"));
        assert!(!same_origin("https://evil.example", "127.0.0.1:18789"));
        assert!(!same_origin("null", "127.0.0.1:18789"));
        assert!(!same_origin("http://", ""));
    }
}
