//! Feishu's pinned root in the ESP32 image (`firmware/esp32/certs/globalsign_root_r3.der`,
//! GlobalSign Root CA - R3) with the chip's certificate checking. The real chain of
//! open.feishu.cn cannot be fetched on the build machines (no network), so the chains here are
//! made by `tests/fixtures/make-feishu-pki.sh` in Feishu's shape: a look-alike of R3 (same
//! name, our key), an OV intermediate, a `*.feishu.cn` leaf.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use chela_chip::pki::{Clock, PkiError, verify_chain};
use sha2::{Digest, Sha256};

/// The root the image pins for `*.feishu.cn`, byte for byte.
const PINNED: &[u8] = include_bytes!("../../esp32/certs/globalsign_root_r3.der");
const SUMS: &str = include_str!("../../esp32/certs/SHA256SUMS");

struct Chain {
    root: Vec<u8>,
    int: Vec<u8>,
    leaf: Vec<u8>,
}

fn chain() -> &'static Chain {
    static CHAIN: OnceLock<Chain> = OnceLock::new();
    CHAIN.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("feishu-pki");
        let _ = std::fs::remove_dir_all(&dir);
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/make-feishu-pki.sh");
        let out = Command::new("sh").arg(script).arg(&dir).output().expect("sh runs");
        assert!(out.status.success(), "make-feishu-pki.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        let der = |n: &str| std::fs::read(dir.join(format!("{n}.der"))).unwrap();
        Chain { root: der("root"), int: der("int"), leaf: der("leaf") }
    })
}

/// Some time in the chain's validity (it starts now and lasts 25 years).
fn now() -> Clock {
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    Clock::Known(unix + 3600)
}

#[test]
fn a_chain_in_feishus_shape_verifies_for_its_hosts_and_no_other() {
    let c = chain();
    let sent: [&[u8]; 2] = [&c.leaf, &c.int];
    for host in ["open.feishu.cn", "msg-frontier.feishu.cn"] {
        verify_chain(&sent, &[&c.root], host, now()).unwrap_or_else(|e| panic!("{host}: {e}"));
    }
    for host in ["feishu.cn.evil.example", "open.feishu.cn.evil.example", "a.b.feishu.cn", "larksuite.com"] {
        let e = verify_chain(&sent, &[&c.root], host, now()).unwrap_err();
        assert!(matches!(e, PkiError::WrongHost { .. }), "{host}: {e:?}");
    }
    // Without its intermediate the leaf leads nowhere.
    assert!(verify_chain(&[&c.leaf], &[&c.root], "open.feishu.cn", now()).is_err());
}

#[test]
fn the_pinned_root_is_r3_and_a_look_alike_of_it_is_not_trusted() {
    // The file is the one SHA256SUMS names (Debian's ca-certificates copy of R3).
    let sum = format!("{:x}", Sha256::digest(PINNED));
    assert!(SUMS.lines().any(|l| l == format!("{sum}  certs/globalsign_root_r3.der")), "{sum} not in SHA256SUMS");
    assert_eq!(&sum[..16], "cbb522d7b7f127ad", "GlobalSign Root CA - R3's SHA-256 fingerprint");
    // A chain under a root of the same name but another key: the name matches R3's, the
    // signature does not verify under R3's key, so the chip refuses it.
    let c = chain();
    let sent: [&[u8]; 2] = [&c.leaf, &c.int];
    let e = verify_chain(&sent, &[PINNED], "open.feishu.cn", now()).unwrap_err();
    assert!(!matches!(e, PkiError::WrongHost { .. }), "{e:?}");
    // Beside the look-alike, the pinned root is parsed and used without upsetting the check.
    verify_chain(&sent, &[PINNED, &c.root], "open.feishu.cn", now()).unwrap();
}
