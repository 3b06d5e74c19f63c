//! An HTTP proxy for the chip's outbound connections: a `CONNECT` tunnel (RFC 9110 §9.3.6),
//! sans-IO. The board opens TCP to the proxy, writes [`Proxy::connect_head`], feeds what it
//! reads to [`connect_answer`] until it is decided, then speaks TLS through the socket as if it
//! were the destination (the certificate is still checked against the destination's name).
//!
//! The proxy is set from the serial console as `http://[user:password@]host:port`; the same
//! rules as the host's `proxy.url` for HTTP proxies: the answer's head is bounded, only 2xx opens
//! the tunnel, and bytes sent before the client spoke mean a confused proxy.

use alloc::format;
use alloc::string::String;

/// The longest answer head read from the proxy.
pub const MAX_ANSWER_HEAD: usize = 1024;

/// A parsed proxy setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxy {
    pub host: String,
    pub port: u16,
    /// `user:password`, base64, for `Proxy-Authorization: Basic`.
    auth: Option<String>,
}

impl Proxy {
    /// `http://[user:password@]host[:port]` (port 8080 when left out); `""` is no proxy.
    pub fn parse(url: &str) -> Result<Option<Proxy>, String> {
        let url = url.trim();
        if url.is_empty() {
            return Ok(None);
        }
        let bad = || String::from("a proxy is http://[user:password@]host:port (an HTTP CONNECT proxy)");
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (auth, hostport) = match rest.rsplit_once('@') {
            Some((a, h)) => (Some(a), h),
            None => (None, rest),
        };
        if hostport.contains(['/', '?', '#', '@']) || hostport.starts_with('[') {
            return Err(bad());
        }
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(bad)?),
            None => (hostport, 8080),
        };
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !host_ok {
            return Err(bad());
        }
        let auth = match auth {
            Some(a) if a.contains(':') && !a.bytes().any(|b| b.is_ascii_control()) => {
                Some(crate::gateway::base64(a.as_bytes()))
            }
            Some(_) => return Err(bad()),
            None => None,
        };
        Ok(Some(Proxy { host: String::from(host), port, auth }))
    }

    /// The request that asks for a tunnel to `host:port`.
    pub fn connect_head(&self, host: &str, port: u16) -> String {
        let auth = match &self.auth {
            Some(a) => format!("Proxy-Authorization: Basic {a}\r\n"),
            None => String::new(),
        };
        format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}\r\n")
    }

    /// Shown on the console: the password masked.
    pub fn shown(&self) -> String {
        let who = if self.auth.is_some() { "user:****@" } else { "" };
        format!("http://{who}{}:{}", self.host, self.port)
    }
}

/// Why the tunnel did not open.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub reason: String,
    /// Worth another try later (the proxy could not reach the destination, or closed).
    pub retryable: bool,
}

/// Reads the proxy's answer so far: `Ok(true)` once the tunnel is open, `Ok(false)` while more
/// bytes are needed, `Err` when it is refused or malformed.
pub fn connect_answer(buf: &[u8]) -> Result<bool, Refused> {
    let refused = |reason: String, retryable: bool| Refused { reason, retryable };
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4) else {
        if buf.len() >= MAX_ANSWER_HEAD {
            return Err(refused(format!("the proxy's answer head is over {MAX_ANSWER_HEAD} bytes"), false));
        }
        return Ok(false);
    };
    if end > MAX_ANSWER_HEAD {
        return Err(refused(format!("the proxy's answer head is over {MAX_ANSWER_HEAD} bytes"), false));
    }
    let line_end = buf.iter().position(|&b| b == b'\r').unwrap_or(0);
    let line = chela_core::text::prefix(core::str::from_utf8(&buf[..line_end]).unwrap_or("?"), 100);
    let mut words = line.split(' ');
    let code = match (words.next(), words.next()) {
        (Some(v), Some(c)) if v.starts_with("HTTP/1.") => c.parse::<u16>().ok(),
        _ => None,
    };
    match code {
        Some(200..=299) if end == buf.len() => Ok(true),
        Some(200..=299) => Err(refused(String::from("the proxy sent data before the tunnel was used"), false)),
        Some(401 | 407) => Err(refused(format!("the proxy wants a (correct) user name and password: {line}"), false)),
        Some(502..=504) => Err(refused(format!("the proxy could not reach the host: {line}"), true)),
        Some(_) => Err(refused(format!("the proxy refused the tunnel: {line}"), false)),
        None => Err(refused(format!("not an HTTP proxy (it answered `{line}`)"), false)),
    }
}
