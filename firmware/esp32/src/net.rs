//! HTTPS on the chip: reqwless over embedded-tls over an embassy-net TCP socket, with the
//! server's certificate checked against root CAs pinned in the image (never `TlsVerify::None`).
//! It is the firmware's [`Link`] for model calls, and does Telegram's two calls.

use alloc::format;
use alloc::vec::Vec;
use core::cell::RefCell;

use chela_chip::link::{Answer, BodyWriter, Link, LinkError};
use chela_core::exchange::{Head, NetFailure};
use embassy_net::dns::DnsSocket;
use embassy_net::tcp::client::TcpClient;
use embassy_time::{Duration, Instant, Timer, with_timeout};
use embedded_io_async::{Read, Write};
use esp_hal::rng::Rng;
use reqwless::client::{HttpClient, TlsConfig, TlsVerify};
use reqwless::request::{Method, RequestBody, RequestBuilder};

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

pub struct Https {
    pub tcp: &'static Tcp,
    pub dns: &'static DnsSocket<'static>,
    pub rx: &'static mut [u8; TLS_RX],
    pub tx: &'static mut [u8; TLS_TX],
    pub head: &'static mut [u8; HEAD_BYTES],
    pub rng: Rng,
}

/// A request body written window by window as the socket takes it.
struct Windows<'w, 'a> {
    length: usize,
    writer: RefCell<&'w mut BodyWriter<'a>>,
}

impl RequestBody for Windows<'_, '_> {
    fn len(&self) -> Option<usize> {
        Some(self.length)
    }

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

/// The host of an `https://` URL.
fn host(url: &str) -> Result<&str, LinkError> {
    let rest = url.strip_prefix("https://").ok_or_else(|| {
        LinkError::Net(NetFailure::Fatal(format!("{url} is not an https:// URL; the chip only speaks TLS")))
    })?;
    Ok(rest.split(['/', ':', '?']).next().unwrap_or(rest))
}

fn classify(e: reqwless::Error) -> LinkError {
    use reqwless::Error as E;
    let what = format!("{e:?}");
    LinkError::Net(match e {
        E::Dns => NetFailure::Unreachable(format!("the name did not resolve ({what})")),
        E::Tls(_) => NetFailure::Fatal(format!("TLS failed ({what})")),
        E::InvalidUrl(_) => NetFailure::Fatal(what),
        _ => NetFailure::Transient(format!("the connection failed ({what})")),
    })
}

fn timed_out(what: &str) -> LinkError {
    LinkError::Net(NetFailure::Transient(format!("timed out {what}")))
}

impl Https {
    fn seed(&self) -> u64 {
        (u64::from(self.rng.random()) << 32) | u64::from(self.rng.random())
    }

    /// One request to `url`, its answer handed to `answer`; each pinned root of the host is
    /// tried in turn until one verifies the server's chain.
    pub async fn exchange<B: RequestBody>(
        &mut self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: B,
        answer: &mut dyn Answer,
    ) -> Result<(), LinkError> {
        let roots = certs::roots(host(url)?).ok_or_else(|| {
            LinkError::Net(NetFailure::Fatal(format!(
                "no root CA is pinned for {url}; the chip talks only to its API hosts"
            )))
        })?;
        let mut body = Some(body);
        let mut last = None;
        for ca in roots {
            let seed = self.seed();
            let verify = TlsVerify::Certificate { ca, cert: None, key: None };
            let mut client = HttpClient::new_with_tls(
                self.tcp,
                self.dns,
                TlsConfig::new(seed, &mut self.rx[..], &mut self.tx[..], verify),
            );
            let handle = match with_timeout(CONNECT, client.request(method, url)).await {
                Err(_) => return Err(timed_out("connecting")),
                Ok(Err(reqwless::Error::Tls(e))) => {
                    last = Some(classify(reqwless::Error::Tls(e)));
                    continue;
                }
                Ok(Err(e)) => return Err(classify(e)),
                Ok(Ok(h)) => h,
            };
            let mut req = handle
                .headers(headers)
                .body(body.take().ok_or_else(|| LinkError::Broken("the body was spent".into()))?);
            let resp = match with_timeout(IDLE, req.send(&mut self.head[..])).await {
                Err(_) => return Err(timed_out("waiting for the response head")),
                Ok(r) => r.map_err(classify)?,
            };
            let mut content_type: heapless::String<96> = heapless::String::new();
            let mut retry_after: heapless::String<32> = heapless::String::new();
            for (name, value) in resp.headers() {
                let value = core::str::from_utf8(value).unwrap_or("");
                if name.eq_ignore_ascii_case("content-type") {
                    let _ = content_type.push_str(chela_core::text::prefix(value, 96));
                } else if name.eq_ignore_ascii_case("retry-after") {
                    let _ = retry_after.push_str(chela_core::text::prefix(value, 32));
                }
            }
            let status = resp.status.0;
            answer.head(status, &[("content-type", content_type.as_str()), ("retry-after", retry_after.as_str())]);
            let mut reader = resp.body().reader();
            let mut piece = [0u8; PIECE];
            loop {
                let n = match with_timeout(IDLE, reader.read(&mut piece)).await {
                    Err(_) => return Err(timed_out("between response pieces")),
                    Ok(r) => r.map_err(classify)?,
                };
                if n == 0 {
                    answer.end();
                    break;
                }
                if !answer.body(&piece[..n]) {
                    break;
                }
            }
            return Ok(());
        }
        Err(last.unwrap_or_else(|| LinkError::Net(NetFailure::Fatal("no root CA to try".into()))))
    }

    /// `GET url`, the body kept up to `max` bytes.
    pub async fn get(&mut self, url: &str, max: usize) -> Result<Collect, LinkError> {
        let mut c = Collect::new(max);
        self.exchange(Method::GET, url, &[], &[][..], &mut c).await?;
        Ok(c)
    }

    /// `POST url` with a JSON body; the answer kept up to `max` bytes.
    pub async fn post_json(&mut self, url: &str, json: &str, max: usize) -> Result<Collect, LinkError> {
        let mut c = Collect::new(max);
        let headers = [("content-type", "application/json")];
        self.exchange(Method::POST, url, &headers, json.as_bytes(), &mut c).await?;
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
        let body = Windows { length, writer: RefCell::new(body) };
        self.exchange(Method::POST, &head.url, &headers, body, answer).await
    }

    async fn wait_until(&mut self, ms: u64) -> Result<(), LinkError> {
        Timer::at(Instant::from_millis(ms)).await;
        Ok(())
    }
}
