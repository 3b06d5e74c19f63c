//! Absolute `http://` and `https://` URLs, parsed just far enough to open a connection and
//! write a request line.
//!
//! Not a general URL library: no relative references, no IDNA (non-ASCII hosts are refused), no
//! percent-decoding of hosts, and no credentials in the URL (send an `authorization` header).
//! The host is kept as written (lower-cased); whether it names a forbidden address is decided
//! after resolution, in `guard`, so odd spellings such as `127.1` cannot slip past.
//!
//! Why not a crate: `http::Uri` (already here; its `PathAndQuery` checks the request target)
//! accepts credentials, port 0, an empty port and any scheme, and its errors do not say which
//! part is wrong, so the checks below would remain anyway. The `url` crate maps non-ASCII hosts
//! through IDNA and percent-encodes spaces silently, so it would send requests this parser
//! refuses (and adds Unicode tables to the binary).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hyper::http::uri::PathAndQuery;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub https: bool,
    /// Lower-cased host name or IP literal; IPv6 without brackets.
    pub host: String,
    /// Set when the host is an IP literal, so it is never handed to the resolver.
    pub ip: Option<IpAddr>,
    pub port: u16,
    /// Origin-form request target: starts with `/`, no fragment.
    pub path_and_query: PathAndQuery,
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, String> {
        let (scheme, rest) = s.split_once("://").ok_or_else(|| "it must start with http:// or https://".to_owned())?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(format!("the scheme `{scheme}` is not supported; use http:// or https://")),
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err("credentials in the URL are not supported; send an authorization header instead".into());
        }
        let (host, ip, port) = parse_host_port(authority)?;
        let tail = tail.split('#').next().unwrap_or_default();
        let target = match tail.as_bytes().first() {
            None => "/".to_owned(),
            Some(b'?') => format!("/{tail}"),
            Some(_) => tail.to_owned(),
        };
        let path_and_query = target
            .parse::<PathAndQuery>()
            .map_err(|_| "the path contains characters that must be percent-encoded (such as spaces)".to_owned())?;
        Ok(Url { https, host, ip, port: port.unwrap_or(if https { 443 } else { 80 }), path_and_query })
    }

    /// `host:port` with IPv6 in brackets: for CONNECT, errors and logs.
    pub fn authority(&self) -> String {
        authority(&self.host, self.port)
    }

    /// The `Host` header value: the port is left out when it is the scheme's default.
    pub fn host_header(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        if self.port == default { bracketed(&self.host) } else { self.authority() }
    }
}

pub(crate) fn authority(host: &str, port: u16) -> String {
    format!("{}:{port}", bracketed(host))
}

fn bracketed(host: &str) -> String {
    if host.contains(':') { format!("[{host}]") } else { host.to_owned() }
}

/// Splits `host[:port]` or `[v6][:port]`. Shared with proxy URLs.
pub(crate) fn parse_host_port(authority: &str) -> Result<(String, Option<IpAddr>, Option<u16>), String> {
    let (host, ip, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or_else(|| "missing `]` after the IPv6 address".to_owned())?;
        let ip: Ipv6Addr = v6.parse().map_err(|_| format!("`{v6}` is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or_else(|| format!("unexpected `{after}` after the IPv6 address"))?),
        };
        (ip.to_string(), Some(IpAddr::V6(ip)), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if host.contains(':') {
            return Err("IPv6 addresses must be written in brackets, e.g. http://[2001:db8::1]:8080/".into());
        }
        if host.is_empty() {
            return Err("the host is missing".into());
        }
        if !host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')) {
            return Err(format!("`{host}` is not a valid host name"));
        }
        let host = host.to_ascii_lowercase();
        let ip = host.parse::<Ipv4Addr>().ok().map(IpAddr::V4);
        (host, ip, port)
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            _ if p.is_empty() => return Err("an empty port (nothing after `:`) is not a valid port".into()),
            Ok(0) | Err(_) => return Err(format!("`{p}` is not a valid port")),
            Ok(n) => Some(n),
        },
    };
    Ok((host, ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_providers_and_tools_use() {
        // (input, https, host, ip literal?, port, request target, Host header)
        let cases = [
            (
                "https://api.anthropic.com/v1/messages",
                true,
                "api.anthropic.com",
                false,
                443,
                "/v1/messages",
                "api.anthropic.com",
            ),
            ("http://Example.COM", false, "example.com", false, 80, "/", "example.com"),
            ("http://example.com?q=1#frag", false, "example.com", false, 80, "/?q=1", "example.com"),
            (
                "HTTPS://example.com:8443/a/b?c=d&e#x",
                true,
                "example.com",
                false,
                8443,
                "/a/b?c=d&e",
                "example.com:8443",
            ),
            ("http://127.0.0.1:8080/x", false, "127.0.0.1", true, 8080, "/x", "127.0.0.1:8080"),
            ("http://[::1]:3000/", false, "::1", true, 3000, "/", "[::1]:3000"),
            ("https://[2001:db8::1]/", true, "2001:db8::1", true, 443, "/", "[2001:db8::1]"),
            ("http://my_host.local/", false, "my_host.local", false, 80, "/", "my_host.local"),
        ];
        for (input, https, host, literal, port, target, host_header) in cases {
            let url = Url::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(url.https, https, "{input}");
            assert_eq!(url.host, host, "{input}");
            assert_eq!(url.ip.is_some(), literal, "{input}");
            assert_eq!(url.port, port, "{input}");
            assert_eq!(url.path_and_query.as_str(), target, "{input}");
            assert_eq!(url.host_header(), host_header, "{input}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_send_with_a_reason() {
        let cases = [
            ("example.com", "must start with http"),
            ("ftp://example.com/", "scheme `ftp`"),
            ("http://user:pw@example.com/", "credentials"),
            ("http:///path", "host is missing"),
            ("http://exa mple.com/", "not a valid host name"),
            ("http://exämple.com/", "not a valid host name"),
            ("http://example.com:0/", "not a valid port"),
            ("http://example.com:99999/", "not a valid port"),
            ("http://example.com:/", "not a valid port"),
            ("http://::1/", "brackets"),
            ("http://[::1/", "missing `]`"),
            ("http://[nope]/", "not an IPv6 address"),
            ("http://[::1]x/", "unexpected"),
            ("http://example.com/a b", "percent-encoded"),
        ];
        for (input, want) in cases {
            let err = Url::parse(input).expect_err(input);
            assert!(err.contains(want), "{input}: {err}");
        }
    }
}
