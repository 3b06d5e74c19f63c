//! One X.509 certificate, parsed flat from its DER: the parts the path checks need, borrowed.

use p256::ecdsa::signature::hazmat::PrehashVerifier;

use super::der::{self, Reader, Tlv, Why};
use super::hash::Hash;
use super::names;
use super::p384;
use super::rsa::RsaKey;
use super::time;

/// Certificates longer than this are refused (real ones are 1 to 2 KiB).
pub(crate) const MAX_CERT_BYTES: usize = 8 * 1024;

const ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
const RSA_PREFIX: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
const RSA_ENCRYPTION: u8 = 0x01;
const SHA256_RSA: u8 = 0x0b;
const SHA384_RSA: u8 = 0x0c;
const SHA512_RSA: u8 = 0x0d;
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const P256_CURVE: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384_CURVE: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
const KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f];
const EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
const NAME_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x1e];
const SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];

/// How a certificate is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SigAlg {
    Ecdsa(Hash),
    RsaPkcs1(Hash),
}

#[derive(Clone, Debug)]
pub(crate) enum PublicKey {
    P256(p256::ecdsa::VerifyingKey),
    /// The uncompressed SEC 1 point, checked to be on the curve.
    P384([u8; p384::POINT_LEN]),
    Rsa(RsaKey),
}

#[derive(Clone, Debug)]
pub(crate) struct Cert<'a> {
    /// The signed bytes: tbsCertificate's whole TLV.
    pub tbs: &'a [u8],
    /// `Err` names an algorithm the chip does not verify (fine for a root: its own
    /// signature is never checked).
    pub sig_alg: Result<SigAlg, Why>,
    pub signature: &'a [u8],
    /// Issuer and subject Names, whole TLVs, compared byte for byte.
    pub issuer: &'a [u8],
    pub subject: &'a [u8],
    pub not_before: i64,
    pub not_after: i64,
    /// `Err` names a key the chip cannot use.
    pub key: Result<PublicKey, Why>,
    /// basicConstraints: `None` when absent, else (cA, pathLenConstraint).
    pub basic: Option<(bool, Option<u32>)>,
    /// keyUsage's keyCertSign bit, when keyUsage is present.
    pub key_cert_sign: Option<bool>,
    /// extKeyUsage's contents (a SEQUENCE OF OID), when present.
    pub eku: Option<&'a [u8]>,
    /// subjectAltName's contents (a SEQUENCE OF GeneralName), when present.
    pub san: Option<&'a [u8]>,
    /// nameConstraints' contents, checked for shape only (`names::parse_constraints`), when
    /// present, critical or not.
    pub name_constraints: Option<&'a [u8]>,
    /// A critical extension the chip does not know is present.
    pub unknown_critical: bool,
}

impl<'a> Cert<'a> {
    pub fn parse(der: &'a [u8]) -> Result<Self, Why> {
        if der.len() > MAX_CERT_BYTES {
            return Err("it is over 8 KiB");
        }
        let mut outer = Reader::new(der);
        let cert = outer.expect(der::SEQUENCE, "it is not a DER SEQUENCE")?;
        outer.finish("bytes follow the certificate")?;
        let mut parts = Reader::new(cert.value);
        let tbs = parts.expect(der::SEQUENCE, "tbsCertificate is missing")?;
        let outer_alg = parts.expect(der::SEQUENCE, "signatureAlgorithm is missing")?;
        let sig = parts.expect(der::BIT_STRING, "signatureValue is missing")?;
        parts.finish("bytes follow signatureValue")?;
        let signature = der::whole_bits(&sig, "signatureValue has unused bits")?;

        let mut t = Reader::new(tbs.value);
        if let Some(version) = t.optional(0xa0, "version is malformed")? {
            let mut v = Reader::new(version.value);
            let n = der::small_unsigned(&v.expect(der::INTEGER, "version is malformed")?, "version is malformed")?;
            v.finish("version is malformed")?;
            if n > 2 {
                return Err("its version is unknown");
            }
        }
        t.expect(der::INTEGER, "serialNumber is missing")?;
        let inner_alg = t.expect(der::SEQUENCE, "signature is missing")?;
        if inner_alg.whole != outer_alg.whole {
            return Err("its two signature algorithms differ");
        }
        let issuer = t.expect(der::SEQUENCE, "issuer is missing")?;
        let validity = t.expect(der::SEQUENCE, "validity is missing")?;
        let subject = t.expect(der::SEQUENCE, "subject is missing")?;
        let spki = t.expect(der::SEQUENCE, "subjectPublicKeyInfo is missing")?;
        t.optional(0x81, "issuerUniqueID is malformed")?;
        t.optional(0x82, "subjectUniqueID is malformed")?;
        let extensions = t.optional(0xa3, "extensions are malformed")?;
        t.finish("tbsCertificate has extra fields")?;

        let mut v = Reader::new(validity.value);
        let not_before = time::parse(&v.next().map_err(|_| "notBefore is missing")?)?;
        let not_after = time::parse(&v.next().map_err(|_| "notAfter is missing")?)?;
        v.finish("validity has extra fields")?;

        let mut cert = Cert {
            tbs: tbs.whole,
            sig_alg: sig_alg(outer_alg.value),
            signature,
            issuer: issuer.whole,
            subject: subject.whole,
            not_before,
            not_after,
            key: public_key(spki.value)?,
            basic: None,
            key_cert_sign: None,
            eku: None,
            san: None,
            name_constraints: None,
            unknown_critical: false,
        };
        if let Some(ext) = extensions {
            cert.read_extensions(ext.value)?;
        }
        Ok(cert)
    }

    fn read_extensions(&mut self, explicit: &'a [u8]) -> Result<(), Why> {
        let mut wrapper = Reader::new(explicit);
        let list = wrapper.expect(der::SEQUENCE, "extensions are malformed")?;
        wrapper.finish("extensions are malformed")?;
        let mut list = Reader::new(list.value);
        let mut seen = [false; 5];
        while !list.is_empty() {
            let ext = list.expect(der::SEQUENCE, "an extension is malformed")?;
            let mut e = Reader::new(ext.value);
            let oid = e.expect(der::OID, "an extension is malformed")?.value;
            let critical = match e.optional(der::BOOLEAN, "an extension is malformed")? {
                Some(b) => der::boolean(&b, "an extension is malformed")?,
                None => false,
            };
            let value = e.expect(der::OCTET_STRING, "an extension is malformed")?.value;
            e.finish("an extension is malformed")?;
            let slot = match oid {
                BASIC_CONSTRAINTS => 0,
                KEY_USAGE => 1,
                EXT_KEY_USAGE => 2,
                SUBJECT_ALT_NAME => 3,
                NAME_CONSTRAINTS => 4,
                _ => {
                    self.unknown_critical |= critical;
                    continue;
                }
            };
            if core::mem::replace(&mut seen[slot], true) {
                return Err("an extension appears twice");
            }
            let mut r = Reader::new(value);
            let inner =
                r.expect(if slot == 1 { der::BIT_STRING } else { der::SEQUENCE }, "an extension is malformed")?;
            r.finish("an extension is malformed")?;
            match slot {
                0 => self.basic = Some(basic_constraints(inner.value)?),
                1 => self.key_cert_sign = Some(key_cert_sign(&inner)?),
                2 => self.eku = Some(check_oid_list(inner.value)?),
                4 => self.name_constraints = Some(names::parse_constraints(inner.value)?),
                _ => self.san = Some(check_general_names(inner.value)?),
            }
        }
        Ok(())
    }

    /// Whether extKeyUsage is absent or names serverAuth. anyExtendedKeyUsage is not enough:
    /// webpki and OpenSSL refuse it for a TLS server, and so does the chip.
    pub fn allows_server_auth(&self) -> bool {
        let Some(eku) = self.eku else { return true };
        let mut r = Reader::new(eku);
        while let Ok(oid) = r.next() {
            if oid.value == SERVER_AUTH {
                return true;
            }
        }
        false
    }

    /// Whether `issuer`'s key made this certificate's signature.
    pub fn signed_by(&self, issuer: &PublicKey) -> Result<bool, Why> {
        verify(issuer, self.sig_alg?, self.tbs, self.signature)
    }
}

fn sig_alg(alg: &[u8]) -> Result<SigAlg, Why> {
    let mut r = Reader::new(alg);
    let oid = r.expect(der::OID, "a signature algorithm is malformed")?.value;
    let params = r.next().ok();
    let alg = match oid {
        ECDSA_SHA256 if params.is_none() => SigAlg::Ecdsa(Hash::Sha256),
        ECDSA_SHA384 if params.is_none() => SigAlg::Ecdsa(Hash::Sha384),
        [prefix @ .., last]
            if prefix == RSA_PREFIX && params.is_none_or(|p| p.tag == der::NULL && p.value.is_empty()) =>
        {
            match *last {
                SHA256_RSA => SigAlg::RsaPkcs1(Hash::Sha256),
                SHA384_RSA => SigAlg::RsaPkcs1(Hash::Sha384),
                SHA512_RSA => SigAlg::RsaPkcs1(Hash::Sha512),
                _ => return Err("its signature algorithm is not supported"),
            }
        }
        _ => return Err("its signature algorithm is not supported"),
    };
    r.finish("a signature algorithm is malformed")?;
    Ok(alg)
}

/// subjectPublicKeyInfo's contents into a key. A malformed SPKI is an error; a well-formed
/// one of an algorithm or size the chip does not take is `Ok(Err(..))`.
fn public_key(spki: &[u8]) -> Result<Result<PublicKey, Why>, Why> {
    let mut r = Reader::new(spki);
    let alg = r.expect(der::SEQUENCE, "subjectPublicKeyInfo is malformed")?;
    let bits = r.expect(der::BIT_STRING, "subjectPublicKeyInfo is malformed")?;
    r.finish("subjectPublicKeyInfo is malformed")?;
    let key = der::whole_bits(&bits, "the public key has unused bits")?;
    let mut a = Reader::new(alg.value);
    let oid = a.expect(der::OID, "the key algorithm is malformed")?.value;
    let params = a.next().ok();
    a.finish("the key algorithm is malformed")?;
    let curve = params.filter(|p| p.tag == der::OID).map(|p| p.value);
    Ok(match oid {
        EC_PUBLIC_KEY => match curve {
            Some(P256_CURVE) => p256::ecdsa::VerifyingKey::from_sec1_bytes(key)
                .map(PublicKey::P256)
                .map_err(|_| "its P-256 public key is not a point on the curve"),
            Some(P384_CURVE) => match <[u8; p384::POINT_LEN]>::try_from(key) {
                Ok(point) if p384::is_public_key(&point) => Ok(PublicKey::P384(point)),
                _ => Err("its P-384 public key is not a point on the curve"),
            },
            _ => Err("its key's curve is not supported"),
        },
        [prefix @ .., RSA_ENCRYPTION] if prefix == RSA_PREFIX => {
            if params.is_some_and(|p| p.tag != der::NULL || !p.value.is_empty()) {
                return Err("the RSA key's parameters are not NULL");
            }
            let mut k = Reader::new(key);
            let seq = k.expect(der::SEQUENCE, "the RSA key is malformed")?;
            k.finish("the RSA key is malformed")?;
            let mut k = Reader::new(seq.value);
            let n = der::unsigned(
                &k.expect(der::INTEGER, "the RSA modulus is malformed")?,
                "the RSA modulus is malformed",
            )?;
            let e = k.expect(der::INTEGER, "the RSA exponent is malformed")?;
            k.finish("the RSA key is malformed")?;
            match der::small_unsigned(&e, "the RSA exponent is malformed") {
                Ok(e) => RsaKey::new(n, e).map(PublicKey::Rsa),
                Err(_) => Err("its RSA exponent is longer than 4 bytes or negative"),
            }
        }
        _ => Err("its key algorithm is not supported"),
    })
}

fn basic_constraints(value: &[u8]) -> Result<(bool, Option<u32>), Why> {
    const BAD: Why = "basicConstraints is malformed";
    let mut r = Reader::new(value);
    let ca = match r.optional(der::BOOLEAN, BAD)? {
        Some(b) => der::boolean(&b, BAD)?,
        None => false,
    };
    let len = match r.optional(der::INTEGER, BAD)? {
        Some(i) => Some(der::small_unsigned(&i, BAD)?),
        None => None,
    };
    r.finish(BAD)?;
    Ok((ca, len))
}

/// keyUsage's bit 5 (keyCertSign): the sixth bit from the top of the first byte.
fn key_cert_sign(bits: &Tlv<'_>) -> Result<bool, Why> {
    match bits.value {
        [unused, first, ..] if *unused < 8 => Ok(first & 0x04 != 0),
        [0] => Ok(false),
        _ => Err("keyUsage is malformed"),
    }
}

/// subjectAltName: at least one GeneralName, each a well-formed TLV with a GeneralName's tag.
fn check_general_names(value: &[u8]) -> Result<&[u8], Why> {
    let mut r = Reader::new(value);
    if r.is_empty() {
        return Err("subjectAltName is empty");
    }
    while !r.is_empty() {
        let name = r.next().map_err(|_| "subjectAltName is malformed")?;
        if !names::is_general_name(name.tag) {
            return Err("subjectAltName has an entry that is not a GeneralName");
        }
    }
    Ok(value)
}

fn check_oid_list(value: &[u8]) -> Result<&[u8], Why> {
    let mut r = Reader::new(value);
    while !r.is_empty() {
        r.expect(der::OID, "extKeyUsage is malformed")?;
    }
    Ok(value)
}

/// Verifies `signature` over `message` with `key` by `alg`; `Err` when the pairing makes no
/// sense (an RSA algorithm with an EC key) or the ECDSA signature is not DER.
pub(crate) fn verify(key: &PublicKey, alg: SigAlg, message: &[u8], signature: &[u8]) -> Result<bool, Why> {
    match (key, alg) {
        (PublicKey::P256(k), SigAlg::Ecdsa(h)) => {
            let sig = p256::ecdsa::Signature::from_slice(&ecdsa_rs::<32>(signature)?).map_err(|_| ECDSA_BAD)?;
            Ok(k.verify_prehash(&h.digest(&[message]), &sig).is_ok())
        }
        (PublicKey::P384(k), SigAlg::Ecdsa(h)) => {
            // Malformed DER is an error, as for P-256; r or s out of range is a signature
            // that does not verify (p384::verify decodes the DER again and checks the range).
            ecdsa_rs::<48>(signature)?;
            Ok(p384::verify(k, &h.digest(&[message]), signature))
        }
        (PublicKey::Rsa(k), SigAlg::RsaPkcs1(h)) => Ok(k.verify_pkcs1(h, message, signature)),
        _ => Err("the issuer's key does not match the signature algorithm"),
    }
}

const ECDSA_BAD: Why = "an ECDSA signature is malformed";

/// A DER Ecdsa-Sig-Value into `r || s`, each `N` bytes; zero or oversize values refused.
pub(super) fn ecdsa_rs<const N: usize>(der_sig: &[u8]) -> Result<alloc::vec::Vec<u8>, Why> {
    let mut outer = Reader::new(der_sig);
    let seq = outer.expect(der::SEQUENCE, ECDSA_BAD)?;
    outer.finish(ECDSA_BAD)?;
    let mut r = Reader::new(seq.value);
    let mut out = alloc::vec![0u8; 2 * N];
    for half in 0..2 {
        let int = der::unsigned(&r.expect(der::INTEGER, ECDSA_BAD)?, ECDSA_BAD)?;
        if int.len() > N {
            return Err(ECDSA_BAD);
        }
        out[half * N + N - int.len()..(half + 1) * N].copy_from_slice(int);
    }
    r.finish(ECDSA_BAD)?;
    Ok(out)
}
