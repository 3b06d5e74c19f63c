//! When a provider needs no API key: a server on this machine (Ollama, llama.cpp, vLLM on
//! loopback), or any server the person says needs none with `llm.api_key = "none"` (a LAN box).
//!
//! The host is taken from the base URL by the HTTP client's own parser: only `http`/`https`, no
//! user info (`http://127.0.0.1@evil.com` names `evil.com`), and the host compared whole, so
//! `http://127.evil.com` and `http://localhost.evil.com` still need a key.

use std::net::IpAddr;

use chela_net::Url;

/// The `llm.api_key` value that means "this server needs no key; send none".
pub const NO_KEY: &str = "none";

/// The key to send (empty: no key header at all) and whether going without one is fine, for
/// the configured `api_key` and `base_url`.
pub fn api_key_rule(api_key: &str, base_url: &str) -> (String, bool) {
    if api_key.trim().eq_ignore_ascii_case(NO_KEY) {
        return (String::new(), true);
    }
    (api_key.to_owned(), is_loopback_url(base_url))
}

/// Whether `url` names a server on this machine: `127.0.0.0/8`, `::1` (also as
/// `::ffff:127.x.y.z`), `localhost` or a name under `.localhost`, in any case.
pub fn is_loopback_url(url: &str) -> bool {
    // The HTTP client's own parser, so the host judged here is the host it would connect to. It
    // takes only http/https and refuses user info (`http://127.0.0.1@evil.com` names `evil.com`).
    let Ok(u) = Url::parse(url.trim()) else { return false };
    // A fully qualified name may end in a dot: `localhost.` is `localhost`.
    let host = u.host.strip_suffix('.').unwrap_or(&u.host);
    if let Some(ip) = u.ip.or_else(|| host.parse().ok()) {
        return is_loopback(ip);
    }
    host == "localhost" || host.strip_suffix(".localhost").is_some_and(|sub| !sub.is_empty())
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised_and_look_alikes_are_not() {
        for url in [
            "http://127.0.0.1:11434/v1",
            "http://127.0.0.1",
            "http://127.1.2.3:8080",
            "https://LOCALHOST:8080/v1",
            "http://localhost",
            "http://LocalHost./v1",
            "http://api.localhost:9000",
            "http://[::1]:11434/v1",
            "http://[::1]",
            "http://[::ffff:127.0.0.1]:80/",
            "HTTP://127.0.0.1:1/path?q=1",
        ] {
            assert!(is_loopback_url(url), "{url} is this machine");
        }
        for url in [
            "http://127.evil.com",
            "http://127.0.0.1.evil.com/v1",
            "http://localhost.evil.com",
            "http://evil-localhost",
            "http://.localhost",
            "http://127.0.0.1@evil.com",
            "http://user:pw@localhost",
            "http://evil.com/127.0.0.1",
            "http://evil.com?localhost",
            "http://evil.com#@127.0.0.1",
            "http://192.168.1.20:11434/v1",
            "http://[::2]:80",
            "http://[::1",
            "http://localhost:80x",
            "http://localhost:123456",
            "ftp://127.0.0.1",
            "127.0.0.1:8080",
            "https://api.anthropic.com",
            "",
        ] {
            assert!(!is_loopback_url(url), "{url} is not this machine");
        }
    }

    #[test]
    fn none_means_no_key_anywhere_and_a_real_key_is_kept() {
        assert_eq!(api_key_rule("none", "http://192.168.1.20:11434/v1"), (String::new(), true));
        assert_eq!(api_key_rule(" NONE ", "https://api.openai.com/v1"), (String::new(), true));
        assert_eq!(api_key_rule("", "http://192.168.1.20:11434/v1"), (String::new(), false));
        assert_eq!(api_key_rule("", "http://localhost:11434/v1"), (String::new(), true));
        assert_eq!(api_key_rule("sk-x", "https://api.openai.com/v1"), ("sk-x".to_owned(), false));
        assert_eq!(api_key_rule("sk-x", "http://[::1]:8080"), ("sk-x".to_owned(), true), "a local key is still sent");
    }
}
