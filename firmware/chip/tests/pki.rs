//! The chip's certificate checking (`chela_chip::pki`) against chains the openssl CLI builds
//! (tests/fixtures/make-pki.sh, run once per test binary): good chains in any order, each
//! kind of bad chain refused for its own reason, host and date rules, handshake signatures
//! made by openssl, and property tests of the parser on hostile bytes.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use chela_chip::pki::{Clock, PkiError, Scheme, Which, verify_chain, verify_handshake};
use proptest::prelude::*;

const HOST: &str = "api.test.example";

/// The fixtures' directory, made on first use.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::make_pki("pki-tests"))
}

fn file(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn der(name: &str) -> Vec<u8> {
    file(&format!("{name}.der"))
}

/// The time, after the fixtures exist (they are valid from the second they are made).
fn now() -> u64 {
    dir();
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// The pinned roots of the firmware plus the two test roots.
fn roots() -> Vec<Vec<u8>> {
    let mut roots: Vec<Vec<u8>> = ["gts_root_r1", "gts_root_r4", "isrg_root_x1", "isrg_root_x2", "godaddy_root_g2"]
        .iter()
        .map(|n| std::fs::read(format!("{}/../esp32/certs/{n}.der", env!("CARGO_MANIFEST_DIR"))).unwrap())
        .collect();
    roots.push(der("rsa-root"));
    roots.push(der("ec-root"));
    roots
}

fn check(names: &[&str], host: &str, clock: Clock) -> Result<(), PkiError> {
    let certs: Vec<Vec<u8>> = names.iter().map(|n| der(n)).collect();
    check_der(&certs, host, clock)
}

fn check_der(certs: &[Vec<u8>], host: &str, clock: Clock) -> Result<(), PkiError> {
    let chain: Vec<&[u8]> = certs.iter().map(Vec::as_slice).collect();
    let roots = roots();
    let roots: Vec<&[u8]> = roots.iter().map(Vec::as_slice).collect();
    verify_chain(&chain, &roots, host, clock)
}

fn host() -> String {
    HOST.to_string()
}

#[test]
fn good_chains_verify_in_any_order_with_extras() {
    for (leaf, int) in [("rsa-leaf", "rsa-int"), ("ec-leaf", "ec-int"), ("rsa2049-leaf", "rsa-int")] {
        assert_eq!(check(&[leaf, int], HOST, Clock::Known(now())), Ok(()), "{leaf}");
        assert_eq!(check(&[leaf, int], HOST, Clock::Unknown), Ok(()), "{leaf} with the time unknown");
        // Unrelated certificates, the root itself and a shuffled order change nothing.
        assert_eq!(check(&[leaf, "other-int", "evil", int, "rsa-root", "ec-root"], HOST, Clock::Known(now())), Ok(()));
        assert_eq!(check(&[leaf, "noca-int", int, "other-leaf"], HOST, Clock::Known(now())), Ok(()));
    }
    // The ec chain with its intermediate after a look-alike that does not verify.
    assert_eq!(
        check(&["deep-leaf", "deep-int5", "deep-int3", "deep-int6", "deep-int2", "deep-int4"], HOST, Clock::Unknown),
        Err(PkiError::UntrustedIssuer { host: host() }),
        "deep-int1 is missing"
    );
    // A garbage extra entry is ignored when a path exists.
    let mut certs = vec![der("ec-leaf"), b"garbage".to_vec(), der("ec-int")];
    assert_eq!(check_der(&certs, HOST, Clock::Unknown), Ok(()));
    certs.remove(2);
    assert!(matches!(check_der(&certs, HOST, Clock::Unknown), Err(PkiError::Malformed { which: Which::Chain(1), .. })));
}

#[test]
fn dates_are_checked_when_known() {
    let (leaf, _) = validity("ec-leaf");
    assert!(matches!(
        check(&["ec-leaf", "ec-int"], HOST, Clock::Known(leaf - 1)),
        Err(PkiError::NotYetValid { which: Which::Leaf })
    ));
    assert_eq!(check(&["ec-leaf", "ec-int"], HOST, Clock::Known(leaf)), Ok(()));
    // The intermediate was made a moment before the leaf, so it may end a second earlier.
    let end = validity("rsa-leaf").1.min(validity("rsa-int").1);
    assert_eq!(check(&["rsa-leaf", "rsa-int"], HOST, Clock::Known(end)), Ok(()));
    assert!(matches!(check(&["rsa-leaf", "rsa-int"], HOST, Clock::Known(end + 1)), Err(PkiError::Expired { .. })));
    // The intermediates are checked too: deep-leaf outlives deep-int6. deep-int5 was made a
    // moment before deep-int6, so it may end a second earlier.
    let (_, int_end) = validity("deep-int6");
    let (certs, root) = (["deep-leaf", "deep-int6", "deep-int5"].map(der), der("deep-int4"));
    let chain = certs.each_ref().map(Vec::as_slice);
    let both_live = int_end.min(validity("deep-int5").1);
    assert_eq!(verify_chain(&chain, &[&root], HOST, Clock::Known(both_live)), Ok(()));
    assert_eq!(
        verify_chain(&chain, &[&root], HOST, Clock::Known(int_end + 1)),
        Err(PkiError::Expired { which: Which::Chain(1) })
    );
    assert_eq!(
        check(&["rsa-leaf", "rsa-int"], HOST, Clock::Known(0)),
        Err(PkiError::NotYetValid { which: Which::Leaf })
    );
    assert_eq!(
        check(&["rsa-leaf", "rsa-int"], HOST, Clock::Known(u64::MAX)),
        Err(PkiError::Expired { which: Which::Leaf })
    );
}

#[test]
fn before_the_clock_is_set_a_floor_still_refuses_what_expired_before_it() {
    // The board's clock, or the image's build time as a floor until SNTP answers.
    assert_eq!(Clock::from_board(Some(7), 5), Clock::Known(7));
    assert_eq!(Clock::from_board(None, 5), Clock::AtLeast(5));
    let end = validity("rsa-leaf").1.min(validity("rsa-int").1);
    assert_eq!(check(&["rsa-leaf", "rsa-int"], HOST, Clock::AtLeast(end)), Ok(()));
    assert!(matches!(check(&["rsa-leaf", "rsa-int"], HOST, Clock::AtLeast(end + 1)), Err(PkiError::Expired { .. })));
    // A floor says nothing of how late it is, so notBefore cannot be judged by it.
    let (leaf, _) = validity("ec-leaf");
    assert_eq!(check(&["ec-leaf", "ec-int"], HOST, Clock::AtLeast(leaf - 1)), Ok(()));
    assert_eq!(check(&["ec-leaf", "ec-int"], HOST, Clock::AtLeast(0)), Ok(()));
    // An intermediate that expired under a live leaf is refused by the floor too.
    let (_, int_end) = validity("deep-int6");
    let (certs, root) = (["deep-leaf", "deep-int6", "deep-int5"].map(der), der("deep-int4"));
    let chain = certs.each_ref().map(Vec::as_slice);
    assert_eq!(
        verify_chain(&chain, &[&root], HOST, Clock::AtLeast(int_end + 1)),
        Err(PkiError::Expired { which: Which::Chain(1) })
    );
}

/// notBefore and notAfter as openssl reads them, in Unix seconds.
fn validity(name: &str) -> (u64, u64) {
    let read = |flag: &str| {
        let out = Command::new("openssl")
            .args(["x509", "-noout", flag, "-dateopt", "iso_8601", "-in"])
            .arg(dir().join(format!("{name}.pem")))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let stamp = text.trim().split_once('=').unwrap().1.trim_end_matches('Z').to_string();
        let out = Command::new("date").args(["-u", "-d", &stamp, "+%s"]).output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().parse::<u64>().unwrap()
    };
    (read("-startdate"), read("-enddate"))
}

#[test]
fn host_names_come_from_san_only() {
    for ok in ["api.test.example", "API.Test.Example", "api.test.example."] {
        assert_eq!(check(&["ec-leaf", "ec-int"], ok, Clock::Unknown), Ok(()), "{ok}");
    }
    for ok in ["a.wild.test.example", "X-1.WILD.test.example"] {
        assert_eq!(check(&["ec-leaf", "ec-int"], ok, Clock::Unknown), Ok(()), "{ok}");
    }
    for bad in [
        "wild.test.example",
        "a.b.wild.test.example",
        ".wild.test.example",
        "*.wild.test.example",
        "test.example",
        "",
        "api.test.example.evil",
        "ec-leaf",
        "api.test.examplé",
    ] {
        assert_eq!(
            check(&["ec-leaf", "ec-int"], bad, Clock::Unknown),
            Err(PkiError::WrongHost { host: bad.to_string() }),
            "{bad}"
        );
    }
    // The rsa leaf has no wildcard, and the CN ("rsa-leaf") is never a name.
    assert_eq!(
        check(&["rsa-leaf", "rsa-int"], "a.wild.test.example", Clock::Unknown),
        Err(PkiError::WrongHost { host: "a.wild.test.example".into() })
    );
    assert_eq!(
        check(&["rsa-leaf", "rsa-int"], "rsa-leaf", Clock::Unknown),
        Err(PkiError::WrongHost { host: "rsa-leaf".into() })
    );
}

#[test]
fn a_leaf_signing_a_forged_certificate_is_refused() {
    let err = check(&["forged", "evil", "ec-int"], HOST, Clock::Known(now())).unwrap_err();
    assert_eq!(err, PkiError::IssuerNotCa { host: host() });
    assert_eq!(err.to_string(), "the certificate for api.test.example is signed by an issuer that is not a CA");
    // evil's own certificate is good, for its own name only.
    assert_eq!(check(&["evil", "ec-int"], "evil.test.example", Clock::Known(now())), Ok(()));
    assert_eq!(check(&["evil", "ec-int"], HOST, Clock::Unknown), Err(PkiError::WrongHost { host: host() }));
}

#[test]
fn bad_intermediates_and_leaves_are_refused_for_their_reason() {
    let cases: [(&[&str], PkiError); 8] = [
        (&["noca-leaf", "noca-int"], PkiError::IssuerNotCa { host: host() }),
        (&["nosign-leaf", "nosign-int"], PkiError::IssuerMayNotSign { host: host() }),
        (&["sub-leaf", "sub-int", "pathlen0-int"], PkiError::PathLenExceeded { host: host() }),
        (&["clientauth-leaf", "ec-int"], PkiError::LeafNotForServers { host: host() }),
        (&["critical-leaf", "ec-int"], PkiError::UnknownCriticalExtension { which: Which::Leaf }),
        (&["ca-leaf", "ec-int"], PkiError::LeafIsCa { host: host() }),
        (&["other-leaf", "other-int"], PkiError::UntrustedIssuer { host: host() }),
        (&["other-leaf", "other-int", "other-root"], PkiError::UntrustedIssuer { host: host() }),
    ];
    for (names, want) in cases {
        assert_eq!(check(names, HOST, Clock::Known(now())), Err(want), "{names:?}");
    }
    // What the chip does not verify, named with the certificate it is on.
    let unsupported =
        |which| move |e: &PkiError| matches!(e, PkiError::UnsupportedAlgorithm { which: w, .. } if *w == which);
    let cases: [(&[&str], Which); 3] = [
        (&["sha1-leaf", "rsa-int"], Which::Leaf),
        (&["rsa1024-leaf", "rsa1024-int"], Which::Chain(1)),
        (&["p521-leaf", "ec-int"], Which::Leaf),
    ];
    for (names, which) in cases {
        let got = check(names, HOST, Clock::Unknown).unwrap_err();
        assert!(unsupported(which)(&got), "{names:?}: {got:?}");
        assert!(got.to_string().contains("not usable"), "{got}");
    }
    // A missing intermediate.
    assert_eq!(check(&["ec-leaf"], HOST, Clock::Unknown), Err(PkiError::UntrustedIssuer { host: host() }));
    assert_eq!(check(&["ec-leaf", "rsa-int"], HOST, Clock::Unknown), Err(PkiError::UntrustedIssuer { host: host() }));
}

/// nameConstraints bind whatever their criticality, on intermediates and on pinned roots;
/// one the chip cannot evaluate refuses the path instead of being skipped.
#[test]
fn name_constraints_are_enforced_critical_or_not() {
    let violation = |names: &[&str]| match check(names, HOST, Clock::Known(now())) {
        Err(PkiError::NameConstraintViolation { host, what }) => {
            assert_eq!(host, HOST);
            what
        }
        other => panic!("{names:?}: {other:?}"),
    };
    // Non-critical "permitted DNS:other.org" over api.test.example: webpki and openssl refuse it.
    assert!(violation(&["nc-leaf", "nc-int"]).contains("permit"));
    assert!(violation(&["ncx-leaf", "ncx-int"]).contains("exclude"));
    // Fail closed: an email constraint says nothing of DNS names to webpki, but the chip does
    // not evaluate that kind and refuses (chip-stricter, listed in tests/pki_webpki.rs).
    assert!(violation(&["ncmail-leaf", "ncmail-int"]).contains("does not check"));
    // A constraint that permits the name lets the chain through.
    assert_eq!(check(&["ncok-leaf", "ncok-int"], HOST, Clock::Known(now())), Ok(()));
    let err = check(&["nc-leaf", "nc-int"], HOST, Clock::Known(now())).unwrap_err();
    assert!(err.to_string().contains("name constraints"), "{err}");
    // A pinned root's own constraints count too.
    let (leaf, root) = (der("ncr-leaf"), der("nc-root"));
    assert!(matches!(
        verify_chain(&[&leaf], &[&root], HOST, Clock::Known(now())),
        Err(PkiError::NameConstraintViolation { .. })
    ));
    // The same root's leaf for a name it permits is fine: the constraint is read, not feared.
    let other = der("ec-leaf");
    assert!(!matches!(
        verify_chain(&[&other], &[&root], HOST, Clock::Known(now())),
        Err(PkiError::NameConstraintViolation { .. })
    ));
}

#[test]
fn any_extended_key_usage_is_not_server_auth() {
    assert_eq!(
        check(&["anyeku-leaf", "ec-int"], HOST, Clock::Known(now())),
        Err(PkiError::LeafNotForServers { host: host() })
    );
    assert_eq!(
        check(&["anyeku-int-leaf", "anyeku-int"], HOST, Clock::Known(now())),
        Err(PkiError::IssuerNotForServers { host: host() })
    );
}

/// ip-leaf carries DNS:1.2.3.4, DNS:*.2.3.4, IP:10.0.0.1 and IP:::1. The chip dials names only:
/// an address never matches a dNSName, and IP hosts are refused outright.
#[test]
fn ip_hosts_are_refused() {
    for bad in ["1.2.3.4", "9.2.3.4", "1.2.3.4.", "10.0.0.1", "::1", "0:0:0:0:0:0:0:1", "2.3.4", "127.0.0.1"] {
        assert_eq!(
            check(&["ip-leaf", "ec-int"], bad, Clock::Unknown),
            Err(PkiError::WrongHost { host: bad.to_string() }),
            "{bad}"
        );
    }
    assert_eq!(
        check(&["ec-leaf", "ec-int"], "127.0.0.1", Clock::Unknown),
        Err(PkiError::WrongHost { host: "127.0.0.1".into() })
    );
}

#[test]
fn paths_are_bounded() {
    let deep = ["deep-leaf", "deep-int6", "deep-int5", "deep-int4", "deep-int3", "deep-int2", "deep-int1"];
    assert_eq!(check(&deep, HOST, Clock::Unknown), Err(PkiError::PathTooLong { host: host() }), "six intermediates");
    // Five intermediates under a root that is deep-int1 itself: allowed.
    let certs: Vec<Vec<u8>> = deep[..6].iter().map(|n| der(n)).collect();
    let chain: Vec<&[u8]> = certs.iter().map(Vec::as_slice).collect();
    let root = der("deep-int1");
    assert_eq!(verify_chain(&chain, &[&root], HOST, Clock::Unknown), Ok(()));
    let nine: Vec<&[u8]> = std::iter::repeat_n(chain[0], 9).collect();
    assert_eq!(verify_chain(&nine, &[&root], HOST, Clock::Unknown), Err(PkiError::ChainTooLong { count: 9 }));
    assert_eq!(verify_chain(&[], &[&root], HOST, Clock::Unknown), Err(PkiError::EmptyChain));
    let big = vec![0x30u8; 8 * 1024 + 1];
    assert!(matches!(
        verify_chain(&[chain[0], &big], &[&root], HOST, Clock::Unknown),
        Err(PkiError::Malformed { which: Which::Chain(1), .. })
    ));
    // A root that does not parse is an error of ours, named.
    assert!(matches!(
        verify_chain(&[chain[0]], &[&root, b"junk"], HOST, Clock::Unknown),
        Err(PkiError::Malformed { which: Which::Root(1), .. })
    ));
}

/// CAs that issued each other: the search ends, whatever the order and however many copies,
/// and each (certificate, issuer) signature is checked once, so it ends quickly.
#[test]
fn issuer_loops_end() {
    let want = Err(PkiError::UntrustedIssuer { host: host() });
    assert_eq!(check(&["loop-leaf", "loop-a", "loop-b"], HOST, Clock::Unknown), want);
    assert_eq!(check(&["loop-leaf", "loop-b", "loop-b-self", "loop-a"], HOST, Clock::Unknown), want);
    let eight = ["loop-leaf", "loop-a", "loop-b", "loop-b-self", "loop-a", "loop-b", "loop-b-self", "loop-a"];
    let start = std::time::Instant::now();
    // With copies, the loop goes round until the path is too long.
    let got = check(&eight, HOST, Clock::Unknown);
    assert!(matches!(got, Err(PkiError::UntrustedIssuer { .. } | PkiError::PathTooLong { .. })), "{got:?}");
    println!("eight looping certificates refused in {:?}", start.elapsed());
    // Generous for a debug build on a busy machine; without the memo it is thousands of ECDSA checks.
    assert!(start.elapsed() < std::time::Duration::from_secs(20), "{:?}", start.elapsed());
    // The loop's certificates are real: under loop-b-self as a root, the path is found.
    let certs = ["loop-leaf", "loop-a"].map(der);
    let root = der("loop-b-self");
    assert_eq!(verify_chain(&certs.each_ref().map(Vec::as_slice), &[&root], HOST, Clock::Unknown), Ok(()));
}

#[test]
fn a_changed_signature_is_refused() {
    for (leaf, int) in [("rsa-leaf", "rsa-int"), ("ec-leaf", "ec-int")] {
        let mut certs = vec![der(leaf), der(int)];
        let last = certs[0].len() - 1;
        certs[0][last] ^= 0x01;
        assert_eq!(
            check_der(&certs, HOST, Clock::Unknown),
            Err(PkiError::BadSignature { which: Which::Leaf }),
            "{leaf}"
        );
        let mut certs = vec![der(leaf), der(int)];
        let last = certs[1].len() - 1;
        certs[1][last] ^= 0x01;
        assert_eq!(
            check_der(&certs, HOST, Clock::Unknown),
            Err(PkiError::BadSignature { which: Which::Chain(1) }),
            "{int}"
        );
    }
}

#[test]
fn handshake_signatures_made_by_openssl() {
    let msg = file("msg.bin");
    let rsa = der("rsa-leaf");
    let cases = [
        (&rsa, Scheme::RsaPssSha256, "hs-rsa-pss-sha256.sig"),
        (&rsa, Scheme::RsaPssSha384, "hs-rsa-pss-sha384.sig"),
        (&rsa, Scheme::RsaPssSha512, "hs-rsa-pss-sha512.sig"),
        (&der("rsa2049-leaf"), Scheme::RsaPssSha384, "hs-rsa2049-pss-sha384.sig"),
        (&der("ec-leaf"), Scheme::EcdsaP256Sha256, "hs-ecdsa-p256-sha256.sig"),
        (&der("ec-root"), Scheme::EcdsaP384Sha384, "hs-ecdsa-p384-sha384.sig"),
    ];
    for (leaf, scheme, sig) in cases {
        let sig = file(sig);
        assert_eq!(verify_handshake(leaf, scheme, &msg, &sig), Ok(()), "{scheme:?}");
        for i in [0, sig.len() / 2, sig.len() - 1] {
            let mut bad = sig.clone();
            bad[i] ^= 0x04;
            assert_eq!(
                verify_handshake(leaf, scheme, &msg, &bad),
                Err(PkiError::BadHandshakeSignature { scheme }),
                "{scheme:?} byte {i}"
            );
        }
        let mut other = msg.clone();
        other[0] ^= 1;
        assert_eq!(verify_handshake(leaf, scheme, &other, &sig), Err(PkiError::BadHandshakeSignature { scheme }));
        assert_eq!(
            verify_handshake(leaf, scheme, &msg, &sig[..sig.len() - 1]),
            Err(PkiError::BadHandshakeSignature { scheme })
        );
    }
    // The other PSS hashes do not accept a SHA-256 signature, nor PSS a PKCS#1 v1.5 one.
    let pss256 = file("hs-rsa-pss-sha256.sig");
    assert!(verify_handshake(&rsa, Scheme::RsaPssSha384, &msg, &pss256).is_err());
    let pkcs1 = file("hs-rsa-pkcs1-sha256.sig");
    assert_eq!(
        verify_handshake(&rsa, Scheme::RsaPssSha256, &msg, &pkcs1),
        Err(PkiError::BadHandshakeSignature { scheme: Scheme::RsaPssSha256 })
    );
    // A scheme that does not fit the key.
    let p256 = file("hs-ecdsa-p256-sha256.sig");
    assert_eq!(
        verify_handshake(&rsa, Scheme::EcdsaP256Sha256, &msg, &p256),
        Err(PkiError::SchemeMismatch { scheme: Scheme::EcdsaP256Sha256 })
    );
    assert_eq!(
        verify_handshake(&der("ec-leaf"), Scheme::EcdsaP384Sha384, &msg, &p256),
        Err(PkiError::SchemeMismatch { scheme: Scheme::EcdsaP384Sha384 })
    );
    assert_eq!(
        verify_handshake(&der("ec-leaf"), Scheme::RsaPssSha256, &msg, &p256),
        Err(PkiError::SchemeMismatch { scheme: Scheme::RsaPssSha256 })
    );
    assert!(matches!(
        verify_handshake(b"\x30\x00", Scheme::RsaPssSha256, &msg, &p256),
        Err(PkiError::Malformed { .. })
    ));
}

#[test]
fn every_error_reads_as_a_sentence() {
    let all = [
        check(&["nosign-leaf", "nosign-int"], HOST, Clock::Unknown),
        check(&["sub-leaf", "sub-int", "pathlen0-int"], HOST, Clock::Unknown),
        check(&["critical-leaf", "ec-int"], HOST, Clock::Unknown),
        check(&["other-leaf", "other-int"], HOST, Clock::Unknown),
        check(&["ec-leaf", "ec-int"], "x.example", Clock::Unknown),
        check(&["ec-leaf", "ec-int"], HOST, Clock::Known(0)),
    ];
    for e in all {
        let text = e.unwrap_err().to_string();
        assert!(text.len() > 20 && !text.contains("PkiError"), "{text}");
    }
}

/// The TBS bytes' range in a certificate with two-byte lengths (all the fixtures).
fn tbs_range(cert: &[u8]) -> std::ops::Range<usize> {
    assert_eq!((cert[0], cert[1], cert[4], cert[5]), (0x30, 0x82, 0x30, 0x82));
    4..4 + 4 + usize::from(u16::from_be_bytes([cert[6], cert[7]]))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_bytes_never_panic(chain in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..600), 1..4),
                                   sig in proptest::collection::vec(any::<u8>(), 0..600)) {
        let certs: Vec<&[u8]> = chain.iter().map(Vec::as_slice).collect();
        let roots = roots();
        let roots: Vec<&[u8]> = roots.iter().map(Vec::as_slice).collect();
        prop_assert!(verify_chain(&certs, &roots, HOST, Clock::Known(now())).is_err());
        prop_assert!(verify_handshake(certs[0], Scheme::EcdsaP256Sha256, b"m", &sig).is_err());
    }

    /// Any byte of a good leaf or intermediate changed: no panic, never accepted.
    #[test]
    fn changed_bytes_are_never_accepted(which in 0usize..4, at in any::<prop::sample::Index>(), value in any::<u8>()) {
        let (leaf, int) = [("rsa-leaf", "rsa-int"), ("ec-leaf", "ec-int")][which / 2];
        let mut certs = vec![der(leaf), der(int)];
        let target = &mut certs[which % 2];
        let i = at.index(target.len());
        prop_assume!(target[i] != value);
        target[i] = value;
        prop_assert!(check_der(&certs, HOST, Clock::Unknown).is_err());
        prop_assert!(verify_handshake(&certs[0], Scheme::EcdsaP256Sha256, b"m", b"\x30\x06\x02\x01\x01\x02\x01\x01").is_err());
    }

    /// One bit flipped anywhere in the leaf's signed bytes makes the chain fail.
    #[test]
    fn a_flipped_tbs_bit_fails(ec in any::<bool>(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let (leaf, int) = if ec { ("ec-leaf", "ec-int") } else { ("rsa-leaf", "rsa-int") };
        let mut certs = vec![der(leaf), der(int)];
        let range = tbs_range(&certs[0]);
        let i = range.start + at.index(range.len());
        certs[0][i] ^= 1 << bit;
        prop_assert!(check_der(&certs, HOST, Clock::Known(now())).is_err());
    }
}
