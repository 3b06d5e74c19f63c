use super::*;
use alloc::vec::Vec;

#[test]
fn known_answers() {
    // The check value of CRC-32/ISO-HDLC, and two from zlib's crc32().
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
    assert_eq!(crc32(b"The quick brown fox jumps over the lazy dog"), 0x414F_A339);
    assert_eq!(!update(update(!0, b"1234"), b"56789"), 0xCBF4_3926, "pieces carry the state");
}

#[test]
fn matches_the_bitwise_definition() {
    // The reflected polynomial one bit at a time, the definition the nibble table is cut from.
    fn bitwise(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { 0xEDB8_8320 ^ (crc >> 1) } else { crc >> 1 };
            }
        }
        !crc
    }
    let bytes: Vec<u8> = (0..=255u8).chain((0..300u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)).collect();
    for end in [0, 1, 2, 15, 16, 255, 256, bytes.len()] {
        assert_eq!(crc32(&bytes[..end]), bitwise(&bytes[..end]), "{end} bytes");
    }
}
