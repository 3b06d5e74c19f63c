//! Whose names a certificate carries: the host against the leaf's subjectAltName, and the names
//! of every certificate under a CA against that CA's nameConstraints (RFC 5280 4.2.1.10, read
//! as rustls-webpki reads it). What the chip cannot evaluate is refused, never skipped.

use super::der::{self, Reader, Why};

pub(crate) const DNS_NAME: u8 = 0x82;
pub(crate) const IP_ADDRESS: u8 = 0x87;
const DIRECTORY_NAME: u8 = 0xa4;
/// The GeneralName tags RFC 5280 defines; anything else in a subjectAltName is malformed.
const GENERAL_NAME_TAGS: [u8; 9] = [0xa0, 0x81, DNS_NAME, 0xa3, DIRECTORY_NAME, 0xa5, 0x86, IP_ADDRESS, 0x88];
const PERMITTED: u8 = 0xa0;
const EXCLUDED: u8 = 0xa1;

/// A name against a base: contained, or (for excluded bases) possibly reaching into it.
type Matcher = fn(&[u8], &[u8]) -> bool;

/// Name comparisons one chain may cost (webpki allows as many): a chain of wide
/// subjectAltNames under wide constraints, tried along many paths, stays bounded in time.
pub(crate) const COMPARISONS: u32 = 250_000;

/// Whether a tag may stand in a subjectAltName.
pub(crate) fn is_general_name(tag: u8) -> bool {
    GENERAL_NAME_TAGS.contains(&tag)
}

/// The (tag, value) entries of a subjectAltName's contents; a malformed entry ends the list.
fn entries(san: Option<&[u8]>) -> impl Iterator<Item = (u8, &[u8])> {
    let mut r = Reader::new(san.unwrap_or(&[]));
    core::iter::from_fn(move || r.next().ok().map(|t| (t.tag, t.value)))
}

/// The leaf's subjectAltName against the host the chip dialled. The chip dials names only, so
/// a host that is an IP address (a `:`, or a last label all digits) matches nothing: never a
/// dNSName such as `1.2.3.4` or `*.2.3.4`, and no iPAddress entry either (matching those would
/// cost the image an address parser for hosts it never calls).
pub(crate) fn host_matches(san: Option<&[u8]>, host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host).as_bytes();
    if !valid_dns(host, false) {
        return false;
    }
    entries(san).any(|(tag, pattern)| tag == DNS_NAME && valid_dns(pattern, true) && dns_matches(pattern, host))
}

/// A valid subjectAltName dNSName against a valid host: ASCII case-insensitive; a wildcard
/// stands for exactly one whole left-most label.
fn dns_matches(pattern: &[u8], host: &[u8]) -> bool {
    if let Some(rest) = pattern.strip_prefix(b"*.") {
        let Some(dot) = host.iter().position(|&b| b == b'.') else { return false };
        return dot > 0 && host[dot + 1..].eq_ignore_ascii_case(rest);
    }
    pattern.eq_ignore_ascii_case(host)
}

/// A DNS name as certificates and hosts may carry it: labels of letters, digits, `-` and `_`
/// (no `-` at either end), 1 to 63 bytes each, 253 in all, the last not all digits; with
/// `wildcard`, a left-most `*.` followed by at least two labels.
fn valid_dns(name: &[u8], wildcard: bool) -> bool {
    let (body, is_wild) = match name.strip_prefix(b"*.") {
        Some(rest) if wildcard => (rest, true),
        _ => (name, false),
    };
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let mut labels = 0;
    let mut last_numeric = false;
    for label in body.split(|&b| b == b'.') {
        let ok_bytes = label.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if label.is_empty() || label.len() > 63 || !ok_bytes || label[0] == b'-' || label[label.len() - 1] == b'-' {
            return false;
        }
        last_numeric = label.iter().all(u8::is_ascii_digit);
        labels += 1;
    }
    !last_numeric && (!is_wild || labels >= 2)
}

/// A dNSName constraint's base: empty (every name), a name, or a name after a leading dot
/// (only names below it).
fn valid_base(base: &[u8]) -> bool {
    base.is_empty() || valid_dns(base.strip_prefix(b".").unwrap_or(base), false)
}

/// Whether the name is the base or below it.
fn dns_within(name: &[u8], base: &[u8]) -> bool {
    if base.is_empty() {
        return true;
    }
    if base[0] == b'.' {
        return name.len() > base.len() && name[name.len() - base.len()..].eq_ignore_ascii_case(base);
    }
    if name.len() == base.len() {
        return name.eq_ignore_ascii_case(base);
    }
    name.len() > base.len()
        && name[name.len() - base.len() - 1] == b'.'
        && name[name.len() - base.len()..].eq_ignore_ascii_case(base)
}

/// Whether an excluded base may name a host that `name` covers: the name is within the base,
/// or, for a wildcard, the base lies below the wildcard's parent (stricter than needed: a
/// base two labels down is refused too).
fn dns_overlaps(name: &[u8], base: &[u8]) -> bool {
    if dns_within(name, base) {
        return true;
    }
    match name.strip_prefix(b"*.") {
        Some(parent) => dns_within(base.strip_prefix(b".").unwrap_or(base), parent),
        None => false,
    }
}

/// An iPAddress constraint: address then mask, 8 or 32 bytes, the mask a run of ones.
fn valid_ip_constraint(c: &[u8]) -> bool {
    if c.len() != 8 && c.len() != 32 {
        return false;
    }
    let mut zero_seen = false;
    for &b in &c[c.len() / 2..] {
        if (zero_seen && b != 0) || b.leading_ones() + b.trailing_zeros() != 8 {
            return false;
        }
        zero_seen |= b != 0xff;
    }
    true
}

fn ip_within(ip: &[u8], c: &[u8]) -> bool {
    c.len() == 2 * ip.len() && ip.iter().zip(&c[..ip.len()]).zip(&c[ip.len()..]).all(|((a, b), m)| a & m == b & m)
}

/// The nameConstraints extension's value checked when the certificate is read: at most one
/// permitted and one excluded list, each of subtrees holding just a base (no minimum or
/// maximum, which RFC 5280 forbids). Which bases the chip can evaluate is decided later.
/// `value` is the NameConstraints SEQUENCE's contents.
pub(crate) fn parse_constraints(value: &[u8]) -> Result<&[u8], Why> {
    const BAD: Why = "nameConstraints is malformed";
    let mut parts = Reader::new(value);
    for tag in [PERMITTED, EXCLUDED] {
        if let Some(list) = parts.optional(tag, BAD)? {
            let mut subtrees = Reader::new(list.value);
            if subtrees.is_empty() {
                return Err(BAD);
            }
            while !subtrees.is_empty() {
                let subtree = subtrees.expect(der::SEQUENCE, BAD)?;
                let mut s = Reader::new(subtree.value);
                s.next().map_err(|_| BAD)?;
                s.finish("nameConstraints has a minimum or maximum")?;
            }
        }
    }
    parts.finish(BAD)?;
    Ok(value)
}

/// Checks the subjectAltNames of the certificates under a CA (`sans`) against that CA's
/// constraints (what [`parse_constraints`] returned). `Err` says why the names are refused:
/// one is outside them, or a constraint or name is one the chip cannot evaluate.
pub(crate) fn check_constraints<'a>(
    constraints: &[u8],
    sans: impl Iterator<Item = Option<&'a [u8]>>,
    budget: &mut u32,
) -> Result<(), Why> {
    let mut lists = [None, None];
    let mut parts = Reader::new(constraints);
    while let Ok(list) = parts.next() {
        lists[usize::from(list.tag == EXCLUDED)] = Some(list.value);
    }
    let bases = |i: usize| {
        let mut r = Reader::new(lists[i].unwrap_or(&[]));
        core::iter::from_fn(move || {
            let subtree = r.next().ok()?;
            Reader::new(subtree.value).next().ok().map(|b| (b.tag, b.value))
        })
    };
    // Every base and name looked at is paid for, so a wide certificate under wide constraints,
    // met again on each path tried, costs a bounded time.
    let mut spend = || {
        *budget = budget.checked_sub(1).ok_or("the name constraints take too many comparisons")?;
        Ok::<(), Why>(())
    };
    let (mut has_dns, mut has_ip) = (false, false);
    for (tag, base) in bases(0).chain(bases(1)) {
        spend()?;
        match tag {
            DNS_NAME if valid_base(base) => has_dns = true,
            DNS_NAME => return Err("a dNSName name constraint is malformed"),
            IP_ADDRESS if valid_ip_constraint(base) => has_ip = true,
            IP_ADDRESS => return Err("an iPAddress name constraint is malformed"),
            DIRECTORY_NAME => return Err("a directoryName name constraint cannot be checked"),
            _ => return Err("a name constraint is of a kind the chip does not check"),
        }
    }
    for san in sans {
        for (tag, name) in entries(san) {
            spend()?;
            // A name of a kind no base speaks of is not constrained (not even checked for
            // shape), as in webpki.
            let (within, overlaps): (Matcher, Matcher) = match tag {
                DNS_NAME if !has_dns => continue,
                DNS_NAME if valid_dns(name, true) => (dns_within, dns_overlaps),
                DNS_NAME => return Err("a dNSName under a name constraint is malformed"),
                IP_ADDRESS if !has_ip => continue,
                IP_ADDRESS if name.len() == 4 || name.len() == 16 => (ip_within, ip_within),
                IP_ADDRESS => return Err("an iPAddress under a name constraint is malformed"),
                _ => continue,
            };
            // (a permitted base of this kind contains it, one does not)
            let mut permitted = (false, false);
            for (base_tag, base) in bases(0) {
                spend()?;
                if base_tag == tag {
                    if within(name, base) {
                        permitted.0 = true;
                    } else {
                        permitted.1 = true;
                    }
                }
            }
            if permitted == (false, true) {
                return Err("a name is outside the names its issuer's name constraints permit");
            }
            for (base_tag, base) in bases(1) {
                spend()?;
                if base_tag == tag && overlaps(name, base) {
                    return Err("a name is one its issuer's name constraints exclude");
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_are_checked_for_shape() {
        for ok in ["a.example", "A-1.example", "_acme.example", "x", "*.a.example"] {
            assert!(valid_dns(ok.as_bytes(), true), "{ok}");
        }
        for bad in ["", "a..example", ".a.example", "a.example.", "-a.example", "a-.example", "a!.example", "1.2.3.4"] {
            assert!(!valid_dns(bad.as_bytes(), true), "{bad}");
        }
        assert!(!valid_dns(b"*.example", true), "a wildcard needs two labels after it");
        assert!(!valid_dns(b"*.a.example", false), "no wildcard in a host");
        assert!(!valid_dns(b"a.*.example", true));
    }

    #[test]
    fn within_a_base() {
        assert!(dns_within(b"a.example.com", b"example.com"));
        assert!(dns_within(b"EXAMPLE.com", b"example.COM"));
        assert!(!dns_within(b"aexample.com", b"example.com"));
        assert!(dns_within(b"a.example.com", b".example.com"));
        assert!(!dns_within(b"example.com", b".example.com"));
        assert!(dns_within(b"anything", b""));
        // A wildcard may stand for a name an excluded base names.
        assert!(dns_overlaps(b"*.example.com", b"a.example.com"));
        assert!(!dns_overlaps(b"*.example.com", b"a.example.org"));
    }

    fn tlv(tag: u8, content: &[u8]) -> alloc::vec::Vec<u8> {
        let len = content.len();
        let head: alloc::vec::Vec<u8> = match len {
            0..0x80 => alloc::vec![tag, len as u8],
            0x80..0x100 => alloc::vec![tag, 0x81, len as u8],
            _ => alloc::vec![tag, 0x82, (len >> 8) as u8, len as u8],
        };
        [head, content.to_vec()].concat()
    }

    /// nameConstraints contents from (list tag, base tag, base) triples, and a SAN's contents.
    fn constraints(bases: &[(u8, u8, &[u8])]) -> alloc::vec::Vec<u8> {
        [PERMITTED, EXCLUDED]
            .iter()
            .filter_map(|&list| {
                let subtrees: alloc::vec::Vec<u8> = bases
                    .iter()
                    .filter(|b| b.0 == list)
                    .flat_map(|&(_, tag, base)| tlv(der::SEQUENCE, &tlv(tag, base)))
                    .collect();
                (!subtrees.is_empty()).then(|| tlv(list, &subtrees))
            })
            .flatten()
            .collect()
    }

    fn check(bases: &[(u8, u8, &[u8])], names: &[(u8, &[u8])]) -> Result<(), Why> {
        let nc = constraints(bases);
        assert_eq!(parse_constraints(&nc), Ok(&nc[..]));
        let san: alloc::vec::Vec<u8> = names.iter().flat_map(|&(tag, v)| tlv(tag, v)).collect();
        check_constraints(&nc, [None, Some(&san[..])].into_iter(), &mut COMPARISONS.clone())
    }

    #[test]
    fn constraints_permit_and_exclude() {
        let api: (u8, &[u8]) = (DNS_NAME, b"api.test.example");
        assert_eq!(check(&[(PERMITTED, DNS_NAME, b"test.example")], &[api]), Ok(()));
        assert!(check(&[(PERMITTED, DNS_NAME, b"other.org")], &[api]).is_err());
        // One permitted base of the name's kind is enough.
        assert_eq!(check(&[(PERMITTED, DNS_NAME, b"other.org"), (PERMITTED, DNS_NAME, b"example")], &[api]), Ok(()));
        assert!(
            check(&[(PERMITTED, DNS_NAME, b"test.example"), (EXCLUDED, DNS_NAME, b"api.test.example")], &[api])
                .is_err()
        );
        // Bases of another kind do not bind a DNS name, but an address needs a permitted one
        // of its own family.
        assert_eq!(check(&[(PERMITTED, IP_ADDRESS, &[10, 0, 0, 0, 255, 0, 0, 0])], &[api]), Ok(()));
        assert!(
            check(&[(PERMITTED, IP_ADDRESS, &[10, 0, 0, 0, 255, 0, 0, 0])], &[(IP_ADDRESS, &[11, 0, 0, 1])]).is_err()
        );
        assert!(check(&[(PERMITTED, IP_ADDRESS, &[0; 32])], &[(IP_ADDRESS, &[10, 0, 0, 1])]).is_err());
        assert_eq!(
            check(&[(EXCLUDED, IP_ADDRESS, &[11, 0, 0, 0, 255, 0, 0, 0])], &[(IP_ADDRESS, &[10, 0, 0, 1])]),
            Ok(())
        );
        // What the chip does not evaluate fails closed, whatever the names.
        assert!(check(&[(PERMITTED, 0x81, b"test.example")], &[api]).is_err());
        assert!(check(&[(EXCLUDED, DIRECTORY_NAME, &[0x30, 0x00])], &[api]).is_err());
        assert!(check(&[(PERMITTED, DNS_NAME, b"bad..base")], &[api]).is_err());
        assert!(check(&[(PERMITTED, DNS_NAME, b"test.example")], &[(DNS_NAME, b"bad..name")]).is_err());
    }

    #[test]
    fn constraints_cost_a_bounded_time() {
        let bases: alloc::vec::Vec<(u8, u8, &[u8])> =
            (0..40).map(|_| (PERMITTED, DNS_NAME, &b"x.example"[..])).collect();
        let nc = constraints(&bases);
        let san: alloc::vec::Vec<u8> = (0..40).flat_map(|_| tlv(DNS_NAME, b"a.x.example")).collect();
        let sans = || core::iter::repeat_n(Some(&san[..]), 8);
        assert_eq!(check_constraints(&nc, sans(), &mut COMPARISONS.clone()), Ok(()));
        let mut budget = 1000;
        assert!(check_constraints(&nc, sans(), &mut budget).is_err());
        assert_eq!(budget, 0);
    }

    #[test]
    fn ip_constraints() {
        let c = [10, 0, 0, 0, 255, 0, 0, 0];
        assert!(valid_ip_constraint(&c));
        assert!(ip_within(&[10, 9, 8, 7], &c));
        assert!(!ip_within(&[11, 9, 8, 7], &c));
        assert!(!valid_ip_constraint(&[10, 0, 0, 0, 255, 0, 255, 0]), "a mask with a hole");
        assert!(!valid_ip_constraint(&[10, 0, 0, 0, 255, 0, 0]));
        assert!(!ip_within(&[0; 16], &c), "another family is never within");
    }
}
