//! One-time login links for the console: `http://127.0.0.1:18789/#login=<code>`.
//!
//! `chela run` prints one when it starts and `chela console` prints a fresh one; the page
//! trades the code for `gateway.token` at `POST /api/login`. A code is the expiry time, a
//! random nonce and an HMAC of both keyed with `gateway.token`, so another process (`chela
//! console`) can make one the daemon accepts without a shared file, and nobody without the
//! token can. The daemon remembers redeemed nonces until they expire: a code works once. The
//! code rides in the URL's fragment, which browsers send to no server and no `Referer`.

use std::collections::HashMap;
use std::sync::Mutex;

use anyhow::Context;
use ring::hmac;

use super::ApiError;
use crate::devices::hex_of as hex;

/// How long a printed link works.
pub const LINK_LIFETIME_SECS: u64 = 10 * 60;
/// Redeemed codes remembered at once (each until its expiry). A code is good for at most
/// [`LINK_LIFETIME_SECS`], so this many logins in ten minutes is already far past one person.
const MAX_REDEEMED: usize = 256;
/// Longest code looked at: 20 digits, 32 and 64 hex digits and two dots fit well within.
const MAX_CODE: usize = 200;
/// What the MAC covers besides the code's fields, so no other HMAC made with the token fits.
const CONTEXT: &[u8] = b"chela console login v1\0";

/// A new code for `token`, good until `now + LINK_LIFETIME_SECS`.
pub fn code(token: &str, now: u64) -> anyhow::Result<String> {
    let mut nonce = [0u8; 16];
    rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())
        .context("cannot read random bytes for a console login link")?;
    let expires = now + LINK_LIFETIME_SECS;
    let nonce = hex(&nonce);
    Ok(format!("{expires}.{nonce}.{}", hex(mac(token, expires, &nonce).as_ref())))
}

/// The link to print: `base` is `http://host:port`.
pub fn link(base: &str, token: &str, now: u64) -> anyhow::Result<String> {
    Ok(format!("{base}/#login={}", code(token, now)?))
}

fn mac(token: &str, expires: u64, nonce: &str) -> hmac::Tag {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(CONTEXT);
    ctx.update(format!("{expires}.{nonce}").as_bytes());
    ctx.sign()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// The codes this daemon has already accepted, by nonce, with their expiry.
#[derive(Default)]
pub struct Logins {
    redeemed: Mutex<HashMap<String, u64>>,
}

impl Logins {
    /// Checks `code` against `token` at `now` and uses it up. Every refusal says what to do.
    pub fn redeem(&self, token: &str, code: &str, now: u64) -> Result<(), ApiError> {
        // A code that is not one of ours gets the same answer as a missing token.
        let stale = || ApiError::Unauthorized;
        if code.len() > MAX_CODE {
            return Err(stale());
        }
        let mut parts = code.trim().splitn(3, '.');
        let (Some(expires), Some(nonce), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(stale());
        };
        let (Ok(expires), Some(tag)) = (expires.parse::<u64>(), unhex(tag)) else { return Err(stale()) };
        if nonce.len() != 32 || unhex(nonce).is_none() {
            return Err(stale());
        }
        // `verify` compares in constant time.
        let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
        let mut signed = CONTEXT.to_vec();
        signed.extend_from_slice(format!("{expires}.{nonce}").as_bytes());
        if hmac::verify(&key, &signed, &tag).is_err() {
            chela_log::info!("gateway: a console login link that this gateway did not make was refused");
            return Err(stale());
        }
        if expires <= now || expires > now + LINK_LIFETIME_SECS {
            return Err(ApiError::Forbidden(
                "This login link has expired (links work for 10 minutes). Run `chela console` for a new one.".into(),
            ));
        }
        let mut used = self.redeemed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        used.retain(|_, until| *until > now);
        if used.contains_key(nonce) {
            return Err(ApiError::Forbidden(
                "This login link was already used; each works once. Run `chela console` for a new one.".into(),
            ));
        }
        if used.len() >= MAX_REDEEMED {
            return Err(ApiError::Busy(
                "Too many console logins in the last 10 minutes; try again in a few minutes.".into(),
            ));
        }
        used.insert(nonce.to_owned(), expires);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "a-token";

    #[test]
    fn a_code_works_once() {
        let logins = Logins::default();
        let c = code(TOKEN, 1000).unwrap();
        logins.redeem(TOKEN, &c, 1001).unwrap();
        let again = logins.redeem(TOKEN, &c, 1002).unwrap_err();
        assert!(again.to_string().contains("already used"), "{again}");
        // Another code still works.
        logins.redeem(TOKEN, &code(TOKEN, 1000).unwrap(), 1003).unwrap();
    }

    #[test]
    fn a_code_expires() {
        let logins = Logins::default();
        let c = code(TOKEN, 1000).unwrap();
        let late = logins.redeem(TOKEN, &c, 1000 + LINK_LIFETIME_SECS).unwrap_err();
        assert!(late.to_string().contains("expired") && late.to_string().contains("chela console"), "{late}");
    }

    #[test]
    fn only_the_token_makes_codes() {
        let logins = Logins::default();
        let other = code("another-token", 1000).unwrap();
        assert!(matches!(logins.redeem(TOKEN, &other, 1001), Err(ApiError::Unauthorized)));
        // A far expiry cannot be claimed by editing the code: the MAC covers it.
        let c = code(TOKEN, 1000).unwrap();
        let (_, rest) = c.split_once('.').unwrap();
        let stretched = format!("{}.{rest}", 1000 + 100 * LINK_LIFETIME_SECS);
        assert!(matches!(logins.redeem(TOKEN, &stretched, 1001), Err(ApiError::Unauthorized)));
        for junk in ["", "1", "1.2.3", "9999.zz.zz", &"9".repeat(500)] {
            assert!(matches!(logins.redeem(TOKEN, junk, 1001), Err(ApiError::Unauthorized)), "{junk}");
        }
    }

    #[test]
    fn remembered_codes_are_bounded() {
        let logins = Logins::default();
        for _ in 0..MAX_REDEEMED {
            logins.redeem(TOKEN, &code(TOKEN, 1000).unwrap(), 1001).unwrap();
        }
        let full = logins.redeem(TOKEN, &code(TOKEN, 1000).unwrap(), 1001).unwrap_err();
        assert!(matches!(full, ApiError::Busy(_)), "{full}");
        // Once they expire, they are forgotten and logins work again.
        let later = 1000 + LINK_LIFETIME_SECS;
        logins.redeem(TOKEN, &code(TOKEN, later).unwrap(), later + 1).unwrap();
    }
}
