//! The reader against the serde derives it replaced: on generated objects (the keys of every
//! struct and variant, stray and repeated keys, the tag anywhere, values of every kind) both
//! accept the same texts and read the same jobs.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use chela_proto::json::strategies::{number_text, object_text, string_text};
use proptest::prelude::*;
use serde::Deserialize;

use super::*;

#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RefMadeBy {
    channel: String,
    chat_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    groups: Vec<String>,
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    approved: bool,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum RefTrigger {
    Once {
        at: i64,
    },
    Interval {
        every_s: u64,
        #[serde(default)]
        anchor: i64,
    },
    Cron {
        expr: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tz: Option<String>,
    },
    OnEvent {
        event: String,
        #[serde(rename = "match", default, skip_serializing_if = "BTreeMap::is_empty")]
        filter: BTreeMap<String, String>,
    },
}

#[derive(Deserialize, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum RefAction {
    Agent {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channel: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chat_id: Option<String>,
    },
    Cap {
        name: String,
        #[serde(default)]
        args: Value,
    },
    Emit {
        event: String,
        #[serde(default)]
        data: Value,
    },
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RefJob {
    id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    paused: bool,
    trigger: RefTrigger,
    action: RefAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grace_s: Option<u64>,
    #[serde(default)]
    delete_after_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_run: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    made_by: Option<RefMadeBy>,
}

impl From<RefMadeBy> for MadeBy {
    fn from(m: RefMadeBy) -> MadeBy {
        MadeBy { channel: m.channel, chat_id: m.chat_id, groups: m.groups, approved: m.approved }
    }
}

impl From<RefTrigger> for Trigger {
    fn from(t: RefTrigger) -> Trigger {
        match t {
            RefTrigger::Once { at } => Trigger::Once { at },
            RefTrigger::Interval { every_s, anchor } => Trigger::Interval { every_s, anchor },
            RefTrigger::Cron { expr, tz } => Trigger::Cron { expr, tz },
            RefTrigger::OnEvent { event, filter } => Trigger::OnEvent { event, filter },
        }
    }
}

impl From<RefAction> for Action {
    fn from(a: RefAction) -> Action {
        match a {
            RefAction::Agent { message, channel, chat_id } => Action::Agent { message, channel, chat_id },
            RefAction::Cap { name, args } => Action::Cap { name, args },
            RefAction::Emit { event, data } => Action::Emit { event, data },
        }
    }
}

impl From<RefJob> for Job {
    fn from(j: RefJob) -> Job {
        Job {
            id: j.id,
            name: j.name,
            enabled: j.enabled,
            paused: j.paused,
            trigger: j.trigger.into(),
            action: j.action.into(),
            grace_s: j.grace_s,
            delete_after_run: j.delete_after_run,
            created_at: j.created_at,
            last_run: j.last_run,
            made_by: j.made_by.map(Into::into),
        }
    }
}

/// Ours and the derive's reading of `text`: the value, or that it was refused.
fn both<T: PartialEq + core::fmt::Debug, R: for<'de> Deserialize<'de> + Into<T>>(
    text: &str,
    ours: fn(&mut Reader<'_>) -> Result<T>,
) -> (Option<T>, Option<T>) {
    (parse(text, ours).ok(), serde_json::from_str::<R>(text).ok().map(Into::into))
}

/// A JSON value of any kind (never an array where a struct is read: see the module docs of
/// `json.rs`), chosen to hit the types of the fields: integers of both signs and past `i64`,
/// strings with escapes, floats.
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("null".to_string()),
        1 => Just("true".to_string()),
        1 => Just("false".to_string()),
        5 => number_text(),
        1 => (0u64..5).prop_map(|n| n.to_string()),
        1 => string_text(3),
        1 => Just(r#""x\u0041\n""#.to_string()),
        1 => Just("{}".to_string()),
        1 => Just(r#"{"k": "v", "n": [1, 2.5, null]}"#.to_string()),
        1 => Just(r#"{"channel": "telegram", "k": "v"}"#.to_string()),
    ]
}

const TRIGGER_KEYS: &[&str] = &["type", "at", "every_s", "anchor", "expr", "tz", "event", "match", "other"];
const ACTION_KEYS: &[&str] = &["type", "message", "channel", "chat_id", "name", "args", "event", "data", "x"];
const MADE_BY_KEYS: &[&str] = &["channel", "chat_id", "groups", "approved", "extra"];

fn tag_or_scalar(tags: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        3 => proptest::sample::select(tags).prop_map(|t| format!("\"{t}\"")),
        1 => Just(r#""* * * * *""#.to_string()),
        1 => Just(r#"["a", "b"]"#.to_string()),
        4 => scalar(),
    ]
    .boxed()
}

fn trigger_text() -> impl Strategy<Value = String> {
    object_text(TRIGGER_KEYS, tag_or_scalar(&["once", "interval", "cron", "on_event", "Once"]), 0..6)
}

fn action_text() -> impl Strategy<Value = String> {
    object_text(ACTION_KEYS, tag_or_scalar(&["agent", "cap", "emit", "nope"]), 0..6)
}

fn made_by_text() -> impl Strategy<Value = String> {
    object_text(MADE_BY_KEYS, tag_or_scalar(&["telegram", "42"]), 0..6)
}

/// A job: usually every required field, with the others drawn.
fn job_text() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        Just(("id", r#""j1""#.to_string())),
        scalar().prop_map(|v| ("id", v)),
        scalar().prop_map(|v| ("name", v)),
        scalar().prop_map(|v| ("enabled", v)),
        scalar().prop_map(|v| ("paused", v)),
        trigger_text().prop_map(|v| ("trigger", v)),
        Just(("trigger", r#"{"type": "once", "at": 5}"#.to_string())),
        action_text().prop_map(|v| ("action", v)),
        Just(("action", r#"{"type": "emit", "event": "e"}"#.to_string())),
        scalar().prop_map(|v| ("grace_s", v)),
        scalar().prop_map(|v| ("delete_after_run", v)),
        scalar().prop_map(|v| ("created_at", v)),
        scalar().prop_map(|v| ("last_run", v)),
        made_by_text().prop_map(|v| ("made_by", v)),
        scalar().prop_map(|v| ("made_by", v)),
        scalar().prop_map(|v| ("enabeld", v)),
    ];
    proptest::collection::vec(part, 0..9).prop_map(|kv| {
        let fields: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
        format!("{{{}}}", fields.join(", "))
    })
}

/// A job the derive took: the required fields first, then optional ones of the right types.
fn good_job_text() -> impl Strategy<Value = String> {
    let trigger = prop_oneof![
        any::<i64>().prop_map(|at| format!(r#"{{"type": "once", "at": {at}}}"#)),
        (any::<u64>(), any::<i64>())
            .prop_map(|(e, a)| format!(r#"{{"anchor": {a}, "type": "interval", "every_s": {e}}}"#)),
        "[a-z*/ ]{0,8}".prop_map(|e| format!(r#"{{"type": "cron", "expr": "{e}", "tz": "Europe/Berlin"}}"#)),
        Just(r#"{"type": "cron", "expr": "x", "tz": null}"#.to_string()),
        Just(r#"{"type": "on_event", "event": "message", "match": {"b": "2", "a": "\u00e9\"q"}}"#.to_string()),
        Just(r#"{"type": "on_event", "event": "m", "match": {}}"#.to_string()),
    ];
    let action = prop_oneof![
        Just(r#"{"type": "agent", "message": "hi\nthere", "chat_id": "7"}"#.to_string()),
        Just(r#"{"type": "agent", "message": "m", "channel": "telegram", "chat_id": null}"#.to_string()),
        scalar().prop_map(|v| format!(r#"{{"type": "cap", "name": "time_now", "args": {v}}}"#)),
        Just(r#"{"type": "cap", "name": "n"}"#.to_string()),
        scalar().prop_map(|v| format!(r#"{{"data": {{"x": {v}, "a": [{v}]}}, "type": "emit", "event": "e"}}"#)),
    ];
    let made_by = prop_oneof![
        Just("null".to_string()),
        Just(r#"{"channel": "telegram", "chat_id": "42"}"#.to_string()),
        Just(r#"{"chat_id": "42", "approved": true, "groups": ["board", "x"], "channel": "c"}"#.to_string()),
        Just(r#"{"channel": "c", "chat_id": "d", "groups": [], "approved": false}"#.to_string()),
    ];
    let optional = prop_oneof![
        "[a-z ]{0,4}".prop_map(|v| format!(r#""name": "{v}""#)),
        any::<bool>().prop_map(|v| format!(r#""enabled": {v}"#)),
        any::<bool>().prop_map(|v| format!(r#""paused": {v}"#)),
        any::<u64>().prop_map(|v| format!(r#""grace_s": {v}"#)),
        Just(r#""grace_s": null"#.to_string()),
        any::<bool>().prop_map(|v| format!(r#""delete_after_run": {v}"#)),
        any::<i64>().prop_map(|v| format!(r#""created_at": {v}"#)),
        any::<i64>().prop_map(|v| format!(r#""last_run": {v}"#)),
        made_by.prop_map(|v| format!(r#""made_by": {v}"#)),
    ];
    (trigger, action, proptest::collection::vec(optional, 0..4)).prop_map(|(t, a, rest)| {
        let mut fields =
            vec![format!(r#""action": {a}"#), String::from(r#""id": "j-1""#), format!(r#""trigger": {t}"#)];
        for f in rest {
            let key = f.split(':').next().unwrap_or_default().to_string();
            if !fields.iter().any(|g| g.starts_with(&key)) {
                fields.push(f);
            }
        }
        format!("{{{}}}", fields.join(", "))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn triggers_read_as_the_tagged_derive_read_them(text in trigger_text()) {
        let (ours, reference) = both::<Trigger, RefTrigger>(&text, trigger);
        prop_assert_eq!(ours, reference, "{}", text);
    }

    #[test]
    fn actions_read_as_the_tagged_derive_read_them(text in action_text()) {
        let (ours, reference) = both::<Action, RefAction>(&text, action);
        prop_assert_eq!(ours, reference, "{}", text);
    }

    #[test]
    fn made_by_reads_as_the_derive_read_it(text in made_by_text()) {
        let (ours, reference) = both::<MadeBy, RefMadeBy>(&text, made_by);
        prop_assert_eq!(ours, reference, "{}", text);
    }

    #[test]
    fn jobs_read_as_the_derive_read_them(text in prop_oneof![job_text(), good_job_text()]) {
        let (ours, reference) = both::<Job, RefJob>(&text, job);
        prop_assert_eq!(&ours, &reference, "{}", text);
        // And through `Deserialize`, as the host's tools and `chela cron add` read a job.
        prop_assert_eq!(serde_json::from_str::<Job>(&text).ok(), reference);
    }

    /// A job is written as the derive wrote it, through `Serialize` too, and reads back as
    /// itself.
    #[test]
    fn a_job_is_written_as_the_derive_wrote_it(text in prop_oneof![job_text(), good_job_text()]) {
        if let Ok(reference) = serde_json::from_str::<RefJob>(&text) {
            let want = serde_json::to_string(&reference).unwrap();
            let j = parse(&text, job).unwrap();
            let mut written = String::new();
            write_job(&mut written, &j);
            prop_assert_eq!(&written, &want);
            prop_assert_eq!(serde_json::to_string(&j).unwrap(), want.clone());
            prop_assert_eq!(serde_json::to_value(&j).unwrap(), serde_json::from_str::<Value>(&want).unwrap());
            prop_assert_eq!(parse(&written, job), Ok(j));
        }
    }
}

#[test]
fn good_jobs_are_good() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for _ in 0..200 {
        let text = good_job_text().new_tree(&mut runner).unwrap().current();
        assert!(serde_json::from_str::<RefJob>(&text).is_ok(), "{text}");
    }
}

#[test]
fn a_struct_written_as_an_array_is_refused_where_the_derive_took_it() {
    let text = r#"["telegram", "42"]"#;
    assert!(serde_json::from_str::<RefMadeBy>(text).is_ok());
    assert_eq!(parse(text, made_by).unwrap_err().message, "invalid type: sequence, expected struct MadeBy");
}

#[test]
fn messages_name_what_was_wrong_as_serde_did() {
    let e = |text: &str| parse(text, job).unwrap_err().message;
    assert_eq!(e(r#"{"id": 1}"#), "invalid type: integer `1`, expected a string");
    assert_eq!(e(r#"{"id": "a", "enabled": "yes"}"#), "invalid type: string \"yes\", expected a boolean");
    assert_eq!(e(r#"{"id": "a", "grace_s": 1.5}"#), "invalid type: floating point `1.5`, expected u64");
    assert_eq!(e(r#"{"id": "a", "made_by": {"channel": "c"}}"#), "missing field `chat_id`");
    assert_eq!(
        e(r#"{"id": "a", "made_by": {"channel": "c", "chat_id": "d", "x": 1}}"#).split(',').next(),
        Some("unknown field `x`")
    );
    assert_eq!(e(r#"{"id": "a"}"#), "missing field `trigger`");
    assert_eq!(e(r#"{"trigger": 1}"#), "invalid type: integer `1`, expected internally tagged enum Trigger");
    assert_eq!(e(r#"{"id": null}"#), "invalid type: null, expected a string");
    assert!(e(r#"{"id": "a", "nope": 1}"#).starts_with("unknown field `nope`, expected one of `id`, `name`, "));
}

#[test]
fn a_job_flattened_into_a_listing_keeps_its_fields() {
    #[derive(serde::Serialize)]
    struct Listed<'a> {
        #[serde(flatten)]
        job: &'a Job,
        next_fire: Option<i64>,
    }
    let j =
        parse(r#"{"id": "j", "trigger": {"type": "once", "at": 5}, "action": {"type": "emit", "event": "e"}}"#, job)
            .unwrap();
    let v = serde_json::to_value(Listed { job: &j, next_fire: Some(1) }).unwrap();
    assert_eq!(
        (&v["id"], &v["trigger"]["at"], &v["paused"], &v["next_fire"]),
        (&Value::from("j"), &Value::from(5), &Value::from(false), &Value::from(1))
    );
}
