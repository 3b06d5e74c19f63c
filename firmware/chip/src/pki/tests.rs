//! Real data for the signature code: Debian's CA store (ca-certificates) and the pinned roots.

extern crate std;

use alloc::string::String;
use alloc::vec::Vec;
use std::println;

use super::cert::{Cert, PublicKey};

/// The base64 body of every CERTIFICATE block of a PEM file.
fn pem_blocks(text: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut body: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            body = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            if let Some(b) = body.take() {
                out.push(base64(&b).expect("the PEM body is base64"));
            }
        } else if let Some(b) = body.as_mut() {
            b.push_str(line);
        }
    }
    out
}

fn base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Every self-signed CA in /etc/ssl/certs with an algorithm the chip supports verifies its
/// own signature; counted by kind, with a floor so a reader that skipped everything fails.
#[test]
fn debian_ca_store_self_signatures_verify() {
    let dir = std::fs::read_dir("/etc/ssl/certs")
        .expect("/etc/ssl/certs is missing: install Debian's ca-certificates (apt-get install ca-certificates)");
    let (mut rsa, mut ec, mut skipped, mut parsed) = (0, 0, 0, 0);
    let mut paths: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths.iter().filter(|p| p.extension().is_some_and(|e| e == "pem")) {
        let text = std::fs::read_to_string(path).unwrap();
        for der in pem_blocks(&text) {
            let cert = match Cert::parse(&der) {
                Ok(c) => c,
                Err(why) => {
                    println!("{}: not parsed: {why}", path.display());
                    skipped += 1;
                    continue;
                }
            };
            parsed += 1;
            if cert.subject != cert.issuer {
                continue;
            }
            let (Ok(key), Ok(_)) = (&cert.key, cert.sig_alg) else {
                skipped += 1;
                continue;
            };
            assert_eq!(cert.signed_by(key), Ok(true), "{}: its own signature does not verify", path.display());
            // The same check fails on a changed byte: the signature is really looked at.
            let mut tbs = cert.tbs.to_vec();
            let last = tbs.len() - 1;
            tbs[last] ^= 1;
            let changed = Cert { tbs: &tbs, ..cert.clone() };
            assert_ne!(changed.signed_by(key), Ok(true), "{}: a changed TBS still verifies", path.display());
            match key {
                PublicKey::Rsa(_) => rsa += 1,
                _ => ec += 1,
            }
        }
    }
    println!("Debian CA store: {parsed} parsed, {rsa} RSA and {ec} ECDSA self-signatures verified, {skipped} skipped");
    assert!(rsa + ec >= 100, "only {} self-signed roots verified", rsa + ec);
    assert!(rsa >= 50 && ec >= 10, "{rsa} RSA and {ec} ECDSA: both paths must be exercised");
}

#[test]
fn pinned_roots_parse_with_their_keys() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../esp32/certs/");
    let pinned = [
        ("gts_root_r1", 4096),
        ("gts_root_r4", 0),
        ("isrg_root_x1", 4096),
        ("isrg_root_x2", 0),
        ("godaddy_root_g2", 2048),
        ("amazon_root_ca1", 2048),
        ("globalsign_root_r3", 2048),
    ];
    let files =
        std::fs::read_dir(dir).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "der"));
    assert_eq!(files.count(), pinned.len(), "every root in firmware/esp32/certs is checked here");
    for (name, bits) in pinned {
        let der = std::fs::read(std::format!("{dir}{name}.der")).unwrap();
        let cert = Cert::parse(&der).unwrap_or_else(|e| panic!("{name}: {e}"));
        match (cert.key.as_ref().unwrap(), bits) {
            (PublicKey::Rsa(k), bits) => assert_eq!(k.bits(), bits, "{name}"),
            (PublicKey::P384(_), 0) => {}
            (_, _) => panic!("{name}: unexpected key"),
        }
        assert_eq!(cert.subject, cert.issuer, "{name} is self-signed");
        assert_eq!(cert.signed_by(cert.key.as_ref().unwrap()), Ok(true), "{name}");
    }
}
