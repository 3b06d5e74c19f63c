//! CRC-8 as the AHT20 and the SGP30 compute it: polynomial 0x31 (x⁸ + x⁵ + x⁴ + 1),
//! initial value 0xFF, no reflection, no final XOR (both datasheets; check value 0x92 for
//! the bytes `BE EF`).

/// The CRC-8 of `data`.
pub fn crc8(data: &[u8]) -> u8 {
    let mut crc: u8 = 0xFF;
    for &byte in data {
        crc ^= byte;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 { (crc << 1) ^ 0x31 } else { crc << 1 };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::crc8;
    use proptest::prelude::*;

    /// The bitwise definition from the datasheet, as a polynomial division over the whole
    /// message with the initial value folded in: an independent formulation to check against.
    fn by_division(data: &[u8]) -> u8 {
        let mut reg: u16 = 0xFF;
        for &b in data {
            for i in (0..8).rev() {
                let bit = u16::from((b >> i) & 1);
                let top = (reg >> 7) & 1;
                reg = (reg << 1) & 0xFF;
                if top ^ bit == 1 {
                    reg ^= 0x31;
                }
            }
        }
        reg as u8
    }

    #[test]
    fn datasheet_check_value() {
        // Sensirion's SGP30 datasheet, table "Checksum Calculation": CRC(0xBEEF) = 0x92.
        assert_eq!(crc8(&[0xBE, 0xEF]), 0x92);
        assert_eq!(crc8(&[]), 0xFF);
    }

    proptest! {
        #[test]
        fn matches_the_polynomial_division(data in proptest::collection::vec(any::<u8>(), 0..16)) {
            prop_assert_eq!(crc8(&data), by_division(&data));
        }

        #[test]
        fn a_single_flipped_bit_is_always_caught(data in proptest::collection::vec(any::<u8>(), 1..8), bit in 0usize..64) {
            let bit = bit % (data.len() * 8);
            let mut bad = data.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            prop_assert_ne!(crc8(&data), crc8(&bad));
        }
    }
}
