//! The own P-384 code against RustCrypto's `p384` (a dev-dependency): signatures it makes
//! verify, changed ones do not, and points agree.

use alloc::vec::Vec;

use ::p384::ecdsa::signature::hazmat::PrehashSigner;
use ::p384::ecdsa::{Signature, SigningKey};
use ::p384::elliptic_curve::ff::PrimeField;
use ::p384::elliptic_curve::sec1::ToEncodedPoint;
use ::p384::{FieldBytes, ProjectivePoint, Scalar};
use proptest::prelude::*;

use super::*;
use crate::pki::hash::Hash;

/// A DER Ecdsa-Sig-Value of two big-endian numbers (any length, zero included).
fn der_sig(r: &[u8], s: &[u8]) -> Vec<u8> {
    fn int(v: &[u8]) -> Vec<u8> {
        let start = v.iter().position(|&b| b != 0).unwrap_or(v.len().saturating_sub(1));
        let mut body = v[start..].to_vec();
        if body.is_empty() || body[0] & 0x80 != 0 {
            body.insert(0, 0);
        }
        let mut out = alloc::vec![0x02, body.len() as u8];
        out.extend(body);
        out
    }
    let mut body = int(r);
    body.extend(int(s));
    let mut out = alloc::vec![0x30, body.len() as u8];
    out.extend(body);
    out
}

fn split(sig: &Signature) -> ([u8; 48], [u8; 48]) {
    let b = sig.to_bytes();
    (b[..48].try_into().unwrap(), b[48..].try_into().unwrap())
}

/// A 384-bit big-endian number plus a small one (wrapping past 2^384 is the caller's worry).
fn plus(a: &[u8; 48], k: u32) -> [u8; 48] {
    let mut n = number(a);
    let mut carry = u64::from(k);
    for l in n.iter_mut() {
        let s = u64::from(*l) + carry;
        *l = s as u32;
        carry = s >> 32;
    }
    be_bytes(&n)
}

fn scalar(bytes: &[u8; 48]) -> Option<Scalar> {
    Option::from(Scalar::from_repr(FieldBytes::clone_from_slice(bytes)))
}

/// `k·G` from the reference, uncompressed.
fn reference_mul_g(k: &Scalar) -> Vec<u8> {
    (ProjectivePoint::GENERATOR * k).to_affine().to_encoded_point(false).as_bytes().to_vec()
}

/// Our point's uncompressed encoding; `None` for infinity.
fn encode(c: &Curve, p: &Point) -> Option<Vec<u8>> {
    let (x, y) = c.affine(p)?;
    let mut out = alloc::vec![4u8];
    out.extend(be_bytes(&x));
    out.extend(be_bytes(&y));
    Some(out)
}

fn key_point(key: &SigningKey) -> Vec<u8> {
    key.verifying_key().to_encoded_point(false).as_bytes().to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Signatures by `p384` verify; a changed hash, r, s or key does not; r or s of 0, n,
    /// above n are refused. With SHA-384 and SHA-256-sized hash values.
    #[test]
    fn verifies_what_p384_signs(secret in any::<[u8; 48]>(), other in any::<[u8; 48]>(),
                                message in proptest::collection::vec(any::<u8>(), 0..200),
                                sha256 in any::<bool>()) {
        let key = SigningKey::from_slice(&secret);
        let other = SigningKey::from_slice(&other);
        prop_assume!(key.is_ok() && other.is_ok());
        let (key, other) = (key.unwrap(), other.unwrap());
        let hash = if sha256 { Hash::Sha256 } else { Hash::Sha384 };
        let digest = hash.digest(&[&message]);
        let sig: Signature = key.sign_prehash(&digest).unwrap();
        let (r, s) = split(&sig);
        let point = key_point(&key);
        prop_assert!(verify(&point, &digest, &der_sig(&r, &s)));
        prop_assert!(verify(&point, &digest, sig.to_der().as_bytes()));

        let changed = hash.digest(&[&message, b"!"]);
        prop_assert!(!verify(&point, &changed, &der_sig(&r, &s)));
        prop_assert!(!verify(&key_point(&other), &digest, &der_sig(&r, &s)));
        prop_assert!(!verify(&point, &digest, &der_sig(&plus(&r, 1), &s)));
        prop_assert!(!verify(&point, &digest, &der_sig(&r, &plus(&s, 1))));
        prop_assert!(!verify(&point, &digest, &der_sig(&s, &r)));

        let n = be_bytes(&N);
        for bad in [[0u8; 48], n, plus(&n, 1), [0xff; 48]] {
            prop_assert!(!verify(&point, &digest, &der_sig(&bad, &s)));
            prop_assert!(!verify(&point, &digest, &der_sig(&r, &bad)));
        }
    }

    /// Points agree with the reference: k·G, P + P = 2P, P + Q, a·G + b·Q, P + (−P) = ∞.
    #[test]
    fn points_agree(a in any::<[u8; 48]>(), b in any::<[u8; 48]>()) {
        let (Some(sa), Some(sb)) = (scalar(&a), scalar(&b)) else { return Ok(()) };
        let c = Curve::new();
        let zero = [0; L];
        let (na, nb) = (number(&a), number(&b));
        let pa = c.mul_add(&na, &c.g, &zero, &c.g);
        let pb = c.mul_add(&zero, &c.g, &nb, &c.g);
        prop_assert_eq!(encode(&c, &pa), Some(reference_mul_g(&sa)));
        prop_assert_eq!(encode(&c, &c.add_points(&pa, &pa)), Some(reference_mul_g(&sa.double())));
        prop_assert_eq!(encode(&c, &c.double(&pa)), Some(reference_mul_g(&sa.double())));
        prop_assert_eq!(encode(&c, &c.add_points(&pa, &pb)), Some(reference_mul_g(&(sa + sb))));
        // a·G + b·(a·G) = (a + b·a)·G, with Q from its encoding.
        let q = c.decode(&encode(&c, &pa).unwrap()).unwrap();
        prop_assert_eq!(encode(&c, &c.mul_add(&na, &c.g, &nb, &q)), Some(reference_mul_g(&(sa + sb * sa))));
        let minus = Point { y: c.sub(&[0; L], &pa.y), ..pa };
        prop_assert_eq!(encode(&c, &c.add_points(&pa, &minus)), None);
    }
}

#[test]
fn order_and_generator() {
    let c = Curve::new();
    let zero = [0; L];
    assert_eq!(encode(&c, &c.g), Some(reference_mul_g(&Scalar::ONE)));
    assert_eq!(c.mul_add(&N, &c.g, &zero, &c.g).z, [0; L], "n·G is the point at infinity");
    let mut n1 = N;
    sub_in_place(&mut n1, &[1]);
    let (gx, gy) = c.affine(&c.g).unwrap();
    let mut minus_gy = P;
    sub_in_place(&mut minus_gy, &gy);
    assert_eq!(c.affine(&c.mul_add(&n1, &c.g, &zero, &c.g)), Some((gx, minus_gy)), "(n−1)·G = −G");
    assert_eq!(c.add_points(&INFINITY, &c.g), c.g);
    assert_eq!(c.add_points(&c.g, &INFINITY), c.g);
    assert_eq!(c.double(&INFINITY), INFINITY);
}

/// Keys that are not uncompressed points on the curve are refused.
#[test]
fn key_encodings() {
    let good = reference_mul_g(&Scalar::from(7u64));
    assert!(is_public_key(&good));
    let mut off = good.clone();
    off[96] ^= 1;
    assert!(!is_public_key(&off), "a point off the curve");
    let mut compressed = good[..49].to_vec();
    compressed[0] = 2 + (good[96] & 1);
    assert!(!is_public_key(&compressed), "compressed");
    let mut hybrid = good.clone();
    hybrid[0] = 6 + (good[96] & 1);
    assert!(!is_public_key(&hybrid), "hybrid");
    assert!(!is_public_key(&good[..96]), "short");
    assert!(!is_public_key(&[good.as_slice(), &[0]].concat()), "long");
    assert!(!is_public_key(&[0u8]), "SEC 1's infinity");
    // x and y at or above p: p itself, and (x + p) which is an on-curve x mod p only in name.
    let mut big = alloc::vec![4u8];
    big.extend(be_bytes(&P));
    big.extend(&good[49..]);
    assert!(!is_public_key(&big));
}

/// With a key made to fit, the only thing that can refuse (r, s + n) is the range check on s:
/// the arithmetic mod n would reduce it and accept. Q = r⁻¹·(s·R − e·G) makes (r, s) valid for
/// any chosen small s (public-key recovery, backwards).
#[test]
fn s_above_n_is_refused_even_where_it_would_compute() {
    let c = Curve::new();
    let k = Scalar::from(0x1234_5678_9abc_u64);
    let r_point = ProjectivePoint::GENERATOR * k;
    let r_enc = r_point.to_affine().to_encoded_point(false);
    let r_bytes: [u8; 48] = r_enc.x().unwrap().as_slice().try_into().unwrap();
    let r = scalar(&r_bytes).expect("x(R) < n here");
    let digest = Hash::Sha384.digest(&[b"chosen"]);
    let e = scalar(&be_bytes(&{
        let mut e = number(&digest);
        if !less(&e, &N) {
            sub_in_place(&mut e, &N);
        }
        e
    }))
    .unwrap();
    let s = Scalar::from(3u64);
    let q = (r_point * s - ProjectivePoint::GENERATOR * e) * r.invert().unwrap();
    let q = q.to_affine().to_encoded_point(false).as_bytes().to_vec();
    let s_bytes = be_bytes(&number(&[3]));
    assert!(verify(&q, &digest, &der_sig(&r_bytes, &s_bytes)));
    let s_plus_n = plus(&be_bytes(&N), 3);
    assert!(!verify(&q, &digest, &der_sig(&r_bytes, &s_plus_n)));
    assert!(c.decode(&q).is_some());
}

/// Hash values longer than 48 bytes count by their leftmost 384 bits (SHA-512 truncated).
#[test]
fn long_hash_values_are_cut_to_384_bits() {
    let key = SigningKey::from_slice(&[0x42; 48]).unwrap();
    let digest = Hash::Sha512.digest(&[b"long"]);
    let sig: Signature = key.sign_prehash(&digest[..48]).unwrap();
    let der = sig.to_der().as_bytes().to_vec();
    assert!(verify(&key_point(&key), &digest, &der));
    assert!(verify(&key_point(&key), &digest[..48], &der));
    assert!(!verify(&key_point(&key), &digest[16..], &der));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Hostile bytes from a server (its key, its signature) are refused without a panic:
    /// random points are not on the curve, random DER is not a signature.
    #[test]
    fn garbage_is_refused(point in proptest::collection::vec(any::<u8>(), 0..120),
                          coords in any::<[u8; 96]>(),
                          sig in proptest::collection::vec(any::<u8>(), 0..120),
                          hash in proptest::collection::vec(any::<u8>(), 0..80)) {
        prop_assert!(!verify(&point, &hash, &sig));
        prop_assert!(!is_public_key(&[&[4u8][..], &coords].concat()));
        // A real key (G itself) and arbitrary signature bytes.
        let key = encode(&Curve::new(), &Curve::new().g).unwrap();
        prop_assert!(!verify(&key, &hash, &sig));
    }
}

proptest! {
    // Each case is a whole verification (slow in a debug build).
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Random (r, s) in DER for a real key do not verify.
    #[test]
    fn random_signatures_are_refused(r in any::<[u8; 48]>(), s in any::<[u8; 48]>(),
                                     hash in proptest::collection::vec(any::<u8>(), 0..80)) {
        let key = encode(&Curve::new(), &Curve::new().g).unwrap();
        prop_assert!(!verify(&key, &hash, &der_sig(&r, &s)));
    }
}

/// The two pinned P-384 roots: their keys are taken at parse time and their self-signatures
/// (ECDSA with SHA-384) verify; a key moved off the curve makes the certificate's key an error
/// when it is parsed, and a changed signature does not verify.
#[test]
fn pinned_p384_roots() {
    use crate::pki::cert::{Cert, PublicKey};
    extern crate std;
    for name in ["gts_root_r4", "isrg_root_x2"] {
        let path = std::format!("{}/../esp32/certs/{name}.der", env!("CARGO_MANIFEST_DIR"));
        let der = std::fs::read(&path).unwrap();
        let cert = Cert::parse(&der).unwrap();
        let Ok(PublicKey::P384(point)) = &cert.key else { panic!("{name}: not a P-384 key") };
        let at = der.windows(97).position(|w| w == point).expect("the key's bytes are the certificate's");
        assert_eq!(cert.signed_by(cert.key.as_ref().unwrap()), Ok(true), "{name}");

        let mut off_curve = der.clone();
        off_curve[at + 96] ^= 1;
        let bad = Cert::parse(&off_curve).unwrap();
        assert_eq!(bad.key.unwrap_err(), "its P-384 public key is not a point on the curve", "{name}");

        let mut sig = cert.signature.to_vec();
        let last = sig.len() - 1;
        sig[last] ^= 1;
        let changed = Cert { signature: &sig, ..cert.clone() };
        assert_eq!(changed.signed_by(cert.key.as_ref().unwrap()), Ok(false), "{name}");
    }
}
