//! The serial console as the firmware drives it, on the host: bytes in, masked replies out,
//! settings in flash across a reboot, and the settings in force reaching the endpoint and the
//! Telegram allowlist.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use chela_chip::turn::Chip;
use chela_chip::{Board, boot, console};
use chela_core::console::{ChipDefaults, Console, Effect, Status};
use chela_core::exchange::Kind;
use chela_core::flash::RamFlash;

const BUILD: ChipDefaults = ChipDefaults {
    wifi_ssid: "Build Net",
    wifi_password: "",
    tg_token: "",
    tg_allow: "",
    provider: "",
    api_key: "",
    model: "",
    base_url: "",
    tavily_key: "",
    brave_key: "",
    proxy: "",
    gateway_token: "",
};
const KEY: &str = "sk-ant-api03-console-test-SECRET-99";
const TOKEN: &str = "8123456789:AAHconsoleTestSecretToken99";

#[derive(Clone, Default)]
struct Serial {
    out: Rc<RefCell<String>>,
}

impl Board for Serial {
    fn now_ms(&self) -> u64 {
        0
    }
    fn unix(&self) -> Option<u64> {
        None
    }
    fn print(&self, args: fmt::Arguments<'_>) {
        self.out.borrow_mut().push_str(&args.to_string());
    }
}

fn take(serial: &Serial) -> String {
    std::mem::take(&mut *serial.out.borrow_mut())
}

#[test]
fn settings_typed_on_the_console_reach_the_endpoint_and_survive_a_reboot() {
    let serial = Serial::default();
    let mut chip: Chip<RamFlash, Serial> = boot::power_on(RamFlash::new(4096, 8), serial.clone(), 1, BUILD).unwrap();
    let e = console::channels_ready(&chip.config).unwrap_err();
    assert_eq!(e, "not set: tg_token, tg_allow, api_key (set them on the serial console; type help)");
    assert!(console::endpoint(&chip.config).unwrap_err().contains("set_api_key"));
    assert_eq!(console::access(&chip.config).unwrap(), Default::default(), "nobody by default");
    take(&serial);

    let mut con = Console::new();
    let typed = format!(
        "wifi_set \"Chela Workshop\" solder-and-flux-42\r\nset_tg_token {TOKEN}\nset_tg_allow 42,7\nset_api_key {KEY}\nset_model_provider openai\nset_model gpt-4.1-mini\n"
    );
    // Fed in small pieces, as a UART delivers them.
    let mut effects = Vec::new();
    for piece in typed.as_bytes().chunks(7) {
        effects.extend(console::feed(&mut chip, &mut con, piece, Status::default()));
    }
    assert_eq!(effects[0], Effect::ReconnectWifi);
    assert!(effects[1..].iter().all(|e| *e == Effect::ConfigChanged), "{effects:?}");
    assert_eq!(effects.len(), 6);
    console::feed(&mut chip, &mut con, b"config_show\n", Status::default());
    let shown = take(&serial);
    for secret in [KEY, TOKEN, "solder-and-flux-42"] {
        assert!(!shown.contains(secret), "a secret shown whole: {shown}");
    }
    assert!(shown.contains("\"Chela Workshop\"") && shown.contains("gpt-4.1-mini"), "{shown}");

    console::channels_ready(&chip.config).unwrap();
    let ep = console::endpoint(&chip.config).unwrap();
    assert_eq!((ep.kind, ep.base_url.as_str(), ep.api_key.as_str()), (Kind::OpenAi, "https://api.openai.com/v1", KEY));
    let access = console::access(&chip.config).unwrap();
    assert!(access.admits(42) && access.admits(7) && !access.admits(1));
    assert_eq!(access.owner, Some(42));

    let (flash, board, seed) = boot::power_off(chip);
    let chip = boot::power_on(flash, board, seed, BUILD).unwrap();
    assert_eq!(console::endpoint(&chip.config).unwrap().model, "gpt-4.1-mini", "kept in flash");
    let mut chip = chip;
    let effects = console::feed(&mut chip, &mut con, b"config_reset\n", Status::default());
    assert_eq!(effects, [Effect::ReconnectWifi, Effect::ConfigChanged]);
    assert!(console::endpoint(&chip.config).is_err(), "back to the build's: no key");
}

#[test]
fn garbage_and_overlong_lines_get_short_errors_and_change_nothing() {
    let serial = Serial::default();
    let mut chip: Chip<RamFlash, Serial> = boot::power_on(RamFlash::new(4096, 8), serial.clone(), 1, BUILD).unwrap();
    take(&serial);
    let before = chip.config.clone();
    let mut con = Console::new();
    let mut long = b"set_model ".repeat(1000);
    long.push(b'\n');
    assert!(console::feed(&mut chip, &mut con, &long, Status::default()).is_empty());
    let out = take(&serial);
    assert!(out.starts_with("error: ") && out.len() < 300, "{out}");
    let mut junk: Vec<u8> = (0..=255u8).cycle().take(10_000).filter(|b| *b != b'\n' && *b != b'\r').collect();
    junk.push(b'\n');
    let effects = console::feed(&mut chip, &mut con, &junk, Status::default());
    assert!(effects.is_empty());
    let out = take(&serial);
    assert!(out.starts_with("error: ") && out.len() < 300, "{out}");
    console::feed(&mut chip, &mut con, b"set_api_key\nset_tg_allow abc\nfrobnicate\n", Status::default());
    let out = take(&serial);
    assert_eq!(out.matches("error: ").count(), 3, "{out}");
    assert_eq!(chip.config, before);
    // The console still works after all that.
    console::feed(&mut chip, &mut con, b"set_model claude-haiku-4-5\n", Status::default());
    assert_eq!(console::endpoint(&chip.config).map(|e| e.model).unwrap_err(), console::endpoint(&before).unwrap_err());
    assert_eq!(chip.config.model(), "claude-haiku-4-5");
}

#[test]
fn a_device_with_only_the_gateway_set_is_ready_and_telegram_stays_off() {
    let serial = Serial::default();
    let mut chip: Chip<RamFlash, Serial> = boot::power_on(RamFlash::new(4096, 8), serial.clone(), 1, BUILD).unwrap();
    let mut con = Console::new();
    let status = Status { random: [7; 16], ..Status::default() };
    console::feed(&mut chip, &mut con, format!("set_api_key {KEY}\ngateway_token\n").as_bytes(), status);
    // An image without the gateway still waits for Telegram, and says what is missing.
    let e = console::channels(&chip.config, false).unwrap_err();
    assert_eq!(e, "not set: tg_token, tg_allow (set them on the serial console; type help)");
    let ready = console::channels(&chip.config, true).unwrap();
    assert_eq!(ready, console::Channels { telegram: false, gateway: true, feishu: false });

    console::feed(&mut chip, &mut con, b"gateway_token off\n", status);
    let e = console::channels(&chip.config, true).unwrap_err();
    assert_eq!(
        e,
        "not set: tg_token, tg_allow (set them on the serial console, or gateway_token for the gateway alone; type help)"
    );
    console::feed(&mut chip, &mut con, format!("set_tg_token {TOKEN}\nset_tg_allow 42\n").as_bytes(), status);
    assert_eq!(
        console::channels(&chip.config, true).unwrap(),
        console::Channels { telegram: true, gateway: false, feishu: false }
    );
    console::channels_ready(&chip.config).unwrap();
}

#[test]
fn channel_feishu_serves_feishu_instead_of_telegram_in_an_image_with_it_only() {
    let serial = Serial::default();
    let mut chip: Chip<RamFlash, Serial> = boot::power_on(RamFlash::new(4096, 8), serial.clone(), 1, BUILD).unwrap();
    let mut con = Console::new();
    let setup = format!("set_api_key {KEY}\nset_tg_token {TOKEN}\nset_tg_allow 42\n");
    console::feed(&mut chip, &mut con, setup.as_bytes(), Status::default());
    let telegram = console::Channels { telegram: true, gateway: false, feishu: false };
    assert_eq!(console::channels(&chip.config, false).unwrap(), telegram);
    // An image without Feishu (the emulator, an ESP32 image without the feishu feature) keeps
    // Telegram: the choice is refused, nothing saved.
    take(&serial);
    console::feed(&mut chip, &mut con, b"channel feishu\n", Status::default());
    assert!(take(&serial).contains("this image leaves out Feishu"));
    assert_eq!(console::channels(&chip.config, false).unwrap(), telegram);

    // With Feishu: once chosen, the app and its allowlist are what is missing, not Telegram's.
    let with = Status { feishu: true, ..Status::default() };
    console::feed(&mut chip, &mut con, b"channel feishu\n", with);
    let e = console::channels(&chip.config, false).unwrap_err();
    assert_eq!(e, "not set: feishu_app_id, feishu_secret, feishu_allow (set them on the serial console; type help)");
    console::feed(&mut chip, &mut con, b"set_feishu_app cli_a1b2 Xk9vQ2mPz7LrT4bW\n", with);
    let e = console::channels(&chip.config, false).unwrap_err();
    assert_eq!(e, "not set: feishu_allow (set them on the serial console; type help)");
    console::feed(&mut chip, &mut con, b"set_feishu_allow ou_owner\n", with);
    // One chat channel at a time: Telegram's settings stay, its polls do not run.
    let feishu = console::Channels { telegram: false, gateway: false, feishu: true };
    assert_eq!(console::channels(&chip.config, false).unwrap(), feishu);
    // A gateway token beside it: both, still no Telegram.
    console::feed(&mut chip, &mut con, b"gateway_token\n", Status { random: [3; 16], ..with });
    let both = console::channels(&chip.config, true).unwrap();
    assert_eq!(both, console::Channels { gateway: true, ..feishu });
    console::feed(&mut chip, &mut con, b"channel telegram\n", with);
    assert_eq!(console::channels(&chip.config, false).unwrap(), telegram);
}

/// The commands of the connected parts (OTA, the gateway, web_search, the heartbeat, the proxy),
/// which an image without them answers only with why.
const CONNECTED_COMMANDS: [&str; 7] =
    ["set_tavily_key", "set_search_key", "set_proxy", "gateway_token", "heartbeat_read", "heartbeat_write", "ota"];

/// The commands of the Feishu channel, which an image without it answers only with why.
const FEISHU_COMMANDS: [&str; 3] = ["set_feishu_app", "set_feishu_allow", "channel"];

/// The command names `help` offers: the lines of its list, not the closing remark.
fn offered(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn help_in_an_image_without_the_connected_parts_offers_only_what_it_runs() {
    let serial = Serial::default();
    let mut chip: Chip<RamFlash, Serial> = boot::power_on(RamFlash::new(4096, 8), serial.clone(), 1, BUILD).unwrap();
    take(&serial);
    let mut con = Console::new();
    let without = Status { left_out: Some(console::WITHOUT_CONNECTED), ..Status::default() };
    console::feed(&mut chip, &mut con, b"help\n", without);
    let help = take(&serial);
    let listed = offered(&help);
    for cmd in CONNECTED_COMMANDS {
        assert!(!listed.iter().any(|c| c == cmd), "{cmd} offered by an image without it:\n{help}");
    }
    for cmd in ["wifi_set", "set_api_key", "set_tg_token", "config_show", "memory_write", "heap_info", "help"] {
        assert!(listed.iter().any(|c| c == cmd), "{cmd} missing:\n{help}");
    }
    let closing: Vec<&str> = help.lines().filter(|l| l.starts_with("not in this image")).collect();
    assert_eq!(
        closing,
        [
            format!("not in this image: {} ({})", CONNECTED_COMMANDS.join(", "), console::WITHOUT_CONNECTED),
            format!(
                "not in this image: {} (it runs only in an ESP32 image built with the feishu feature: both chips' \
                 default (firmware/build.sh esp32c3 or esp32c6, without CHELA_FIRMWARE_FEATURES))",
                FEISHU_COMMANDS.join(", ")
            ),
        ],
        "the left-out commands are named with their reason, one line per reason, after the list"
    );
    assert!(help.lines().rev().take(2).all(|l| l.starts_with("not in this image")), "{help}");
    for cmd in FEISHU_COMMANDS {
        assert!(!listed.iter().any(|c| c == cmd), "{cmd} offered by an image without Feishu:\n{help}");
    }
    // Every command help offers runs: none answers that the image leaves it out.
    for cmd in &listed {
        console::feed(&mut chip, &mut con, format!("{cmd}\n").as_bytes(), without);
        let out = take(&serial);
        assert!(!out.contains("this image leaves out"), "{cmd}: {out}");
    }

    // An image with them (and with Feishu) lists them all and names nothing as left out.
    console::feed(&mut chip, &mut con, b"help\n", Status { feishu: true, ..Status::default() });
    let help = take(&serial);
    let listed = offered(&help);
    for cmd in CONNECTED_COMMANDS {
        assert!(listed.iter().any(|c| c == cmd), "{cmd} missing from a connected image's help:\n{help}");
    }
    for cmd in FEISHU_COMMANDS {
        assert!(listed.iter().any(|c| c == cmd), "{cmd} missing from a Feishu image's help:\n{help}");
    }
    assert!(!help.contains("not in this image"), "{help}");
}
