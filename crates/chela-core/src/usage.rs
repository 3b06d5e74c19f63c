//! What a turn cost: the usage record every turn leaves, the price table and the sums.
//!
//! A record is one JSON line (`state/usage.jsonl` on the host): the time, the conversation,
//! the model and the four token counts of [`Usage`]. Prices are US dollars per million
//! tokens, with the provider's own cache prices (Anthropic bills a cache write at 1.25× and a
//! read at 0.1× of the input price; OpenAI a cached input at a discount and no write). A model
//! is priced by the longest entry its name starts with, the person's `[llm.prices]` first.
//! The cost is an estimate: the provider's invoice is what counts.

use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::chat::Usage;
use serde::{Deserialize, Serialize};

/// One turn's usage, as a line of the usage log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Unix seconds when the turn ended.
    pub ts: u64,
    pub channel: String,
    pub chat: String,
    pub model: String,
    /// Input tokens at the full price.
    #[serde(rename = "in", default)]
    pub input: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
    #[serde(rename = "out", default)]
    pub output: u64,
}

/// Longest text kept in a record's names: they come from channels (chat ids) and settings.
pub const MAX_NAME: usize = 200;

impl Record {
    pub fn new(ts: u64, channel: &str, chat: &str, model: &str, u: &Usage) -> Record {
        let cut = |s: &str| String::from(crate::text::prefix(s, MAX_NAME));
        Record {
            ts,
            channel: cut(channel),
            chat: cut(chat),
            model: cut(model),
            input: u.input_tokens,
            cache_read: u.cache_read_tokens,
            cache_write: u.cache_write_tokens,
            output: u.output_tokens,
        }
    }

    pub fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input,
            output_tokens: self.output,
            cache_read_tokens: self.cache_read,
            cache_write_tokens: self.cache_write,
        }
    }

    /// `channel:chat`, how a conversation is named to `chela usage --session`.
    pub fn session(&self) -> String {
        alloc::format!("{}:{}", self.channel, self.chat)
    }

    /// Whether `session` names this record's conversation: `channel:chat` or the chat id.
    pub fn in_session(&self, session: &str) -> bool {
        match session.split_once(':') {
            Some((channel, chat)) => channel == self.channel && chat == self.chat,
            None => session == self.chat,
        }
    }

    /// The JSON line, with its newline.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Prices in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// A token read from the prompt cache.
    pub cache_read: f64,
    /// A token written to the prompt cache.
    pub cache_write: f64,
}

impl Price {
    /// Anthropic's scheme: writes at 1.25× the input price, reads at 0.1×.
    const fn anthropic(input: f64, output: f64) -> Price {
        Price { input, output, cache_read: input / 10.0, cache_write: input * 1.25 }
    }

    /// OpenAI's scheme: a cached input at its own price, no write charge.
    const fn openai(input: f64, cached: f64, output: f64) -> Price {
        Price { input, output, cache_read: cached, cache_write: input }
    }

    /// The estimated cost of `u` in US dollars.
    pub fn cost(&self, u: &Usage) -> f64 {
        #[allow(clippy::cast_precision_loss)] // token counts stay far below 2^52
        let m = |n: u64, price: f64| n as f64 * price / 1_000_000.0;
        m(u.input_tokens, self.input)
            + m(u.cache_read_tokens, self.cache_read)
            + m(u.cache_write_tokens, self.cache_write)
            + m(u.output_tokens, self.output)
    }
}

/// The built-in prices (list prices when this table was written), by model-name prefix.
pub const DEFAULT_PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-5", Price::anthropic(5.0, 25.0)),
    ("claude-opus-4", Price::anthropic(15.0, 75.0)),
    ("claude-sonnet-4", Price::anthropic(3.0, 15.0)),
    ("claude-3-7-sonnet", Price::anthropic(3.0, 15.0)),
    ("claude-haiku-4-5", Price::anthropic(1.0, 5.0)),
    ("claude-3-5-haiku", Price::anthropic(0.8, 4.0)),
    ("gpt-5-mini", Price::openai(0.25, 0.025, 2.0)),
    ("gpt-5-nano", Price::openai(0.05, 0.005, 0.4)),
    ("gpt-5", Price::openai(1.25, 0.125, 10.0)),
    ("gpt-4.1-mini", Price::openai(0.4, 0.1, 1.6)),
    ("gpt-4.1-nano", Price::openai(0.1, 0.025, 0.4)),
    ("gpt-4.1", Price::openai(2.0, 0.5, 8.0)),
    ("gpt-4o-mini", Price::openai(0.15, 0.075, 0.6)),
    ("gpt-4o", Price::openai(2.5, 1.25, 10.0)),
    ("deepseek-chat", Price::openai(0.28, 0.028, 0.42)),
    ("deepseek-reasoner", Price::openai(0.28, 0.028, 0.42)),
];

/// The price of `model`: the longest prefix in `overrides` (the person's), else in
/// [`DEFAULT_PRICES`]. `None`: nothing known, so no cost is shown.
pub fn price_for(model: &str, overrides: &[(String, Price)]) -> Option<Price> {
    let best = |table: &mut dyn Iterator<Item = (&str, Price)>| {
        table.filter(|(prefix, _)| model.starts_with(prefix)).max_by_key(|(prefix, _)| prefix.len()).map(|(_, p)| p)
    };
    best(&mut overrides.iter().map(|(m, p)| (m.as_str(), *p)))
        .or_else(|| best(&mut DEFAULT_PRICES.iter().map(|(m, p)| (*m, *p))))
}

/// Sums over records.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    pub turns: u64,
    pub usage: Usage,
    /// Estimated US dollars for the priced records.
    pub cost: f64,
    /// Records whose model has no price: their tokens count, their cost does not.
    pub unpriced: u64,
}

impl Totals {
    pub fn add(&mut self, r: &Record, overrides: &[(String, Price)]) {
        let u = r.usage();
        self.turns += 1;
        self.usage.add(&u);
        match price_for(&r.model, overrides) {
            Some(p) => self.cost += p.cost(&u),
            None => self.unpriced += 1,
        }
    }

    /// The share of input tokens read from the cache, in percent.
    pub fn cached_percent(&self) -> u64 {
        let all = self.usage.prompt_tokens();
        self.usage.cache_read_tokens.saturating_mul(100).checked_div(all).unwrap_or(0)
    }
}

/// Parses the lines of a usage log, skipping what does not parse (a torn last line, a hand
/// edit). Returns the records and how many lines were skipped.
pub fn parse(text: &str) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut skipped = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Record>(line) {
            Ok(r) => records.push(r),
            Err(_) => skipped += 1,
        }
    }
    (records, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::borrow::ToOwned;

    fn usage(input: u64, read: u64, write: u64, output: u64) -> Usage {
        Usage { input_tokens: input, output_tokens: output, cache_read_tokens: read, cache_write_tokens: write }
    }

    #[test]
    fn cache_reads_and_writes_are_priced_as_the_provider_bills_them() {
        let sonnet = price_for("claude-sonnet-4-5-20250929", &[]).unwrap();
        // 1M of each: $3 input, $0.30 read, $3.75 write, $15 output.
        let c = sonnet.cost(&usage(1_000_000, 1_000_000, 1_000_000, 1_000_000));
        assert!((c - (3.0 + 0.3 + 3.75 + 15.0)).abs() < 1e-9, "{c}");
        let mini = price_for("gpt-4o-mini-2024-07-18", &[]).unwrap();
        assert!((mini.cost(&usage(0, 2_000_000, 0, 0)) - 0.15).abs() < 1e-9);
        // The longest prefix wins: gpt-4o-mini is not priced as gpt-4o.
        assert_eq!(price_for("gpt-4o-2024-08-06", &[]).unwrap().input, 2.5);
        assert_eq!(price_for("claude-opus-4-5", &[]).unwrap().input, 5.0);
        assert_eq!(price_for("claude-opus-4-1", &[]).unwrap().input, 15.0);
        assert_eq!(price_for("llama3.2", &[]), None);
        let mine = [("claude-sonnet".to_owned(), Price { input: 1.0, output: 2.0, cache_read: 0.5, cache_write: 1.0 })];
        assert_eq!(price_for("claude-sonnet-4-5", &mine).unwrap().input, 1.0, "the person's table first");
    }

    #[test]
    fn records_round_trip_and_a_torn_or_foreign_line_is_skipped() {
        let r = Record::new(1_800_000_000, "telegram", "42", "claude-haiku-4-5", &usage(10, 2000, 30, 400));
        let line = r.to_line();
        assert_eq!(
            line,
            "{\"ts\":1800000000,\"channel\":\"telegram\",\"chat\":\"42\",\"model\":\"claude-haiku-4-5\",\"in\":10,\"cache_read\":2000,\"cache_write\":30,\"out\":400}\n"
        );
        let text = alloc::format!("{line}not json\n{{\"ts\":1}}\n{}", &line[..20]);
        let (records, skipped) = parse(&text);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0], r);
        assert_eq!(skipped, 3, "the foreign line, the one without names and the torn one");
        assert!(r.in_session("telegram:42") && r.in_session("42") && !r.in_session("cli:42"));
        let long = Record::new(0, &"c".repeat(1000), "x", "m", &Usage::default());
        assert_eq!(long.channel.len(), MAX_NAME);
    }

    #[test]
    fn totals_sum_tokens_and_leave_unpriced_models_out_of_the_cost() {
        let mut t = Totals::default();
        t.add(&Record::new(0, "cli", "local", "claude-haiku-4-5", &usage(100_000, 900_000, 0, 10_000)), &[]);
        t.add(&Record::new(0, "cli", "local", "my-local-model", &usage(5, 0, 0, 5)), &[]);
        assert_eq!(t.turns, 2);
        assert_eq!(t.unpriced, 1);
        assert_eq!(t.usage.prompt_tokens(), 1_000_005);
        assert!((t.cost - (0.1 + 0.09 + 0.05)).abs() < 1e-9, "{}", t.cost);
        assert_eq!(t.cached_percent(), 89);
    }
}
