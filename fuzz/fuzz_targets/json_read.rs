//! The pull JSON reader against serde_json: the same bytes are accepted or refused alike, with
//! the same values; skipping checks what reading checks (but a number's range); `raw` gives a value's exact text; a
//! refusal's offset is inside the input. The comparison is the property tests' own
//! (`chela_proto::json::read::oracle`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(why) = chela_proto::json::read::oracle::agree(data) {
        panic!("{why}");
    }
});
