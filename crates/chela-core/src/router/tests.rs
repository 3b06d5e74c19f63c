use super::*;
use alloc::string::ToString;
use alloc::vec;
use alloc::{format, string::String};
use proptest::prelude::*;
use serde_json::json;

fn msg(text: &str) -> Event {
    Event::new("message")
        .unwrap()
        .with_source("telegram")
        .unwrap()
        .with_chat("telegram", "42")
        .unwrap()
        .with_text(text)
        .unwrap()
}

fn router(rules: Json) -> Router {
    let text = serde_json::to_string_pretty(&json!({ "rules": rules })).unwrap();
    let loaded = Router::load(&text);
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    loaded.router
}

fn ids(plan: &Plan) -> Vec<&str> {
    plan.fired.iter().map(|f| f.rule.as_str()).collect()
}

fn send_text(plan: &Plan, rule: usize, action: usize, last: &str) -> String {
    match &plan.fired[rule].actions[action] {
        Action::Send { text, .. } => text.render(last),
        Action::Agent { message, .. } => message.render(last),
        other => panic!("not a text action: {other:?}"),
    }
}

#[test]
fn a_message_fires_a_prefix_rule_with_its_fields_filled_in() {
    let mut r = router(json!([{
        "id": "lamp",
        "match": {"type": "message", "channel": "telegram", "text": {"prefix": "/lamp "}},
        "actions": [
            {"type": "cap", "cap": "gpio_write", "args": {"pin": 5, "level": "{{event.text}}", "tags": ["a", "{{event.chat_id}}"]}},
            {"type": "send", "text": "lamp said {{last.output}} to {{event.source}}"}
        ]
    }]));
    assert!(r.handle_event(&msg("hello"), 0).fired.is_empty());
    let plan = r.handle_event(&msg("/lamp on"), 0);
    assert_eq!(ids(&plan), ["lamp"]);
    assert!(!plan.consumed);
    let Action::Cap { name, args } = &plan.fired[0].actions[0] else { panic!() };
    assert_eq!(name, "gpio_write");
    assert!(!args.uses_last());
    assert_eq!(args.render(""), json!({"pin": 5, "level": "/lamp on", "tags": ["a", "42"]}));
    let Action::Send { channel, chat_id, text } = &plan.fired[0].actions[1] else { panic!() };
    assert_eq!((channel.as_str(), chat_id.as_str()), ("telegram", "42"));
    assert!(text.uses_last());
    assert_eq!(text.render("ok"), "lamp said ok to telegram");
}

#[test]
fn match_kinds_exact_prefix_contains_on_every_field() {
    let mut r = router(json!([
        {"id": "exact", "match": {"text": "hi"}, "actions": [{"type": "drop"}]},
        {"id": "contains", "match": {"text": {"contains": "rain"}}, "actions": [{"type": "send", "text": "x"}]},
        {"id": "src", "match": {"source": {"exact": "feishu"}, "chat_id": {"prefix": "oc_"}}, "actions": [{"type": "send", "text": "y"}]},
    ]));
    assert_eq!(ids(&r.handle_event(&msg("hi"), 0)), ["exact"]);
    assert!(r.handle_event(&msg("hi there"), 0).fired.is_empty());
    assert_eq!(ids(&r.handle_event(&msg("it will rain today"), 0)), ["contains"]);
    let f = Event::new("message").unwrap().with_source("feishu").unwrap().with_chat("feishu", "oc_12").unwrap();
    assert_eq!(ids(&r.handle_event(&f, 0)), ["src"]);
    let f = Event::new("message").unwrap().with_source("feishu").unwrap().with_chat("feishu", "ou_12").unwrap();
    assert!(r.handle_event(&f, 0).fired.is_empty());
}

#[test]
fn rules_fire_in_file_order_until_one_consumes_and_drop_consumes() {
    let mut r = router(json!([
        {"id": "any-1", "actions": [{"type": "send", "text": "1"}]},
        {"id": "msg-2", "match": {"type": "message"}, "actions": [{"type": "send", "text": "2"}]},
        {"id": "other", "match": {"type": "schedule"}, "actions": [{"type": "send", "text": "s"}]},
        {"id": "any-3", "match": {"text": {"contains": "stop"}}, "consume_on_match": true, "actions": [{"type": "send", "text": "3"}]},
        {"id": "msg-4", "match": {"type": "message"}, "actions": [{"type": "send", "text": "4"}, {"type": "drop"}]},
        {"id": "any-5", "actions": [{"type": "send", "text": "5"}]},
    ]));
    let plan = r.handle_event(&msg("go"), 0);
    assert_eq!(ids(&plan), ["any-1", "msg-2", "msg-4"]);
    assert!(plan.consumed, "drop consumes");
    assert_eq!(plan.fired[2].actions.len(), 1, "drop is not an action to run");
    let plan = r.handle_event(&msg("please stop"), 0);
    assert_eq!(ids(&plan), ["any-1", "msg-2", "any-3"]);
    assert!(plan.consumed);
    let plan = r.handle_event(&Event::new("schedule").unwrap(), 0);
    assert_eq!(ids(&plan), ["any-1", "other", "any-5"]);
    assert!(!plan.consumed);
    let plan = r.handle_event(&Event::new("sensor").unwrap(), 0);
    assert_eq!(ids(&plan), ["any-1", "any-5"]);
}

#[test]
fn guards_compare_fields_by_type() {
    let g = |field: &str, op: &str, value: Option<Json>| {
        let mut guard = json!({"field": field, "op": op});
        if let Some(v) = value {
            guard["value"] = v;
        }
        let mut r = router(json!([{"id": "g", "only_if": [guard], "actions": [{"type": "send", "text": "x"}]}]));
        let e = Event::new("sensor")
            .unwrap()
            .with_text("kitchen door")
            .unwrap()
            .with("temp", Value::Int(30))
            .unwrap()
            .with("hum", Value::Float(40.5))
            .unwrap()
            .with("room", Value::Str("kitchen".into()))
            .unwrap()
            .with("open", Value::Bool(true))
            .unwrap();
        !r.handle_event(&e, 0).fired.is_empty()
    };
    assert!(g("temp", "eq", Some(json!(30))));
    assert!(g("temp", "eq", Some(json!(30.0))), "an integer equals the same float");
    assert!(!g("temp", "eq", Some(json!("30"))), "no coercion from strings");
    assert!(g("temp", "ne", Some(json!("30"))));
    assert!(g("temp", "gt", Some(json!(29))));
    assert!(!g("temp", "gt", Some(json!(30))));
    assert!(g("temp", "ge", Some(json!(30))));
    assert!(g("temp", "lt", Some(json!(30.5))));
    assert!(!g("temp", "le", Some(json!(29))));
    assert!(g("hum", "gt", Some(json!(40))));
    assert!(!g("hum", "gt", Some(json!(40.5))));
    assert!(g("hum", "le", Some(json!(40.5))));
    assert!(g("room", "eq", Some(json!("kitchen"))));
    assert!(g("room", "contains", Some(json!("itch"))));
    assert!(!g("room", "gt", Some(json!(1))), "ordering a string fails");
    assert!(!g("temp", "contains", Some(json!("3"))), "contains on a number fails");
    assert!(g("open", "eq", Some(json!(true))));
    assert!(g("open", "ne", Some(json!(false))));
    assert!(g("open", "exists", None));
    assert!(!g("missing", "exists", None));
    assert!(!g("missing", "ne", Some(json!(1))), "a missing field fails every guard");
    assert!(!g("missing", "eq", Some(json!(1))));
    assert!(g("text", "contains", Some(json!("door"))), "the fixed fields are guard fields too");
    assert!(g("text", "exists", None));
    assert!(!g("chat_id", "exists", None), "an empty fixed field does not exist");
    assert!(!g("type", "eq", Some(json!("message"))));
}

#[test]
fn guard_lookups_follow_each_event() {
    // The per-event field cache must not carry one event's positions into the next.
    let mut r = router(json!([
        {"id": "a", "only_if": [{"field": "x", "op": "eq", "value": 1}], "actions": [{"type": "send", "text": "a"}]},
        {"id": "b", "only_if": [{"field": "y", "op": "eq", "value": 2}, {"field": "x", "op": "ge", "value": 1}], "actions": [{"type": "send", "text": "b"}]},
    ]));
    let e1 = Event::new("t").unwrap().with("x", Value::Int(1)).unwrap().with("y", Value::Int(2)).unwrap();
    let e2 = Event::new("t").unwrap().with("y", Value::Int(1)).unwrap().with("x", Value::Int(2)).unwrap();
    let e3 = Event::new("t").unwrap().with("y", Value::Int(2)).unwrap();
    for _ in 0..3 {
        assert_eq!(ids(&r.handle_event(&e1, 0)), ["a", "b"]);
        assert!(r.handle_event(&e2, 0).fired.is_empty());
        assert!(r.handle_event(&e3, 0).fired.is_empty());
    }
}

#[test]
fn cooldown_holds_a_rule_back_until_its_time_has_passed() {
    let mut r = router(json!([
        {"id": "c", "cooldown_ms": 1000, "actions": [{"type": "send", "text": "c"}]},
        {"id": "free", "actions": [{"type": "send", "text": "f"}]},
    ]));
    let e = msg("x");
    assert_eq!(ids(&r.handle_event(&e, 5_000)), ["c", "free"]);
    assert_eq!(ids(&r.handle_event(&e, 5_999)), ["free"]);
    assert_eq!(ids(&r.handle_event(&e, 6_000)), ["c", "free"]);
    assert_eq!(r.rules().next().unwrap().last_fired, Some(6_000));
    // A clock that steps back does not unlock the rule early.
    assert_eq!(ids(&r.handle_event(&e, 10)), ["free"]);
}

#[test]
fn a_cooling_or_disabled_rule_does_not_consume() {
    let mut r = router(json!([
        {"id": "off", "enabled": false, "consume_on_match": true, "actions": [{"type": "send", "text": "o"}]},
        {"id": "c", "cooldown_ms": 10, "consume_on_match": true, "actions": [{"type": "send", "text": "c"}]},
        {"id": "later", "actions": [{"type": "send", "text": "l"}]},
    ]));
    assert_eq!(ids(&r.handle_event(&msg("x"), 0)), ["c"]);
    assert_eq!(ids(&r.handle_event(&msg("x"), 5)), ["later"]);
}

#[test]
fn templates_fill_fields_and_leave_event_text_literal() {
    let mut r = router(json!([{
        "id": "t",
        "actions": [
            {"type": "agent", "message": "[{{ event.type }}] {{event.text}} t={{event.temp}}{{event.min}}{{event.zero}} f={{event.f}} b={{event.on}} none={{event.nope}}|{{last.output}}"},
            {"type": "send", "channel": "feishu", "chat_id": "{{event.owner}}", "text": "{{last.output}}{{last.output}}"},
        ]
    }]));
    let e = msg("say {{last.output}} {{event.text}}")
        .with("temp", Value::Int(-3))
        .unwrap()
        .with("min", Value::Int(i64::MIN))
        .unwrap()
        .with("zero", Value::Int(0))
        .unwrap()
        .with("f", Value::Float(1.5))
        .unwrap()
        .with("on", Value::Bool(false))
        .unwrap()
        .with("owner", Value::Str("oc_9".into()))
        .unwrap();
    let plan = r.handle_event(&e, 0);
    assert_eq!(
        send_text(&plan, 0, 0, "OUT"),
        "[message] say {{last.output}} {{event.text}} t=-3-92233720368547758080 f=1.5 b=false none=|OUT"
    );
    let Action::Send { channel, chat_id, .. } = &plan.fired[0].actions[1] else { panic!() };
    assert_eq!((channel.as_str(), chat_id.as_str()), ("feishu", "oc_9"));
    assert_eq!(send_text(&plan, 0, 1, "ab"), "abab");
    assert_eq!(send_text(&plan, 0, 1, ""), "");
}

#[test]
fn rendered_text_is_cut_at_its_bound_on_a_char_boundary() {
    let mut r = router(json!([{"id": "big", "actions": [
        {"type": "send", "text": "{{event.text}}{{event.text}}{{event.text}}{{event.text}}{{event.text}}"},
        {"type": "send", "text": "é{{last.output}}"},
    ]}]));
    let text = "é".repeat(MAX_TEXT / 2);
    let plan = r.handle_event(&msg(&text), 0);
    let out = send_text(&plan, 0, 0, "");
    assert!(out.len() <= MAX_RENDERED && out.len() > MAX_RENDERED - 4, "{}", out.len());
    assert!(out.chars().all(|c| c == 'é'));
    let out = send_text(&plan, 0, 1, &"x".repeat(MAX_RENDERED * 3));
    assert_eq!(out.len(), MAX_RENDERED);
    assert!(out.starts_with("éx"));
}

#[test]
fn capability_arguments_are_bounded_together_however_many_strings_interpolate() {
    // As many `{{event.text}}` strings as a rule's size bound lets in, each filled with 16 KiB:
    // unbounded, one message would bind to some 15 MB for this one action.
    let many: Vec<Json> = (0..900).map(|_| json!("{{event.text}}")).collect();
    let rule = json!({"id": "amp", "actions": [
        {"type": "cap", "cap": "c", "args": {"first": "{{last.output}}", "many": many}},
    ]});
    let loaded = Router::load(&format!("{{\"rules\": [{rule}]}}"));
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let mut r = loaded.router;
    let plan = r.handle_event(&msg(&"x".repeat(MAX_TEXT)), 0);
    let Action::Cap { args, .. } = &plan.fired[0].actions[0] else { panic!("{plan:?}") };
    let strings = |v: &Json| -> Vec<usize> {
        let mut lens = vec![v["first"].as_str().unwrap().len()];
        lens.extend(v["many"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().len()));
        lens
    };
    // Before the previous output is known, the event's text fills the room in document order.
    let bound = strings(&args.render(""));
    assert_eq!(bound.len(), 901, "every string is still there");
    assert_eq!(&bound[..4], [0, MAX_RENDERED, MAX_RENDERED, 0]);
    assert_eq!(bound.iter().sum::<usize>(), MAX_RENDERED_ARGS);
    // A huge previous output takes its share first; the total stays within the bound.
    let filled = strings(&args.render(&"y".repeat(MAX_RENDERED * 4)));
    assert_eq!(&filled[..3], [MAX_RENDERED, MAX_RENDERED, 0]);
    assert_eq!(filled.iter().sum::<usize>(), MAX_RENDERED_ARGS);
}

#[test]
fn emit_raises_an_event_one_deeper_and_stops_at_the_depth_bound() {
    let mut r = router(json!([
        {"id": "ping", "match": {"type": "ping"}, "actions": [{"type": "emit", "event": "pong", "text": "from {{event.text}}: {{last.output}}"}]},
        {"id": "pong", "match": {"type": "pong"}, "actions": [{"type": "emit", "event": "ping"}]},
    ]));
    let mut e = Event::new("ping").unwrap().with_chat("gateway", "c1").unwrap().with_text("start").unwrap();
    let mut hops = 0;
    loop {
        let plan = r.handle_event(&e, 0);
        match plan.fired[0].actions.first() {
            Some(Action::Emit(em)) => {
                e = em.event("").unwrap();
                hops += 1;
            }
            None => {
                assert_eq!(plan.emits_refused, 1);
                break;
            }
            Some(other) => panic!("{other:?}"),
        }
        assert!(hops <= 10, "the chain must stop");
    }
    assert_eq!(hops, usize::from(MAX_EMIT_DEPTH));
    assert_eq!(e.depth(), MAX_EMIT_DEPTH);
    let first =
        r.handle_event(&Event::new("ping").unwrap().with_chat("gateway", "c1").unwrap().with_text("s").unwrap(), 0);
    let Action::Emit(em) = &first.fired[0].actions[0] else { panic!() };
    let pong = em.event("R").unwrap();
    assert_eq!(
        (pong.kind(), pong.source(), pong.channel(), pong.chat_id(), pong.text()),
        ("pong", "router", "gateway", "c1", "from s: R")
    );
    assert_eq!(pong.get("rule"), Some(&Value::Str("ping".into())));
}

const GOOD_AND_BAD: &str = r#"{
  "rules": [
    {
      "id": "first",
      "match": {"type": "message"},
      "actions": [{"type": "send", "text": "1"}]
    },
    {
      "id": "bad-op",
      "only_if": [{"field": "temp", "op": "gte", "value": 3}],
      "actions": [{"type": "send", "text": "2"}]
    },
    {
      "id": "bad-json",
      match: {"type": "message"},
      "actions": []
    },
    {"id": "typo", "cooldown": 5, "actions": [{"type": "send", "text": "x"}]},
    {"id": "first", "actions": [{"type": "send", "text": "dup"}]},
    {"id": "bad-template", "actions": [{"type": "send", "text": "{{evnt.text}}"}]},
    {"id": "last", "actions": [{"type": "cap", "cap": "x", "args": {"a": "{{event.text"}}]},
    {"id": "ok", "actions": [{"type": "agent", "message": "hi"}]}
  ],
  "version": 2
}
"#;

#[test]
fn the_loader_keeps_good_rules_and_reports_bad_ones_with_line_and_field() {
    let loaded = Router::load(GOOD_AND_BAD);
    let kept: Vec<&str> = loaded.router.rules().map(|r| r.id).collect();
    assert_eq!(kept, ["first", "ok"]);
    let shown: Vec<String> = loaded.problems.iter().map(ToString::to_string).collect();
    let expect = [
        "rules.json line 8: rule `bad-op`: `only_if[0].op`: unknown op `gte`; one of eq, ne, gt, lt, ge, le, contains, exists",
        "rules.json line 15: not valid JSON: key must be a string",
        "rules.json line 18: rule `typo`: `cooldown`: unknown field; expected one of id, description, enabled, match, only_if, cooldown_ms, consume_on_match, actions, made_by",
        "rules.json line 19: rule `first`: the id is already used by the rule at line 3; this one is ignored",
        "rules.json line 20: rule `bad-template`: `actions[0].text`: unknown placeholder `{{evnt.text}}`: use `{{event.<field>}}` or `{{last.output}}`",
        "rules.json line 21: rule `last`: `actions[0].args.a`: `{{` at byte 0 is never closed with `}}`",
        "rules.json line 24: `version`: unknown top-level key ignored; only `rules` is read",
    ];
    assert_eq!(shown, expect);
}

#[test]
fn a_broken_structure_keeps_the_rules_before_the_break() {
    let text = "{\"rules\": [\n{\"id\": \"a\", \"actions\": [{\"type\": \"drop\"}]}\n{\"id\": \"b\", \"actions\": [{\"type\": \"drop\"}]}\n]}";
    let loaded = Router::load(text);
    assert_eq!(loaded.router.rules().map(|r| r.id).collect::<Vec<_>>(), ["a"]);
    assert_eq!(loaded.problems.len(), 1);
    assert_eq!(loaded.problems[0].line, 3);
    assert!(loaded.problems[0].message.contains("expected `,` or `]` after rule 1"), "{}", loaded.problems[0]);

    for (text, line, needle) in [
        ("", 1, "found the end of the file"),
        ("[1, 2]", 1, "expected `{\"rules\": [ … ]}`"),
        ("{\"rules\": {}}", 1, "`rules` must be an array"),
        ("{}", 1, "no `rules` array"),
        ("{\"rules\": [\n{\"id\": \"a\", \"text\": \"unclosed}]}", 2, "never ends"),
        ("{\"rules\": [\n{\"id\": [[[[", 2, "never ends"),
        ("{\"rules\": [],,}", 1, "expected a key"),
        ("{\"rules\": []} trailing", 1, "text after the closing"),
    ] {
        let loaded = Router::load(text);
        assert!(loaded.router.is_empty());
        assert!(
            loaded.problems.iter().any(|p| p.line == line && p.message.contains(needle)),
            "{text:?}: {:?}",
            loaded.problems
        );
    }
    // Nesting far deeper than any rule (but within its 16 KiB): the scanner counts brackets without recursing and the
    // element's parse stops at serde_json's depth limit; the rule after it still loads.
    let deep = format!(
        "{{\"rules\": [\n{}{},\n{{\"id\": \"after\", \"actions\": [{{\"type\": \"drop\"}}]}}]}}",
        "[".repeat(8_000),
        "]".repeat(8_000)
    );
    let loaded = Router::load(&deep);
    assert_eq!(loaded.router.rules().map(|r| r.id).collect::<Vec<_>>(), ["after"]);
    assert!(loaded.problems[0].message.contains("recursion limit"), "{}", loaded.problems[0]);

    // A byte-order mark and an empty list are fine.
    let loaded = Router::load("\u{feff}{\"rules\": []}");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
}

#[test]
fn bad_rules_name_their_field() {
    let cases = [
        (json!({"actions": [{"type": "drop"}]}), "`id`: missing"),
        (json!({"id": "has space", "actions": [{"type": "drop"}]}), "`id`: must be"),
        (json!({"id": "a"}), "`actions`: missing"),
        (json!({"id": "a", "actions": []}), "`actions`: empty"),
        (
            json!({"id": "a", "actions": [{"type": "drop"}, {"type": "send", "text": "x"}]}),
            "`actions[0]`: `drop` ends the rule",
        ),
        (json!({"id": "a", "actions": [{"type": "shell", "cmd": "rm"}]}), "`actions[0].type`: unknown action `shell`"),
        (json!({"id": "a", "actions": [{"type": "send"}]}), "`actions[0].text`: missing"),
        (
            json!({"id": "a", "actions": [{"type": "cap", "cap": "x", "args": [1]}]}),
            "`actions[0].args`: expected an object",
        ),
        (
            json!({"id": "a", "actions": [{"type": "send", "text": "x", "chat_id": "{{last.output}}"}]}),
            "`actions[0].chat_id`: `{{last.output}}` cannot choose",
        ),
        (json!({"id": "a", "actions": [{"type": "emit", "event": ""}]}), "`actions[0].event`: empty"),
        (
            json!({"id": "a", "match": {"text": {"regex": "x"}}, "actions": [{"type": "drop"}]}),
            "`match.text.regex`: unknown",
        ),
        (json!({"id": "a", "match": {"text": 5}, "actions": [{"type": "drop"}]}), "`match.text`: expected a string"),
        (
            json!({"id": "a", "match": {"type": {"prefix": "m"}}, "actions": [{"type": "drop"}]}),
            "`match.type`: expected the exact event type",
        ),
        (json!({"id": "a", "match": {"user": "x"}, "actions": [{"type": "drop"}]}), "`match.user`: unknown field"),
        (
            json!({"id": "a", "only_if": [{"field": "t", "op": "gt", "value": "3"}], "actions": [{"type": "drop"}]}),
            "`only_if[0].value`: expected a number",
        ),
        (
            json!({"id": "a", "only_if": [{"field": "t", "op": "eq"}], "actions": [{"type": "drop"}]}),
            "`only_if[0].value`: missing",
        ),
        (
            json!({"id": "a", "only_if": [{"field": "t", "op": "exists", "value": 1}], "actions": [{"type": "drop"}]}),
            "`only_if[0].value`: `exists` takes no value",
        ),
        (
            json!({"id": "a", "only_if": [{"field": "a b", "op": "exists"}], "actions": [{"type": "drop"}]}),
            "`only_if[0].field`: must be",
        ),
        (
            json!({"id": "a", "only_if": [{"field": "t", "op": "eq", "value": [1]}], "actions": [{"type": "drop"}]}),
            "`only_if[0].value`: expected a string, number or boolean",
        ),
        (json!({"id": "a", "only_if": {}, "actions": [{"type": "drop"}]}), "`only_if`: expected an array"),
        (
            json!({"id": "a", "cooldown_ms": -1, "actions": [{"type": "drop"}]}),
            "`cooldown_ms`: expected a whole number",
        ),
        (json!({"id": "a", "enabled": "yes", "actions": [{"type": "drop"}]}), "`enabled`: expected true or false"),
        (json!("rule"), "`rule`: expected an object, found a string"),
    ];
    for (spec, needle) in cases {
        let err = Router::new().add_rule(spec.clone()).unwrap_err();
        assert!(err.contains(needle), "{spec}: {err}");
    }
    let many = |n: usize, item: Json| Json::Array(vec![item; n]);
    let guard = json!({"field": "t", "op": "exists"});
    let err = Router::new()
        .add_rule(json!({"id": "a", "only_if": many(MAX_GUARDS + 1, guard), "actions": [{"type": "drop"}]}))
        .unwrap_err();
    assert!(err.contains("`only_if`: 9 guards; at most 8"), "{err}");
    let err = Router::new()
        .add_rule(json!({"id": "a", "actions": many(MAX_ACTIONS + 1, json!({"type": "send", "text": "x"}))}))
        .unwrap_err();
    assert!(err.contains("`actions`: 9 actions; at most 8"), "{err}");
    let err = Router::new()
        .add_rule(json!({"id": "a", "actions": [{"type": "send", "text": "x".repeat(MAX_TEMPLATE + 1)}]}))
        .unwrap_err();
    assert!(err.contains("`actions[0].text`: 4097 bytes; at most 4096"), "{err}");
    let err = Router::new()
        .add_rule(
            json!({"id": "a", "actions": [{"type": "cap", "cap": "c", "args": {"blob": "x".repeat(MAX_RULE_BYTES)}}]}),
        )
        .unwrap_err();
    assert!(err.contains("longer than 16384 bytes"), "{err}");
}

#[test]
fn limits_on_rules_file_and_rule_size() {
    let rule = |i: usize| json!({"id": format!("r{i}"), "actions": [{"type": "drop"}]});
    let text = serde_json::to_string(&json!({"rules": (0..MAX_RULES + 2).map(rule).collect::<Vec<_>>()})).unwrap();
    let loaded = Router::load(&text);
    assert_eq!(loaded.router.len(), MAX_RULES);
    assert_eq!(loaded.problems.len(), 2);
    assert!(loaded.problems[0].message.contains("more than 256 rules"), "{}", loaded.problems[0]);

    let mut r = loaded.router;
    assert!(r.add_rule(rule(999)).unwrap_err().contains("at most 256 rules"));
    assert_eq!(r.add_rule(rule(3)), Ok(Added::Replaced), "replacing needs no room");

    let huge = format!("{{\"rules\": [\"{}\"]}}", "x".repeat(MAX_FILE_BYTES));
    let loaded = Router::load(&huge);
    assert!(loaded.router.is_empty());
    assert!(loaded.problems[0].message.contains("at most 1048576 are read"));

    let big = format!(
        "{{\"rules\": [{{\"id\": \"big\", \"description\": \"{}\", \"actions\": [{{\"type\": \"drop\"}}]}}]}}",
        "x".repeat(MAX_RULE_BYTES)
    );
    let loaded = Router::load(&big);
    assert!(loaded.router.is_empty());
    assert!(loaded.problems[0].message.contains("longer than 16384 bytes"));
}

#[test]
fn add_replace_remove_list_and_write_back() {
    let mut r = Router::new();
    assert_eq!(
        r.add_rule(json!({"id": "a", "match": {"type": "m"}, "actions": [{"type": "send", "text": "a"}]})),
        Ok(Added::New)
    );
    assert_eq!(r.add_rule(json!({"id": "b", "actions": [{"type": "send", "text": "b"}]})), Ok(Added::New));
    let m = Event::new("m").unwrap();
    assert_eq!(ids(&r.handle_event(&m, 0)), ["a", "b"]);
    // Replacing keeps the place in the order and moves the rule to its new type.
    assert_eq!(
        r.add_rule(json!({"id": "a", "match": {"type": "n"}, "actions": [{"type": "send", "text": "A"}]})),
        Ok(Added::Replaced)
    );
    assert_eq!(ids(&r.handle_event(&m, 0)), ["b"]);
    assert_eq!(ids(&r.handle_event(&Event::new("n").unwrap(), 0)), ["a", "b"]);
    assert_eq!(r.rules().map(|v| v.id).collect::<Vec<_>>(), ["a", "b"]);
    assert!(r.rules().all(|v| v.enabled));

    let written = r.to_json();
    let again = Router::load(&written);
    assert!(again.problems.is_empty());
    let specs = |r: &Router| r.rules().map(|v| v.spec.clone()).collect::<Vec<_>>();
    assert_eq!(specs(&again.router), specs(&r));

    assert!(r.remove_rule("a"));
    assert!(!r.remove_rule("a"));
    assert_eq!(ids(&r.handle_event(&Event::new("n").unwrap(), 0)), ["b"]);
    assert_eq!(
        r.to_json(),
        "{\n  \"rules\": [\n    {\n      \"actions\": [\n        {\n          \"text\": \"b\",\n          \"type\": \"send\"\n        }\n      ],\n      \"id\": \"b\"\n    }\n  ]\n}\n"
    );
    assert!(r.remove_rule("b"));
    assert!(r.is_empty());
    assert!(r.handle_event(&m, 0).fired.is_empty());
}

#[test]
fn events_are_bounded() {
    let mut e = Event::new("x").unwrap();
    for i in 0..MAX_FIELDS {
        e.set(&format!("f{i}"), Value::Int(i as i64)).unwrap();
    }
    e.set("f0", Value::Bool(true)).unwrap();
    assert_eq!(e.set("one-more", Value::Int(0)), Err(EventError::TooManyFields));
    assert_eq!(e.get("f0"), Some(&Value::Bool(true)));
    let mut e = Event::new("x").unwrap();
    assert_eq!(e.set("text", Value::Int(0)), Err(EventError::BuiltinFieldName("text".into())));
    assert!(matches!(e.set("", Value::Int(0)), Err(EventError::BadFieldName(_))));
    assert!(matches!(e.set(&"n".repeat(65), Value::Int(0)), Err(EventError::BadFieldName(_))));
    assert!(matches!(e.set("a/b", Value::Int(0)), Err(EventError::BadFieldName(_))));
    let err = e.set("v", Value::Str("x".repeat(MAX_FIELD_VALUE + 1))).unwrap_err();
    assert_eq!(err.to_string(), "event field `v` is 4097 bytes; at most 4096 are allowed");
    assert!(Event::new("x").unwrap().with_text(&"x".repeat(MAX_TEXT + 1)).is_err());
    assert!(Event::new(&"x".repeat(MAX_FIELD_VALUE + 1)).is_err());
}

#[test]
fn string_guards_by_column_keep_each_rules_conjunction() {
    let send = json!([{"type": "send", "text": "x"}]);
    let mut r = Router::new();
    let g = |op: &str, v: &str| json!({"field": "room", "op": op, "value": v});
    r.add_rule(json!({"id": "both", "only_if": [g("eq", "a"), g("eq", "b")], "actions": send})).unwrap();
    r.add_rule(json!({"id": "one", "only_if": [g("eq", "a"), g("ne", "b")], "actions": send})).unwrap();
    r.add_rule(json!({"id": "two", "only_if": [g("contains", "a"), g("contains", "z")], "actions": send})).unwrap();
    r.add_rule(json!({"id": "ne", "only_if": [g("ne", "c")], "actions": send})).unwrap();
    let e = Event::new("t").unwrap().with("room", Value::Str("a".into())).unwrap();
    assert_eq!(ids(&r.handle_event(&e, 0)), vec!["one", "ne"]);
    let e = Event::new("t").unwrap().with("room", Value::Str("az".into())).unwrap();
    assert_eq!(ids(&r.handle_event(&e, 0)), vec!["two", "ne"]);
    // A missing field fails `ne` too; a number passes `ne` and fails `eq` and `contains`.
    assert!(ids(&r.handle_event(&Event::new("t").unwrap(), 0)).is_empty());
    let e = Event::new("t").unwrap().with("room", Value::Int(1)).unwrap();
    assert_eq!(ids(&r.handle_event(&e, 0)), vec!["ne"]);
}

// ---- property tests ----

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary text never panics the loader, and every problem points at a line of the text.
    #[test]
    fn the_loader_survives_any_text(text in ".{0,400}") {
        let loaded = Router::load(&text);
        let lines = text.lines().count().max(1) as u32 + 1;
        for p in &loaded.problems {
            prop_assert!(p.line >= 1 && p.line <= lines, "{p} in {text:?}");
        }
    }

    /// JSON-ish noise (brackets, quotes, escapes) near a valid file never panics, and whatever
    /// loads is well-formed enough to write back and load again unchanged.
    #[test]
    fn the_loader_survives_structured_noise(
        cuts in proptest::collection::vec((0usize..600, "[\\[\\]{}\",:\\\\ \nab1-]{0,6}"), 0..6)
    ) {
        let mut text = String::from(GOOD_AND_BAD);
        for (at, noise) in cuts {
            let mut at = at.min(text.len());
            while !text.is_char_boundary(at) { at -= 1; }
            text.insert_str(at, &noise);
        }
        let loaded = Router::load(&text);
        let again = Router::load(&loaded.router.to_json());
        prop_assert!(again.problems.is_empty(), "{:?}", again.problems);
        prop_assert_eq!(again.router.len(), loaded.router.len());
    }

    /// Garbage elements among good rules cost only themselves.
    #[test]
    fn garbage_rules_do_not_hide_good_ones(
        garbage in proptest::collection::vec("[a-z0-9\"{}:\\[\\] ]{1,20}", 1..5),
        good in 1usize..6,
    ) {
        let mut elements: Vec<String> = (0..good)
            .map(|i| format!("{{\"id\": \"good{i}\", \"actions\": [{{\"type\": \"drop\"}}]}}"))
            .collect();
        for g in &garbage {
            // Only garbage that is one properly nested element (brackets counted outside
            // strings; the alphabet has no escapes) keeps the array's structure.
            let (mut depth, mut in_string) = (0i32, false);
            let nested = g.chars().all(|c| {
                match (c, in_string) {
                    ('"', _) => in_string = !in_string,
                    ('{' | '[', false) => depth += 1,
                    ('}' | ']', false) => depth -= 1,
                    _ => {}
                }
                depth >= 0
            }) && depth == 0
                && !in_string;
            if nested && !g.contains(' ') {
                elements.insert(elements.len() / 2, g.clone());
            }
        }
        let text = format!("{{\"rules\": [\n{}\n]}}", elements.join(",\n"));
        let loaded = Router::load(&text);
        for i in 0..good {
            let id = format!("good{i}");
            prop_assert!(loaded.router.rules().any(|r| r.id == id), "{id} lost in {text}: {:?}", loaded.problems);
        }
    }
}

/// A rule for the matcher's property test, kept as plain data so the reference below can judge
/// it without the router's compiled form.
#[derive(Debug, Clone)]
struct RefRule {
    kind: Option<&'static str>,
    text: Option<(&'static str, String)>,
    guards: Vec<(&'static str, &'static str, Json)>,
    cooldown: u64,
    consume: bool,
}

fn ref_rule() -> impl Strategy<Value = RefRule> {
    let kind = prop_oneof![Just(None), Just(Some("a")), Just(Some("b"))];
    let text = proptest::option::of((prop_oneof![Just("exact"), Just("prefix"), Just("contains")], "[xy]{0,3}"));
    let constant = prop_oneof![
        (-2i64..3).prop_map(|i| json!(i)),
        "[xy]{0,1}".prop_map(|s| json!(s)),
        any::<bool>().prop_map(|b| json!(b)),
        Just(json!(0.5))
    ];
    let guard = (
        prop_oneof![Just("x"), Just("y"), Just("text")],
        prop_oneof![
            Just("eq"),
            Just("ne"),
            Just("gt"),
            Just("lt"),
            Just("ge"),
            Just("le"),
            Just("contains"),
            Just("exists")
        ],
        constant,
    );
    (
        kind,
        text,
        proptest::collection::vec(guard, 0..3),
        prop_oneof![Just(0u64), Just(3u64)],
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(kind, text, guards, cooldown, consume)| RefRule { kind, text, guards, cooldown, consume })
}

fn ref_event() -> impl Strategy<Value = (Event, u64)> {
    let value = proptest::option::of(prop_oneof![
        (-2i64..3).prop_map(Value::Int),
        Just(Value::Float(0.5)),
        "[xy]{0,2}".prop_map(Value::Str),
        any::<bool>().prop_map(Value::Bool),
    ]);
    // Texts longer than the patterns, so a `contains` column's automaton follows its fail links.
    (prop_oneof![Just("a"), Just("b"), Just("c")], "[xy]{0,6}", value.clone(), value, 0u64..3).prop_map(
        |(kind, text, x, y, dt)| {
            let mut e = Event::new(kind).unwrap().with_text(&text).unwrap();
            // The order of fields varies with the values, to exercise the per-event lookup.
            if let Some(y) = y {
                e.set("y", y).unwrap();
            }
            if let Some(x) = x {
                e.set("x", x).unwrap();
            }
            (e, dt)
        },
    )
}

fn ref_num(v: &Json) -> Option<f64> {
    v.as_f64()
}

/// The reference semantics, written straight from the rules' description.
fn ref_guard(field: &str, op: &str, c: &Json, e: &Event) -> bool {
    let val: Option<Json> = if field == "text" {
        Some(json!(e.text()))
    } else {
        e.get(field).map(|v| match v {
            Value::Str(s) => json!(s),
            Value::Int(i) => json!(i),
            Value::Float(f) => json!(f),
            Value::Bool(b) => json!(b),
        })
    };
    let Some(val) = val else { return false };
    let ord = || match (ref_num(&val), ref_num(c)) {
        (Some(a), Some(b)) if val.is_number() && c.is_number() => a.partial_cmp(&b),
        _ => None,
    };
    let equal = match (&val, c) {
        (Json::Number(_), Json::Number(_)) => ord() == Some(core::cmp::Ordering::Equal),
        _ => val == *c,
    };
    match op {
        "eq" => equal,
        "ne" => !equal,
        "gt" => ord().is_some_and(|o| o.is_gt()),
        "lt" => ord().is_some_and(|o| o.is_lt()),
        "ge" => ord().is_some_and(|o| o.is_ge()),
        "le" => ord().is_some_and(|o| o.is_le()),
        "contains" => matches!((&val, c), (Json::String(s), Json::String(n)) if s.contains(n.as_str())),
        "exists" => field != "text" || !e.text().is_empty(),
        _ => unreachable!(),
    }
}

fn ref_spec(i: usize, r: &RefRule) -> Option<Json> {
    let mut spec = json!({"id": format!("r{i}"), "actions": [{"type": "send", "text": "{{event.text}}"}]});
    if let Some(k) = r.kind {
        spec["match"] = json!({"type": k});
    }
    if let Some((how, s)) = &r.text {
        if spec.get("match").is_none() {
            spec["match"] = json!({});
        }
        spec["match"]["text"] = json!({ *how: s });
    }
    let mut guards = Vec::new();
    for (f, op, c) in &r.guards {
        match *op {
            "exists" => guards.push(json!({"field": f, "op": op})),
            // Ordered ops need a number, contains a string: a rule the loader would refuse
            // is not generated.
            "gt" | "lt" | "ge" | "le" if !c.is_number() => return None,
            "contains" if !c.is_string() => return None,
            _ => guards.push(json!({"field": f, "op": op, "value": c})),
        }
    }
    if !guards.is_empty() {
        spec["only_if"] = Json::Array(guards);
    }
    if r.cooldown > 0 {
        spec["cooldown_ms"] = json!(r.cooldown);
    }
    if r.consume {
        spec["consume_on_match"] = json!(true);
    }
    Some(spec)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The compiled matcher (type index, guard slots, per-event lookups, cooldowns) fires the
    /// same rules as a plain reading of each rule, over sequences of events.
    #[test]
    fn the_matcher_agrees_with_the_reference(
        rules in proptest::collection::vec(ref_rule(), 0..12),
        events in proptest::collection::vec(ref_event(), 1..12),
    ) {
        let kept: Vec<(usize, RefRule, Json)> = rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| ref_spec(i, r).map(|s| (i, r.clone(), s)))
            .collect();
        let mut router = Router::new();
        for (_, _, spec) in &kept {
            prop_assert_eq!(router.add_rule(spec.clone()), Ok(Added::New));
        }
        let mut last: Vec<Option<u64>> = vec![None; kept.len()];
        let mut now = 0;
        for (e, dt) in &events {
            now += dt;
            let plan = router.handle_event(e, now);
            let mut want = Vec::new();
            let mut consumed = false;
            for (k, (i, r, _)) in kept.iter().enumerate() {
                let cooling = r.cooldown > 0 && last[k].is_some_and(|t| now - t < r.cooldown);
                let text_ok = r.text.as_ref().is_none_or(|(how, s)| match *how {
                    "exact" => e.text() == s,
                    "prefix" => e.text().starts_with(s.as_str()),
                    _ => e.text().contains(s.as_str()),
                });
                let fires = !cooling
                    && r.kind.is_none_or(|k| k == e.kind())
                    && text_ok
                    && r.guards.iter().all(|(f, op, c)| ref_guard(f, op, c, e));
                if fires {
                    last[k] = Some(now);
                    want.push(format!("r{i}"));
                    if r.consume { consumed = true; break; }
                }
            }
            prop_assert_eq!(ids(&plan), want.iter().map(String::as_str).collect::<Vec<_>>());
            prop_assert_eq!(plan.consumed, consumed);
            for f in &plan.fired {
                prop_assert_eq!(send_text(&plan, plan.fired.iter().position(|x| x == f).unwrap(), 0, ""), e.text());
            }
        }
    }
}

#[test]
fn listens_names_the_types_some_rule_may_fire_on() {
    let typed = router(json!([{"id": "t", "match": {"type": "cap_result"}, "actions": [{"type": "drop"}]}]));
    assert!(typed.listens("cap_result"));
    assert!(!typed.listens("message"));
    assert!(!Router::new().listens("cap_result"));
    let any = router(json!([{"id": "a", "match": {"source": "x"}, "actions": [{"type": "drop"}]}]));
    assert!(any.listens("cap_result") && any.listens("anything"), "a rule without a type hears every type");
}

#[test]
fn an_event_carries_the_depth_it_is_given_and_shows_fields_as_text() {
    let e = msg("hi").with_depth(3).with("n", Value::Int(-7)).unwrap().with("ok", Value::Bool(true)).unwrap();
    assert_eq!(e.depth(), 3);
    assert_eq!(e.field_text("text").as_deref(), Some("hi"));
    assert_eq!(e.field_text("n").as_deref(), Some("-7"));
    assert_eq!(e.field_text("ok").as_deref(), Some("true"));
    assert_eq!(e.field_text("missing"), None);
}
