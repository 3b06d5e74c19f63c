//! Certificate checking for the chip's TLS: the server's chain against pinned roots, and the
//! TLS 1.3 CertificateVerify signature. Plain Rust over RustCrypto's SHA-2 and P-256 ECDSA;
//! RSA and P-384 ECDSA are our own, over one Montgomery multiplication (`mont`). What it is
//! not: a TLS stack (embedded-tls calls in here through its verifier trait) or revocation.
//!
//! The rules:
//! - DER is read by our own reader: definite lengths only, at most 4 length bytes, every
//!   length checked against what is left, no recursion. A certificate over 8 KiB, a chain
//!   over 8 entries or a path over 5 intermediates is refused.
//! - Certificate signatures: ECDSA with SHA-256/384 on P-256 or P-384 keys (any pairing),
//!   RSA PKCS#1 v1.5 with SHA-256/384/512 on 2048 to 4096-bit keys (odd modulus, odd
//!   exponent above 1 of at most 4 bytes). Anything else is an unsupported algorithm.
//!   Handshake signatures: the [`Scheme`]s (ECDSA with the curve's own hash, RSA-PSS with a
//!   salt as long as the hash); PKCS#1 is not a TLS 1.3 handshake signature.
//! - Path: from the leaf, an issuer is looked for first among the roots, then among the other
//!   certificates sent, by subject == issuer (raw DER, byte for byte) and a signature that
//!   verifies. An issuer that is not a root must say cA=TRUE in basicConstraints, have
//!   keyCertSign if it has keyUsage, name serverAuth if it has extKeyUsage
//!   (anyExtendedKeyUsage is not enough, as in webpki and OpenSSL), and respect its
//!   pathLenConstraint; no certificate is used twice.
//! - The leaf must not be a CA, and its extKeyUsage, if present, must name serverAuth.
//!   A leaf or intermediate with a critical extension other than basicConstraints, keyUsage,
//!   extKeyUsage, subjectAltName and nameConstraints is refused. With `now` known, the leaf
//!   and intermediates must be within their validity; roots are trust anchors by subject,
//!   key and name constraints (their dates, other extensions and own signature are not
//!   looked at).
//! - nameConstraints, critical or not, on an intermediate or a pinned root, bind the
//!   subjectAltNames of every certificate under it in the path (`names`): dNSName and
//!   iPAddress subtrees are evaluated as webpki does; a constraint of any other kind, or a
//!   malformed one, refuses the path rather than being skipped.
//! - The host must match a subjectAltName dNSName (no fallback to the common name), ASCII
//!   case-insensitively; a wildcard only as the whole left-most label, standing for exactly
//!   one label (`*.example.com` matches `a.example.com`, not `example.com` or
//!   `a.b.example.com`). A host that is an IP address is refused: it never matches a dNSName
//!   (not `1.2.3.4`, not `*.2.3.4`), and the chip, which dials names only, does not match
//!   iPAddress entries.

mod cert;
mod clock;
mod der;
mod hash;
mod mont;
mod names;
mod p384;
mod rsa;
mod time;

#[cfg(test)]
mod tests;

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use cert::{Cert, PublicKey, SigAlg};
pub use clock::{Agreement, TOLERANCE_SECS, TimeCheck};
use hash::Hash;

/// Chains longer than this are refused.
pub const MAX_CHAIN: usize = 8;
/// Paths with more intermediates than this are refused.
pub const MAX_INTERMEDIATES: usize = 5;

/// TLS 1.3 CertificateVerify schemes the chip accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    EcdsaP256Sha256,
    EcdsaP384Sha384,
    RsaPssSha256,
    RsaPssSha384,
    RsaPssSha512,
}

/// Which certificate an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// `chain[0]`.
    Leaf,
    /// `chain[i]`, `i >= 1`.
    Chain(usize),
    /// `roots[i]`.
    Root(usize),
}

impl fmt::Display for Which {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Which::Leaf => f.write_str("the server's certificate"),
            Which::Chain(i) => write!(f, "certificate {} of the chain", i + 1),
            Which::Root(i) => write!(f, "pinned root {}", i + 1),
        }
    }
}

/// Why a chain or a handshake signature was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PkiError {
    /// No certificate was sent.
    EmptyChain,
    /// More than [`MAX_CHAIN`] certificates were sent.
    ChainTooLong {
        count: usize,
    },
    /// A certificate is not well-formed (or over 8 KiB); `what` says which part.
    Malformed {
        which: Which,
        what: &'static str,
    },
    /// A signature or key algorithm the chip does not verify.
    UnsupportedAlgorithm {
        which: Which,
        what: &'static str,
    },
    /// A critical extension the chip does not understand.
    UnknownCriticalExtension {
        which: Which,
    },
    NotYetValid {
        which: Which,
    },
    Expired {
        which: Which,
    },
    /// The leaf says it is a CA.
    LeafIsCa {
        host: String,
    },
    /// The leaf's extKeyUsage leaves out serverAuth.
    LeafNotForServers {
        host: String,
    },
    /// No subjectAltName dNSName matches the host.
    WrongHost {
        host: String,
    },
    /// An issuer in the path is not a CA (no basicConstraints cA=TRUE).
    IssuerNotCa {
        host: String,
    },
    /// An issuer's keyUsage leaves out keyCertSign.
    IssuerMayNotSign {
        host: String,
    },
    /// An issuer's extKeyUsage leaves out serverAuth.
    IssuerNotForServers {
        host: String,
    },
    /// An issuer's pathLenConstraint is exceeded.
    PathLenExceeded {
        host: String,
    },
    /// A name in the path is outside what an issuer's nameConstraints allow, or a constraint
    /// is one the chip cannot evaluate (`what` says which).
    NameConstraintViolation {
        host: String,
        what: &'static str,
    },
    /// The path needs more than [`MAX_INTERMEDIATES`] intermediates.
    PathTooLong {
        host: String,
    },
    /// A signature in the chain does not verify.
    BadSignature {
        which: Which,
    },
    /// No path leads to a pinned root.
    UntrustedIssuer {
        host: String,
    },
    /// The handshake's scheme does not go with the leaf's key.
    SchemeMismatch {
        scheme: Scheme,
    },
    /// The handshake signature does not verify.
    BadHandshakeSignature {
        scheme: Scheme,
    },
}

impl fmt::Display for PkiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PkiError::EmptyChain => f.write_str("the server sent no certificate"),
            PkiError::ChainTooLong { count } => {
                write!(f, "the server sent {count} certificates; at most {MAX_CHAIN} are accepted")
            }
            PkiError::Malformed { which, what } => write!(f, "{which} is malformed: {what}"),
            PkiError::UnsupportedAlgorithm { which, what } => write!(f, "{which} is not usable: {what}"),
            PkiError::UnknownCriticalExtension { which } => {
                write!(f, "{which} has a critical extension the chip does not understand")
            }
            PkiError::NotYetValid { which } => write!(f, "{which} is not valid yet (or the clock is wrong)"),
            PkiError::Expired { which } => write!(f, "{which} has expired (or the clock is wrong)"),
            PkiError::LeafIsCa { host } => write!(f, "the certificate for {host} is a CA certificate, not a server's"),
            PkiError::LeafNotForServers { host } => {
                write!(f, "the certificate for {host} is not for TLS servers (extKeyUsage lacks serverAuth)")
            }
            PkiError::WrongHost { host } => write!(f, "the server's certificate is not for {host}"),
            PkiError::IssuerNotCa { host } => {
                write!(f, "the certificate for {host} is signed by an issuer that is not a CA")
            }
            PkiError::IssuerMayNotSign { host } => {
                write!(
                    f,
                    "the certificate for {host} is signed by an issuer whose keyUsage forbids signing certificates"
                )
            }
            PkiError::IssuerNotForServers { host } => {
                write!(f, "the certificate for {host} is signed by an issuer not allowed for TLS servers")
            }
            PkiError::PathLenExceeded { host } => {
                write!(f, "the chain for {host} has more intermediates than an issuer's pathLenConstraint allows")
            }
            PkiError::NameConstraintViolation { host, what } => {
                write!(f, "the chain for {host} breaks an issuer's name constraints: {what}")
            }
            PkiError::PathTooLong { host } => {
                write!(f, "the chain for {host} needs more than {MAX_INTERMEDIATES} intermediates")
            }
            PkiError::BadSignature { which } => write!(f, "the signature on {which} does not verify"),
            PkiError::UntrustedIssuer { host } => {
                write!(f, "the certificate for {host} does not lead to a pinned root")
            }
            PkiError::SchemeMismatch { scheme } => {
                write!(f, "the server signed the handshake with {scheme:?}, which does not fit its certificate's key")
            }
            PkiError::BadHandshakeSignature { scheme } => {
                write!(f, "the server's handshake signature ({scheme:?}) does not verify")
            }
        }
    }
}

/// What the checker knows of the time, for the leaf's and the intermediates' dates (roots' own
/// dates are not checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Unix seconds that can be trusted (on the board: SNTP's time once an authenticated
    /// HTTPS `Date` agreed with it, [`TimeCheck`]): a certificate must be in date.
    Known(u64),
    /// Not set yet, but it is no earlier than these Unix seconds (the image's build time): a
    /// certificate that expired before them is refused; one not yet valid cannot be told.
    AtLeast(u64),
    /// Nothing is known: dates are not checked.
    Unknown,
}

impl Clock {
    /// `unix` when it is known and trusted, otherwise the floor the time cannot be under.
    pub fn from_board(unix: Option<u64>, floor: u64) -> Clock {
        unix.map_or(Clock::AtLeast(floor), Clock::Known)
    }
}

/// Checks the server's chain as sent in TLS: `chain[0]` is the leaf, the rest intermediates in any
/// order (extra or unrelated certificates are ignored). Succeeds when a path leads from the leaf to one of
/// `roots` (DER trust anchors) and the leaf is valid for `host`; the leaf's and intermediates' dates are
/// checked as far as `clock` allows.
pub fn verify_chain(chain: &[&[u8]], roots: &[&[u8]], host: &str, clock: Clock) -> Result<(), PkiError> {
    if chain.is_empty() {
        return Err(PkiError::EmptyChain);
    }
    if chain.len() > MAX_CHAIN {
        return Err(PkiError::ChainTooLong { count: chain.len() });
    }
    let which = |i: usize| if i == 0 { Which::Leaf } else { Which::Chain(i) };
    // Every entry is bounded, even the ones no path will use.
    if let Some(i) = chain.iter().position(|c| c.len() > cert::MAX_CERT_BYTES) {
        return Err(PkiError::Malformed { which: which(i), what: "it is over 8 KiB" });
    }
    let leaf = Cert::parse(chain[0]).map_err(|what| PkiError::Malformed { which: Which::Leaf, what })?;
    let mut path = Path {
        host,
        clock,
        certs: Vec::with_capacity(chain.len()),
        roots: Vec::new(),
        memo: Vec::new(),
        comparisons: names::COMPARISONS,
    };
    path.usable(&leaf, Which::Leaf)?;
    if leaf.basic.is_some_and(|(ca, _)| ca) {
        return Err(PkiError::LeafIsCa { host: host.to_string() });
    }
    if !leaf.allows_server_auth() {
        return Err(PkiError::LeafNotForServers { host: host.to_string() });
    }
    if !names::host_matches(leaf.san, host) {
        return Err(PkiError::WrongHost { host: host.to_string() });
    }
    // Unparsable extras cannot be in a path; they are remembered for the error only.
    let mut unparsable = None;
    path.certs.push(Some(leaf));
    for (i, der) in chain.iter().enumerate().skip(1) {
        match Cert::parse(der) {
            Ok(c) => path.certs.push(Some(c)),
            Err(what) => {
                unparsable.get_or_insert(PkiError::Malformed { which: Which::Chain(i), what });
                path.certs.push(None);
            }
        }
    }
    for (i, der) in roots.iter().enumerate() {
        let root = Cert::parse(der).map_err(|what| PkiError::Malformed { which: Which::Root(i), what })?;
        path.roots.push(root);
    }
    path.memo = vec![None; path.certs.len() * (path.certs.len() + path.roots.len())];
    let mut used = [false; MAX_CHAIN];
    used[0] = true;
    let mut first_error = None;
    if path.extend(0, 0, &mut used, &mut first_error) {
        return Ok(());
    }
    Err(first_error.or(unparsable).unwrap_or_else(|| PkiError::UntrustedIssuer { host: host.to_string() }))
}

/// The search for a path, with each (certificate, issuer) signature verified at most once,
/// so a hostile chain of look-alike CAs costs at most 8 x 8 + 8 x roots verifications.
struct Path<'a, 'h> {
    host: &'h str,
    clock: Clock,
    certs: Vec<Option<Cert<'a>>>,
    roots: Vec<Cert<'a>>,
    /// `memo[child * (certs + roots) + issuer]`, issuers numbered certs first, then roots.
    memo: Vec<Option<Result<bool, &'static str>>>,
    /// Name-constraint comparisons left for the whole search.
    comparisons: u32,
}

impl<'a> Path<'a, '_> {
    /// Whether `certs[child]` has an issuer leading to a root; `below` intermediates are
    /// already in the path under the issuer looked for. The depth is at most
    /// [`MAX_INTERMEDIATES`] + 1.
    fn extend(&mut self, child: usize, below: usize, used: &mut [bool; MAX_CHAIN], err: &mut Option<PkiError>) -> bool {
        let issuer_name = match &self.certs[child] {
            Some(c) => c.issuer,
            None => return false,
        };
        let which = if child == 0 { Which::Leaf } else { Which::Chain(child) };
        for r in 0..self.roots.len() {
            if self.roots[r].subject == issuer_name {
                match self.signed(child, self.certs.len() + r) {
                    Ok(true) => match self.names_allowed(self.roots[r].name_constraints, used) {
                        Ok(()) => return true,
                        Err(e) => note(err, e),
                    },
                    Ok(false) => note(err, PkiError::BadSignature { which }),
                    Err(what) => {
                        let which = if self.roots[r].key.is_err() { Which::Root(r) } else { which };
                        note(err, PkiError::UnsupportedAlgorithm { which, what });
                    }
                }
            }
        }
        for j in 1..self.certs.len() {
            let Some(candidate) = &self.certs[j] else { continue };
            if used[j] || candidate.subject != issuer_name {
                continue;
            }
            let candidate_key_bad = candidate.key.is_err();
            if below >= MAX_INTERMEDIATES {
                note(err, PkiError::PathTooLong { host: self.host.to_string() });
                continue;
            }
            match self.signed(child, j) {
                Ok(true) => {}
                Ok(false) => {
                    note(err, PkiError::BadSignature { which });
                    continue;
                }
                Err(what) => {
                    let which = if candidate_key_bad { Which::Chain(j) } else { which };
                    note(err, PkiError::UnsupportedAlgorithm { which, what });
                    continue;
                }
            }
            if let Err(e) = self.may_issue(j, below) {
                note(err, e);
                continue;
            }
            let constraints = self.certs[j].as_ref().and_then(|c| c.name_constraints);
            if let Err(e) = self.names_allowed(constraints, used) {
                note(err, e);
                continue;
            }
            used[j] = true;
            if self.extend(j, below + 1, used, err) {
                return true;
            }
            used[j] = false;
        }
        false
    }

    fn signed(&mut self, child: usize, issuer: usize) -> Result<bool, &'static str> {
        let slot = child * (self.certs.len() + self.roots.len()) + issuer;
        if let Some(known) = self.memo[slot] {
            return known;
        }
        let subject = self.certs[child].as_ref().ok_or("unparsable")?;
        let key = if issuer < self.certs.len() {
            &self.certs[issuer].as_ref().ok_or("unparsable")?.key
        } else {
            &self.roots[issuer - self.certs.len()].key
        };
        let result = match key {
            Ok(key) => subject.signed_by(key),
            Err(what) => Err(*what),
        };
        self.memo[slot] = Some(result);
        result
    }

    /// An issuer's nameConstraints against every certificate under it in the path (`used`).
    fn names_allowed(&mut self, constraints: Option<&'a [u8]>, used: &[bool; MAX_CHAIN]) -> Result<(), PkiError> {
        let Some(constraints) = constraints else { return Ok(()) };
        let under = self.certs.iter().zip(used).filter(|(_, u)| **u).filter_map(|(c, _)| c.as_ref()).map(|c| c.san);
        names::check_constraints(constraints, under, &mut self.comparisons)
            .map_err(|what| PkiError::NameConstraintViolation { host: self.host.to_string(), what })
    }

    /// The rules for an intermediate with `below` intermediates under it in the path.
    fn may_issue(&self, j: usize, below: usize) -> Result<(), PkiError> {
        let Some(c) = &self.certs[j] else { return Err(PkiError::UntrustedIssuer { host: self.host.to_string() }) };
        let host = || self.host.to_string();
        self.usable(c, Which::Chain(j))?;
        match c.basic {
            Some((true, len)) => {
                if len.is_some_and(|len| (below as u64) > u64::from(len)) {
                    return Err(PkiError::PathLenExceeded { host: host() });
                }
            }
            _ => return Err(PkiError::IssuerNotCa { host: host() }),
        }
        if c.key_cert_sign == Some(false) {
            return Err(PkiError::IssuerMayNotSign { host: host() });
        }
        if !c.allows_server_auth() {
            return Err(PkiError::IssuerNotForServers { host: host() });
        }
        Ok(())
    }

    /// What the leaf and every intermediate must be: understood, and in date.
    fn usable(&self, c: &Cert<'_>, which: Which) -> Result<(), PkiError> {
        if c.unknown_critical {
            return Err(PkiError::UnknownCriticalExtension { which });
        }
        let secs = |t: u64| i64::try_from(t).unwrap_or(i64::MAX);
        match self.clock {
            Clock::Known(now) if secs(now) < c.not_before => return Err(PkiError::NotYetValid { which }),
            Clock::Known(now) | Clock::AtLeast(now) if secs(now) > c.not_after => {
                return Err(PkiError::Expired { which });
            }
            _ => {}
        }
        if let Err(what) = &c.key {
            return Err(PkiError::UnsupportedAlgorithm { which, what });
        }
        Ok(())
    }
}

/// Keeps the first specific reason a path failed: it is the one nearest the leaf.
fn note(slot: &mut Option<PkiError>, e: PkiError) {
    slot.get_or_insert(e);
}

/// Checks a TLS 1.3 CertificateVerify `signature` over `message` made with the key of `leaf` (DER).
pub fn verify_handshake(leaf: &[u8], scheme: Scheme, message: &[u8], signature: &[u8]) -> Result<(), PkiError> {
    let cert = Cert::parse(leaf).map_err(|what| PkiError::Malformed { which: Which::Leaf, what })?;
    let key = cert.key.map_err(|what| PkiError::UnsupportedAlgorithm { which: Which::Leaf, what })?;
    let ok = match (scheme, &key) {
        (Scheme::EcdsaP256Sha256, PublicKey::P256(_)) => {
            cert::verify(&key, SigAlg::Ecdsa(Hash::Sha256), message, signature)
        }
        (Scheme::EcdsaP384Sha384, PublicKey::P384(_)) => {
            cert::verify(&key, SigAlg::Ecdsa(Hash::Sha384), message, signature)
        }
        (Scheme::RsaPssSha256, PublicKey::Rsa(k)) => Ok(k.verify_pss(Hash::Sha256, message, signature)),
        (Scheme::RsaPssSha384, PublicKey::Rsa(k)) => Ok(k.verify_pss(Hash::Sha384, message, signature)),
        (Scheme::RsaPssSha512, PublicKey::Rsa(k)) => Ok(k.verify_pss(Hash::Sha512, message, signature)),
        _ => return Err(PkiError::SchemeMismatch { scheme }),
    };
    match ok {
        Ok(true) => Ok(()),
        _ => Err(PkiError::BadHandshakeSignature { scheme }),
    }
}
