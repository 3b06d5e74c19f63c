//! Feishu on the chip (an image built with the `feishu` feature, both chips' default; `channel
//! feishu`): a task holds the
//! long connection (WSS over the chip's verified TLS, `chela_chip::feishu`), and the main loop
//! does the rest on its own HTTPS session: the endpoint, the turn, the reply (`feishu::Api`).
//!
//! The split: the main loop already owns the one HTTPS session the turns use; the task owns a
//! second TLS session that must stay open while a turn runs (Feishu's pings and acks do not wait
//! for a model). Telegram's long poll is off meanwhile: a third session does not fit the heap.
//!
//! The task's buffers (TCP, TLS records, the connection's state) are on the heap while it is
//! connected and nowhere otherwise: its future is boxed, so the task's static slot is a pointer.
//! Before each connection the main loop checks the heap holds what a connection and a turn take
//! at their peaks, and says so on the console instead of connecting when it does not.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_chip::feishu::conn::{self, Action, Incoming};
use chela_chip::feishu::{self as fs, Access, Api, ClientConfig, Failure, duplex, socket};
use chela_chip::heartbeat;
use chela_chip::tls::{self, Trust};
use chela_chip::{Board, say};
use embassy_executor::Spawner;
use embassy_futures::select::{Either, Either4, select, select4};
use embassy_net::Stack;
use embassy_net::dns::DnsQueryType;
use embassy_net::tcp::{TcpReader, TcpSocket, TcpWriter};
use embassy_sync::blocking_mutex::raw::{CriticalSectionRawMutex, NoopRawMutex};
use embassy_sync::channel::Channel;
use embassy_sync::mutex::Mutex as AsyncMutex;
use embassy_sync::signal::Signal;
use embassy_time::{Duration, Instant, Timer, with_timeout};
use embedded_io_async::{ErrorType, Read, Write};
use embedded_nal_async::TcpConnect;
use embedded_tls::{Aes128GcmSha256, TlsConnection};
use esp_hal::rng::Rng;

use crate::board::Esp;
use crate::net::Entropy;
use crate::{Device, certs, led, net, serial};

/// Whether the image runs the Feishu channel (the console's `channel feishu`).
pub const FEISHU: bool = true;
/// The long connection's TCP socket, beside the device's own and the gateway's.
pub const SOCKETS: usize = 1;

/// The connection's TCP buffers: a few frames in, acks and pings out.
const TCP_RX: usize = 4096;
const TCP_TX: usize = 1024;
/// Its TLS record buffers: a whole incoming record; outgoing records (acks, pings) are small,
/// and embedded-tls cuts a larger write into several records.
const TLS_RX: usize = net::TLS_RX;
const TLS_TX: usize = 2048;
/// The heap a connection's peaks take beside its buffers: the largest frame it accepts being
/// handled (bounded by a chip test) while a turn is at its peak (29,184 B, the emulator turn).
const PEAKS: usize = conn::PEAK_HEAP_BYTES + 29_184;
/// Free heap wanted before connecting.
pub const NEED: usize = TCP_RX + TCP_TX + TLS_RX + TLS_TX + PEAKS;
/// Connecting (DNS, TCP, TLS and WebSocket handshakes) may take this long.
const CONNECT: Duration = Duration::from_secs(30);
/// The longest message run as a turn, as for Telegram.
const MAX_MESSAGE_BYTES: usize = 4 * 1024;

/// Where to connect and whom to answer: from the main loop to the task.
struct Start {
    endpoint: fs::Endpoint,
    access: Access,
}

static START: Signal<CriticalSectionRawMutex, Box<Start>> = Signal::new();
static STOP: Signal<CriticalSectionRawMutex, ()> = Signal::new();
/// Why the connection ended, and whether it had opened (a connection that opened resets the
/// back-off): from the task to the main loop.
static DOWN: Signal<CriticalSectionRawMutex, (String, bool)> = Signal::new();
/// Messages to run as turns. Boxed: two pointers of static RAM, the texts on the heap; when
/// full, the task waits (its pings still go out) and Feishu keeps the rest.
static TURNS: Channel<CriticalSectionRawMutex, Box<Incoming>, 2> = Channel::new();

/// What the main loop keeps of Feishu (boxed in `Parts` only once the channel is chosen).
#[derive(Default)]
pub struct Chat {
    api: Option<Api>,
    config: ClientConfig,
    /// A connection was handed to the task and has not reported down.
    running: bool,
    failures: u32,
    retry_at_ms: u64,
}

/// What the main loop keeps of Feishu: its state, boxed once the channel is chosen.
pub type State = Option<Box<Chat>>;

/// Starts the task that holds the long connection (idle until the channel is chosen).
pub fn start(spawner: Spawner, stack: Stack<'static>, board: &Esp) {
    match task(stack, Rng::new()) {
        Ok(t) => spawner.spawn(t),
        Err(_) => say!(board, "[feishu] the long connection's task did not start"),
    }
}

/// The task that holds the long connection; idle (no heap) until the main loop starts it.
#[embassy_executor::task]
pub async fn task(stack: Stack<'static>, rng: Rng) {
    loop {
        let start = START.wait().await;
        // A stop meant for an earlier connection: not for this one.
        STOP.reset();
        let run = Box::pin(connection(stack, rng, start));
        match select(run, STOP.wait()).await {
            Either::First(down) => DOWN.signal(down),
            // Dropped whole (the TLS session with it): nothing of it is used again.
            Either::Second(()) => say!(&Esp, "[feishu] long connection closed"),
        }
    }
}

/// The sockets TLS runs on, as one type: embedded-tls's handshake and record code is compiled
/// once for both TLS sessions (the turns' and Feishu's long connection), not once per socket
/// type. `Copy`, because `TlsConnection::split` wants a `Clone` socket: each variant holds
/// references to async mutexes, never contended. `Halves` is a TCP socket's reader and writer
/// (`TcpSocket::split`; they register separate wakers, so each can wait on its own): the TLS
/// reader only reads and the writer only writes, so neither waits on the other; were that to
/// change, a mutex held across an `.await` waits where a `RefCell` would panic.
/// Here, not in `net`: without Feishu there is one TLS session and the pooled connection is used
/// as it is (the mutexes and the dispatch cost 5.5 KB of flash there).
#[derive(Clone, Copy)]
pub enum Sock<'s, 'a> {
    Whole(&'s AsyncMutex<NoopRawMutex, <net::Tcp as TcpConnect>::Connection<'static>>),
    Halves(&'s AsyncMutex<NoopRawMutex, TcpReader<'a>>, &'s AsyncMutex<NoopRawMutex, TcpWriter<'a>>),
}

impl ErrorType for Sock<'_, '_> {
    type Error = embassy_net::tcp::Error;
}

impl Read for Sock<'_, '_> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        match self {
            Sock::Whole(s) => s.lock().await.read(buf).await,
            Sock::Halves(r, _) => r.lock().await.read(buf).await,
        }
    }
}

impl Write for Sock<'_, '_> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        match self {
            Sock::Whole(s) => s.lock().await.write(buf).await,
            Sock::Halves(_, w) => w.lock().await.write(buf).await,
        }
    }

    async fn flush(&mut self) -> Result<(), Self::Error> {
        match self {
            Sock::Whole(s) => s.lock().await.flush().await,
            Sock::Halves(_, w) => w.lock().await.flush().await,
        }
    }
}

struct EspClock;

impl duplex::Clock for EspClock {
    fn now_ms(&self) -> u64 {
        Esp.now_ms()
    }

    fn at(&self, ms: u64) -> impl Future<Output = ()> {
        Timer::at(Instant::from_millis(ms))
    }
}

/// `n` bytes from the heap, or `None` (never the allocator's panic).
fn buffer(n: usize) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, 0);
    Some(v)
}

/// One long connection, from the endpoint's URL to its end; returns why it ended.
async fn connection(stack: Stack<'static>, rng: Rng, start: Box<Start>) -> (String, bool) {
    let fail = |why: String| (why, false);
    let url = match conn::parse_url(&start.endpoint.url) {
        Ok(u) if u.tls => u,
        Ok(_) => return fail("Feishu handed out a ws:// URL; the chip only speaks TLS".into()),
        Err(e) => return fail(e),
    };
    let Some(roots) = certs::roots(&url.host) else {
        return fail(format!("no root CA is pinned for {}; the chip talks only to feishu.cn hosts", url.host));
    };
    let (mut rx, mut tx, mut tls_rx, mut tls_tx) =
        match (buffer(TCP_RX), buffer(TCP_TX), buffer(TLS_RX), buffer(TLS_TX)) {
            (Some(a), Some(b), Some(c), Some(d)) => (a, b, c, d),
            _ => return fail(format!("the heap had no room for the connection's buffers (it wants {NEED} B free)")),
        };
    let mut sock = TcpSocket::new(stack, &mut rx, &mut tx);
    let proxy = net::proxy();
    let (host, port) = match &proxy {
        Some(p) => (p.host.as_str(), p.port),
        None => (url.host.as_str(), url.port),
    };
    let tcp = async {
        let addrs =
            stack.dns_query(host, DnsQueryType::A).await.map_err(|e| format!("{host} did not resolve ({e:?})"))?;
        let ip = *addrs.first().ok_or_else(|| format!("{host} did not resolve"))?;
        sock.connect((ip, port)).await.map_err(|e| format!("could not connect to {host}:{port} ({e:?})"))
    };
    match with_timeout(CONNECT, tcp).await {
        Err(_) => return fail(format!("timed out connecting to {host}")),
        Ok(Err(e)) => return fail(e),
        Ok(Ok(())) => {}
    }
    let (r, w) = sock.split();
    let (r, w) = (AsyncMutex::new(r), AsyncMutex::new(w));
    // Split from the start: the TLS session is split once open, and both its halves need a
    // `Clone` socket (net::Sock).
    let mut io = Sock::Halves(&r, &w);
    if let Some(p) = &proxy
        && let Err(e) = net::open_tunnel(&mut io, p, &url.host, url.port).await
    {
        return fail(format!("{e}"));
    }
    let mut tls: TlsConnection<'_, _, Aes128GcmSha256> = TlsConnection::new(io, &mut tls_rx, &mut tls_tx);
    let mut trust = Trust::new(roots, Esp.cert_clock(), Entropy(rng));
    match with_timeout(CONNECT, tls::open(&mut tls, &url.host, &mut trust)).await {
        Err(_) => return fail(format!("{}: timed out in the TLS handshake", url.host)),
        Ok(Err(e)) => return fail(format!("{}: {e}", url.host)),
        Ok(Ok(())) => {}
    }
    let mut key = [0u8; 16];
    rng.read(&mut key);
    let key = chela_chip::gateway::base64(&key);
    let random = (u64::from(rng.random()) << 32) | u64::from(rng.random());
    let opened = socket::open(&mut tls, &url, &key, start.endpoint.config, Esp.now_ms(), random);
    let (conn, early) = match with_timeout(CONNECT, opened).await {
        Err(_) => return fail("timed out in the long connection's handshake".into()),
        Ok(Err(e)) => return fail(e),
        Ok(Ok(s)) => {
            let (_, conn, early) = s.into_parts();
            (conn, early)
        }
    };
    say!(&Esp, "[feishu] long connection open");
    let (reader, writer) = tls.split();
    let hand_on = async |a: Action| match a {
        Action::Turn(incoming) => TURNS.send(Box::new(incoming)).await,
        Action::Dropped(why) => say!(&Esp, "[feishu] dropped: {why}"),
        Action::Send(_) | Action::Close(_) => {}
    };
    let why = duplex::run(reader, writer, conn, early, &start.access, &EspClock, hand_on).await;
    (why, true)
}

impl Device {
    /// The main loop's turn of Feishu (the chosen chat channel): connect when due, then wait a
    /// second for a message, console input or a gateway client, and run what came.
    pub(crate) async fn feishu(&mut self) {
        let now = self.chip.board.now_ms();
        let chat = self.feishu.get_or_insert_with(Box::default);
        if let Some((why, opened)) = DOWN.try_take() {
            chat.running = false;
            if opened {
                chat.failures = 0;
            }
            chat.failures += 1;
            let wait = fs::backoff_ms(chat.failures, &chat.config, u64::from(Rng::new().random()));
            say!(&self.chip.board, "[feishu] {why}; again in {} s", wait / 1000);
            chat.retry_at_ms = now + wait;
        }
        // `set_feishu_app` on the console: the old app's connection closes and the new app's
        // opens now, not after the back-off (the setup page restarts the device instead).
        if chat.api.as_ref().is_some_and(|a| !a.is_current(&self.chip.config)) {
            say!(&self.chip.board, "[feishu] the app changed: connecting with the new one");
            self.feishu_off();
            let chat = self.feishu.get_or_insert_with(Box::default);
            (chat.api, chat.failures, chat.retry_at_ms) = (None, 0, now);
        }
        let chat = self.feishu.get_or_insert_with(Box::default);
        if !chat.running && now >= chat.retry_at_ms {
            self.connect_feishu(now).await;
        }
        let mut buf = [0u8; 64];
        let waited = select4(serial::read(&mut buf), crate::connected::asks(), TURNS.receive(), Timer::after_secs(1));
        match waited.await {
            Either4::First(n) => self.console(&buf[..n]),
            Either4::Second(ask) => self.answer_gateway(ask).await,
            Either4::Third(incoming) => self.answer_feishu(*incoming).await,
            Either4::Fourth(()) => {}
        }
    }

    /// Fetches the endpoint and hands it to the task, when the heap has room for a connection.
    async fn connect_feishu(&mut self, now: u64) {
        let free = crate::heap().free;
        let chat = self.feishu.get_or_insert_with(Box::default);
        if free < NEED {
            say!(
                &self.chip.board,
                "[feishu] not connecting: {free} B of heap free, a connection and a turn need {NEED} B; again in 60 s"
            );
            chat.retry_at_ms = now + 60_000;
            return;
        }
        // The app is read from the settings at each connection: a new one is used from the next.
        let api = match Api::from_config(&self.chip.config) {
            Ok(a) => a,
            Err(e) => {
                say!(&self.chip.board, "[feishu] {e}");
                chat.retry_at_ms = now + 60_000;
                return;
            }
        };
        let endpoint = api.endpoint(&mut self.https).await;
        let chat = self.feishu.get_or_insert_with(Box::default);
        match endpoint {
            Ok(endpoint) => {
                chat.config = endpoint.config;
                let access = Access::from_config(&self.chip.config);
                DOWN.reset();
                START.signal(Box::new(Start { endpoint, access }));
                chat.running = true;
                chat.api = Some(api);
            }
            Err(e) => {
                chat.failures += 1;
                let wait = fs::backoff_ms(chat.failures, &chat.config, u64::from(Rng::new().random()));
                // Feishu said no: wrong app or settings; a retry soon would meet the same answer.
                let wait = if matches!(e, Failure::Refused(_)) { wait.max(300_000) } else { wait };
                say!(&self.chip.board, "[feishu] {e}; again in {} s", wait / 1000);
                chat.retry_at_ms = now + wait;
            }
        }
    }

    /// The other chat channel is chosen (or settings are missing): the connection goes.
    pub(crate) fn feishu_off(&mut self) {
        if let Some(chat) = self.feishu.as_mut()
            && chat.running
        {
            START.reset();
            STOP.signal(());
            DOWN.reset();
            chat.running = false;
            chat.api = None;
        }
    }

    /// Runs a turn for a Feishu message and sends the reply through the open API.
    async fn answer_feishu(&mut self, incoming: Incoming) {
        // The allowlist in force now, not the one the connection opened with: a sender taken
        // off it gets nothing from here on.
        if !Access::from_config(&self.chip.config).admits(&incoming.sender) {
            return say!(&self.chip.board, "[feishu] dropped: a message from a sender no longer in feishu_allow");
        }
        // The owner's direct chat, kept: the heartbeat runs in its session (`heartbeat::target`).
        match heartbeat::note_owner_chat(&mut self.chip.store, &self.chip.config, &incoming) {
            Ok(true) => say!(&self.chip.board, "[feishu] the owner's direct chat is kept for the heartbeat"),
            Ok(false) => {}
            Err(e) => say!(&self.chip.board, "[feishu] {e}"),
        }
        self.feishu_turn(&incoming.chat_id, &incoming.sender, &incoming.text).await
    }

    /// A scheduled job made in a Feishu chat, or the heartbeat for the owner (`Cron::route` and
    /// `heartbeat::target` checked that Feishu is the chat channel, the chat is allowed, and
    /// so is `maker`, who the turn runs for).
    pub(crate) async fn feishu_job(&mut self, _: &str, chat_id: &str, maker: &str, text: &str) {
        self.feishu_turn(chat_id, maker, text).await
    }

    /// Runs a turn for `text` of `sender` in the Feishu chat `chat_id` and sends the reply there.
    async fn feishu_turn(&mut self, chat_id: &str, sender: &str, text: &str) {
        self.led(led::State::Thinking);
        let reply = if text.len() > MAX_MESSAGE_BYTES {
            Ok(String::from("That message is too long for this device; please send a shorter one."))
        } else {
            self.one_turn("feishu", &chat_id, Some(sender), text).await
        };
        let reply = self.reply_shown(reply);
        let now = self.chip.board.now_ms();
        // The connection's app, with its token; or the settings' (the connection was closed
        // meanwhile).
        let held = self.feishu.as_mut().and_then(|c| c.api.take());
        let mut api = match held.map_or_else(|| Api::from_config(&self.chip.config), Ok) {
            Ok(a) => a,
            Err(e) => return say!(&self.chip.board, "[feishu] the reply was not sent: {e}"),
        };
        if let Err(e) = api.send(&mut self.https, chat_id, &reply, now).await {
            say!(&self.chip.board, "[feishu] the reply was not sent: {e}");
        }
        if let Some(chat) = self.feishu.as_mut() {
            chat.api = Some(api);
        }
        crate::heap();
    }
}
