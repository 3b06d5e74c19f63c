//! `GET /api/usage`, what the console's Usage view shows: tokens in, read from the cache,
//! written to it and out, with the estimated cost, for today and the last seven days, per
//! model and per chat, and where each model's price comes from.

use chela_runtime::usage::{
    self, Filter, price_overrides, price_source, today_start, totals, totals_by_chat, totals_json,
};
use serde_json::{Value, json};

use super::ApiError;
use crate::daemon::Daemon;

/// Most chats listed per period, the busiest first; the others are summed in one line.
const MAX_CHATS: usize = 20;
/// "This week": today and the six days before it.
const WEEK_DAYS: u64 = 7;

/// Today's total and everything the log keeps per model (`chela usage --json`'s shape, as
/// before), and the console's periods with their chats and the prices used.
pub(super) fn usage_view(d: &Daemon) -> Result<Value, ApiError> {
    let cfg = d.config();
    let tz = crate::localtime::zone(cfg.get(chela_core::config::TIMEZONE));
    let (records, skipped) =
        usage::read(d.workspace()).map_err(|e| ApiError::internal("the usage log cannot be read", e))?;
    let prices = price_overrides(&cfg);
    let today = today_start(&tz, d.clock().unix_secs());
    let period = |id: &str, label: &str, since: Option<u64>| {
        let filter = Filter { session: None, since };
        let (total, by_model) = totals(&records, &filter, &prices);
        let (chats, rest) = totals_by_chat(&records, &filter, &prices, MAX_CHATS);
        let with = |key: &str, name: &str, t: &chela_core::usage::Totals| {
            let mut v = totals_json(t);
            v[key] = json!(name);
            v
        };
        json!({
            "id": id,
            "label": label,
            "since": since,
            "total": totals_json(&total),
            "models": by_model.iter().map(|(m, t)| with("model", m, t)).collect::<Vec<_>>(),
            "chats": chats.iter().map(|(c, t)| with("chat", c, t)).collect::<Vec<_>>(),
            "other_chats": rest.as_ref().map(totals_json),
        })
    };
    let periods = [
        period("today", "Today", Some(today)),
        period("week", "Last 7 days", Some(today.saturating_sub((WEEK_DAYS - 1) * 86_400))),
    ];
    let (all, by_model) = totals(&records, &Filter::default(), &prices);
    let report = usage::Report { all, by_model, skipped };
    let mut models: Vec<&str> = records.iter().map(|r| r.model.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    let prices: Vec<Value> = models
        .iter()
        .map(|m| match price_source(m, &prices) {
            Some((source, prefix, p)) => json!({
                "model": m, "source": source, "prefix": prefix, "input": p.input, "output": p.output,
                "cache_read": p.cache_read, "cache_write": p.cache_write,
            }),
            None => json!({"model": m, "source": null}),
        })
        .collect();
    Ok(json!({
        "today": periods[0]["total"].clone(),
        "all": report.json(),
        "zone": tz.name(),
        "periods": periods,
        "prices": prices,
    }))
}
