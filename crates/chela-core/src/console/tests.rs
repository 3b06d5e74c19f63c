//! The console against its promises: MimiClaw's commands over a flash store, settings that
//! survive a reboot and a power cut at any unit of work, secrets never shown whole, garbage
//! and endless input refused without a panic, a full or damaged partition reported.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::flash::{Limits, RamFlash};

type Store = FlashStore<RamFlash>;

const DEFAULTS: ChipDefaults = ChipDefaults {
    wifi_ssid: "Build Net",
    wifi_password: "build-wifi-pass",
    tg_token: "",
    tg_allow: "",
    provider: "anthropic",
    api_key: "",
    model: "",
    base_url: "",
    tavily_key: "",
    brave_key: "",
    proxy: "",
    gateway_token: "",
};

const API_KEY: &str = "sk-ant-api03-Zq9xSECRETSECRETSECRET-77";
const TG_TOKEN: &str = "8123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
const WIFI_PASS: &str = "correct horse battery";

/// A chip: its flash store, its settings, the console, and everything printed so far.
struct Chip {
    store: Store,
    config: ChipConfig,
    console: Console,
    status: Status,
    printed: String,
    effects: Vec<Effect>,
}

impl Chip {
    fn boot(flash: RamFlash) -> Chip {
        let store = FlashStore::open(flash).unwrap();
        let (config, _) = ChipConfig::load(&store, DEFAULTS).unwrap();
        Chip {
            store,
            config,
            console: Console::new(),
            status: Status::default(),
            printed: String::new(),
            effects: Vec::new(),
        }
    }

    fn reboot(self) -> Chip {
        Chip::boot(self.store.into_flash())
    }

    /// Types `bytes` and returns what this printed.
    fn type_bytes(&mut self, bytes: &[u8]) -> String {
        let mut ctx = Ctx { store: &mut self.store, config: &mut self.config, status: self.status };
        let mut out = String::new();
        let mut effects = Vec::new();
        self.console.handle_bytes(bytes, &mut ctx, &mut |r| {
            out.push_str(&r.text);
            effects.extend(r.effects);
        });
        self.printed.push_str(&out);
        self.effects.extend(effects);
        out
    }

    fn run(&mut self, line: &str) -> String {
        self.type_bytes(format!("{line}\r\n").as_bytes())
    }
}

fn blank() -> RamFlash {
    RamFlash::new(4096, 6)
}

#[test]
fn mimiclaw_commands_set_settings_that_survive_a_reboot_masked() {
    let mut chip = Chip::boot(blank());
    let out = chip.run(&format!("wifi_set \"My Home Net\" \"{WIFI_PASS}\""));
    assert_eq!(out, "wifi_ssid = My Home Net (saved)\nwifi_password = corr****ry (saved)\n");
    assert_eq!(chip.effects, [Effect::ReconnectWifi]);
    assert_eq!(chip.run(&format!("set_api_key {API_KEY}")), "api_key = sk-a****77 (saved)\n");
    assert_eq!(chip.run(&format!("set_tg_token {TG_TOKEN}")), "tg_token = 8123****aw (saved)\n");
    assert_eq!(chip.run("set_tg_allow 5551234, -100777"), "tg_allow = 5551234,-100777 (saved)\n");
    assert_eq!(chip.run("set_model_provider openai"), "provider = openai (saved)\n");
    assert_eq!(chip.run("set_model gpt-4.1"), "model = gpt-4.1 (saved)\n");
    assert_eq!(chip.effects.len(), 6);
    assert!(chip.effects[1..].iter().all(|e| *e == Effect::ConfigChanged));
    let mut chip = chip.reboot();
    assert_eq!(chip.config.get(Field::WifiSsid), "My Home Net");
    assert_eq!(chip.config.get(Field::WifiPassword), WIFI_PASS);
    assert_eq!((chip.config.provider(), chip.config.model()), (crate::exchange::Kind::OpenAi, "gpt-4.1"));
    assert!(chip.config.telegram_allows(-100_777) && !chip.config.telegram_allows(1));
    let shown = chip.run("config_show");
    assert_eq!(
        shown,
        "wifi_ssid      flash  \"My Home Net\"\n\
         wifi_password  flash  corr****ry\n\
         tg_token       flash  8123****aw\n\
         tg_allow       flash  5551234,-100777\n\
         provider       flash  openai\n\
         api_key        flash  sk-a****77\n\
         model          flash  gpt-4.1\n\
         base_url       unset  (openai default: https://api.openai.com/v1)\n\
         tavily_key     unset  (not set)\n\
         brave_key      unset  (not set)\n\
         proxy          unset  (not set)\n\
         gateway_token  unset  (not set: the gateway admits nobody)\n\
         feishu_app_id  unset  (not set)\n\
         feishu_secret  unset  (not set)\n\
         feishu_allow   unset  (nobody: unknown Feishu users get no answer)\n\
         channel        unset  (telegram)\n"
    );
    // config_reset goes back to the build's values, in flash too.
    assert_eq!(chip.run("config_reset"), "settings reset to the build's values\n");
    let chip = chip.reboot();
    assert_eq!(chip.config, ChipConfig::new(DEFAULTS));
}

#[test]
fn bad_values_and_bad_usage_change_nothing_and_say_why() {
    let mut chip = Chip::boot(blank());
    chip.run("wifi_set Attic longenough");
    let before = chip.config.clone();
    assert_eq!(
        chip.run("wifi_set Attic short"),
        "error: wifi_password must be 8 to 63 printable ASCII characters, 64 hex digits, or empty for an open network\n"
    );
    assert_eq!(chip.config, before, "a refused password leaves the SSID alone too");
    assert_eq!(chip.run("set_model_provider gemini"), "error: provider must be anthropic or openai\n");
    assert_eq!(chip.run("wifi_set"), "error: usage: wifi_set SSID [PASSWORD]\n");
    assert_eq!(chip.run("heap_info now"), "error: usage: heap_info\n");
    assert_eq!(chip.run("wifi_sett x"), "error: unknown command wifi_sett; did you mean wifi_set?\n");
    assert_eq!(chip.run(API_KEY), "error: unknown command; type help for the list\n", "a pasted key is not echoed");
    assert_eq!(chip.run("set_api_key \"unclosed"), "error: a quote is not closed\n");
    assert_eq!(chip.run("set_api_key two words"), "error: usage: set_api_key KEY\n");
    let chip = chip.reboot();
    assert_eq!(chip.config, before);
}

#[test]
fn garbage_and_over_long_lines_get_a_short_error_and_the_console_goes_on() {
    let mut chip = Chip::boot(blank());
    let long = alloc::vec![b'x'; 100_000];
    assert_eq!(chip.type_bytes(&long), "", "nothing until the line ends, and the buffer stays bounded");
    assert_eq!(chip.type_bytes(b"\n"), format!("error: line too long (at most {MAX_LINE} bytes); nothing was done\n"));
    assert_eq!(chip.type_bytes(b"\x1b[A\xff\n"), "error: control characters in the line; nothing was done\n");
    assert_eq!(chip.type_bytes(b"\xc3\x28\n"), "error: the line is not UTF-8 text; nothing was done\n");
    assert!(chip.type_bytes(b"help\n").starts_with("commands:\n"));
    let help = chip.run("help");
    for cmd in [
        "wifi_set",
        "set_tg_token",
        "set_api_key",
        "set_model_provider",
        "set_model",
        "config_show",
        "config_reset",
        "wifi_status",
        "memory_read",
        "memory_write",
        "session_list",
        "session_clear",
        "heap_info",
        "restart",
        "set_tg_allow",
    ] {
        assert!(help.contains(&format!("\n  {cmd} ")), "{cmd} is in help");
    }
}

#[test]
fn status_memory_sessions_and_restart() {
    let mut chip = Chip::boot(blank());
    assert_eq!(chip.run("wifi_status"), "wifi: off; \"Build Net\"\n");
    chip.status.wifi = Wifi::Connected { ip: [192, 168, 1, 23], rssi: -61 };
    assert_eq!(chip.run("wifi_status"), "wifi: connected to \"Build Net\", ip 192.168.1.23, -61 dBm\n");
    assert_eq!(chip.run("memory_read"), "MEMORY.md is empty\n");
    assert_eq!(chip.run(r##"memory_write "# Memory\n- Ada likes tea""##), "MEMORY.md written (25 bytes)\n");
    assert_eq!(chip.run("memory_read"), "# Memory\n- Ada likes tea\n");
    assert_eq!(chip.effects.last(), Some(&Effect::MemoryChanged));
    assert_eq!(chip.run("session_list"), "no sessions\n", "memory and settings are not sessions");
    chip.store.append("tg_5551234.jsonl", "{\"role\":\"user\"}\n{\"role\":\"assistant\"}\n").unwrap();
    chip.store.append("tg_42.jsonl", "{\"role\":\"user\"}\n").unwrap();
    assert_eq!(
        chip.run("session_list"),
        "tg_5551234.jsonl  2 lines, 35 bytes\ntg_42.jsonl  1 line, 15 bytes\n2 sessions\n"
    );
    assert_eq!(chip.run("session_clear 5551234"), "session tg_5551234.jsonl cleared\n");
    assert_eq!(chip.effects.last(), Some(&Effect::SessionCleared("tg_5551234.jsonl".into())));
    assert_eq!(chip.run("session_clear 777"), "error: no such session; session_list shows them\n");
    assert_eq!(chip.run("session_clear tg_42"), "session tg_42.jsonl cleared\n");
    let mut chip = chip.reboot();
    assert_eq!(chip.run("session_list"), "no sessions\n", "clears are durable");
    assert_eq!(chip.run("memory_read"), "# Memory\n- Ada likes tea\n");
    chip.status.heap = Heap { total: 120_000, free: 80_000, min_free: 51_000 };
    chip.status.uptime_ms = 93_500;
    let info = chip.run("heap_info");
    assert!(info.starts_with("heap: 80000 B free of 120000 B, least free since boot 51000 B\nflash: "), "{info}");
    assert!(info.ends_with("uptime: 93 s\n"), "{info}");
    assert!(!info.contains("flash full"), "{info}");
    // restart: the counter goes back to 0 first, so three restarts in a row are no crash loop.
    for _ in 0..5 {
        BootGuard::boot(&mut chip.store, BootPolicy::default()).unwrap();
        assert_eq!(chip.run("restart"), "restarting\n");
        assert_eq!(chip.effects.last(), Some(&Effect::Restart));
        chip = chip.reboot();
    }
    assert_eq!(BootGuard::boot(&mut chip.store, BootPolicy::default()).unwrap().mode(), BootMode::Normal);
}

#[test]
fn a_full_partition_drops_the_oldest_lines_and_says_so() {
    let mut chip = Chip::boot(RamFlash::new(1024, 4));
    chip.run(&format!("set_api_key {API_KEY}"));
    chip.run("memory_write \"the cat is called Mo\"");
    for i in 0..120 {
        let line = format!("{{\"n\":{i},\"text\":\"{}\"}}\n", "w".repeat(60));
        chip.store.append(if i % 2 == 0 { "tg_1.jsonl" } else { "tg_2.jsonl" }, &line).unwrap();
    }
    let mut chip = chip.reboot();
    let list = chip.run("session_list");
    assert!(list.contains("oldest lines dropped (flash full)"), "{list}");
    assert!(list.contains("oldest lines were dropped to make room in flash"), "{list}");
    let dropped: u32 = chip.store.keys().iter().map(|k| k.dropped).sum();
    assert!(dropped > 50, "{dropped}");
    let info = chip.run("heap_info");
    assert!(info.contains(&format!("flash full: the oldest session lines go first; {dropped} dropped")), "{info}");
    // Settings and memory are kept records: the wrap took none of them.
    assert_eq!(chip.config.get(Field::ApiKey), API_KEY);
    assert_eq!(chip.run("memory_read"), "the cat is called Mo\n");
}

#[test]
fn a_damaged_settings_record_is_skipped_at_boot_and_reported() {
    let mut chip = Chip::boot(blank());
    chip.run("set_model first-model");
    chip.run("set_model second-model");
    let mut flash = chip.store.into_flash();
    let at = flash.bytes().windows(12).rposition(|w| w == b"second-model").unwrap();
    flash.rot(at as u32, 1);
    let mut chip = Chip::boot(flash);
    // The damaged newest record is skipped; the one before it is still on flash and counts.
    assert_eq!(chip.config.get(Field::Model), "first-model");
    assert!(chip.run("heap_info").contains("flash damage: 1 damaged records skipped"));
    // Both damaged: the build's values.
    chip.run("set_model third-model");
    let mut flash = chip.store.into_flash();
    for name in [&b"first-model"[..], b"third-model"] {
        let at = flash.bytes().windows(name.len()).rposition(|w| w == name).unwrap();
        flash.rot(at as u32, 3);
    }
    let chip = Chip::boot(flash);
    assert_eq!(chip.config.get(Field::Model), "");
    assert_eq!(chip.config.model(), "claude-sonnet-4-5");
}

/// Cuts the power at every unit of work of one `set` (and of the reclaims it may cause, on a
/// nearly full partition), reboots, and checks the settings are the old ones or the new ones.
/// Returns the units of work cut at and whether the set reclaimed a sector.
fn cut_during_set(pre_lines: usize, line: &str, field: Field, new: &str) -> (usize, bool) {
    let mut chip = Chip::boot(RamFlash::new(256, 4));
    chip.run("set_model old-model");
    for i in 0..pre_lines {
        chip.store.append_line("tg_1.jsonl", format!("{i:03}{}", "p".repeat(40)).as_bytes()).unwrap();
    }
    let old = chip.config.clone();
    let base = chip.store.into_flash();
    let mut probe = Chip::boot(base.clone());
    let w0 = probe.store.flash().work();
    let erases0: u32 = probe.store.flash().erase_counts().iter().sum();
    assert!(probe.run(line).ends_with("(saved)\n"));
    let units = probe.store.flash().work() - w0;
    let reclaimed = probe.store.flash().erase_counts().iter().sum::<u32>() > erases0;
    let mut want = old.clone();
    want.set(field, new).unwrap();
    for cut in 0..units {
        let mut f = base.clone();
        f.cut_after(cut);
        let mut t = Chip::boot(f);
        let out = t.run(line);
        assert!(out.starts_with("error: the setting was not saved: flash error: the power was cut"), "{out}");
        let mut f = t.store.into_flash();
        f.power_on();
        let t = Chip::boot(f);
        assert!(t.config == old || t.config == want, "cut after {cut} of {units}: {:?}", t.config);
    }
    (usize::try_from(units).unwrap(), reclaimed)
}

#[test]
fn a_power_cut_while_saving_leaves_the_old_settings_or_the_new() {
    assert!(cut_during_set(0, "set_model new-model", Field::Model, "new-model").0 > 50);
    // On a partition that must reclaim to make room, the cut can hit the reclaim too.
    let reclaimed: Vec<usize> =
        (0..12).filter(|&pre| cut_during_set(pre, "set_tg_allow 12,34", Field::TgAllow, "12,34").1).collect();
    assert!(reclaimed.len() >= 2, "the workloads must make the save reclaim: {reclaimed:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic the console, never grow it past its bound, and never
    /// print a secret set before them.
    #[test]
    fn arbitrary_bytes_never_panic_or_show_a_secret(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8),
        words in proptest::collection::vec(
            prop_oneof![
                Just("config_show"), Just("heap_info"), Just("session_list"), Just("memory_read"),
                Just("wifi_status"), Just("help"), Just("\""), Just("'"), Just("\\"), Just(" "),
                Just("set_api_key"), Just("wifi_set"), Just("\n"), Just("set_tg_allow"), Just("session_clear"),
                Just("memory_write"), Just("config_reset"), Just("\x08"), Just("1"),
            ],
            0..40,
        ),
    ) {
        let with_secrets = || {
            let mut chip = Chip::boot(blank());
            chip.run(&format!("set_api_key {API_KEY}"));
            chip.run(&format!("set_tg_token {TG_TOKEN}"));
            chip.run(&format!("wifi_set Net \"{WIFI_PASS}\""));
            chip.printed.clear();
            chip.effects.clear();
            chip
        };
        let mut chip = with_secrets();
        for c in &chunks {
            chip.type_bytes(c);
            prop_assert!(chip.console.reader_len() <= MAX_LINE);
        }
        chip.type_bytes(words.concat().as_bytes());
        chip.type_bytes(b"\nconfig_show\n");
        for secret in [API_KEY, TG_TOKEN, WIFI_PASS] {
            prop_assert!(!chip.printed.contains(secret), "{} shown in {}", secret, chip.printed);
        }
        // The same bytes in one piece: the same replies, effects and settings.
        let mut whole = with_secrets();
        whole.type_bytes(&[chunks.concat(), words.concat().into_bytes(), b"\nconfig_show\n".to_vec()].concat());
        prop_assert_eq!(&whole.printed, &chip.printed);
        prop_assert_eq!(&whole.effects, &chip.effects);
        prop_assert_eq!(&whole.config, &chip.config);
        // What is in force is what a reboot loads.
        let config = chip.config.clone();
        prop_assert_eq!(chip.reboot().config, config);
    }
}

impl Console {
    fn reader_len(&self) -> usize {
        self.reader.pending()
    }
}

#[test]
fn the_store_keeps_settings_apart_from_sessions_with_few_keys() {
    // A store with room for two keys: settings and the boot counter take theirs; a third key is
    // refused with the store's own error, and the console says so.
    let flash = RamFlash::new(1024, 4);
    let mut store = FlashStore::open_with(flash, Limits { max_keys: 2, ..Limits::default() }).unwrap();
    BootGuard::boot(&mut store, BootPolicy::default()).unwrap();
    let mut config = ChipConfig::new(DEFAULTS);
    let mut ctx = Ctx { store: &mut store, config: &mut config, status: Status::default() };
    assert_eq!(run_line("set_model m", &mut ctx).text, "model = m (saved)\n");
    let r = run_line("memory_write x", &mut ctx);
    assert_eq!(r.text, "error: MEMORY.md was not written: the flash store already holds 2 keys\n");
}

#[test]
fn search_keys_proxy_gateway_token_and_the_heartbeat_file() {
    let mut chip = Chip::boot(RamFlash::new(4096, 8));
    // No RNG: no token, rather than a guessable one.
    assert!(chip.run("gateway_token").starts_with("error: this board gave no random bytes"), "{}", chip.printed);
    assert_eq!(chip.config.get(Field::GatewayToken), "");
    chip.status.random = [0x5a; 16];
    let token = "5a".repeat(16);
    let out = chip.run("gateway_token");
    assert!(out.starts_with(&format!("gateway_token = {token}\n(shown only now")), "{out}");
    assert_eq!(chip.config.get(Field::GatewayToken), token);
    let shown = chip.run("config_show");
    assert!(shown.contains("gateway_token") && !shown.contains(&token), "{shown}");
    assert!(Field::GatewayToken.check("short").is_err(), "a hand-set token is at least 128 bits of hex");

    assert_eq!(chip.run("set_tavily_key tvly-SECRETSECRET-42"), "tavily_key = tvly****42 (saved)\n");
    assert_eq!(chip.run("set_search_key BSA-SECRETSECRET-77"), "brave_key = BSA-****77 (saved)\n");
    let out = chip.run("set_proxy http://me:hunter22@proxy.lan:3128");
    assert!(out.starts_with("proxy = http://me:****@proxy.lan:3128"), "{out}");
    for bad in ["socks5://proxy.lan:1080", "http://", "https://proxy.lan", "http://a b:1"] {
        assert!(chip.run(&format!("set_proxy \"{bad}\"")).starts_with("error: proxy must be"), "{bad}");
    }
    let shown = chip.run("config_show");
    for secret in ["SECRETSECRET", "hunter22", &token] {
        assert!(!shown.contains(secret), "{shown}");
    }

    assert_eq!(chip.run("heartbeat_read"), "HEARTBEAT.md is empty\n");
    assert!(chip.run("heartbeat_write \"- [ ] call Ana\\n- [x] done\"").starts_with("HEARTBEAT.md written"));
    assert!(!chip.effects.contains(&Effect::MemoryChanged), "the heartbeat file is not the memory");
    assert_eq!(chip.run("heartbeat_read"), "- [ ] call Ana\n- [x] done\n");
    assert_eq!(chip.run("session_list"), "no sessions\n", "HEARTBEAT.md is not a chat session");

    let mut chip = chip.reboot();
    assert_eq!(chip.config.get(Field::GatewayToken), token);
    assert_eq!(chip.config.get(Field::TavilyKey), "tvly-SECRETSECRET-42");
    assert_eq!(chip.config.get(Field::Proxy), "http://me:hunter22@proxy.lan:3128");
    assert_eq!(chip.run("heartbeat_read"), "- [ ] call Ana\n- [x] done\n");
    assert!(chip.run("gateway_token off").starts_with("gateway_token = (empty) (saved)"));
}

#[test]
fn ota_asks_for_an_https_update_without_echoing_the_url() {
    let mut chip = Chip::boot(blank());
    let url = "https://updates.example.org/chela/c3.ota?token=s3cret";
    let out = chip.run(&format!("ota {url}"));
    assert_eq!(chip.effects, [Effect::Update(url.into())]);
    assert!(out.contains("updates.example.org") && !out.contains("s3cret"), "{out}");
    let long = format!("ota https://h/{}", "a".repeat(600));
    for bad in ["ota http://updates.example.org/c3.ota", "ota https://", "ota", "ota a b", &long] {
        let out = chip.run(bad);
        assert_eq!(chip.effects.len(), 1, "{bad}: {:?}", chip.effects);
        assert!(out.contains("usage"), "{bad}: {out}");
    }
}

#[test]
fn an_image_without_the_connected_parts_says_so_for_each_of_their_commands() {
    let mut chip = Chip::boot(blank());
    chip.status.random = [0x5a; 16];
    chip.status.left_out = Some("the C3 build has no room for it yet; the ESP32-C6 image has it");
    let said = [
        ("ota https://updates.example.org/c3.ota", "over-the-air updates"),
        ("ota", "over-the-air updates"),
        ("gateway_token", "the WebSocket gateway"),
        ("gateway_token off", "the WebSocket gateway"),
        ("set_tavily_key tvly-123", "web_search"),
        ("set_search_key brave-123", "web_search"),
        ("set_proxy http://proxy.lan:3128", "the HTTP proxy"),
        ("heartbeat_write - [ ] call Ana", "the heartbeat"),
        ("heartbeat_read", "the heartbeat"),
    ];
    for (line, what) in said {
        let out = chip.run(line);
        assert_eq!(
            out,
            format!("this image leaves out {what}: the C3 build has no room for it yet; the ESP32-C6 image has it\n"),
            "{line}"
        );
    }
    assert!(chip.effects.is_empty(), "{:?}", chip.effects);
    for field in [Field::TavilyKey, Field::BraveKey, Field::Proxy, Field::GatewayToken] {
        assert_eq!(chip.config.get(field), "", "{field:?} was saved");
    }
    assert_eq!(
        chip.run("heartbeat_read"),
        format!("this image leaves out the heartbeat: {}\n", chip.status.left_out.unwrap())
    );
    let help = chip.run("help");
    for (line, _) in said {
        let name = line.split(' ').next().unwrap();
        assert!(!help.contains(&format!("\n  {name} ")), "help offers {name}: {help}");
    }
    let why = format!("({})", chip.status.left_out.unwrap());
    assert!(help.lines().any(|l| l.starts_with("not in this image: ") && l.ends_with(&why)), "{help}");
    // The rest of the console is untouched.
    assert!(chip.run("set_model claude-x").starts_with("model = claude-x (saved)"), "{}", chip.printed);
    chip.status.left_out = None;
    assert!(chip.run("set_proxy http://proxy.lan:3128").contains("(saved)"), "{}", chip.printed);
}

#[test]
fn feishu_settings_and_the_channel_choice_are_checked_saved_and_masked() {
    let mut chip = Chip::boot(blank());
    // An image that does not run Feishu says so and saves nothing.
    for line in ["set_feishu_app cli_a5f0 Xk9vQ2mPz7LrT4bW", "set_feishu_allow ou_1", "channel feishu"] {
        let out = chip.run(line);
        assert_eq!(
            out,
            "this image leaves out Feishu: it runs only in an ESP32 image built with the feishu feature: both \
             chips' default (firmware/build.sh esp32c3 or esp32c6, without CHELA_FIRMWARE_FEATURES)\n"
        );
    }
    assert!(chip.effects.is_empty(), "{:?}", chip.effects);
    assert_eq!(chip.config.get(Field::FeishuAppId), "");
    chip.status.feishu = true;
    let secret = "Xk9vQ2mPz7LrT4bW";
    let out = chip.run(&format!("set_feishu_app cli_a5f0 {secret}"));
    assert_eq!(out, "feishu_app_id = cli_a5f0 (saved)\nfeishu_secret = Xk9v****bW (saved)\n");
    assert!(!out.contains(secret));
    assert_eq!(chip.run("set_feishu_allow ou_abc, ou_def"), "feishu_allow = ou_abc,ou_def (saved)\n");
    assert_eq!(chip.run("channel feishu"), "channel = feishu (saved)\n");
    // Refused values change nothing and never quote the secret.
    assert!(chip.run("set_feishu_allow 12345").starts_with("error: feishu_allow must be"));
    assert!(chip.run("channel discord").starts_with("error: usage: channel telegram|feishu"));
    let bad = chip.run("set_feishu_app cli_a5f0 bad/secret!");
    assert!(bad.starts_with("error: feishu_secret must be") && !bad.contains("bad/secret"), "{bad}");
    let mut chip = chip.reboot();
    chip.status.feishu = true;
    assert_eq!(chip.config.get(Field::FeishuSecret), secret);
    assert_eq!(chip.config.get(Field::FeishuAllow), "ou_abc,ou_def");
    assert_eq!(chip.config.get(Field::Channel), "feishu");
    let shown = chip.run("config_show");
    assert!(shown.contains("feishu_secret  flash  Xk9v****bW") && !shown.contains(secret), "{shown}");
    assert_eq!(chip.run("channel telegram"), "channel = telegram (saved)\n");
}
