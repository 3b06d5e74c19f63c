//! An over-the-air update file from outside (`chela_chip::ota`) on arbitrary bytes, fed in
//! input-driven pieces to the streaming writer over RAM flash: no panic, no flash misuse (a
//! misaligned or out-of-range program is a bug), every refusal has a reason, nothing made up
//! passes the signature check, `otadata` is never touched by a refused update, and a header
//! that parses writes back to the same bytes.
#![no_main]

use chela_chip::ota::{self, CHIP_ESP32C3, HEADER_LEN, Header, OtaError, Update};
use chela_core::flash::RamFlash;
use chela_fuzz::chunks;
use libfuzzer_sys::fuzz_target;

const KEY: [u8; 32] = [
    0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a, 0x0e, 0xe1, 0x72,
    0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
];

fuzz_target!(|data: &[u8]| {
    let slot_len = 4096 * 4;
    if let Ok(h) = Header::parse(data, slot_len) {
        assert_eq!(&h.to_bytes()[..], &data[..HEADER_LEN], "a parsed header writes back the same");
        assert!(h.image_len <= slot_len);
    }
    let mut otadata = RamFlash::new(4096, 2);
    let mut slots = [RamFlash::new(4096, 4), RamFlash::new(4096, 4)];
    let blank = otadata.bytes().to_vec();
    let mut u = Update::begin(Some(&KEY), CHIP_ESP32C3, &otadata, &slots, 0).expect("a blank otadata may update");
    let mut failed = None;
    for piece in chunks(data) {
        if let Err(e) = u.write(&mut slots, piece) {
            failed = Some(e);
            break;
        }
    }
    let err = match failed {
        Some(e) => e,
        None => u.finish(&mut otadata, &mut slots).expect_err("made-up bytes never carry a good signature"),
    };
    assert!(!matches!(err, OtaError::Flash(_)), "the writer misused the flash: {err}");
    assert!(!err.to_string().is_empty());
    assert_eq!(otadata.bytes(), &blank[..], "a refused update touched otadata");
    assert_eq!(ota::selected_slot(&ota::entries(&otadata).unwrap()), 0);
});
