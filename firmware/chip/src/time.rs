//! Calendar arithmetic for a clock that only knows Unix seconds.

use alloc::format;
use alloc::string::String;

/// ISO 8601 in UTC and the weekday of `secs` (Unix seconds).
pub fn utc(secs: u64) -> (String, &'static str) {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = chela_core::zone::civil::civil_from_days(days as i64);
    const WEEKDAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];
    let iso = format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00", rem / 3600, rem % 3600 / 60, rem % 60);
    (iso, WEEKDAYS[(days % 7) as usize])
}

/// Unix seconds from an NTP timestamp's seconds (era 0, 1900-based), `None` before 1970.
pub fn unix_from_ntp(ntp_secs: u32) -> Option<u64> {
    const NTP_TO_UNIX: u64 = 2_208_988_800;
    u64::from(ntp_secs).checked_sub(NTP_TO_UNIX)
}

/// Bytes of an SNTP packet (RFC 4330, no extensions).
pub const NTP_PACKET: usize = 48;

/// An SNTP client request: version 4, mode 3 (client), everything else zero.
pub fn ntp_request() -> [u8; NTP_PACKET] {
    let mut p = [0u8; NTP_PACKET];
    p[0] = (4 << 3) | 3;
    p
}

/// The Unix seconds in an SNTP server reply, or why it is not one to trust.
pub fn parse_ntp_reply(reply: &[u8]) -> Result<u64, &'static str> {
    if reply.len() < NTP_PACKET {
        return Err("the reply is shorter than an SNTP packet");
    }
    let mode = reply[0] & 0x7;
    let leap = reply[0] >> 6;
    let stratum = reply[1];
    if mode != 4 && mode != 5 {
        return Err("the reply is not from a server");
    }
    if leap == 3 || stratum == 0 || stratum > 15 {
        return Err("the server's clock is not synchronised (kiss-o'-death or unsynchronised)");
    }
    let secs = u32::from_be_bytes([reply[40], reply[41], reply[42], reply[43]]);
    unix_from_ntp(secs).ok_or("the transmit time is before 1970")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_of_a_known_instant() {
        assert_eq!(utc(1_796_037_920), ("2026-11-30T11:25:20+00:00".into(), "Monday"));
        assert_eq!(utc(0), ("1970-01-01T00:00:00+00:00".into(), "Thursday"));
        // A leap day.
        assert_eq!(utc(951_782_400).0, "2000-02-29T00:00:00+00:00");
    }

    fn reply(first: u8, stratum: u8, ntp_secs: u32) -> [u8; NTP_PACKET] {
        let mut p = [0u8; NTP_PACKET];
        p[0] = first;
        p[1] = stratum;
        p[40..44].copy_from_slice(&ntp_secs.to_be_bytes());
        p
    }

    #[test]
    fn sntp_reply_gives_unix_seconds() {
        let request = ntp_request();
        assert_eq!(request[0], 0x23);
        // LI 0, VN 4, mode 4 (server), stratum 2, 2026-11-30T11:25:20Z.
        let r = reply(0x24, 2, (1_796_037_920u64 + 2_208_988_800) as u32);
        assert_eq!(parse_ntp_reply(&r), Ok(1_796_037_920));
    }

    #[test]
    fn sntp_refuses_what_it_cannot_trust() {
        let ok_secs = (1_796_037_920u64 + 2_208_988_800) as u32;
        assert!(parse_ntp_reply(&reply(0x24, 2, ok_secs)[..47]).is_err(), "short");
        assert!(parse_ntp_reply(&reply(0x23, 2, ok_secs)).is_err(), "a client packet");
        assert!(parse_ntp_reply(&reply(0xe4, 2, ok_secs)).is_err(), "leap indicator 3");
        assert!(parse_ntp_reply(&reply(0x24, 0, ok_secs)).is_err(), "kiss-o'-death");
        assert!(parse_ntp_reply(&reply(0x24, 2, 5)).is_err(), "before 1970");
    }
}
