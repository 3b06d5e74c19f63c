//! The chip's serial console (`chela_core::console`) on arbitrary bytes: no panic; the same
//! replies, effects and settings whether the bytes come whole or in pieces; no secret set
//! before them ever printed whole; what is in force is what a reboot loads from flash. Also
//! the oversize-update scanner on the same bytes.
#![no_main]

use chela_core::console::{
    ChipConfig, ChipDefaults, Console, Ctx, Effect, LineReader, Status, inbound, run_line, split_args,
};
use chela_core::flash::{FlashStore, RamFlash};
use chela_fuzz::chunks;
use libfuzzer_sys::fuzz_target;

const SECRETS: [&str; 3] = ["sk-fuzz-0123456789-SECRET", "12345:AAFuzzSecretTokenValue", "fuzz wifi pass"];

struct Run {
    printed: String,
    effects: Vec<Effect>,
    config: ChipConfig,
    flash: RamFlash,
}

fn run(pieces: &[&[u8]]) -> Run {
    let mut store = FlashStore::open(RamFlash::new(1024, 4)).expect("a blank flash opens");
    let mut config = ChipConfig::new(ChipDefaults { wifi_ssid: "Net", ..ChipDefaults::default() });
    let mut ctx = Ctx { store: &mut store, config: &mut config, status: Status::default() };
    for line in [
        format!("set_api_key {}", SECRETS[0]),
        format!("set_tg_token {}", SECRETS[1]),
        format!("wifi_set Net \"{}\"", SECRETS[2]),
    ] {
        assert!(run_line(&line, &mut ctx).text.ends_with("(saved)\n"));
    }
    let mut console = Console::new();
    let mut printed = String::new();
    let mut effects = Vec::new();
    for piece in pieces {
        console.handle_bytes(piece, &mut ctx, &mut |r| {
            assert!(r.text.is_empty() || r.text.ends_with('\n'), "a reply ends its line: {:?}", r.text);
            printed.push_str(&r.text);
            effects.extend(r.effects);
        });
    }
    Run { printed, effects, config, flash: store.into_flash() }
}

/// Whether the person typed `secret` into a command line, as the console reads it: its line
/// reader (line editing included) and its word splitting (quotes and escapes can build the
/// secret from other bytes: `S''ecret`), with a line's words joined as `memory_write` joins them.
fn typed(data: &[u8], secret: &str) -> bool {
    let mut found = false;
    LineReader::new().feed(data, &mut |line| {
        if let Ok(words) = line.map_err(drop).and_then(|l| split_args(l).map_err(drop)) {
            found |= words.join(" ").contains(secret);
        }
    });
    found
}

fuzz_target!(|data: &[u8]| {
    let whole = run(&[data]);
    for secret in SECRETS {
        // Typed in as the value of a setting that is not secret (`set_model <the key>`), it is
        // the person's own text and may be shown; a secret the input never holds must not be.
        if typed(data, secret) {
            continue;
        }
        assert!(!whole.printed.contains(secret), "{secret} printed: {}", whole.printed);
    }
    let split = run(&chunks(data));
    assert_eq!(whole.printed, split.printed, "pieces change the replies");
    assert_eq!(whole.effects, split.effects);
    assert_eq!(whole.config, split.config);
    let store = FlashStore::open(whole.flash).expect("the flash opens again");
    let (loaded, _) = ChipConfig::load(&store, ChipDefaults { wifi_ssid: "Net", ..ChipDefaults::default() })
        .expect("the settings read back");
    assert_eq!(loaded, whole.config, "what is in force is what a reboot loads");
    if let Some(u) = inbound::overflowed_update(data) {
        let text = String::from_utf8_lossy(data);
        assert!(text.contains(&u.update_id.to_string()), "{} is not in the input", u.update_id);
    }
});
