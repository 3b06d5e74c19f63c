//! The portal's DHCP server (`chela_chip::dhcp`) with packets as clients send them: the
//! DISCOVER/OFFER/REQUEST/ACK exchange, a bounded pool, NAKs, and any bytes from whoever joined.

use chela_chip::dhcp::{POOL, Server};

const CHIP: [u8; 4] = [192, 168, 4, 1];

fn packet(kind: u8, mac: u8, opts: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 236];
    p[0] = 1;
    p[1] = 1;
    p[2] = 6;
    p[4..8].copy_from_slice(&[9, 8, 7, mac]);
    p[28..34].copy_from_slice(&[2, 0, 0, 0, 0, mac]);
    p.extend_from_slice(&[99, 130, 83, 99, 53, 1, kind]);
    p.extend_from_slice(opts);
    p.push(255);
    p
}

fn request(mac: u8, ip: [u8; 4]) -> Vec<u8> {
    packet(3, mac, &[50, 4, ip[0], ip[1], ip[2], ip[3], 54, 4, 192, 168, 4, 1])
}

/// The message type and the address of an answer.
fn read(r: &[u8]) -> (u8, [u8; 4]) {
    assert_eq!(r[0], 2, "a BOOTREPLY");
    assert_eq!(&r[236..240], &[99, 130, 83, 99]);
    assert_eq!(&r[240..243], &[53, 1, r[242]]);
    (r[242], [r[16], r[17], r[18], r[19]])
}

#[test]
fn a_client_is_offered_an_address_and_gets_it() {
    let mut s = Server::new(CHIP);
    let offer = s.handle(&packet(1, 1, &[]), 0).unwrap();
    assert_eq!(read(&offer), (2, [192, 168, 4, 2]));
    assert_eq!(&offer[4..8], &[9, 8, 7, 1], "the client's transaction id");
    let ack = s.handle(&request(1, [192, 168, 4, 2]), 1).unwrap();
    assert_eq!(read(&ack), (5, [192, 168, 4, 2]));
    assert!(ack.windows(6).any(|w| w == [1, 4, 255, 255, 255, 0]), "the /24 mask");
    // Asked again (a renewal), the same address.
    assert_eq!(read(&s.handle(&packet(1, 1, &[]), 100).unwrap()).1, [192, 168, 4, 2]);
    // Another client, another address; and it may not take the first one's.
    assert_eq!(read(&s.handle(&packet(1, 2, &[]), 2).unwrap()), (2, [192, 168, 4, 3]));
    assert_eq!(read(&s.handle(&request(2, [192, 168, 4, 2]), 2).unwrap()).0, 6, "a NAK");
    assert_eq!(read(&s.handle(&request(2, [10, 0, 0, 9]), 2).unwrap()).0, 6, "not in the pool: a NAK");
}

#[test]
fn the_pool_is_bounded_and_leases_end() {
    let mut s = Server::new(CHIP);
    for mac in 1..=POOL as u8 {
        let (_, ip) = read(&s.handle(&packet(1, mac, &[]), 0).unwrap());
        assert_eq!(read(&s.handle(&request(mac, ip), 0).unwrap()).0, 5);
    }
    assert!(s.handle(&packet(1, 99, &[]), 1).is_none(), "a full pool offers nothing");
    // After the lease time, an address is free again.
    let later = u64::from(chela_chip::dhcp::LEASE_SECS) + 1;
    assert_eq!(read(&s.handle(&packet(1, 99, &[]), later).unwrap()).0, 2);
    // A RELEASE frees the address at once.
    let mut s = Server::new(CHIP);
    s.handle(&request(1, [192, 168, 4, 2]), 0).unwrap();
    let mut release = packet(7, 1, &[]);
    release[12..16].copy_from_slice(&[192, 168, 4, 2]);
    assert!(s.handle(&release, 1).is_none());
    assert_eq!(read(&s.handle(&request(2, [192, 168, 4, 2]), 2).unwrap()).0, 5);
}

#[test]
fn malformed_packets_get_no_answer() {
    let mut s = Server::new(CHIP);
    let good = packet(1, 1, &[]);
    assert!(s.handle(&good[..239], 0).is_none(), "no magic cookie");
    let mut reply = good.clone();
    reply[0] = 2;
    assert!(s.handle(&reply, 0).is_none(), "a server's reply");
    // An option running past the end.
    let mut cut = packet(1, 1, &[]);
    cut.pop();
    cut.extend_from_slice(&[50, 200, 1]);
    assert!(s.handle(&cut, 0).is_none());
    // Another server was chosen: no answer, and the offer is withdrawn.
    s.handle(&good, 0).unwrap();
    let elsewhere = packet(3, 1, &[50, 4, 192, 168, 4, 2, 54, 4, 10, 0, 0, 1]);
    assert!(s.handle(&elsewhere, 1).is_none());
    assert_eq!(read(&s.handle(&packet(1, 2, &[]), 2).unwrap()).1, [192, 168, 4, 2]);
}

proptest::proptest! {
    #[test]
    fn any_bytes_are_handled_without_panicking(
        bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
        edits in proptest::collection::vec((0usize..260, proptest::num::u8::ANY), 0..8),
    ) {
        let mut s = Server::new(CHIP);
        let _ = s.handle(&bytes, 0);
        let mut p = request(1, [192, 168, 4, 2]);
        for (at, b) in edits {
            let at = at % p.len();
            p[at] = b;
        }
        if let Some(r) = s.handle(&p, 0) {
            let (kind, ip) = read(&r);
            proptest::prop_assert!(kind == 5 && ip[..3] == [192, 168, 4] && (2..2 + POOL as u8).contains(&ip[3]) || kind == 6 || kind == 2);
        }
    }
}
