//! The toolbox's contract: typed errors, timeouts, blocking tools, groups at runtime, and
//! every schema against its argument type.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use chela_core::cap::{Caller, Scope};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::testing::fake;
use super::{ToolErrorKind, Toolbox};
use crate::testing::Fixture;

#[cfg(all(feature = "web", feature = "http"))]
fn kind_of(r: super::ToolResult) -> ToolErrorKind {
    r.unwrap_err().kind()
}

#[cfg(all(feature = "web", feature = "http"))]
#[tokio::test]
async fn errors_say_what_kind_of_failure_they_are() {
    let fx = Fixture::new(&[("caps.hidden", "web"), ("caps.disabled", "http")]);
    let tb = Toolbox::new(&fx.cfg);
    let ctx = fx.ctx();
    let call = |id: &'static str, input: &'static str, caller| {
        let (tb, ctx) = (&tb, &ctx);
        async move { tb.call(ctx, id, input, caller, Scope::default()).await }
    };
    assert_eq!(kind_of(call("no_such_tool", "{}", Caller::Model).await), ToolErrorKind::NotFound);
    let e = call("get_current_time", r#"{"timezone": 5}"#, Caller::Model).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::InvalidArgs);
    assert!(e.0.contains("Invalid arguments for get_current_time"), "{e}");
    let e = call("get_current_time", r#"{"timezone": "Mars/Olympus"}"#, Caller::Model).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::InvalidArgs, "{e}");
    assert_eq!(kind_of(call("web_search", r#"{"query":"x"}"#, Caller::Model).await), ToolErrorKind::Refused);
    assert_eq!(kind_of(call("http_request", r#"{"url":"http://x"}"#, Caller::Manual).await), ToolErrorKind::Refused);
    // A person may call the hidden group; it then fails for a reason of its own.
    assert_eq!(kind_of(call("web_search", r#"{"query":"x"}"#, Caller::Manual).await), ToolErrorKind::Failed);
    assert_eq!(kind_of(call("web_search", r#"{"query":" "}"#, Caller::Manual).await), ToolErrorKind::InvalidArgs);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_never_finishes_times_out_naming_the_tool_and_the_setting() {
    let fx = Fixture::new(&[("tools.timeout_secs", "3")]);
    let tb = Toolbox::new(&fx.cfg);
    tb.register(fake::group("test", fake::Never)).unwrap();
    let started = tokio::time::Instant::now();
    let e = tb.call(&fx.ctx(), "never", "{}", Caller::Model, Scope::default()).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::TimedOut);
    assert!(e.0.contains("`never`") && e.0.contains("3 s") && e.0.contains("tools.timeout_secs"), "{e}");
    assert_eq!(started.elapsed().as_secs(), 3);
}

#[tokio::test]
async fn blocking_tools_leave_the_async_worker_free() {
    // `#[tokio::test]` has one worker thread: a tool blocking it would starve `signal`.
    let fx = Fixture::new(&[]);
    let tb = Toolbox::new(&fx.cfg);
    let (tx, rx) = std::sync::mpsc::channel();
    tb.register(fake::group("test", fake::WaitsBlocking(Mutex::new(rx)))).unwrap();
    let ctx = fx.ctx();
    let call = tb.call(&ctx, "waits_blocking", "{}", Caller::Model, Scope::default());
    let signal = async {
        tokio::task::yield_now().await;
        tx.send(()).unwrap();
    };
    let (out, ()) = tokio::join!(call, signal);
    assert_eq!(out.unwrap(), "signalled");
}

#[tokio::test]
async fn groups_come_and_go_while_calls_run() {
    let fx = Fixture::new(&[]);
    let tb = Arc::new(Toolbox::new(&fx.cfg));
    let open = Arc::new(Notify::new());
    let (started, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    tb.register(fake::group("mcp_test", fake::Gate { started, open: open.clone() })).unwrap();
    let names: Vec<String> = tb.registry().tools_for(Scope::default()).iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"gate".to_owned()), "{names:?}");
    assert!(tb.register(fake::group("mcp_test", fake::Never)).is_err(), "a group id is registered once");

    let (tb2, ctx) = (Arc::clone(&tb), fx.ctx());
    let in_flight = tokio::spawn(async move { tb2.call(&ctx, "gate", "{}", Caller::Model, Scope::default()).await });
    started_rx.recv().await.unwrap();
    assert!(tb.unregister("mcp_test"));
    assert!(!tb.registry().tools_for(Scope::default()).iter().any(|t| t.name == "gate"));
    let e = tb.call(&fx.ctx(), "gate", "{}", Caller::Model, Scope::default()).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::NotFound, "{e}");
    open.notify_one();
    assert_eq!(in_flight.await.unwrap().unwrap(), "opened", "a call already running finishes");
}

#[test]
fn persisted_switches_apply_to_groups_registered_later() {
    let fx = Fixture::new(&[("caps.hidden", "mcp_late")]);
    let tb = Toolbox::new(&fx.cfg);
    assert_eq!(tb.unknown_groups(), ["mcp_late"]);
    tb.register(fake::group("mcp_late", fake::Never)).unwrap();
    assert!(tb.unknown_groups().is_empty());
    assert!(!tb.registry().group("mcp_late").unwrap().visible);
}

/// A value of the type `schema` describes.
fn sample(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("string") => json!("x"),
        Some("integer") => json!(schema["minimum"].as_i64().unwrap_or(1).max(1)),
        Some("number") => json!(schema["minimum"].as_f64().unwrap_or(1.5)),
        Some("boolean") => json!(true),
        Some("array") => json!([sample(&schema["items"])]),
        Some("object") => json!({}),
        other => panic!("no sample for type {other:?} in {schema}"),
    }
}

/// A value that is not of the type `schema` describes.
fn wrong(schema: &Value) -> Value {
    match schema["type"].as_str() {
        Some("string") => json!(true),
        Some("integer" | "number" | "boolean") => json!("not-this-type"),
        // Not a string either: some list arguments also take one comma-separated string.
        _ => json!(42),
    }
}

#[test]
fn every_schema_matches_its_argument_type() {
    let fx = Fixture::new(&[]);
    // Every group of this build, as every command builds the toolbox.
    let tb = &fx.toolbox;
    let registry = tb.registry();
    let handlers = tb.handlers();
    assert_eq!(handlers.len(), registry.capabilities().len(), "every tool has a handler");
    for (id, handler) in handlers {
        let cap = registry.get(&id).unwrap();
        let schema: Value = serde_json::from_str(&cap.input_schema).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(schema["type"], "object", "{id}");
        let props = schema["properties"].as_object().cloned().unwrap_or_default();
        let required: BTreeSet<&str> =
            schema["required"].as_array().into_iter().flatten().map(|r| r.as_str().unwrap()).collect();
        let mut fields: BTreeSet<&str> =
            handler.arg_fields().unwrap_or_else(|| panic!("{id}: Args is not a struct")).iter().copied().collect();
        // Aliases are fields serde reads and the schema leaves out: each must be one.
        for alias in handler.arg_aliases() {
            assert!(fields.remove(alias), "{id}: alias `{alias}` is not a name the argument type reads");
        }
        let named: BTreeSet<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(named, fields, "{id}: the schema's properties are the argument fields");
        assert!(required.is_subset(&named), "{id}: required names a property");

        let full: serde_json::Map<String, Value> = props.iter().map(|(k, s)| (k.clone(), sample(s))).collect();
        handler.check_args(&Value::Object(full.clone()).to_string()).unwrap_or_else(|e| panic!("{id}: {e}"));
        for (name, prop) in &props {
            let mut without = full.clone();
            without.remove(name);
            let ok = handler.check_args(&Value::Object(without).to_string()).is_ok();
            assert_eq!(
                ok,
                !required.contains(name.as_str()),
                "{id}: `{name}` is required in the schema iff the type needs it"
            );
            let mut mistyped = full.clone();
            mistyped.insert(name.clone(), wrong(prop));
            assert!(
                handler.check_args(&Value::Object(mistyped).to_string()).is_err(),
                "{id}: `{name}` has the schema's type"
            );
        }
    }
}
