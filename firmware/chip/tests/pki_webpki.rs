//! The chip's certificate checking (`chela_chip::pki`) held against rustls-webpki, the verifier
//! rustls trusts: chains generated from a fixed seed (rcgen; P-256, P-384 and RSA keys; CA
//! flags, path lengths, key and extended key usages, name constraints critical or not,
//! subjectAltNames of every kind, dates, unknown critical extensions), then mutated (an
//! intermediate dropped or repeated, the order shuffled, a byte changed, another root), each
//! checked by both for one of a few hosts. The chip must never accept what webpki refuses.
//! Where the chip is stricter, its reason must be one of [`STRICTER`].

use std::time::Duration;

use chela_chip::pki::{Clock, PkiError, verify_chain};
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// Fixed, so a failure reproduces; change it to explore, never to make a failure go away.
const SEED: u64 = 0x5eed_0c41_9a0b_2026;
/// Generated chains (each also checked against up to three hosts): a few seconds optimised.
const CASES: usize = 700;
/// 2030-01-01T00:00:00Z: the time both verifiers are given.
const NOW: u64 = 1_893_456_000;

const HOSTS: [&str; 7] =
    ["api.test.example", "x.test.example", "a.api.test.example", "other.org", "1.2.3.4", "10.0.0.1", "::1"];

/// A reason the chip may refuse what webpki accepts, and how to tell it from the chip's error.
type Stricter = (&'static str, fn(&PkiError) -> bool);

/// Why the chip may refuse a chain webpki accepts: each one a deliberate choice.
const STRICTER: [Stricter; 4] = [
    // The chip dials names only; an IP host is refused rather than matched to iPAddress SANs.
    ("an IP-address host", |e| matches!(e, PkiError::WrongHost { host } if host.parse::<std::net::IpAddr>().is_ok())),
    // webpki does not read an issuer's keyUsage; the chip wants keyCertSign when it is there.
    ("an issuer's keyUsage without keyCertSign", |e| matches!(e, PkiError::IssuerMayNotSign { .. })),
    // webpki evaluates a constraint only against names of its own kind; the chip refuses any
    // kind it does not evaluate (rfc822Name, URI, ...) outright.
    (
        "a name constraint of a kind the chip does not evaluate",
        |e| matches!(e, PkiError::NameConstraintViolation { what, .. } if what.contains("does not check")),
    ),
    // A wildcard under an excluded base: the chip refuses when the base lies anywhere below
    // the wildcard's parent, webpki only when the wildcard's one label could reach it.
    (
        "a wildcard name near an excluded base",
        |e| matches!(e, PkiError::NameConstraintViolation { what, .. } if what.contains("exclude")),
    ),
];

/// splitmix64: the same sequence on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

/// A DER TLV.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match content.len() {
        n if n < 0x80 => out.push(n as u8),
        n if n < 0x100 => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(content);
    out
}

/// A GeneralName for a name constraint's base.
fn base(rng: &mut Rng) -> Vec<u8> {
    match rng.below(12) {
        0..=6 => {
            let dns =
                ["test.example", ".test.example", "api.test.example", "other.org", "", "example", "x.test.example"];
            tlv(0x82, rng.pick(&dns).as_bytes())
        }
        7 | 8 => tlv(0x87, &rng.pick(&[[10, 0, 0, 0, 255, 0, 0, 0], [1, 2, 3, 0, 255, 255, 255, 0]])),
        9 => tlv(0x87, &[[0u8; 16], [0u8; 16]].concat()),
        10 => tlv(0x81, b"test.example"),
        _ => tlv(0x86, b".test.example"),
    }
}

/// A nameConstraints extension, critical or not, with one or two lists.
fn name_constraints(rng: &mut Rng) -> CustomExtension {
    let mut content = Vec::new();
    for tag in [0xa0, 0xa1] {
        if rng.percent(60) {
            let subtrees: Vec<u8> = (0..1 + rng.below(2)).flat_map(|_| tlv(0x30, &base(rng))).collect();
            content.extend(tlv(tag, &subtrees));
        }
    }
    let mut ext = CustomExtension::from_oid_content(&[2, 5, 29, 30], tlv(0x30, &content));
    ext.set_criticality(rng.percent(50));
    ext
}

fn san(rng: &mut Rng) -> SanType {
    let dns = |s: &str| SanType::DnsName(s.try_into().unwrap());
    match rng.below(14) {
        0..=2 => dns("api.test.example"),
        3 => dns("*.test.example"),
        4 => dns("x.test.example"),
        5 => dns("other.org"),
        6 => dns("1.2.3.4"),
        7 => dns("*.2.3.4"),
        8 => dns("a.api.test.example"),
        9 => SanType::IpAddress([10, 0, 0, 1].into()),
        10 => SanType::IpAddress([1, 2, 3, 4].into()),
        11 => SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()),
        12 => SanType::Rfc822Name("a@test.example".try_into().unwrap()),
        _ => SanType::URI("https://api.test.example/".try_into().unwrap()),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Root,
    Intermediate,
    Leaf,
}

/// One certificate's parameters, drawn: mostly what a real chain has, often not.
fn params(rng: &mut Rng, role: Role, name: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, name);
    p.serial_number = Some(rng.next().into());
    let ca = role != Role::Leaf;
    p.is_ca = match (ca, rng.below(20)) {
        (true, 0) if role == Role::Intermediate => IsCa::ExplicitNoCa,
        (true, 1) if role == Role::Intermediate => IsCa::NoCa,
        (true, 2 | 3) => IsCa::Ca(BasicConstraints::Constrained(0)),
        (true, 4) => IsCa::Ca(BasicConstraints::Constrained(1)),
        (true, _) => IsCa::Ca(BasicConstraints::Unconstrained),
        (false, 0) => IsCa::Ca(BasicConstraints::Unconstrained),
        (false, 1 | 2) => IsCa::ExplicitNoCa,
        (false, _) => IsCa::NoCa,
    };
    p.key_usages = match (ca, rng.below(6)) {
        (_, 0) => vec![],
        (true, 1) => vec![KeyUsagePurpose::DigitalSignature],
        (true, _) => vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign],
        (false, _) => vec![KeyUsagePurpose::DigitalSignature],
    };
    p.extended_key_usages = match rng.below(8) {
        0 => vec![ExtendedKeyUsagePurpose::Any],
        1 => vec![ExtendedKeyUsagePurpose::ClientAuth],
        2 => vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth],
        3 | 4 if !ca || role == Role::Intermediate => vec![ExtendedKeyUsagePurpose::ServerAuth],
        _ if role == Role::Leaf => vec![ExtendedKeyUsagePurpose::ServerAuth],
        _ => vec![],
    };
    if role == Role::Leaf {
        p.subject_alt_names = (0..1 + rng.below(3)).map(|_| san(rng)).collect();
        if rng.percent(60) {
            p.subject_alt_names[0] = SanType::DnsName("api.test.example".try_into().unwrap());
        }
    } else if rng.percent(25) {
        p.custom_extensions.push(name_constraints(rng));
    }
    if role != Role::Root && rng.percent(3) {
        let mut ext = CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 55555, 1], tlv(0x0c, b"must understand"));
        ext.set_criticality(true);
        p.custom_extensions.push(ext);
    }
    let (from, to) = match rng.below(12) {
        0 => (2020, 2029),
        1 => (2031, 2040),
        _ => (2025, 2035),
    };
    p.not_before = rcgen::date_time_ymd(from, 1, 1);
    p.not_after = rcgen::date_time_ymd(to, 1, 1);
    p
}

/// The key pool, made once: P-256 and P-384 by rcgen, RSA 2048 by the openssl CLI (rcgen
/// cannot generate RSA keys).
fn keys() -> Vec<KeyPair> {
    let mut keys: Vec<KeyPair> =
        (0..4).map(|_| KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap()).collect();
    keys.extend((0..2).map(|_| KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap()));
    for _ in 0..2 {
        let out = std::process::Command::new("openssl")
            .args(["genpkey", "-quiet", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
            .output()
            .expect("the openssl CLI runs (apt-get install openssl)");
        assert!(out.status.success(), "openssl genpkey: {}", String::from_utf8_lossy(&out.stderr));
        let pem = String::from_utf8(out.stdout).unwrap();
        keys.push(KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256).unwrap());
    }
    keys
}

/// One generated case: the chain as sent (leaf first), the root, and what was done to it.
struct Case {
    chain: Vec<Vec<u8>>,
    root: Vec<u8>,
    what: String,
}

fn generate(rng: &mut Rng, keys: &[KeyPair], n: usize) -> Case {
    let key = |rng: &mut Rng| rng.below(keys.len());
    let root_key = key(rng);
    let root_params = params(rng, Role::Root, &format!("root {n}"));
    let root = root_params.clone().self_signed(&keys[root_key]).unwrap();
    let mut root_der = root.der().to_vec();
    let mut issuer = (root, root_key);
    let mut ints = Vec::new();
    for i in 0..rng.below(3) {
        let k = key(rng);
        let cert = params(rng, Role::Intermediate, &format!("int {n}.{i}"))
            .signed_by(&keys[k], &issuer.0, &keys[issuer.1])
            .unwrap();
        ints.push(cert.der().to_vec());
        issuer = (cert, k);
    }
    let leaf = params(rng, Role::Leaf, &format!("leaf {n}")).signed_by(&keys[key(rng)], &issuer.0, &keys[issuer.1]);
    let mut chain = vec![leaf.unwrap().der().to_vec()];
    ints.reverse();
    chain.extend(ints);
    let mut what = format!("case {n}: {} intermediates", chain.len() - 1);
    match rng.below(12) {
        0 if chain.len() > 1 => {
            let i = 1 + rng.below(chain.len() - 1);
            chain.remove(i);
            what += ", one dropped";
        }
        1 if chain.len() > 2 => {
            chain[1..].reverse();
            what += ", reversed";
        }
        2 => {
            let i = rng.below(chain.len());
            chain.push(chain[i].clone());
            what += ", one repeated";
        }
        3 | 4 => {
            let i = rng.below(chain.len());
            let at = rng.below(chain[i].len());
            chain[i][at] ^= 1 << rng.below(8);
            what += &format!(", cert {i} byte {at} changed");
        }
        5 => {
            // A look-alike root: the same name and extensions, another key.
            let other = (root_key + 1 + rng.below(keys.len() - 1)) % keys.len();
            root_der = root_params.self_signed(&keys[other]).unwrap().der().to_vec();
            what += ", a look-alike root";
        }
        _ => {}
    }
    Case { chain, root: root_der, what }
}

/// webpki's verdict, as rustls asks for it: a path to the anchor for a TLS server, then the name.
fn webpki(case: &Case, host: &str) -> Result<(), String> {
    let root = CertificateDer::from(case.root.as_slice());
    let anchor = webpki::anchor_from_trusted_cert(&root).map_err(|e| format!("anchor: {e:?}"))?;
    let leaf = CertificateDer::from(case.chain[0].as_slice());
    let ee = webpki::EndEntityCert::try_from(&leaf).map_err(|e| format!("leaf: {e:?}"))?;
    let ints: Vec<CertificateDer<'_>> = case.chain[1..].iter().map(|c| CertificateDer::from(c.as_slice())).collect();
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
    let name = ServerName::try_from(host).unwrap();
    ee.verify_is_valid_for_subject_name(&name).map_err(|e| format!("{e:?}"))
}

fn chip(case: &Case, host: &str) -> Result<(), PkiError> {
    let chain: Vec<&[u8]> = case.chain.iter().map(Vec::as_slice).collect();
    verify_chain(&chain, &[&case.root], host, Clock::Known(NOW))
}

#[test]
fn the_chip_never_accepts_what_webpki_refuses() {
    let keys = keys();
    let mut rng = Rng(SEED);
    let (mut both_accept, mut both_refuse, mut checks) = (0, 0, 0);
    let mut stricter = vec![0usize; STRICTER.len()];
    let mut wrong = Vec::new();
    for n in 0..CASES {
        let case = generate(&mut rng, &keys, n);
        // The host the leaf was most likely made for, and two drawn.
        let hosts = [HOSTS[0], rng.pick(&HOSTS), rng.pick(&HOSTS)];
        for host in hosts {
            checks += 1;
            match (chip(&case, host), webpki(&case, host)) {
                (Ok(()), Ok(())) => both_accept += 1,
                (Err(_), Err(_)) => both_refuse += 1,
                (Ok(()), Err(why)) => {
                    wrong.push(format!("{} for {host}: the chip accepted, webpki refused: {why}", case.what))
                }
                (Err(e), Ok(())) => match STRICTER.iter().position(|(_, allowed)| allowed(&e)) {
                    Some(i) => stricter[i] += 1,
                    None => {
                        wrong.push(format!("{} for {host}: the chip refused for an unlisted reason: {e:?}", case.what))
                    }
                },
            }
        }
    }
    println!("{checks} checks: {both_accept} accepted by both, {both_refuse} refused by both");
    for ((why, _), count) in STRICTER.iter().zip(&stricter) {
        println!("chip stricter ({why}): {count}");
    }
    assert!(
        wrong.is_empty(),
        "{} disagreements, first ones:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(12)].join("\n")
    );
    // Not a vacuous run: both verdicts are common.
    assert!(both_accept >= checks / 20, "only {both_accept} of {checks} accepted by both");
    assert!(both_refuse >= checks / 4, "only {both_refuse} of {checks} refused by both");
}
