//! Arithmetic modulo an odd number by Montgomery multiplication on u32 limbs, shared by RSA
//! (`s^e mod n`) and P-384 (the field and the group order). The inputs are public (keys and
//! signatures), so nothing here tries to be constant-time.
//!
//! Values are little-endian limb slices exactly as long as the modulus and below it; results are
//! written into a caller's slice of the same length, so the P-384 code keeps its numbers in
//! fixed arrays and allocates nothing per operation.

use alloc::vec;
use alloc::vec::Vec;

#[derive(Clone, Debug)]
pub(crate) struct Modulus {
    /// Little-endian limbs, no zero top limb.
    n: Vec<u32>,
    bits: usize,
    /// `-n^-1 mod 2^32`.
    n0inv: u32,
    /// `R^2 mod n` with `R = 2^(32 * limbs)`: what takes a value into Montgomery form.
    rr: Vec<u32>,
}

impl Modulus {
    /// `n`: odd, at least two bits, no zero top limb.
    pub fn new(n: Vec<u32>) -> Self {
        debug_assert!(n[0] & 1 == 1 && n[n.len() - 1] != 0);
        let bits = n.len() * 32 - n[n.len() - 1].leading_zeros() as usize;
        let mut inv: u32 = 1;
        // Newton's iteration doubles the correct low bits each round: 1, 2, 4, ..., 32.
        for _ in 0..5 {
            inv = inv.wrapping_mul(2u32.wrapping_sub(n[0].wrapping_mul(inv)));
        }
        let mut m = Modulus { n0inv: inv.wrapping_neg(), rr: Vec::new(), bits, n };
        m.rr = m.r_squared();
        m
    }

    pub fn limbs(&self) -> &[u32] {
        &self.n
    }

    pub fn bits(&self) -> usize {
        self.bits
    }

    /// `R^2 mod n`: `R*2 mod n` by doubling from the top bit of n, then raised to the power
    /// `32 * limbs` in Montgomery form (`mont(R*2^a, R*2^b) = R*2^(a+b)`).
    fn r_squared(&self) -> Vec<u32> {
        let k = self.n.len();
        let mut x = vec![0u32; k];
        x[(self.bits - 1) / 32] = 1 << ((self.bits - 1) % 32);
        let mut y = vec![0u32; k];
        for _ in 0..(32 * k + 1 - (self.bits - 1)) {
            self.add(&x, &x, &mut y);
            core::mem::swap(&mut x, &mut y);
        }
        // x = R*2 mod n: the Montgomery form of 2. Its power 32k is R*2^(32k) = R^2.
        let mut out = vec![0u32; k];
        self.pow(&x, &[(32 * k) as u32], &mut out);
        out
    }

    /// `out = a * b / R mod n` for `a, b < n` (CIOS; `out` is the running sum).
    pub fn mul(&self, a: &[u32], b: &[u32], out: &mut [u32]) {
        let n = &self.n[..];
        let k = n.len();
        // Equal lengths up front let the compiler drop the bounds checks in the loops.
        let (a, b, out) = (&a[..k], &b[..k], &mut out[..k]);
        out.fill(0);
        let mut top = 0u32;
        for &ai in a {
            let mut carry = 0u64;
            for (o, &bj) in out.iter_mut().zip(b) {
                let s = u64::from(*o) + u64::from(ai) * u64::from(bj) + carry;
                *o = s as u32;
                carry = s >> 32;
            }
            let s = u64::from(top) + carry;
            let (t_k, t_k1) = (s as u32, (s >> 32) as u32);
            let m = out[0].wrapping_mul(self.n0inv);
            let s = u64::from(out[0]) + u64::from(m) * u64::from(n[0]);
            let mut carry = s >> 32;
            for j in 1..k {
                let s = u64::from(out[j]) + u64::from(m) * u64::from(n[j]) + carry;
                out[j - 1] = s as u32;
                carry = s >> 32;
            }
            let s = u64::from(t_k) + carry;
            out[k - 1] = s as u32;
            top = t_k1 + (s >> 32) as u32;
        }
        if top != 0 || !less(out, n) {
            sub_in_place(out, n);
        }
    }

    /// `out = a * R mod n`, for `a < n`.
    pub fn to_mont(&self, a: &[u32], out: &mut [u32]) {
        self.mul(a, &self.rr, out);
    }

    /// `out = a / R mod n`: out of Montgomery form.
    pub fn out_of_mont(&self, a: &[u32], out: &mut [u32]) {
        let mut one = vec![0u32; self.n.len()];
        one[0] = 1;
        self.mul(a, &one, out);
    }

    /// `out = base^exp` in Montgomery form (`base` in it too); `exp` little-endian limbs, not 0.
    pub fn pow(&self, base: &[u32], exp: &[u32], out: &mut [u32]) {
        let top = exp.iter().rposition(|&l| l != 0).expect("a zero exponent");
        let bits = 32 * top + 32 - exp[top].leading_zeros() as usize;
        out.copy_from_slice(base);
        let mut t = vec![0u32; self.n.len()];
        for bit in (0..bits - 1).rev() {
            self.mul(out, out, &mut t);
            if exp[bit / 32] >> (bit % 32) & 1 == 1 {
                self.mul(&t, base, out);
            } else {
                out.copy_from_slice(&t);
            }
        }
    }

    /// `out = a^-1` in Montgomery form (Fermat: `a^(n-2)`, n prime), for `a` in Montgomery form.
    pub fn invert(&self, a: &[u32], out: &mut [u32]) {
        let mut exp = self.n.clone();
        sub_in_place(&mut exp, &[2]);
        self.pow(a, &exp, out);
    }

    /// `out = a + b mod n` for `a, b < n`.
    pub fn add(&self, a: &[u32], b: &[u32], out: &mut [u32]) {
        let mut carry = 0u64;
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            let s = u64::from(x) + u64::from(y) + carry;
            *o = s as u32;
            carry = s >> 32;
        }
        if carry == 1 || !less(out, &self.n) {
            sub_in_place(out, &self.n);
        }
    }

    /// `out = a - b mod n` for `a, b < n`.
    pub fn sub(&self, a: &[u32], b: &[u32], out: &mut [u32]) {
        out.copy_from_slice(a);
        if sub_in_place(out, b) {
            add_in_place(out, &self.n);
        }
    }
}

/// Big-endian bytes into `count` little-endian limbs (more when the bytes need them).
pub(crate) fn limbs(bytes: &[u8], count: usize) -> Vec<u32> {
    let mut out = vec![0u32; count.max(bytes.len().div_ceil(4))];
    for (i, &b) in bytes.iter().rev().enumerate() {
        out[i / 4] |= u32::from(b) << (8 * (i % 4));
    }
    out
}

/// Little-endian limbs into `len` big-endian bytes (higher bytes dropped).
pub(crate) fn to_bytes(limbs: &[u32], len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    for (i, o) in out.iter_mut().rev().enumerate() {
        *o = limbs.get(i / 4).map_or(0, |l| (l >> (8 * (i % 4))) as u8);
    }
    out
}

/// `a < b`, where `a` has at least `b`'s limbs (those above b's all zero for a yes).
pub(crate) fn less(a: &[u32], b: &[u32]) -> bool {
    if a[b.len()..].iter().any(|&l| l != 0) {
        return false;
    }
    for (x, y) in a[..b.len()].iter().rev().zip(b.iter().rev()) {
        if x != y {
            return x < y;
        }
    }
    false
}

/// `a -= b` (b no longer than a, missing limbs zero); whether it borrowed out of the top.
pub(crate) fn sub_in_place(a: &mut [u32], b: &[u32]) -> bool {
    let mut borrow = 0u64;
    for (i, x) in a.iter_mut().enumerate() {
        let y = b.get(i).copied().unwrap_or(0);
        let d = u64::from(*x).wrapping_sub(u64::from(y)).wrapping_sub(borrow);
        *x = d as u32;
        borrow = (d >> 63) & 1;
    }
    borrow == 1
}

fn add_in_place(a: &mut [u32], b: &[u32]) {
    let mut carry = 0u64;
    for (x, &y) in a.iter_mut().zip(b) {
        let s = u64::from(*x) + u64::from(y) + carry;
        *x = s as u32;
        carry = s >> 32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigUint;
    use proptest::prelude::*;

    fn big(limbs: &[u32]) -> BigUint {
        BigUint::from_slice(limbs)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// add, sub, mul (through Montgomery form and back) and invert against num-bigint, for
        /// odd moduli of 1 to 13 limbs (P-384's 12 among them).
        #[test]
        fn matches_bigint(mut n in proptest::collection::vec(any::<u32>(), 1..14),
                          a in proptest::collection::vec(any::<u32>(), 13),
                          b in proptest::collection::vec(any::<u32>(), 13)) {
            n[0] |= 1;
            let k = n.len();
            if n[k - 1] == 0 { n[k - 1] = 1; }
            prop_assume!(k > 1 || n[0] > 1);
            let m = Modulus::new(n.clone());
            let nb = big(&n);
            let reduce = |v: &[u32]| {
                let r = big(&v[..k]) % &nb;
                let mut out = r.to_u32_digits();
                out.resize(k, 0);
                out
            };
            let (a, b) = (reduce(&a), reduce(&b));
            let (ab, bb) = (big(&a), big(&b));
            let mut out = vec![0u32; k];
            m.add(&a, &b, &mut out);
            prop_assert_eq!(big(&out), (&ab + &bb) % &nb);
            m.sub(&a, &b, &mut out);
            prop_assert_eq!(big(&out), (&ab + &nb - &bb) % &nb);
            let (mut am, mut bm, mut pm) = (vec![0u32; k], vec![0u32; k], vec![0u32; k]);
            m.to_mont(&a, &mut am);
            m.to_mont(&b, &mut bm);
            m.mul(&am, &bm, &mut pm);
            m.out_of_mont(&pm, &mut out);
            prop_assert_eq!(big(&out), (&ab * &bb) % &nb);
            m.pow(&am, &b, &mut pm);
            m.out_of_mont(&pm, &mut out);
            if bb != BigUint::ZERO {
                prop_assert_eq!(big(&out), ab.modpow(&bb, &nb));
            }
        }
    }

    /// Fermat's inverse, for the two P-384 moduli's kind (primes): a·a⁻¹ = 1.
    #[test]
    fn inverse_mod_a_prime() {
        // 2^127 − 1, a Mersenne prime.
        let m = Modulus::new(vec![u32::MAX, u32::MAX, u32::MAX, 0x7fff_ffff]);
        for a in [1u32, 2, 3, 0xdead_beef] {
            let a = [a, 7, 0, 0];
            let (mut am, mut inv, mut prod, mut out) = ([0; 4], [0; 4], [0; 4], [0; 4]);
            m.to_mont(&a, &mut am);
            m.invert(&am, &mut inv);
            m.mul(&am, &inv, &mut prod);
            m.out_of_mont(&prod, &mut out);
            assert_eq!(out, [1, 0, 0, 0]);
        }
    }
}
