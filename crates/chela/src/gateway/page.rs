//! The web page at `/`: one self-contained file (`page/index.html`, HTML, CSS and script
//! inline), compiled into the binary. It uses only the gateway's public API; see
//! docs/DESIGN.md, "The web page".

use hyper::StatusCode;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue};

use super::{ApiError, Resp, full};

/// The page, as the binary carries it.
pub const INDEX_HTML: &str = include_str!("page/index.html");

/// What the browser may do with the page: run its own inline script and style, talk to this
/// gateway (HTTP and WebSocket), and nothing else — no other origin, no plugin, no framing by
/// another site. The page puts model text in the DOM only escaped; this is the second fence.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

pub fn index() -> Result<Resp, ApiError> {
    let mut resp = Resp::new(full(INDEX_HTML));
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    // The page changes with the binary; a stale copy would talk to a newer API.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(HeaderName::from_static("content-security-policy"), HeaderValue::from_static(CSP));
    headers.insert(HeaderName::from_static("x-content-type-options"), HeaderValue::from_static("nosniff"));
    headers.insert(HeaderName::from_static("referrer-policy"), HeaderValue::from_static("no-referrer"));
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn serves_the_page_as_html_under_a_strict_policy() {
        let resp = index().unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        let csp = resp.headers()["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'none';") && csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, INDEX_HTML.as_bytes());
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
