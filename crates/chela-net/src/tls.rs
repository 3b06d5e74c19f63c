//! TLS for `https://` URLs: a rustls client over a connected TCP stream (direct or tunnelled),
//! trusting the webpki root set plus any extra PEM roots, offering ALPN `http/1.1`.
//!
//! The rustls config is built on the first `https://` request and then shared, so plain-HTTP
//! use never pays for parsing ~150 root certificates. Not supported: client certificates,
//! certificate pinning, the operating system's trust store.

use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore};
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
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
