//! The console page, gzip-compressed at build time: the binary carries `page/index.html` as a
//! gzip file (RFC 1952) of about 17 KB instead of the 59 KB page, and the gateway sends it as
//! it is to every browser (they all accept `gzip`) and inflates it for a client that does not
//! (`src/gateway/page.rs`). The compressor is a build dependency: it adds nothing to the binary.

/// The page's source, relative to the crate.
pub const SOURCE: &str = "src/gateway/page/index.html";

/// The gzip header's length (no optional field) and the trailer's (CRC-32, length).
pub const HEADER: usize = 10;
pub const TRAILER: usize = 8;

/// `data` as a gzip file: a 10-byte header without a name, time or extra field (the gateway
/// skips exactly those 10 bytes), the deflate stream at miniz's best level, then the CRC-32
/// and the length of `data`.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    // ID1 ID2, CM = 8 (deflate), FLG = 0, MTIME = 0 (a reproducible build), XFL = 2 (best
    // compression), OS = 255 (unknown).
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255];
    out.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(data, 10));
    out.extend_from_slice(&crc32(data).to_le_bytes());
    let len = u32::try_from(data.len()).expect("the page is under 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out
}

/// The CRC-32 of gzip (IEEE 802.3, reflected), bit by bit: a build step over 59 KB.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
