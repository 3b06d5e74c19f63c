//! Ed25519 signature verification (RFC 8032), for over-the-air updates: TweetNaCl's field and
//! group arithmetic (sixteen 16-bit limbs in `i64`, one unified point addition) with the
//! SHA-512 the TLS code already links. About 2 KB of code where ed25519-compact took 16.5 KB on
//! the C3 (its 64-bit limbs are `u128` arithmetic on a 32-bit core, and it brings its own
//! SHA-512). Slower (one verification is two 256-bit scalar multiplications, a fraction of a
//! second on the chip, once per update), and variable-time: it only ever handles a public key,
//! a signature and an image, no secret.
//!
//! Stricter than RFC 8032's cofactored check: `[s]B - [k]A` must encode to exactly `R`, and `s`
//! must be below the group order. A signature made by any signer (openssl, ed25519-compact)
//! passes; tests/ed25519.rs holds it against ed25519-compact on random and mutated signatures.

use sha2::{Digest, Sha512};

/// A field element mod 2^255 - 19: sixteen 16-bit limbs, little-endian, loosely reduced.
type Fe = [i64; 16];
/// A point in extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z, x·y = T/Z.
type Point = [Fe; 4];

const ZERO: Fe = [0; 16];
const ONE: Fe = {
    let mut f = ZERO;
    f[0] = 1;
    f
};
/// The group order L = 2^252 + 27742317777372353535851937790883648493, little-endian.
const L: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];
/// The base point's encoding: y = 4/5, x even.
const BASE: [u8; 32] = {
    let mut b = [0x66; 32];
    b[0] = 0x58;
    b
};

fn small(n: i64) -> Fe {
    let mut f = ZERO;
    f[0] = n & 0xffff;
    f[1] = n >> 16;
    f
}

fn carry(o: &mut Fe) {
    for i in 0..16 {
        o[i] += 1 << 16;
        let c = o[i] >> 16;
        if i < 15 {
            o[i + 1] += c - 1;
        } else {
            // 2^256 = 38 (mod p).
            o[0] += 38 * (c - 1);
        }
        o[i] -= c << 16;
    }
}

fn add(a: &Fe, b: &Fe) -> Fe {
    core::array::from_fn(|i| a[i] + b[i])
}

fn sub(a: &Fe, b: &Fe) -> Fe {
    core::array::from_fn(|i| a[i] - b[i])
}

fn mul(a: &Fe, b: &Fe) -> Fe {
    let mut t = [0i64; 31];
    for i in 0..16 {
        for j in 0..16 {
            t[i + j] += a[i] * b[j];
        }
    }
    for i in 0..15 {
        t[i] += 38 * t[i + 16];
    }
    let mut o: Fe = core::array::from_fn(|i| t[i]);
    carry(&mut o);
    carry(&mut o);
    o
}

/// `a` to the power 2^255 - 21 (the inverse; `skip` = [2, 4]) or 2^252 - 3 (for the square
/// root; `skip` = [1, 1], from bit 250): square-and-multiply over the exponent's bits from
/// `top` down, skipping its zero bits.
fn pow(a: &Fe, top: u32, skip: [u32; 2]) -> Fe {
    let mut c = *a;
    for bit in (0..top).rev() {
        c = mul(&c, &c);
        if !skip.contains(&bit) {
            c = mul(&c, a);
        }
    }
    c
}

fn invert(a: &Fe) -> Fe {
    pow(a, 254, [2, 4])
}

/// The canonical 32 bytes of `n` (fully reduced mod p).
fn pack_fe(n: &Fe) -> [u8; 32] {
    let mut t = *n;
    carry(&mut t);
    carry(&mut t);
    carry(&mut t);
    for _ in 0..2 {
        let mut m = ZERO;
        m[0] = t[0] - 0xffed;
        for i in 1..15 {
            m[i] = t[i] - 0xffff - ((m[i - 1] >> 16) & 1);
            m[i - 1] &= 0xffff;
        }
        m[15] = t[15] - 0x7fff - ((m[14] >> 16) & 1);
        let borrow = (m[15] >> 16) & 1;
        m[14] &= 0xffff;
        if borrow == 0 {
            t = m;
        }
    }
    let mut o = [0u8; 32];
    for i in 0..16 {
        o[2 * i] = t[i] as u8;
        o[2 * i + 1] = (t[i] >> 8) as u8;
    }
    o
}

fn same(a: &Fe, b: &Fe) -> bool {
    pack_fe(a) == pack_fe(b)
}

fn odd(a: &Fe) -> u8 {
    pack_fe(a)[0] & 1
}

fn unpack_fe(n: &[u8; 32]) -> Fe {
    let mut o: Fe = core::array::from_fn(|i| i64::from(n[2 * i]) + (i64::from(n[2 * i + 1]) << 8));
    o[15] &= 0x7fff;
    o
}

/// d = -121665/121666.
fn curve_d() -> Fe {
    mul(&sub(&ZERO, &small(121_665)), &invert(&small(121_666)))
}

/// The unified addition of extended coordinates (complete on this curve: doubling too).
fn point_add(p: &Point, q: &Point, d2: &Fe) -> Point {
    let a = mul(&sub(&p[1], &p[0]), &sub(&q[1], &q[0]));
    let b = mul(&add(&p[0], &p[1]), &add(&q[0], &q[1]));
    let c = mul(&mul(&p[3], &q[3]), d2);
    let d = mul(&p[2], &q[2]);
    let d = add(&d, &d);
    let (e, f, g, h) = (sub(&b, &a), sub(&d, &c), add(&d, &c), add(&b, &a));
    [mul(&e, &f), mul(&h, &g), mul(&g, &f), mul(&e, &h)]
}

fn pack_point(p: &Point) -> [u8; 32] {
    let zi = invert(&p[2]);
    let mut r = pack_fe(&mul(&p[1], &zi));
    r[31] ^= odd(&mul(&p[0], &zi)) << 7;
    r
}

/// `[s]q`, variable-time (public inputs only).
fn scalar_mul(q: &Point, s: &[u8; 32], d2: &Fe) -> Point {
    let mut p = [ZERO, ONE, ONE, ZERO];
    for i in (0..256).rev() {
        p = point_add(&p, &p, d2);
        if (s[i / 8] >> (i & 7)) & 1 == 1 {
            p = point_add(&p, q, d2);
        }
    }
    p
}

/// The point `bytes` encodes, negated; `None` if it is not on the curve.
fn decode_negated(bytes: &[u8; 32], d: &Fe) -> Option<Point> {
    let y = unpack_fe(bytes);
    let y2 = mul(&y, &y);
    // x^2 = (y^2 - 1) / (d·y^2 + 1): x = num·den^3·(num·den^7)^((p-5)/8).
    let num = sub(&y2, &ONE);
    let den = add(&mul(&y2, d), &ONE);
    let den2 = mul(&den, &den);
    let den4 = mul(&den2, &den2);
    let den6 = mul(&den4, &den2);
    let t = pow(&mul(&mul(&den6, &num), &den), 251, [1, 1]);
    let mut x = mul(&mul(&mul(&mul(&t, &num), &den), &den), &den);
    if !same(&mul(&mul(&x, &x), &den), &num) {
        // Times sqrt(-1) = 2^((p-1)/4) = 2^(2^253 - 5).
        x = mul(&x, &pow(&small(2), 252, [2, 2]));
    }
    if !same(&mul(&mul(&x, &x), &den), &num) {
        return None;
    }
    if odd(&x) == bytes[31] >> 7 {
        x = sub(&ZERO, &x);
    }
    Some([x, y, ONE, mul(&x, &y)])
}

/// `x` (64 bytes, little-endian) mod L: TweetNaCl's `modL`.
fn reduce(x: &mut [i64; 64]) -> [u8; 32] {
    let l = |j: usize| i64::from(L[j]);
    for i in (32..64).rev() {
        let mut c = 0;
        let mut j = i - 32;
        while j < i - 12 {
            x[j] += c - 16 * x[i] * l(j - (i - 32));
            c = (x[j] + 128) >> 8;
            x[j] -= c << 8;
            j += 1;
        }
        x[j] += c;
        x[i] = 0;
    }
    let mut c = 0;
    for j in 0..32 {
        x[j] += c - (x[31] >> 4) * l(j);
        c = x[j] >> 8;
        x[j] &= 255;
    }
    for (j, v) in x.iter_mut().enumerate().take(32) {
        *v -= c * l(j);
    }
    let mut r = [0u8; 32];
    for i in 0..32 {
        x[i + 1] += x[i] >> 8;
        r[i] = x[i] as u8;
    }
    r
}

/// Whether `s` (little-endian) is below L.
fn below_order(s: &[u8; 32]) -> bool {
    for i in (0..32).rev() {
        if s[i] != L[i] {
            return s[i] < L[i];
        }
    }
    false
}

/// A signature being checked over a message that arrives in pieces.
pub struct Verifying {
    hash: Sha512,
    r: [u8; 32],
    s: [u8; 32],
    minus_a: Point,
    d: Fe,
}

/// Why a signature was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The public key is not a point of the curve.
    BadKey,
    /// The signature's `s` is not below the group order (a malleable or garbled signature).
    NonCanonical,
    /// The signature does not verify for this key and message.
    Mismatch,
}

impl Verifying {
    /// Starts checking `signature` (`R || s`) by `key`.
    pub fn new(key: &[u8; 32], signature: &[u8; 64]) -> Result<Verifying, Refused> {
        let (r, s) = signature.split_at(32);
        let (r, s): ([u8; 32], [u8; 32]) = (r.try_into().unwrap_or([0; 32]), s.try_into().unwrap_or([0; 32]));
        if !below_order(&s) {
            return Err(Refused::NonCanonical);
        }
        let d = curve_d();
        let minus_a = decode_negated(key, &d).ok_or(Refused::BadKey)?;
        let mut hash = Sha512::new();
        hash.update(r);
        hash.update(key);
        Ok(Verifying { hash, r, s, minus_a, d })
    }

    /// The next piece of the message.
    pub fn absorb(&mut self, piece: &[u8]) {
        self.hash.update(piece);
    }

    /// Whether `[s]B - [k]A` is `R`, k = SHA-512(R || A || message) mod L.
    pub fn verify(self) -> Result<(), Refused> {
        let digest = self.hash.finalize();
        let mut wide = [0i64; 64];
        for (w, b) in wide.iter_mut().zip(digest.iter()) {
            *w = i64::from(*b);
        }
        let k = reduce(&mut wide);
        let d2 = add(&self.d, &self.d);
        // -B decoded, negated back (x and t change sign).
        let [x, y, z, t] = decode_negated(&BASE, &self.d).ok_or(Refused::Mismatch)?;
        let b = [sub(&ZERO, &x), y, z, sub(&ZERO, &t)];
        let sum = point_add(&scalar_mul(&self.minus_a, &k, &d2), &scalar_mul(&b, &self.s, &d2), &d2);
        if pack_point(&sum) == self.r { Ok(()) } else { Err(Refused::Mismatch) }
    }
}

/// Checks `signature` by `key` over `message`, whole.
pub fn verify(key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> Result<(), Refused> {
    let mut v = Verifying::new(key, signature)?;
    v.absorb(message);
    v.verify()
}
