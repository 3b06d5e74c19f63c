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
