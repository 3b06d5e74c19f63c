//! `chela config`: layers, masking, checks, and errors that name what to fix.

use std::fs;

use crate::Ws;

/// The line `config show` prints for `key`.
#[track_caller]
fn show_line(stdout: &str, key: &str) -> String {
    let line = stdout.lines().find(|l| l.split_whitespace().next() == Some(key));
    line.unwrap_or_else(|| panic!("no line for {key}:\n{stdout}")).to_owned()
}

/// The value column of `key`'s line.
#[track_caller]
fn show_value(stdout: &str, key: &str) -> String {
    show_line(stdout, key).split_whitespace().nth(1).unwrap_or_default().to_owned()
}

#[test]
fn set_show_unset_and_reset_runtime_overrides() {
    let secret = "sk-ant-api03-secretvalue";
    let ws = Ws::empty();
    let out = ws.run(&["config", "set", "llm.api_key", secret]);
    out.expect_ok();
    assert!(!out.stdout.contains("secretvalue"), "config set echoed the secret: {}", out.stdout);
    assert!(fs::read_to_string(ws.path().join("overrides.toml")).unwrap().contains(secret));
    ws.run(&["config", "set", "llm.max_tokens", "1000"]).expect_ok();

    let out = ws.run(&["config", "show"]);
    out.expect_ok();
    assert!(!out.stdout.contains("secretvalue"), "config show printed the secret:\n{}", out.stdout);
    let key = show_line(&out.stdout, "llm.api_key");
    assert!(key.ends_with("# runtime (overrides.toml)"), "{key}");
    assert!(!key.contains(&format!("{secret:?}")), "{key}");
    // Numbers and booleans are shown bare, as TOML writes them.
    assert_eq!(show_value(&out.stdout, "llm.max_tokens"), "1000");
    assert_eq!(show_value(&out.stdout, "llm.stream"), "true");
    assert!(show_line(&out.stdout, "llm.model").ends_with("# default"));
    // Empty provider settings show what Chela uses: the provider's defaults.
    assert_eq!(show_value(&out.stdout, "llm.model"), "\"claude-sonnet-4-5\"");
    assert_eq!(show_value(&out.stdout, "llm.base_url"), "\"https://api.anthropic.com\"");
    out.stdout_has(&format!("# workspace: {}", ws.path().display()));
    let get = ws.run(&["config", "get", "llm.api_key"]);
    get.expect_ok();
    assert!(!get.stdout.contains("secretvalue") && !get.stdout.trim().is_empty(), "{}", get.stdout);

    ws.run(&["config", "unset", "llm.api_key"]).expect_ok().stdout_has("runtime override removed");
    let out = ws.run(&["config", "show"]);
    assert!(show_line(&out.stdout, "llm.api_key").ends_with("# default"));
    assert!(show_line(&out.stdout, "llm.max_tokens").ends_with("# runtime (overrides.toml)"));
    ws.run(&["config", "unset", "llm.api_key"]).expect_ok().stdout_has("had no runtime override");

    ws.run(&["config", "reset"]).expect_ok().stdout_has("runtime overrides cleared");
    assert!(!ws.path().join("overrides.toml").exists());
    let out = ws.run(&["config", "show"]);
    assert_eq!(show_value(&out.stdout, "llm.max_tokens"), "4096", "{}", out.stdout);
    ws.run(&["config", "reset"]).expect_ok().stdout_has("there were no runtime overrides");
}

#[test]
fn each_layer_is_named_and_the_environment_wins() {
    let mut ws = Ws::empty();
    ws.write_config("[llm]\nmodel = \"from-file\"\nmax_tokens = 2000\n");
    ws.run(&["config", "set", "llm.max_tokens", "3000"]).expect_ok();
    ws.set_env("CHELA_LLM__MODEL", "x");
    ws.set_env("OPENAI_API_KEY", "sk-proj-fromtheenvironment");
    ws.run(&["config", "set", "llm.provider", "openai"]).expect_ok();
    let out = ws.run(&["config", "show"]);
    out.expect_ok();
    let model = show_line(&out.stdout, "llm.model");
    assert!(model.contains("\"x\"") && model.ends_with("# env CHELA_LLM__MODEL"), "{model}");
    assert_eq!(show_value(&out.stdout, "llm.max_tokens"), "3000");
    let key = show_line(&out.stdout, "llm.api_key");
    assert!(key.ends_with("# env OPENAI_API_KEY"), "{key}");
    assert!(!out.stdout.contains("fromtheenvironment"), "{}", out.stdout);
    assert_eq!(ws.run(&["config", "get", "llm.model"]).stdout, "x\n");

    // Setting a key the environment overrides says so.
    ws.run(&["config", "set", "llm.model", "y"]).expect_ok().stderr_has("CHELA_LLM__MODEL");
}

#[test]
fn bad_keys_and_values_are_refused_with_what_would_do() {
    let ws = Ws::empty();
    ws.run(&["config", "set", "llm.provider", "gemini"]).expect_code(1).stderr_has("anthropic, openai");
    ws.run(&["config", "set", "llm.modle", "x"]).expect_code(1).stderr_has("Did you mean `llm.model`?");
    ws.run(&["config", "set", "llm.max_tokens", "lots"]).expect_code(1).stderr_has("llm.max_tokens");
    ws.run(&["config", "set", "timezone", "Mars/Olympus"]).expect_code(1).stderr_has("IANA time zone");
    assert!(!ws.path().join("overrides.toml").exists(), "a refused value must not be stored");
}

#[test]
fn a_broken_config_file_is_named() {
    let ws = Ws::empty();
    ws.write_config("[llm\nprovider = \"openai\"\n");
    let out = ws.run(&["config", "show"]);
    out.expect_code(1).stderr_has("chela.toml");
    assert_eq!(out.stdout, "");
    // The chat refuses too, rather than running with a half-read configuration.
    ws.chat("hi", &[]).expect_code(1).stderr_has("chela.toml");

    ws.write_config("[llm]\nmax_tokens = \"lots\"\n");
    ws.run(&["config", "show"]).expect_code(1).stderr_has("chela.toml").stderr_has("llm.max_tokens");
    // An unknown key is a warning naming the file and the key meant, not a failure.
    ws.write_config("[llm]\nmodle = \"x\"\n");
    ws.run(&["config", "show"]).expect_ok().stderr_has("chela.toml").stderr_has("Did you mean `llm.model`?");
}

// The restart notes (only when a daemon serves the workspace) are tested in newuser.rs.
