//! Who gets one of the gateway's connections and WebSockets.
//!
//! A connection is taken before its request head is read, so nothing yet says who it is: a
//! client that opens connections and never finishes a head holds them until the header timeout.
//! Three rules keep the owner able to connect anyway:
//! - a source address other than this machine may hold at most [`Limits::per_address`]
//!   connections (and [`Limits::ws_per_address`] WebSockets);
//! - the last [`Limits::reserved`] connections are kept for the owner: a client on this machine
//!   takes one at once; anyone else may take one on probation, with a short head timeout, and
//!   its requests are served only if they carry `gateway.token` (decided after the head);
//! - upgraded WebSockets no longer hold a connection, so they are counted on their own
//!   ([`Limits::websockets`]).
//!
//! [`Limits::per_address`]: super::http::Limits::per_address
//! [`Limits::ws_per_address`]: super::http::Limits::ws_per_address
//! [`Limits::reserved`]: super::http::Limits::reserved
//! [`Limits::websockets`]: super::http::Limits::websockets

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use hyper::Request;

use super::http::{ApiError, Limits};

/// The gateway's counts of connections and WebSockets, in all and per source address.
pub struct Admission {
    limits: Limits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    conns: usize,
    ws: usize,
    // Only addresses other than this machine's, and only while they hold something: bounded
    // by the connection and WebSocket caps.
    conns_by_ip: HashMap<IpAddr, usize>,
    ws_by_ip: HashMap<IpAddr, usize>,
}

/// One admitted connection; released when dropped.
pub struct Conn {
    adm: Arc<Admission>,
    ip: Option<IpAddr>,
    /// On a reserved slot without being a local client: only requests carrying the token are
    /// served on it.
    pub probation: bool,
}

/// One admitted WebSocket; released when the last clone is dropped.
#[derive(Clone)]
pub struct WsSlot {
    _held: Arc<WsHeld>,
}

pub struct WsHeld {
    adm: Arc<Admission>,
    ip: Option<IpAddr>,
}

impl Admission {
    pub fn new(limits: Limits) -> Arc<Admission> {
        Arc::new(Admission { limits, state: Mutex::new(State::default()) })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection from `ip` (`local`: a client on this machine), or why not.
    pub fn connection(self: &Arc<Self>, ip: IpAddr, local: bool) -> Result<Conn, &'static str> {
        let l = &self.limits;
        let mut s = self.state();
        let held = if local { 0 } else { s.conns_by_ip.get(&ip).copied().unwrap_or(0) };
        if !local && held >= l.per_address {
            return Err("this address holds the most connections one address may");
        }
        let open = l.connections.saturating_sub(l.reserved);
        let probation = if s.conns < open {
            false
        } else if s.conns < l.connections {
            !local
        } else {
            return Err("every connection is taken");
        };
        s.conns += 1;
        if !local {
            *s.conns_by_ip.entry(ip).or_default() += 1;
        }
        Ok(Conn { adm: Arc::clone(self), ip: (!local).then_some(ip), probation })
    }

    /// A WebSocket from `ip`, or the refusal to answer the upgrade with.
    pub fn websocket(self: &Arc<Self>, ip: IpAddr, local: bool) -> Result<WsSlot, ApiError> {
        let l = &self.limits;
        let mut s = self.state();
        if s.ws >= l.websockets {
            return Err(ApiError::Busy(format!(
                "{} WebSockets are open, the most this gateway keeps (gateway.max_websockets); close one, or try \
                 again later",
                s.ws
            )));
        }
        if !local && s.ws_by_ip.get(&ip).copied().unwrap_or(0) >= l.ws_per_address {
            return Err(ApiError::Busy(format!(
                "this address has {} WebSockets open, the most one address may (gateway.websockets_per_address); \
                 close one first",
                l.ws_per_address
            )));
        }
        s.ws += 1;
        if !local {
            *s.ws_by_ip.entry(ip).or_default() += 1;
        }
        Ok(WsSlot { _held: Arc::new(WsHeld { adm: Arc::clone(self), ip: (!local).then_some(ip) }) })
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state();
        (s.conns, s.ws)
    }
}

/// One fewer for `ip` in `map`, forgetting addresses that hold nothing.
fn release(map: &mut HashMap<IpAddr, usize>, ip: Option<IpAddr>) {
    let Some(ip) = ip else { return };
    if let Some(n) = map.get_mut(&ip) {
        *n -= 1;
        if *n == 0 {
            map.remove(&ip);
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let mut s = self.adm.state();
        s.conns -= 1;
        release(&mut s.conns_by_ip, self.ip);
    }
}

impl Drop for WsHeld {
    fn drop(&mut self) {
        let mut s = self.adm.state();
        s.ws -= 1;
        release(&mut s.ws_by_ip, self.ip);
    }
}

/// The WebSocket slot the router took for an upgrade request: its task keeps it while the
/// socket is open.
pub fn ws_slot<B>(req: &Request<B>) -> Option<WsSlot> {
    req.extensions().get::<WsSlot>().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits { connections: 4, reserved: 2, per_address: 3, websockets: 3, ws_per_address: 2, ..Limits::default() }
    }

    #[test]
    fn the_reserve_is_the_owner_s_and_each_address_has_its_share() {
        let adm = Admission::new(limits());
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = adm.connection(a, false).unwrap();
        let second = adm.connection(a, false).unwrap();
        assert!(!first.probation && !second.probation);
        let third = adm.connection(a, false).unwrap();
        assert!(third.probation, "past the open slots, a remote client is on probation");
        assert!(adm.connection(a, false).is_err(), "three per address");
        let local = adm.connection(b, true).unwrap();
        assert!(!local.probation, "a local client takes the last reserved slot outright");
        assert!(adm.connection(b, false).is_err() && adm.connection(b, true).is_err(), "all taken");
        drop((first, second, third, local));
        assert_eq!(adm.counts().0, 0);
        assert!(adm.connection(a, false).is_ok_and(|c| !c.probation), "released on drop");
    }

    #[test]
    fn websockets_are_counted_in_all_and_per_address_until_the_last_clone_goes() {
        let adm = Admission::new(limits());
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let one = adm.websocket(a, false).unwrap();
        let two = adm.websocket(a, false).unwrap();
        let e = adm.websocket(a, false).err().unwrap().to_string();
        assert!(e.contains("gateway.websockets_per_address"), "{e}");
        let three = adm.websocket(b, true).unwrap();
        let e = adm.websocket(b, true).err().unwrap().to_string();
        assert!(e.contains("gateway.max_websockets"), "{e}");
        let copy = one.clone();
        drop((one, two, three));
        assert_eq!(adm.counts().1, 1, "a clone still holds its slot");
        drop(copy);
        assert_eq!(adm.counts(), (0, 0));
    }
}
