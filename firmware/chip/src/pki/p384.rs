//! ECDSA P-384 verification (SEC 1 §4.1.4, FIPS 186-4 §6.4.2) over the Montgomery arithmetic
//! of `mont`, in place of the RustCrypto `p384` crate, which took about 140 KB of the chip's
//! flash. Verification only reads public values (keys, signatures, hashes), so nothing here is
//! constant-time; it is small instead: Jacobian points with a = −3, one Shamir ladder for
//! `u1·G + u2·Q`, inversions by Fermat. What it is not: signing, ECDH, compressed points.

use super::cert::ecdsa_rs;
use super::mont::{Modulus, less, sub_in_place};

const L: usize = 12;
/// A number below 2^384, little-endian u32 limbs.
type Fe = [u32; L];

/// 96 big-endian hex digits into limbs.
const fn hex(s: &str) -> Fe {
    let b = s.as_bytes();
    assert!(b.len() == 96);
    let mut out = [0u32; L];
    let mut i = 0;
    while i < 96 {
        let v = match b[i] {
            c @ b'0'..=b'9' => c - b'0',
            c @ b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("not a hex digit"),
        };
        let pos = 95 - i;
        out[pos / 8] |= (v as u32) << (4 * (pos % 8));
        i += 1;
    }
    out
}

// The curve (SEC 2 §3.2.1, FIPS 186-4 D.1.2.4): y² = x³ − 3x + b over GF(p), G of prime order n.
const P: Fe = hex(concat!(
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "fffffffeffffffff0000000000000000ffffffff"
));
const N: Fe = hex(concat!(
    "ffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf",
    "581a0db248b0a77aecec196accc52973"
));
const B: Fe = hex(concat!(
    "b3312fa7e23ee7e4988e056be3f82d19181d9c6efe8141120314088f5013875a",
    "c656398d8a2ed19d2a85c8edd3ec2aef"
));
const GX: Fe = hex(concat!(
    "aa87ca22be8b05378eb1c71ef320ad746e1d3b628ba79b9859f741e082542a38",
    "5502f25dbf55296c3a545e3872760ab7"
));
const GY: Fe = hex(concat!(
    "3617de4a96262c6f5d9e98bf9292dc29f8f41dbd289a147ce9da3113b5f0b8c0",
    "0a60b1ce1d7e819d7a431d7c90ea0e5f"
));
const ONE: Fe = {
    let mut one = [0; L];
    one[0] = 1;
    one
};

/// The length of an uncompressed SEC 1 point: `04 || x || y`.
pub(crate) const POINT_LEN: usize = 97;

/// Jacobian coordinates in Montgomery form mod p: (X/Z², Y/Z³); Z = 0 is the point at infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Point {
    x: Fe,
    y: Fe,
    z: Fe,
}

const INFINITY: Point = Point { x: [0; L], y: [0; L], z: [0; L] };

fn is_zero(a: &Fe) -> bool {
    a.iter().all(|&l| l == 0)
}

/// Big-endian bytes (at most 48) into a number.
fn number(bytes: &[u8]) -> Fe {
    let mut out = [0u32; L];
    for (i, &b) in bytes.iter().rev().enumerate() {
        out[i / 4] |= u32::from(b) << (8 * (i % 4));
    }
    out
}

#[cfg(test)]
fn be_bytes(a: &Fe) -> [u8; 48] {
    let mut out = [0u8; 48];
    for (i, o) in out.iter_mut().rev().enumerate() {
        *o = (a[i / 4] >> (8 * (i % 4))) as u8;
    }
    out
}

/// The two moduli and the constants in Montgomery form. Made per verification: setting up the
/// moduli costs about one point addition's worth of work next to the ~800 of a verification.
struct Curve {
    p: Modulus,
    n: Modulus,
    b: Fe,
    g: Point,
}

impl Curve {
    fn new() -> Self {
        let mut c = Curve { p: Modulus::new(P.to_vec()), n: Modulus::new(N.to_vec()), b: [0; L], g: INFINITY };
        c.b = c.fe(&B);
        c.g = Point { x: c.fe(&GX), y: c.fe(&GY), z: c.fe(&ONE) };
        c
    }

    /// `a < p` into Montgomery form.
    fn fe(&self, a: &Fe) -> Fe {
        let mut out = [0; L];
        self.p.to_mont(a, &mut out);
        out
    }

    fn mul(&self, a: &Fe, b: &Fe) -> Fe {
        let mut out = [0; L];
        self.p.mul(a, b, &mut out);
        out
    }

    fn sq(&self, a: &Fe) -> Fe {
        self.mul(a, a)
    }

    fn add(&self, a: &Fe, b: &Fe) -> Fe {
        let mut out = [0; L];
        self.p.add(a, b, &mut out);
        out
    }

    fn sub(&self, a: &Fe, b: &Fe) -> Fe {
        let mut out = [0; L];
        self.p.sub(a, b, &mut out);
        out
    }

    /// An uncompressed SEC 1 point, if it is one on the curve (which also means not infinity:
    /// it has no affine encoding). Coordinates must be below p.
    fn decode(&self, bytes: &[u8]) -> Option<Point> {
        let [4, coords @ ..] = bytes else { return None };
        if coords.len() != 96 {
            return None;
        }
        let (x, y) = (number(&coords[..48]), number(&coords[48..]));
        if !less(&x, &P) || !less(&y, &P) {
            return None;
        }
        let (x, y) = (self.fe(&x), self.fe(&y));
        let three_x = self.add(&self.add(&x, &x), &x);
        let rhs = self.add(&self.sub(&self.mul(&self.sq(&x), &x), &three_x), &self.b);
        (self.sq(&y) == rhs).then(|| Point { x, y, z: self.fe(&ONE) })
    }

    /// 2P (dbl-2001-b, which uses a = −3).
    fn double(&self, p: &Point) -> Point {
        if is_zero(&p.z) {
            return *p;
        }
        let delta = self.sq(&p.z);
        let gamma = self.sq(&p.y);
        let beta = self.mul(&p.x, &gamma);
        let alpha = self.mul(&self.sub(&p.x, &delta), &self.add(&p.x, &delta));
        let alpha = self.add(&self.add(&alpha, &alpha), &alpha);
        let beta4 = self.add(&self.add(&beta, &beta), &self.add(&beta, &beta));
        let beta8 = self.add(&beta4, &beta4);
        let x = self.sub(&self.sq(&alpha), &beta8);
        let z = self.sub(&self.sub(&self.sq(&self.add(&p.y, &p.z)), &gamma), &delta);
        let gamma2 = self.sq(&gamma);
        let gamma8 = {
            let g2 = self.add(&gamma2, &gamma2);
            let g4 = self.add(&g2, &g2);
            self.add(&g4, &g4)
        };
        let y = self.sub(&self.mul(&alpha, &self.sub(&beta4, &x)), &gamma8);
        Point { x, y, z }
    }

    /// P + Q for any two points: infinity on either side, P = Q (a doubling) and P = −Q
    /// (infinity) included.
    fn add_points(&self, p: &Point, q: &Point) -> Point {
        if is_zero(&p.z) {
            return *q;
        }
        if is_zero(&q.z) {
            return *p;
        }
        let z1z1 = self.sq(&p.z);
        let z2z2 = self.sq(&q.z);
        let u1 = self.mul(&p.x, &z2z2);
        let u2 = self.mul(&q.x, &z1z1);
        let s1 = self.mul(&p.y, &self.mul(&q.z, &z2z2));
        let s2 = self.mul(&q.y, &self.mul(&p.z, &z1z1));
        let h = self.sub(&u2, &u1);
        let r = self.sub(&s2, &s1);
        if is_zero(&h) {
            return if is_zero(&r) { self.double(p) } else { INFINITY };
        }
        let hh = self.sq(&h);
        let hhh = self.mul(&h, &hh);
        let v = self.mul(&u1, &hh);
        let x = self.sub(&self.sub(&self.sq(&r), &hhh), &self.add(&v, &v));
        let y = self.sub(&self.mul(&r, &self.sub(&v, &x)), &self.mul(&s1, &hhh));
        let z = self.mul(&self.mul(&p.z, &q.z), &h);
        Point { x, y, z }
    }

    /// `a·P + b·Q` by one double-and-add over both scalars' bits (Shamir's trick).
    fn mul_add(&self, a: &Fe, p: &Point, b: &Fe, q: &Point) -> Point {
        let table = [INFINITY, *p, *q, self.add_points(p, q)];
        let mut acc = INFINITY;
        for bit in (0..32 * L).rev() {
            acc = self.double(&acc);
            let pick = (a[bit / 32] >> (bit % 32) & 1) | (b[bit / 32] >> (bit % 32) & 1) << 1;
            if pick != 0 {
                acc = self.add_points(&acc, &table[pick as usize]);
            }
        }
        acc
    }

    /// The affine (x, y), out of Montgomery form; `None` for infinity.
    fn affine(&self, p: &Point) -> Option<(Fe, Fe)> {
        if is_zero(&p.z) {
            return None;
        }
        let mut zinv = [0; L];
        self.p.invert(&p.z, &mut zinv);
        let zinv2 = self.sq(&zinv);
        let (x, y) = (self.mul(&p.x, &zinv2), self.mul(&p.y, &self.mul(&zinv2, &zinv)));
        let (mut ax, mut ay) = ([0; L], [0; L]);
        self.p.out_of_mont(&x, &mut ax);
        self.p.out_of_mont(&y, &mut ay);
        Some((ax, ay))
    }
}

/// Whether `point` is an uncompressed SEC 1 encoding of a point on P-384.
pub(crate) fn is_public_key(point: &[u8]) -> bool {
    Curve::new().decode(point).is_some()
}

/// Whether `signature_der` (an Ecdsa-Sig-Value) is a signature of `hash_value` by the key
/// `point` (uncompressed SEC 1). The hash is taken as its leftmost 384 bits, so SHA-256's
/// 32 bytes count as they are and SHA-512's are cut to 48.
pub(crate) fn verify(point: &[u8], hash_value: &[u8], signature_der: &[u8]) -> bool {
    let Ok(rs) = ecdsa_rs::<48>(signature_der) else { return false };
    let c = Curve::new();
    let Some(q) = c.decode(point) else { return false };
    let (r, s) = (number(&rs[..48]), number(&rs[48..]));
    let in_range = |v: &Fe| !is_zero(v) && less(v, &N);
    if !in_range(&r) || !in_range(&s) {
        return false;
    }
    // e < 2^384 < 2n, so one subtraction reduces it.
    let mut e = number(&hash_value[..hash_value.len().min(48)]);
    if !less(&e, &N) {
        sub_in_place(&mut e, &N);
    }
    let (mut s_mont, mut w_mont, mut u1, mut u2) = ([0; L], [0; L], [0; L], [0; L]);
    c.n.to_mont(&s, &mut s_mont);
    c.n.invert(&s_mont, &mut w_mont);
    // A Montgomery product of a plain number and a Montgomery-form one is plain: e·w, r·w.
    c.n.mul(&e, &w_mont, &mut u1);
    c.n.mul(&r, &w_mont, &mut u2);
    let Some((mut x, _)) = c.affine(&c.mul_add(&u1, &c.g, &u2, &q)) else { return false };
    // x < p < 2n.
    if !less(&x, &N) {
        sub_in_place(&mut x, &N);
    }
    x == r
}

#[cfg(test)]
mod tests;
