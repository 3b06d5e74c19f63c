//! The chip's settings: build-time defaults, overridden by values set over the serial console
//! and kept in flash.
//!
//! The overrides are one record in the [`FlashStore`] under [`CONFIG_KEY`], written with
//! `replace`: a power cut leaves the old record or the new one, never a mix (the store's CRCs
//! and its boot scan see to that). The record is text a person could read:
//!
//! ```text
//! chela-chip-config 1
//! wifi_ssid=My Home
//! tg_allow=123456789
//! ```
//!
//! Values are checked when set and again when read; a line that fails is skipped and counted,
//! so a damaged or older record costs that setting, never the boot.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::config;
use crate::exchange::Kind;
use crate::flash::{self, Flash, FlashStore, Order};

/// The store key of the overrides record.
pub const CONFIG_KEY: &str = "chip/config";

const HEADER: &str = "chela-chip-config 1";

/// Chat ids in `tg_allow`, at most.
pub const MAX_ALLOWED_CHATS: usize = 16;

/// One setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    WifiSsid,
    WifiPassword,
    TgToken,
    /// The Telegram chats that get answers (the owner's chat id first). Empty: none.
    TgAllow,
    Provider,
    ApiKey,
    Model,
    /// Empty: the provider's own address.
    BaseUrl,
    /// `web_search` through Tavily (preferred when both keys are set).
    TavilyKey,
    /// `web_search` through Brave Search.
    BraveKey,
    /// An HTTP CONNECT proxy for every outbound connection: `http://[user:password@]host:port`.
    Proxy,
    /// The WebSocket gateway's token; empty: the gateway admits nobody.
    GatewayToken,
    /// The Feishu app's id (`cli_…`), for the long connection.
    FeishuAppId,
    /// The Feishu app's secret.
    FeishuSecret,
    /// The Feishu users (`open_id`s) that get answers. Empty: none.
    FeishuAllow,
    /// The chat channel the device serves: `telegram` (empty) or `feishu`. One at a time: the
    /// long connection's TLS session and a Telegram poll's cannot both stay open beside the
    /// model's in the chip's RAM.
    Channel,
}

impl Field {
    pub const ALL: [Field; 16] = [
        Field::WifiSsid,
        Field::WifiPassword,
        Field::TgToken,
        Field::TgAllow,
        Field::Provider,
        Field::ApiKey,
        Field::Model,
        Field::BaseUrl,
        Field::TavilyKey,
        Field::BraveKey,
        Field::Proxy,
        Field::GatewayToken,
        Field::FeishuAppId,
        Field::FeishuSecret,
        Field::FeishuAllow,
        Field::Channel,
    ];

    /// Its name in `config_show` and in the record.
    pub fn name(self) -> &'static str {
        match self {
            Field::WifiSsid => "wifi_ssid",
            Field::WifiPassword => "wifi_password",
            Field::TgToken => "tg_token",
            Field::TgAllow => "tg_allow",
            Field::Provider => "provider",
            Field::ApiKey => "api_key",
            Field::Model => "model",
            Field::BaseUrl => "base_url",
            Field::TavilyKey => "tavily_key",
            Field::BraveKey => "brave_key",
            Field::Proxy => "proxy",
            Field::GatewayToken => "gateway_token",
            Field::FeishuAppId => "feishu_app_id",
            Field::FeishuSecret => "feishu_secret",
            Field::FeishuAllow => "feishu_allow",
            Field::Channel => "channel",
        }
    }

    /// The build-time environment variable that gives its default (read by the firmware's
    /// build with `option_env!`).
    pub fn env_var(self) -> &'static str {
        match self {
            Field::WifiSsid => "CHELA_WIFI_SSID",
            Field::WifiPassword => "CHELA_WIFI_PASSWORD",
            Field::TgToken => "CHELA_TG_TOKEN",
            Field::TgAllow => "CHELA_TG_ALLOW",
            Field::Provider => "CHELA_PROVIDER",
            Field::ApiKey => "CHELA_API_KEY",
            Field::Model => "CHELA_MODEL",
            Field::BaseUrl => "CHELA_BASE_URL",
            Field::TavilyKey => "CHELA_TAVILY_KEY",
            Field::BraveKey => "CHELA_BRAVE_KEY",
            Field::Proxy => "CHELA_PROXY",
            Field::GatewayToken => "CHELA_GATEWAY_TOKEN",
            Field::FeishuAppId => "CHELA_FEISHU_APP_ID",
            Field::FeishuSecret => "CHELA_FEISHU_SECRET",
            Field::FeishuAllow => "CHELA_FEISHU_ALLOW",
            Field::Channel => "CHELA_CHANNEL",
        }
    }

    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Shown masked everywhere.
    pub fn is_secret(self) -> bool {
        matches!(
            self,
            Field::WifiPassword
                | Field::TgToken
                | Field::ApiKey
                | Field::TavilyKey
                | Field::BraveKey
                | Field::GatewayToken
                | Field::FeishuSecret
        )
    }

    fn index(self) -> usize {
        self as usize
    }

    /// `value` as it may be shown.
    pub fn shown(self, value: &str) -> String {
        match self {
            Field::Proxy => config::mask_url_userinfo(value),
            _ if self.is_secret() => config::mask(value),
            _ => value.to_owned(),
        }
    }

    /// `value` in canonical form, or why it is refused. The reason never quotes a secret.
    pub fn check(self, value: &str) -> Result<String, SettingError> {
        let bad = |expected: &'static str| SettingError { field: self, expected };
        if value.chars().any(char::is_control) {
            return Err(bad("text without control characters"));
        }
        let v = value.trim();
        let printable = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        match self {
            Field::WifiSsid if v.is_empty() || value.len() > 32 => Err(bad("1 to 32 bytes")),
            // The SSID keeps its spaces: they are part of the network's name.
            Field::WifiSsid => Ok(value.to_owned()),
            Field::WifiPassword => {
                let wpa = (8..=63).contains(&value.len()) && value.bytes().all(|b| (0x20..0x7F).contains(&b));
                let hex = value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit());
                if value.is_empty() || wpa || hex {
                    Ok(value.to_owned())
                } else {
                    Err(bad("8 to 63 printable ASCII characters, 64 hex digits, or empty for an open network"))
                }
            }
            Field::TgToken => {
                let ok = v.split_once(':').is_some_and(|(id, secret)| {
                    !id.is_empty()
                        && id.bytes().all(|b| b.is_ascii_digit())
                        && !secret.is_empty()
                        && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                });
                if v.is_empty() || (ok && v.len() <= 128) {
                    Ok(v.to_owned())
                } else {
                    Err(bad("a bot token from @BotFather (digits, a colon, then letters, digits, _ and -)"))
                }
            }
            Field::TgAllow => {
                let ids: Vec<&str> = v.split([',', ' ']).filter(|s| !s.is_empty()).collect();
                let id_ok = |s: &&str| {
                    let digits = s.strip_prefix('-').unwrap_or(s);
                    !digits.is_empty() && digits.len() <= 19 && digits.bytes().all(|b| b.is_ascii_digit())
                };
                if ids.len() <= MAX_ALLOWED_CHATS && ids.iter().all(id_ok) {
                    Ok(ids.join(","))
                } else {
                    Err(bad("Telegram chat ids (numbers, a group's start with -), comma-separated, at most 16"))
                }
            }
            Field::Provider => match v {
                "anthropic" | "openai" => Ok(v.to_owned()),
                _ => Err(bad("anthropic or openai")),
            },
            Field::ApiKey | Field::TavilyKey | Field::BraveKey if v.is_empty() || (v.len() <= 256 && printable(v)) => {
                Ok(v.to_owned())
            }
            Field::ApiKey | Field::TavilyKey | Field::BraveKey => {
                Err(bad("up to 256 printable ASCII characters without spaces"))
            }
            // Guessable tokens would open the device to the LAN: at least 128 bits as hex.
            Field::GatewayToken if v.is_empty() || ((32..=128).contains(&v.len()) && printable(v)) => Ok(v.to_owned()),
            Field::GatewayToken => Err(bad("32 to 128 printable ASCII characters (gateway_token makes one)")),
            Field::Proxy => {
                let host = v.strip_prefix("http://").map(|r| r.rsplit_once('@').map_or(r, |(_, h)| h));
                let host = host.map(|h| h.trim_end_matches('/').split(':').next().unwrap_or(""));
                let ok = host.is_some_and(|h| {
                    !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
                });
                if v.is_empty() || (ok && v.len() <= 256 && printable(v)) {
                    Ok(v.to_owned())
                } else {
                    Err(bad("an HTTP proxy: http://[user:password@]host:port, or empty for none"))
                }
            }
            Field::FeishuAppId | Field::FeishuSecret => {
                let id_ok = v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if v.is_empty() || (v.len() <= 64 && id_ok) {
                    Ok(v.to_owned())
                } else {
                    Err(bad("up to 64 letters, digits, _ and - (from the Feishu developer console)"))
                }
            }
            Field::FeishuAllow => {
                let ids: Vec<&str> = v.split([',', ' ']).filter(|s| !s.is_empty()).collect();
                let id_ok = |s: &&str| {
                    s.len() <= 64 && s.starts_with("ou_") && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                };
                if ids.len() <= MAX_ALLOWED_CHATS && ids.iter().all(id_ok) {
                    Ok(ids.join(","))
                } else {
                    Err(bad("Feishu open_ids (ou_…), comma-separated, at most 16"))
                }
            }
            Field::Channel => match v {
                "" | "telegram" | "feishu" => Ok(v.to_owned()),
                _ => Err(bad("telegram or feishu")),
            },
            Field::Model if v.len() <= 128 && printable(v) => Ok(v.to_owned()),
            Field::Model => Err(bad("a model name: up to 128 printable ASCII characters without spaces")),
            Field::BaseUrl => {
                // The host's URL rule, without pulling the host's whole key table into the
                // image: http(s), a host, no user:password@ (a credential belongs in api_key).
                let rest = v.strip_prefix("https://").or_else(|| v.strip_prefix("http://"));
                let host = rest.and_then(|r| r.split(['/', '?', '#']).next()).unwrap_or("");
                let ok = !host.is_empty() && !host.contains('@') && v.len() <= 256 && printable(v);
                if v.is_empty() || ok {
                    Ok(v.trim_end_matches('/').to_owned())
                } else {
                    Err(bad("an http:// or https:// URL with a host (no user:password@), or empty"))
                }
            }
        }
    }
}

/// A value refused by [`Field::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettingError {
    pub field: Field,
    pub expected: &'static str,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} must be {}", self.field.name(), self.expected)
    }
}

/// The values built into the image. The firmware fills it from build-time environment
/// variables ([`Field::env_var`]); empty means unset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChipDefaults {
    pub wifi_ssid: &'static str,
    pub wifi_password: &'static str,
    pub tg_token: &'static str,
    pub tg_allow: &'static str,
    pub provider: &'static str,
    pub api_key: &'static str,
    pub model: &'static str,
    pub base_url: &'static str,
    pub tavily_key: &'static str,
    pub brave_key: &'static str,
    pub proxy: &'static str,
    pub gateway_token: &'static str,
}

impl ChipDefaults {
    pub fn get(&self, field: Field) -> &'static str {
        match field {
            Field::WifiSsid => self.wifi_ssid,
            Field::WifiPassword => self.wifi_password,
            Field::TgToken => self.tg_token,
            Field::TgAllow => self.tg_allow,
            Field::Provider => self.provider,
            Field::ApiKey => self.api_key,
            Field::Model => self.model,
            Field::BaseUrl => self.base_url,
            Field::TavilyKey => self.tavily_key,
            Field::BraveKey => self.brave_key,
            Field::Proxy => self.proxy,
            Field::GatewayToken => self.gateway_token,
            // Set on the console only: a Feishu app secret is not built into an image.
            Field::FeishuAppId | Field::FeishuSecret | Field::FeishuAllow | Field::Channel => "",
        }
    }
}

/// Where a value comes from, for `config_show`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Set over the console, kept in flash.
    Flash,
    /// Built into the image.
    Build,
    /// Neither: empty.
    Unset,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Flash => "flash",
            Source::Build => "build",
            Source::Unset => "unset",
        }
    }
}

/// What loading the record found, for the boot log and `config_show`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Settings taken from flash.
    pub loaded: usize,
    /// Lines skipped: unknown names, values that fail their check, a record without the header.
    pub skipped: usize,
}

/// The settings in force: defaults, and the overrides kept in flash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChipConfig {
    defaults: ChipDefaults,
    overrides: [Option<String>; 16],
}

impl ChipConfig {
    /// Only the defaults (a blank flash, or after `config_reset`). A default that fails its
    /// check counts as unset, so a bad build variable cannot reach the radio or the network.
    pub fn new(defaults: ChipDefaults) -> ChipConfig {
        ChipConfig { defaults, overrides: Default::default() }
    }

    /// The defaults with the overrides read from `store`.
    pub fn load<F: Flash>(
        store: &FlashStore<F>,
        defaults: ChipDefaults,
    ) -> Result<(ChipConfig, LoadReport), flash::Error<F::Error>> {
        let mut cfg = ChipConfig::new(defaults);
        let mut record = Vec::new();
        store.read(CONFIG_KEY, Order::OldestFirst, &mut |r| {
            // One replace record; anything after it would be appended lines, which this
            // module never writes.
            record.clear();
            record.extend_from_slice(r.payload);
            core::ops::ControlFlow::Continue(())
        })?;
        let report = cfg.apply_record(&record);
        Ok((cfg, report))
    }

    fn apply_record(&mut self, record: &[u8]) -> LoadReport {
        let mut report = LoadReport::default();
        let text = String::from_utf8_lossy(record);
        let mut lines = text.lines();
        match lines.next() {
            None => return report,
            Some(HEADER) => {}
            Some(_) => {
                report.skipped = text.lines().count();
                return report;
            }
        }
        for line in lines {
            let parsed = line.split_once('=').and_then(|(name, value)| {
                let field = Field::from_name(name)?;
                Some((field, field.check(value).ok()?))
            });
            match parsed {
                Some((field, value)) => {
                    self.overrides[field.index()] = Some(value);
                    report.loaded += 1;
                }
                None => report.skipped += 1,
            }
        }
        report
    }

    /// The record that holds the overrides: empty when there are none.
    pub fn encode(&self) -> String {
        if self.overrides.iter().all(Option::is_none) {
            return String::new();
        }
        let mut out = String::from(HEADER);
        out.push('\n');
        for field in Field::ALL {
            if let Some(v) = &self.overrides[field.index()] {
                out.push_str(&format!("{}={v}\n", field.name()));
            }
        }
        out
    }

    /// Writes the overrides to `store` (one atomic replace). Durable when it returns `Ok`.
    pub fn save<F: Flash>(&self, store: &mut FlashStore<F>) -> Result<(), flash::Error<F::Error>> {
        store.replace(CONFIG_KEY, self.encode().as_bytes())
    }

    /// Sets `field` in RAM (checked); call [`save`](ChipConfig::save) to keep it.
    pub fn set(&mut self, field: Field, value: &str) -> Result<(), SettingError> {
        self.overrides[field.index()] = Some(field.check(value)?);
        Ok(())
    }

    /// Drops every override: the build-time values are back.
    pub fn reset(&mut self) {
        self.overrides = Default::default();
    }

    /// The value in force for `field` (empty: unset).
    pub fn get(&self, field: Field) -> &str {
        match &self.overrides[field.index()] {
            Some(v) => v,
            None => {
                let d = self.defaults.get(field);
                if field.check(d).is_ok() { d } else { "" }
            }
        }
    }

    pub fn source(&self, field: Field) -> Source {
        if self.overrides[field.index()].is_some() {
            Source::Flash
        } else if self.get(field).is_empty() {
            Source::Unset
        } else {
            Source::Build
        }
    }

    /// The provider's wire format: Anthropic unless `openai` is set.
    pub fn provider(&self) -> Kind {
        if self.get(Field::Provider) == "openai" { Kind::OpenAi } else { Kind::Anthropic }
    }

    fn provider_name(&self) -> &'static str {
        match self.provider() {
            Kind::OpenAi => "openai",
            Kind::Anthropic => "anthropic",
        }
    }

    /// The model to ask: the set one, or the provider's default (the host's).
    pub fn model(&self) -> &str {
        match self.get(Field::Model) {
            "" => config::default_model(self.provider_name()),
            m => m,
        }
    }

    /// The provider's address: the set one, or the provider's default (the host's).
    pub fn base_url(&self) -> &str {
        match self.get(Field::BaseUrl) {
            "" => config::default_base_url(self.provider_name()),
            u => u,
        }
    }

    /// Whether Telegram chat `chat_id` gets answers. Nobody does until `tg_allow` lists them.
    pub fn telegram_allows(&self, chat_id: i64) -> bool {
        let id = chat_id.to_string();
        self.get(Field::TgAllow).split(',').any(|s| s == id)
    }

    /// `config_show`: every setting, masked where secret, with where it comes from.
    pub fn show(&self) -> String {
        let mut out = String::new();
        for field in Field::ALL {
            let value = self.get(field);
            let shown = match field {
                _ if value.is_empty() => match field {
                    Field::TgAllow => "(nobody: unknown chats get no answer)".to_owned(),
                    Field::Model => format!("({} default: {})", self.provider_name(), self.model()),
                    Field::BaseUrl => format!("({} default: {})", self.provider_name(), self.base_url()),
                    Field::Provider => "(anthropic)".to_owned(),
                    Field::GatewayToken => "(not set: the gateway admits nobody)".to_owned(),
                    Field::FeishuAllow => "(nobody: unknown Feishu users get no answer)".to_owned(),
                    Field::Channel => "(telegram)".to_owned(),
                    _ => "(not set)".to_owned(),
                },
                Field::WifiSsid => format!("\"{value}\""),
                _ => field.shown(value),
            };
            out.push_str(&format!("{:<14} {:<6} {shown}\n", field.name(), self.source(field).name()));
        }
        out
    }
}

#[cfg(test)]
mod tests;
