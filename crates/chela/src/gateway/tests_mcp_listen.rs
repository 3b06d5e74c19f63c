//! `subscriptions/listen` (2026-07-28) on both transports, driven as the reference clients
//! drive it: the acknowledgment first, a stamped change notice per change, the bounds, the
//! refusals, and the ends (the client's cancel or close, the server's stop).

use std::sync::Arc;

use chela_testkit::FakeLlm;
use hyper::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::tests_mcp::{LOCAL_TOKEN, PEER, Pipe, call, daemon, modern, names, next_event, post};
use crate::channels::mcp::*;
use crate::daemon::Daemon;
use crate::gateway::{Gateway, Limits};

// A listening client hears of a change within a second of it taking effect.
const _: () = assert!(stdio::RELOAD_EVERY.as_millis() < 1000 && http::RELIST.as_millis() < 1000);

fn listen(id: Value, filter: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": LISTEN, "params": modern(json!({"notifications": filter}))})
}

fn stamped(msg: &Value) -> &Value {
    &msg["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_a_listening_client_hears_of_changes_until_it_cancels() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(&llm, &dir, &[]);
    let mut pipe = Pipe::start(Arc::clone(&d));

    pipe.send(&listen(json!("listen-1"), json!({"toolsListChanged": true, "promptsListChanged": true}))).await;
    let ack = pipe.recv().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    // Only what Chela has is honored: tool list changes.
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "{ack}");
    assert_eq!(stamped(&ack), "listen-1");
    assert!(ack.get("id").is_none(), "the request stays open: {ack}");
    // A stream that asked for nothing the server has is acknowledged with nothing, and quiet.
    pipe.send(&listen(json!(7), json!({"resourceSubscriptions": ["file:///x"]}))).await;
    let quiet = pipe.recv().await;
    assert_eq!((quiet["params"]["notifications"].clone(), stamped(&quiet).clone()), (json!({}), json!(7)));

    // Requests go on beside the open streams.
    let list = pipe.ask(2, "tools/list", modern(json!({}))).await;
    assert!(names(&list).contains(&"memory_list".to_owned()), "{list}");

    crate::config::set_override(d.workspace(), "caps.disabled", "memory").unwrap();
    let note = pipe.recv().await;
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    assert_eq!(stamped(&note), "listen-1");
    assert!(note.get("id").is_none(), "{note}");

    // Cancelled, the stream hears no more (and gets no result); a newer one does.
    pipe.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "listen-1"}}))
        .await;
    pipe.send(&listen(json!("listen-2"), json!({"toolsListChanged": true}))).await;
    assert_eq!(stamped(&pipe.recv().await), "listen-2");
    crate::config::set_override(d.workspace(), "caps.disabled", "memory,chat").unwrap();
    let note = pipe.recv().await;
    assert_eq!(
        (note["method"].as_str(), stamped(&note)),
        (Some("notifications/tools/list_changed"), &json!("listen-2"))
    );

    // At the end of stdin each open stream gets its result: the server ended it.
    pipe.to.shutdown().await.unwrap();
    let mut ends = [pipe.recv().await, pipe.recv().await];
    ends.sort_by_key(|e| e["id"].to_string());
    for (end, id) in ends.iter().zip([json!("listen-2"), json!(7)]) {
        assert_eq!(end["id"], id, "{end}");
        assert_eq!(end["result"]["resultType"], "complete", "{end}");
        assert_eq!(end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id, "{end}");
    }
    tokio::time::timeout(super::tests_mcp::WAIT, pipe.served).await.unwrap().unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_listen_refusals_and_the_bound_per_connection() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let mut pipe = Pipe::start(daemon(&llm, &dir, &[]));
    // Not of the handshake era; an unknown revision; a filter that is not one.
    let legacy = json!({"jsonrpc": "2.0", "id": 1, "method": LISTEN, "params": {"notifications": {}}});
    pipe.send(&legacy).await;
    assert_eq!(pipe.recv().await["error"]["code"], METHOD_NOT_FOUND);
    let mut future = listen(json!(2), json!({}));
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    pipe.send(&future).await;
    let e = pipe.recv().await;
    assert_eq!(
        (e["error"]["code"].as_i64(), &e["error"]["data"]["supported"]),
        (Some(UNSUPPORTED_VERSION), &json!([MODERN]))
    );
    for filter in [Value::Null, json!({"toolsListChanged": "yes"}), json!({"resourceSubscriptions": [1]})] {
        let mut msg = listen(json!(3), filter.clone());
        if filter.is_null() {
            msg["params"].as_object_mut().unwrap().remove("notifications");
        }
        pipe.send(&msg).await;
        assert_eq!(pipe.recv().await["error"]["code"], INVALID_PARAMS, "{filter}");
    }

    for n in 0..stdio::MAX_LISTENS {
        pipe.send(&listen(json!(100 + n), json!({"toolsListChanged": true}))).await;
        assert_eq!(pipe.recv().await["method"], "notifications/subscriptions/acknowledged");
    }
    // The same id twice, and one more than the bound, are refused.
    pipe.send(&listen(json!(100), json!({"toolsListChanged": true}))).await;
    assert_eq!(pipe.recv().await["error"]["code"], INVALID_REQUEST);
    pipe.send(&listen(json!(999), json!({"toolsListChanged": true}))).await;
    assert_eq!(pipe.recv().await["error"]["code"], INTERNAL_ERROR);
    pipe.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 100}})).await;
    pipe.send(&listen(json!(999), json!({"toolsListChanged": true}))).await;
    assert_eq!(stamped(&pipe.recv().await), 999);
}

fn gateway(d: &Arc<Daemon>) -> Arc<Gateway> {
    Gateway::new(Arc::clone(d), "127.0.0.1:18789".parse().unwrap(), Some(LOCAL_TOKEN.into()), Limits::default())
}

const MODERN_HEADERS: [(&str, &str); 2] = [("mcp-protocol-version", MODERN), ("mcp-method", LISTEN)];

fn data(event: &str) -> Value {
    let data = event.strip_prefix("event: message\ndata: ").unwrap_or_else(|| panic!("{event}")).trim_end();
    serde_json::from_str(data).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_listen_stream_acknowledges_announces_and_ends_at_a_stop() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(&llm, &dir, &[]);
    let gw = gateway(&d);
    let resp = gw.handle(PEER, post(&listen(json!(1), json!({"toolsListChanged": true})), &MODERN_HEADERS)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut stream = resp.into_body();
    let ack = data(&next_event(&mut stream).await.unwrap());
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!((&ack["params"]["notifications"], stamped(&ack)), (&json!({"toolsListChanged": true}), &json!(1)));

    crate::config::set_override(d.workspace(), "caps.disabled", "memory").unwrap();
    d.reload().unwrap();
    let note = data(&next_event(&mut stream).await.unwrap());
    assert_eq!((note["method"].as_str(), stamped(&note)), (Some("notifications/tools/list_changed"), &json!(1)));

    // A second stream that asked for nothing stays quiet while the first hears the next change.
    let mut quiet = gw.handle(PEER, post(&listen(json!(2), json!({})), &MODERN_HEADERS)).await.into_body();
    assert_eq!(data(&next_event(&mut quiet).await.unwrap())["params"]["notifications"], json!({}));
    crate::config::set_override(d.workspace(), "caps.disabled", "").unwrap();
    d.reload().unwrap();
    assert_eq!(data(&next_event(&mut stream).await.unwrap())["method"], "notifications/tools/list_changed");
    assert_eq!(gw.mcp.listening(), 2);

    // The daemon stops: each stream gets its request's result, then ends, and no task is left.
    d.shutdown().trigger();
    for (body, id) in [(&mut stream, 1), (&mut quiet, 2)] {
        let end = data(&next_event(body).await.unwrap());
        assert_eq!(end["id"], id, "{end}");
        assert_eq!(end["result"]["resultType"], "complete");
        assert_eq!(end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id);
        assert_eq!(next_event(body).await, None);
    }
    assert_eq!(gw.mcp.listening(), 0);
    assert!(!gw.mcp.watching(), "the watcher ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_listen_refusals_and_the_bound() {
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(&llm, &dir, &[]);
    let gw = gateway(&d);
    let body = listen(json!(1), json!({"toolsListChanged": true}));
    // The answer is a stream: a client that takes only JSON is told so.
    let (status, _, text) = call(&gw, post(&body, &[("accept", "application/json")])).await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE, "{text}");
    let any = gw.handle(PEER, post(&body, &[("accept", "*/*"), MODERN_HEADERS[0]])).await;
    assert_eq!(any.headers()["content-type"], "text/event-stream");
    drop(any);
    let (status, _, text) = call(&gw, post(&body, &[("mcp-protocol-version", "2025-11-25")])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    let bad = listen(json!(1), json!({"toolsListChanged": 1}));
    let (status, _, text) = call(&gw, post(&bad, &MODERN_HEADERS)).await;
    assert_eq!(
        (status, serde_json::from_str::<Value>(&text).unwrap()["error"]["code"].as_i64()),
        (StatusCode::BAD_REQUEST, Some(INVALID_PARAMS))
    );
    // Without the revision's _meta there is no such method (and no session to ask in).
    let legacy = json!({"jsonrpc": "2.0", "id": 1, "method": LISTEN, "params": {"notifications": {}}});
    assert_eq!(call(&gw, post(&legacy, &[])).await.0, StatusCode::BAD_REQUEST);

    let mut open = Vec::new();
    for n in 0..http::MAX_LISTENS {
        let resp = gw.handle(PEER, post(&listen(json!(n), json!({"toolsListChanged": true})), &MODERN_HEADERS)).await;
        assert_eq!(resp.status(), StatusCode::OK);
        open.push(resp.into_body());
    }
    let (status, _, text) = call(&gw, post(&body, &MODERN_HEADERS)).await;
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["code"], INTERNAL_ERROR, "{status} {text}");
    // A client that closes its stream frees its place at once.
    drop(open.pop());
    assert_eq!(gw.mcp.listening(), http::MAX_LISTENS - 1);
    let again = gw.handle(PEER, post(&body, &MODERN_HEADERS)).await;
    let mut again = again.into_body();
    assert_eq!(data(&next_event(&mut again).await.unwrap())["method"], "notifications/subscriptions/acknowledged");
    // A client that never reads holds at most its queue.
    for n in 0..100 {
        crate::config::set_override(d.workspace(), "caps.disabled", if n % 2 == 0 { "memory" } else { "" }).unwrap();
        d.reload().unwrap();
        gw.mcp.tools_changed();
    }
    assert_eq!(gw.mcp.queued_listens().iter().max(), Some(&http::STREAM_QUEUE));
    drop(again);
}

/// Any JSON of a client's: nulls, booleans, numbers, strings, and arrays and objects of them
/// whose keys are often the filter's own.
fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z:/]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 32, 4, |inner| {
        let key = prop_oneof![
            Just("toolsListChanged".to_owned()),
            Just("promptsListChanged".to_owned()),
            Just("resourceSubscriptions".to_owned()),
            "[a-zA-Z]{1,8}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Whatever a client sends as `subscriptions/listen`, the answer is an acknowledgment that
/// honors tool changes exactly when they were asked for, or an error response to that request:
/// never a panic, never a kind Chela does not have.
#[test]
fn any_listen_request_is_acknowledged_as_asked_or_refused() {
    use proptest::prelude::*;
    let llm = FakeLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(daemon(&llm, &dir, &[]));
    let config = ProptestConfig { cases: 256, ..ProptestConfig::default() };
    proptest!(config, |(filter in any_json(), id in prop_oneof![any::<u32>().prop_map(Value::from), "[a-z0-9:-]{1,10}".prop_map(Value::from)], version in prop_oneof![Just(MODERN.to_owned()), "[0-9-]{0,10}"])| {
        let mut params = modern(json!({"notifications": filter}));
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(version);
        match server.listen(&id, &params) {
            Ok(l) => {
                prop_assert_eq!(version.as_str(), MODERN);
                prop_assert_eq!(l.tools, filter.get("toolsListChanged") == Some(&json!(true)));
                let ack = l.ack();
                prop_assert_eq!(stamped(&ack), &id);
                let honored = ack["params"]["notifications"].as_object().unwrap();
                prop_assert!(honored.keys().all(|k| k == "toolsListChanged"));
            }
            Err(e) => {
                prop_assert_eq!(&e["id"], &id);
                let code = e["error"]["code"].as_i64().unwrap();
                prop_assert!([UNSUPPORTED_VERSION, INVALID_PARAMS].contains(&code), "{}", e);
            }
        }
    });
}
