//! xiaozhi onboarding as a service: the OTA answer's fields, activation, the dashboard's
//! device API, and who may reach which path.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, StatusCode};
use serde_json::{Value, json};

use super::tests::{Harness, harness, harness_with_settings};

const MAC: &str = "AA:BB:CC:DD:EE:01";
const CLIENT: &str = "3f1c2a4e-1111-4000-8000-000000000001";

/// A request as the firmware sends it (`ota.cc`: its headers, its system-info body).
fn device_req(method: &str, path: &str, mac: &str, body: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1:18789")
        .header("Activation-Version", "1")
        .header("Device-Id", mac)
        .header("Client-Id", CLIENT)
        .header("User-Agent", "bread-compact-wifi/1.9.0")
        .header("Accept-Language", "en-US")
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap()
}

const BODY: &str = r#"{"version":2,"language":"en-US","mac_address":"aa:bb:cc:dd:ee:01","uuid":"3f1c2a4e-1111-4000-8000-000000000001",
  "chip_model_name":"esp32s3","application":{"name":"xiaozhi","version":"1.9.0"},"board":{"type":"bread-compact-wifi","name":"b"}}"#;

async fn call(h: &Harness, req: Request<Full<Bytes>>) -> (StatusCode, Value) {
    let (status, _, body) = h.call(req).await;
    (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")))
}

#[tokio::test]
async fn an_unknown_device_gets_a_code_and_after_approval_a_url_and_token() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (status, a) = call(&h, device_req("POST", "/xiaozhi/ota/", MAC, BODY)).await;
    assert_eq!(status, StatusCode::OK, "{a}");
    assert!(a.get("websocket").is_none(), "an unknown device gets no URL: {a}");
    let code = a["activation"]["code"].as_str().unwrap().to_owned();
    assert!(code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()), "{a}");
    assert!(a["activation"]["message"].as_str().unwrap().contains(&code));
    assert_eq!(a["activation"]["timeout_ms"], 30_000);
    assert_eq!(a["firmware"], json!({"version": "1.9.0", "url": "", "force": 0}), "nothing is pushed");
    let ts = a["server_time"]["timestamp"].as_u64().unwrap();
    assert!(ts > 1_700_000_000_000, "milliseconds: {a}");
    assert!(a["server_time"]["timezone_offset"].is_i64());

    let challenge = a["activation"]["challenge"].as_str().unwrap();
    let poll =
        json!({"algorithm": "hmac-sha256", "serial_number": "SN1", "challenge": challenge, "hmac": "00"}).to_string();
    let (status, _) = call(&h, device_req("POST", "/xiaozhi/ota/activate", MAC, &poll)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = call(&h, device_req("POST", "/xiaozhi/ota/activate", MAC, "{}")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "a device without a serial sends {{}}");

    let (status, list) = h.get("/api/devices").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["pending"][0]["code"], code.as_str());
    assert_eq!(list["pending"][0]["board"], "bread-compact-wifi");
    let (status, ok) = h.send("POST", "/api/devices/approve", &json!({"code": code}).to_string()).await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    assert_eq!(ok["id"], "aa:bb:cc:dd:ee:01");
    let (status, _) = call(&h, device_req("POST", "/xiaozhi/ota/activate", MAC, "{}")).await;
    assert_eq!(status, StatusCode::OK);

    let (_, a) = call(&h, device_req("POST", "/xiaozhi/ota/", MAC, BODY)).await;
    assert!(a.get("activation").is_none(), "{a}");
    assert_eq!(a["websocket"]["url"], "ws://127.0.0.1:18789/xiaozhi/v1/");
    assert_eq!(a["websocket"]["version"], 1);
    let token = a["websocket"]["token"].as_str().unwrap();
    assert_eq!(token.len(), 64);
    let stored = std::fs::read_to_string(h.daemon.workspace().root().join("state/devices.json")).unwrap();
    assert!(!stored.contains(token), "the token is kept hashed");
    let (_, list) = h.get("/api/devices").await;
    assert_eq!(list["devices"][0]["token_issued"], true);
    assert!(!list.to_string().contains("token_sha256"), "{list}");

    let (status, r) = h.send("POST", "/api/devices/revoke", r#"{"id":"aa:bb:cc:dd:ee:01"}"#).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let (_, a) = call(&h, device_req("GET", "/xiaozhi/ota/", MAC, "")).await;
    assert!(a.get("websocket").is_none() && a.get("activation").is_some(), "a revoked device starts over: {a}");
}

#[tokio::test]
async fn bad_device_requests_are_explained() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (status, e) = call(&h, device_req("POST", "/xiaozhi/ota/", "not-a-mac", BODY)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("MAC"), "{e}");
    let (status, e) = call(&h, device_req("POST", "/xiaozhi/ota/", MAC, "{not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    let (status, e) = call(&h, device_req("POST", "/xiaozhi/ota/", MAC, &" ".repeat(20_000))).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    let (status, e) = call(&h, device_req("POST", "/xiaozhi/ota/activate", MAC, "{}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "an unknown device is not waiting: {e}");
    let (status, e) = h.send("POST", "/api/devices/approve", r#"{"code":"000000"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("chela device list"), "{e}");
    for name in ["..%2F..%2Fchela.toml", "x.bin", "../state/devices.json"] {
        let (status, _) = call(&h, device_req("GET", &format!("/xiaozhi/ota/download/{name}"), MAC, "")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}");
    }
}

#[tokio::test]
async fn devices_pass_without_the_gateway_token_but_the_dashboard_api_does_not() {
    let h = harness(vec![], "0.0.0.0:18789", Some("gw-token"));
    let mut req = device_req("POST", "/xiaozhi/ota/", MAC, BODY);
    req.headers_mut().insert("host", "192.168.1.10:18789".parse().unwrap());
    let (status, a) = call(&h, req).await;
    assert_eq!(status, StatusCode::OK, "{a}");
    assert!(a["activation"]["code"].is_string());
    let (status, _) = h.get("/api/devices").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_public_url_and_the_off_switch_are_honoured() {
    let h = harness_with_settings(vec![], &[("xiaozhi.public_url", "wss://chela.example/xiaozhi/v1/")]);
    let (_, a) = call(&h, device_req("POST", "/xiaozhi/ota/", MAC, BODY)).await;
    let code = a["activation"]["code"].as_str().unwrap().to_owned();
    h.send("POST", "/api/devices/approve", &json!({"code": code}).to_string()).await;
    let (_, a) = call(&h, device_req("POST", "/xiaozhi/ota/", MAC, BODY)).await;
    assert_eq!(a["websocket"]["url"], "wss://chela.example/xiaozhi/v1/");

    let h = harness_with_settings(vec![], &[("xiaozhi.enabled", "false")]);
    let (status, e) = call(&h, device_req("POST", "/xiaozhi/ota/", MAC, BODY)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(e["error"].as_str().unwrap().contains("xiaozhi.enabled"), "{e}");
}

#[tokio::test]
async fn the_dashboard_denies_a_waiting_code_and_shows_times_in_the_users_zone() {
    let h = harness_with_settings(vec![], &[("timezone", "Etc/GMT-3")]);
    let (_, a) = call(&h, device_req("POST", "/xiaozhi/ota/", MAC, BODY)).await;
    let code = a["activation"]["code"].as_str().unwrap().to_owned();
    let other = "aa:bb:cc:dd:ee:02";
    let (_, b) = call(&h, device_req("POST", "/xiaozhi/ota/", other, BODY)).await;
    let kept = b["activation"]["code"].as_str().unwrap().to_owned();

    let (status, list) = h.get("/api/devices").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["zone"], "Etc/GMT-3");
    let p = list["pending"].as_array().unwrap().iter().find(|p| p["code"] == code.as_str()).unwrap().clone();
    // The zone from the settings, not the machine's: three hours east of UTC, no DST.
    let plus3 = chela_core::zone::Zone::fixed("UTC+3", 3 * 3600);
    let at = |v: &Value| crate::scheduler::local_time(v.as_i64().unwrap(), &plus3);
    assert_eq!(p["last_seen_local"], at(&p["last_seen"]).as_str(), "{p}");
    assert_eq!(p["expires_local"], at(&p["expires_at"]).as_str(), "{p}");
    assert!(p["last_seen_local"].as_str().unwrap().ends_with(" +03:00"), "{p}");
    assert_eq!(p["name"], "b");
    assert_eq!(p["chip"], "esp32s3");

    let (status, d) = h.send("POST", "/api/devices/deny", &json!({"code": code}).to_string()).await;
    assert_eq!(status, StatusCode::OK, "{d}");
    assert_eq!(d, json!({"id": "aa:bb:cc:dd:ee:01", "board": "bread-compact-wifi", "state": "denied"}));
    let (status, _) = call(&h, device_req("POST", "/xiaozhi/ota/activate", MAC, "{}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a denied device is no longer waiting");
    let (_, list) = h.get("/api/devices").await;
    let codes: Vec<&str> = list["pending"].as_array().unwrap().iter().map(|p| p["code"].as_str().unwrap()).collect();
    assert_eq!(codes, [kept.as_str()], "only the denied request is gone");
    assert_eq!(list["devices"], json!([]));

    let (status, e) = h.send("POST", "/api/devices/deny", &json!({"code": code}).to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("no device is waiting with code"), "{e}");
    let (status, e) = h.send("POST", "/api/devices/deny", r#"{"id": "aa:bb:cc:dd:ee:02"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains(r#"{"code": "123456"}"#), "{e}");
    let (status, e) = h.send("POST", "/api/devices/deny", "not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");

    // An approved device shows its last OTA check in the zone too, and revoking it is a sentence
    // when it is not approved.
    h.send("POST", "/api/devices/approve", &json!({"code": kept}).to_string()).await;
    let (_, list) = h.get("/api/devices").await;
    let d = &list["devices"][0];
    assert_eq!(d["state"], "approved");
    assert_eq!(d["last_seen_local"], at(&d["last_seen"]).as_str(), "{d}");
    let (status, e) = h.send("POST", "/api/devices/revoke", r#"{"id":"aa:bb:cc:dd:ee:99"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("no approved device has the id"), "{e}");
    let (status, e) = h.get("/api/devices/nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{e}");
}

#[tokio::test]
async fn the_deny_endpoint_needs_the_gateway_token_like_the_rest_of_the_dashboard() {
    let h = harness(vec![], "0.0.0.0:18789", Some("gw-token"));
    let mut req = device_req("POST", "/xiaozhi/ota/", MAC, BODY);
    req.headers_mut().insert("host", "192.168.1.10:18789".parse().unwrap());
    let (_, a) = call(&h, req).await;
    let code = a["activation"]["code"].as_str().unwrap().to_owned();
    let (status, _) = h.send("POST", "/api/devices/deny", &json!({"code": code}).to_string()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let stored = std::fs::read_to_string(h.daemon.workspace().root().join("state/devices.json")).unwrap();
    assert!(stored.contains(&code), "a refused deny forgot the code");
}

/// The image is read by the response body itself, as the device takes it: no task of its own is
/// left reading for a device that went away or a gateway that stopped.
#[tokio::test(flavor = "current_thread")]
async fn a_firmware_download_is_read_by_its_body_and_leaves_no_task() {
    use http_body_util::BodyExt;
    let h = harness(vec![], "127.0.0.1:18789", None);
    let store = crate::devices::Devices::open(h.daemon.workspace());
    let image: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::create_dir_all(store.firmware_dir()).unwrap();
    std::fs::write(store.firmware_dir().join("2.0.6.bin"), &image).unwrap();
    let offer = crate::devices::FirmwareOffer {
        file: "2.0.6.bin".into(),
        version: "2.0.6".into(),
        device: String::new(),
        size: image.len() as u64,
    };
    store
        .edit(|s| {
            s.firmware = Some(offer);
            Ok(())
        })
        .unwrap();
    let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let before = tasks();

    let resp = h.gw.handle(super::tests::PEER, device_req("GET", "/xiaozhi/ota/download/2.0.6.bin", MAC, "")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-length"], image.len().to_string().as_str());
    assert_eq!(tasks(), before, "no reader task beside the body");
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(!first.is_empty() && first.len() < image.len(), "a piece at a time: {}", first.len());
    assert_eq!(first[..], image[..first.len()]);
    // The device goes away after one piece.
    drop(body);
    assert_eq!(tasks(), before);
}
