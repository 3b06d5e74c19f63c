//! The chip's serial console: MimiClaw's commands, the settings they change,
//! and the boot rules.
//!
//! What it is: [`Console`], a line interpreter that takes the bytes read from the UART and
//! gives back text to write to it and [`Effect`]s for the firmware to carry out (restart,
//! reconnect the WiFi, reload the settings, drop a cached session). It reads and writes the
//! flash store itself (settings, `MEMORY.md`, clearing a session): those are decisions over
//! data the core owns. The settings are [`ChipConfig`] (build-time defaults, overrides kept in
//! flash); [`BootGuard`] turns a crash loop into safe mode; [`inbound`] refuses input bigger
//! than the chip's buffers with a short reply.
//!
//! What it is not: a shell. There is no echo, history or line editing beyond backspace and
//! Ctrl-C, and nothing it prints ever shows a secret whole.
//!
//! How to drive it: at boot, open the [`FlashStore`], call [`BootGuard::boot`], then
//! [`ChipConfig::load`]; print [`Console::banner`]. Feed every byte the UART gives to
//! [`Console::handle_bytes`] with a [`Ctx`] holding the store, the settings and a fresh
//! [`Status`]; write each [`Reply`]'s text and carry out its effects in order.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::ControlFlow;

use crate::flash::{self, Flash, FlashStore, Order};
use crate::storage::Storage;
use crate::text;

mod boot;
pub mod inbound;
mod line;
mod settings;
#[cfg(test)]
mod tests;

pub use boot::{BOOT_KEY, BootGuard, BootMode, BootPolicy, before_deliberate_restart};
pub use line::{ArgError, LineError, LineReader, MAX_ARGS, MAX_LINE, split_args};
pub use settings::{CONFIG_KEY, ChipConfig, ChipDefaults, Field, LoadReport, MAX_ALLOWED_CHATS, SettingError, Source};

/// The person's long-term memory file, which `memory_read` and `memory_write` show and replace.
pub const MEMORY_FILE: &str = "MEMORY.md";

/// The heartbeat's list (`heartbeat_read`, `heartbeat_write`; the chip's heartbeat reads it).
pub const HEARTBEAT_FILE: &str = "HEARTBEAT.md";

/// The most of `MEMORY.md` that `memory_read` prints.
pub const MAX_SHOWN_MEMORY: usize = 2048;

/// What the firmware must do after a command, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Reboot (the boot counter was already set back: this is not a crash).
    Restart,
    /// Drop the WiFi connection and join with the settings now in force.
    ReconnectWifi,
    /// The settings changed (token, allowlist, provider, key, model, address): use the new ones
    /// from the next request on.
    ConfigChanged,
    /// This session's key was cleared in flash: drop any copy of it held in RAM.
    SessionCleared(String),
    /// `MEMORY.md` changed: rebuild the prompt's memory part.
    MemoryChanged,
    /// Fetch a signed firmware update from this `https://` URL, then restart into it.
    Update(String),
}

/// What one command line gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// Lines to print, each ending in `\n`. Secrets are masked.
    pub text: String,
    pub effects: Vec<Effect>,
}

impl Reply {
    fn text(text: impl Into<String>) -> Reply {
        Reply { text: text.into(), effects: Vec::new() }
    }

    fn error(why: impl core::fmt::Display) -> Reply {
        Reply::text(format!("error: {why}\n"))
    }
}

/// The WiFi as the firmware sees it, for `wifi_status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wifi {
    /// Not started (safe mode, or no SSID set).
    #[default]
    Off,
    Connecting,
    Connected {
        ip: [u8; 4],
        /// Signal strength in dBm.
        rssi: i8,
    },
    /// Gave up for now; retries later.
    Failed,
}

/// The heap as the allocator reports it, for `heap_info`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Heap {
    pub total: usize,
    pub free: usize,
    /// The least free since boot.
    pub min_free: usize,
}

/// What only the firmware knows, passed in with each line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub wifi: Wifi,
    pub heap: Heap,
    pub uptime_ms: u64,
    pub mode: Option<BootMode>,
    /// Fresh random bytes from the board's RNG, for `gateway_token`; all zero when it has none.
    pub random: [u8; 16],
    /// Why this image was built without the connected parts (OTA, the gateway, web_search, the
    /// heartbeat, the proxy), said by the commands that set them up; `None`: it has them.
    pub left_out: Option<&'static str>,
    /// Whether the image runs the Feishu channel: without it the Feishu commands say so
    /// instead of saving settings nothing reads.
    pub feishu: bool,
}

/// The data a command works on.
#[derive(Debug)]
pub struct Ctx<'a, F: Flash> {
    pub store: &'a mut FlashStore<F>,
    pub config: &'a mut ChipConfig,
    pub status: Status,
}

/// One command: its name, its arguments' usage and what it does, for `help`.
struct Command {
    name: &'static str,
    usage: &'static str,
    help: &'static str,
}

const COMMANDS: &[Command] = &[
    Command { name: "wifi_set", usage: "SSID [PASSWORD]", help: "join this WiFi network (quote a name with spaces)" },
    Command { name: "wifi_status", usage: "", help: "is the WiFi up, and with which address" },
    Command { name: "set_tg_token", usage: "TOKEN", help: "the Telegram bot token from @BotFather" },
    Command {
        name: "set_tg_allow",
        usage: "CHAT_ID[,CHAT_ID...]",
        help: "the Telegram chats that get answers, the owner's first (\"\" for none)",
    },
    Command { name: "set_api_key", usage: "KEY", help: "the model provider's API key" },
    Command { name: "set_model_provider", usage: "anthropic|openai", help: "which API to call" },
    Command { name: "set_model", usage: "MODEL", help: "the model to ask (\"\" for the provider's default)" },
    Command { name: "set_base_url", usage: "URL", help: "the provider's address (\"\" for its default)" },
    Command { name: "set_tavily_key", usage: "KEY", help: "web_search through Tavily (preferred; \"\" for none)" },
    Command { name: "set_search_key", usage: "KEY", help: "web_search through Brave Search (\"\" for none)" },
    Command {
        name: "set_proxy",
        usage: "URL",
        help: "an HTTP proxy for every connection: http://[user:pass@]host:port (\"\" for none)",
    },
    Command { name: "set_feishu_app", usage: "APP_ID SECRET", help: "the Feishu app's id and secret (secret masked)" },
    Command { name: "set_feishu_allow", usage: "OPEN_ID...", help: "the Feishu users who get answers (ou_…)" },
    Command { name: "channel", usage: "telegram|feishu", help: "the chat channel the device serves (one at a time)" },
    Command { name: "gateway_token", usage: "[off]", help: "a new WebSocket gateway token, shown once (off: none)" },
    Command { name: "config_show", usage: "", help: "every setting, secrets masked, and where it comes from" },
    Command { name: "config_reset", usage: "", help: "forget the settings made here: back to the build's" },
    Command { name: "memory_read", usage: "", help: "print MEMORY.md" },
    Command { name: "memory_write", usage: "TEXT", help: "replace MEMORY.md with TEXT (\\n for a new line)" },
    Command { name: "heartbeat_read", usage: "", help: "print HEARTBEAT.md" },
    Command { name: "heartbeat_write", usage: "TEXT", help: "replace HEARTBEAT.md with TEXT (\\n for a new line)" },
    Command { name: "session_list", usage: "", help: "the chat sessions in flash, and lines dropped for room" },
    Command { name: "session_clear", usage: "NAME|CHAT_ID", help: "forget one chat session" },
    Command { name: "heap_info", usage: "", help: "free heap, and how full the flash is" },
    Command { name: "restart", usage: "", help: "reboot" },
    Command { name: "ota", usage: "https://URL", help: "install the signed firmware update at URL, then restart" },
    Command { name: "help", usage: "", help: "this list" },
];

/// See the module docs. Holds only the partial line (at most [`MAX_LINE`] bytes).
#[derive(Debug, Default)]
pub struct Console {
    reader: LineReader,
}

impl Console {
    pub fn new() -> Console {
        Console::default()
    }

    /// The greeting to print at boot: the mode, and how to get help.
    pub fn banner(mode: BootMode) -> String {
        match mode {
            BootMode::Normal => "chela console: type help for the commands\n".to_owned(),
            BootMode::Safe { quick_resets } => format!(
                "chela console: SAFE MODE after {quick_resets} quick resets in a row: channels are off.\n\
                 Check the settings (config_show), fix them, then restart. Type help for the commands.\n"
            ),
        }
    }

    /// Takes bytes from the UART; runs each line they complete and hands its reply to `reply`.
    pub fn handle_bytes<F: Flash>(&mut self, bytes: &[u8], ctx: &mut Ctx<'_, F>, reply: &mut dyn FnMut(Reply)) {
        let mut lines: Vec<Result<String, LineError>> = Vec::new();
        self.reader.feed(bytes, &mut |l| lines.push(l.map(ToOwned::to_owned)));
        for line in lines {
            reply(match line {
                Ok(line) => run_line(&line, ctx),
                Err(e) => Reply::error(e),
            });
        }
    }
}

/// Runs one command line.
pub fn run_line<F: Flash>(line: &str, ctx: &mut Ctx<'_, F>) -> Reply {
    let words = match split_args(line) {
        Ok(w) => w,
        Err(e) => return Reply::error(e),
    };
    let Some((name, args)) = words.split_first() else {
        return Reply::default();
    };
    let Some(cmd) = COMMANDS.iter().find(|c| c.name == name) else {
        return unknown(name);
    };
    if let Some((what, why)) = left_out(cmd.name, &ctx.status) {
        return Reply::text(format!("this image leaves out {what}: {why}\n"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let usage = || Reply::error(format!("usage: {} {}", cmd.name, cmd.usage).trim_end());
    match (cmd.name, args.as_slice()) {
        ("wifi_set", [ssid]) => set(ctx, &[(Field::WifiSsid, ssid), (Field::WifiPassword, "")]),
        ("wifi_set", [ssid, pass]) => set(ctx, &[(Field::WifiSsid, ssid), (Field::WifiPassword, pass)]),
        ("set_tg_token", [v]) => set(ctx, &[(Field::TgToken, v)]),
        ("set_tg_allow", ids) if !ids.is_empty() => set(ctx, &[(Field::TgAllow, &ids.join(","))]),
        ("set_api_key", [v]) => set(ctx, &[(Field::ApiKey, v)]),
        ("set_model_provider", [v]) => set(ctx, &[(Field::Provider, v)]),
        ("set_model", [v]) => set(ctx, &[(Field::Model, v)]),
        ("set_base_url", [v]) => set(ctx, &[(Field::BaseUrl, v)]),
        ("set_tavily_key", [v]) => set(ctx, &[(Field::TavilyKey, v)]),
        ("set_search_key", [v]) => set(ctx, &[(Field::BraveKey, v)]),
        ("set_proxy", [v]) => set(ctx, &[(Field::Proxy, v)]),
        ("set_feishu_app", [id, secret]) => set(ctx, &[(Field::FeishuAppId, id), (Field::FeishuSecret, secret)]),
        ("set_feishu_allow", ids) if !ids.is_empty() => set(ctx, &[(Field::FeishuAllow, &ids.join(","))]),
        ("channel", [v @ ("telegram" | "feishu")]) => set(ctx, &[(Field::Channel, v)]),
        ("gateway_token", []) => gateway_token(ctx),
        ("gateway_token", ["off"]) => set(ctx, &[(Field::GatewayToken, "")]),
        ("config_show", []) => Reply::text(ctx.config.show()),
        ("config_reset", []) => config_reset(ctx),
        ("wifi_status", []) => Reply::text(wifi_status(ctx)),
        ("memory_read", []) => memory_read(ctx),
        ("memory_write", words) if !words.is_empty() => memory_write(ctx, &words.join(" ")),
        ("heartbeat_read", []) => file_read(ctx, HEARTBEAT_FILE),
        ("heartbeat_write", words) if !words.is_empty() => file_write(ctx, HEARTBEAT_FILE, &words.join(" ")),
        ("session_list", []) => Reply::text(session_list(ctx.store)),
        ("session_clear", [name]) => session_clear(ctx, name),
        ("heap_info", []) => Reply::text(heap_info(ctx)),
        ("restart", []) => restart(ctx),
        ("ota", [url]) => update(url),
        ("help", []) => Reply::text(help(&ctx.status)),
        _ => usage(),
    }
}

/// The connected part a command sets up, for an image built without them
/// ([`Status::left_out`]): such a command says so instead of saving a setting nothing reads.
/// The part of Chela a command sets up and why this image has none of it, for a command the
/// image cannot run; `None` for a command it runs. One answer for `help` and for the command.
fn left_out(command: &str, status: &Status) -> Option<(&'static str, &'static str)> {
    if !status.feishu && matches!(command, "set_feishu_app" | "set_feishu_allow" | "channel") {
        return Some(("Feishu", WITHOUT_FEISHU));
    }
    Some((connected_part(command)?, status.left_out?))
}

/// Why an image without the Feishu channel has none: said by its commands and by `help`.
const WITHOUT_FEISHU: &str = "it runs only in an ESP32 image built with the feishu feature: both chips' \
     default (firmware/build.sh esp32c3 or esp32c6, without CHELA_FIRMWARE_FEATURES)";

fn connected_part(command: &str) -> Option<&'static str> {
    match command {
        "ota" => Some("over-the-air updates"),
        "gateway_token" => Some("the WebSocket gateway"),
        "set_tavily_key" | "set_search_key" => Some("web_search"),
        "set_proxy" => Some("the HTTP proxy"),
        "heartbeat_read" | "heartbeat_write" => Some("the heartbeat"),
        _ => None,
    }
}

/// An unknown command. Its name is repeated only when it looks like one: a pasted key or token
/// must not come back on the screen.
fn unknown(name: &str) -> Reply {
    let looks_like_a_command = name.len() <= 24 && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if !looks_like_a_command {
        return Reply::error("unknown command; type help for the list");
    }
    match crate::config::suggest(name, COMMANDS.iter().map(|c| c.name)) {
        Some(near) => Reply::error(format!("unknown command {name}; did you mean {near}?")),
        None => Reply::error(format!("unknown command {name}; type help for the list")),
    }
}

/// The commands this image runs; the ones it cannot run are named at the end, one line per
/// reason, so the list does not offer what the image cannot do.
fn help(status: &Status) -> String {
    let mut out = String::from("commands:\n");
    let mut absent: Vec<(&str, Vec<&str>)> = Vec::new();
    for c in COMMANDS {
        if let Some((_, why)) = left_out(c.name, status) {
            match absent.iter_mut().find(|(w, _)| *w == why) {
                Some((_, names)) => names.push(c.name),
                None => absent.push((why, alloc::vec![c.name])),
            }
            continue;
        }
        let head = if c.usage.is_empty() { c.name.to_owned() } else { format!("{} {}", c.name, c.usage) };
        out.push_str(&format!("  {head:<40} {}\n", c.help));
    }
    for (why, names) in absent {
        out.push_str(&format!("not in this image: {} ({why})\n", names.join(", ")));
    }
    out
}

/// Sets the fields (all checked first: all or none), keeps them in flash, says what changed.
fn set<F: Flash>(ctx: &mut Ctx<'_, F>, values: &[(Field, &str)]) -> Reply {
    let mut next = ctx.config.clone();
    for &(field, value) in values {
        if let Err(e) = next.set(field, value) {
            return Reply::error(e);
        }
    }
    if let Err(e) = next.save(ctx.store) {
        return Reply::error(format!("the setting was not saved: {e}"));
    }
    *ctx.config = next;
    let mut text = String::new();
    for &(field, _) in values {
        let v = ctx.config.get(field);
        let shown = if v.is_empty() { "(empty)".to_owned() } else { field.shown(v) };
        text.push_str(&format!("{} = {shown} (saved)\n", field.name()));
    }
    let wifi = values.iter().any(|(f, _)| matches!(f, Field::WifiSsid | Field::WifiPassword));
    let effect = if wifi { Effect::ReconnectWifi } else { Effect::ConfigChanged };
    Reply { text, effects: alloc::vec![effect] }
}

fn config_reset<F: Flash>(ctx: &mut Ctx<'_, F>) -> Reply {
    let mut next = ctx.config.clone();
    next.reset();
    if let Err(e) = next.save(ctx.store) {
        return Reply::error(format!("the settings were not reset: {e}"));
    }
    *ctx.config = next;
    Reply {
        text: "settings reset to the build's values\n".to_owned(),
        effects: alloc::vec![Effect::ReconnectWifi, Effect::ConfigChanged],
    }
}

fn wifi_status<F: Flash>(ctx: &Ctx<'_, F>) -> String {
    let ssid = ctx.config.get(Field::WifiSsid);
    let net =
        if ssid.is_empty() { "no network set (wifi_set SSID PASSWORD)".to_owned() } else { format!("\"{ssid}\"") };
    match ctx.status.wifi {
        Wifi::Off => format!("wifi: off; {net}\n"),
        Wifi::Connecting => format!("wifi: connecting to {net}\n"),
        Wifi::Connected { ip: [a, b, c, d], rssi } => {
            format!("wifi: connected to {net}, ip {a}.{b}.{c}.{d}, {rssi} dBm\n")
        }
        Wifi::Failed => format!("wifi: could not join {net}; retrying\n"),
    }
}

fn memory_read<F: Flash>(ctx: &Ctx<'_, F>) -> Reply {
    file_read(ctx, MEMORY_FILE)
}

fn memory_write<F: Flash>(ctx: &mut Ctx<'_, F>, content: &str) -> Reply {
    file_write(ctx, MEMORY_FILE, content)
}

/// Prints the file `name` (`MEMORY.md`, `HEARTBEAT.md`), at most [`MAX_SHOWN_MEMORY`] of it.
fn file_read<F: Flash>(ctx: &Ctx<'_, F>, name: &str) -> Reply {
    let mut content = Vec::new();
    let read = ctx.store.read(name, Order::OldestFirst, &mut |r| {
        if content.len() < MAX_SHOWN_MEMORY + 4 {
            content.extend_from_slice(r.payload);
            if r.kind != flash::Kind::Replace {
                content.push(b'\n');
            }
        }
        ControlFlow::Continue(())
    });
    if let Err(e) = read {
        return Reply::error(format!("{name} could not be read: {e}"));
    }
    let text = String::from_utf8_lossy(&content);
    if text.trim().is_empty() {
        return Reply::text(format!("{name} is empty\n"));
    }
    let mut out = text::truncate_visibly(&text, MAX_SHOWN_MEMORY).into_owned();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Reply::text(out)
}

fn file_write<F: Flash>(ctx: &mut Ctx<'_, F>, name: &str, content: &str) -> Reply {
    let mut body = content.to_owned();
    body.push('\n');
    match Storage::replace(ctx.store, name, body.as_bytes()) {
        Ok(()) => Reply {
            text: format!("{name} written ({} bytes)\n", body.len()),
            effects: if name == MEMORY_FILE { alloc::vec![Effect::MemoryChanged] } else { Vec::new() },
        },
        Err(e) => Reply::error(format!("{name} was not written: {e}")),
    }
}

/// `gateway_token`: a new token of 128 random bits, shown once; `config_show` masks it after.
fn gateway_token<F: Flash>(ctx: &mut Ctx<'_, F>) -> Reply {
    if ctx.status.random == [0; 16] {
        return Reply::error("this board gave no random bytes; no token was made");
    }
    let token: String = ctx.status.random.iter().map(|b| format!("{b:02x}")).collect();
    let mut reply = set(ctx, &[(Field::GatewayToken, token.as_str())]);
    if reply.text.starts_with("error") {
        return reply;
    }
    reply.text = format!("gateway_token = {token}\n(shown only now: copy it into the client; config_show masks it)\n");
    reply
}

/// Whether a store key is a chat session (not memory, settings or the boot counter).
fn is_session<F: Flash>(store: &FlashStore<F>, key: &str) -> bool {
    !key.starts_with("chip/") && !store.limits().kept.contains(&key) && key != MEMORY_FILE && key != HEARTBEAT_FILE
}

fn session_list<F: Flash>(store: &FlashStore<F>) -> String {
    let keys: Vec<_> = store.keys().into_iter().filter(|k| is_session(store, &k.key) && k.bytes > 0).collect();
    if keys.is_empty() {
        return "no sessions\n".to_owned();
    }
    let mut out = String::new();
    let mut dropped = 0u64;
    for k in &keys {
        let plural = if k.records == 1 { "" } else { "s" };
        out.push_str(&format!("{}  {} line{plural}, {} bytes", k.key, k.records, k.bytes));
        if k.dropped > 0 {
            out.push_str(&format!(", {} oldest lines dropped (flash full)", k.dropped));
        }
        out.push('\n');
        dropped += u64::from(k.dropped);
    }
    let plural = if keys.len() == 1 { "" } else { "s" };
    out.push_str(&format!("{} session{plural}", keys.len()));
    if dropped > 0 {
        out.push_str(&format!("; {dropped} oldest lines were dropped to make room in flash"));
    }
    out.push('\n');
    out
}

fn session_clear<F: Flash>(ctx: &mut Ctx<'_, F>, name: &str) -> Reply {
    let keys: Vec<String> = ctx.store.keys().into_iter().map(|k| k.key).filter(|k| is_session(ctx.store, k)).collect();
    let with_ext = format!("{name}.jsonl");
    let by_chat = format!("_{name}.jsonl");
    let exact: Vec<&String> = keys.iter().filter(|k| **k == name || **k == with_ext).collect();
    let matches = if exact.is_empty() { keys.iter().filter(|k| k.ends_with(&by_chat)).collect() } else { exact };
    let key = match matches.as_slice() {
        [] => return Reply::error("no such session; session_list shows them"),
        [one] => (*one).clone(),
        many => {
            let names: Vec<&str> = many.iter().map(|k| k.as_str()).collect();
            return Reply::error(format!("more than one session matches: {}; give the whole name", names.join(", ")));
        }
    };
    match ctx.store.replace(&key, b"") {
        Ok(()) => Reply { text: format!("session {key} cleared\n"), effects: alloc::vec![Effect::SessionCleared(key)] },
        Err(e) => Reply::error(format!("session {key} was not cleared: {e}")),
    }
}

fn heap_info<F: Flash>(ctx: &Ctx<'_, F>) -> String {
    let h = ctx.status.heap;
    let s = ctx.store.stats();
    let dropped: u64 = ctx.store.keys().iter().map(|k| u64::from(k.dropped)).sum();
    let mut out = format!(
        "heap: {} B free of {} B, least free since boot {} B\n\
         flash: {} of {} sectors of {} B free, {} records ({} B), memory {} of {} B, index {} B of RAM\n",
        h.free,
        h.total,
        h.min_free,
        s.free_sectors,
        s.sectors,
        s.sector_size,
        s.records,
        s.record_bytes,
        s.kept_bytes,
        s.kept_limit,
        s.ram_bytes,
    );
    if dropped > 0 || s.dropped > 0 {
        out.push_str(&format!(
            "flash full: the oldest session lines go first; {dropped} dropped from the sessions kept ({} since boot)\n",
            s.dropped
        ));
    }
    if s.corrupt > 0 || s.repaired > 0 {
        out.push_str(&format!(
            "flash damage: {} damaged records skipped, {} sectors repaired at boot\n",
            s.corrupt, s.repaired
        ));
    }
    out.push_str(&format!("uptime: {} s", ctx.status.uptime_ms / 1000));
    if let Some(BootMode::Safe { quick_resets }) = ctx.status.mode {
        out.push_str(&format!("; SAFE MODE after {quick_resets} quick resets"));
    }
    out.push('\n');
    out
}

fn restart<F: Flash>(ctx: &mut Ctx<'_, F>) -> Reply {
    // A failed write is said, and the restart goes ahead: the person asked for it.
    let note = match before_deliberate_restart(ctx.store) {
        Ok(()) => String::new(),
        Err(e) => format!("(the boot counter was not cleared: {e})\n"),
    };
    Reply { text: format!("{note}restarting\n"), effects: alloc::vec![Effect::Restart] }
}

/// The update's URL is checked here; the signature, on the device as the image arrives. The URL
/// is not echoed: its query may hold a token.
fn update(url: &str) -> Reply {
    let host = url.strip_prefix("https://").map(|r| &r[..r.find(['/', '?']).unwrap_or(r.len())]);
    match host {
        Some(h) if !h.is_empty() && url.len() <= 512 => {
            Reply { text: format!("fetching the update from {h}\n"), effects: alloc::vec![Effect::Update(url.into())] }
        }
        Some(_) => Reply::error("usage: ota https://HOST/PATH (at most 512 bytes)"),
        None => Reply::error("usage: ota https://URL (the update is fetched over TLS only)"),
    }
}

impl Reply {
    /// Whether the reply holds `secret` whole (for tests and the emulator's checks).
    pub fn shows(&self, secret: &str) -> bool {
        !secret.is_empty() && self.text.contains(secret)
    }
}

impl core::fmt::Display for Effect {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Effect::Restart => f.write_str("restart"),
            Effect::ReconnectWifi => f.write_str("reconnect wifi"),
            Effect::ConfigChanged => f.write_str("settings changed"),
            Effect::SessionCleared(k) => write!(f, "session {k} cleared"),
            Effect::MemoryChanged => f.write_str("memory changed"),
            Effect::Update(_) => f.write_str("firmware update"),
        }
    }
}
