//! xiaozhi's device protocol, fed outside bytes: the binary frames of versions 1, 2 and 3 (what
//! parses re-encodes to the same bytes, reserved fields aside), the JSON text messages (what
//! parses survives `to_json` and parses the same), and the OTA and activation bodies.
#![no_main]

use chela_proto::xiaozhi::frame::{self, Version};
use chela_proto::xiaozhi::message;
use chela_proto::xiaozhi::ota::{self, ActivateRequest, SystemInfo};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for v in [Version::V1, Version::V2, Version::V3] {
        if let Ok(f) = frame::parse(v, data) {
            let mut out = Vec::new();
            frame::encode(v, &f, &mut out).expect("a parsed frame encodes");
            assert_eq!(out.len(), data.len(), "a frame changed length through parse and encode");
            assert_eq!(&out[v.header_len()..], &data[v.header_len()..]);
            assert_eq!(frame::parse(v, &out).expect("an encoded frame parses"), f);
        }
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = message::parse(&text) {
        let again = message::parse(&m.to_json()).expect("an encoded message parses");
        assert_eq!(again, m, "a message changed through to_json and parse");
    }
    let _ = ota::parse_body::<SystemInfo>(data);
    let _ = ota::parse_body::<ActivateRequest>(data);
    let (a, b) = text.split_at(text.len() / 2);
    if text.is_char_boundary(text.len() / 2) {
        let _ = ota::compare_versions(a, b);
    }
});
