//! Usage end to end: the real binary's turns are recorded, and `chela usage` and `chela status`
//! show them with the person's price table.

use chela_testkit::{FakeLlm, Step};
use serde_json::Value;

use crate::{Provider, Ws};

#[test]
fn turns_are_recorded_and_chela_usage_sums_them_with_the_price_table() {
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![Step::text("one"), Step::text("two"), Step::text("three")]);
        // The fake answers as model `MODEL`; a price for it makes the cost show.
        let prices = format!("[llm.prices.\"{}\"]\ninput = 1000\noutput = 1000\n", crate::MODEL);
        let ws = Ws::for_llm(provider, &llm, &prices);
        ws.chat("first", &[]).expect_ok();
        ws.chat("second", &[]).expect_ok();
        ws.chat("elsewhere", &["--session", "other"]).expect_ok();
        let out = ws.run(&["usage", "--json"]);
        out.expect_ok();
        let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
        assert_eq!(v["total"]["turns"], 3, "{provider:?}: {v}");
        assert!(v["total"]["input_tokens"].as_u64().unwrap() > 0 && v["total"]["output_tokens"].as_u64().unwrap() > 0);
        assert!(v["total"]["estimated_cost_usd"].as_f64().unwrap() > 0.0, "{v}");
        let one = ws.run(&["usage", "--json", "--session", "cli:other"]);
        let one: Value = serde_json::from_str(&one.expect_ok().stdout).unwrap();
        assert_eq!(one["total"]["turns"], 1, "{one}");
        ws.run(&["usage"]).expect_ok().stdout_has("In all: 3 turns: ");
        ws.run(&["usage", "--since", "2999-01-01"]).expect_ok().stdout_has("In all: 0 turns: ");
        let bad = ws.run(&["usage", "--since", "soon"]);
        assert_ne!(bad.code(), Some(0));
        bad.stderr_has("--since");
    }
}
