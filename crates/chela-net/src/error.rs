//! `NetError`: what went wrong with an outbound request, classified by what the caller should
//! do next (retry, fix the configuration, or tell the user), with messages written for a person.
//!
//! Not a wrapper around `io::Error` or `hyper::Error`: their text is folded into `reason`
//! strings, because callers act on the variant, never on the source.

use std::fmt;
use std::net::IpAddr;

/// Which step a request was in when it timed out or the connection dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    Dns,
    Connect,
    Proxy,
    Tls,
    /// Request sent, response headers not yet complete.
    Headers,
    /// Headers received, reading the body.
    Body,
}

// Clone: the pooled client hands a connector's error back only by reference (inside its own
// error type), so the caller's copy is a clone of it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum NetError {
    /// The URL cannot be used (bad syntax, unsupported scheme, credentials in it).
    InvalidUrl {
        url: String,
        reason: String,
    },
    /// A request header name or value is not valid HTTP.
    InvalidHeader {
        name: String,
    },
    Dns {
        host: String,
        reason: String,
        /// The resolver answered that the name does not exist (or has no addresses), as opposed
        /// to failing to get an answer at all.
        not_found: bool,
    },
    /// No resolved address (of the origin, or of the proxy) accepted a connection.
    Connect {
        target: String,
        reason: String,
        /// The last address tried actively refused (nothing listens there), as opposed to
        /// timing out or being unreachable for the moment.
        refused: bool,
    },
    /// `Guard::PublicOnly` refused an address; `reason` completes "it is …".
    Refused {
        host: String,
        addr: IpAddr,
        reason: &'static str,
    },
    /// The proxy refused, failed or did not speak its protocol. `retryable` is false for
    /// credential and policy refusals, true when the proxy could not reach the target.
    Proxy {
        proxy: String,
        reason: String,
        retryable: bool,
    },
    /// TLS failed: untrusted or mismatched certificate, handshake alert, bad extra roots.
    Tls {
        host: String,
        reason: String,
    },
    Timeout {
        phase: Phase,
        target: String,
    },
    /// The server sent something that is not HTTP/1.x.
    Protocol {
        host: String,
        reason: String,
    },
    BodyTooLarge {
        limit: usize,
    },
    /// The connection closed or was reset before the response was complete.
    Dropped {
        host: String,
        phase: Phase,
        reason: String,
    },
}

impl NetError {
    /// Whether the same request, sent again, may succeed: the network or server had a transient
    /// problem. False when repeating it would fail the same way (bad URL, refused by the guard,
    /// untrusted certificate, proxy credentials, a response over the size limit). A body idle
    /// timeout is not retryable: the server answered and then stalled, and the caller has
    /// already seen part of the answer.
    pub fn is_retryable(&self) -> bool {
        match self {
            NetError::Dns { .. } | NetError::Connect { .. } | NetError::Dropped { .. } => true,
            NetError::Timeout { phase, .. } => *phase != Phase::Body,
            NetError::Proxy { retryable, .. } => *retryable,
            NetError::InvalidUrl { .. }
            | NetError::InvalidHeader { .. }
            | NetError::Refused { .. }
            | NetError::Tls { .. }
            | NetError::Protocol { .. }
            | NetError::BodyTooLarge { .. } => false,
        }
    }
}

impl NetError {
    /// Whether the peer cannot be reached at all, so retrying soon is pointless: the name does
    /// not exist, or the connection was refused (by the origin, or by the proxy when there is
    /// one, since all traffic must go through it). A caller that must not wait, such as a model
    /// call, fails at once on these. Timeouts, resets and a resolver that gave no answer are
    /// transient and not included; `is_retryable` stays true for both kinds, because a server
    /// that is restarting also refuses connections for a moment.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, NetError::Dns { not_found: true, .. } | NetError::Connect { refused: true, .. })
    }
}

/// Whether a resolver error says the name does not exist, from the text of `getaddrinfo`'s
/// error (std exposes no kind for it). Matching known texts means an unknown resolver error
/// counts as transient: retried, as before this distinction existed.
pub(crate) fn resolver_says_no_such_name(e: &std::io::Error) -> bool {
    const NOT_FOUND: [&str; 4] = [
        "Name or service not known",                    // glibc EAI_NONAME
        "No address associated with hostname",          // glibc EAI_NODATA
        "Name does not resolve",                        // musl
        "nodename nor servname provided, or not known", // BSD, macOS
    ];
    let text = e.to_string();
    NOT_FOUND.iter().any(|known| text.contains(known))
}

/// How `io_reason` words a refused connection.
const REFUSED: &str = "connection refused";

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::InvalidUrl { url, reason } => write!(f, "cannot use the URL `{url}`: {reason}"),
            NetError::InvalidHeader { name } => write!(f, "the request header `{name}` is not valid HTTP"),
            NetError::Dns { host, reason, .. } => write!(f, "could not resolve {host}: {reason}"),
            NetError::Connect { target, reason, .. } => write!(f, "could not connect to {target}: {reason}"),
            NetError::Refused { host, addr, reason } => {
                write!(f, "refusing to connect to {host}")?;
                if *host != addr.to_string() {
                    write!(f, " ({addr})")?;
                }
                write!(f, ": it is {reason}, and only public internet addresses are allowed here")
            }
            NetError::Proxy { proxy, reason, .. } => write!(f, "proxy {proxy} {reason}"),
            NetError::Tls { host, reason } => write!(f, "secure connection (TLS) to {host} failed: {reason}"),
            NetError::Timeout { phase, target } => match phase {
                Phase::Dns => write!(f, "timed out resolving {target}"),
                Phase::Connect => write!(f, "timed out connecting to {target}"),
                Phase::Proxy => write!(f, "timed out while the proxy was connecting to {target}"),
                Phase::Tls => write!(f, "timed out in the TLS handshake with {target}"),
                Phase::Headers => write!(f, "timed out waiting for {target} to answer"),
                Phase::Body => write!(f, "{target} stopped sending the response body (idle timeout)"),
            },
            NetError::Protocol { host, reason } => write!(f, "{host} sent an invalid HTTP response: {reason}"),
            NetError::BodyTooLarge { limit } => {
                write!(f, "the response body is larger than the limit of {limit} bytes")
            }
            NetError::Dropped { host, phase, reason } => {
                let when = if *phase == Phase::Body { "in the middle of the response" } else { "before answering" };
                write!(f, "the connection to {host} closed {when}: {reason}")
            }
        }
    }
}

impl std::error::Error for NetError {}

/// An `io::Error` as words for a person: no "(os error 111)", lower case like the rest of the
/// sentence it ends.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let known = match e.kind() {
        K::ConnectionRefused => REFUSED,
        K::ConnectionReset => "connection reset",
        K::ConnectionAborted => "connection aborted",
        K::TimedOut => "timed out",
        K::UnexpectedEof => "the peer closed the connection",
        K::AddrNotAvailable => "address not available",
        K::PermissionDenied => "permission denied",
        K::HostUnreachable => "host unreachable",
        K::NetworkUnreachable => "network unreachable",
        _ => return e.to_string(),
    };
    known.to_owned()
}

/// `e` and its sources joined with ": ", since hyper's own message ("error reading a body from
/// connection") hides the useful part in the source.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
