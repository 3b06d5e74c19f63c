//! The onboarding portal's DHCP server (RFC 2131), sans-IO: the phone or laptop that joins the
//! chip's access point gets an address from a pool of [`POOL`] on the chip's /24. embassy-net
//! has only a DHCP client, hence this.
//!
//! Bounded and strict, for bytes from whoever joined: a packet is read only up to its end, the
//! options walk stops at the packet's end or at `end`, only DISCOVER and REQUEST from Ethernet
//! clients are answered, and a full pool answers nothing new (the oldest lease is not taken from
//! its holder). No router and no DNS server are offered: the portal is reached at the chip's
//! address, and the client keeps its mobile data for the rest.

use alloc::vec::Vec;

/// Addresses handed out: `.2` to `.5` of the chip's /24.
pub const POOL: usize = 4;
/// How long a lease lasts, seconds (the portal is short-lived).
pub const LEASE_SECS: u32 = 600;
pub const SERVER_PORT: u16 = 67;
pub const CLIENT_PORT: u16 = 68;

const HEADER: usize = 236;
const COOKIE: [u8; 4] = [99, 130, 83, 99];
const DISCOVER: u8 = 1;
const OFFER: u8 = 2;
const REQUEST: u8 = 3;
const ACK: u8 = 5;
const NAK: u8 = 6;
const RELEASE: u8 = 7;

/// The leases of the access point whose address is `server` (`x.y.z.1`).
#[derive(Debug)]
pub struct Server {
    server: [u8; 4],
    /// Per pool address: the client's MAC and when its lease ends (seconds).
    leases: [Option<([u8; 6], u64)>; POOL],
}

/// What a client's packet says that the server uses.
struct Packet {
    xid: [u8; 4],
    flags: [u8; 2],
    mac: [u8; 6],
    kind: u8,
    requested: Option<[u8; 4]>,
    server_id: Option<[u8; 4]>,
    ciaddr: [u8; 4],
}

fn parse(p: &[u8]) -> Option<Packet> {
    if p.len() < HEADER + 4 || p[0] != 1 || p[1] != 1 || p[2] != 6 || p[HEADER..HEADER + 4] != COOKIE {
        return None;
    }
    let four = |at: usize| [p[at], p[at + 1], p[at + 2], p[at + 3]];
    let mut out = Packet {
        xid: four(4),
        flags: [p[10], p[11]],
        mac: [p[28], p[29], p[30], p[31], p[32], p[33]],
        kind: 0,
        requested: None,
        server_id: None,
        ciaddr: four(12),
    };
    let mut i = HEADER + 4;
    while i < p.len() {
        let code = p[i];
        match code {
            0 => {
                i += 1;
                continue;
            }
            255 => break,
            _ => {}
        }
        let len = usize::from(*p.get(i + 1)?);
        let data = p.get(i + 2..i + 2 + len)?;
        match (code, data) {
            (53, [k]) => out.kind = *k,
            (50, [a, b, c, d]) => out.requested = Some([*a, *b, *c, *d]),
            (54, [a, b, c, d]) => out.server_id = Some([*a, *b, *c, *d]),
            _ => {}
        }
        i += 2 + len;
    }
    Some(out)
}

impl Server {
    pub fn new(server: [u8; 4]) -> Server {
        Server { server, leases: [None; POOL] }
    }

    /// The pool address of lease `i`.
    fn addr(&self, i: usize) -> [u8; 4] {
        [self.server[0], self.server[1], self.server[2], 2 + i as u8]
    }

    fn slot_of(&self, addr: [u8; 4]) -> Option<usize> {
        (0..POOL).find(|&i| self.addr(i) == addr)
    }

    /// The client's lease, or a free (or expired) one for it.
    fn place(&self, mac: [u8; 6], now: u64) -> Option<usize> {
        let held = (0..POOL).find(|&i| self.leases[i].is_some_and(|(m, _)| m == mac));
        held.or_else(|| (0..POOL).find(|&i| self.leases[i].is_none_or(|(_, end)| end <= now)))
    }

    /// The answer to one packet received on port 67 at `now` (seconds), to broadcast to port 68;
    /// `None` for a packet that gets none.
    pub fn handle(&mut self, packet: &[u8], now: u64) -> Option<Vec<u8>> {
        let p = parse(packet)?;
        match p.kind {
            DISCOVER => {
                let i = self.place(p.mac, now)?;
                // Held briefly until the REQUEST, so two clients are not offered one address.
                self.leases[i] = Some((p.mac, now + 10));
                Some(self.reply(&p, OFFER, self.addr(i)))
            }
            REQUEST => {
                if p.server_id.is_some_and(|s| s != self.server) {
                    // The client chose another server: forget what was offered to it.
                    for l in &mut self.leases {
                        if l.is_some_and(|(m, _)| m == p.mac) {
                            *l = None;
                        }
                    }
                    return None;
                }
                let wanted = p.requested.unwrap_or(p.ciaddr);
                let granted =
                    self.slot_of(wanted).filter(|&i| self.leases[i].is_none_or(|(m, end)| m == p.mac || end <= now));
                match granted {
                    Some(i) => {
                        for (j, l) in self.leases.iter_mut().enumerate() {
                            if j != i && l.is_some_and(|(m, _)| m == p.mac) {
                                *l = None;
                            }
                        }
                        self.leases[i] = Some((p.mac, now + u64::from(LEASE_SECS)));
                        Some(self.reply(&p, ACK, self.addr(i)))
                    }
                    None => Some(self.reply(&p, NAK, [0; 4])),
                }
            }
            RELEASE => {
                if let Some(i) = self.slot_of(p.ciaddr).filter(|&i| self.leases[i].is_some_and(|(m, _)| m == p.mac)) {
                    self.leases[i] = None;
                }
                None
            }
            _ => None,
        }
    }

    fn reply(&self, p: &Packet, kind: u8, yiaddr: [u8; 4]) -> Vec<u8> {
        let mut r = alloc::vec![0u8; HEADER];
        r[0] = 2;
        r[1] = 1;
        r[2] = 6;
        r[4..8].copy_from_slice(&p.xid);
        r[10..12].copy_from_slice(&p.flags);
        r[16..20].copy_from_slice(&yiaddr);
        if kind != NAK {
            r[20..24].copy_from_slice(&self.server);
        }
        r[28..34].copy_from_slice(&p.mac);
        r.extend_from_slice(&COOKIE);
        r.extend_from_slice(&[53, 1, kind, 54, 4]);
        r.extend_from_slice(&self.server);
        if kind != NAK {
            r.extend_from_slice(&[51, 4]);
            r.extend_from_slice(&LEASE_SECS.to_be_bytes());
            r.extend_from_slice(&[1, 4, 255, 255, 255, 0]);
        }
        r.push(255);
        r
    }
}
