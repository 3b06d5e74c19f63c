//! The serial console on the chip: bytes from the UART go to the core's MimiClaw console
//! (`chela_core::console`) with the chip's flash store and settings; its replies go to the
//! board's console and its effects back to the firmware. The settings in force are read from
//! [`ChipConfig`] here too, so the console's changes reach the next request.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_core::console::{ChipConfig, Console, Ctx, Effect, Field, Status};
use chela_core::exchange::Endpoint;
use chela_core::flash::Flash;

use crate::Board;
use crate::telegram::Access;
use crate::turn::Chip;

/// Why an image built without the connected parts (OTA, the gateway, web_search, the heartbeat,
/// the proxy) has none: the firmware's [`Status::left_out`] then, which the console's `help` and
/// those commands say.
pub const WITHOUT_CONNECTED: &str =
    "it was built with CHELA_FIRMWARE_FEATURES=\"\"; firmware/build.sh builds it in by default";

/// Feeds `bytes` read from the UART to `console`; prints each reply; returns the effects the
/// firmware must carry out, in order. Bounded by the console's line length.
pub fn feed<F: Flash, B: Board>(
    chip: &mut Chip<F, B>,
    console: &mut Console,
    bytes: &[u8],
    status: Status,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    let board = &chip.board;
    let mut ctx = Ctx { store: &mut chip.store, config: &mut chip.config, status };
    console.handle_bytes(bytes, &mut ctx, &mut |reply| {
        board.print(format_args!("{}", reply.text));
        effects.extend(reply.effects);
    });
    effects
}

/// The model endpoint the settings give, or what is missing.
pub fn endpoint(config: &ChipConfig) -> Result<Endpoint, String> {
    let api_key = config.get(Field::ApiKey);
    if api_key.is_empty() {
        return Err("no API key: set one on the serial console with set_api_key".into());
    }
    Ok(Endpoint {
        kind: config.provider(),
        base_url: config.base_url().trim_end_matches('/').into(),
        api_key: api_key.into(),
        model: config.model().into(),
        max_tokens: 1024,
        stream: true,
    })
}

/// Who may talk to the device over Telegram: `tg_allow`, the owner first. Nobody when unset.
pub fn access(config: &ChipConfig) -> Result<Access, String> {
    let allow = config.get(Field::TgAllow);
    let (owner, rest) = allow.split_once(',').unwrap_or((allow, ""));
    Access::parse(owner, rest).map_err(|e| format!("tg_allow: {e}"))
}

/// The Telegram bot token and the WiFi network, when both are set: what channels need.
pub fn channels_ready(config: &ChipConfig) -> Result<(), String> {
    channels(config, false).map(|_| ())
}

/// Which channels the settings let the device serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channels {
    pub telegram: bool,
    pub gateway: bool,
    /// `channel feishu` with the app and its allowlist set (then never Telegram: one chat
    /// channel at a time, the RAM holds one more TLS session, not two).
    pub feishu: bool,
}

/// The channels the settings open: all need the WiFi network and the API key; the chat
/// channel `channel` names (Telegram unless `feishu`) its token or app and its allowlist; the
/// gateway its token, in an image built with it (`gateway_built`). A device with only the
/// gateway set is ready, not waiting for a chat channel.
pub fn channels(config: &ChipConfig, gateway_built: bool) -> Result<Channels, String> {
    let gateway = gateway_built && !config.get(Field::GatewayToken).is_empty();
    let chat: &[Field] = if config.get(Field::Channel) == "feishu" {
        &[Field::FeishuAppId, Field::FeishuSecret, Field::FeishuAllow]
    } else {
        &[Field::TgToken, Field::TgAllow]
    };
    let chat_set = chat.iter().all(|f| !config.get(*f).is_empty());
    let feishu = chat_set && chat[0] == Field::FeishuAppId;
    let telegram = chat_set && !feishu;
    let missing: Vec<&str> = [Field::WifiSsid]
        .iter()
        .chain(chat)
        .chain(&[Field::ApiKey])
        .filter(|f| config.get(**f).is_empty() && !(gateway && chat.contains(f)))
        .map(|f| f.name())
        .collect();
    if missing.is_empty() {
        return Ok(Channels { telegram, gateway, feishu });
    }
    let or_gateway =
        if gateway_built && !gateway && !telegram && !feishu { ", or gateway_token for the gateway alone" } else { "" };
    Err(format!("not set: {} (set them on the serial console{or_gateway}; type help)", missing.join(", ")))
}
