//! HTTPS on the chip: HTTP/1.1 (`chela_chip::http`'s head and chunked parsing) over
//! embedded-tls's TLS 1.3 over an embassy-net TCP socket. Whom to trust is ours (`chela_chip::tls`): the server must prove, in one handshake,
//! that it holds a certificate for the host under one of the roots pinned for that host in the
//! image (`certs`); a failed check ends the call, it never falls back to no check.
//! It is the firmware's [`Link`] for model calls, and does Telegram's two calls.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use chela_chip::http::{self, Framing};
use chela_chip::link::{Answer, BodyWriter, Link, LinkError};
#[cfg(feature = "connected")]
use chela_chip::proxy::Proxy;
use chela_chip::tls::{self, Shown, Trust};
use chela_core::exchange::{Head, NetFailure};
use core::net::SocketAddr;
#[cfg(feature = "connected")]
use critical_section::Mutex;
use embassy_net::Stack;
use embassy_net::dns::{DnsQueryType, DnsSocket};
use embassy_net::tcp::client::TcpClient;
use embassy_net::udp::{PacketMetadata, UdpSocket};
use embassy_time::{Duration, Instant, Timer, with_timeout};
#[cfg(feature = "connected")]
use embedded_io_async::Read;
use embedded_io_async::Write;
use embedded_nal_async::{AddrType, Dns, TcpConnect};
use embedded_tls::{Aes128GcmSha256, TlsConnection, TlsError};
use esp_hal::rng::Rng;

use crate::board::Esp;
use crate::certs;

/// TLS record buffers: a whole incoming record (16 KiB + overhead); outgoing records are cut
/// at 4 KiB.
pub const TLS_RX: usize = 16_640;
pub const TLS_TX: usize = 4096;
/// The response head must fit here.
const HEAD_BYTES: usize = 2048;
/// Response bytes read from the socket at a time.
const PIECE: usize = 512;
/// Connecting (DNS, TCP, TLS handshake) may take this long.
const CONNECT: Duration = Duration::from_secs(30);
/// Longest silence while a response comes in (Telegram's long poll waits 25 s).
const IDLE: Duration = Duration::from_secs(60);

pub type Tcp = TcpClient<'static, 1, 4096, 4096>;

/// The HTTP proxy every HTTPS connection goes through (the console's `set_proxy`), if any.
#[cfg(feature = "connected")]
static PROXY: Mutex<RefCell<Option<Proxy>>> = Mutex::new(RefCell::new(None));

/// Takes the proxy setting in force (at boot and when the settings change); a setting that
/// does not parse (the console checks it when set) means no proxy, said on the console.
#[cfg(feature = "connected")]
pub fn set_proxy(setting: &str) {
    let proxy = Proxy::parse(setting).unwrap_or_else(|e| {
        chela_chip::say!(&Esp, "[proxy] ignored: {e}");
        None
    });
    critical_section::with(|cs| *PROXY.borrow_ref_mut(cs) = proxy);
}

pub struct Https {
    pub tcp: &'static Tcp,
    pub dns: &'static DnsSocket<'static>,
    pub rx: &'static mut [u8; TLS_RX],
    pub tx: &'static mut [u8; TLS_TX],
    pub rng: Rng,
}

/// A request body written window by window as the socket takes it: the one body type of
/// every request, so the exchange (reqwless's request writer and response reader, the TLS
/// connection) is compiled once, not once per body type (4.4 KB each on the C3).
pub struct Windows<'w, 'a> {
    length: usize,
    writer: RefCell<&'w mut BodyWriter<'a>>,
}

impl<'w, 'a> Windows<'w, 'a> {
    pub fn new(length: usize, writer: &'w mut BodyWriter<'a>) -> Self {
        Windows { length, writer: RefCell::new(writer) }
    }
}

/// `bytes` as a body writer: all of it from where the socket got to.
pub fn whole(bytes: &[u8]) -> impl FnMut(usize, &mut Vec<u8>) + '_ {
    move |from, out| out.extend_from_slice(bytes.get(from..).unwrap_or_default())
}

impl Windows<'_, '_> {
    async fn write<W: Write>(&self, out: &mut W) -> Result<(), W::Error> {
        let mut sent = 0;
        let mut buf = Vec::with_capacity(chela_chip::turn::WINDOW);
        while sent < self.length {
            buf.clear();
            (self.writer.borrow_mut())(sent, &mut buf);
            if buf.is_empty() {
                // The encoder and the counter disagree; the peer sees a short body and fails.
                break;
            }
            out.write_all(&buf).await?;
            sent += buf.len();
        }
        Ok(())
    }
}

/// A bounded whole body: what Telegram answers.
pub struct Collect {
    pub status: u16,
    pub body: Vec<u8>,
    pub max: usize,
    /// The body went past `max`; what is kept is its start.
    pub truncated: bool,
}

impl Collect {
    pub fn new(max: usize) -> Collect {
        Collect { status: 0, body: Vec::new(), max, truncated: false }
    }
}

impl Answer for Collect {
    fn head(&mut self, status: u16, _: &[(&str, &str)]) {
        self.status = status;
    }

    fn body(&mut self, bytes: &[u8]) -> bool {
        let room = self.max - self.body.len();
        self.body.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if bytes.len() > room {
            self.truncated = true;
        }
        !self.truncated
    }

    fn end(&mut self) {}
}

/// The host and the path (with its query) of an `https://` URL; only port 443 is spoken.
pub fn split(url: &str) -> Result<(&str, &str), LinkError> {
    let rest = url.strip_prefix("https://").ok_or_else(|| {
        LinkError::Net(NetFailure::Fatal(format!("{url} is not an https:// URL; the chip only speaks TLS")))
    })?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (host, path) = rest.split_at(end);
    if host.is_empty() || host.contains(['@', ':']) {
        return Err(LinkError::Net(NetFailure::Fatal(format!(
            "{url}: the chip calls a plain host name on port 443 (no user, no port)"
        ))));
    }
    Ok((host, if path.is_empty() { "/" } else { path }))
}

/// A TLS connection that failed after the handshake (a retry may work).
fn broken(what: &str, e: TlsError) -> LinkError {
    LinkError::Net(NetFailure::Transient(format!("the connection failed {what} ({})", Shown(&e))))
}

fn transient(why: String) -> LinkError {
    LinkError::Net(NetFailure::Transient(why))
}

/// The hardware RNG as the TLS handshake's random source. It is a true RNG while the radio
/// runs (esp-hal's `rng` docs), which it does whenever the chip makes an HTTPS call.
pub(crate) struct Entropy(pub(crate) Rng);

impl rand_core::RngCore for Entropy {
    fn next_u32(&mut self) -> u32 {
        self.0.random()
    }
    fn next_u64(&mut self) -> u64 {
        (u64::from(self.0.random()) << 32) | u64::from(self.0.random())
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.read(dest);
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.0.read(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for Entropy {}

fn timed_out(what: &str) -> LinkError {
    LinkError::Net(NetFailure::Transient(format!("timed out {what}")))
}

impl Https {
    /// One request to `url`, its answer handed to `answer`: DNS, TCP, one TLS handshake checked
    /// against the host's pinned roots, then the request. (Not `async`: one future fewer.) The
    /// exchange's state (the TLS connection, the handshake, the response reader) is boxed: on the
    /// heap while a request runs, not in the main task's static state beside everything else.
    pub fn exchange(
        &mut self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Windows<'_, '_>,
        answer: &mut dyn Answer,
    ) -> impl Future<Output = Result<(), LinkError>> {
        alloc::boxed::Box::pin(self.exchange_under(None, method, url, headers, body, answer))
    }

    /// [`exchange`](Https::exchange) with the server's chain checked against `roots` (`None`:
    /// the roots pinned for the host).
    pub async fn exchange_under(
        &mut self,
        roots: Option<&'static [&'static [u8]]>,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Windows<'_, '_>,
        answer: &mut dyn Answer,
    ) -> Result<(), LinkError> {
        let (host, path) = split(url)?;
        let roots = roots.or_else(|| certs::roots(host)).ok_or_else(|| {
            LinkError::Net(NetFailure::Fatal(format!(
                "no root CA is pinned for {url}; the chip talks only to its API hosts"
            )))
        })?;
        let socket = match with_timeout(CONNECT, self.connect(host)).await {
            Err(_) => return Err(timed_out("connecting")),
            Ok(r) => r?,
        };
        // With Feishu, its socket type for both TLS sessions (`feishu::Sock`).
        #[cfg(feature = "feishu")]
        let socket = embassy_sync::mutex::Mutex::new(socket);
        #[cfg(feature = "feishu")]
        let socket = crate::feishu::Sock::Whole(&socket);
        let mut conn: TlsConnection<'_, _, Aes128GcmSha256> =
            TlsConnection::new(socket, &mut self.rx[..], &mut self.tx[..]);
        let clock = Esp.cert_clock();
        let mut trust = Trust::new(roots, clock, Entropy(self.rng));
        match with_timeout(CONNECT, tls::open(&mut conn, host, &mut trust)).await {
            Err(_) => return Err(timed_out("in the TLS handshake")),
            Ok(Err(e)) if e.is_network() => {
                return Err(LinkError::Net(NetFailure::Transient(format!("{host}: {e}"))));
            }
            // Not trusted: a retry would meet the same server.
            Ok(Err(e)) => return Err(LinkError::Net(NetFailure::Fatal(format!("{host}: {e}")))),
            Ok(Ok(())) => {}
        }
        let request = http::request_head(method, host, path, headers, body.length);
        let send = async {
            conn.write_all(request.as_bytes()).await?;
            body.write(&mut conn).await?;
            conn.flush().await
        };
        match with_timeout(IDLE, send).await {
            Err(_) => return Err(timed_out("sending the request")),
            Ok(r) => r.map_err(|e| broken("sending the request", e))?,
        }
        // From the heap for this exchange only: in set-up and safe mode no exchange runs.
        let mut head = alloc::vec![0u8; HEAD_BYTES];
        let mut got = 0;
        let head_end = loop {
            let n = match with_timeout(IDLE, conn.read(&mut head[got..])).await {
                Err(_) => return Err(timed_out("waiting for the response head")),
                Ok(Ok(0)) => return Err(transient(format!("{host} closed the connection before answering"))),
                Ok(r) => r.map_err(|e| broken("before the response head", e))?,
            };
            got += n;
            if let Some(end) = http::head_len(&head[..got]) {
                break end;
            }
            if got == HEAD_BYTES {
                return Err(transient(format!("{host}'s response head is over {HEAD_BYTES} bytes")));
            }
        };
        let fields = &head[..head_end];
        let (status, framing) = http::parse_head(fields).map_err(|e| transient(format!("{host}: {e}")))?;
        if let Some(date) = http::header(fields, "date") {
            // The chain verified above: an authenticated time to check SNTP's against.
            Esp.https_date(date);
        }
        let field = |name, max| chela_core::text::prefix(http::header(fields, name).unwrap_or(""), max);
        answer.head(status, &[("content-type", field("content-type", 96)), ("retry-after", field("retry-after", 32))]);
        let mut left = match framing {
            Framing::Length(n) => Some(n),
            _ => None,
        };
        let mut chunked = http::Chunked::new();
        let mut piece = [0u8; PIECE];
        // The body's first bytes came with the head.
        let mut early = Some(head_end..got);
        loop {
            let bytes = match early.take() {
                Some(r) => &head[r],
                None => {
                    if left == Some(0) || chunked.done() {
                        answer.end();
                        break;
                    }
                    let n = match with_timeout(IDLE, conn.read(&mut piece)).await {
                        Err(_) => return Err(timed_out("between response pieces")),
                        Ok(Err(TlsError::ConnectionClosed)) | Ok(Ok(0)) if framing == Framing::ToEnd => 0,
                        Ok(r) => r.map_err(|e| broken("mid-answer", e))?,
                    };
                    if n == 0 {
                        if framing == Framing::ToEnd {
                            answer.end();
                            break;
                        }
                        return Err(transient(format!("{host} closed the connection mid-answer")));
                    }
                    &piece[..n]
                }
            };
            let going = if framing == Framing::Chunked {
                let mut rest = bytes;
                let mut going = true;
                while going
                    && let Some(data) = chunked.next(&mut rest).map_err(|e| transient(format!("{host}: {e}")))?
                {
                    going = answer.body(data);
                }
                going
            } else {
                let n = left.map_or(bytes.len(), |l| usize::try_from(l).unwrap_or(usize::MAX).min(bytes.len()));
                left = left.map(|l| l - n as u64);
                n == 0 || answer.body(&bytes[..n])
            };
            if !going {
                break;
            }
        }
        Ok(())
    }

    /// Opens TCP to `host`'s port 443: directly, or through the console's `set_proxy` as a
    /// `CONNECT` tunnel (TLS then runs through it to `host`, checked against `host`'s roots).
    #[cfg(feature = "connected")]
    async fn connect(&self, host: &str) -> Result<<Tcp as TcpConnect>::Connection<'static>, LinkError> {
        match proxy() {
            Some(proxy) => self.tunnel(&proxy, host).await,
            None => self.tcp_to(host, 443).await,
        }
    }

    /// Opens TCP to `host`'s port 443 (no proxy in an image without the connected parts).
    #[cfg(not(feature = "connected"))]
    fn connect(&self, host: &str) -> impl Future<Output = Result<<Tcp as TcpConnect>::Connection<'static>, LinkError>> {
        self.tcp_to(host, 443)
    }

    /// A `CONNECT` tunnel to `host`'s port 443 through `proxy`.
    #[cfg(feature = "connected")]
    async fn tunnel(&self, proxy: &Proxy, host: &str) -> Result<<Tcp as TcpConnect>::Connection<'static>, LinkError> {
        let mut sock = self.tcp_to(&proxy.host, proxy.port).await?;
        open_tunnel(&mut sock, proxy, host, 443).await?;
        Ok(sock)
    }

    /// Resolves `host` and opens TCP to `port`.
    async fn tcp_to(&self, host: &str, port: u16) -> Result<<Tcp as TcpConnect>::Connection<'static>, LinkError> {
        let ip = self
            .dns
            .get_host_by_name(host, AddrType::IPv4)
            .await
            .map_err(|e| LinkError::Net(NetFailure::Unreachable(format!("{host} did not resolve ({e:?})"))))?;
        self.tcp
            .connect(SocketAddr::new(ip, port))
            .await
            .map_err(|e| LinkError::Net(NetFailure::Transient(format!("could not connect to {host}:{port} ({e:?})"))))
    }

    /// `GET url`, the body kept up to `max` bytes.
    pub async fn get(&mut self, url: &str, max: usize) -> Result<Collect, LinkError> {
        let mut c = Collect::new(max);
        self.exchange("GET", url, &[], Windows::new(0, &mut whole(&[])), &mut c).await?;
        Ok(c)
    }

    /// `POST url` with a JSON body; the answer kept up to `max` bytes.
    pub async fn post_json(&mut self, url: &str, json: &str, max: usize) -> Result<Collect, LinkError> {
        let mut c = Collect::new(max);
        let headers = [("content-type", "application/json")];
        let mut body = whole(json.as_bytes());
        self.exchange("POST", url, &headers, Windows::new(json.len(), &mut body), &mut c).await?;
        Ok(c)
    }
}

impl Link for Https {
    async fn post(
        &mut self,
        head: &Head,
        length: usize,
        body: &mut BodyWriter<'_>,
        answer: &mut dyn Answer,
    ) -> Result<(), LinkError> {
        let headers: Vec<(&str, &str)> = head.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.exchange("POST", &head.url, &headers, Windows::new(length, body), answer).await
    }

    async fn get(&mut self, head: &Head, answer: &mut dyn Answer) -> Result<(), LinkError> {
        let headers: Vec<(&str, &str)> = head.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.exchange("GET", &head.url, &headers, Windows::new(0, &mut whole(&[])), answer).await
    }

    async fn wait_until(&mut self, ms: u64) -> Result<(), LinkError> {
        Timer::at(Instant::from_millis(ms)).await;
        Ok(())
    }
}

/// The proxy in force (the console's `set_proxy`), if any.
#[cfg(feature = "connected")]
pub fn proxy() -> Option<Proxy> {
    critical_section::with(|cs| PROXY.borrow_ref(cs).clone())
}

/// Asks `proxy`, on the open connection `sock`, for a tunnel to `host:port`.
#[cfg(feature = "connected")]
pub async fn open_tunnel<S: Read + Write>(sock: &mut S, proxy: &Proxy, host: &str, port: u16) -> Result<(), LinkError> {
    let refused = |why: String, retry: bool| {
        let why = format!("the proxy {}: {why}", proxy.shown());
        LinkError::Net(if retry { NetFailure::Transient(why) } else { NetFailure::Fatal(why) })
    };
    sock.write_all(proxy.connect_head(host, port).as_bytes())
        .await
        .map_err(|e| refused(format!("closed ({e:?})"), true))?;
    let mut answer: Vec<u8> = Vec::new();
    let mut piece = [0u8; 128];
    loop {
        match chela_chip::proxy::connect_answer(&answer) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(r) => return Err(refused(r.reason, r.retryable)),
        }
        // The proxy's head, never more than its bound: the destination speaks only after
        // the TLS hello, which is not sent yet.
        let room = chela_chip::proxy::MAX_ANSWER_HEAD - answer.len();
        match sock.read(&mut piece[..room.min(128)]).await {
            Ok(n) if n > 0 => answer.extend_from_slice(&piece[..n]),
            _ => return Err(refused("closed before the tunnel opened".into(), true)),
        }
    }
}

/// Asks pool.ntp.org for the time: Unix seconds.
pub async fn sntp(stack: Stack<'static>) -> Result<u64, String> {
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
