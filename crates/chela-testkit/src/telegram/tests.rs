//! The fake over real HTTP, with a minimal blocking HTTP/1.1 client (no shared code with Chela).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{FakeTelegram, Hostile};

const TOKEN: &str = "123456:TEST-token";

fn raw(fake: &FakeTelegram, path: &str, content_type: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(fake.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = std::str::from_utf8(&out[9..12]).unwrap().parse().unwrap();
    (status, out[split + 4..].to_vec())
}

fn call(fake: &FakeTelegram, method: &str, params: Value) -> (u16, Value) {
    let (status, body) = raw(fake, &format!("/bot{TOKEN}/{method}"), "application/json", params.to_string().as_bytes());
    (status, serde_json::from_slice(&body).unwrap())
}

#[test]
fn get_updates_honours_offset_and_long_polls() {
    let fake = FakeTelegram::start(TOKEN);
    let first = fake.push_text(42, 42, "hello");
    let second = fake.push_text(42, 42, "/start now");
    let (status, got) = call(&fake, "getUpdates", json!({"offset": 0, "timeout": 0}));
    assert_eq!(status, 200);
    let updates = got["result"].as_array().unwrap();
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0]["update_id"], first);
    assert_eq!(updates[1]["message"]["entities"][0], json!({"offset": 0, "length": 6, "type": "bot_command"}));
    // Confirming the first leaves only the second.
    let (_, got) = call(&fake, "getUpdates", json!({"offset": first + 1}));
    assert_eq!(got["result"].as_array().unwrap().len(), 1);
    assert_eq!(fake.unconfirmed(), 1);
    // A long poll returns as soon as an update arrives, not at its timeout.
    let started = Instant::now();
    let poll = std::thread::spawn({
        let addr = fake.addr();
        move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let body = format!(r#"{{"offset":{},"timeout":30}}"#, second + 1);
            let head = format!(
                "POST /bot{TOKEN}/getUpdates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(body.as_bytes()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        }
    });
    fake.wait_calls("getUpdates", 3, Duration::from_secs(10));
    let third = fake.push_text(42, 42, "later");
    let got = poll.join().unwrap();
    assert!(got.contains(&format!("\"update_id\":{third}")), "{got}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn wrong_token_is_401_and_unknown_method_404() {
    let fake = FakeTelegram::start(TOKEN);
    let (status, body) = raw(&fake, "/botWRONG/getMe", "application/json", b"{}");
    assert_eq!(status, 401);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["description"], "Unauthorized");
    assert_eq!(call(&fake, "noSuchMethod", json!({})).0, 404);
    assert_eq!(call(&fake, "getMe", json!({})).1["result"]["is_bot"], true);
}

#[test]
fn send_message_parses_html_like_telegram() {
    let fake = FakeTelegram::start(TOKEN);
    let (status, got) =
        call(&fake, "sendMessage", json!({"chat_id": 5, "text": "<b>hi</b> &lt;3", "parse_mode": "HTML"}));
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["result"]["text"], "hi <3");
    let (status, got) = call(&fake, "sendMessage", json!({"chat_id": 5, "text": "1 < 2", "parse_mode": "HTML"}));
    assert_eq!(status, 400);
    assert_eq!(got["description"], "Bad Request: can't parse entities: Unsupported start tag \"\" at byte offset 2");
    let (status, got) = call(&fake, "sendMessage", json!({"chat_id": 5, "text": "x".repeat(4097)}));
    assert_eq!((status, got["description"].as_str().unwrap()), (400, "Bad Request: message is too long"));
    // 4096 astral characters are 8192 units: too long as Telegram counts.
    assert_eq!(call(&fake, "sendMessage", json!({"chat_id": 5, "text": "😀".repeat(2049)})).0, 400);
    assert_eq!(call(&fake, "sendMessage", json!({"chat_id": 5, "text": "😀".repeat(2048)})).0, 200);
    assert_eq!(fake.sent().len(), 2);
    let id = fake.sent()[0].message_id;
    let (status, _) = call(&fake, "editMessageText", json!({"chat_id": 5, "message_id": id, "text": "edited"}));
    assert_eq!(status, 200);
    assert_eq!(fake.sent()[0].text, "edited");
}

#[test]
fn rate_limit_answers_429_with_retry_after() {
    let fake = FakeTelegram::start(TOKEN);
    fake.rate_limit(1, 3);
    let (status, got) = call(&fake, "sendMessage", json!({"chat_id": 5, "text": "a"}));
    assert_eq!(status, 429);
    assert_eq!(
        got,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3", "parameters": {"retry_after": 3}})
    );
    assert_eq!(call(&fake, "sendMessage", json!({"chat_id": 5, "text": "a"})).0, 200);
}

#[test]
fn files_download_and_upload() {
    let fake = FakeTelegram::start(TOKEN);
    fake.push_photo(7, 7, vec![0xFF, 0xD8, 0xFF, 1, 2, 3], "look");
    let (_, got) = call(&fake, "getUpdates", json!({}));
    let photo = &got["result"][0]["message"]["photo"];
    let largest = photo.as_array().unwrap().last().unwrap();
    assert_eq!(largest["file_size"], 6);
    let (_, file) = call(&fake, "getFile", json!({"file_id": largest["file_id"]}));
    let path = file["result"]["file_path"].as_str().unwrap();
    let (status, bytes) = raw(&fake, &format!("/file/bot{TOKEN}/{path}"), "text/plain", b"");
    assert_eq!((status, bytes), (200, vec![0xFF, 0xD8, 0xFF, 1, 2, 3]));

    let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n9\r\n--XyZ\r\nContent-Disposition: form-data; name=\"document\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nline\r\n\r\n--XyZ--\r\n";
    let (status, got) = raw(&fake, &format!("/bot{TOKEN}/sendDocument"), "multipart/form-data; boundary=XyZ", body);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&got));
    let sent = fake.sent();
    assert_eq!(sent[0].chat_id, 9);
    assert_eq!(sent[0].file, Some(("a.txt".to_string(), b"line\r\n".to_vec())));
}

#[test]
fn a_second_poller_conflicts_and_hostile_answers_are_served_once() {
    let fake = FakeTelegram::start(TOKEN);
    let waiting = std::thread::spawn({
        let fake_addr = fake.addr();
        move || {
            let mut s = TcpStream::connect(fake_addr).unwrap();
            let body = br#"{"timeout":20}"#;
            let head = format!(
                "POST /bot{TOKEN}/getUpdates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(body).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        }
    });
    fake.wait_calls("getUpdates", 1, Duration::from_secs(10));
    assert_eq!(call(&fake, "getUpdates", json!({})).1["result"], json!([]));
    let first = waiting.join().unwrap();
    assert!(first.starts_with("HTTP/1.1 409"), "{first}");
    fake.hostile([Hostile::Garbage, Hostile::Huge(100_000)]);
    let (status, body) = raw(&fake, &format!("/bot{TOKEN}/getUpdates"), "application/json", b"{}");
    assert_eq!(status, 200);
    assert!(serde_json::from_slice::<Value>(&body).is_err());
    let (_, huge) = call(&fake, "getUpdates", json!({}));
    assert_eq!(huge["result"][0]["message"]["text"].as_str().unwrap().len(), 100_000);
    assert_eq!(call(&fake, "getUpdates", json!({})).1["result"], json!([]));
}
