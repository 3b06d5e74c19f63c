use super::*;
use chela_core::config::{LLM_API_KEY, LLM_MAX_TOKENS, LLM_MODEL, LLM_PROVIDER, LLM_STREAM, TIMEZONE};

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[test]
fn layers_apply_in_order_and_say_where_values_came_from() {
    let file = "timezone = \"Asia/Shanghai\"\n[llm]\nprovider = \"openai\"\nmodel = \"from-file\"\nmax_tokens = 100\nstream = false\n";
    let overrides = "[llm]\nmodel = \"from-runtime\"\nmax_tokens = \"200\"\n";
    let cfg = Config::from_layers(Some(file), Some(overrides), &env(&[("CHELA_LLM__MAX_TOKENS", "300")])).unwrap();
    assert_eq!(cfg.get(LLM_PROVIDER), "openai");
    assert_eq!(cfg.entry(LLM_PROVIDER).layer, Layer::File);
    assert_eq!(cfg.get(LLM_MODEL), "from-runtime");
    assert_eq!(cfg.entry(LLM_MODEL).layer, Layer::Runtime);
    assert_eq!(cfg.int(LLM_MAX_TOKENS), 300);
    assert_eq!(cfg.entry(LLM_MAX_TOKENS).layer, Layer::Env("CHELA_LLM__MAX_TOKENS".into()));
    assert!(!cfg.bool(LLM_STREAM));
    assert_eq!(cfg.get(TIMEZONE), "Asia/Shanghai");
    assert_eq!(cfg.entry(chela_core::config::PROXY_URL).layer, Layer::Default);
}

#[test]
fn vendor_key_variables_fill_an_empty_key_for_their_provider() {
    let e = env(&[("ANTHROPIC_API_KEY", "sk-ant-1"), ("OPENAI_API_KEY", "sk-oai-2")]);
    let cfg = Config::from_layers(None, None, &e).unwrap();
    assert_eq!(cfg.get(LLM_API_KEY), "sk-ant-1");
    assert_eq!(cfg.entry(LLM_API_KEY).layer, Layer::Env("ANTHROPIC_API_KEY".into()));
    let cfg = Config::from_layers(Some("[llm]\nprovider = \"openai\""), None, &e).unwrap();
    assert_eq!(cfg.get(LLM_API_KEY), "sk-oai-2");
    let cfg = Config::from_layers(Some("[llm]\napi_key = \"mine\""), None, &e).unwrap();
    assert_eq!(cfg.get(LLM_API_KEY), "mine");
    assert_eq!(cfg.entry(LLM_API_KEY).shown(), "****");
}

#[test]
fn unknown_keys_and_bad_values_are_refused_with_choices() {
    let e = Config::from_layers(Some("[llm]\nmodle = \"x\""), None, &[]).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("llm.model") && msg.contains("chela.toml"), "{msg}");
    let e = Config::from_layers(None, Some("[llm]\nprovider = \"gemini\""), &[]).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("anthropic, openai") && msg.contains("overrides.toml"), "{msg}");
    let e = Config::from_layers(None, None, &env(&[("CHELA_LLM__STREAM", "sometimes")])).unwrap_err();
    assert!(format!("{e:#}").contains("CHELA_LLM__STREAM"), "{e:#}");
    let e = Config::from_layers(Some("timezone = \"Mars/Olympus\""), None, &[]).unwrap_err();
    assert!(format!("{e:#}").contains("IANA"), "{e:#}");
    let e = Config::from_layers(Some("[llm]\n[llm.deep]\nx = 1"), None, &[]).unwrap_err();
    assert!(format!("{e:#}").contains("nested"), "{e:#}");
    assert!(Config::from_layers(Some("not toml ["), None, &[]).is_err());
}

#[test]
fn stray_chela_variables_are_warned_about() {
    let cfg = Config::from_layers(None, None, &env(&[("CHELA_HOME", "/x"), ("CHELA_LLM__MODLE", "y")])).unwrap();
    assert_eq!(cfg.warnings.len(), 1);
    assert!(cfg.warnings[0].contains("CHELA_LLM__MODLE"));
}

#[test]
fn set_unset_reset_round_trip_through_the_overrides_file() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    assert_eq!(set_override(&ws, "llm.model", "gpt \"quoted\"\\ name").unwrap(), "gpt \"quoted\"\\ name");
    set_override(&ws, "llm.stream", "no").unwrap();
    set_override(&ws, "timezone", "Europe/Berlin").unwrap();
    let text = std::fs::read_to_string(ws.overrides_path()).unwrap();
    let cfg = Config::from_layers(None, Some(&text), &[]).unwrap();
    assert_eq!(cfg.get(LLM_MODEL), "gpt \"quoted\"\\ name");
    assert!(!cfg.bool(LLM_STREAM));
    assert_eq!(cfg.get(TIMEZONE), "Europe/Berlin");
    assert!(set_override(&ws, "llm.nope", "x").is_err());
    assert!(set_override(&ws, "llm.max_tokens", "-5").is_err());
    assert!(unset_override(&ws, "llm.model").unwrap());
    assert!(!unset_override(&ws, "llm.model").unwrap());
    let text = std::fs::read_to_string(ws.overrides_path()).unwrap();
    assert!(!text.contains("gpt"));
    assert!(reset_overrides(&ws).unwrap());
    assert!(!ws.overrides_path().exists());
    assert!(!reset_overrides(&ws).unwrap());
}

#[test]
fn overrides_are_written_typed_by_the_toml_crate() {
    let mut map = BTreeMap::new();
    map.insert("llm.max_tokens", "1000".to_owned());
    map.insert("llm.stream", "false".to_owned());
    map.insert("caps.hidden", "web,files".to_owned());
    map.insert("timezone", "Europe/Berlin".to_owned());
    let text = render_overrides(&map).unwrap();
    assert!(text.contains("max_tokens = 1000\n") && text.contains("stream = false\n"), "{text}");
    assert!(text.contains("hidden = [\"web\", \"files\"]"), "{text}");
    let cfg = Config::from_layers(None, Some(&text), &[]).unwrap();
    assert_eq!(cfg.list(chela_core::config::CAPS_HIDDEN), ["web", "files"]);
    assert_eq!(cfg.get(TIMEZONE), "Europe/Berlin");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Any text, with quotes, backslashes, newlines, triple quotes of both kinds, control
    /// characters and any Unicode, comes back from `overrides.toml` as it was stored.
    #[test]
    fn any_string_round_trips_through_the_overrides_file(
        v in proptest::string::string_regex(r#"("""|'''|["\\\n\r\t']|\PC|[\x00-\x1f\x7f]){0,40}"#).unwrap()
    ) {
        let stored = check(LLM_MODEL, &v).unwrap();
        let mut map = BTreeMap::new();
        map.insert("llm.model", stored.clone());
        let text = render_overrides(&map).unwrap();
        let cfg = Config::from_layers(None, Some(&text), &[]).unwrap();
        proptest::prop_assert_eq!(cfg.get(LLM_MODEL), stored.as_str(), "{}", text);
    }
}
