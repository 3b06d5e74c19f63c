//! `chela doctor`: what is wrong, and the command that fixes it.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use chela_testkit::{FakeLlm, Options};

use crate::{KEY, Provider, Ws};

fn fake_expecting(key: &str) -> FakeLlm {
    FakeLlm::start_with(Options { expected_key: Some(key.into()), ..Options::default() })
}

#[test]
fn a_good_setup_is_ready() {
    for provider in Provider::BOTH {
        let llm = fake_expecting(KEY);
        let ws = Ws::for_llm(provider, &llm, "");
        let out = ws.run(&["doctor"]);
        out.expect_ok().stdout_has("reachable, key accepted").stdout_has("0 warning(s); Chela is ready.");
        assert!(!out.stdout.contains("FAIL") && !out.stdout.contains(KEY), "{provider:?}:\n{}", out.stdout);
        assert_eq!(llm.requests().len(), 1, "{provider:?}: one probe");
        let probe = llm.requests()[0].json.clone().unwrap();
        assert_eq!(probe["max_tokens"], 1, "{provider:?}: the probe is cheap: {probe}");
    }
}

#[test]
fn a_rejected_key_fails_with_the_fix() {
    for provider in Provider::BOTH {
        let llm = fake_expecting("some-other-key");
        let ws = Ws::for_llm(provider, &llm, "");
        let out = ws.run(&["doctor"]);
        out.expect_code(1);
        let fail = out.stdout.lines().find(|l| l.starts_with("FAIL")).unwrap_or_else(|| panic!("{}", out.stdout));
        assert!(fail.contains("rejected the API key"), "{fail}");
        out.stdout_has("fix: chela config set llm.api_key").stdout_has("1 problem(s)");
        assert_eq!(llm.requests().len(), 1, "{provider:?}: the probe is not retried");
    }
}

#[test]
fn a_config_file_others_can_read_is_a_warning() {
    let llm = fake_expecting(KEY);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let config = ws.path().join("chela.toml");
    fs::set_permissions(&config, fs::Permissions::from_mode(0o644)).unwrap();
    let out = ws.run(&["doctor"]);
    out.expect_ok();
    let warn = out.stdout.lines().find(|l| l.starts_with("warn") && l.contains("chela.toml"));
    let warn = warn.unwrap_or_else(|| panic!("no warning:\n{}", out.stdout));
    assert!(warn.contains("mode 644"), "{warn}");
    out.stdout_has(&format!("fix: chmod 600 {}", config.display())).stdout_has("1 warning(s)");
}

#[test]
fn a_broken_config_and_an_unreachable_provider_fail() {
    let ws = Ws::empty();
    ws.write_config("[llm\n");
    ws.run(&["doctor"]).expect_code(1).stdout_has("FAIL  configuration").stdout_has("chela.toml");

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    ws.write_config(&format!("[llm]\nbase_url = \"http://127.0.0.1:{port}\"\n"));
    let out = ws.run(&["doctor"]);
    out.expect_code(1).stdout_has("Could not reach").stdout_has("fix: check `chela config show`");
}

#[test]
fn a_hand_broken_cron_json_is_reported_by_line() {
    let llm = fake_expecting(KEY);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let cron = ws.path().join("cron.json");
    let emit = r#""action": {"type": "emit", "event": "x"}"#;
    fs::write(
        &cron,
        format!(
            "{{\"version\": 1, \"jobs\": [\n  {{\"id\": \"good\", \"trigger\": {{\"type\": \"interval\", \"every_s\": 60}}, {emit}}},\n  {{\"id\": \"bad\", \"trigger\": {{\"type\": \"cron\", \"expr\": \"0 25 * * *\"}}, {emit}}}\n]}}\n"
        ),
    )
    .unwrap();
    let before = fs::read(&cron).unwrap();
    let out = ws.run(&["doctor"]);
    out.expect_ok()
        .stdout_has("warn  cron.json line 3: job 2 (\"bad\"): trigger.expr: hour field: 25 is out of range 0-23")
        .stdout_has("(the other jobs keep running)")
        .stdout_has("1 warning(s)");
    assert_eq!(fs::read(&cron).unwrap(), before, "doctor only reads the file");

    fs::write(&cron, "{\"jobs\": [\n  {\"id\": \"cut off").unwrap();
    let out = ws.run(&["doctor"]);
    out.expect_code(1).stdout_has("FAIL  cron.json line 2").stdout_has("Chela will not overwrite it");
}
