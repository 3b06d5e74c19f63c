//! The device MCP client against an in-process fake device that speaks the firmware's quirks
//! (xiaozhi's): integer ids only, pages cut by the next tool's name, errors
//! without `code`, user-only tools, a camera call that never ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_core::cap::{Caller, Scope};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::fake::{Behaviour, Seen, fake_device, tools, vision};
use super::*;
use crate::testing::Fixture;

struct Rig {
    fx: Fixture,
    peer: Option<Arc<Peer>>,
    seen: Seen,
}

fn rig(b: Behaviour, toolbox: Option<&Arc<Toolbox>>) -> Rig {
    let fx = Fixture::new(&[("tools.timeout_secs", "600")]);
    let tb = toolbox.unwrap_or(&fx.toolbox);
    let (tx, rx) = mpsc::channel(16);
    let peer = Arc::new(attach(tb, "aa:bb:cc:dd:ee:01", vision(), tx));
    let seen = Seen::default();
    fake_device(b, rx, Arc::downgrade(&peer), Arc::clone(&seen));
    Rig { fx, peer: Some(peer), seen }
}

impl Rig {
    fn peer(&self) -> &Peer {
        self.peer.as_ref().unwrap()
    }

    fn ids(&self) -> Vec<String> {
        self.fx.toolbox.registry().in_group("device_aabbccddee01").map(|c| c.id.to_string()).collect()
    }

    async fn call(&self, id: &str, args: Value) -> crate::tools::ToolResult {
        self.fx.toolbox.call(&self.fx.ctx(), id, &args.to_string(), Caller::Model, Scope::default()).await
    }

    fn methods(&self) -> Vec<String> {
        self.seen.lock().unwrap().iter().map(|m| m["method"].as_str().unwrap_or("").to_owned()).collect()
    }
}

#[test]
fn short_ids_are_stable_and_safe() {
    assert_eq!(short_id("aa:bb:cc:dd:ee:01"), "aabbccddee01");
    assert_eq!(short_id("AA-BB-CC-DD-EE-01"), "aabbccddee01");
    let odd = short_id("../a device/é");
    assert_eq!(odd.len(), 16);
    assert!(odd.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(odd, short_id("../a device/é"), "the same id gives the same group");
}

#[tokio::test]
async fn every_page_is_listed_and_user_tools_stay_hidden() {
    let r = rig(Behaviour::default(), None);
    assert_eq!(r.peer().ready().await, Ok(4));
    let mut ids = r.ids();
    ids.sort();
    assert_eq!(
        ids,
        [
            "device_aabbccddee01_self_audio_speaker_set_volume",
            "device_aabbccddee01_self_camera_take_photo",
            "device_aabbccddee01_self_get_device_status",
            "device_aabbccddee01_self_screen_set_theme",
        ]
    );
    let seen = r.seen.lock().unwrap().clone();
    // The handshake as the firmware expects it, integer ids only, and no ping.
    assert_eq!(seen[0]["method"], "initialize");
    assert_eq!(seen[0]["params"]["protocolVersion"], "2024-11-05");
    assert_eq!(seen[0]["params"]["capabilities"]["vision"]["token"], "tok");
    assert_eq!(seen[1]["method"], "notifications/initialized");
    assert!(seen.iter().all(|m| m.get("id").is_none_or(Value::is_u64)), "{seen:?}");
    let pages: Vec<&Value> = seen.iter().filter(|m| m["method"] == "tools/list").collect();
    assert_eq!(pages.len(), 3, "5 tools, 2 to a page");
    assert_eq!(pages[0]["params"], json!({"cursor": "", "withUserTools": false}));
    assert_eq!(pages[1]["params"]["cursor"], "self.reboot", "the cursor is the next tool's name");
    assert!(!r.methods().contains(&"ping".to_owned()));
}

#[tokio::test]
async fn calls_map_names_back_and_errors_without_code_read_well() {
    let r = rig(Behaviour::default(), None);
    r.peer().ready().await.unwrap();
    let out = r.call("device_aabbccddee01_self_audio_speaker_set_volume", json!({"volume": 50})).await;
    assert_eq!(out.unwrap(), "true");
    let call = r.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(call["params"], json!({"name": "self.audio_speaker.set_volume", "arguments": {"volume": 50}}));
    let e = r.call("device_aabbccddee01_self_audio_speaker_set_volume", json!({"volume": 500})).await.unwrap_err();
    assert_eq!(
        e.0,
        "The xiaozhi device aa:bb:cc:dd:ee:01 answered the call to self.audio_speaker.set_volume with an error: \
         Missing valid argument: volume"
    );
    let e = r.call("device_aabbccddee01_self_audio_speaker_set_volume", json!([1])).await.unwrap_err();
    assert_eq!(e.kind(), crate::tools::ToolErrorKind::InvalidArgs);
    // The user-only tool is not callable by its would-be id either.
    assert!(r.call("device_aabbccddee01_self_reboot", json!({})).await.is_err());
}

#[tokio::test]
async fn answers_with_string_ids_or_for_nothing_are_ignored_and_requests_get_errors() {
    let r = rig(Behaviour::default(), None);
    r.peer().ready().await.unwrap();
    // Neither of these may be taken for the answer to a call.
    r.peer().deliver(json!({"jsonrpc": "2.0", "id": "1", "result": {}}));
    r.peer().deliver(json!({"jsonrpc": "2.0", "id": 99, "result": {}}));
    r.peer().deliver(json!({"jsonrpc": "2.0", "method": "notifications/state_changed", "params": {"state": "idle"}}));
    r.peer().deliver(json!("garbage"));
    let out = r.call("device_aabbccddee01_self_get_device_status", json!({})).await.unwrap();
    assert_eq!(out, "{\"battery\":{\"level\":80}}");
    // The notification got no answer: nothing was sent but the call.
    let last: Vec<String> = r.methods().into_iter().rev().take(2).collect();
    assert_eq!(last, ["tools/call", "tools/list"]);
}

#[tokio::test]
async fn disconnecting_mid_call_fails_the_call_at_once_and_removes_the_group() {
    let mut r = rig(Behaviour::default(), None);
    r.peer().ready().await.unwrap();
    let tb = Arc::clone(&r.fx.toolbox);
    let ctx = r.fx.ctx();
    let call = tokio::spawn(async move {
        tb.call(
            &ctx,
            "device_aabbccddee01_self_camera_take_photo",
            r#"{"question":"what?"}"#,
            Caller::Model,
            Scope::default(),
        )
        .await
    });
    // The call is on its way to the device.
    for _ in 0..200 {
        if r.methods().last().map(String::as_str) == Some("tools/call") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(r.methods().last().map(String::as_str), Some("tools/call"));
    drop(r.peer.take());
    let e = tokio::time::timeout(Duration::from_secs(5), call).await.expect("failed at once").unwrap().unwrap_err();
    assert!(e.0.contains("xiaozhi device aa:bb:cc:dd:ee:01: the connection closed"), "{}", e.0);
    assert!(r.ids().is_empty(), "the group went with the device");
}

#[tokio::test]
async fn a_reconnected_device_keeps_its_group_when_the_old_connection_goes() {
    let mut old = rig(Behaviour::default(), None);
    old.peer().ready().await.unwrap();
    let tb = Arc::clone(&old.fx.toolbox);
    let new = rig(Behaviour::default(), Some(&tb));
    new.peer().ready().await.unwrap();
    drop(old.peer.take());
    assert_eq!(old.ids().len(), 4, "the new connection's group stays");
}

#[tokio::test]
async fn tool_lists_are_bounded() {
    let r = rig(Behaviour { per_page: 50, extra: 2000, ..Behaviour::default() }, None);
    assert_eq!(r.peer().ready().await, Ok(MAX_TOOLS));
    // A device that hands back a cursor already used is read no further.
    let r = rig(Behaviour { stuck_cursor: true, ..Behaviour::default() }, None);
    // Page 1: status, volume; page 2 (from volume again): volume, reboot (user-only).
    assert_eq!(r.peer().ready().await, Ok(2));
    let pages = r.methods().iter().filter(|m| *m == "tools/list").count();
    assert_eq!(pages, 2);
}

#[tokio::test(start_paused = true)]
async fn a_device_that_never_answers_initialize_times_out() {
    let r = rig(Behaviour { answers_initialize: false, ..Behaviour::default() }, None);
    let e = r.peer().ready().await.unwrap_err();
    assert!(e.contains("did not answer initialize within 30 s"), "{e}");
    assert!(r.ids().is_empty());
}

/// Waits (bounded) until the group's ids are `want` (sorted).
async fn ids_become(r: &Rig, want: &[&str]) {
    for _ in 0..500 {
        let mut ids = r.ids();
        ids.sort();
        if ids == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the group is {:?}, not {want:?}", r.ids());
}

#[tokio::test]
async fn list_changed_re_lists_and_replaces_the_group() {
    let live = Arc::new(Mutex::new(tools(&Behaviour::default())));
    let r = rig(Behaviour { live: Some(Arc::clone(&live)), ..Behaviour::default() }, None);
    assert_eq!(r.peer().ready().await, Ok(4));
    // The volume tool goes, an LED tool comes.
    live.lock().unwrap().retain(|t| t["name"] != "self.audio_speaker.set_volume");
    live.lock()
        .unwrap()
        .push(json!({"name": "self.led.set_color", "description": "LED", "inputSchema": {"type": "object"}}));
    r.peer().deliver(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    ids_become(
        &r,
        &[
            "device_aabbccddee01_self_camera_take_photo",
            "device_aabbccddee01_self_get_device_status",
            "device_aabbccddee01_self_led_set_color",
            "device_aabbccddee01_self_screen_set_theme",
        ],
    )
    .await;
    let gone = r.call("device_aabbccddee01_self_audio_speaker_set_volume", json!({"volume": 5})).await.unwrap_err();
    assert_eq!(gone.kind(), crate::tools::ToolErrorKind::NotFound, "{}", gone.0);
    assert_eq!(
        r.call("device_aabbccddee01_self_get_device_status", json!({})).await.unwrap(),
        "{\"battery\":{\"level\":80}}"
    );
    // Every tool gone: the group stays, empty, under its name.
    live.lock().unwrap().clear();
    r.peer().deliver(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    ids_become(&r, &[]).await;
    assert!(r.fx.toolbox.registry().group("device_aabbccddee01").is_some(), "the group stays");
}

// Paused time: the re-list gap is measured on tokio's clock, which the runtime moves whenever
// every task waits, so the 6.5 s below take no real time and the counts do not depend on load.
#[tokio::test(start_paused = true)]
async fn a_flood_of_list_changed_is_read_about_once_a_second() {
    let r = rig(Behaviour::default(), None);
    r.peer().ready().await.unwrap();
    let first_pages =
        || r.seen.lock().unwrap().iter().filter(|m| m.pointer("/params/cursor") == Some(&json!(""))).count();
    assert_eq!(first_pages(), 1);
    // 2.5 s of notifications, as fast as they come.
    let start = tokio::time::Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < Duration::from_millis(2500) {
        for _ in 0..100 {
            r.peer().deliver(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        }
        sent += 100;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let during = first_pages() - 1;
    assert!(sent > 10_000, "{sent}");
    assert!((1..=4).contains(&during), "{during} listings for {sent} notifications in 2.5 s");
    // The flood is over: the listing waiting out its gap and the one folded signal are read,
    // then nothing more.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = first_pages() - 1;
    assert!(after <= during + 2, "{during} then {after}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(first_pages() - 1, after, "the peer is quiet: no more listings");
    // Calls still work and the group is whole.
    assert_eq!(r.ids().len(), 4);
    assert!(r.call("device_aabbccddee01_self_get_device_status", json!({})).await.is_ok());
}

// Paused time: the fake device is in memory, so once every task waits, the last listing has
// been answered; the short sleeps below then prove that no further listing follows.
#[tokio::test(start_paused = true)]
async fn a_replaced_connection_does_not_re_list_over_the_new_one() {
    let live = Arc::new(Mutex::new(tools(&Behaviour::default())));
    let mut old = rig(Behaviour { live: Some(Arc::clone(&live)), ..Behaviour::default() }, None);
    old.peer().ready().await.unwrap();
    let tb = Arc::clone(&old.fx.toolbox);
    let new = rig(Behaviour::default(), Some(&tb));
    new.peer().ready().await.unwrap();
    live.lock().unwrap().truncate(1);
    old.peer().deliver(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    // The old connection lists again (its device answers) but must not take the group.
    for _ in 0..500 {
        if old.methods().iter().filter(|m| *m == "tools/list").count() > 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(old.methods().iter().filter(|m| *m == "tools/list").count(), 4, "3 pages, then 1");
    assert_eq!(old.ids().len(), 4, "the new connection's tools stay (one toolbox)");
    drop(old.peer.take());
    assert_eq!(old.ids().len(), 4);
    drop(new);
}
