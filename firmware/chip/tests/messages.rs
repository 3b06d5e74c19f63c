//! What a person reads of an error the chip's libraries report: written out with what each
//! variant carries. The image is built with `-Z fmt-debug=shallow`, where a derived `Debug`
//! prints the variant's name alone, so no message may rest on one.

use chela_chip::tls::{Refused, Shown};
use embedded_io_async::ErrorKind;
use embedded_tls::TlsError;
use embedded_tls::alert::{AlertDescription, AlertLevel};

#[test]
fn a_tls_alert_names_its_level_and_description() {
    let e = Refused::Handshake(TlsError::HandshakeAborted(AlertLevel::Fatal, AlertDescription::HandshakeFailure));
    assert_eq!(e.to_string(), "the TLS handshake failed (the server aborted: Fatal alert HandshakeFailure)");
    let e = TlsError::AbortHandshake(AlertLevel::Fatal, AlertDescription::DecodeError);
    assert_eq!(Shown(&e).to_string(), "the chip aborted: Fatal alert DecodeError");
}

#[test]
fn a_tls_network_failure_says_which() {
    assert_eq!(Shown(&TlsError::Io(ErrorKind::TimedOut)).to_string(), "network: TimedOut");
}

#[test]
fn a_field_less_tls_error_is_its_name() {
    assert_eq!(Shown(&TlsError::InvalidCertificate).to_string(), "InvalidCertificate");
    assert_eq!(
        Refused::Handshake(TlsError::ConnectionClosed).to_string(),
        "the TLS handshake failed (ConnectionClosed)"
    );
}
