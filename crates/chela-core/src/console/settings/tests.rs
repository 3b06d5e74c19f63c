use super::*;
use crate::flash::RamFlash;

const DEFAULTS: ChipDefaults = ChipDefaults {
    wifi_ssid: "Build Net",
    wifi_password: "build-password",
    tg_token: "",
    tg_allow: "42",
    provider: "anthropic",
    api_key: "sk-ant-build-0123456789",
    model: "",
    base_url: "",
    tavily_key: "",
    brave_key: "",
    proxy: "",
    gateway_token: "",
};

#[test]
fn values_are_checked_per_field_and_errors_never_quote_them() {
    assert_eq!(Field::WifiSsid.check("My Home ").unwrap(), "My Home ", "an SSID keeps its spaces");
    assert!(Field::WifiSsid.check("").is_err());
    assert!(Field::WifiSsid.check(&"s".repeat(33)).is_err());
    assert!(Field::WifiPassword.check("short").is_err());
    assert!(Field::WifiPassword.check("").is_ok(), "an open network");
    assert!(Field::WifiPassword.check(&"ab".repeat(32)).is_ok(), "a 64-hex PSK");
    assert!(Field::TgToken.check("123456:AAF-x_y").is_ok());
    assert!(Field::TgToken.check("123456").is_err());
    assert!(Field::TgToken.check("abc:def").is_err());
    assert_eq!(Field::TgAllow.check("12, -1003 ,7").unwrap(), "12,-1003,7");
    assert!(Field::TgAllow.check("*").is_err(), "no wildcard on the chip");
    assert!(Field::TgAllow.check(&"1,".repeat(17)).is_err());
    assert!(Field::Provider.check("gemini").is_err());
    assert!(Field::ApiKey.check("sk with space").is_err());
    assert_eq!(Field::BaseUrl.check("https://proxy.example/v1/").unwrap(), "https://proxy.example/v1");
    assert!(Field::BaseUrl.check("https://user:pw@host").is_err());
    assert!(Field::BaseUrl.check("ftp://host").is_err());
    assert_eq!(Field::FeishuAllow.check("ou_a1 ,ou_b2").unwrap(), "ou_a1,ou_b2");
    assert!(Field::FeishuAllow.check("*").is_err(), "no wildcard for Feishu either");
    assert!(Field::FeishuAllow.check(&"ou_1,".repeat(17)).is_err());
    assert!(Field::FeishuAppId.check("cli_a/../x").is_err());
    assert!(Field::Channel.check("feishu").is_ok() && Field::Channel.check("both").is_err());
    let e = Field::ApiKey.check("sk-secret\u{7}").unwrap_err();
    assert!(!e.to_string().contains("sk-secret"), "{e}");
    assert_eq!(e.to_string(), "api_key must be text without control characters");
}

#[test]
fn overrides_win_over_defaults_and_reset_brings_the_build_back() {
    let mut c = ChipConfig::new(DEFAULTS);
    assert_eq!((c.get(Field::WifiSsid), c.source(Field::WifiSsid)), ("Build Net", Source::Build));
    assert_eq!((c.get(Field::TgToken), c.source(Field::TgToken)), ("", Source::Unset));
    assert_eq!((c.model(), c.base_url()), ("claude-sonnet-4-5", "https://api.anthropic.com"));
    c.set(Field::Provider, "openai").unwrap();
    assert_eq!((c.provider(), c.model(), c.base_url()), (Kind::OpenAi, "gpt-4.1-mini", "https://api.openai.com/v1"));
    c.set(Field::WifiSsid, "Attic").unwrap();
    assert_eq!((c.get(Field::WifiSsid), c.source(Field::WifiSsid)), ("Attic", Source::Flash));
    assert!(c.telegram_allows(42) && !c.telegram_allows(43) && !c.telegram_allows(4));
    c.set(Field::TgAllow, "").unwrap();
    assert!(!c.telegram_allows(42), "an empty override lets nobody in");
    c.reset();
    assert_eq!(c, ChipConfig::new(DEFAULTS));
    // A default that fails its check is unset, not used.
    let bad = ChipConfig::new(ChipDefaults { provider: "gemini", tg_allow: "*", ..DEFAULTS });
    assert_eq!((bad.get(Field::Provider), bad.get(Field::TgAllow)), ("", ""));
    assert!(!bad.telegram_allows(42));
}

#[test]
fn the_record_round_trips_through_flash_and_skips_what_it_cannot_use() {
    let mut store = FlashStore::open(RamFlash::new(4096, 4)).unwrap();
    let mut c = ChipConfig::new(DEFAULTS);
    c.set(Field::WifiSsid, "My Home").unwrap();
    c.set(Field::ApiKey, "sk-new-key-abcdefghij").unwrap();
    c.save(&mut store).unwrap();
    let store = FlashStore::open(store.into_flash()).unwrap();
    let (back, report) = ChipConfig::load(&store, DEFAULTS).unwrap();
    assert_eq!(back, c);
    assert_eq!(report, LoadReport { loaded: 2, skipped: 0 });
    let mut c2 = ChipConfig::new(DEFAULTS);
    let r = c2.apply_record(b"chela-chip-config 1\nwifi_ssid=Ok\nprovider=gemini\nnoise\ncolour=red\n");
    assert_eq!((r.loaded, r.skipped, c2.get(Field::WifiSsid)), (1, 3, "Ok"));
    let r = c2.apply_record(b"something else\nwifi_ssid=x\n");
    assert_eq!((r.loaded, r.skipped), (0, 2), "a record without the header is not trusted");
    assert_eq!(ChipConfig::new(DEFAULTS).encode(), "", "no overrides, no record");
}

#[test]
fn config_show_masks_secrets_and_says_where_values_come_from() {
    let mut c = ChipConfig::new(DEFAULTS);
    c.set(Field::TgToken, "123456789:AAHsecretsecretsecret").unwrap();
    let shown = c.show();
    for secret in ["build-password", "sk-ant-build-0123456789", "123456789:AAHsecretsecretsecret"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains("tg_token       flash  1234****et\n"), "{shown}");
    assert!(shown.contains("api_key        build  sk-a****89\n"), "{shown}");
    assert!(shown.contains("wifi_ssid      build  \"Build Net\"\n"), "{shown}");
    assert!(shown.contains("model          unset  (anthropic default: claude-sonnet-4-5)\n"), "{shown}");
    assert!(shown.contains("tg_allow       build  42\n"), "{shown}");
}
