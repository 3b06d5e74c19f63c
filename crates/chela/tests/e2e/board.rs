//! The board end to end: the real binary against the fake LLM on the built-in simulated board.
//! The `board` tools are absent until `board_hardware_info` is activated; then a sensor is read
//! (values with units), the LED strip is set, and a pin outside the allowlist is refused.
//! `chela board check` reports a bad board.json with its line.

use chela_testkit::{FakeLlm, Step};
use serde_json::json;

use crate::{Provider, Ws, body, tool_names};

#[test]
fn activate_read_a_sensor_set_the_led_and_the_allowlist_refuses_a_pin() {
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![
            Step::tool_call("skill_activate", json!({"name": "board_hardware_info"})),
            Step::tool_call("sensor_read", json!({"device": "climate"})),
            Step::tool_call("led_set", json!({"device": "strip", "color": "blue", "brightness": 100})),
            Step::tool_call("gpio_write", json!({"pin": 13, "value": 1})),
            Step::text("It is warm, the strip is blue, and pin 13 is not mine to touch."),
        ]);
        let ws = Ws::for_llm(provider, &llm, "");
        ws.chat("How warm is it? Light the strip blue and switch pin 13 on.", &[])
            .expect_ok()
            .stdout_has("strip is blue");
        let offered = |i: usize| tool_names(provider, &body(&llm, i));
        assert!(!offered(0).iter().any(|t| t == "sensor_read"), "{provider:?}: offered before activation");
        assert!(offered(1).iter().any(|t| t == "sensor_read"), "{provider:?}: not offered after activation");
        let after_read = body(&llm, 2).to_string();
        assert!(after_read.contains("temperature") && after_read.contains("%RH"), "{provider:?}: {after_read:.600}");
        let after_led = body(&llm, 3).to_string();
        assert!(after_led.contains("#0000ff"), "{provider:?}: {after_led:.600}");
        let after_pin = body(&llm, 4).to_string();
        assert!(after_pin.contains("GPIO13 is not in board.json's gpio allowlist"), "{provider:?}: {after_pin:.600}");
    }
}

#[test]
fn board_check_names_the_line_of_each_problem() {
    let ws = Ws::empty();
    ws.run(&["board", "check"]).expect_code(1).stderr_has("does not exist");
    std::fs::create_dir_all(ws.path()).unwrap();
    let file = ws.path().join("board.json");
    std::fs::write(
        &file,
        "{\n  \"name\": \"desk\",\n  \"chip\": \"esp32c3\",\n  \"gpio\": [\n    { \"pin\": 14, \"direction\": \"output\" }\n  ]\n}\n",
    )
    .unwrap();
    ws.run(&["board", "check"]).expect_code(1).stderr_has("board.json:line 5: gpio allowlist: GPIO14 is reserved");
    std::fs::write(&file, "{\n  \"name\": \"desk\",\n  \"chip\": \"simulated\"\n}\n").unwrap();
    ws.run(&["board", "check"]).expect_ok().stdout_has("ok: \"desk\" (simulated)");
}

/// The poller in the real `chela run`: every `board.poll_secs` the simulated board's sensors are
/// read and raised as `sensor.reading` events; a rule with a humidity threshold tells the
/// Telegram chat without the model, a rule whose threshold is not crossed stays quiet, and a
/// sensor that does not answer is logged once, not once per poll.
#[test]
fn a_humidity_rule_tells_telegram_from_the_poller_and_a_faulty_sensor_is_logged_once() {
    use chela_testkit::telegram::FakeTelegram;

    use crate::telegram::{OWNER, TOKEN};

    let llm = FakeLlm::start(vec![Step::text("the model should not be asked")]);
    let tg = FakeTelegram::start(TOKEN);
    let mut ws = Ws::for_llm(
        Provider::Anthropic,
        &llm,
        &format!(
            "[board]\npoll_secs = 1\n\n[channels.telegram]\ntoken = \"{TOKEN}\"\napi_base = \"{}\"\nallow_from = [\"{OWNER}\"]\n",
            tg.base_url()
        ),
    );
    ws.set_env("CHELA_LOG", "info");
    // The simulated room is damp (its humidity swings 8 %RH around 80), and the SGP30 is unplugged.
    let board = include_str!("../../../chela-board/boards/simulated.json");
    let board = board.replacen(
        "\"seed\": 42,",
        "\"seed\": 42,\n  \"simulate\": { \"humidity\": 80, \"faults\": { \"air\": \"nack\" } },",
        1,
    );
    std::fs::write(ws.path().join("board.json"), board).unwrap();
    let rule = |id: &str, above: u32, text: &str| {
        json!({"id": id, "match": {"type": "sensor.reading"},
               "only_if": [{"field": "humidity", "op": "gt", "value": above}],
               "actions": [{"type": "send", "channel": "telegram", "chat_id": OWNER.to_string(), "text": text}]})
    };
    let rules = json!({"rules": [
        rule("damp", 70, "Humidity in {{event.device}} is {{event.humidity}} %"),
        rule("flood", 99, "flooded"),
    ]});
    std::fs::write(ws.path().join("rules.json"), rules.to_string()).unwrap();

    let mut child = ws.cmd(&["run"]).spawn().unwrap();
    let stderr = crate::Capture::start(child.stderr.take());
    // Three messages: three polls at least.
    let sent =
        tg.wait_sent(std::time::Duration::from_secs(30), |s| s.iter().filter(|m| m.chat_id == OWNER).count() >= 3);
    let out = crate::telegram::stop(child);
    let log = stderr.finish();
    let texts: Vec<&str> = sent.iter().filter(|m| m.chat_id == OWNER).map(|m| m.text.as_str()).collect();
    assert!(texts.len() >= 3, "{texts:?}\n{log}\n{}", out.stderr);
    for t in &texts {
        let value: f64 = t
            .strip_prefix("Humidity in climate is ")
            .and_then(|r| r.strip_suffix(" %"))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{t:?}"));
        assert!((70.0..=99.0).contains(&value), "{t}");
    }
    assert!(llm.requests().is_empty(), "the model was asked");
    let faults = log.matches("no device answered at I2C address 0x58").count();
    assert_eq!(faults, 1, "the unplugged SGP30 is logged once over {} polls:\n{log}", texts.len());
}
