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
    // An unknown key is a warning with a "did you mean", not an error (a typo stops nothing).
    let cfg = Config::from_layers(Some("[llm]\nmodle = \"x\""), None, &[]).unwrap();
    let msg = cfg.warnings.join("\n");
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
fn overrides_are_written_as_toml_sections() {
    let mut table = toml::Table::new();
    put(&mut table, chela_core::config::LLM_MAX_TOKENS, "1000").unwrap();
    put(&mut table, LLM_STREAM, "false").unwrap();
    put(&mut table, chela_core::config::CAPS_HIDDEN, "web,files").unwrap();
    put(&mut table, TIMEZONE, "Europe/Berlin").unwrap();
    put(&mut table, chela_core::config::TELEGRAM_TOKEN, "123:abc").unwrap();
    let text = render_overrides(&table).unwrap();
    assert!(text.contains("[channels.telegram]\ntoken = \"123:abc\""), "{text}");
    assert!(text.contains("max_tokens = \"1000\"\n") && text.contains("stream = \"false\"\n"), "{text}");
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
        let mut table = toml::Table::new();
        put(&mut table, LLM_MODEL, &stored).unwrap();
        let text = render_overrides(&table).unwrap();
        let cfg = Config::from_layers(None, Some(&text), &[]).unwrap();
        proptest::prop_assert_eq!(cfg.get(LLM_MODEL), stored.as_str(), "{}", text);
    }
}

const TYPED: &str = r#"
[channels.telegram]
token = "123456:telegram-secret-token"
allow_from = ["111", "alice_b"]

[mcp.servers.github]
command = "github-mcp-server"
args = ["stdio", "--read-only"]
env = { GITHUB_TOKEN = "ghp_mcp-env-secret" }

[lua]
enabled = true

[gateway]
listen = "0.0.0.0:8080"
"#;

#[test]
fn typed_sections_are_read_once_with_provenance() {
    let overrides = "[mcp.servers.remote]\nurl = \"https://mcp.example.com/mcp\"\nheaders = { Authorization = \"Bearer hdr-secret\" }\nbearer = \"bearer-secret\"\n";
    let cfg = Config::from_layers(Some(TYPED), Some(overrides), &env(&[("CHELA_GATEWAY__TOKEN", "gw-secret-1234567")]))
        .unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    let s = cfg.settings();
    assert_eq!(s.channels.telegram.token, "123456:telegram-secret-token");
    assert_eq!(s.channels.telegram.allow_from, ["111", "alice_b"]);
    assert!(s.channels.feishu.app_id.is_empty());
    let gh = &s.mcp.servers["github"];
    assert_eq!((gh.command.as_str(), gh.args.len(), gh.enabled), ("github-mcp-server", 2, true));
    assert_eq!(gh.env["GITHUB_TOKEN"], "ghp_mcp-env-secret");
    assert_eq!(s.mcp.servers["remote"].headers["Authorization"], "Bearer hdr-secret");
    assert_eq!(s.mcp.servers["remote"].bearer, "bearer-secret");
    assert!(s.lua.enabled);
    assert_eq!(s.lua.timeout_ms, 5000, "defaults come from the key table");
    assert_eq!(
        (s.gateway.addr(), s.gateway.listen.as_str(), s.gateway.token.as_str()),
        (std::net::SocketAddr::from(([0, 0, 0, 0], 8080)), "0.0.0.0:8080", "gw-secret-1234567")
    );
    assert_eq!(cfg.layer_of("channels.telegram.token"), Layer::File);
    assert_eq!(cfg.layer_of("gateway.token"), Layer::Env("CHELA_GATEWAY__TOKEN".into()));
    assert_eq!(cfg.layer_of("mcp.servers.github.env.GITHUB_TOKEN"), Layer::File);
    assert_eq!(cfg.layer_of("mcp.servers.remote.url"), Layer::Runtime);
    assert_eq!(cfg.layer_of("gateway.listen"), Layer::File);
    assert_eq!(cfg.layer_of("lua.timeout_ms"), Layer::Default);
    assert_eq!(cfg.entry(chela_core::config::TELEGRAM_TOKEN).shown(), "1234****en");
    for (path, value, _) in cfg.extra() {
        let shown = shown_extra(path, value);
        assert!(!shown.contains("mcp-env-secret") && !shown.contains("hdr-secret"), "{path} = {shown}");
        assert!(!shown.contains("bearer-secret"), "{path} = {shown}");
    }
    assert!(cfg.extra().iter().any(|(path, _, _)| path.ends_with("remote.bearer")), "the bearer is listed, masked");
}

#[test]
fn unknown_names_anywhere_are_warnings_with_a_suggestion() {
    let file = "timezon = \"UTC\"\n[llm]\nmodle = \"x\"\n[lua]\nenabeld = true\n[channels.telegram]\ntokne = \"t\"\n\
                [mcp.servers.a]\ncommand = \"a\"\ncomand = \"b\"\n[chanels.telegram]\ntoken = \"t\"\n";
    let cfg = Config::from_layers(Some(file), None, &[]).unwrap();
    let all = cfg.warnings.join("\n");
    for want in [
        "unknown setting `llm.modle` is ignored. Did you mean `llm.model`?",
        "unknown setting `lua.enabeld` is ignored. Did you mean `lua.enabled`?",
        "`channels.telegram.tokne` is ignored. Did you mean `channels.telegram.token`?",
        "`mcp.servers.a.comand` is ignored. Did you mean `mcp.servers.a.command`?",
        "`chanels` is ignored. Did you mean `channels`?",
        "`timezon` is ignored. Did you mean `timezone`?",
    ] {
        assert!(all.contains(want), "missing {want:?} in:\n{all}");
    }
    assert!(all.contains("chela.toml"), "{all}");
}

#[test]
fn typed_sections_refuse_what_cannot_work() {
    let err = |file: &str| format!("{:#}", Config::from_layers(Some(file), None, &[]).unwrap_err());
    assert!(err("[mcp.servers.x]\nargs = [\"a\"]\n").contains("needs `command`"));
    assert!(err("[mcp.servers.x]\ncommand = \"a\"\nurl = \"https://x\"\n").contains("both"));
    let e = err("[mcp.servers.x]\nurl = \"https://u:mcp-url-secret@x\"\n");
    assert!(e.contains("headers") && !e.contains("mcp-url-secret"), "{e}");
    assert!(err("[mcp.servers.\"a b\"]\ncommand = \"a\"\n").contains("letters, digits"));
    assert!(err("[gateway]\nlisten = \"127.0.0.1:70000\"\n").contains("gateway.listen"));
    assert!(err("channels = 5\n").contains("must be a table"));
    assert!(err("[channels.telegram.token]\nx = 1\n").contains("holds one value"));
    let e = err("[mcp.servers.x]\ncommand = \"a\"\nargs = \"not a list\"\n");
    assert!(
        e.contains("`mcp.servers.x.args` has the wrong type: expected a sequence") && e.contains("chela.toml"),
        "{e}"
    );
    // A value of the wrong type is never quoted: it may be a secret.
    let e = err("[mcp.servers.x]\nurl = \"https://x\"\nheaders = \"Bearer wrong-shape-secret\"\n");
    assert!(e.contains("mcp.servers.x.headers") && !e.contains("wrong-shape-secret"), "{e}");
    let many: String = (0..=MAX_MCP_SERVERS).map(|i| format!("[mcp.servers.s{i}]\ncommand = \"c\"\n")).collect();
    assert!(err(&many).contains("at most"));
}

#[test]
fn keys_inside_typed_sections_are_set_and_unset_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    // A server added by hand to the overrides file survives `config set` and `unset`.
    std::fs::write(ws.overrides_path(), "[mcp.servers.mine]\ncommand = \"srv\"\n").unwrap();
    set_override(&ws, "channels.telegram.token", "123:abc").unwrap();
    set_override(&ws, "channels.telegram.allow_from", "1, 2").unwrap();
    set_override(&ws, "gateway.listen", "127.0.0.1:9001").unwrap();
    let cfg = Config::load(&ws).unwrap();
    assert_eq!(cfg.settings().channels.telegram.token, "123:abc");
    assert_eq!(cfg.settings().channels.telegram.allow_from, ["1", "2"]);
    assert_eq!(cfg.settings().gateway.addr().port(), 9001);
    assert_eq!(cfg.settings().mcp.servers["mine"].command, "srv");
    assert!(unset_override(&ws, "channels.telegram.token").unwrap());
    assert!(unset_override(&ws, "channels.telegram.allow_from").unwrap());
    let text = std::fs::read_to_string(ws.overrides_path()).unwrap();
    assert!(
        !text.contains("telegram")
            && text.contains("[mcp.servers.mine]")
            && text.contains("listen = \"127.0.0.1:9001\""),
        "{text}"
    );
}

#[test]
fn xiaozhi_and_voice_keys_are_checked_and_secrets_masked() {
    use chela_core::config as keys;
    let cfg = Config::from_layers(None, None, &[]).unwrap();
    assert!(cfg.bool(keys::XIAOZHI_ENABLED));
    assert_eq!(cfg.get(keys::VOICE_TTS_PROVIDER), "openai");
    let cfg =
        Config::from_layers(Some("[xiaozhi]\npublic_url = \"wss://chela.example/xiaozhi/v1/\""), None, &[]).unwrap();
    assert_eq!(cfg.get(keys::XIAOZHI_PUBLIC_URL), "wss://chela.example/xiaozhi/v1/");
    let e = Config::from_layers(Some("[xiaozhi]\npublic_url = \"http://x/\""), None, &[]).unwrap_err();
    assert!(format!("{e:#}").contains("ws://"), "{e:#}");
    let e = Config::from_layers(Some("[voice]\ntts_provider = \"say\""), None, &[]).unwrap_err();
    assert!(format!("{e:#}").contains("openai, espeak"), "{e:#}");
    let text = "[voice]\nasr_api_key = \"sk-asr-0123456789-secret\"\ntts_api_key = \"sk-tts-0123456789-secret\"";
    let cfg = Config::from_layers(Some(text), None, &[]).unwrap();
    for key in [keys::VOICE_ASR_API_KEY, keys::VOICE_TTS_API_KEY] {
        assert!(key.is_secret());
        let shown = cfg.entry(key).shown();
        assert!(!shown.contains("0123456789") && shown.contains("****"), "{shown}");
    }
}

#[test]
fn the_embeddings_key_is_masked_and_a_key_in_its_url_is_refused() {
    use chela_core::config as keys;
    let text = "[memory]\nembeddings_url = \"http://127.0.0.1:11434/v1\"\nembeddings_model = \"nomic-embed-text\"\n\
                embeddings_key = \"sk-emb-0123456789-secret\"";
    let cfg = Config::from_layers(Some(text), None, &[]).unwrap();
    assert_eq!(cfg.get(keys::MEMORY_EMBEDDINGS_MODEL), "nomic-embed-text");
    let shown = cfg.entry(keys::MEMORY_EMBEDDINGS_KEY).shown();
    assert!(!shown.contains("0123456789") && shown.contains("****"), "{shown}");
    let e = check(keys::MEMORY_EMBEDDINGS_URL, "https://me:sk-in-url-99@emb.example/v1").unwrap_err().to_string();
    assert!(!e.contains("sk-in-url-99") && e.contains("memory.embeddings_key"), "{e}");
}

#[test]
fn urls_are_checked_by_the_clients_parser_and_the_error_names_the_setting() {
    for (bad, why) in [
        ("http://127.0.0.1:", "is not a valid port"),
        ("http://localhost:99999/v1", "`99999` is not a valid port"),
        ("http://localhost:0/v1", "`0` is not a valid port"),
        ("http://[::1/v1", "missing `]`"),
        ("http://example.com/a b", "URL with a host"),
    ] {
        let e = check(chela_core::config::LLM_BASE_URL, bad).unwrap_err().to_string();
        assert!(e.contains("`llm.base_url`") && e.contains(why), "{bad}: {e}");
        // Wherever the value comes from, the same parser refuses it.
        let file = format!("[llm]\nbase_url = \"{bad}\"\n");
        let e = Config::from_layers(Some(&file), None, &[]).unwrap_err();
        assert!(format!("{e:#}").contains("llm.base_url"), "{e:#}");
        let e = Config::from_layers(None, None, &env(&[("CHELA_SEARCH__BRAVE_URL", bad)])).unwrap_err();
        assert!(format!("{e:#}").contains("search.brave_url"), "{e:#}");
    }
    for good in ["http://127.0.0.1:8080/v1", "https://api.openai.com/v1", "http://[::1]:3000", ""] {
        check(chela_core::config::LLM_BASE_URL, good).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
}

#[test]
fn a_toml_syntax_error_shows_the_line_and_a_caret_and_masks_what_may_be_secret() {
    let e = Config::from_layers(Some("[llm]\nprovider \"openai\"\n"), None, &[]).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("line 2, column 10"), "{msg}");
    assert!(msg.contains("  2 | provider \"openai\"\n    |          ^"), "{msg}");

    // A credential's value is starred, char for char, so the caret still lines up.
    let e = Config::from_layers(Some("[llm]\napi_key = sk-secret-1 x\n"), None, &[]).unwrap_err();
    let msg = format!("{e:#}");
    assert!(!msg.contains("sk-secret-1"), "{msg}");
    assert!(msg.contains("  2 | api_key = *********** *"), "{msg}");
    // A line that is no `key = value` could be a pasted key: starred too.
    let e = Config::from_layers(Some("[llm]\nsk-pasted-secret\n"), None, &[]).unwrap_err();
    assert!(!format!("{e:#}").contains("sk-pasted-secret"), "{e:#}");
    // Unknown names (typed sections, typos) are starred as well.
    let e = Config::from_layers(Some("[channels.telegram]\ntokn = 12:ab\n"), None, &[]).unwrap_err();
    assert!(!format!("{e:#}").contains("12:ab"), "{e:#}");
    // A long line is shown around the spot, the caret under it.
    let long = format!("[llm]\nmodel = \"{}\" junk\n", "m".repeat(300));
    let msg = format!("{:#}", Config::from_layers(Some(&long), None, &[]).unwrap_err());
    let lines: Vec<&str> = msg.lines().collect();
    let (shown, caret) = (lines[lines.len() - 2], lines[lines.len() - 1]);
    assert!(shown.chars().count() < 120, "{shown}");
    let at = caret.chars().position(|c| c == '^').unwrap();
    assert_eq!(shown.chars().nth(at), Some('j'), "{shown}\n{caret}");
}

#[test]
fn a_price_table_is_read_under_llm_and_checked() {
    let toml = "[llm]\nmodel = \"my-model\"\n\n[llm.prices.\"my-model\"]\ninput = 1\noutput = 2.5\ncache_read = 0.1\n\n\
                [llm.prices.\"gpt-4.1\"]\ninput = 2\noutput = 8\n";
    let cfg = Config::from_layers(Some(toml), None, &[]).unwrap();
    assert_eq!(cfg.get(LLM_MODEL), "my-model", "the flat keys of [llm] still read");
    let prices = &cfg.settings().llm.prices;
    assert_eq!(prices["my-model"].input, Some(1.0));
    assert_eq!(prices["my-model"].output, Some(2.5));
    assert_eq!(prices["my-model"].cache_read, Some(0.1));
    assert_eq!(prices["gpt-4.1"].cache_write, None, "a dotted model name stays one name");
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(cfg.layer_of("llm.prices.my-model.input"), Layer::File);
    // A typo is a warning; a missing or negative price an error naming the model.
    let typo = Config::from_layers(Some("[llm.prices.m]\ninput = 1\noutput = 1\ncahce_read = 1\n"), None, &[]).unwrap();
    assert!(typo.warnings.iter().any(|w| w.contains("llm.prices.m.cahce_read")), "{:?}", typo.warnings);
    let e = Config::from_layers(Some("[llm.prices.m]\ninput = 1\n"), None, &[]).unwrap_err();
    assert!(format!("{e:#}").contains("llm.prices.\"m\" needs `input` and `output`"), "{e:#}");
    let e = Config::from_layers(Some("[llm.prices.m]\ninput = -1\noutput = 1\n"), None, &[]).unwrap_err();
    assert!(format!("{e:#}").contains("from 0 to 1000000"), "{e:#}");
    let e = Config::from_layers(Some("[llm.prices.m]\ninput = \"cheap\"\noutput = 1\n"), None, &[]).unwrap_err();
    assert!(format!("{e:#}").contains("llm.prices"), "{e:#}");
    let many: String = (0..=MAX_PRICES).map(|i| format!("[llm.prices.m{i}]\ninput = 1\noutput = 1\n")).collect();
    assert!(Config::from_layers(Some(&many), None, &[]).is_err());
}
