//! The chip's certificate checking (`chela_chip::pki`) on arbitrary bytes, cut into
//! certificates by their DER headers: no panic; a refusal always has a message; the same
//! answer twice; with the firmware's pinned roots nothing made up is accepted, and with the
//! input's own certificates as roots the path search still ends, and knowing less of the time
//! (a floor, or nothing) never refuses a chain that a known time accepts; and whatever the
//! chip accepts at a known time, rustls-webpki accepts too (the chip may only be stricter).
#![no_main]

use std::time::Duration;

use chela_chip::pki::{Clock, Scheme, verify_chain, verify_handshake};
use libfuzzer_sys::fuzz_target;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

const NOW: u64 = 1_800_000_000;

const PINNED: [&[u8]; 4] = [
    include_bytes!("../../firmware/esp32/certs/gts_root_r1.der"),
    include_bytes!("../../firmware/esp32/certs/gts_root_r4.der"),
    include_bytes!("../../firmware/esp32/certs/isrg_root_x1.der"),
    include_bytes!("../../firmware/esp32/certs/godaddy_root_g2.der"),
];

/// webpki's verdict on `certs` (leaf first) under `root` for a TLS server named `host`.
fn webpki_accepts(certs: &[&[u8]], root: &[u8], host: &str) -> Result<(), String> {
    let root = CertificateDer::from(root);
    let anchor = webpki::anchor_from_trusted_cert(&root).map_err(|e| format!("anchor: {e:?}"))?;
    let leaf = CertificateDer::from(certs[0]);
    let ee = webpki::EndEntityCert::try_from(&leaf).map_err(|e| format!("leaf: {e:?}"))?;
    let ints: Vec<CertificateDer<'_>> = certs[1..].iter().map(|c| CertificateDer::from(*c)).collect();
    let now = UnixTime::since_unix_epoch(Duration::from_secs(NOW));
    ee.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &[anchor],
        &ints,
        now,
        webpki::KeyUsage::server_auth(),
        None,
        None,
    )
    .map_err(|e| format!("{e:?}"))?;
    ee.verify_is_valid_for_subject_name(&ServerName::try_from(host).map_err(|e| format!("{e:?}"))?)
        .map_err(|e| format!("{e:?}"))
}

/// Consecutive DER TLVs (up to 10); what does not frame is the last piece.
fn split(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !data.is_empty() && out.len() < 10 {
        let len = match data {
            [_, l, ..] if *l < 0x80 => Some(2 + usize::from(*l)),
            [_, 0x81, l, ..] => Some(3 + usize::from(*l)),
            [_, 0x82, a, b, ..] => Some(4 + usize::from(u16::from_be_bytes([*a, *b]))),
            _ => None,
        };
        let cut = len.filter(|&n| n <= data.len()).unwrap_or(data.len());
        out.push(&data[..cut]);
        data = &data[cut..];
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let certs = split(data);
    if certs.is_empty() {
        return;
    }
    for host in ["api.test.example", "a.wild.test.example", "api.telegram.org"] {
        let first = verify_chain(&certs, &PINNED, host, Clock::Known(NOW));
        assert_eq!(first, verify_chain(&certs, &PINNED, host, Clock::Known(NOW)), "the same answer twice");
        let err = first.expect_err("made-up bytes never lead to a pinned root");
        assert!(!err.to_string().is_empty());
        // The input's own certificates as trust anchors: the path search over them ends.
        // Knowing less of the time never refuses more: Known, then a floor, then nothing.
        let own = &certs[certs.len() - 1..];
        let mut accepted = false;
        for clock in [Clock::Known(NOW), Clock::AtLeast(NOW), Clock::Unknown] {
            match verify_chain(&certs, own, host, clock) {
                Ok(()) => {
                    // A trust anchor is the build's own input (pinned roots), never bytes from the
                    // network: where webpki cannot even read the input's last certificate as an
                    // anchor, the two are not compared (the chain above it still is, elsewhere).
                    let comparable = webpki::anchor_from_trusted_cert(&CertificateDer::from(own[0])).is_ok();
                    if clock == Clock::Known(NOW) && comparable {
                        if let Err(why) = webpki_accepts(&certs, own[0], host) {
                            panic!("the chip accepted a chain for {host} that webpki refuses: {why}");
                        }
                    }
                    accepted = true;
                }
                Err(e) => {
                    assert!(!accepted, "{clock:?} refused what a better-known clock accepted: {e}");
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }
    for scheme in [Scheme::EcdsaP256Sha256, Scheme::EcdsaP384Sha384, Scheme::RsaPssSha256, Scheme::RsaPssSha512] {
        let sig = certs.last().copied().unwrap_or_default();
        assert!(verify_handshake(certs[0], scheme, data, sig).is_err(), "a made-up signature verifies");
    }
});
