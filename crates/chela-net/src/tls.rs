//! TLS for `https://` URLs: a rustls client over a connected TCP stream (direct or tunnelled),
//! trusting the webpki root set plus any extra PEM roots, offering ALPN `http/1.1`.
//!
//! The rustls config is built on the first `https://` request and then shared, so plain-HTTP
//! use never pays for parsing ~150 root certificates. Not supported: client certificates,
//! certificate pinning, the operating system's trust store.
//!
//! Both ends Chela speaks TLS on (this client and the xiaozhi MQTT listener) use [`provider`]:
//! ring's, with the AES-GCM suites only.

use std::sync::{Arc, OnceLock};

use rustls::crypto::{CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::SigningKey;
use rustls::{CertificateError, ClientConfig, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::error::{NetError, Phase, io_reason};

#[derive(Debug)]
pub(crate) struct Tls {
    extra_root_pem: Option<Vec<u8>>,
    /// A bad `extra_root_pem` is remembered as the error text so every request reports it.
    config: OnceLock<Result<Arc<ClientConfig>, String>>,
}

impl Tls {
    pub(crate) fn new(extra_root_pem: Option<Vec<u8>>) -> Tls {
        Tls { extra_root_pem, config: OnceLock::new() }
    }

    fn config(&self) -> Result<Arc<ClientConfig>, String> {
        self.config.get_or_init(|| build_config(self.extra_root_pem.as_deref())).clone()
    }

    /// Runs the handshake with `host` (used for SNI and certificate checks) until `deadline`.
    pub(crate) async fn connect(
        &self,
        host: &str,
        tcp: TcpStream,
        deadline: Instant,
    ) -> Result<TlsStream<TcpStream>, NetError> {
        let tls_error = |reason: String| NetError::Tls { host: host.to_owned(), reason };
        let config = self.config().map_err(tls_error)?;
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| tls_error(format!("`{host}` cannot be used as a TLS server name")))?;
        match timeout_at(deadline, TlsConnector::from(config).connect(name, tcp)).await {
            Ok(Ok(stream)) => Ok(stream),
            Err(_) => Err(NetError::Timeout { phase: Phase::Tls, target: host.to_owned() }),
            // tokio-rustls wraps protocol and certificate failures in an io::Error; anything else
            // is the network failing under the handshake.
            Ok(Err(e)) => match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
                Some(tls) => Err(tls_error(describe(tls))),
                None => Err(NetError::Dropped { host: host.to_owned(), phase: Phase::Tls, reason: io_reason(&e) }),
            },
        }
    }
}

/// ring's crypto with the AES-GCM cipher suites only, for every TLS end Chela has.
///
/// TLS 1.3 requires every peer to implement `TLS_AES_128_GCM_SHA256`, and the ECDHE AES-GCM
/// suites are what TLS 1.2 servers and ESP32 devices (mbedTLS) negotiate, so leaving
/// ChaCha20-Poly1305 out costs no peer a connection: it spares the binary ring's ChaCha20 and
/// Poly1305 code. Key exchange groups, signature checks, randomness and key loading are ring's
/// defaults (a test holds them equal); they are named here because `default_provider()` would
/// bring every suite in with it.
pub fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::{ALL_KX_GROUPS, cipher_suite};
    Arc::new(CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ],
        kx_groups: ALL_KX_GROUPS.to_vec(),
        signature_verification_algorithms: SIGNATURES,
        secure_random: &Ring,
        key_provider: &Ring,
    })
}

/// The certificate and handshake signatures a peer may use, and the checks for each.
static SIGNATURES: WebPkiSupportedAlgorithms = {
    use webpki::ring::*;
    WebPkiSupportedAlgorithms {
        all: &[
            ECDSA_P256_SHA256,
            ECDSA_P256_SHA384,
            ECDSA_P384_SHA256,
            ECDSA_P384_SHA384,
            ED25519,
            RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
            RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
            RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
            RSA_PKCS1_2048_8192_SHA256,
            RSA_PKCS1_2048_8192_SHA384,
            RSA_PKCS1_2048_8192_SHA512,
            // Certificates that encode RSA's parameters as absent rather than NULL.
            RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
            RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
            RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
        ],
        // For TLS 1.2 a scheme does not fix the ECDSA curve; for TLS 1.3 it does.
        mapping: &[
            (SignatureScheme::ECDSA_NISTP384_SHA384, &[ECDSA_P384_SHA384, ECDSA_P256_SHA384]),
            (SignatureScheme::ECDSA_NISTP256_SHA256, &[ECDSA_P256_SHA256, ECDSA_P384_SHA256]),
            (SignatureScheme::ED25519, &[ED25519]),
            (SignatureScheme::RSA_PSS_SHA512, &[RSA_PSS_2048_8192_SHA512_LEGACY_KEY]),
            (SignatureScheme::RSA_PSS_SHA384, &[RSA_PSS_2048_8192_SHA384_LEGACY_KEY]),
            (SignatureScheme::RSA_PSS_SHA256, &[RSA_PSS_2048_8192_SHA256_LEGACY_KEY]),
            (SignatureScheme::RSA_PKCS1_SHA512, &[RSA_PKCS1_2048_8192_SHA512]),
            (SignatureScheme::RSA_PKCS1_SHA384, &[RSA_PKCS1_2048_8192_SHA384]),
            (SignatureScheme::RSA_PKCS1_SHA256, &[RSA_PKCS1_2048_8192_SHA256]),
        ],
    }
};

/// ring's randomness and private-key loading (for the MQTT listener's certificate).
#[derive(Debug)]
struct Ring;

impl SecureRandom for Ring {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        use ring::rand::SecureRandom as _;
        ring::rand::SystemRandom::new().fill(buf).map_err(|_| GetRandomFailed)
    }
}

impl KeyProvider for Ring {
    fn load_private_key(&self, key: PrivateKeyDer<'static>) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        rustls::crypto::ring::sign::any_supported_type(&key)
    }
}

fn build_config(extra_root_pem: Option<&[u8]>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(pem) = extra_root_pem {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the extra CA certificates are not valid PEM: {e}"))?;
        if certs.is_empty() {
            return Err("the extra CA certificates contain no `BEGIN CERTIFICATE` block".into());
        }
        for cert in certs {
            roots.add(cert).map_err(|e| format!("an extra CA certificate cannot be used: {e}"))?;
        }
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn describe(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer => {
                "the server's certificate is not signed by a trusted authority".to_owned()
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "the server's certificate is for a different host name".to_owned()
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "the server's certificate has expired (or this computer's clock is wrong)".to_owned()
            }
            other => format!("the server's certificate was rejected: {other:?}"),
        },
        rustls::Error::AlertReceived(alert) => format!("the server ended the handshake ({alert:?})"),
        rustls::Error::NoApplicationProtocol => "the server does not offer HTTP/1.1".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_extra_roots_are_explained() {
        let err = build_config(Some(b"not a certificate")).unwrap_err();
        assert!(err.contains("no `BEGIN CERTIFICATE`"), "{err}");
        let garbage = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let err = build_config(Some(garbage)).unwrap_err();
        assert!(err.contains("cannot be used"), "{err}");
    }

    #[test]
    fn config_offers_http11_only() {
        let config = build_config(None).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}

#[cfg(test)]
mod provider_tests {
    use super::*;

    type Algorithm = dyn rustls::pki_types::SignatureVerificationAlgorithm;

    /// The same check: the algorithm identifiers and ring's parameters (key sizes) alike.
    fn same(a: &Algorithm, b: &Algorithm) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    /// Everything but the suites is ring's default provider, item for item and in its order.
    #[test]
    fn the_provider_is_rings_default_without_chacha20() {
        let ours = provider();
        let ring = rustls::crypto::ring::default_provider();
        let suites = |p: &CryptoProvider| p.cipher_suites.iter().map(|s| s.suite()).collect::<Vec<_>>();
        let mut expected = suites(&ring);
        expected.retain(|s| !format!("{s:?}").contains("CHACHA20"));
        assert_eq!(expected.len(), 6, "{expected:?}");
        assert_eq!(suites(&ours), expected);
        let groups = |p: &CryptoProvider| p.kx_groups.iter().map(|g| g.name()).collect::<Vec<_>>();
        assert_eq!(groups(&ours), groups(&ring));

        let (a, b) = (ours.signature_verification_algorithms, ring.signature_verification_algorithms);
        assert_eq!(a.all.len(), b.all.len());
        assert!(a.all.iter().zip(b.all).all(|(x, y)| same(*x, *y)), "the `all` lists differ");
        assert_eq!(a.mapping.len(), b.mapping.len());
        for ((scheme_a, algs_a), (scheme_b, algs_b)) in a.mapping.iter().zip(b.mapping) {
            assert_eq!(scheme_a, scheme_b);
            assert_eq!(algs_a.len(), algs_b.len(), "{scheme_a:?}");
            assert!(algs_a.iter().zip(algs_b.iter()).all(|(x, y)| same(*x, *y)), "{scheme_a:?}");
        }
        assert!(ours.fips() == ring.fips());
    }

    #[test]
    fn the_provider_gives_randomness_and_loads_keys() {
        let p = provider();
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        p.secure_random.fill(&mut a).unwrap();
        p.secure_random.fill(&mut b).unwrap();
        assert_ne!(a, b);
        let key = rcgen::KeyPair::generate().unwrap();
        let der = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        let signer = p.key_provider.load_private_key(der).unwrap();
        assert_eq!(signer.algorithm(), rustls::SignatureAlgorithm::ECDSA);
    }
}
