//! Whom the chip trusts over TLS: embedded-tls runs the TLS 1.3 handshake, and [`Trust`] answers
//! its two questions with our own rules ([`crate::pki`]): does the server's chain lead to a root
//! pinned for this host, and did the server sign the handshake with that chain's key.
//!
//! [`open`] also checks the answer that embedded-tls does not: its handshake reaches `Finished`
//! even when the server sent no `Certificate` or no `CertificateVerify` at all, so a connection
//! counts as open only once [`Trust`] has seen both, in that order, for the same chain.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use embedded_io_async::{Read, Write};
use embedded_tls::{
    Aes128GcmSha256, CertificateEntryRef, CertificateRef, CertificateVerifyRef, CryptoProvider, CryptoRng,
    CryptoRngCore, SignatureScheme, TlsConfig, TlsConnection, TlsContext, TlsError, TlsVerifier,
};
use rand_core::RngCore;
use sha2::{Digest, Sha256};

use crate::pki::{self, Clock, PkiError, Scheme};

/// What TLS 1.3 signs in a server's `CertificateVerify` (RFC 8446 §4.4.3): 64 spaces, this
/// context string, then the transcript hash.
const CONTEXT: &[u8] = b"TLS 1.3, server CertificateVerify\x00";

/// The chip's side of one handshake: the pinned roots for the host, what is known of the time, the
/// random source, and what the server has proven so far.
pub struct Trust<'r, R> {
    roots: &'r [&'r [u8]],
    clock: Clock,
    rng: R,
    host: String,
    /// The leaf whose chain was accepted, kept for its `CertificateVerify`.
    leaf: Vec<u8>,
    /// The transcript hash up to the server's `Certificate`.
    transcript: Option<Sha256>,
    /// The chain was accepted and the handshake signed by its leaf's key.
    proven: bool,
    failure: Option<Refused>,
}

impl<'r, R: RngCore + CryptoRng> Trust<'r, R> {
    /// `roots`: the DER roots pinned for the host; `clock`: what the board knows of the time.
    pub fn new(roots: &'r [&'r [u8]], clock: Clock, rng: R) -> Self {
        Trust {
            roots,
            clock,
            rng,
            host: String::new(),
            leaf: Vec::new(),
            transcript: None,
            proven: false,
            failure: None,
        }
    }

    /// The server has proven who it is: its chain was accepted, then its handshake signature.
    pub fn proven(&self) -> bool {
        self.proven
    }

    /// Why the last check failed, once.
    pub fn take_failure(&mut self) -> Option<Refused> {
        self.failure.take()
    }

    fn refuse(&mut self, e: Refused) -> TlsError {
        self.failure = Some(e);
        self.proven = false;
        TlsError::InvalidCertificate
    }
}

impl<R: RngCore + CryptoRng> CryptoProvider for Trust<'_, R> {
    type CipherSuite = Aes128GcmSha256;
    /// The chip never signs (no client certificate).
    type Signature = [u8; 0];

    fn rng(&mut self) -> impl CryptoRngCore {
        &mut self.rng
    }

    fn verifier(&mut self) -> Result<&mut impl TlsVerifier<Aes128GcmSha256>, TlsError> {
        Ok(self)
    }
}

impl<R: RngCore + CryptoRng> TlsVerifier<Aes128GcmSha256> for Trust<'_, R> {
    fn set_hostname_verification(&mut self, host: &str) -> Result<(), TlsError> {
        self.host = String::from(host);
        Ok(())
    }

    fn verify_certificate(&mut self, transcript: &Sha256, cert: CertificateRef) -> Result<(), TlsError> {
        self.proven = false;
        self.transcript = None;
        let mut chain = Vec::with_capacity(cert.entries.len());
        for entry in &cert.entries {
            match entry {
                CertificateEntryRef::X509(der) => chain.push(*der),
                CertificateEntryRef::RawPublicKey(_) => return Err(self.refuse(Refused::RawPublicKey)),
            }
        }
        if let Err(e) = pki::verify_chain(&chain, self.roots, &self.host, self.clock) {
            return Err(self.refuse(Refused::Untrusted(e)));
        }
        self.leaf.clear();
        self.leaf.extend_from_slice(chain[0]);
        self.transcript = Some(transcript.clone());
        Ok(())
    }

    fn verify_signature(&mut self, verify: CertificateVerifyRef) -> Result<(), TlsError> {
        let Some(transcript) = self.transcript.take() else {
            return Err(self.refuse(Refused::Unproven));
        };
        let Some(scheme) = scheme(verify.signature_scheme) else {
            return Err(self.refuse(Refused::Scheme(verify.signature_scheme)));
        };
        let mut message = Vec::with_capacity(64 + CONTEXT.len() + 32);
        message.resize(64, b' ');
        message.extend_from_slice(CONTEXT);
        message.extend_from_slice(&transcript.finalize());
        if let Err(e) = pki::verify_handshake(&self.leaf, scheme, &message, verify.signature) {
            return Err(self.refuse(Refused::Untrusted(e)));
        }
        self.proven = true;
        Ok(())
    }
}

/// The TLS 1.3 `CertificateVerify` schemes the chip checks; PKCS#1 v1.5 is not allowed there
/// (RFC 8446 §4.2.3), the others are not used by the API hosts.
fn scheme(s: SignatureScheme) -> Option<Scheme> {
    Some(match s {
        SignatureScheme::EcdsaSecp256r1Sha256 => Scheme::EcdsaP256Sha256,
        SignatureScheme::EcdsaSecp384r1Sha384 => Scheme::EcdsaP384Sha384,
        SignatureScheme::RsaPssRsaeSha256 => Scheme::RsaPssSha256,
        SignatureScheme::RsaPssRsaeSha384 => Scheme::RsaPssSha384,
        SignatureScheme::RsaPssRsaeSha512 => Scheme::RsaPssSha512,
        _ => return None,
    })
}

/// Why [`open`] failed.
#[derive(Debug)]
pub enum Refused {
    /// The server's certificate or its handshake signature did not pass [`crate::pki`].
    Untrusted(PkiError),
    /// The server offered a bare public key instead of a certificate.
    RawPublicKey,
    /// The server signed the handshake with a scheme the chip does not accept.
    Scheme(SignatureScheme),
    /// The handshake ended (or a signature came) without the server's certificate first.
    Unproven,
    /// The handshake itself failed (the network, or the server's protocol).
    Handshake(TlsError),
}

impl Refused {
    /// The connection failed before any trust was decided (a retry may work).
    pub fn is_network(&self) -> bool {
        matches!(self, Refused::Handshake(TlsError::Io(_) | TlsError::ConnectionClosed | TlsError::IoError))
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Untrusted(e) => write!(f, "the server is not trusted: {e}"),
            Refused::RawPublicKey => f.write_str("the server sent a bare public key, not a certificate"),
            Refused::Scheme(s) => {
                write!(f, "the server signed the handshake with {s:?}, which the chip does not accept")
            }
            Refused::Unproven => f.write_str("the server ended the TLS handshake without proving who it is"),
            Refused::Handshake(e) => write!(f, "the TLS handshake failed ({})", Shown(e)),
        }
    }
}

/// A TLS error in words: the variant's name with what it carries. Written out, not derived:
/// the image is built with `-Z fmt-debug=shallow`, where a derived `Debug` names the variant only.
pub struct Shown<'a>(pub &'a TlsError);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The fields are field-less enums, whose derived `Debug` is their name in either build.
        match self.0 {
            TlsError::HandshakeAborted(level, alert) => write!(f, "the server aborted: {level:?} alert {alert:?}"),
            TlsError::AbortHandshake(level, alert) => write!(f, "the chip aborted: {level:?} alert {alert:?}"),
            TlsError::ParseError(e) => write!(f, "unparsable record: {e:?}"),
            TlsError::Io(kind) => write!(f, "network: {kind:?}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Runs the handshake for `host` on `conn` with `trust`; `Ok` only when the server proved it
/// holds a certificate for `host` under one of the pinned roots.
pub async fn open<S: Read + Write, R: RngCore + CryptoRng>(
    conn: &mut TlsConnection<'_, S, Aes128GcmSha256>,
    host: &str,
    trust: &mut Trust<'_, R>,
) -> Result<(), Refused> {
    let config = TlsConfig::new().with_server_name(host);
    let opened = conn.open(TlsContext::new(&config, &mut *trust)).await;
    if let Some(e) = trust.take_failure() {
        return Err(e);
    }
    opened.map_err(Refused::Handshake)?;
    if trust.proven() { Ok(()) } else { Err(Refused::Unproven) }
}
