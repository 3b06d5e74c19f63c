//! From a URL to a connected TCP stream that leads to the origin: resolve, apply the guard, then
//! dial directly or open a proxy tunnel.
//!
//! Not TLS (`tls`) and not HTTP (`mod.rs`). Addresses are tried in resolver order, one at a
//! time; there is no Happy Eyeballs racing, which a single-user assistant does not need.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::{TcpStream, lookup_host};
use tokio::time::{Instant, timeout_at};

use super::Guard;
use super::error::{NetError, Phase, io_reason, resolver_says_no_such_name};
use super::guard::non_public_reason;
use super::proxy::{Dest, Proxy};
use super::url::Url;

/// Everything one connection attempt needs.
pub(crate) struct Dial<'a> {
    pub url: &'a Url,
    pub guard: Guard,
    pub proxy: Option<&'a Proxy>,
    pub connect_timeout: Duration,
    /// Bounds the whole attempt: resolution, every dial and the proxy handshake.
    pub deadline: Instant,
}

pub(crate) async fn open(d: &Dial<'_>) -> Result<TcpStream, NetError> {
    let Some(proxy) = d.proxy else {
        let addrs = origin_addrs(d).await?;
        return dial_any(&d.url.authority(), &addrs, d).await;
    };

    let dests: Vec<Dest> = if proxy_resolves(d.url, d.guard, proxy) {
        vec![Dest::Name(d.url.host.clone(), d.url.port)]
    } else {
        origin_addrs(d).await?.into_iter().map(Dest::Ip).collect()
    };
    let proxy_addrs = resolve(&proxy.host, proxy.ip, proxy.port, d.deadline).await?;
    let mut last = None;
    for dest in &dests {
        // A proxy we cannot reach fails the request at once: other destinations would not help.
        let mut stream = dial_any(&format!("proxy {proxy}"), &proxy_addrs, d).await?;
        match timeout_at(d.deadline, proxy.handshake(&mut stream, dest)).await {
            Ok(Ok(())) => return Ok(stream),
            Err(_) => return Err(NetError::Timeout { phase: Phase::Proxy, target: d.url.authority() }),
            // The proxy could not reach this address; the next one may work, as when dialling directly.
            Ok(Err(e)) if e.is_retryable() => last = Some(e),
            Ok(Err(e)) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| no_addresses(&d.url.host)))
}

/// Whether the proxy is given the origin's name to resolve. Under the guard it never is: it only
/// ever sees an address this process has checked. Otherwise `http://` and `socks5h://` proxies
/// get the name, which works where local DNS cannot (e.g. names only the proxy's network knows).
fn proxy_resolves(url: &Url, guard: Guard, proxy: &Proxy) -> bool {
    url.ip.is_none() && guard == Guard::AllowAll && !proxy.resolves_locally()
}

/// The origin's addresses, every one of them checked when the guard is on.
async fn origin_addrs(d: &Dial<'_>) -> Result<Vec<SocketAddr>, NetError> {
    let addrs = resolve(&d.url.host, d.url.ip, d.url.port, d.deadline).await?;
    if d.guard == Guard::PublicOnly {
        // One bad address refuses the whole name rather than being skipped: a name that mixes
        // public and private answers is more likely a rebinding trick than a real service.
        for addr in &addrs {
            if let Some(reason) = non_public_reason(addr.ip()) {
                return Err(NetError::Refused { host: d.url.host.clone(), addr: addr.ip(), reason });
            }
        }
    }
    Ok(addrs)
}

async fn resolve(host: &str, ip: Option<IpAddr>, port: u16, deadline: Instant) -> Result<Vec<SocketAddr>, NetError> {
    if let Some(ip) = ip {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    // RFC 6761 §6.4: resolver APIs should answer `.invalid` names negatively at once. Doing it
    // here means such a name fails the same way, and fast, with or without a working resolver.
    let bare = host.trim_end_matches('.');
    if bare == "invalid" || bare.ends_with(".invalid") {
        let reason = "names under `.invalid` never resolve (RFC 6761)".to_owned();
        return Err(NetError::Dns { host: host.to_owned(), reason, not_found: true });
    }
    match timeout_at(deadline, lookup_host((host, port))).await {
        Err(_) => Err(NetError::Timeout { phase: Phase::Dns, target: host.to_owned() }),
        Ok(Err(e)) => Err(NetError::Dns {
            host: host.to_owned(),
            reason: e.to_string(),
            not_found: resolver_says_no_such_name(&e),
        }),
        Ok(Ok(addrs)) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            if addrs.is_empty() { Err(no_addresses(host)) } else { Ok(addrs) }
        }
    }
}

fn no_addresses(host: &str) -> NetError {
    NetError::Dns { host: host.to_owned(), reason: "the name has no addresses".into(), not_found: true }
}

/// Tries `addrs` in order, each for at most `connect_timeout`; `what` names the peer in errors.
async fn dial_any(what: &str, addrs: &[SocketAddr], d: &Dial<'_>) -> Result<TcpStream, NetError> {
    let mut last_io = None;
    for addr in addrs {
        let until = d.deadline.min(Instant::now() + d.connect_timeout);
        match timeout_at(until, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                // Requests are written in one go and then we wait: Nagle would only add latency.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => last_io = Some(e),
            Err(_) => last_io = None,
        }
        if Instant::now() >= d.deadline {
            break;
        }
    }
    match last_io {
        Some(e) => Err(NetError::Connect {
            target: what.to_owned(),
            reason: io_reason(&e),
            refused: e.kind() == std::io::ErrorKind::ConnectionRefused,
        }),
        None => Err(NetError::Timeout { phase: Phase::Connect, target: what.to_owned() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_resolves_names_only_without_the_guard() {
        // (proxy, URL, guard, does the proxy get the name?)
        let cases = [
            ("http://p:1", "https://api.example.com/", Guard::AllowAll, true),
            ("socks5h://p:1", "https://api.example.com/", Guard::AllowAll, true),
            ("socks5://p:1", "https://api.example.com/", Guard::AllowAll, false),
            ("http://p:1", "https://api.example.com/", Guard::PublicOnly, false),
            ("socks5h://p:1", "https://api.example.com/", Guard::PublicOnly, false),
            ("socks5h://p:1", "https://93.184.215.14/", Guard::AllowAll, false),
        ];
        for (proxy, url, guard, by_name) in cases {
            let got = proxy_resolves(&Url::parse(url).unwrap(), guard, &Proxy::parse(proxy).unwrap());
            assert_eq!(got, by_name, "{proxy} {url} {guard:?}");
        }
    }
}
