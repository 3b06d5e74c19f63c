//! RSA public-key operations: `s^e mod n` by Montgomery multiplication on u32 limbs (the
//! inputs are public, so nothing here tries to be constant-time), then the two paddings TLS
//! needs: PKCS#1 v1.5 for certificate signatures and PSS (RFC 8017 §9.1.2) for TLS 1.3's
//! CertificateVerify.

use alloc::vec;
use alloc::vec::Vec;

use super::hash::Hash;
use super::mont::{Modulus, less, limbs, to_bytes};

/// The moduli accepted, in bits.
pub(crate) const MIN_BITS: usize = 2048;
pub(crate) const MAX_BITS: usize = 4096;

/// A public key, checked: modulus of 2048 to 4096 bits and odd, exponent odd and above 1.
#[derive(Clone, Debug)]
pub(crate) struct RsaKey {
    n: Modulus,
    /// The modulus' length in bytes: the length of every signature.
    len: usize,
    bits: usize,
    e: u32,
}

impl RsaKey {
    /// `modulus` big-endian without a sign byte; `e` the public exponent.
    pub fn new(modulus: &[u8], e: u32) -> Result<Self, &'static str> {
        let start = modulus.iter().position(|&b| b != 0).unwrap_or(modulus.len());
        let modulus = &modulus[start..];
        let bits = modulus.len() * 8 - modulus.first().map_or(8, |b| b.leading_zeros() as usize);
        if !(MIN_BITS..=MAX_BITS).contains(&bits) {
            return Err("an RSA modulus is not 2048 to 4096 bits long");
        }
        if modulus[modulus.len() - 1] & 1 == 0 {
            return Err("an RSA modulus is even");
        }
        if e & 1 == 0 || e < 3 {
            return Err("an RSA public exponent is not odd and above 1");
        }
        Ok(Self::from_odd(modulus, e))
    }

    /// Any odd modulus of at least two bits (the property tests use small ones).
    fn from_odd(modulus: &[u8], e: u32) -> Self {
        let n = Modulus::new(limbs(modulus, modulus.len().div_ceil(4)));
        RsaKey { len: n.bits().div_ceil(8), bits: n.bits(), e, n }
    }

    #[cfg(test)]
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// `s^e mod n`, big-endian, as long as the modulus; `None` when `s` is not below `n`
    /// or is not exactly the modulus' length.
    pub fn public_op(&self, s: &[u8]) -> Option<Vec<u8>> {
        if s.len() != self.len {
            return None;
        }
        let k = self.n.limbs().len();
        let s = limbs(s, k);
        if !less(&s, self.n.limbs()) {
            return None;
        }
        let mut base = vec![0u32; k];
        self.n.to_mont(&s, &mut base);
        let mut acc = vec![0u32; k];
        self.n.pow(&base, &[self.e], &mut acc);
        let mut out = vec![0u32; k];
        self.n.out_of_mont(&acc, &mut out);
        Some(to_bytes(&out, self.len))
    }

    /// RSASSA-PKCS1-v1_5 over `message` with `hash`.
    pub fn verify_pkcs1(&self, hash: Hash, message: &[u8], signature: &[u8]) -> bool {
        let Some(em) = self.public_op(signature) else { return false };
        let prefix = hash.digest_info_prefix();
        let digest = hash.digest(&[message]);
        let Some(pad) = em.len().checked_sub(3 + prefix.len() + digest.len()) else { return false };
        if pad < 8 {
            return false;
        }
        let mut expected = Vec::with_capacity(em.len());
        expected.extend_from_slice(&[0x00, 0x01]);
        expected.resize(2 + pad, 0xff);
        expected.push(0x00);
        expected.extend_from_slice(prefix);
        expected.extend_from_slice(&digest);
        expected == em
    }

    /// RSASSA-PSS (EMSA-PSS-VERIFY) over `message` with `hash`, MGF1 with the same hash and
    /// a salt as long as the hash, as TLS 1.3 requires.
    pub fn verify_pss(&self, hash: Hash, message: &[u8], signature: &[u8]) -> bool {
        let Some(decoded) = self.public_op(signature) else { return false };
        let em_bits = self.bits - 1;
        let em_len = em_bits.div_ceil(8);
        // When the modulus' bit length is 1 mod 8, EM is one byte shorter than the
        // modulus and the extra leading byte must be zero.
        let (extra, em) = decoded.split_at(decoded.len() - em_len);
        if extra.iter().any(|&b| b != 0) {
            return false;
        }
        let h_len = hash.len();
        let s_len = h_len;
        if em_len < h_len + s_len + 2 || em[em_len - 1] != 0xbc {
            return false;
        }
        let (masked_db, rest) = em.split_at(em_len - h_len - 1);
        let h = &rest[..h_len];
        let top_mask = 0xffu8 >> (8 * em_len - em_bits);
        if masked_db[0] & !top_mask != 0 {
            return false;
        }
        let mut db = masked_db.to_vec();
        mgf1_xor(hash, h, &mut db);
        db[0] &= top_mask;
        let ps_len = em_len - h_len - s_len - 2;
        if db[..ps_len].iter().any(|&b| b != 0) || db[ps_len] != 0x01 {
            return false;
        }
        let salt = &db[ps_len + 1..];
        let m_hash = hash.digest(&[message]);
        hash.digest(&[&[0u8; 8], &m_hash, salt]) == h
    }
}

/// `out ^= MGF1(seed)`.
fn mgf1_xor(hash: Hash, seed: &[u8], out: &mut [u8]) {
    for (counter, chunk) in out.chunks_mut(hash.len()).enumerate() {
        let block = hash.digest(&[seed, &(counter as u32).to_be_bytes()]);
        for (o, m) in chunk.iter_mut().zip(block.iter()) {
            *o ^= m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigUint;
    use proptest::prelude::*;

    fn reference(n: &[u8], e: u32, s: &[u8]) -> Vec<u8> {
        let n = BigUint::from_bytes_be(n);
        let r = BigUint::from_bytes_be(s).modpow(&BigUint::from(e), &n);
        let bytes = r.to_bytes_be();
        let len = n.bits().div_ceil(8) as usize;
        let mut out = vec![0u8; len - bytes.len()];
        out.extend_from_slice(&bytes);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// The Montgomery operation equals num-bigint's modpow for any odd modulus (short
        /// ones too, so the edge cases of a partly used top limb come up often).
        #[test]
        fn public_op_is_modpow(mut n in proptest::collection::vec(any::<u8>(), 2..80),
                               seed in proptest::collection::vec(any::<u8>(), 80),
                               e in any::<u32>()) {
            n[0] |= 0x80 >> (seed[0] % 8);
            n[0] &= 0xff >> (seed[0] % 8);
            *n.last_mut().unwrap() |= 1;
            let e = e | 1;
            let key = RsaKey::from_odd(&n, e);
            // s: random and reduced below n by clearing its top bits and one step.
            let mut s = seed[..key.len].to_vec();
            s[0] &= 0xff >> (8 - (key.bits - 8 * (key.len - 1)));
            let (sb, nb) = (BigUint::from_bytes_be(&s), BigUint::from_bytes_be(&n));
            let s = if sb >= nb { let d = sb - &nb; let b = d.to_bytes_be(); let mut v = vec![0u8; key.len - b.len()]; v.extend(b); v } else { s };
            prop_assert_eq!(key.public_op(&s).unwrap(), reference(&n, e, &s));
            // n itself and anything longer is refused.
            let n_padded = { let mut v = vec![0u8; key.len - n.len()]; v.extend_from_slice(&n); v };
            prop_assert!(key.public_op(&n_padded).is_none());
        }
    }

    #[test]
    fn key_rules() {
        let mut n = vec![0xffu8; 256];
        assert!(RsaKey::new(&n, 65537).is_ok());
        assert!(RsaKey::new(&n, 65536).is_err(), "even exponent");
        assert!(RsaKey::new(&n, 1).is_err(), "exponent 1");
        n[255] = 0xfe;
        assert!(RsaKey::new(&n, 3).is_err(), "even modulus");
        assert!(RsaKey::new(&[0xff; 255], 3).is_err(), "2040 bits");
        assert!(RsaKey::new(&[0xff; 513], 3).is_err(), "4104 bits");
        assert!(RsaKey::new(&[0x01; 513], 3).is_err(), "4097 bits");
        assert!(RsaKey::new(&[0xff; 512], 3).is_ok(), "4096 bits");
    }
}
