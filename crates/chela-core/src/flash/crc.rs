//! CRC-32 (IEEE 802.3, the one zlib and PNG use), four bits at a time: the 16-entry table is
//! built at compile time (64 B of flash, no RAM) instead of a byte table's 1 KiB, which on the
//! ESP32-C3 is read-only data that pushes the image's code a 64 KiB page on (docs/BENCHMARKS.md).
//! Twice the table look-ups of a byte table: a 4 KiB sector is still a few tens of microseconds.

const TABLE: [u32; 16] = {
    let mut table = [0u32; 16];
    let mut i = 0;
    while i < 16 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 4 {
            c = if c & 1 == 1 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Carries a CRC-32 across several pieces: `crc32_update(crc32_update(!0, a), b)`, then `!`.
pub(crate) fn update(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        crc ^= u32::from(b);
        crc = TABLE[(crc & 0xF) as usize] ^ (crc >> 4);
        crc = TABLE[(crc & 0xF) as usize] ^ (crc >> 4);
    }
    crc
}

/// The CRC-32 of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    !update(!0, bytes)
}

#[cfg(test)]
mod tests;
