//! The MQTT side of one device connection as a pure state machine: bytes in, [`Event`]s out,
//! no socket and no clock, so the rules can be fuzzed and property-tested (the connection in
//! [`super::mqtt`] reads into [`Wire::buffer`] and acts on [`Wire::event`]).
//!
//! Rules: the first packet is a CONNECT, and only the first; a packet over [`MAX_PACKET`] or one
//! the codec cannot read closes; PUBLISH at QoS 0 is taken, at QoS 1 acknowledged first, at
//! QoS 2 closes; only PUBLISH to [`PUBLISH_TOPIC`] carries a message; PINGREQ is answered; a
//! SUBSCRIBE gets QoS 0 for every filter (the firmware never sends one); DISCONNECT ends; any
//! other packet a client does not send closes. After the end nothing more comes out.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use rumqttc::mqttbytes::v4::{Connect, Packet, PubAck, SubAck, SubscribeReasonCode};
use rumqttc::mqttbytes::{self, QoS};

use super::session::Reason;

/// Largest MQTT packet from a device: a JSON message plus the packet's own fields.
pub const MAX_PACKET: usize = super::MAX_MESSAGE + 1024;
/// The topic devices publish to.
pub const PUBLISH_TOPIC: &str = "device-server";

/// What the connection has to do about the next packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The login (only ever the first event).
    Connect(Connect),
    /// A message the device published (its payload, not yet checked to be UTF-8).
    Message(Bytes),
    /// A packet to write back.
    Reply(Packet),
    /// Nothing to do (a publish to another topic, a PUBACK).
    Nothing,
    /// The device said DISCONNECT.
    Gone,
    /// Close the connection.
    Close(Reason, &'static str),
}

/// One connection's read side.
#[derive(Debug, Default)]
pub struct Wire {
    buf: BytesMut,
    connected: bool,
    ended: bool,
    /// What one packet gave beyond its first event (QoS 1: the message after the PUBACK).
    queued: VecDeque<Event>,
}

impl Wire {
    /// Where the next bytes read go.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes held waiting for the rest of a packet.
    pub fn held(&self) -> usize {
        self.buf.len()
    }

    /// The next event; `None` when more bytes are needed, or for ever after the end.
    pub fn event(&mut self) -> Option<Event> {
        if let Some(e) = self.queued.pop_front() {
            return Some(e);
        }
        if self.ended {
            return None;
        }
        let packet = match Packet::read(&mut self.buf, MAX_PACKET) {
            Ok(p) => p,
            Err(mqttbytes::Error::InsufficientBytes(_)) => return None,
            Err(mqttbytes::Error::PayloadSizeLimitExceeded(_)) => {
                return Some(self.end(Reason::Size, "packet too large"));
            }
            Err(_) => return Some(self.end(Reason::Policy, "malformed packet")),
        };
        let event = match (self.connected, packet) {
            (false, Packet::Connect(c)) => {
                self.connected = true;
                Event::Connect(c)
            }
            (false, _) => self.end(Reason::Policy, "the first packet must be CONNECT"),
            (true, Packet::Publish(p)) => {
                let message = if p.topic == PUBLISH_TOPIC { Event::Message(p.payload) } else { Event::Nothing };
                match p.qos {
                    QoS::AtMostOnce => message,
                    QoS::AtLeastOnce => {
                        self.queued.push_back(message);
                        Event::Reply(Packet::PubAck(PubAck::new(p.pkid)))
                    }
                    QoS::ExactlyOnce => self.end(Reason::Policy, "QoS 2 is not spoken here"),
                }
            }
            (true, Packet::PingReq) => Event::Reply(Packet::PingResp),
            (true, Packet::Subscribe(s)) => {
                let codes = s.filters.iter().map(|_| SubscribeReasonCode::Success(QoS::AtMostOnce)).collect();
                Event::Reply(Packet::SubAck(SubAck::new(s.pkid, codes)))
            }
            (true, Packet::PubAck(_)) => Event::Nothing,
            (true, Packet::Disconnect) => {
                self.ended = true;
                self.buf = BytesMut::new();
                Event::Gone
            }
            (true, Packet::Connect(_)) => self.end(Reason::Policy, "a second CONNECT"),
            (true, _) => self.end(Reason::Policy, "a packet a device does not send"),
        };
        Some(event)
    }

    fn end(&mut self, reason: Reason, why: &'static str) -> Event {
        self.ended = true;
        self.buf = BytesMut::new();
        Event::Close(reason, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rumqttc::mqttbytes::v4::{Publish, Subscribe};

    fn bytes(packets: &[Packet]) -> Vec<u8> {
        let mut out = BytesMut::new();
        for p in packets {
            p.write(&mut out, usize::MAX).unwrap();
        }
        out.to_vec()
    }

    fn run(chunks: &[&[u8]]) -> Vec<Event> {
        let mut w = Wire::default();
        let mut out = Vec::new();
        for c in chunks {
            w.buffer().extend_from_slice(c);
            while let Some(e) = w.event() {
                out.push(e);
            }
            assert!(w.held() <= MAX_PACKET + 5 + c.len(), "the buffer holds at most one packet and a read");
        }
        out
    }

    #[test]
    fn a_session_in_order() {
        let mut q1 = Publish::new("device-server", QoS::AtLeastOnce, b"{}".to_vec());
        q1.pkid = 7;
        let input = bytes(&[
            Packet::Connect(Connect::new("GID_x@@@aa_bb_cc_dd_ee_ff@@@u")),
            Packet::Publish(Publish::new("device-server", QoS::AtMostOnce, b"hello".to_vec())),
            Packet::Publish(q1),
            Packet::Publish(Publish::new("elsewhere", QoS::AtMostOnce, b"x".to_vec())),
            Packet::PingReq,
            Packet::Subscribe(Subscribe::new("devices/p2p/x", QoS::AtLeastOnce)),
            Packet::Disconnect,
            Packet::PingReq,
        ]);
        let ev = run(&[&input]);
        assert!(matches!(&ev[0], Event::Connect(c) if c.client_id.starts_with("GID_")));
        assert_eq!(ev[1], Event::Message(Bytes::from_static(b"hello")));
        assert_eq!(ev[2], Event::Reply(Packet::PubAck(PubAck::new(7))), "acknowledged first");
        assert_eq!(ev[3], Event::Message(Bytes::from_static(b"{}")));
        assert_eq!(ev[4], Event::Nothing);
        assert_eq!(ev[5], Event::Reply(Packet::PingResp));
        assert!(matches!(&ev[6], Event::Reply(Packet::SubAck(_))));
        assert_eq!(ev[7], Event::Gone);
        assert_eq!(ev.len(), 8, "nothing after DISCONNECT");
    }

    #[test]
    fn what_a_device_must_not_send_closes() {
        let first_ping = run(&[&bytes(&[Packet::PingReq])]);
        assert_eq!(first_ping, [Event::Close(Reason::Policy, "the first packet must be CONNECT")]);
        let c = Packet::Connect(Connect::new("c"));
        let twice = run(&[&bytes(&[c.clone(), c.clone()])]);
        assert_eq!(twice[1], Event::Close(Reason::Policy, "a second CONNECT"));
        let mut q2 = Publish::new("device-server", QoS::ExactlyOnce, b"x".to_vec());
        q2.pkid = 1;
        let q2 = Packet::Publish(q2);
        assert_eq!(run(&[&bytes(&[c.clone(), q2])])[1], Event::Close(Reason::Policy, "QoS 2 is not spoken here"));
        // An oversized packet is refused from its header, before its body arrives.
        let big = Packet::Publish(Publish::new("device-server", QoS::AtMostOnce, vec![b'x'; MAX_PACKET + 1]));
        let head = &bytes(&[big])[..8];
        assert_eq!(run(&[&bytes(&[c]), head])[1], Event::Close(Reason::Size, "packet too large"));
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events_and_nothing_follows_the_end(
            data in proptest::collection::vec(any::<u8>(), 0..512),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
            connect_first in any::<bool>(),
        ) {
            let mut input = if connect_first { bytes(&[Packet::Connect(Connect::new("c"))]) } else { Vec::new() };
            input.extend_from_slice(&data);
            let whole = run(&[&input]);
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            at.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for a in at {
                chunks.push(&input[from..a]);
                from = a;
            }
            chunks.push(&input[from..]);
            prop_assert_eq!(&run(&chunks), &whole);
            if let Some(end) = whole.iter().position(|e| matches!(e, Event::Gone | Event::Close(..))) {
                prop_assert_eq!(end, whole.len() - 1);
            }
            prop_assert!(whole.iter().skip(1).all(|e| !matches!(e, Event::Connect(_))));
        }
    }
}
