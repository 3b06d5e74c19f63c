//! The UDP audio of MQTT devices: one socket (`xiaozhi.udp_listen`) for every conversation,
//! each conversation a [`Channel`] with its own AES-128-CTR key, nonce and ssrc, fresh per
//! `hello` (the layout is [`chela_proto::xiaozhi::udp`]).
//!
//! A datagram is routed by the ssrc in its clear header, then has to pass, in this order: the
//! layout; a known ssrc; the IP address of the device's MQTT connection; the address the channel
//! learned from its first accepted datagram (none yet: any port of that IP); the uplink sequence window (strictly later than the last accepted, at most
//! [`udp::MAX_JUMP`] ahead). Only then is it decrypted, the window moved and, for the first,
//! the address learned. So a datagram from another address never moves a channel, a replay is
//! dropped, and garbage costs one map lookup. CTR has no authentication, so the
//! address is tied to the MQTT connection's IP: a forger elsewhere who saw the clear ssrc cannot
//! race the device's first datagram; one behind the same IP (the same NAT) could, and the owner
//! then sees the device's datagrams counted in the log as from another address. Decrypted audio
//! goes to the conversation through a queue of [`AUDIO_QUEUE`] packets; more are dropped.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use aes::cipher::{KeyIvInit, StreamCipher};
use chela_proto::xiaozhi::udp::{self, Verdict, Window};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

type Ctr = ctr::Ctr128BE<aes::Aes128>;

/// Uplink packets waiting for the conversation (60 ms each: about 2 s).
pub const AUDIO_QUEUE: usize = 32;
/// Largest datagram read; anything longer is cut and so fails its length check.
const MAX_DATAGRAM: usize = udp::HEADER + 4096;

/// What a channel has counted (for the log and the tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub accepted: u64,
    pub old: u64,
    pub too_far: u64,
    pub spoofed: u64,
    pub lost: u64,
}

#[derive(Debug, Default)]
struct State {
    window: Window,
    peer: Option<SocketAddr>,
    /// Downlink sequence of the last datagram sent; the first is 1.
    down: u32,
    counts: Counts,
}

/// One conversation's audio channel; its ssrc leaves the routing table when it is dropped.
pub struct Channel {
    ssrc: u32,
    /// The IP address of the device's MQTT connection: its audio comes from the same one.
    device_ip: IpAddr,
    key: [u8; 16],
    nonce: [u8; 16],
    state: Mutex<State>,
    audio: mpsc::Sender<Vec<u8>>,
    hub: Arc<Hub>,
}

impl Channel {
    /// `key` and `nonce` as the hello's `udp` block gives them (hex).
    pub fn key_hex(&self) -> String {
        hex(&self.key)
    }

    pub fn nonce_hex(&self) -> String {
        hex(&self.nonce)
    }

    #[cfg(test)]
    fn counts(&self) -> Counts {
        self.lock().counts
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends one downlink Opus packet; before the device's first datagram there is nowhere to
    /// send it, so it is dropped (the firmware sends no UDP "connect").
    pub async fn send(&self, opus: &[u8], timestamp: u32) {
        let (peer, sequence) = {
            let mut s = self.lock();
            let Some(peer) = s.peer else { return };
            s.down = s.down.wrapping_add(1);
            (peer, s.down)
        };
        let Some(datagram) = seal(&self.key, &self.nonce, timestamp, sequence, opus) else { return };
        if let Err(e) = self.hub.socket.send_to(&datagram, peer).await {
            chela_log::debug!("xiaozhi: a UDP audio datagram to {peer} failed: {e}");
        }
    }

    /// Judges one datagram for this channel; the decrypted payload when accepted.
    fn accept(&self, from: SocketAddr, header: &udp::Header, datagram: &[u8]) -> Option<Vec<u8>> {
        let mut s = self.lock();
        if from.ip().to_canonical() != self.device_ip || s.peer.is_some_and(|p| p != from) {
            s.counts.spoofed += 1;
            return None;
        }
        match s.window.check(header.sequence) {
            Verdict::Old => {
                s.counts.old += 1;
                None
            }
            Verdict::TooFar => {
                s.counts.too_far += 1;
                None
            }
            Verdict::Accept { lost } => {
                let payload = open(&self.key, datagram)?;
                s.window.commit(header.sequence);
                s.counts.accepted += 1;
                s.counts.lost += u64::from(lost);
                s.peer.get_or_insert(from);
                Some(payload)
            }
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.hub.routes.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.ssrc);
        let c = self.state.get_mut().unwrap_or_else(PoisonError::into_inner).counts;
        if c.old + c.too_far + c.spoofed > 0 {
            chela_log::info!(
                "xiaozhi: UDP audio channel {:08x} ended: {} accepted, {} replayed or old, {} too far ahead, {} from another address, {} lost",
                self.ssrc,
                c.accepted,
                c.old,
                c.too_far,
                c.spoofed,
                c.lost
            );
        }
    }
}

/// The shared UDP socket and the channels routed on it.
pub struct Hub {
    socket: UdpSocket,
    routes: Mutex<HashMap<u32, std::sync::Weak<Channel>>>,
    /// Most channels at once (one per MQTT connection).
    max: usize,
}

impl Hub {
    pub fn new(socket: UdpSocket, max: usize) -> Arc<Hub> {
        Arc::new(Hub { socket, routes: Mutex::default(), max })
    }

    /// A new channel with fresh keys, and the queue its audio arrives in; `None` when the table
    /// is full or no randomness is to be had.
    pub fn open(self: &Arc<Self>, device_ip: IpAddr) -> Option<(Arc<Channel>, mpsc::Receiver<Vec<u8>>)> {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if routes.len() >= self.max {
            return None;
        }
        // A handful of tries: a clash of 32-bit ssrcs among at most `max` channels is rare.
        for _ in 0..8 {
            let r = crate::devices::random::<30>().ok()?;
            let ssrc = u32::from_be_bytes([r[0], r[1], r[2], r[3]]);
            if ssrc == 0 || routes.contains_key(&ssrc) {
                continue;
            }
            let mut key = [0u8; 16];
            key.copy_from_slice(&r[4..20]);
            let mut rest = [0u8; 10];
            rest.copy_from_slice(&r[20..30]);
            let (tx, rx) = mpsc::channel(AUDIO_QUEUE);
            let ch = Arc::new(Channel {
                ssrc,
                device_ip,
                key,
                nonce: udp::nonce(ssrc, rest),
                state: Mutex::default(),
                audio: tx,
                hub: Arc::clone(self),
            });
            routes.insert(ssrc, Arc::downgrade(&ch));
            return Some((ch, rx));
        }
        None
    }

    /// Reads datagrams until the daemon stops.
    pub async fn run(self: Arc<Self>, shutdown: crate::daemon::Shutdown) {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        loop {
            let (n, from) = tokio::select! {
                r = self.socket.recv_from(&mut buf) => match r {
                    Ok(x) => x,
                    Err(e) => {
                        // ICMP errors from an earlier send surface here on some systems.
                        chela_log::debug!("xiaozhi: UDP receive: {e}");
                        continue;
                    }
                },
                () = shutdown.wait() => return,
            };
            self.datagram(from, &buf[..n]);
        }
    }

    /// One datagram from `from`.
    pub fn datagram(&self, from: SocketAddr, datagram: &[u8]) {
        let Ok((header, _)) = udp::parse(datagram) else { return };
        let channel = {
            let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            routes.get(&header.ssrc).and_then(std::sync::Weak::upgrade)
        };
        let Some(channel) = channel else { return };
        if let Some(opus) = channel.accept(from, &header, datagram)
            && channel.audio.try_send(opus).is_err()
        {
            chela_log::debug!("xiaozhi: an uplink audio packet was dropped (the conversation is behind)");
        }
    }
}

/// A whole datagram: header, then `opus` encrypted with the header as the IV.
pub fn seal(key: &[u8; 16], nonce: &[u8; 16], timestamp: u32, sequence: u32, opus: &[u8]) -> Option<Vec<u8>> {
    let header = udp::header(nonce, opus.len(), timestamp, sequence)?;
    let mut out = Vec::with_capacity(udp::HEADER + opus.len());
    out.extend_from_slice(&header);
    out.extend_from_slice(opus);
    Ctr::new(key.into(), (&header).into()).apply_keystream(&mut out[udp::HEADER..]);
    Some(out)
}

/// The decrypted payload of a datagram whose layout was checked.
pub fn open(key: &[u8; 16], datagram: &[u8]) -> Option<Vec<u8>> {
    let (iv, payload) = datagram.split_first_chunk::<{ udp::HEADER }>()?;
    let mut out = payload.to_vec();
    Ctr::new(key.into(), iv.into()).apply_keystream(&mut out);
    Some(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    async fn hub() -> Arc<Hub> {
        Hub::new(UdpSocket::bind("127.0.0.1:0").await.unwrap(), 4)
    }

    fn dev(ch: &Channel, seq: u32, opus: &[u8]) -> Vec<u8> {
        seal(&ch.key, &ch.nonce, 0, seq, opus).unwrap()
    }

    #[test]
    fn ctr_matches_a_known_answer() {
        // NIST SP 800-38A F.5.1 (CTR-AES128.Encrypt), first block.
        let key: [u8; 16] =
            [0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c];
        let iv: [u8; 16] =
            [0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff];
        let plain: [u8; 16] =
            [0x6b, 0xc1, 0xbe, 0xe2, 0x2e, 0x40, 0x9f, 0x96, 0xe9, 0x3d, 0x7e, 0x11, 0x73, 0x93, 0x17, 0x2a];
        let mut d = iv.to_vec();
        d.extend_from_slice(&plain);
        let out = open(&key, &d).unwrap();
        assert_eq!(
            out,
            [0x87, 0x4d, 0x61, 0x91, 0xb6, 0x20, 0xe3, 0x26, 0x1b, 0xef, 0x68, 0x64, 0x99, 0x0d, 0xb6, 0xce]
        );
    }

    #[tokio::test]
    async fn a_channel_learns_its_device_and_refuses_replays_and_other_addresses() {
        let hub = hub().await;
        let (ch, mut rx) = hub.open(LOCAL).unwrap();
        let n = &ch.nonce;
        assert_eq!(&n[..2], &[1, 0]);
        assert_eq!(u32::from_be_bytes([n[4], n[5], n[6], n[7]]), ch.ssrc);
        let device: SocketAddr = "127.0.0.1:40001".parse().unwrap();
        let other: SocketAddr = "127.0.0.1:40002".parse().unwrap();
        hub.datagram(device, &dev(&ch, 1, b"one"));
        assert_eq!(rx.try_recv().unwrap(), b"one");
        hub.datagram(device, &dev(&ch, 1, b"one"));
        hub.datagram(other, &dev(&ch, 2, b"two"));
        assert!(rx.try_recv().is_err(), "a replay and a datagram from elsewhere are dropped");
        hub.datagram(device, &dev(&ch, 4, b"four"));
        assert_eq!(rx.try_recv().unwrap(), b"four", "a gap is let through");
        hub.datagram(device, &dev(&ch, 5 + udp::MAX_JUMP, b"far"));
        assert!(rx.try_recv().is_err());
        let c = ch.counts();
        assert_eq!(c, Counts { accepted: 2, old: 1, too_far: 1, spoofed: 1, lost: 2 });
        assert_eq!(ch.lock().peer, Some(device), "the forged datagram never moved the address");
    }

    #[tokio::test]
    async fn only_the_mqtt_connections_ip_can_be_learned() {
        let hub = hub().await;
        let (ch, mut rx) = hub.open(LOCAL).unwrap();
        let elsewhere: SocketAddr = "127.0.0.2:40001".parse().unwrap();
        hub.datagram(elsewhere, &dev(&ch, 1, b"forged"));
        assert!(rx.try_recv().is_err());
        assert_eq!(ch.lock().peer, None, "a first datagram from another IP teaches nothing");
        let device: SocketAddr = "127.0.0.1:40001".parse().unwrap();
        hub.datagram(device, &dev(&ch, 1, b"real"));
        assert_eq!(rx.try_recv().unwrap(), b"real");
    }

    #[tokio::test]
    async fn unknown_ssrcs_and_damaged_datagrams_reach_no_channel() {
        let hub = hub().await;
        let (ch, mut rx) = hub.open(LOCAL).unwrap();
        let from: SocketAddr = "127.0.0.1:40003".parse().unwrap();
        let mut wrong = dev(&ch, 1, b"x");
        wrong[4] ^= 0xff;
        hub.datagram(from, &wrong);
        let mut short = dev(&ch, 1, b"xy");
        short.pop();
        hub.datagram(from, &short);
        assert!(rx.try_recv().is_err());
        assert_eq!(ch.counts(), Counts::default());
        assert_eq!(ch.lock().peer, None, "nothing was learned");
    }

    #[tokio::test]
    async fn the_table_is_bounded_and_a_dropped_channel_leaves_it() {
        let hub = hub().await;
        let open: Vec<_> = (0..4).map(|_| hub.open(LOCAL).unwrap()).collect();
        assert!(hub.open(LOCAL).is_none(), "a fifth channel is refused");
        drop(open);
        assert!(hub.routes.lock().unwrap().is_empty());
        assert!(hub.open(LOCAL).is_some());
    }
}
