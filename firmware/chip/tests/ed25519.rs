//! The chip's own Ed25519 verification (src/ed25519.rs) held against RFC 8032's vectors and
//! against ed25519-compact (what the chip linked before): every signature one accepts the other
//! accepts, and every mutation one refuses the other refuses.

use chela_chip::ed25519::{Refused, Verifying, verify};
use ed25519_compact::{KeyPair, PublicKey, Seed, Signature};
use proptest::prelude::*;

fn hex<const N: usize>(s: &str) -> [u8; N] {
    let v: Vec<u8> = (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect();
    v.try_into().unwrap()
}

fn theirs(key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> bool {
    PublicKey::new(*key).verify(message, &Signature::new(*signature)).is_ok()
}

/// RFC 8032 section 7.1, tests 1 to 3: (public key, message, signature).
const VECTORS: [(&str, &str, &str); 3] = [
    (
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
];

#[test]
fn rfc_8032_vectors_verify_and_their_mutations_do_not() {
    for (key, message, signature) in VECTORS {
        let (key, signature) = (hex::<32>(key), hex::<64>(signature));
        let message: Vec<u8> =
            (0..message.len()).step_by(2).map(|i| u8::from_str_radix(&message[i..i + 2], 16).unwrap()).collect();
        assert!(theirs(&key, &message, &signature), "the vector itself");
        assert_eq!(verify(&key, &message, &signature), Ok(()));
        let mut other = message.clone();
        other.push(0);
        assert_eq!(verify(&key, &other, &signature), Err(Refused::Mismatch));
        let mut bad = signature;
        bad[5] ^= 1;
        assert!(verify(&key, &message, &bad).is_err());
    }
}

#[test]
fn an_s_at_or_above_the_group_order_is_refused() {
    let pair = KeyPair::from_seed(Seed::new([3; 32]));
    let message = b"the update";
    let mut signature = *pair.sk.sign(message, None);
    // s + L: the same point, a second encoding (what malleability would use).
    const L: [u8; 32] = hex_l();
    let mut carry = 0u16;
    for i in 0..32 {
        let sum = u16::from(signature[32 + i]) + u16::from(L[i]) + carry;
        signature[32 + i] = sum as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0, "s + L fits in 256 bits");
    assert!(!theirs(&pair.pk, message, &signature));
    assert_eq!(verify(&pair.pk, message, &signature), Err(Refused::NonCanonical));
    let mut top = *pair.sk.sign(message, None);
    top[63] = 0xff;
    assert_eq!(verify(&pair.pk, message, &top), Err(Refused::NonCanonical));
}

const fn hex_l() -> [u8; 32] {
    let mut l = [0u8; 32];
    let low = [0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14];
    let mut i = 0;
    while i < 16 {
        l[i] = low[i];
        i += 1;
    }
    l[31] = 0x10;
    l
}

#[test]
fn a_key_off_the_curve_is_refused() {
    let signature = *KeyPair::from_seed(Seed::new([4; 32])).sk.sign(b"x", None);
    let mut off = 0;
    for y in 2u8..60 {
        let mut key = [0u8; 32];
        key[0] = y;
        if Verifying::new(&key, &signature).err() == Some(Refused::BadKey) {
            assert!(!theirs(&key, b"x", &signature), "y = {y}");
            off += 1;
        }
    }
    assert!(off > 10, "about half of all y have no x; found {off}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn what_ed25519_compact_signs_verifies_whole_and_in_pieces(
        seed in any::<[u8; 32]>(),
        message in proptest::collection::vec(any::<u8>(), 0..400),
        cuts in proptest::collection::vec(0usize..400, 0..4),
    ) {
        let pair = KeyPair::from_seed(Seed::new(seed));
        let signature = *pair.sk.sign(&message, None);
        prop_assert_eq!(verify(&pair.pk, &message, &signature), Ok(()));
        let mut v = Verifying::new(&pair.pk, &signature).unwrap();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(message.len())).collect();
        cuts.sort_unstable();
        let mut at = 0;
        for c in cuts.into_iter().chain([message.len()]) {
            v.absorb(&message[at..c]);
            at = c;
        }
        prop_assert_eq!(v.verify(), Ok(()));
    }

    #[test]
    fn a_flipped_bit_is_refused_as_ed25519_compact_refuses_it(
        seed in any::<[u8; 32]>(),
        message in proptest::collection::vec(any::<u8>(), 1..200),
        which in 0usize..3,
        bit in any::<usize>(),
    ) {
        let pair = KeyPair::from_seed(Seed::new(seed));
        let (mut key, mut message, mut signature) = (*pair.pk, message.clone(), *pair.sk.sign(&message, None));
        match which {
            0 => signature[(bit / 8) % 64] ^= 1 << (bit % 8),
            1 => { let n = message.len(); message[(bit / 8) % n] ^= 1 << (bit % 8) }
            _ => key[(bit / 8) % 32] ^= 1 << (bit % 8),
        }
        let ours = verify(&key, &message, &signature);
        prop_assert!(ours.is_err());
        prop_assert!(!theirs(&key, &message, &signature));
    }

    #[test]
    fn random_signatures_are_refused_by_both(
        seed in any::<[u8; 32]>(),
        signature in proptest::collection::vec(any::<u8>(), 64),
        message in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let pair = KeyPair::from_seed(Seed::new(seed));
        let signature: [u8; 64] = signature.try_into().unwrap();
        prop_assert_eq!(verify(&pair.pk, &message, &signature).is_ok(), theirs(&pair.pk, &message, &signature));
        prop_assert!(verify(&pair.pk, &message, &signature).is_err());
    }
}
