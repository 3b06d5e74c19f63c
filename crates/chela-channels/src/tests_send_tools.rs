//! Every tool with which Chela writes to a chat on its own, checked by one fixture: the
//! channels' send tools and the `im` group's. Each schema names exactly the fields its argument
//! type reads, so the model is never asked for an argument that is ignored or missing.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::access::Gate;
use crate::net::{ClientOptions, HttpClient};
use crate::testing::Fixture;

#[test]
fn every_send_tool_schema_names_its_argument_fields() {
    let fx = Fixture::new(&[]);
    let gate = Arc::new(Gate::open(&fx.ws).unwrap());
    let http = HttpClient::new(ClientOptions::default());
    // Never called: the groups are built as their channels build them, to read their specs.
    let nowhere = "http://127.0.0.1:9";
    let before: BTreeSet<String> = fx.toolbox.handlers().into_iter().map(|(id, _)| id).collect();
    for group in [
        super::telegram::tool::group(super::telegram::Api::new(http.clone(), nowhere, "1:test"), Arc::clone(&gate)),
        super::feishu::tool::group(
            Arc::new(super::feishu::Api::new(http, nowhere, "cli_test", "s")),
            Arc::clone(&gate),
        ),
        super::ws::tool::group(Arc::default()),
        crate::daemon::im::group(Arc::default(), gate),
    ] {
        fx.toolbox.register(group).unwrap();
    }
    let registry = fx.toolbox.registry();
    let mut checked = Vec::new();
    for (id, handler) in fx.toolbox.handlers().into_iter().filter(|(id, _)| !before.contains(id)) {
        let cap = registry.get(&id).unwrap();
        let schema: Value = serde_json::from_str(&cap.input_schema).unwrap_or_else(|e| panic!("{id}: {e}"));
        let mut named: Vec<&str> = schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
        named.sort_unstable();
        let mut fields = handler.arg_fields().unwrap_or_else(|| panic!("{id}: Args is not a struct")).to_vec();
        fields.sort_unstable();
        assert_eq!(named, fields, "{id}");
        checked.push(id);
    }
    checked.sort_unstable();
    assert_eq!(
        checked,
        ["feishu_send_message", "im_send_media", "im_send_text", "local_send_text", "telegram_send_text"]
    );
}
