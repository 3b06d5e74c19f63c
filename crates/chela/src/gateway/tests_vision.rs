//! `/mcp/vision/explain` as a service: the camera tool's form, its per-device bearer, both
//! wire formats carrying the photo to the fake LLM, and what is refused before the model.

use bytes::Bytes;
use chela_testkit::Step;
use http_body_util::Full;
use hyper::{Request, StatusCode};
use serde_json::{Value, json};

use super::tests::{Harness, harness, harness_with_settings};
use crate::devices::Devices;

const MAC: &str = "aa:bb:cc:dd:ee:01";
const CLIENT: &str = "3f1c2a4e-1111-4000-8000-000000000001";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0";
const BODY: &str = r#"{"application":{"version":"1.9.0"},"board":{"type":"b"}}"#;

fn ota(path: &str, body: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method("POST")
        .uri(path)
        .header("host", "127.0.0.1:18789")
        .header("Device-Id", MAC)
        .header("Client-Id", CLIENT)
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap()
}

/// Approves the device and returns its vision token.
async fn approved(h: &Harness) -> String {
    let (_, _, a) = h.call(ota("/xiaozhi/ota/", BODY)).await;
    let a: Value = serde_json::from_str(&a).unwrap();
    let code = a["activation"]["code"].as_str().unwrap().to_owned();
    let (status, _) = h.send("POST", "/api/devices/approve", &json!({"code": code}).to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, a) = h.call(ota("/xiaozhi/ota/", BODY)).await;
    assert!(a.contains("websocket"), "{a}");
    Devices::open(h.daemon.workspace()).load().unwrap().vision_token(MAC).unwrap()
}

fn form(question: &str, ctype: &str, file: &[u8]) -> Vec<u8> {
    let mut b = format!(
        "--BoUnD\r\nContent-Disposition: form-data; name=\"question\"\r\n\r\n{question}\r\n--BoUnD\r\n\
         Content-Disposition: form-data; name=\"file\"; filename=\"camera.jpg\"\r\nContent-Type: {ctype}\r\n\r\n"
    )
    .into_bytes();
    b.extend_from_slice(file);
    b.extend_from_slice(b"\r\n--BoUnD--\r\n");
    b
}

fn camera(token: Option<&str>, ctype: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
    let mut r = Request::builder()
        .method("POST")
        .uri("/mcp/vision/explain")
        .header("host", "127.0.0.1:18789")
        .header("Device-Id", MAC)
        .header("Client-Id", CLIENT)
        .header("Content-Type", ctype);
    if let Some(t) = token {
        r = r.header("Authorization", format!("Bearer {t}"));
    }
    r.body(Full::new(Bytes::from(body))).unwrap()
}

const MULTIPART: &str = "multipart/form-data; boundary=BoUnD";

async fn post(h: &Harness, req: Request<Full<Bytes>>) -> (StatusCode, Value) {
    let (status, _, body) = h.call(req).await;
    (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")))
}

#[tokio::test]
async fn the_camera_gets_the_models_answer_in_either_wire_format() {
    for provider in ["anthropic", "openai"] {
        let h = harness_with_settings(
            vec![Step::text("A cup of tea on a desk.")],
            &[("llm.provider", provider), ("llm.api_key", "k"), ("llm.max_retries", "0")],
        );
        // The harness's own fake LLM answers; point the provider at it.
        let base = if provider == "openai" { h.llm.openai_base_url() } else { h.llm.anthropic_base_url() };
        // The owner's own choice: the key goes with the new URL.
        let keep = crate::config::KeyChoice::Keep;
        crate::config::set_overrides(h.daemon.workspace(), &[("llm.base_url", &base)], keep).unwrap();
        h.daemon.reload().unwrap();
        let token = approved(&h).await;
        let (status, a) =
            post(&h, camera(Some(&token), MULTIPART, form("What is on the desk?", "image/jpeg", JPEG))).await;
        assert_eq!(status, StatusCode::OK, "{provider}: {a}");
        assert_eq!(a, json!({"success": true, "action": "RESPONSE", "response": "A cup of tea on a desk."}));
        let req = h.llm.requests()[0].json.clone().unwrap();
        let sent = req["messages"].to_string();
        let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, JPEG);
        assert!(sent.contains(&data), "{provider}: the photo reached the model: {sent}");
        assert!(sent.contains("What is on the desk?"), "{provider}");
        let image_block = if provider == "openai" { "image_url" } else { "\"image\"" };
        assert!(sent.contains(image_block), "{provider}: {sent}");
    }
}

#[tokio::test]
async fn bad_camera_requests_are_refused_before_the_model() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let token = approved(&h).await;
    let good = || form("What?", "image/jpeg", JPEG);
    let cases: Vec<(&str, Request<Full<Bytes>>, StatusCode)> = vec![
        ("no token", camera(None, MULTIPART, good()), StatusCode::UNAUTHORIZED),
        ("wrong token", camera(Some("0123"), MULTIPART, good()), StatusCode::UNAUTHORIZED),
        ("the WebSocket token's hash", camera(Some(&"a".repeat(64)), MULTIPART, good()), StatusCode::UNAUTHORIZED),
        ("not multipart", camera(Some(&token), "application/json", b"{}".to_vec()), StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ("garbage form", camera(Some(&token), MULTIPART, b"--BoUnD\r\n\xff\xfe".to_vec()), StatusCode::BAD_REQUEST),
        ("no file", camera(Some(&token), MULTIPART, b"--BoUnD--\r\n".to_vec()), StatusCode::BAD_REQUEST),
        (
            "non-image file",
            camera(Some(&token), MULTIPART, form("What?", "text/plain", b"hello")),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "huge body",
            camera(Some(&token), MULTIPART, form("What?", "image/jpeg", &vec![0xff; 3 << 20])),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            "GET",
            Request::get("/mcp/vision/explain")
                .header("host", "127.0.0.1:18789")
                .body(Full::new(Bytes::new()))
                .unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ];
    for (what, req, want) in cases {
        let (status, a) = post(&h, req).await;
        assert_eq!(status, want, "{what}: {a}");
        assert_eq!(a["success"], false, "{what}");
        assert!(a["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {a}");
    }
    // A revoked device's token stops working at once.
    let (status, _) = h.send("POST", "/api/devices/revoke", &json!({"id": MAC}).to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post(&h, camera(Some(&token), MULTIPART, good())).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(h.llm.requests().is_empty(), "nothing refused reached the model");
}

#[tokio::test]
async fn the_camera_passes_without_the_gateway_token_but_needs_its_own() {
    let h = harness(vec![Step::text("ok")], "0.0.0.0:18789", Some("gw-token"));
    let mut req = ota("/xiaozhi/ota/", BODY);
    req.headers_mut().insert("host", "192.168.1.10:18789".parse().unwrap());
    let (_, _, a) = h.call(req).await;
    let a: Value = serde_json::from_str(&a).unwrap();
    let code = a["activation"]["code"].as_str().unwrap().to_owned();
    Devices::open(h.daemon.workspace()).edit(|s| s.approve(&code, h.daemon.clock().unix_secs_u64())).unwrap();
    let mut req = ota("/xiaozhi/ota/", BODY);
    req.headers_mut().insert("host", "192.168.1.10:18789".parse().unwrap());
    h.call(req).await;
    let token = Devices::open(h.daemon.workspace()).load().unwrap().vision_token(MAC).unwrap();
    let mut req = camera(Some(&token), MULTIPART, form("What?", "image/jpeg", JPEG));
    req.headers_mut().insert("host", "192.168.1.10:18789".parse().unwrap());
    let (status, a) = post(&h, req).await;
    assert_eq!(status, StatusCode::OK, "{a}");
    let mut req = camera(Some("gw-token"), MULTIPART, form("What?", "image/jpeg", JPEG));
    req.headers_mut().insert("host", "192.168.1.10:18789".parse().unwrap());
    let (status, _) = post(&h, req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the gateway token is not a device's");
}
