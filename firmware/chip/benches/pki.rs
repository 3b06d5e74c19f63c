//! Figures for the chip's certificate checking, run on the host: `cargo bench --bench pki`
//! (in firmware/chip; needs the openssl CLI for the fixtures, as tests/pki.rs does).

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use chela_chip::pki::{Scheme, verify_handshake};
use p384::ecdsa::signature::hazmat::PrehashVerifier;
use sha2::{Digest, Sha384};

fn main() {
    p384_verification();
}

/// The fixtures of tests/pki.rs, made by tests/fixtures/make-pki.sh into a fresh directory.
fn fixtures() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("chela-pki-bench-{}", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/make-pki.sh");
    let out = Command::new("sh").arg(script).arg(&dir).output().expect("sh runs");
    assert!(out.status.success(), "make-pki.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// Microseconds per call of `f`, over `rounds` calls after one warm-up.
fn micros(rounds: u32, mut f: impl FnMut() -> bool) -> f64 {
    assert!(f(), "the benchmarked verification must succeed");
    let start = Instant::now();
    for _ in 0..rounds {
        assert!(black_box(f()));
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
}

/// One P-384 ECDSA SHA-384 handshake signature (openssl's, by ec-root's key): our own
/// verification through `verify_handshake` (which also parses the certificate and hashes),
/// and RustCrypto's `p384` on the same key and signature, hashing included.
fn p384_verification() {
    let dir = fixtures();
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let (cert, message, signature) = (read("ec-root.der"), read("msg.bin"), read("hs-ecdsa-p384-sha384.sig"));
    let _ = std::fs::remove_dir_all(&dir);
    // The SPKI's BIT STRING: 03 62 00, then the 97-byte uncompressed point.
    let at = cert.windows(4).position(|w| w == [0x03, 0x62, 0x00, 0x04]).expect("a P-384 key") + 3;
    let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(&cert[at..at + 97]).unwrap();
    let sig = p384::ecdsa::Signature::from_der(&signature).unwrap();

    let rounds = 200;
    let ours = micros(rounds, || {
        verify_handshake(black_box(&cert), Scheme::EcdsaP384Sha384, black_box(&message), black_box(&signature)).is_ok()
    });
    let reference =
        micros(rounds, || key.verify_prehash(&Sha384::digest(black_box(&message)), black_box(&sig)).is_ok());
    println!("P-384 ECDSA SHA-384 verification, {rounds} rounds:");
    println!("  chela_chip::pki (own P-384, certificate parse included): {ours:9.1} µs per call");
    println!("  p384 0.13 (RustCrypto, reference):                       {reference:9.1} µs per call");
}
