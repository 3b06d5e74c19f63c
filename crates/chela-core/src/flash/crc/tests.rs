use super::*;

#[test]
fn known_answers() {
    // The check value of CRC-32/ISO-HDLC, and two from zlib's crc32().
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
    assert_eq!(crc32(b"The quick brown fox jumps over the lazy dog"), 0x414F_A339);
    assert_eq!(!update(update(!0, b"1234"), b"56789"), 0xCBF4_3926, "pieces carry the state");
}
