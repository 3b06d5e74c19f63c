//! Time per call of the chip's certificate checking on this host: `verify_chain` for the rsa
//! chain (RSA 2048 leaf and intermediate under an RSA 4096 root) and the ec chain (P-256 under
//! a P-384 root), each with the firmware's four pinned roots and the two test roots passed as
//! `roots` (all six parsed per call, as on the chip), and `verify_handshake` per scheme. The chains are the test fixtures, made
//! fresh by tests/fixtures/make-pki.sh (needs the openssl CLI).
//!
//! `cd firmware/chip && cargo bench --bench pki`

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use chela_chip::pki::{Clock, Scheme, verify_chain, verify_handshake};
use p384::ecdsa::signature::hazmat::PrehashVerifier;
use sha2::{Digest, Sha384};

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs `f` for about a second (at least 5 times) and prints microseconds per call.
fn time(label: &str, mut f: impl FnMut()) {
    f();
    let start = Instant::now();
    let mut calls = 0u32;
    while calls < 5 || start.elapsed() < Duration::from_secs(1) {
        f();
        calls += 1;
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / f64::from(calls);
    println!("{label:<52} {per:>10.1} µs per call ({calls} calls)");
}

fn main() {
    let dir = common::make_pki("pki-bench");
    let der = |n: &str| read(&dir, &format!("{n}.der"));
    // What the chip passes: its four pinned roots, here with the two test roots after them.
    let mut roots: Vec<Vec<u8>> = ["gts_root_r1", "gts_root_r4", "isrg_root_x1", "isrg_root_x2", "godaddy_root_g2"]
        .iter()
        .map(|n| read(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../esp32/certs")), &format!("{n}.der")))
        .collect();
    roots.extend([der("rsa-root"), der("ec-root")]);
    let roots: Vec<&[u8]> = roots.iter().map(Vec::as_slice).collect();
    for (label, leaf, int) in [
        ("verify_chain rsa (2048 leaf, 2048 int, 4096 root)", "rsa-leaf", "rsa-int"),
        ("verify_chain ec (P-256 leaf, P-256 int, P-384 root)", "ec-leaf", "ec-int"),
    ] {
        let (leaf, int) = (der(leaf), der(int));
        let chain = [leaf.as_slice(), int.as_slice()];
        time(label, || {
            verify_chain(black_box(&chain), &roots, "api.test.example", Clock::Known(1_800_000_000)).unwrap()
        });
    }
    let msg = read(&dir, "msg.bin");
    for (leaf, scheme, sig) in [
        ("rsa-leaf", Scheme::RsaPssSha256, "hs-rsa-pss-sha256.sig"),
        ("rsa-leaf", Scheme::RsaPssSha384, "hs-rsa-pss-sha384.sig"),
        ("rsa-leaf", Scheme::RsaPssSha512, "hs-rsa-pss-sha512.sig"),
        ("ec-leaf", Scheme::EcdsaP256Sha256, "hs-ecdsa-p256-sha256.sig"),
        ("ec-root", Scheme::EcdsaP384Sha384, "hs-ecdsa-p384-sha384.sig"),
    ] {
        let (leaf, sig) = (der(leaf), read(&dir, sig));
        time(&format!("verify_handshake {scheme:?}"), || {
            verify_handshake(black_box(&leaf), scheme, &msg, &sig).unwrap();
        });
    }
    p384_against_the_crate(&dir);
}

/// One P-384 ECDSA SHA-384 handshake signature (openssl's, by ec-root's key): our own
/// verification (certificate parse and hashing included) against RustCrypto's `p384` 0.13,
/// which the firmware no longer links, on the same key and signature, hashing included.
fn p384_against_the_crate(dir: &Path) {
    let (cert, message, signature) =
        (read(dir, "ec-root.der"), read(dir, "msg.bin"), read(dir, "hs-ecdsa-p384-sha384.sig"));
    // The SPKI's BIT STRING: 03 62 00, then the 97-byte uncompressed point.
    let at = cert.windows(4).position(|w| w == [0x03, 0x62, 0x00, 0x04]).expect("a P-384 key") + 3;
    let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(&cert[at..at + 97]).unwrap();
    let sig = p384::ecdsa::Signature::from_der(&signature).unwrap();
    time("P-384 verification, chela_chip::pki (own)", || {
        verify_handshake(black_box(&cert), Scheme::EcdsaP384Sha384, &message, &signature).unwrap();
    });
    time("P-384 verification, p384 0.13 (reference)", || {
        key.verify_prehash(&Sha384::digest(black_box(&message)), &sig).unwrap();
    });
}
