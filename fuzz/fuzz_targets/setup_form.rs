//! The Wi-Fi onboarding portal (`chela_chip::portal`) on arbitrary bytes as an HTTP request
//! from whoever joined the access point or reached the LAN mount: no panic; the form parser's
//! answer re-encodes to the same fields; secrets stored before never appear in any page; on
//! the LAN mount a request without the gateway token neither shows the form nor saves; and
//! what a request saved is exactly what the next boot loads.
#![no_main]

use chela_chip::portal::{self, Access, head_len, parse_form, parse_head};
use chela_core::console::{ChipConfig, ChipDefaults, Field};
use chela_core::flash::{FlashStore, RamFlash};
use libfuzzer_sys::fuzz_target;

const SECRETS: [(Field, &str); 3] = [
    (Field::WifiPassword, "fuzz wifi pass phrase"),
    (Field::ApiKey, "sk-fuzzSECRETapikey77"),
    (Field::TgToken, "123456:AAfuzzSecretTelegramToken"),
];
const GATEWAY: &str = "fuzz-gateway-token-91";

fn encode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

fuzz_target!(|data: &[u8]| {
    if let Ok(fields) = parse_form(data) {
        let again: Vec<String> = fields.iter().map(|(n, v)| format!("{}={}", encode(n), encode(v))).collect();
        assert_eq!(parse_form(again.join("&").as_bytes()).ok(), Some(fields), "re-encoded fields parse the same");
    }
    let Ok(Some(n)) = head_len(data) else { return };
    let Ok(head) = parse_head(&data[..n]) else { return };
    let body = &data[n..(n + head.content_length).min(data.len())];
    for lan in [false, true] {
        let mut store = FlashStore::open(RamFlash::new(4096, 6)).unwrap();
        let (mut config, _) = ChipConfig::load(&store, ChipDefaults::default()).unwrap();
        for (field, value) in SECRETS {
            config.set(field, value).unwrap();
        }
        config.save(&mut store).unwrap();
        let access = if lan { Access::Token(GATEWAY) } else { Access::AccessPoint };
        let r = portal::handle(&head, body, access, &mut store, &mut config);
        for (_, secret) in SECRETS {
            let typed = data.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(typed || !r.body.contains(secret), "a stored secret is in the page");
        }
        assert!(!r.body.contains(GATEWAY), "the gateway token is in the page");
        let has_token = data.windows(GATEWAY.len()).any(|w| w == GATEWAY.as_bytes());
        if lan && !has_token {
            assert!(!r.restart && !r.body.contains("<form"), "the LAN mount answered without the token");
        }
        let (loaded, _) = ChipConfig::load(&store, ChipDefaults::default()).unwrap();
        for f in Field::ALL {
            assert_eq!(loaded.get(f), config.get(f), "what is in force is what the next boot loads");
        }
        assert!(r.restart == (r.status == 200 && head.method == "POST"));
    }
});
