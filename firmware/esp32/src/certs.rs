//! The root CAs pinned in the image, per API host. A server's chain must lead to one of its
//! host's roots; a host that is not listed is not called at all. The DER files are Debian's
//! `ca-certificates` roots (see `firmware/esp32/certs/SHA256SUMS`); update them here when a
//! provider changes its CA.

/// Google Trust Services Root R1 (RSA) and R4 (ECDSA): Cloudflare's and Google's edges.
const GTS_R1: &[u8] = include_bytes!("../certs/gts_root_r1.der");
const GTS_R4: &[u8] = include_bytes!("../certs/gts_root_r4.der");
/// ISRG Root X1 (RSA) and X2 (P-384): Let's Encrypt, the other CA Cloudflare issues from. Its
/// ECDSA intermediates (E5–E9) are signed by X2; X1 covers chains served with X2's cross-sign.
const ISRG_X1: &[u8] = include_bytes!("../certs/isrg_root_x1.der");
const ISRG_X2: &[u8] = include_bytes!("../certs/isrg_root_x2.der");
/// Go Daddy Root Certificate Authority G2: api.telegram.org.
const GODADDY_G2: &[u8] = include_bytes!("../certs/godaddy_root_g2.der");
/// Amazon Root CA 1: AWS's certificate manager, which API hosts behind AWS load balancers use.
#[cfg(feature = "connected")]
const AMAZON_R1: &[u8] = include_bytes!("../certs/amazon_root_ca1.der");
/// GlobalSign Root CA - R3 (RSA 2048): the root of GlobalSign's OV TLS intermediates ("GlobalSign
/// RSA OV SSL CA 2018", "GlobalSign GCC R3 OV TLS CA 2024"), which Feishu's `*.feishu.cn`
/// certificates were issued from. Not checked against the live hosts from here (the build
/// machines have no network): a Feishu host on another CA fails its handshake, said on the console.
#[cfg(feature = "feishu")]
const GLOBALSIGN_R3: &[u8] = include_bytes!("../certs/globalsign_root_r3.der");

const CLOUDFLARE: &[&[u8]] = &[GTS_R4, GTS_R1, ISRG_X2, ISRG_X1];
const TELEGRAM: &[&[u8]] = &[GODADDY_G2];
/// `web_search`'s engines (Tavily, Brave Search): not checked against the live hosts from here
/// (no network on the build machines), so the CAs such APIs are commonly served from; a host
/// on another CA fails its handshake, and the tool says so to the model and on the console.
#[cfg(feature = "connected")]
const SEARCH: &[&[u8]] = &[AMAZON_R1, GTS_R4, GTS_R1, ISRG_X2, ISRG_X1];
/// Feishu: the open API (open.feishu.cn) and the long connection's host, which the endpoint
/// names (a `*.feishu.cn` host; the certificate must still name it).
#[cfg(feature = "feishu")]
const FEISHU: &[&[u8]] = &[GLOBALSIGN_R3];

/// Until SNTP answers, the chip's time is unknown but no earlier than the image's build
/// (`build.rs`): a chain that expired before it is refused even then (`pki::Clock::AtLeast`).
pub const BUILT_UNIX: u64 = parse_secs(env!("CHELA_BUILT_UNIX"));

const fn parse_secs(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut secs = 0u64;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "CHELA_BUILT_UNIX is not Unix seconds");
        secs = secs * 10 + (bytes[i] - b'0') as u64;
        i += 1;
    }
    secs
}

/// What an update's server may chain to: every root in the image. The update itself is trusted
/// for its Ed25519 signature (`chela_chip::ota`), not for where it came from; TLS here keeps a
/// network in the middle from reading or cutting it quietly.
#[cfg(feature = "connected")]
const UPDATE_HOSTS: &[&[u8]] = &[GTS_R4, GTS_R1, ISRG_X2, ISRG_X1, GODADDY_G2];

/// The roots an update fetched from `host` is checked against.
#[cfg(feature = "connected")]
pub fn update_roots(host: &str) -> &'static [&'static [u8]] {
    roots(host).unwrap_or(UPDATE_HOSTS)
}

/// The roots pinned for `host` (one handshake checks the server's chain against all of them);
/// `None` for a host the chip does not call.
pub fn roots(host: &str) -> Option<&'static [&'static [u8]]> {
    match host {
        "api.anthropic.com" | "api.openai.com" => Some(CLOUDFLARE),
        "api.telegram.org" => Some(TELEGRAM),
        #[cfg(feature = "connected")]
        "api.tavily.com" | "api.search.brave.com" => Some(SEARCH),
        #[cfg(feature = "feishu")]
        h if h.ends_with(".feishu.cn") => Some(FEISHU),
        _ => None,
    }
}
