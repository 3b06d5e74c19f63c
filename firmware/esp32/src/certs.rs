//! The root CAs pinned in the image, per API host. A server's chain must lead to one of its
//! host's roots; a host that is not listed is not called at all. The DER files are Debian's
//! `ca-certificates` roots (see `firmware/esp32/certs/SHA256SUMS`); update them here when a
//! provider changes its CA.
//!
//! On the C3 the roots' bytes are in RAM (`.data`), not in the flash read-only data: that data
//! is then under two 64 KiB pages, so the code's flash mapping starts a page lower and the image
//! loses the page's padding (about 10 KB for the roots' 6.5 KB of RAM; docs/BENCHMARKS.md). The C6
//! has the page's room and no RAM to spare: its roots stay in flash.

/// A root's DER bytes as a static, in `.data` on the C3 (see above).
macro_rules! root {
    ($(#[$doc:meta])* $name:ident, $file:literal) => {
        $(#[$doc])*
        #[cfg_attr(feature = "esp32c3", unsafe(link_section = ".data.chela_roots"))]
        static $name: [u8; include_bytes!($file).len()] = *include_bytes!($file);
    };
}

root!(
    /// Google Trust Services Root R1 (RSA) and R4 (ECDSA): Cloudflare's and Google's edges.
    GTS_R1,
    "../certs/gts_root_r1.der"
);
root!(GTS_R4, "../certs/gts_root_r4.der");
root!(
    /// ISRG Root X1 (RSA) and X2 (P-384): Let's Encrypt, the other CA Cloudflare issues from. Its
    /// ECDSA intermediates (E5–E9) are signed by X2; X1 covers chains served with X2's cross-sign.
    ISRG_X1,
    "../certs/isrg_root_x1.der"
);
root!(ISRG_X2, "../certs/isrg_root_x2.der");
root!(
    /// Go Daddy Root Certificate Authority G2: api.telegram.org.
    GODADDY_G2,
    "../certs/godaddy_root_g2.der"
);
#[cfg(feature = "connected")]
root!(
    /// Amazon Root CA 1: AWS's certificate manager, which API hosts behind AWS load balancers use.
    AMAZON_R1,
    "../certs/amazon_root_ca1.der"
);
#[cfg(feature = "feishu")]
root!(
    /// GlobalSign Root CA - R3 (RSA 2048): the root of GlobalSign's OV TLS intermediates ("GlobalSign
    /// RSA OV SSL CA 2018", "GlobalSign GCC R3 OV TLS CA 2024"), which Feishu's `*.feishu.cn`
    /// certificates were issued from. Not checked against the live hosts from here (the build
    /// machines have no network): a Feishu host on another CA fails its handshake, said on the console.
    GLOBALSIGN_R3,
    "../certs/globalsign_root_r3.der"
);

static CLOUDFLARE: &[&[u8]] = &[&GTS_R4, &GTS_R1, &ISRG_X2, &ISRG_X1];
static TELEGRAM: &[&[u8]] = &[&GODADDY_G2];
/// `web_search`'s engines (Tavily, Brave Search): not checked against the live hosts from here
/// (no network on the build machines), so the CAs such APIs are commonly served from; a host
/// on another CA fails its handshake, and the tool says so to the model and on the console.
#[cfg(feature = "connected")]
static SEARCH: &[&[u8]] = &[&AMAZON_R1, &GTS_R4, &GTS_R1, &ISRG_X2, &ISRG_X1];
/// Feishu: the open API (open.feishu.cn) and the long connection's host, which the endpoint
/// names (a `*.feishu.cn` host; the certificate must still name it).
#[cfg(feature = "feishu")]
static FEISHU: &[&[u8]] = &[&GLOBALSIGN_R3];

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
static UPDATE_HOSTS: &[&[u8]] = &[&GTS_R4, &GTS_R1, &ISRG_X2, &ISRG_X1, &GODADDY_G2];

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
