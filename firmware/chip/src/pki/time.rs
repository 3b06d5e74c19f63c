//! X.509 times (UTCTime and GeneralizedTime, both in UTC with seconds, as RFC 5280 requires)
//! into Unix seconds, with integer date maths.

use chela_core::zone::civil;

use super::der::{self, Tlv, Why};

const BAD: Why = "a validity time is malformed";

pub(crate) fn parse(tlv: &Tlv<'_>) -> Result<i64, Why> {
    let (year, rest) = match (tlv.tag, tlv.value.len()) {
        (der::UTC_TIME, 13) => {
            let yy = digits(&tlv.value[..2])?;
            // RFC 5280 §4.1.2.5.1: 50..99 are 1950..1999, 00..49 are 2000..2049.
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &tlv.value[2..])
        }
        (der::GENERALIZED_TIME, 15) => (digits(&tlv.value[..4])?, &tlv.value[4..]),
        _ => return Err(BAD),
    };
    if rest[10] != b'Z' {
        return Err(BAD);
    }
    let month = digits(&rest[0..2])?;
    let day = digits(&rest[2..4])?;
    let (hour, minute, second) = (digits(&rest[4..6])?, digits(&rest[6..8])?, digits(&rest[8..10])?);
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(BAD);
    }
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

fn digits(bytes: &[u8]) -> Result<i64, Why> {
    bytes
        .iter()
        .try_fold(0i64, |acc, &b| if b.is_ascii_digit() { Ok(acc * 10 + i64::from(b - b'0')) } else { Err(BAD) })
}

// The core's calendar (already in the image for the clock tools); the callers have checked
// the ranges (year 0..=9999, month 1..=12, day 1..=31), so the narrowing casts are exact.
fn days_in_month(year: i64, month: i64) -> i64 {
    i64::from(civil::days_in_month(year as i32, month as u8))
}

fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    civil::days_from_civil(year as i32, month as u8, day as u8)
}

/// An HTTP `Date` header in Unix seconds: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// the only form RFC 9110 lets a server send; anything else is `None`.
pub(crate) fn http_date(text: &str) -> Option<u64> {
    const MONTHS: [&[u8]; 12] =
        [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];
    let b = text.trim().as_bytes();
    if b.len() != 29
        || !b[..3].iter().all(u8::is_ascii_alphabetic)
        || &b[3..5] != b", "
        || b[7] != b' '
        || b[11] != b' '
        || b[16] != b' '
        || b[19] != b':'
        || b[22] != b':'
        || &b[25..] != b" GMT"
    {
        return None;
    }
    let month = MONTHS.iter().position(|m| *m == &b[8..11])? as i64 + 1;
    let n = |r: core::ops::Range<usize>| digits(&b[r]).ok();
    let (day, year, hour, minute, second) = (n(5..7)?, n(12..16)?, n(17..19)?, n(20..22)?, n(23..25)?);
    if day == 0 || day > days_in_month(year, month) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    u64::try_from(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tag: u8, s: &'static str) -> Result<i64, Why> {
        parse(&Tlv { tag, value: s.as_bytes(), whole: s.as_bytes() })
    }

    #[test]
    fn known_instants() {
        assert_eq!(t(der::UTC_TIME, "700101000000Z"), Ok(0));
        assert_eq!(t(der::UTC_TIME, "491231235959Z"), Ok(2_524_607_999));
        assert_eq!(t(der::UTC_TIME, "500101000000Z"), Ok(-631_152_000));
        assert_eq!(t(der::GENERALIZED_TIME, "20000229120000Z"), Ok(951_825_600));
        assert_eq!(t(der::GENERALIZED_TIME, "20261203120000Z"), Ok(1_796_299_200));
        assert_eq!(t(der::GENERALIZED_TIME, "21260101000000Z"), Ok(4_922_899_200));
        assert_eq!(t(der::GENERALIZED_TIME, "19000101000000Z"), Ok(-2_208_988_800));
    }

    #[test]
    fn bad_times() {
        for s in ["700101000000", "700230000000Z", "190229000000Z", "701301000000Z", "700101240000Z", "7001010000+0Z"] {
            assert!(t(der::UTC_TIME, s).is_err(), "{s}");
        }
        assert!(t(der::GENERALIZED_TIME, "21000229000000Z").is_err(), "2100 is not a leap year");
        assert!(t(der::GENERALIZED_TIME, "20000101000000.5Z").is_err());
        assert!(t(der::UTC_TIME, "20000101000000Z").is_err(), "a GeneralizedTime in a UTCTime tag");
    }

    #[test]
    fn http_dates() {
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(http_date(" Thu, 03 Dec 2026 12:00:00 GMT "), Some(1_796_299_200));
        for bad in [
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nox 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMTX",
            "",
        ] {
            assert_eq!(http_date(bad), None, "{bad}");
        }
    }
}
