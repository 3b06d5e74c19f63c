//! The API key stays with the host it was given for: a change that moves the effective
//! `llm.base_url` to another scheme, host or port while `llm.api_key` stays as it was would
//! send that key to the new host with the next request. Such a change is refused unless the
//! owner says what to do with the key ([`KeyChoice`]); a change that sets a new key together
//! with the new URL needs nothing more. Checked on every write of the runtime layer
//! (`chela config set|unset`, the console's API, the first-run form), against the layers as
//! this process sees them: `chela.toml`, `overrides.toml` and its own environment.

use std::fmt;

use anyhow::Result;
use chela_core::config::{LLM_API_KEY, LLM_BASE_URL};

use super::{Config, put, render_overrides};
use crate::toml;

/// What to do with a stored API key when a change moves `llm.base_url` to another host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyChoice {
    /// Refuse the change and say what to do ([`KeyWouldMove`]).
    #[default]
    Ask,
    /// The owner trusts the new host with the key (`--keep-key`, `"keep_key": true`).
    Keep,
    /// The new host gets no key: an empty `llm.api_key` is stored in the runtime layer
    /// (`--drop-key`, `"drop_key": true`).
    Drop,
}

/// The refusal: the key would go to a host it was not given for.
#[derive(Debug)]
pub struct KeyWouldMove {
    pub from: String,
    pub to: String,
}

impl fmt::Display for KeyWouldMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this moves llm.base_url from {} to {}, and the stored llm.api_key would be sent there. If that host \
             may have the key, repeat with --keep-key (console API: \"keep_key\": true); to use it without the \
             key, repeat with --drop-key (\"drop_key\": true) and then set its own key with \
             `chela config set llm.api_key -`",
            self.from, self.to
        )
    }
}

impl std::error::Error for KeyWouldMove {}

/// Scheme, host and port of a URL (lower case): what decides where a request goes.
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    format!("{}://{}", scheme.to_ascii_lowercase(), authority.to_ascii_lowercase())
}

/// Checks the change from `before` to `after` (runtime-layer tables) over `file` and `env`;
/// with [`KeyChoice::Drop`] it also blanks the key in `after`.
pub(super) fn guard(
    file: Option<&str>,
    before: &toml::Table,
    after: &mut toml::Table,
    env: &[(String, String)],
    choice: KeyChoice,
) -> Result<()> {
    let load = |t: &toml::Table| Config::from_layers(file, Some(&render_overrides(t)?), env);
    let old = load(before)?;
    let new = load(after)?;
    let (from, to) = (origin(old.effective(LLM_BASE_URL)), origin(new.effective(LLM_BASE_URL)));
    let key = new.get(LLM_API_KEY);
    // No key goes anywhere, or the change brings the new host's own key.
    if from == to || key.trim().is_empty() || key != old.get(LLM_API_KEY) {
        return Ok(());
    }
    match choice {
        KeyChoice::Keep => Ok(()),
        KeyChoice::Ask => Err(KeyWouldMove { from, to }.into()),
        KeyChoice::Drop => {
            put(after, LLM_API_KEY, "")?;
            if !load(after)?.get(LLM_API_KEY).trim().is_empty() {
                anyhow::bail!(
                    "llm.api_key comes from the environment variable {}, which `chela config` cannot drop: \
                     unset it where Chela is started, or repeat with --keep-key",
                    LLM_API_KEY.env_var()
                );
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::parse(text).unwrap()
    }

    const FILE: &str =
        "[llm]\nprovider = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\napi_key = \"sk-owner\"\n";

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert_eq!(origin("https://API.example.com/v1"), "https://api.example.com");
        assert_ne!(origin("https://api.example.com/v1"), origin("http://api.example.com/v1"));
        assert_ne!(origin("https://api.example.com"), origin("https://api.example.com:8443"));
        assert_eq!(origin("https://api.example.com/v1"), origin("https://api.example.com/v2?x"));
    }

    #[test]
    fn a_new_host_with_the_old_key_is_refused_unless_the_owner_chooses() {
        let before = table("");
        let moved = table("[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\n");
        let e = guard(Some(FILE), &before, &mut moved.clone(), &[], KeyChoice::Ask).unwrap_err();
        let why = e.downcast_ref::<KeyWouldMove>().expect("a KeyWouldMove").to_string();
        assert!(why.contains("https://api.openai.com") && why.contains("http://127.0.0.1:9"), "{why}");
        assert!(why.contains("--keep-key") && why.contains("--drop-key"), "{why}");
        guard(Some(FILE), &before, &mut moved.clone(), &[], KeyChoice::Keep).unwrap();
        let mut dropped = moved.clone();
        guard(Some(FILE), &before, &mut dropped, &[], KeyChoice::Drop).unwrap();
        let cfg = Config::from_layers(Some(FILE), Some(&render_overrides(&dropped).unwrap()), &[]).unwrap();
        assert_eq!(cfg.get(LLM_API_KEY), "", "the file's key is masked for the new host");
    }

    #[test]
    fn same_host_a_new_key_or_no_key_need_nothing() {
        let before = table("");
        let path_only = table("[llm]\nbase_url = \"https://api.openai.com/v2\"\n");
        guard(Some(FILE), &before, &mut path_only.clone(), &[], KeyChoice::Ask).unwrap();
        let with_key = table("[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"sk-local\"\n");
        guard(Some(FILE), &before, &mut with_key.clone(), &[], KeyChoice::Ask).unwrap();
        let keyless = "[llm]\nprovider = \"openai\"\n";
        let moved = table("[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\n");
        guard(Some(keyless), &before, &mut moved.clone(), &[], KeyChoice::Ask).unwrap();
    }

    #[test]
    fn a_provider_switch_moves_the_default_url_too() {
        let file = "[llm]\nprovider = \"openai\"\napi_key = \"sk-owner\"\n";
        let switched = table("[llm]\nprovider = \"anthropic\"\n");
        let e = guard(Some(file), &table(""), &mut switched.clone(), &[], KeyChoice::Ask).unwrap_err();
        assert!(e.downcast_ref::<KeyWouldMove>().is_some(), "{e}");
    }

    #[test]
    fn a_key_from_the_environment_counts_and_cannot_be_dropped_here() {
        let env = [("CHELA_LLM__API_KEY".to_owned(), "sk-env".to_owned())];
        let file = "[llm]\nprovider = \"openai\"\n";
        let moved = table("[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\n");
        let e = guard(Some(file), &table(""), &mut moved.clone(), &env, KeyChoice::Ask).unwrap_err();
        assert!(e.downcast_ref::<KeyWouldMove>().is_some(), "{e}");
        let e = guard(Some(file), &table(""), &mut moved.clone(), &env, KeyChoice::Drop).unwrap_err();
        assert!(e.to_string().contains("CHELA_LLM__API_KEY"), "{e}");
        // A base URL from the environment wins over the runtime layer: nothing moves.
        let env = [env[0].clone(), ("CHELA_LLM__BASE_URL".to_owned(), "https://api.openai.com/v1".to_owned())];
        guard(Some(file), &table(""), &mut moved.clone(), &env, KeyChoice::Ask).unwrap();
    }
}
