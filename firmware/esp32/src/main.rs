//! Chela on an ESP32-C3 or ESP32-C6 (issue 9): the same agent core as the host, over WiFi.
//!
//! What it is: esp-hal with esp-rtos/embassy; WiFi station (esp-radio) with DHCP and DNS
//! (embassy-net); HTTPS with pinned root CAs (reqwless over embedded-tls, [`net`]); SNTP for
//! the clock; Telegram long polling for the person (unknown chats get nothing); each message
//! runs one turn of `chela-core` through the shared chip driver (`chela-chip`, the code the
//! emulator turn runs), streamed from Anthropic or an OpenAI-compatible API; sessions and
//! memory in the `chela` flash partition through the core's flash store ([`flash`]).
//!
//! Settings come from the build's environment (`CHELA_*`, see `firmware/README` in the
//! top-level README's firmware section). Nothing here was run on a board: it builds, links
//! and is accepted by `esptool elf2image`; the shared logic is tested on the host and on QEMU.
#![no_std]
#![no_main]

extern crate alloc;

mod board;
mod certs;
mod flash;
mod net;
mod tools;

use alloc::format;
use alloc::string::String;

use chela_chip::telegram::{self, Access, Polled, Update};
use chela_chip::turn::{self, Chip, Origin};
use chela_chip::{Board, boot, say};
use chela_core::console::{BootMode, ChipDefaults};
use chela_core::exchange::{Endpoint, Kind};
use embassy_executor::Spawner;
use embassy_net::dns::{DnsQueryType, DnsSocket};
use embassy_net::tcp::client::TcpClientState;
use embassy_net::udp::{PacketMetadata, UdpSocket};
use embassy_net::{Runner, Stack, StackResources};
use embassy_time::{Duration, Timer, with_timeout};
use esp_backtrace as _;
use esp_hal::clock::CpuClock;
use esp_hal::rng::Rng;
use esp_hal::timer::timg::TimerGroup;
use esp_radio::wifi::sta::StationConfig;
use esp_radio::wifi::{AuthenticationMethodConfig, Config, ControllerConfig, Interface, WifiController};
use esp_storage::FlashStorage;

use crate::board::Esp;
use crate::flash::Partition;
use crate::net::{Https, TLS_RX, TLS_TX};

esp_bootloader_esp_idf::esp_app_desc!();

/// Heap in RAM the second-stage bootloader used and gives back, plus heap in `.bss`: 128 KiB
/// for a turn (the emulator measures a turn's peak; docs/BENCHMARKS.md).
const RECLAIMED_HEAP_BYTES: usize = 64 * 1024;
const HEAP_BYTES: usize = 64 * 1024;

/// The longest message the device takes; a longer one gets a short reply, not a turn.
const MAX_MESSAGE_BYTES: usize = 4 * 1024;

macro_rules! mk_static {
    ($t:ty, $val:expr) => {{
        static STATIC_CELL: static_cell::StaticCell<$t> = static_cell::StaticCell::new();
        STATIC_CELL.uninit().write($val)
    }};
}

macro_rules! setting {
    ($name:literal) => {
        match option_env!($name) {
            Some(v) => v,
            None => "",
        }
    };
}

/// The build-time settings (`CHELA_*` environment variables when building).
struct Settings {
    ssid: &'static str,
    password: &'static str,
    tg_token: &'static str,
    tg_owner: &'static str,
    tg_allow: &'static str,
    provider: &'static str,
    api_key: &'static str,
    model: &'static str,
    gpio_allow: &'static str,
}

const SETTINGS: Settings = Settings {
    ssid: setting!("CHELA_WIFI_SSID"),
    password: setting!("CHELA_WIFI_PASSWORD"),
    tg_token: setting!("CHELA_TG_TOKEN"),
    tg_owner: setting!("CHELA_TG_OWNER"),
    tg_allow: setting!("CHELA_TG_ALLOW"),
    provider: setting!("CHELA_PROVIDER"),
    api_key: setting!("CHELA_API_KEY"),
    model: setting!("CHELA_MODEL"),
    gpio_allow: setting!("CHELA_GPIO_ALLOW"),
};

/// A secret as the console shows it: its length and last two characters at most.
fn masked(secret: &str) -> String {
    if secret.is_empty() {
        return "(not set)".into();
    }
    let tail: String =
        if secret.chars().count() >= 12 { secret.chars().rev().take(2).collect() } else { String::new() };
    format!("****{} ({} chars)", tail.chars().rev().collect::<String>(), secret.chars().count())
}

impl Settings {
    fn endpoint(&self) -> Result<Endpoint, String> {
        let (kind, base_url, model) = match self.provider {
            "" | "anthropic" => (Kind::Anthropic, "https://api.anthropic.com", "claude-sonnet-4-5"),
            "openai" => (Kind::OpenAi, "https://api.openai.com/v1", "gpt-4.1-mini"),
            other => return Err(format!("CHELA_PROVIDER is `{other}`: use anthropic or openai")),
        };
        if self.api_key.is_empty() {
            return Err("CHELA_API_KEY is not set".into());
        }
        let model = if self.model.is_empty() { model } else { self.model };
        Ok(Endpoint {
            kind,
            base_url: base_url.into(),
            api_key: self.api_key.into(),
            model: model.into(),
            max_tokens: 1024,
            stream: true,
        })
    }

    /// The build's settings as the core's console keeps them (the console's overrides in
    /// flash are loaded over them at boot).
    fn defaults(&self) -> ChipDefaults {
        ChipDefaults {
            wifi_ssid: self.ssid,
            wifi_password: self.password,
            tg_token: self.tg_token,
            tg_allow: self.tg_allow,
            provider: if self.provider.is_empty() { "anthropic" } else { self.provider },
            api_key: self.api_key,
            model: self.model,
            base_url: "",
        }
    }

    fn show(&self, board: &Esp) {
        say!(board, "[config] wifi ssid: {}", if self.ssid.is_empty() { "(not set)" } else { self.ssid });
        say!(board, "[config] wifi password: {}", masked(self.password));
        say!(board, "[config] telegram token: {}", masked(self.tg_token));
        say!(board, "[config] telegram owner: {} allow: [{}]", self.tg_owner, self.tg_allow);
        say!(board, "[config] provider: {} model: {}", self.provider, self.model);
        say!(board, "[config] api key: {}", masked(self.api_key));
        say!(board, "[config] gpio allowlist: [{}]", self.gpio_allow);
    }
}

/// After a panic, once esp-backtrace has printed the reason and the backtrace on the serial
/// console: reboot rather than hang (issue 9 §7).
#[unsafe(no_mangle)]
pub fn custom_halt() -> ! {
    esp_hal::system::software_reset()
}

/// Stops here for good, saying why every minute: a setting is missing or the flash is unusable.
async fn park(board: &Esp, why: &str) -> ! {
    loop {
        say!(board, "chela: stopped: {why}");
        Timer::after(Duration::from_secs(60)).await;
    }
}

#[esp_hal::main]
async fn main(spawner: Spawner) -> ! {
    let peripherals = esp_hal::init(esp_hal::Config::default().with_cpu_clock(CpuClock::max()));
    esp_alloc::heap_allocator!(#[esp_hal::ram(reclaimed)] size: RECLAIMED_HEAP_BYTES);
    esp_alloc::heap_allocator!(size: HEAP_BYTES);
    let timg0 = TimerGroup::new(peripherals.TIMG0);
    esp_rtos::start(timg0.timer0, peripherals.FROM_CPU_INTR0);

    let board = Esp;
    say!(&board, "chela: booting; heap {} B", RECLAIMED_HEAP_BYTES + HEAP_BYTES);
    SETTINGS.show(&board);
    let rng = Rng::new();
    let seed = (u64::from(rng.random()) << 32) | u64::from(rng.random());

    let partition = match Partition::find(FlashStorage::new(peripherals.FLASH)) {
        Ok(p) => p,
        Err(e) => park(&board, e).await,
    };
    let mut chip = match boot::power_on(partition, board, seed, SETTINGS.defaults()) {
        Ok(c) => c,
        Err(e) => park(&board, &e).await,
    };
    if let BootMode::Safe { quick_resets } = chip.guard.mode() {
        park(&board, &format!("safe mode after {quick_resets} quick resets in a row: channels stay off")).await;
    }
    let endpoint = match SETTINGS.endpoint() {
        Ok(e) => e,
        Err(e) => park(&board, &e).await,
    };
    let access = match Access::parse(SETTINGS.tg_owner, SETTINGS.tg_allow) {
        Ok(a) if a.owner.is_none() && a.allow.is_empty() => {
            park(&board, "set CHELA_TG_OWNER (or CHELA_TG_ALLOW): nobody may talk to the device").await
        }
        Ok(a) => a,
        Err(e) => park(&board, &e).await,
    };
    let mut gpio = match tools::Gpio::new(SETTINGS.gpio_allow) {
        Ok(g) => g,
        Err(e) => park(&board, &e).await,
    };
    if SETTINGS.ssid.is_empty() || SETTINGS.tg_token.is_empty() {
        park(&board, "set CHELA_WIFI_SSID, CHELA_WIFI_PASS and CHELA_TG_TOKEN").await;
    }

    let auth = if SETTINGS.password.is_empty() {
        AuthenticationMethodConfig::Open
    } else {
        match SETTINGS.password.try_into() {
            Ok(p) => AuthenticationMethodConfig::Wpa2Personal(p),
            Err(_) => park(&board, "CHELA_WIFI_PASS is too long").await,
        }
    };
    let ssid = match SETTINGS.ssid.try_into() {
        Ok(s) => s,
        Err(_) => park(&board, "CHELA_WIFI_SSID is too long").await,
    };
    let station = Config::Station(StationConfig::default().with_ssid(ssid).with_authentication(auth));
    let controller =
        match WifiController::new(peripherals.WIFI, ControllerConfig::default().with_initial_config(station)) {
            Ok(c) => c,
            Err(_) => park(&board, "the WiFi radio did not start").await,
        };
    let (stack, runner) = embassy_net::new(
        Interface::station(),
        embassy_net::Config::dhcpv4(Default::default()),
        mk_static!(StackResources<4>, StackResources::<4>::new()),
        seed,
    );
    match connection_task(controller) {
        Ok(t) => spawner.spawn(t),
        Err(_) => park(&board, "the WiFi task did not start").await,
    }
    match net_task(runner) {
        Ok(t) => spawner.spawn(t),
        Err(_) => park(&board, "the network task did not start").await,
    }
    stack.wait_config_up().await;
    if let Some(cfg) = stack.config_v4() {
        say!(&board, "[wifi] address {}", cfg.address);
    }
    for attempt in 1..=5u64 {
        match sntp(stack).await {
            Ok(unix) => {
                board.set_unix(unix);
                say!(&board, "[time] {}", chela_chip::tools::current_time(&board).unwrap_or_default());
                break;
            }
            Err(e) => {
                say!(&board, "[time] SNTP attempt {attempt} failed: {e}");
                Timer::after(Duration::from_secs(2 * attempt)).await;
            }
        }
    }

    let tcp =
        mk_static!(net::Tcp, net::Tcp::new(stack, mk_static!(TcpClientState<1, 4096, 4096>, TcpClientState::new())));
    let mut https = Https {
        tcp,
        dns: mk_static!(DnsSocket<'static>, DnsSocket::new(stack)),
        rx: mk_static!([u8; TLS_RX], [0; TLS_RX]),
        tx: mk_static!([u8; TLS_TX], [0; TLS_TX]),
        head: mk_static!([u8; 2048], [0; 2048]),
        rng,
    };
    serve(&mut chip, &mut https, &endpoint, &access, &mut gpio).await
}

/// Long-polls Telegram and runs a turn for each admitted message, forever.
async fn serve(
    chip: &mut Chip<Partition, Esp>,
    https: &mut Https,
    endpoint: &Endpoint,
    access: &Access,
    gpio: &mut tools::Gpio,
) -> ! {
    let base = "https://api.telegram.org";
    let mut offset = 0i64;
    let mut failures = 0u32;
    loop {
        // Up long enough: this boot was not part of a crash loop (the boot guard's counter
        // goes back to 0, once).
        let uptime = chip.board.now_ms();
        if let Err(e) = chip.guard.handle_uptime(&mut chip.store, uptime) {
            say!(&chip.board, "[boot] the boot counter could not be reset: {e}");
        }
        let url = format!("{base}{}", telegram::updates_path(SETTINGS.tg_token, offset));
        let polled = match https.get(&url, telegram::MAX_UPDATES_BYTES).await {
            Ok(c) if c.status == 200 || c.truncated => telegram::parse_updates(&c.body, c.truncated, access),
            Ok(c) => Err(format!("getUpdates answered {}", c.status)),
            Err(e) => Err(format!("getUpdates failed: {e}")),
        };
        let updates = match polled {
            Ok(Polled::Updates(u)) => {
                failures = 0;
                u
            }
            Ok(Polled::TooLarge { update_id, chat_id }) => {
                say!(&chip.board, "[telegram] an update over {} bytes was refused", telegram::MAX_UPDATES_BYTES);
                if let Some(id) = update_id {
                    offset = id + 1;
                }
                if let Some(chat) = chat_id.filter(|c| access.admits(*c)) {
                    let body = telegram::plain_body(
                        chat,
                        "That message is too large for this device; please send a shorter one.",
                    );
                    send(https, &body).await;
                }
                continue;
            }
            Err(e) => {
                failures += 1;
                say!(&chip.board, "[telegram] {e}");
                // Bounded back-off: 2 s, 4 s, ... at most 64 s.
                Timer::after(Duration::from_secs(1 << failures.min(6))).await;
                continue;
            }
        };
        for update in updates {
            offset = offset.max(update.id() + 1);
            let Update::Text { chat_id, text, .. } = update else { continue };
            if text.len() > MAX_MESSAGE_BYTES {
                let body = telegram::plain_body(
                    chat_id,
                    "That message is too long for this device; please send a shorter one.",
                );
                send(https, &body).await;
                continue;
            }
            let reply = match one_turn(chip, https, endpoint, gpio, chat_id, &text).await {
                Ok(r) => r,
                Err(e) => {
                    say!(&chip.board, "[turn] failed: {e}");
                    "(this turn failed on the device; see its serial console)".into()
                }
            };
            for body in telegram::send_bodies(chat_id, &reply) {
                send(https, &body).await;
            }
        }
    }
}

/// One turn for `chat_id`'s message: its session from flash, the turn, the session back.
async fn one_turn(
    chip: &mut Chip<Partition, Esp>,
    https: &mut Https,
    endpoint: &Endpoint,
    gpio: &mut tools::Gpio,
    chat_id: i64,
    text: &str,
) -> Result<String, String> {
    let session = format!("tg_{chat_id}");
    let (history, skipped) = boot::history(chip, &session)?;
    if skipped > 0 {
        say!(&chip.board, "[session] {skipped} unreadable lines of {session} skipped");
    }
    let chat = format!("{chat_id}");
    let origin = Origin { channel: "telegram", chat_id: &chat };
    let t = turn::run(chip, endpoint, https, gpio, origin, history, text).await?;
    boot::persist(chip, &session, &t)?;
    say!(
        &chip.board,
        "[turn] {} model calls, {} tool calls, {} in / {} out tokens",
        t.model_calls,
        t.tool_calls,
        t.usage.input_tokens,
        t.usage.output_tokens
    );
    Ok(t.text)
}

async fn send(https: &mut Https, body: &str) {
    let url = format!("https://api.telegram.org/bot{}/sendMessage", SETTINGS.tg_token);
    match https.post_json(&url, body, 2048).await {
        Ok(c) if c.status == 200 => {}
        Ok(c) => say!(&Esp, "[telegram] sendMessage answered {}", c.status),
        Err(e) => say!(&Esp, "[telegram] sendMessage failed: {e}"),
    }
}

/// Asks pool.ntp.org for the time: Unix seconds.
async fn sntp(stack: Stack<'static>) -> Result<u64, String> {
    let addrs = stack.dns_query("pool.ntp.org", DnsQueryType::A).await.map_err(|e| format!("DNS: {e:?}"))?;
    let addr = *addrs.first().ok_or("DNS gave no address")?;
    let (mut rx_meta, mut tx_meta) = ([PacketMetadata::EMPTY; 2], [PacketMetadata::EMPTY; 2]);
    let (mut rx, mut tx) = ([0u8; 128], [0u8; 128]);
    let mut socket = UdpSocket::new(stack, &mut rx_meta, &mut rx, &mut tx_meta, &mut tx);
    socket.bind(0).map_err(|e| format!("bind: {e:?}"))?;
    socket.send_to(&chela_chip::time::ntp_request(), (addr, 123)).await.map_err(|e| format!("send: {e:?}"))?;
    let mut reply = [0u8; chela_chip::time::NTP_PACKET];
    let (n, _) = with_timeout(Duration::from_secs(5), socket.recv_from(&mut reply))
        .await
        .map_err(|_| String::from("no answer within 5 s"))?
        .map_err(|e| format!("receive: {e:?}"))?;
    chela_chip::time::parse_ntp_reply(&reply[..n]).map_err(String::from)
}

#[embassy_executor::task]
async fn connection_task(mut controller: WifiController<'static>) {
    loop {
        match controller.connect_async().await {
            Ok(_) => {
                say!(&Esp, "[wifi] connected");
                let _ = controller.wait_for_disconnect_async().await;
                say!(&Esp, "[wifi] disconnected");
            }
            Err(e) => say!(&Esp, "[wifi] connect failed: {e:?}"),
        }
        Timer::after(Duration::from_secs(5)).await
    }
}

#[embassy_executor::task]
async fn net_task(mut runner: Runner<'static, Interface>) {
    runner.run().await
}
