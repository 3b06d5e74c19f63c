//! Outbound proxies: HTTP `CONNECT` tunnels and SOCKS5 (RFC 1928, with RFC 1929
//! username/password authentication).
//!
//! `Proxy` holds the parsed proxy URL; `Proxy::handshake` turns a fresh TCP connection to the
//! proxy into a tunnel to one destination, after which the caller speaks TLS or HTTP through it.
//! Every target, `http://` included, goes through a tunnel so all traffic takes the same path.
//!
//! SOCKS5 is `tokio-socks`. HTTP `CONNECT` stays hand-written: hyper-util's tunnel connector
//! (0.1.21) accepts only status 200 and reports every other answer as one "unsuccessful", so a
//! 403 policy refusal, a 502 the caller may retry, and tinyproxy's 401 for missing credentials
//! would all look alike; it also drops bytes a confused proxy sends after its answer.
//! Not supported: TLS to the proxy (`https://` proxies), SOCKS4, PAC files, `NO_PROXY` lists.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_socks as socks;
use tokio_socks::tcp::Socks5Stream;

use super::error::NetError;
use super::url::{authority, parse_host_port};

#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    kind: Kind,
    pub(crate) host: String,
    pub(crate) ip: Option<IpAddr>,
    pub(crate) port: u16,
    auth: Option<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    HttpConnect,
    /// `remote_dns` is `socks5h`: the proxy resolves the host name.
    Socks5 {
        remote_dns: bool,
    },
}

/// Where the tunnel should lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dest {
    /// Already resolved (and, under `Guard::PublicOnly`, checked) here.
    Ip(SocketAddr),
    /// Resolved by the proxy.
    Name(String, u16),
}

impl Dest {
    fn authority(&self) -> String {
        match self {
            Dest::Ip(addr) => addr.to_string(),
            Dest::Name(host, port) => authority(host, *port),
        }
    }
}

impl Proxy {
    /// Parses `http://[user:pass@]host:port`, `socks5://…` (resolve here) or `socks5h://…`
    /// (the proxy resolves). User and password may be percent-encoded.
    pub fn parse(url: &str) -> Result<Proxy, String> {
        let bad = |why: &str| format!("invalid proxy URL `{}`: {why}", redact(url));
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("expected http://host:port, socks5://host:port or socks5h://host:port"))?;
        let kind = match scheme.to_ascii_lowercase().as_str() {
            "http" => Kind::HttpConnect,
            "socks5" => Kind::Socks5 { remote_dns: false },
            "socks5h" => Kind::Socks5 { remote_dns: true },
            "https" => return Err(bad("TLS to the proxy (https://) is not supported; use http:// or socks5://")),
            _ => return Err(bad(&format!("the scheme `{scheme}` is not supported; use http, socks5 or socks5h"))),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(bad("a proxy URL has no path"));
        }
        let (auth, hostport) = match rest.rsplit_once('@') {
            None => (None, rest),
            Some((userinfo, hostport)) => {
                let (user, pass) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                let (user, pass) =
                    (percent_decode(user).map_err(|e| bad(&e))?, percent_decode(pass).map_err(|e| bad(&e))?);
                if user.is_empty() {
                    return Err(bad("the user name is empty"));
                }
                if matches!(kind, Kind::Socks5 { .. }) && (user.len() > 255 || pass.is_empty() || pass.len() > 255) {
                    return Err(bad("SOCKS5 needs a user name and a password of 1 to 255 bytes each"));
                }
                (Some((user, pass)), hostport)
            }
        };
        let (host, ip, port) = parse_host_port(hostport).map_err(|e| bad(&e))?;
        let port = port.ok_or_else(|| bad("the port is missing, e.g. socks5h://127.0.0.1:1080"))?;
        Ok(Proxy { kind, host, ip, port, auth })
    }

    /// Whether the origin's name must be resolved here rather than by the proxy.
    pub(crate) fn resolves_locally(&self) -> bool {
        self.kind == Kind::Socks5 { remote_dns: false }
    }

    /// Asks the proxy, over `stream`, for a tunnel to `dest`. On success the next byte on
    /// `stream` belongs to the destination. The caller bounds this with a deadline.
    pub(crate) async fn handshake<S>(&self, stream: &mut S, dest: &Dest) -> Result<(), NetError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        match self.kind {
            Kind::HttpConnect => self.http_connect(stream, dest).await,
            Kind::Socks5 { .. } => self.socks5(stream, dest).await,
        }
    }

    fn fail(&self, reason: impl Into<String>, retryable: bool) -> NetError {
        NetError::Proxy { proxy: self.to_string(), reason: reason.into(), retryable }
    }

    fn dropped(&self, e: &std::io::Error) -> NetError {
        self.fail(format!("closed the connection during the handshake ({})", super::error::io_reason(e)), true)
    }

    async fn http_connect<S>(&self, stream: &mut S, dest: &Dest) -> Result<(), NetError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let target = dest.authority();
        let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some((user, pass)) = &self.auth {
            head.push_str(&format!("Proxy-Authorization: Basic {}\r\n", base64(format!("{user}:{pass}").as_bytes())));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.map_err(|e| self.dropped(&e))?;

        // Read exactly the response head: anything after it already belongs to the tunnel, and
        // since the client speaks first in both HTTP and TLS, extra bytes mean a confused proxy.
        let mut buf = Vec::with_capacity(256);
        let mut piece = [0u8; 512];
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > 8 * 1024 {
                return Err(self.fail("sent a CONNECT response head over 8 KiB", false));
            }
            let n = stream.read(&mut piece).await.map_err(|e| self.dropped(&e))?;
            if n == 0 {
                return Err(self.fail(format!("closed the connection instead of answering CONNECT {target}"), true));
            }
            buf.extend_from_slice(&piece[..n]);
        };
        let status_line = String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == b'\r').unwrap_or(0)])
            .chars()
            .take(100)
            .collect::<String>();
        let code = match status_line.split(' ').collect::<Vec<_>>()[..] {
            [version, code, ..] if version.starts_with("HTTP/1.") => code.parse::<u16>().ok(),
            _ => None,
        };
        match code {
            Some(200..=299) if end == buf.len() => Ok(()),
            Some(200..=299) => Err(self.fail("sent data before the tunnel was used", false)),
            // 407 is the standard answer; tinyproxy 1.11 sends 401 to CONNECT.
            Some(code @ (401 | 407)) if self.auth.is_some() => {
                Err(self.fail(format!("rejected the user name and password ({code})"), false))
            }
            Some(code @ (401 | 407)) => {
                Err(self.fail(format!("requires a user name and password ({code}); put them in the proxy URL"), false))
            }
            Some(502..=504) => Err(self.fail(format!("could not reach {target}: {status_line}"), true)),
            Some(_) => Err(self.fail(format!("refused CONNECT {target}: {status_line}"), false)),
            None => Err(self.fail(format!("is not an HTTP proxy (it answered `{status_line}`)"), false)),
        }
    }

    /// SOCKS5 through `tokio-socks`, which takes an already-connected stream and an IP target,
    /// so the guard's checked address is exactly what the proxy is asked for.
    async fn socks5<S>(&self, stream: &mut S, dest: &Dest) -> Result<(), NetError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let done = match (dest, &self.auth) {
            (Dest::Ip(addr), None) => Socks5Stream::connect_with_socket(stream, *addr).await.map(drop),
            (Dest::Ip(addr), Some((user, pass))) => {
                Socks5Stream::connect_with_password_and_socket(stream, *addr, user, pass).await.map(drop)
            }
            (Dest::Name(host, port), None) => {
                Socks5Stream::connect_with_socket(stream, (host.as_str(), *port)).await.map(drop)
            }
            (Dest::Name(host, port), Some((user, pass))) => {
                Socks5Stream::connect_with_password_and_socket(stream, (host.as_str(), *port), user, pass)
                    .await
                    .map(drop)
            }
        };
        done.map_err(|e| self.socks5_error(&e, dest))
    }

    fn socks5_error(&self, e: &socks::Error, dest: &Dest) -> NetError {
        use socks::Error as E;
        let unreachable = |why: &str, retryable: bool| {
            self.fail(format!("could not connect to {}: {why}", dest.authority()), retryable)
        };
        match e {
            E::Io(io) => self.dropped(io),
            E::NoAcceptableAuthMethods | E::AuthorizationRequired if self.auth.is_none() => {
                self.fail("requires a user name and password; put them in the proxy URL", false)
            }
            E::NoAcceptableAuthMethods | E::UnknownAuthMethod | E::AuthorizationRequired => {
                self.fail("accepts none of the offered authentication methods", false)
            }
            E::PasswordAuthFailure(_) => self.fail("rejected the user name and password", false),
            E::GeneralSocksServerFailure => unreachable("general failure", true),
            E::ConnectionNotAllowedByRuleset => unreachable("not allowed by its rules", false),
            E::NetworkUnreachable => unreachable("network unreachable", true),
            E::HostUnreachable => unreachable("host unreachable", true),
            E::ConnectionRefused => unreachable("connection refused", true),
            E::TtlExpired => unreachable("TTL expired", true),
            E::CommandNotSupported => unreachable("CONNECT not supported", false),
            E::AddressTypeNotSupported => unreachable("address type not supported", false),
            E::InvalidTargetAddress(why) => {
                self.fail(format!("cannot be asked for {}: {why}", dest.authority()), false)
            }
            E::InvalidResponseVersion | E::InvalidReservedByte | E::UnknownAddressType => {
                self.fail("is not a SOCKS5 proxy", false)
            }
            other => self.fail(format!("failed the SOCKS5 handshake: {other}"), false),
        }
    }
}

/// Never shows the credentials: this is what goes into error messages and logs.
impl fmt::Display for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.kind {
            Kind::HttpConnect => "http",
            Kind::Socks5 { remote_dns: false } => "socks5",
            Kind::Socks5 { remote_dns: true } => "socks5h",
        };
        write!(f, "{scheme}://{}", authority(&self.host, self.port))
    }
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = self.auth.as_ref().map(|(user, _)| user.as_str());
        f.debug_struct("Proxy").field("url", &self.to_string()).field("user", &user).finish_non_exhaustive()
    }
}

/// The URL with any password replaced, for error messages about the URL itself.
fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, rest)), Some((_, hostport))) if rest.contains('@') => format!("{scheme}://***@{hostport}"),
        _ => url.to_owned(),
    }
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(hex.ok_or("a `%` in the user name or password is not followed by two hex digits")?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the user name or password is not UTF-8".to_owned())
}

fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    #[test]
    fn parses_proxy_urls() {
        let p = Proxy::parse("http://127.0.0.1:8888").unwrap();
        assert_eq!((p.kind, p.host.as_str(), p.port, p.auth.is_none()), (Kind::HttpConnect, "127.0.0.1", 8888, true));
        assert_eq!(p.to_string(), "http://127.0.0.1:8888");

        let p = Proxy::parse("socks5h://us%40er:p%3Ass@Proxy.example:1080/").unwrap();
        assert_eq!(p.kind, Kind::Socks5 { remote_dns: true });
        assert_eq!(p.host, "proxy.example");
        assert_eq!(p.auth, Some(("us@er".into(), "p:ss".into())));
        assert_eq!(p.to_string(), "socks5h://proxy.example:1080", "credentials must not be displayed");
        assert!(!format!("{p:?}").contains("p:ss"), "Debug must not show the password");

        let p = Proxy::parse("socks5://[::1]:1080").unwrap();
        assert!(p.resolves_locally());
        assert_eq!(p.to_string(), "socks5://[::1]:1080");
    }

    #[test]
    fn explains_bad_proxy_urls() {
        let cases = [
            ("127.0.0.1:8080", "expected http://host:port"),
            ("https://p:443", "not supported"),
            ("socks4://p:1080", "scheme `socks4`"),
            ("http://p", "port is missing"),
            ("http://p:8080/path", "no path"),
            ("http://p:x", "not a valid port"),
            ("socks5://user@p:1080", "password"),
            ("http://:pw@p:8080", "user name is empty"),
            ("http://u:%zz@p:8080", "two hex digits"),
        ];
        for (input, want) in cases {
            let err = Proxy::parse(input).expect_err(input);
            assert!(err.contains(want), "{input}: {err}");
        }
        let err = Proxy::parse("ftp://user:secret@p:1").unwrap_err();
        assert!(!err.contains("secret"), "{err}");
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, want) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("foobar", "Zm9vYmFy")]
        {
            assert_eq!(base64(input.as_bytes()), want);
        }
    }

    /// Runs the client handshake against a scripted proxy: `script` gets the proxy's end.
    async fn against<F>(proxy: &str, dest: Dest, script: F) -> Result<(), NetError>
    where
        F: AsyncFnOnce(tokio::io::DuplexStream),
    {
        let proxy = Proxy::parse(proxy).unwrap();
        let (mut client, server) = duplex(4096);
        let (res, ()) = tokio::join!(proxy.handshake(&mut client, &dest), script(server));
        res
    }

    async fn expect(s: &mut tokio::io::DuplexStream, want: &[u8]) {
        let mut got = vec![0u8; want.len()];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(got, want);
    }

    async fn read_head(s: &mut tokio::io::DuplexStream) {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(s.read_u8().await.unwrap());
        }
    }

    #[tokio::test]
    async fn socks5_sends_the_checked_ip_or_the_name() {
        let ip = Dest::Ip("93.184.215.14:443".parse().unwrap());
        let res = against("socks5h://u:p@proxy:1080", ip, async |mut s| {
            expect(&mut s, &[5, 2, 0, 2]).await;
            s.write_all(&[5, 2]).await.unwrap();
            expect(&mut s, &[1, 1, b'u', 1, b'p']).await;
            s.write_all(&[1, 0]).await.unwrap();
            expect(&mut s, &[5, 1, 0, 1, 93, 184, 215, 14, 1, 187]).await;
            s.write_all(&[5, 0, 0, 1, 10, 0, 0, 1, 0x12, 0x34]).await.unwrap();
        })
        .await;
        res.unwrap();

        let name = Dest::Name("example.com".into(), 80);
        let res = against("socks5h://proxy:1080", name, async |mut s| {
            expect(&mut s, &[5, 1, 0]).await;
            s.write_all(&[5, 0]).await.unwrap();
            expect(&mut s, b"\x05\x01\x00\x03\x0bexample.com\x00\x50").await;
            // A domain-typed bound address must be consumed in full.
            s.write_all(b"\x05\x00\x00\x03\x01x\x00\x00").await.unwrap();
        })
        .await;
        res.unwrap();
    }

    #[tokio::test]
    async fn socks5_failures_are_classified() {
        let dest = || Dest::Ip("[2001:db8::1]:443".parse().unwrap());
        let err = against("socks5://proxy:1080", dest(), async |mut s| {
            expect(&mut s, &[5, 1, 0]).await;
            s.write_all(&[5, 0xff]).await.unwrap();
        })
        .await
        .unwrap_err();
        assert!(!err.is_retryable() && err.to_string().contains("requires a user name"), "{err}");

        let err = against("socks5://proxy:1080", dest(), async |mut s| {
            expect(&mut s, &[5, 1, 0]).await;
            s.write_all(&[5, 0]).await.unwrap();
            let mut req = [0u8; 4 + 16 + 2];
            s.read_exact(&mut req).await.unwrap();
            assert_eq!(req[3], 4, "IPv6 address type");
            s.write_all(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0]).await.unwrap();
        })
        .await
        .unwrap_err();
        assert!(err.is_retryable(), "refused by the target: another address may work");
        assert_eq!(
            err.to_string(),
            "proxy socks5://proxy:1080 could not connect to [2001:db8::1]:443: connection refused"
        );
    }

    #[tokio::test]
    async fn http_connect_reads_exactly_the_response_head() {
        let dest = || Dest::Name("example.com".into(), 443);
        let res = against("http://u:p@proxy:3128", dest(), async |mut s| {
            expect(
                &mut s,
                b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: Basic dTpw\r\n\r\n",
            )
            .await;
            s.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.unwrap();
        })
        .await;
        res.unwrap();

        let err = against("http://proxy:3128", dest(), async |mut s| {
            read_head(&mut s).await;
            s.write_all(b"HTTP/1.1 200 OK\r\n\r\nsurprise").await.unwrap();
        })
        .await
        .unwrap_err();
        assert!(err.to_string().contains("sent data before"), "{err}");

        for (answer, retryable, want) in [
            (&b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"[..], false, "requires a user name"),
            (b"HTTP/1.0 403 Filtered\r\n\r\n", false, "refused CONNECT example.com:443: HTTP/1.0 403 Filtered"),
            (b"HTTP/1.1 502 Bad Gateway\r\n\r\n", true, "could not reach example.com:443"),
            (b"SSH-2.0-OpenSSH\r\n\r\n", false, "is not an HTTP proxy"),
        ] {
            let err = against("http://proxy:3128", dest(), async |mut s| {
                read_head(&mut s).await;
                s.write_all(answer).await.unwrap();
            })
            .await
            .unwrap_err();
            assert_eq!(err.is_retryable(), retryable, "{err}");
            assert!(err.to_string().contains(want), "{err}");
        }
    }
}
