//! The chip's TLS against a real TLS 1.3 server (Debian's `openssl s_server` on 127.0.0.1):
//! the handshake code the firmware runs ([`chela_chip::tls::open`], driven here over a
//! blocking loopback socket), with the test chains of `tests/fixtures/make-pki.sh`: an RSA chain
//! like api.telegram.org's, an ECDSA chain like Cloudflare's (P-384 root, P-256 below), and the
//! attacks the checking exists for.

mod common;
#[path = "common/sock.rs"]
mod sock;

use std::io::{BufRead, BufReader, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chela_chip::pki::{Clock, PkiError};
use chela_chip::tls::{Refused, Trust, open};
use embedded_io_async::Write;
use embedded_tls::{
    Aes128GcmSha256, CertificateEntryRef, CertificateRef, CertificateVerifyRef, CryptoRng, SignatureScheme,
    TlsConnection, TlsVerifier,
};
use rand_core::RngCore;
use sha2::{Digest, Sha256};
use sock::Sock;

const HOST: &str = "api.test.example";

/// The test chains, made once per run of this file.
fn fixtures() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::make_pki("tls-fixtures"))
}

fn der(name: &str) -> &'static [u8] {
    let bytes = std::fs::read(fixtures().join(format!("{name}.der"))).unwrap_or_else(|e| panic!("{name}.der: {e}"));
    Box::leak(bytes.into_boxed_slice())
}

/// `openssl s_server` for one connection, serving `cert` (with its key) and `chain` (PEM
/// files of intermediates, in the order given), answering a GET with its `-www` page.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(cert: &str, chain: &[&str]) -> Server {
        // Tests run in parallel and several serve the same chain: each server gets its own
        // file (one written while another openssl read it made that one exit at start).
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let dir = fixtures();
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let chain_file = dir.join(format!("chain-{n}-{cert}.pem"));
        let mut pem = String::new();
        for c in chain {
            pem.push_str(&std::fs::read_to_string(dir.join(format!("{c}.pem"))).unwrap());
        }
        std::fs::write(&chain_file, pem).unwrap();
        // Port 0: openssl binds a free port itself and names it on its ACCEPT line, so no
        // other test can take the port between choosing and listening.
        let mut cmd = Command::new("openssl");
        cmd.args(["s_server", "-accept", "127.0.0.1:0"])
            .args(["-tls1_3", "-www", "-naccept", "1", "-cert"])
            .arg(dir.join(format!("{cert}.pem")))
            .arg("-key")
            .arg(dir.join(format!("{cert}.key")));
        if !chain.is_empty() {
            cmd.arg("-cert_chain").arg(&chain_file);
        }
        // Its complaints go to a file of its own, for the message if it fails to start.
        let err_file = dir.join(format!("server-{n}.err"));
        let err = std::fs::File::create(&err_file).unwrap();
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(err).spawn().unwrap();
        // It prints `ACCEPT 127.0.0.1:<port>` once it listens.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let port = loop {
            line.clear();
            if out.read_line(&mut line).unwrap() == 0 {
                let err = std::fs::read_to_string(&err_file).unwrap_or_default();
                panic!("openssl s_server exited before listening: {err}");
            }
            if let Some(addr) = line.trim().strip_prefix("ACCEPT ") {
                let port = addr.rsplit(':').next().and_then(|p| p.parse().ok());
                break port.unwrap_or_else(|| panic!("openssl s_server's ACCEPT line names no port: {line:?}"));
            }
        };
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A test-only random source (the chip uses its hardware RNG).
struct TestRng(u64);

impl RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for b in dest {
            *b = self.next_u64() as u8;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for TestRng {}

/// Opens TLS to `server` as the chip does for `host` with `roots` pinned, then GETs `/`;
/// the response as text.
fn fetch(server: &Server, host: &str, roots: &[&[u8]], clock: Clock) -> Result<String, Refused> {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut rx = vec![0u8; 16_640];
    let mut tx = vec![0u8; 4096];
    let mut conn: TlsConnection<'_, Sock, Aes128GcmSha256> = TlsConnection::new(Sock(stream), &mut rx, &mut tx);
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let mut trust = Trust::new(roots, clock, TestRng(seed));
    embassy_futures::block_on(async {
        open(&mut conn, host, &mut trust).await?;
        conn.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
        conn.flush().await.unwrap();
        let mut page = Vec::new();
        let mut piece = [0u8; 1024];
        loop {
            match conn.read(&mut piece).await {
                Ok(0) | Err(_) => break,
                Ok(n) => page.extend_from_slice(&piece[..n]),
            }
            if page.len() > 1 << 20 {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&page).into_owned())
    })
}

fn now() -> Clock {
    Clock::Known(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs())
}

fn assert_served(page: Result<String, Refused>) {
    let page = page.unwrap_or_else(|e| panic!("the handshake was refused: {e}"));
    assert!(page.starts_with("HTTP/1.0 200"), "not s_server's page: {page:.200}");
    assert!(page.contains("TLSv1.3"), "s_server's page names the protocol: {page:.400}");
}

/// Refused by the certificate checking, for the reason `why` accepts.
fn assert_untrusted(page: Result<String, Refused>, what: &str, why: fn(&PkiError) -> bool) {
    match page {
        Err(Refused::Untrusted(e)) => assert!(why(&e), "{what}: refused for another reason: {e}"),
        Err(other) => panic!("{what}: refused, but not for the certificate: {other}"),
        Ok(page) => panic!("{what}: the chip trusted it and read {page:.120}"),
    }
}

#[test]
fn an_rsa_chain_like_telegrams_is_trusted_and_the_page_read() {
    // RSA leaf: the server signs the handshake with RSA-PSS, the chain is PKCS#1 v1.5.
    let server = Server::start("rsa-leaf", &["rsa-int"]);
    assert_served(fetch(&server, HOST, &[der("rsa-root")], now()));
}

#[test]
fn an_ecdsa_chain_like_cloudflares_is_trusted_among_several_pinned_roots() {
    // P-384 root, P-256 intermediate and leaf: the handshake signature is ECDSA P-256.
    let server = Server::start("ec-leaf", &["ec-int"]);
    assert_served(fetch(&server, HOST, &[der("rsa-root"), der("ec-root")], now()));
}

#[test]
fn a_chain_to_a_root_that_is_not_pinned_is_refused() {
    let server = Server::start("ec-leaf", &["ec-int"]);
    assert_untrusted(fetch(&server, HOST, &[der("rsa-root")], now()), "ec chain, only the RSA root pinned", |e| {
        matches!(e, PkiError::UntrustedIssuer { .. })
    });
}

#[test]
fn a_leaf_signing_a_forged_certificate_for_the_host_is_refused() {
    // evil holds a real leaf for evil.test.example under the pinned chain and signs
    // "api.test.example" with its key: the man in the middle that a CA check stops.
    let server = Server::start("forged", &["evil", "ec-int"]);
    assert_untrusted(fetch(&server, HOST, &[der("ec-root")], now()), "forged by a leaf", |e| {
        matches!(e, PkiError::IssuerNotCa { .. })
    });
}

#[test]
fn a_certificate_for_another_host_is_refused() {
    let server = Server::start("ec-leaf", &["ec-int"]);
    assert_untrusted(
        fetch(&server, "api.other.example", &[der("ec-root")], now()),
        "wrong host",
        |e| matches!(e, PkiError::WrongHost { host } if host == "api.other.example"),
    );
}

#[test]
fn an_expired_chain_is_refused_once_the_clock_is_known() {
    let server = Server::start("rsa-leaf", &["rsa-int"]);
    let far_future = Clock::Known(32_503_680_000); // the year 3000
    assert_untrusted(fetch(&server, HOST, &[der("rsa-root")], far_future), "expired", |e| {
        matches!(e, PkiError::Expired { .. })
    });
}

#[test]
fn an_expired_chain_is_refused_before_the_clock_is_set_by_the_build_time_floor() {
    let server = Server::start("rsa-leaf", &["rsa-int"]);
    // What the firmware passes until SNTP answers: no time, a floor at the image's build.
    let built_in_3000 = Clock::from_board(None, 32_503_680_000);
    assert_untrusted(fetch(&server, HOST, &[der("rsa-root")], built_in_3000), "expired under the floor", |e| {
        matches!(e, PkiError::Expired { .. })
    });
    // A floor before the chain's end lets the handshake through.
    let server = Server::start("rsa-leaf", &["rsa-int"]);
    assert_served(fetch(&server, HOST, &[der("rsa-root")], Clock::from_board(None, 1_700_000_000)));
}

/// What the server signs in TLS 1.3 for a transcript hash (RFC 8446 §4.4.3).
fn signed_content(transcript: &[u8]) -> Vec<u8> {
    let mut m = vec![b' '; 64];
    m.extend_from_slice(b"TLS 1.3, server CertificateVerify\x00");
    m.extend_from_slice(transcript);
    m
}

/// `openssl dgst -sha256 -sign KEY` over `message` (on its stdin: no shared file for parallel
/// tests to race on): a DER ECDSA signature by `key`'s holder.
fn openssl_sign(key: &str, message: &[u8]) -> Vec<u8> {
    let mut child = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(fixtures().join(format!("{key}.key")))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(message).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn chain<'a>(names: &[&str]) -> CertificateRef<'a> {
    let mut c = CertificateRef::with_context(&[]);
    for n in names {
        c.add(CertificateEntryRef::X509(der(n))).unwrap();
    }
    c
}

#[test]
fn the_server_is_proven_only_by_a_certificate_then_its_signature_and_a_new_certificate_starts_over() {
    let roots = [der("ec-root")];
    let mut trust = Trust::new(&roots, now(), TestRng(7));

    // A signature with no certificate before it proves nothing.
    let transcript = Sha256::new();
    let sig = openssl_sign("ec-leaf", &signed_content(&transcript.clone().finalize()));
    let r = trust.verify_signature(CertificateVerifyRef {
        signature_scheme: SignatureScheme::EcdsaSecp256r1Sha256,
        signature: &sig,
    });
    assert!(r.is_err());
    assert!(matches!(trust.take_failure(), Some(Refused::Unproven)));
    assert!(!trust.proven());

    trust.set_hostname_verification(HOST).unwrap();
    trust.verify_certificate(&transcript, chain(&["ec-leaf", "ec-int"])).unwrap();
    assert!(!trust.proven(), "a chain alone is not proof: anyone can send one");

    // Signed by another key (ec-int's): refused.
    let wrong = openssl_sign("ec-int", &signed_content(&transcript.clone().finalize()));
    assert!(
        trust
            .verify_signature(CertificateVerifyRef {
                signature_scheme: SignatureScheme::EcdsaSecp256r1Sha256,
                signature: &wrong
            })
            .is_err()
    );
    assert!(matches!(trust.take_failure(), Some(Refused::Untrusted(_))));
    assert!(!trust.proven());

    // Again, and this time the leaf's own signature over this transcript: proven.
    trust.verify_certificate(&transcript, chain(&["ec-leaf", "ec-int"])).unwrap();
    trust
        .verify_signature(CertificateVerifyRef {
            signature_scheme: SignatureScheme::EcdsaSecp256r1Sha256,
            signature: &sig,
        })
        .unwrap();
    assert!(trust.proven());

    // A second certificate message that fails undoes it.
    assert!(trust.verify_certificate(&transcript, chain(&["forged", "evil", "ec-int"])).is_err());
    assert!(!trust.proven());
    assert!(matches!(trust.take_failure(), Some(Refused::Untrusted(_))));
}

#[test]
fn pkcs1_and_unknown_schemes_do_not_prove_a_tls13_handshake() {
    let roots = [der("rsa-root")];
    let transcript = Sha256::new();
    for scheme in [SignatureScheme::RsaPkcs1Sha256, SignatureScheme::Ed25519, SignatureScheme::EcdsaSha1] {
        let mut trust = Trust::new(&roots, now(), TestRng(9));
        trust.set_hostname_verification(HOST).unwrap();
        trust.verify_certificate(&transcript, chain(&["rsa-leaf", "rsa-int"])).unwrap();
        assert!(
            trust.verify_signature(CertificateVerifyRef { signature_scheme: scheme, signature: &[1, 2, 3] }).is_err()
        );
        assert!(matches!(trust.take_failure(), Some(Refused::Scheme(s)) if s == scheme), "{scheme:?}");
        assert!(!trust.proven());
    }
}
