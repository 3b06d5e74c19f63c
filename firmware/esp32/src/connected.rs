//! The connected parts, in an image built with the `connected` feature (both chips' by
//! default): over-the-air updates ([`ota`](crate::ota)), the gateway on 18789 with
//! `POST /ota` and the setup page ([`gateway`](crate::gateway)), the Wi-Fi onboarding portal
//! ([`portal`](crate::portal)), web_search, the heartbeat and the proxy (Feishu, which needs
//! them, is its own feature: [`feishu`](crate::feishu)). `without_connected.rs` has the same
//! items for an image without them, so `main.rs` calls these without a `cfg`.

use alloc::string::String;
use core::cell::RefCell;

use chela_chip::console::Channels;
use chela_chip::heartbeat::{self, Beat, Heartbeat};
use chela_chip::turn::Chip;
use chela_chip::{Board, say};
use chela_core::console::{ChipConfig, Console, Field};
use chela_core::heartbeat::ActiveHours;
use critical_section::Mutex;
use embassy_executor::Spawner;
use embassy_net::Stack;
use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embassy_sync::mutex::Mutex as AsyncMutex;
use esp_hal::peripherals::{GPIO9, WIFI};

use crate::board::Esp;
use crate::flash::{self, Partition};
use crate::{Device, SETTINGS, gateway, heap, led, net, ota, portal};

pub use chela_chip::turn::run_searching as run_turn;
pub use gateway::Ask;

/// The console's sentence for these parts' commands: `None`, they are in this image.
pub const LEFT_OUT: Option<&str> = None;
/// Network sockets the gateway's clients take beside the device's own.
pub const SOCKETS: usize = gateway::CLIENTS;
/// Whether a gateway token alone makes the device ready (no Telegram needed).
pub const GATEWAY: bool = true;

/// The update the console's `ota URL` asked for, run by the main loop.
static OTA_WANTED: Mutex<RefCell<Option<String>>> = Mutex::new(RefCell::new(None));

/// What the main loop keeps of these parts.
pub struct Parts {
    updates: gateway::SharedUpdates,
    heartbeat: Heartbeat,
}

/// The update slots, found at boot before the settings: an image on trial counts its boots here
/// and rolls back after too many.
pub struct Booted(gateway::SharedUpdates);

pub fn boot(flash: flash::Shared) -> Booted {
    let updates = mk_static!(AsyncMutex<NoopRawMutex, ota::Updates>, AsyncMutex::new(ota::Updates::boot(flash::ota_parts(flash))));
    Booted(updates)
}

/// No network set, or the boot button held: the set-up access point instead of the channels
/// (it never returns then). Otherwise the radio back for the station.
pub async fn portal_if_wanted(
    spawner: Spawner,
    wifi: WIFI<'static>,
    button: GPIO9<'static>,
    chip: &mut Chip<Partition, Esp>,
    console: &mut Console,
    seed: u64,
) -> WIFI<'static> {
    if !chela_chip::portal::wanted(&chip.config, portal::button_held(button)) {
        return wifi;
    }
    // Boxed: set-up mode's sockets and requests only on the heap, which it has to itself, not in
    // the main task's static state beside the station's.
    let why = alloc::boxed::Box::pin(portal::run(spawner, wifi, chip, console, seed)).await;
    crate::park(&chip.board, why).await
}

/// With the network stack up: the gateway's client tasks, the settings they read, the heartbeat.
pub fn start(spawner: Spawner, stack: Stack<'static>, booted: Booted, chip: &Chip<Partition, Esp>) -> Parts {
    take_settings(&chip.config);
    for slot in 0..gateway::CLIENTS {
        match gateway::task(stack, slot, booted.0) {
            Ok(t) => spawner.spawn(t),
            Err(_) => say!(&chip.board, "[gateway] client task {slot} did not start"),
        }
    }
    let hours = match SETTINGS.heartbeat_hours {
        "" => Ok(ActiveHours::ALWAYS),
        h => ActiveHours::parse(h),
    };
    let hours = hours.unwrap_or_else(|e| {
        say!(&chip.board, "[heartbeat] CHELA_HEARTBEAT_HOURS ignored (all day): {e}");
        ActiveHours::ALWAYS
    });
    let heartbeat = Heartbeat::new(heartbeat::EVERY_MS, hours, chip.board.now_ms());
    Parts { updates: booted.0, heartbeat }
}

/// The settings other tasks read: the gateway's token and the proxy (the rest is read from the
/// settings before every poll and turn).
pub fn take_settings(config: &ChipConfig) {
    gateway::set_token(config.get(Field::GatewayToken));
    net::set_proxy(config.get(Field::Proxy));
}

/// The console's `ota URL`: run by the main loop once the network is up.
pub fn want_update(board: &Esp, url: String, network: bool) {
    if network {
        critical_section::with(|cs| *OTA_WANTED.borrow_ref_mut(cs) = Some(url));
    } else {
        say!(board, "[ota] no network in safe mode: fix the settings and restart first");
    }
}

/// The next gateway client's message or setup-page request.
pub async fn asks() -> Ask {
    gateway::ASKS.receive().await
}

impl Device {
    /// Runs a gateway client's message as a turn in its chat's session, or its setup page
    /// request; the answer goes back to the client's task.
    pub(crate) async fn answer_gateway(&mut self, ask: Ask) {
        let reply = match ask.work {
            gateway::Work::Turn { chat_id, content } => {
                let result = self.ws_turn(&chat_id, &content).await;
                // Its client closed the socket meanwhile: held for the chat's next client.
                if gateway::held_if_gone(ask.slot, ask.serial, &chat_id, result.as_deref().map_err(String::as_str)) {
                    return say!(
                        &self.chip.board,
                        "[gateway] the asker in chat {chat_id} left; the answer is held for its next client"
                    );
                }
                gateway::Reply::Turn(result)
            }
            gateway::Work::Setup { head, body } => {
                let token = String::from(self.chip.config.get(Field::GatewayToken));
                let access = chela_chip::portal::Access::Token(&token);
                let r = chela_chip::portal::handle(&head, &body, access, &mut self.chip.store, &mut self.chip.config);
                gateway::Reply::Page(r.to_http(), r.restart)
            }
        };
        gateway::ANSWERS[ask.slot].signal((ask.serial, reply));
    }

    /// A turn in the gateway chat `chat_id`'s session; its failure said on the console.
    async fn ws_turn(&mut self, chat_id: &str, content: &str) -> Result<String, String> {
        self.led(led::State::Thinking);
        let result = self.one_turn("ws", &chat_id, None, content).await;
        if let Err(e) = &result {
            say!(&self.chip.board, "[turn] failed: {e}");
        }
        self.led(if result.is_ok() { led::State::Ready } else { led::State::Error });
        heap();
        result
    }

    /// A scheduled job made in a gateway chat: the turn in the chat's session, the answer pushed
    /// to the clients connected in that chat (`gateway::push`), or kept in the session, said.
    pub(crate) async fn gateway_job(&mut self, id: &str, chat_id: &str, text: &str) {
        let result = self.ws_turn(chat_id, text).await;
        let (connected, took) = gateway::push(chat_id, result.as_deref().map_err(String::as_str));
        // None connected, or some too busy to take it: said (a failed turn was said already).
        if result.is_ok() && took < connected.max(1) {
            let held = if took == 0 { ", and held for its next client" } else { "" };
            say!(
                &self.chip.board,
                "[cron] {id}: {took} of {connected} clients of gateway chat {chat_id} took the answer; it is kept in the chat's session{held}"
            );
        }
    }

    /// With the network up: the image is kept once it has run a minute (the boot guard's good
    /// boot; a new image on trial is kept from here on), and the console's update is fetched.
    pub(crate) async fn connected_up(&mut self, uptime: u64) {
        // Not while a gateway client writes an update (it holds the lock for minutes).
        if uptime >= 60_000
            && let Ok(mut u) = self.parts.updates.try_lock()
        {
            u.ready();
        }
        if let Some(url) = critical_section::with(|cs| OTA_WANTED.borrow_ref_mut(cs).take()) {
            match self.parts.updates.try_lock() {
                // Boxed: an update's download state only on the heap, while it runs.
                Ok(mut u) => alloc::boxed::Box::pin(u.fetch(&mut self.https, &mut self.tools.first.second, &url)).await,
                Err(_) => say!(&self.chip.board, "[ota] an update is already being written"),
            }
        }
    }

    /// The heartbeat: when due and inside its hours, `HEARTBEAT.md`'s open items become a turn
    /// in the owner's chat on the chat channel in use (`heartbeat::target`), or the console
    /// says why there is none.
    pub(crate) async fn beat(&mut self, on: Channels) {
        let prompt = match self.parts.heartbeat.poll(&self.chip) {
            Ok(Beat::Prompt(p)) => p,
            Ok(Beat::NotYet | Beat::Outside | Beat::Nothing) => return,
            Err(e) => return say!(&self.chip.board, "[heartbeat] {e}"),
        };
        match heartbeat::target(&self.chip.config, on, crate::feishu::FEISHU, &self.chip.store) {
            Ok(route) => {
                say!(&self.chip.board, "[heartbeat] open items: a turn in the owner's chat");
                let owner = String::from(heartbeat::owner(&self.chip.config));
                self.run_routed("heartbeat", route, &owner, &prompt).await;
            }
            Err(e) => say!(&self.chip.board, "[heartbeat] open items, but {e}"),
        }
    }
}
