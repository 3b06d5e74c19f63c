//! The tool arguments' readers against the serde derives they replaced (kept here only): the
//! same values on generated input, and every refusal of the derive kept.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Debug;

use proptest::prelude::*;
use serde::Deserialize;

use super::Args;
use super::board::{DeviceArgs, LedArgs, Level, PinArgs, WriteArgs};
use super::cron::{AddArgs, RemoveArgs};
use super::memory::{RecallArgs, StoreArgs, Tags};
use super::time::TimeArgs;
use super::web::SearchArgs;

#[derive(Deserialize)]
struct RefTime {
    #[serde(default)]
    timezone: Option<String>,
}

#[derive(Deserialize)]
struct RefSearch {
    query: String,
    #[serde(default)]
    max_results: Option<usize>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RefTags {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct RefStore {
    content: String,
    #[serde(default)]
    tags: Option<RefTags>,
    #[serde(default)]
    source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefDevice {
    device: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefPin {
    pin: u8,
}

/// The old level visitor's rules, through `serde_json::Value`.
struct RefLevel(bool);

impl<'de> Deserialize<'de> for RefLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RefLevel, D::Error> {
        use serde::de::Error;
        let v = serde_json::Value::deserialize(d)?;
        match &v {
            serde_json::Value::Bool(b) => Ok(RefLevel(*b)),
            serde_json::Value::Number(n) if n.as_u64() == Some(1) => Ok(RefLevel(true)),
            serde_json::Value::Number(n) if n.as_u64() == Some(0) => Ok(RefLevel(false)),
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("high") => Ok(RefLevel(true)),
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("low") => Ok(RefLevel(false)),
            _ => Err(D::Error::custom("not a level")),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefWrite {
    pin: u8,
    #[serde(alias = "level")]
    value: RefLevel,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefLed {
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    color: Option<String>,
    #[serde(default)]
    brightness: Option<u8>,
    #[serde(default)]
    pattern: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefAdd {
    #[serde(default)]
    name: String,
    #[serde(default)]
    schedule_type: Option<String>,
    message: String,
    #[serde(default, alias = "every_s")]
    interval_s: Option<i64>,
    #[serde(default, alias = "at")]
    at_epoch: Option<i64>,
    #[serde(default, alias = "in_s")]
    delay_s: Option<i128>,
    #[serde(default, alias = "cron")]
    cron_expr: Option<String>,
    #[serde(default)]
    delete_after_run: Option<bool>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    chat_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefRemove {
    #[serde(alias = "id")]
    job_id: String,
}

fn tags(t: RefTags) -> Tags {
    match t {
        RefTags::One(s) => Tags::One(s),
        RefTags::Many(v) => Tags::Many(v),
    }
}

/// The one refusal the derives do not share: arguments written as an array of their fields.
fn array_as_struct(text: &str) -> bool {
    text.trim_start().starts_with('[')
}

fn agree<T: Args + Debug + PartialEq + serde::de::DeserializeOwned, R: serde::de::DeserializeOwned>(
    text: &str,
    from: impl Fn(R) -> T,
) -> Result<(), TestCaseError> {
    let ours = chela_proto::json::read::read_all(text.as_bytes(), T::read);
    let theirs = serde_json::from_str::<R>(text).map(&from);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", text),
        (Err(_), Err(_)) => {}
        (Err(_), Ok(_)) if array_as_struct(text) => {}
        (a, b) => prop_assert!(false, "ours {:?}, serde {:?} for {}", a, b.map(|_| "a value"), text),
    }
    // The host reads them through the serde impl the reader gives them: the same answer.
    let adapter = serde_json::from_str::<T>(text).ok();
    prop_assert_eq!(adapter, chela_proto::json::read::read_all(text.as_bytes(), T::read).ok(), "{}", text);
    Ok(())
}

fn all_agree(text: &str) -> Result<(), TestCaseError> {
    agree(text, |r: RefTime| TimeArgs { timezone: r.timezone })?;
    agree(text, |r: RefSearch| SearchArgs { query: r.query, max_results: r.max_results })?;
    agree(text, |r: RefSearch| RecallArgs { query: r.query, max_results: r.max_results })?;
    agree(text, |r: RefStore| StoreArgs { content: r.content, tags: r.tags.map(tags), source: r.source })?;
    agree(text, |r: RefDevice| DeviceArgs { device: r.device })?;
    agree(text, |r: RefPin| PinArgs { pin: r.pin })?;
    agree(text, |r: RefWrite| WriteArgs { pin: r.pin, value: Level(r.value.0) })?;
    agree(text, |r: RefLed| LedArgs {
        device: r.device,
        color: r.color,
        brightness: r.brightness,
        pattern: r.pattern,
    })?;
    agree(text, |r: RefRemove| RemoveArgs { job_id: r.job_id })?;
    agree(text, |r: RefAdd| AddArgs {
        name: r.name,
        schedule_type: r.schedule_type,
        message: r.message,
        interval_s: r.interval_s,
        at_epoch: r.at_epoch,
        delay_s: r.delay_s,
        cron_expr: r.cron_expr,
        delete_after_run: r.delete_after_run,
        channel: r.channel,
        chat_id: r.chat_id,
    })
}

/// Every key a tool reads (its `FIELDS`, aliases included), and one none reads.
fn keys() -> Vec<&'static str> {
    let mut keys = [
        TimeArgs::FIELDS,
        SearchArgs::FIELDS,
        StoreArgs::FIELDS,
        RecallArgs::FIELDS,
        DeviceArgs::FIELDS,
        PinArgs::FIELDS,
        WriteArgs::FIELDS,
        LedArgs::FIELDS,
        AddArgs::FIELDS,
        RemoveArgs::FIELDS,
    ]
    .concat();
    keys.push("other");
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        (0u64..300).prop_map(|n| n.to_string()),
        Just("-0".to_string()),
        Just("1.0".to_string()),
        Just("\"HIGH\"".to_string()),
        Just("\"low\"".to_string()),
        "[a-z \"\\\\\u{e9}]{0,6}".prop_map(|s| serde_json::Value::String(s).to_string()),
        prop::collection::vec("[a-z,]{0,4}", 0..3).prop_map(|v| serde_json::to_string(&v).unwrap()),
        Just("[\"a\",1]".to_string()),
        Just("{\"a\":[]}".to_string()),
    ]
}

fn object() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::collection::vec((prop::sample::select(keys()), value()), 0..6).prop_map(|m| {
            let body: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        }),
        1 => prop::collection::vec(value(), 0..3).prop_map(|v| format!("[{}]", v.join(","))),
        1 => value(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn arguments_read_as_the_serde_derives_read_them(text in object()) {
        all_agree(&text)?;
    }
}

#[test]
fn the_derives_refusals_stay_refused() {
    for bad in [
        r#"{"message":"m","tz":"Europe/Paris"}"#,
        r#"{"message":"m","every_s":1,"interval_s":2}"#,
        r#"{"message":"m","in_s":1.5}"#,
        r#"{"pin":256}"#,
        r#"{"pin":4,"value":2}"#,
        r#"{"pin":4,"value":"on"}"#,
        r#"{"pin":4,"value":1,"level":0}"#,
        r#"{"content":"c","tags":["a",1]}"#,
        r#"{"content":"c","tags":5}"#,
        r#"{"content":"c","source":null}"#,
        r#"{"query":"q","max_results":-1}"#,
        r#"{"job_id":"a","id":"b"}"#,
        r#"{"brightness":101.5}"#,
        r#"{"message":"m","in_s":-0}"#,
        r#"{"message":"m","in_s":100000000000000000000}"#,
        r#"{"message":"m","in_s":-100000000000000000000}"#,
        r#"{"message":"m","in_s":1000000000000000000000000000000000000000000}"#,
        r#"{"message":"m","in_s":1e3}"#,
        r#"{"pin":4,"value":1.0}"#,
        r#"{"pin":4,"value":-0}"#,
        r#"{"pin":4,"value":1e0}"#,
    ] {
        all_agree(bad).unwrap();
    }
    // The chip's sentence for arguments that do not fit.
    let e = AddArgs::parse(r#"{"message":"m","tz":"Europe/Paris"}"#).unwrap_err();
    assert!(e.starts_with("The arguments do not fit the tool's schema") && e.contains("unknown field"), "{e}");
}
