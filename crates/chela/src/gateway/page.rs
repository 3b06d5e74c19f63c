//! The web page at `/`: one self-contained file (`page/index.html`, HTML, CSS and script
//! inline), compiled into the binary. It uses only the gateway's public API; see
//! docs/DESIGN.md, "The web page".
//!
//! The binary carries the page gzip-compressed (the build script makes it: `build/page.rs`), 17 KB
//! instead of 59 KB. A client that accepts gzip (every browser) gets those bytes as they are,
//! with `Content-Encoding: gzip`; any other gets the page inflated for it.

use std::sync::OnceLock;

use bytes::Bytes;
use hyper::StatusCode;
use hyper::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, VARY,
};

use super::{ApiError, Resp, full};

/// The page as a gzip file (RFC 1952): a 10-byte header with no optional field, the deflate
/// stream, its CRC-32 and the page's length.
const INDEX_GZ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/index.html.gz"));
/// The fixed gzip header and the trailer (CRC-32, length) around the deflate stream (as
/// `build/page.rs` writes them).
const GZ_HEADER: usize = 10;
const GZ_TRAILER: usize = 8;

/// What the browser may do with the page: run its own inline script and style, talk to this
/// gateway (HTTP and WebSocket), and nothing else — no other origin, no plugin, no framing by
/// another site. The page puts model text in the DOM only escaped; this is the second fence.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// The page for a request with these headers: gzip-encoded when its `Accept-Encoding` allows.
pub fn index(request: &HeaderMap) -> Result<Resp, ApiError> {
    let gzip = accepts_gzip(request);
    let body = if gzip { Bytes::from_static(INDEX_GZ) } else { inflate()? };
    let mut resp = Resp::new(full(body));
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    if gzip {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    // A cache between must not hand the gzip bytes to a client that did not ask for them.
    headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    // The page changes with the binary; a stale copy would talk to a newer API.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(HeaderName::from_static("content-security-policy"), HeaderValue::from_static(CSP));
    headers.insert(HeaderName::from_static("x-content-type-options"), HeaderValue::from_static("nosniff"));
    headers.insert(HeaderName::from_static("referrer-policy"), HeaderValue::from_static("no-referrer"));
    Ok(resp)
}

/// The page itself, inflated from the bytes the binary carries (for a client without gzip).
/// Inflating takes a few milliseconds, so the first such request keeps the result (59 KB, held
/// only once a client without gzip has asked).
fn inflate() -> Result<Bytes, ApiError> {
    static PAGE: OnceLock<Bytes> = OnceLock::new();
    if let Some(page) = PAGE.get() {
        return Ok(page.clone());
    }
    let trailer = &INDEX_GZ[INDEX_GZ.len() - GZ_TRAILER..];
    let len = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]) as usize;
    let page = super::inflate::inflate(&INDEX_GZ[GZ_HEADER..INDEX_GZ.len() - GZ_TRAILER], len)
        .map_err(|_| ApiError::Internal("the web page compiled into this binary does not inflate".into()))?;
    Ok(PAGE.get_or_init(|| Bytes::from(page)).clone())
}

/// Whether `Accept-Encoding` (RFC 9110, 12.5.3) takes gzip: `gzip`, `x-gzip` or `*` named
/// without `q=0`, where a `gzip` with `q=0` outweighs a `*`. No header means only the identity.
fn accepts_gzip(request: &HeaderMap) -> bool {
    let (mut gzip, mut any) = (None, None);
    for value in request.get_all(ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            // A qvalue is at most three decimals: zero is "0", "0." or "0.000".
            let refused = parts.any(|p| {
                let p = p.trim();
                p.get(..2).is_some_and(|k| k.eq_ignore_ascii_case("q="))
                    && p[2..].trim().starts_with('0')
                    && p[2..].trim().bytes().all(|b| b == b'0' || b == b'.')
            });
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(gzip.unwrap_or(false) || !refused);
            } else if coding == "*" {
                any = Some(any.unwrap_or(false) || !refused);
            }
        }
    }
    gzip.or(any).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    /// The page's source, which the binary carries only compressed.
    const INDEX_HTML: &str = include_str!("page/index.html");

    fn asking(accept_encoding: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in accept_encoding {
            headers.append(ACCEPT_ENCODING, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    async fn body(resp: Resp) -> Bytes {
        resp.into_body().collect().await.unwrap().to_bytes()
    }

    /// The CRC-32 of gzip, table-driven (the build script's is bit by bit).
    fn crc32(data: &[u8]) -> u32 {
        let table: Vec<u32> = (0..256u32)
            .map(|n| (0..8).fold(n, |c, _| if c & 1 == 1 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 }))
            .collect();
        !data.iter().fold(!0u32, |c, &b| table[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8))
    }

    #[tokio::test]
    async fn serves_the_page_as_html_under_a_strict_policy() {
        for accept in [&[][..], &["gzip, deflate, br, zstd"]] {
            let resp = index(&asking(accept)).unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            assert_eq!(resp.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
            let csp = resp.headers()["content-security-policy"].to_str().unwrap();
            assert!(csp.starts_with("default-src 'none';") && csp.contains("frame-ancestors 'none'"), "{csp}");
            assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
            assert_eq!(resp.headers()[VARY], "accept-encoding");
        }
    }

    #[tokio::test]
    async fn a_client_without_gzip_gets_the_page_itself() {
        for accept in [&[][..], &["identity"], &["br, deflate"], &["gzip;q=0"], &["gzip; q=0.000, *"], &["*;q=0"]] {
            let resp = index(&asking(accept)).unwrap();
            assert!(!resp.headers().contains_key(CONTENT_ENCODING), "{accept:?}");
            assert_eq!(body(resp).await, INDEX_HTML.as_bytes(), "{accept:?}");
        }
    }

    #[tokio::test]
    async fn a_client_with_gzip_gets_a_gzip_file_of_the_page() {
        for accept in [&["gzip"][..], &["deflate, GZIP;q=0.5"], &["br", "x-gzip"], &["*"], &["gzip;q=0.001"]] {
            let resp = index(&asking(accept)).unwrap();
            assert_eq!(resp.headers()[CONTENT_ENCODING], "gzip", "{accept:?}");
            let gz = body(resp).await;
            // RFC 1952: the magic, deflate, no optional field; then the stream; then the
            // CRC-32 and the length of the page, which a browser checks.
            assert_eq!(gz[..4], [0x1f, 0x8b, 8, 0]);
            assert!(gz.len() < INDEX_HTML.len() / 2, "{} bytes", gz.len());
            let page = miniz_oxide::inflate::decompress_to_vec(&gz[GZ_HEADER..gz.len() - GZ_TRAILER]).unwrap();
            assert_eq!(page, INDEX_HTML.as_bytes());
            let trailer = &gz[gz.len() - GZ_TRAILER..];
            assert_eq!(trailer[..4], crc32(INDEX_HTML.as_bytes()).to_le_bytes());
            assert_eq!(trailer[4..], u32::try_from(INDEX_HTML.len()).unwrap().to_le_bytes());
        }
    }

    #[test]
    fn the_page_is_one_small_file_that_loads_nothing_from_elsewhere() {
        // No build step and no CDN: nothing is fetched by src= or <link>, and it stays small.
        // (The bound was 48 KiB before the Memory, Config and Jobs tabs learnt to edit.)
        assert!(INDEX_HTML.len() < 64 * 1024, "the page grew to {} bytes", INDEX_HTML.len());
        let lower = INDEX_HTML.to_ascii_lowercase();
        for needle in [" src=", "<link", "@import", "url(http", "<script src"] {
            assert!(!lower.contains(needle), "the page refers to another file: {needle}");
        }
        assert!(lower.starts_with("<!doctype html>") && lower.trim_end().ends_with("</html>"));
    }
}
