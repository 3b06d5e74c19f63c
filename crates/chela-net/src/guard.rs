//! Which IP addresses a request may reach under `Guard::PublicOnly`.
//!
//! This is a pure classifier. The client calls it on every resolved address and then connects
//! to exactly the address it checked, so DNS rebinding cannot swap in another one. It is not a
//! firewall: it cannot see redirects (the client does not follow them) or what a proxy does
//! with a public address.
//!
//! IPv6 is allow-listed (only global unicast `2000::/3`, minus the special ranges inside it),
//! IPv4 is deny-listed; both follow the IANA special-purpose registries.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` is not a public internet address, as a phrase that completes "it is …",
/// or `None` when it is public.
pub fn non_public_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    const PRIVATE: &str = "a private network address";
    const DOCS: &str = "a documentation address";
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => "a \"this network\" address (0.0.0.0/8)",
        (10, ..) | (192, 168, _) => PRIVATE,
        (172, 16..=31, _) => PRIVATE,
        (100, 64..=127, _) => "a carrier-grade NAT address (100.64.0.0/10)",
        (127, ..) => "a loopback address",
        (169, 254, _) => "a link-local address (this range includes cloud metadata services)",
        (192, 0, 0) => "reserved for IETF protocol assignments (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => DOCS,
        (192, 88, 99) => "a 6to4 relay anycast address",
        (198, 18..=19, _) => "a benchmarking address (198.18.0.0/15)",
        (224..=239, ..) => "a multicast address",
        (240..=255, ..) => "a reserved or broadcast address",
        _ => return None,
    })
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    // ::ffff:a.b.c.d reaches a.b.c.d over IPv4, so it is exactly as public as that address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_reason(v4);
    }
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    Some(match s[0] {
        _ if ip.is_unspecified() => "the unspecified address",
        _ if ip.is_loopback() => "a loopback address",
        // NAT64 (64:ff9b::/96) is how IPv6-only networks reach the IPv4 internet, so allow it
        // exactly when the IPv4 address inside is public.
        0x64 if s[1] == 0xff9b && s[2..6] == [0; 4] => return v4_reason(embedded(s[6], s[7])),
        // 6to4 embeds an IPv4 address the relay will talk to.
        0x2002 => return v4_reason(embedded(s[1], s[2])),
        0x2001 if s[1] == 0x0db8 => "a documentation address",
        0x2001 if s[1] < 0x0200 => "reserved for IETF protocol assignments (2001::/23, includes Teredo)",
        0x3fff if s[1] < 0x1000 => "a documentation address",
        0x2000..=0x3fff => return None,
        0xfc00..=0xfdff => "a unique-local address (fc00::/7)",
        0xfe80..=0xfebf => "a link-local address",
        0xfec0..=0xfeff => "a site-local address",
        0xff00..=0xffff => "a multicast address",
        _ => "not a global unicast address (outside 2000::/3)",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_addresses() {
        // (address, public?)
        let cases = [
            ("127.0.0.1", false),
            ("127.255.255.254", false),
            ("10.0.0.1", false),
            ("10.255.255.255", false),
            ("172.16.0.1", false),
            ("172.31.255.255", false),
            ("172.15.255.255", true),
            ("172.32.0.0", true),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("100.127.255.255", false),
            ("100.128.0.0", true),
            ("0.0.0.0", false),
            ("0.1.2.3", false),
            ("192.0.0.8", false),
            ("192.0.2.1", false),
            ("198.51.100.7", false),
            ("203.0.113.9", false),
            ("198.18.0.1", false),
            ("224.0.0.1", false),
            ("239.255.255.250", false),
            ("240.0.0.1", false),
            ("255.255.255.255", false),
            ("8.8.8.8", true),
            ("1.1.1.1", true),
            ("93.184.215.14", true),
            ("::", false),
            ("::1", false),
            ("fc00::1", false),
            ("fd12:3456::1", false),
            ("fe80::1", false),
            ("fec0::1", false),
            ("ff02::1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:10.1.2.3", false),
            ("::ffff:169.254.169.254", false),
            ("::ffff:8.8.8.8", true),
            ("::127.0.0.1", false),
            ("::8.8.8.8", false),
            ("64:ff9b::7f00:1", false),
            ("64:ff9b::808:808", true),
            ("64:ff9b:1::1", false),
            ("100::1", false),
            ("2002:7f00:1::", false),
            ("2002:808:808::", true),
            ("2001:db8::1", false),
            ("2001::1", false),
            ("3fff::1", false),
            ("2606:4700:4700::1111", true),
            ("2a00:1450:4001:80b::200e", true),
        ];
        for (addr, public) in cases {
            let ip: IpAddr = addr.parse().unwrap();
            let reason = non_public_reason(ip);
            assert_eq!(reason.is_none(), public, "{addr}: {reason:?}");
        }
    }

    #[test]
    fn reasons_name_the_kind_of_address() {
        let reason = |s: &str| non_public_reason(s.parse().unwrap()).unwrap();
        assert_eq!(reason("127.0.0.1"), "a loopback address");
        assert_eq!(reason("::ffff:127.0.0.1"), "a loopback address");
        assert!(reason("169.254.169.254").contains("metadata"));
        assert_eq!(reason("192.168.0.10"), "a private network address");
    }
}
