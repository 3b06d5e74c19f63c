//! Chela on an ESP32-C3 or ESP32-C6: the same agent core as the host, over WiFi.
//!
//! What it is: esp-hal with esp-rtos/embassy; WiFi station (esp-radio) with DHCP and DNS
//! (embassy-net); HTTPS with pinned root CAs (reqwless over embedded-tls, [`net`]); SNTP for
//! the clock; Telegram long polling for the person (unknown chats get nothing); each message
//! runs one turn of `chela-core` through the shared chip driver (`chela-chip`, the code the
//! emulator turn runs), streamed from Anthropic or an OpenAI-compatible API; sessions and
//! memory in the `chela` flash partition through the core's flash store ([`flash`]); the
//! serial console ([`serial`], `chela_core::console`) on the chip's USB and UART0; scheduled
//! jobs (`chela_chip::cron`); the status LED ([`led`]); the I²C sensors of a build-time
//! board.json (`chela_chip::board` over [`hw`]).
//!
//! Settings are typed on the serial console and kept in flash; the build's environment
//! (`CHELA_*`, docs/guide/chip.md) gives the defaults. Nothing here was run on
//! a board: it builds, links and is accepted by `esptool elf2image`; the shared logic is
//! tested on the host and on QEMU.
#![no_std]
#![no_main]

extern crate alloc;

mod board;
mod certs;
mod flash;
mod hw;
mod led;
mod net;
mod serial;
mod tools;

use alloc::format;
use alloc::string::String;
use core::cell::{Cell, RefCell};

use chela_chip::board::Sensors;
use chela_chip::cron::{Cron, Route};
use chela_chip::telegram::{self, Polled, Update};
use chela_chip::tools::Join;
use chela_chip::turn::{Chip, Origin};
use chela_chip::{Board, boot, say};
use chela_core::console::{BootMode, ChipConfig, ChipDefaults, Console, Effect, Field, Heap, Status, Wifi};
use critical_section::Mutex;
use embassy_executor::Spawner;
use embassy_futures::select::{Either, Either3, select, select3};
use embassy_net::dns::DnsSocket;
use embassy_net::tcp::client::TcpClientState;
use embassy_net::{Runner, Stack, StackResources};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::signal::Signal;
use embassy_time::{Duration, Timer, with_timeout};
use esp_backtrace as _;
use esp_hal::clock::CpuClock;
use esp_hal::rmt::Rmt;
use esp_hal::rng::Rng;
use esp_hal::time::Rate;
use esp_hal::timer::timg::TimerGroup;
use esp_hal::uart::{Config as UartConfig, UartRx};
use esp_hal::usb::usb_serial_jtag::UsbSerialJtag;
use esp_hal_smartled::{RmtSmartLeds, WS2812_TIMING};
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

// OTA, the gateway, the portal, web_search, the heartbeat and the proxy: in the image with the
// `connected` feature (build.sh: both chips' by default), said to be left out by the console
// otherwise.
#[cfg(feature = "connected")]
mod connected;
#[cfg(not(feature = "connected"))]
#[path = "without_connected.rs"]
mod connected;
#[cfg(feature = "connected")]
mod gateway;
#[cfg(feature = "connected")]
mod ota;
#[cfg(feature = "connected")]
mod portal;
// Feishu's channel (it needs `connected`): in the image with the `feishu` feature (build.sh: the
// C6's by default), refused by the console otherwise.
#[cfg(feature = "feishu")]
mod feishu;
#[cfg(not(feature = "feishu"))]
#[path = "without_feishu.rs"]
mod feishu;

macro_rules! setting {
    ($name:literal) => {
        match option_env!($name) {
            Some(v) => v,
            None => "",
        }
    };
}

/// The build-time settings (`CHELA_*` environment variables when building): the defaults the
/// serial console's settings, kept in flash, override.
struct Settings {
    ssid: &'static str,
    password: &'static str,
    tg_token: &'static str,
    tg_owner: &'static str,
    tg_allow: &'static str,
    provider: &'static str,
    api_key: &'static str,
    model: &'static str,
    base_url: &'static str,
    gpio_allow: &'static str,
    tavily_key: &'static str,
    brave_key: &'static str,
    proxy: &'static str,
    gateway_token: &'static str,
    /// The heartbeat's active hours, UTC (`08:00-22:00`); empty: all day.
    #[cfg_attr(not(feature = "connected"), allow(dead_code))]
    heartbeat_hours: &'static str,
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
    base_url: setting!("CHELA_BASE_URL"),
    gpio_allow: setting!("CHELA_GPIO_ALLOW"),
    tavily_key: setting!("CHELA_TAVILY_KEY"),
    brave_key: setting!("CHELA_BRAVE_KEY"),
    proxy: setting!("CHELA_PROXY"),
    gateway_token: setting!("CHELA_GATEWAY_TOKEN"),
    heartbeat_hours: setting!("CHELA_HEARTBEAT_HOURS"),
};

impl Settings {
    /// The build's settings as the core's console keeps them. `CHELA_TG_OWNER` goes first in
    /// the allowlist (the console's `tg_allow` is "the owner's first").
    fn defaults(&self) -> ChipDefaults {
        let allow: &'static str = match (self.tg_owner.trim(), self.tg_allow.trim()) {
            ("", a) => a,
            (o, "") => o,
            (o, a) => alloc::boxed::Box::leak(format!("{o},{a}").into_boxed_str()),
        };
        ChipDefaults {
            wifi_ssid: self.ssid,
            wifi_password: self.password,
            tg_token: self.tg_token,
            tg_allow: allow,
            provider: self.provider,
            api_key: self.api_key,
            model: self.model,
            base_url: self.base_url,
            tavily_key: self.tavily_key,
            brave_key: self.brave_key,
            proxy: self.proxy,
            gateway_token: self.gateway_token,
        }
    }
}

/// After a panic, once esp-backtrace has printed the reason and a stack dump on the serial
/// console (`espflash monitor` turns the dump into a backtrace from the ELF): reboot rather than
/// hang, so a crash never leaves the chip dead.
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

/// The WiFi network the connection task joins: set from the settings in force at boot and
/// again when the console changes them (`wifi_set`, `config_reset`).
static WIFI_WANTED: Mutex<RefCell<Option<(String, String)>>> = Mutex::new(RefCell::new(None));
static WIFI_CHANGED: Signal<CriticalSectionRawMutex, ()> = Signal::new();
/// What the connection task last saw, for `wifi_status`: connected, and the signal strength.
static WIFI_SEEN: Mutex<Cell<(bool, i8, bool)>> = Mutex::new(Cell::new((false, 0, false)));
/// The least free heap seen, for `heap_info`.
static MIN_FREE: Mutex<Cell<usize>> = Mutex::new(Cell::new(usize::MAX));

fn want_wifi(config: &ChipConfig) {
    let ssid = config.get(Field::WifiSsid);
    let wanted = (!ssid.is_empty()).then(|| (String::from(ssid), String::from(config.get(Field::WifiPassword))));
    critical_section::with(|cs| *WIFI_WANTED.borrow_ref_mut(cs) = wanted);
    WIFI_CHANGED.signal(());
}

fn heap() -> Heap {
    let free = esp_alloc::HEAP.free();
    let total = free + esp_alloc::HEAP.used();
    let min_free = critical_section::with(|cs| {
        let m = MIN_FREE.borrow(cs);
        m.set(m.get().min(free));
        m.get()
    });
    Heap { total, free, min_free }
}

fn status(chip: &Chip<Partition, Esp>, stack: Option<Stack<'static>>) -> Status {
    let (connected, rssi, trying) = critical_section::with(|cs| WIFI_SEEN.borrow(cs).get());
    let wanted = critical_section::with(|cs| WIFI_WANTED.borrow_ref(cs).is_some());
    let wifi = match (stack.and_then(|s| s.config_v4()), connected, trying) {
        _ if stack.is_none() || !wanted => Wifi::Off,
        (Some(cfg), true, _) => Wifi::Connected { ip: cfg.address.address().octets(), rssi },
        // Associated but no DHCP lease yet, or still joining.
        (_, true, _) | (_, _, true) => Wifi::Connecting,
        _ => Wifi::Failed,
    };
    // Fresh for every line: `gateway_token` makes its token from them.
    let mut random = [0u8; 16];
    Rng::new().read(&mut random);
    let (uptime_ms, mode) = (chip.board.now_ms(), Some(chip.guard.mode()));
    Status { wifi, heap: heap(), uptime_ms, mode, random, left_out: connected::LEFT_OUT, feishu: feishu::FEISHU }
}

/// Reads what was typed and runs it on the console; carries out the effects.
fn console_bytes(chip: &mut Chip<Partition, Esp>, console: &mut Console, bytes: &[u8], stack: Option<Stack<'static>>) {
    let st = status(chip, stack);
    for effect in chela_chip::console::feed(chip, console, bytes, st) {
        match effect {
            Effect::Restart => {
                say!(&chip.board, "chela: restarting");
                esp_hal::system::software_reset()
            }
            Effect::ReconnectWifi => {
                want_wifi(&chip.config);
                connected::take_settings(&chip.config);
            }
            Effect::ConfigChanged => connected::take_settings(&chip.config),
            Effect::Update(url) => connected::want_update(&chip.board, url, stack.is_some()),
            // Sessions and MEMORY.md are read from flash each turn.
            Effect::SessionCleared(_) | Effect::MemoryChanged => {}
        }
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
    let rng = Rng::new();
    let seed = (u64::from(rng.random()) << 32) | u64::from(rng.random());

    // The console first: it works in safe mode and when a setting is missing.
    let usb = UsbSerialJtag::new(peripherals.USB_DEVICE).into_async().split().0;
    #[cfg(feature = "esp32c3")]
    let uart_rx_pin = peripherals.GPIO20;
    #[cfg(feature = "esp32c6")]
    let uart_rx_pin = peripherals.GPIO17;
    let uart = UartRx::new(peripherals.UART0, UartConfig::default()).ok().map(|u| u.with_rx(uart_rx_pin).into_async());
    match serial::input_task(usb, uart) {
        Ok(t) => spawner.spawn(t),
        Err(_) => say!(&board, "chela: the console's input task did not start"),
    }

    let rmt = Rmt::new(peripherals.RMT, Rate::from_mhz(80)).ok();
    let ws = rmt.and_then(|r| RmtSmartLeds::new(WS2812_TIMING, r.channel0, peripherals.GPIO8, Rate::from_mhz(80)).ok());
    let mut led = led::Led::new(ws);
    led.show(led::State::Error);
    led.show(led::State::Connecting);

    let flash = mk_static!(RefCell<FlashStorage<'static>>, RefCell::new(FlashStorage::new(peripherals.FLASH)));
    let partition = match Partition::find(flash) {
        Ok(p) => p,
        Err(e) => park(&board, e).await,
    };
    let booted = connected::boot(flash);
    let mut chip = match boot::power_on(partition, board, seed, SETTINGS.defaults()) {
        Ok(c) => c,
        Err(e) => park(&board, &e).await,
    };
    let mut console = Console::new();
    say!(&board, "[config]\n{}", chip.config.show().trim_end());
    board.print(format_args!("{}", Console::banner(chip.guard.mode())));
    if let BootMode::Safe { .. } = chip.guard.mode() {
        // Channels off, console on: a crash loop stops here until the settings are fixed.
        led.show(led::State::Error);
        let mut buf = [0u8; 64];
        loop {
            let n = serial::read(&mut buf).await;
            console_bytes(&mut chip, &mut console, &buf[..n], None);
        }
    }

    let wifi =
        connected::portal_if_wanted(spawner, peripherals.WIFI, peripherals.GPIO9, &mut chip, &mut console, seed).await;

    let gpio = match tools::Gpio::new(SETTINGS.gpio_allow) {
        Ok(g) => g,
        Err(e) => {
            say!(&board, "[gpio] CHELA_GPIO_ALLOW ignored: {e}");
            tools::Gpio::new("").unwrap_or_else(|_| unreachable!("an empty allowlist is valid"))
        }
    };
    let (cron, bad) = Cron::load(&chip);
    for b in &bad {
        say!(&board, "[cron] {b}");
    }
    say!(&board, "[cron] {} jobs", cron.len());
    // The build's board.json (CHELA_BOARD): its I2C sensors on I2C0.
    let (sensors, notes) = Sensors::open(hw::BOARD.as_ref(), &mut hw::Hw::new(peripherals.I2C0));
    for n in &notes {
        say!(&board, "{n}");
    }

    let controller = match WifiController::new(wifi, ControllerConfig::default()) {
        Ok(c) => c,
        Err(_) => park(&board, "the WiFi radio did not start").await,
    };
    let (stack, runner) = embassy_net::new(
        Interface::station(),
        embassy_net::Config::dhcpv4(Default::default()),
        // DHCP, DNS, SNTP, the HTTPS client, the gateway's clients and Feishu's connection.
        mk_static!(StackResources<{ 4 + connected::SOCKETS + feishu::SOCKETS }>, StackResources::new()),
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
    want_wifi(&chip.config);
    let parts = connected::start(spawner, stack, booted, &chip);
    feishu::start(spawner, stack, &chip.board);

    let tcp =
        mk_static!(net::Tcp, net::Tcp::new(stack, mk_static!(TcpClientState<1, 4096, 4096>, TcpClientState::new())));
    let https = Https {
        tcp,
        dns: mk_static!(DnsSocket<'static>, DnsSocket::new(stack)),
        rx: mk_static!([u8; TLS_RX], [0; TLS_RX]),
        tx: mk_static!([u8; TLS_TX], [0; TLS_TX]),
        rng,
    };
    let mut device = Device {
        chip,
        https,
        tools: Join::new::<Partition, Esp>(
            Join::new::<Partition, Esp>(gpio, led),
            Join::new::<Partition, Esp>(cron, sensors),
        ),
        console,
        stack,
        offset: 0,
        failures: 0,
        next_sntp_ms: 0,
        last_complaint_ms: None,
        parts,
        feishu: None,
    };
    device.serve().await
}

type Tools = Join<Join<tools::Gpio, led::Led>, Join<Cron, Sensors<hw::Hw>>>;

/// Everything the main loop works on.
struct Device {
    chip: Chip<Partition, Esp>,
    https: Https,
    tools: Tools,
    console: Console,
    stack: Stack<'static>,
    /// Telegram's next update id.
    offset: i64,
    /// Polls failed in a row (the back-off).
    failures: u32,
    next_sntp_ms: u64,
    /// When the device last said which setting is missing.
    last_complaint_ms: Option<u64>,
    /// What the connected parts keep (nothing in an image without them).
    #[cfg_attr(not(feature = "connected"), allow(dead_code))]
    parts: connected::Parts,
    /// What Feishu keeps (`feishu::State`).
    feishu: feishu::State,
}

impl Device {
    fn led(&mut self, s: led::State) {
        let s = led::held(self.chip.board.now_ms()).unwrap_or(s);
        self.tools.first.second.show(s);
    }

    fn console(&mut self, bytes: &[u8]) {
        console_bytes(&mut self.chip, &mut self.console, bytes, Some(self.stack));
    }

    /// Waits up to `ms` for console input or a gateway client's message, running what came.
    async fn idle(&mut self, ms: u64) {
        let mut buf = [0u8; 64];
        match with_timeout(Duration::from_millis(ms), select(serial::read(&mut buf), connected::asks())).await {
            Ok(Either::First(n)) => self.console(&buf[..n]),
            Ok(Either::Second(ask)) => self.answer_gateway(ask).await,
            Err(_) => {}
        }
    }

    /// The main loop: console, clock, due jobs, then one Telegram poll, forever.
    async fn serve(&mut self) -> ! {
        let mut buf = [0u8; 64];
        loop {
            loop {
                let n = serial::take(&mut buf);
                if n == 0 {
                    break;
                }
                self.console(&buf[..n]);
            }
            // Up long enough: this boot was not part of a crash loop (the boot guard's
            // counter goes back to 0, once).
            let uptime = self.chip.board.now_ms();
            if let Err(e) = self.chip.guard.handle_uptime(&mut self.chip.store, uptime) {
                say!(&self.chip.board, "[boot] the boot counter could not be reset: {e}");
            }
            if self.stack.is_config_up() {
                self.connected_up(uptime).await;
            }
            // A gateway token alone is a channel too, in an image with the gateway.
            let channels = match chela_chip::console::channels(&self.chip.config, connected::GATEWAY) {
                Ok(c) => c,
                Err(e) => {
                    self.feishu_off();
                    if self.last_complaint_ms.is_none_or(|t| uptime >= t + 60_000) {
                        say!(&self.chip.board, "chela: channels wait: {e}");
                        self.last_complaint_ms = Some(uptime);
                    }
                    self.led(led::State::Connecting);
                    self.idle(1000).await;
                    continue;
                }
            };
            if !self.stack.is_config_up() {
                self.led(led::State::Connecting);
                self.idle(500).await;
                continue;
            }
            if self.chip.board.unix().is_none() && uptime >= self.next_sntp_ms {
                match net::sntp(self.stack).await {
                    Ok(unix) => {
                        self.chip.board.set_unix(unix);
                        say!(
                            &self.chip.board,
                            "[time] {}",
                            chela_chip::tools::current_time(&self.chip.board).unwrap_or_default()
                        );
                    }
                    Err(e) => {
                        say!(&self.chip.board, "[time] SNTP failed: {e}; again in 30 s");
                        self.next_sntp_ms = uptime + 30_000;
                    }
                }
            }
            self.run_due_jobs(channels).await;
            self.beat(channels).await;
            if self.failures == 0 {
                self.led(led::State::Ready);
            }
            if channels.feishu {
                self.feishu().await;
                continue;
            }
            // One chat channel at a time: Feishu's connection goes before Telegram's polls.
            self.feishu_off();
            if channels.telegram {
                self.poll().await;
            } else {
                // Only the gateway: its clients and the console are served from the idle wait.
                self.idle(1000).await;
            }
        }
    }

    /// Runs the cron jobs that are due, each as a turn in the chat that scheduled it when that
    /// chat can be reached now (`Cron::route`), else says why, once.
    async fn run_due_jobs(&mut self, on: chela_chip::console::Channels) {
        let (fired, err) = self.tools.second.first.due(&mut self.chip);
        if let Some(e) = err {
            say!(&self.chip.board, "[cron] {e}");
        }
        for job in fired {
            say!(&self.chip.board, "[cron] {} is due", job.id);
            match self.tools.second.first.route(&job, &self.chip.config, on, feishu::FEISHU) {
                Ok(route) => {
                    let text = format!("[scheduled job {}] {}", job.id, job.message);
                    self.run_routed(&job.id, route, job.maker(), &text).await;
                }
                Err(Some(why)) => say!(&self.chip.board, "[cron] {why}"),
                Err(None) => {}
            }
        }
    }

    /// Runs `text` as a turn in the chat `route` names and delivers the answer there (`id`: the
    /// job's, or the heartbeat, for the console), for `maker` (who made the job, or the owner:
    /// a job the turn adds is theirs; on Telegram and the gateway, always the chat itself).
    async fn run_routed(&mut self, id: &str, route: Route, maker: &str, text: &str) {
        match route {
            Route::Telegram(chat_id) => self.answer(chat_id, text).await,
            Route::Feishu(chat_id) => self.feishu_job(id, &chat_id, maker, text).await,
            Route::Gateway(chat_id) => self.gateway_job(id, &chat_id, text).await,
        }
    }

    /// One long poll of Telegram (given up for console input), and a turn for each message.
    async fn poll(&mut self) {
        let token = String::from(self.chip.config.get(Field::TgToken));
        let access = match chela_chip::console::access(&self.chip.config) {
            Ok(a) => a,
            Err(e) => {
                say!(&self.chip.board, "[telegram] {e}");
                self.idle(5000).await;
                return;
            }
        };
        let url = format!("{TELEGRAM}{}", telegram::updates_path(&token, self.offset));
        let mut typed = [0u8; 64];
        let poll = self.https.get(&url, telegram::MAX_UPDATES_BYTES);
        let got = match select3(poll, serial::read(&mut typed), connected::asks()).await {
            Either3::First(got) => got,
            Either3::Second(n) => {
                // Typing wins over the poll; Telegram keeps the updates for the next one.
                let bytes = typed;
                self.console(&bytes[..n]);
                return;
            }
            // So does a gateway client.
            Either3::Third(ask) => return self.answer_gateway(ask).await,
        };
        let polled = match got {
            Ok(c) if c.status == 200 || c.truncated => telegram::parse_updates(&c.body, c.truncated, &access),
            Ok(c) => Err(format!("getUpdates answered {}", c.status)),
            Err(e) => Err(format!("getUpdates failed: {e}")),
        };
        let updates = match polled {
            Ok(Polled::Updates(u)) => {
                self.failures = 0;
                u
            }
            Ok(Polled::TooLarge { update_id, chat_id }) => {
                say!(&self.chip.board, "[telegram] an update over {} bytes was refused", telegram::MAX_UPDATES_BYTES);
                if let Some(id) = update_id {
                    self.offset = id + 1;
                }
                if let Some(chat) = chat_id.filter(|c| access.admits(*c)) {
                    let body = telegram::plain_body(
                        chat,
                        "That message is too large for this device; please send a shorter one.",
                    );
                    self.send(&body).await;
                }
                return;
            }
            Err(e) => {
                self.failures += 1;
                say!(&self.chip.board, "[telegram] {e}");
                self.led(led::State::Error);
                // Bounded back-off: 2 s, 4 s, ... at most 64 s; the console stays live.
                self.idle(1000 << self.failures.min(6)).await;
                return;
            }
        };
        for update in updates {
            self.offset = self.offset.max(update.id() + 1);
            let Update::Text { chat_id, text, .. } = update else { continue };
            if text.len() > MAX_MESSAGE_BYTES {
                let body = telegram::plain_body(
                    chat_id,
                    "That message is too long for this device; please send a shorter one.",
                );
                self.send(&body).await;
                continue;
            }
            self.answer(chat_id, &text).await;
        }
    }

    /// Runs a turn for `text` in `chat_id`'s session and sends the reply.
    async fn answer(&mut self, chat_id: i64, text: &str) {
        self.led(led::State::Thinking);
        let reply = self.one_turn("telegram", &chat_id, None, text).await;
        let reply = self.reply_shown(reply);
        for body in telegram::send_bodies(chat_id, &reply) {
            self.send(&body).await;
        }
        heap();
    }

    /// One turn for the message of `chat_id` on `channel`: its session from flash, the turn,
    /// the session back. (The chat's text is made here, not held by the callers across the turn.)
    /// What a chat is sent after a turn: its reply, or (the failure on the serial console) a
    /// line saying it failed; the status LED says which.
    fn reply_shown(&mut self, reply: Result<String, String>) -> String {
        match reply {
            Ok(r) => {
                self.led(led::State::Ready);
                r
            }
            Err(e) => {
                say!(&self.chip.board, "[turn] failed: {e}");
                self.led(led::State::Error);
                "(this turn failed on the device; see its serial console)".into()
            }
        }
    }

    async fn one_turn(
        &mut self,
        channel: &'static str,
        chat_id: &dyn core::fmt::Display,
        maker: Option<&str>,
        text: &str,
    ) -> Result<String, String> {
        let endpoint = chela_chip::console::endpoint(&self.chip.config)?;
        let chat = format!("{chat_id}");
        let session = boot::session_key(channel, &chat);
        let (history, skipped) = boot::history(&self.chip, &session)?;
        if skipped > 0 {
            say!(&self.chip.board, "[session] {skipped} unreadable lines of {session} skipped");
        }
        // Who a job this turn adds is made by: set here, from the turn's origin (the chat itself
        // unless the caller names the person: a Feishu sender, a job's maker, the owner).
        self.tools.second.first.set_origin(channel, &chat, maker.unwrap_or(&chat));
        let origin = Origin { channel, chat_id: &chat };
        let t = connected::run_turn(&mut self.chip, &endpoint, &mut self.https, &mut self.tools, origin, history, text)
            .await?;
        boot::persist(&mut self.chip, &session, &t)?;
        say!(
            &self.chip.board,
            "[turn] {} model calls, {} tool calls, {} in / {} out tokens",
            t.model_calls,
            t.tool_calls,
            t.usage.input_tokens,
            t.usage.output_tokens
        );
        Ok(t.text)
    }

    async fn send(&mut self, body: &str) {
        let url = format!("{TELEGRAM}/bot{}/sendMessage", self.chip.config.get(Field::TgToken));
        match self.https.post_json(&url, body, 2048).await {
            Ok(c) if c.status == 200 => {}
            Ok(c) => say!(&self.chip.board, "[telegram] sendMessage answered {}", c.status),
            Err(e) => say!(&self.chip.board, "[telegram] sendMessage failed: {e}"),
        }
    }
}

const TELEGRAM: &str = "https://api.telegram.org";

fn seen(connected: bool, rssi: i8, trying: bool) {
    critical_section::with(|cs| WIFI_SEEN.borrow(cs).set((connected, rssi, trying)));
}

/// Joins the network the settings name, rejoins after a drop, and switches when the console
/// changes it.
#[embassy_executor::task]
async fn connection_task(mut controller: WifiController<'static>) {
    loop {
        let wanted = critical_section::with(|cs| WIFI_WANTED.borrow_ref(cs).clone());
        let Some((ssid, password)) = wanted else {
            seen(false, 0, false);
            WIFI_CHANGED.wait().await;
            continue;
        };
        WIFI_CHANGED.reset();
        let auth = if password.is_empty() {
            Ok(AuthenticationMethodConfig::Open)
        } else {
            password.as_str().try_into().map(AuthenticationMethodConfig::Wpa2Personal)
        };
        let station = match (ssid.as_str().try_into(), auth) {
            (Ok(s), Ok(a)) => Config::Station(StationConfig::default().with_ssid(s).with_authentication(a)),
            _ => {
                say!(&Esp, "[wifi] the network name or password does not fit the radio");
                seen(false, 0, false);
                WIFI_CHANGED.wait().await;
                continue;
            }
        };
        if let Err(e) = controller.set_config(&station) {
            say!(&Esp, "[wifi] the radio refused the settings: {e:?}");
            seen(false, 0, false);
            WIFI_CHANGED.wait().await;
            continue;
        }
        seen(false, 0, true);
        say!(&Esp, "[wifi] joining \"{ssid}\"");
        match select(controller.connect_async(), WIFI_CHANGED.wait()).await {
            Either::First(Ok(_)) => {
                let rssi = controller.rssi().map(|r| r.clamp(-128, 0) as i8).unwrap_or(0);
                seen(true, rssi, false);
                say!(&Esp, "[wifi] connected ({rssi} dBm)");
                let changed = matches!(
                    select(controller.wait_for_disconnect_async(), WIFI_CHANGED.wait()).await,
                    Either::Second(_)
                );
                seen(false, 0, true);
                if changed {
                    let _ = controller.disconnect_async().await;
                    say!(&Esp, "[wifi] settings changed: rejoining");
                    WIFI_CHANGED.signal(());
                    continue;
                }
                say!(&Esp, "[wifi] disconnected");
            }
            Either::First(Err(e)) => {
                seen(false, 0, false);
                // Written out: a derived `Debug` names the variant alone in this image.
                match e {
                    esp_radio::wifi::ConnectionError::Failed(why) => {
                        say!(&Esp, "[wifi] connect failed: {:?} ({} dBm)", why.reason, why.rssi)
                    }
                    esp_radio::wifi::ConnectionError::WifiError(e) => say!(&Esp, "[wifi] connect failed: {e:?}"),
                    _ => say!(&Esp, "[wifi] connect failed"),
                }
            }
            Either::Second(()) => {
                WIFI_CHANGED.signal(());
                continue;
            }
        }
        // Retry in 5 s, or at once if the settings change meanwhile.
        if let Either::Second(()) = select(Timer::after(Duration::from_secs(5)), WIFI_CHANGED.wait()).await {
            WIFI_CHANGED.signal(());
        }
    }
}

#[embassy_executor::task]
async fn net_task(mut runner: Runner<'static, Interface>) {
    runner.run().await
}
