//! A xiaozhi device's identity against someone else on the LAN, on the real `chela run` over
//! 127.0.0.x: its MAC and Client-Id travel in clear on every OTA check, so repeating them must
//! not hand out a token or invalidate the device's; a token opens the WebSocket only with the
//! MAC and Client-Id it was issued to; made-up MACs cannot push out a device's waiting code; and
//! another Client-Id on a waiting MAC does not replace its request. Devices are onboarded the
//! real way (OTA check, `chela device approve`, activation poll, OTA check).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use chela_testkit::daemon::Running;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const MAC: &str = "aa:bb:cc:dd:ee:01";
const CLIENT: &str = "3f1c2a4e-4444-4000-8000-000000000001";
const BODY: &str = r#"{"application":{"name":"xiaozhi","version":"1.9.0"},"board":{"type":"bread-compact-wifi"}}"#;
const HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":false},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;

struct Daemon {
    // First, so the daemon is killed before its folders go.
    _run: Running,
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    addr: SocketAddr,
}

impl Daemon {
    fn start() -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut c = chela(dir.path(), home.path());
        c.arg("run").env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0");
        let run = Running::start(c, Duration::from_secs(30));
        let addr = run.addr();
        Daemon { _run: run, dir, home, addr }
    }

    /// `chela device …`: exit success and stdout+stderr.
    fn device(&self, args: &[&str]) -> (bool, String) {
        let out = chela(self.dir.path(), self.home.path()).arg("device").args(args).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }

    fn store(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state").join("devices.json")).unwrap_or_default()
    }

    /// An OTA-endpoint request from 127.0.0.`from`, as device `mac`/`client`: status and JSON.
    async fn call(&self, from: u8, path: &str, mac: &str, client: &str, extra: &[(&str, &str)]) -> (u16, Value) {
        let mut headers = vec![
            ("Device-Id", mac),
            ("Client-Id", client),
            ("Activation-Version", "1"),
            ("User-Agent", "bread-compact-wifi/1.9.0"),
            ("Content-Type", "application/json"),
        ];
        headers.extend_from_slice(extra);
        let body = if path.ends_with("activate") { "{}" } else { BODY };
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        let mut s = connect_from(from, self.addr).await;
        s.write_all(head.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        timeout(Duration::from_secs(20), s.read_to_end(&mut out)).await.expect("an answer in time").unwrap();
        let text = String::from_utf8_lossy(&out);
        let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let json = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}")))
    }

    async fn ota(&self, mac: &str, client: &str) -> (u16, Value) {
        self.call(1, "/xiaozhi/ota/", mac, client, &[]).await
    }

    /// The real onboarding: code, approval, activation, OTA check with the token.
    async fn onboard(&self, mac: &str, client: &str) -> String {
        let (status, a) = self.ota(mac, client).await;
        assert_eq!(status, 200, "{a}");
        let code = a["activation"]["code"].as_str().expect("a code").to_owned();
        let (ok, out) = self.device(&["approve", &code]);
        assert!(ok, "{out}");
        assert_eq!(self.call(1, "/xiaozhi/ota/activate", mac, client, &[]).await.0, 200);
        let (_, a) = self.ota(mac, client).await;
        a["websocket"]["token"].as_str().unwrap_or_else(|| panic!("no token after approval: {a}")).to_owned()
    }

    /// Opens `/xiaozhi/v1/` with these headers (`None` leaves one out) and says hello; `Err`
    /// is the refusal's HTTP status.
    async fn dial(&self, mac: Option<&str>, client: Option<&str>, token: &str) -> Result<(), u16> {
        let mut req = format!("ws://{}/xiaozhi/v1/", self.addr).into_client_request().unwrap();
        let h = req.headers_mut();
        h.insert("Authorization", format!("Bearer {token}").parse().unwrap());
        if let Some(m) = mac {
            h.insert("Device-Id", m.parse().unwrap());
        }
        if let Some(c) = client {
            h.insert("Client-Id", c.parse().unwrap());
        }
        let stream = TcpStream::connect(self.addr).await.unwrap();
        let mut ws = match tokio_tungstenite::client_async(req, stream).await {
            Ok((ws, _)) => ws,
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => return Err(r.status().as_u16()),
            Err(e) => panic!("{e}"),
        };
        ws.send(Message::text(HELLO)).await.unwrap();
        loop {
            match timeout(Duration::from_secs(20), ws.next()).await.expect("the server's hello in time") {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    assert_eq!(v["type"], "hello", "{v}");
                    return Ok(());
                }
                Some(Ok(_)) => {}
                other => panic!("the connection ended before the hello: {other:?}"),
            }
        }
    }
}

fn chela(root: &Path, home: &Path) -> Command {
    chela_testkit::daemon::command(env!("CARGO_BIN_EXE_chela"), root, home)
}

/// A connection from 127.0.0.`from`: another machine on the LAN, as the gateway sees it.
async fn connect_from(from: u8, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, from)), 0)).unwrap();
    s.connect(to).await.unwrap()
}

#[tokio::test]
async fn repeating_an_approved_devices_mac_and_client_id_gets_no_token_and_its_own_keeps_working() {
    let d = Daemon::start();
    let token = d.onboard(MAC, CLIENT).await;
    let stored = d.store();
    // Someone else on the LAN replays the device's clear-text OTA headers, bare or with a
    // guessed bearer: the WebSocket URL, no token, and nothing changed.
    for extra in [&[][..], &[("Authorization", "Bearer guessed-token")][..]] {
        let (status, a) = d.call(66, "/xiaozhi/ota/", MAC, CLIENT, extra).await;
        assert_eq!(status, 200, "{a}");
        assert_eq!(a["websocket"]["url"], format!("ws://{}/xiaozhi/v1/", d.addr), "{a}");
        assert!(a["websocket"].get("token").is_none() && a.get("activation").is_none(), "{a}");
    }
    assert_eq!(d.store(), stored, "the replay wrote nothing");
    // The device, which keeps the token it stored, still gets in.
    assert_eq!(d.dial(Some(MAC), Some(CLIENT), &token).await, Ok(()));
    // A device that proves it holds its token may rotate it; the old one then stops.
    let (_, a) = d.call(1, "/xiaozhi/ota/", MAC, CLIENT, &[("Authorization", &format!("Bearer {token}"))]).await;
    let next = a["websocket"]["token"].as_str().unwrap_or_else(|| panic!("no rotation: {a}")).to_owned();
    assert_ne!(next, token);
    assert_eq!(d.dial(Some(MAC), Some(CLIENT), &token).await, Err(401));
    assert_eq!(d.dial(Some(MAC), Some(CLIENT), &next).await, Ok(()));
}

#[tokio::test]
async fn the_first_token_goes_only_to_the_address_that_asked_for_the_code() {
    let d = Daemon::start();
    let (_, a) = d.ota(MAC, CLIENT).await;
    let code = a["activation"]["code"].as_str().expect("a code").to_owned();
    let (ok, out) = d.device(&["approve", &code]);
    assert!(ok, "{out}");
    // Someone polling the activation sees the approval at once and replays the device's check
    // from another address before the device makes it: no token, and the device's is left for it.
    assert_eq!(d.call(66, "/xiaozhi/ota/activate", MAC, CLIENT, &[]).await.0, 200);
    let (status, a) = d.call(66, "/xiaozhi/ota/", MAC, CLIENT, &[]).await;
    assert!(status == 200 && a["websocket"].get("token").is_none(), "{a}");
    let (_, a) = d.ota(MAC, CLIENT).await;
    let token = a["websocket"]["token"].as_str().unwrap_or_else(|| panic!("the device got no token: {a}"));
    assert_eq!(d.dial(Some(MAC), Some(CLIENT), token).await, Ok(()));
}

#[tokio::test]
async fn a_token_opens_the_websocket_only_with_its_own_mac_and_client_id() {
    let d = Daemon::start();
    let token = d.onboard(MAC, CLIENT).await;
    let other_mac = "aa:bb:cc:dd:ee:02";
    let other_token = d.onboard(other_mac, "3f1c2a4e-4444-4000-8000-000000000002").await;
    assert_eq!(d.dial(Some(MAC), None, &token).await, Err(401), "no Client-Id");
    assert_eq!(d.dial(Some(MAC), Some("3f1c2a4e-4444-4000-8000-0000000000ff"), &token).await, Err(401));
    assert_eq!(d.dial(Some(other_mac), Some(CLIENT), &token).await, Err(401), "another device's MAC");
    assert_eq!(d.dial(Some(MAC), Some(CLIENT), &other_token).await, Err(401), "another device's token");
    assert_eq!(d.dial(None, Some(CLIENT), &token).await, Err(400), "no Device-Id");
    assert_eq!(d.dial(Some(MAC), Some(CLIENT), &token).await, Ok(()));
}

#[tokio::test]
async fn made_up_macs_do_not_push_out_a_devices_waiting_code() {
    let d = Daemon::start();
    let (_, a) = d.ota(MAC, CLIENT).await;
    let code = a["activation"]["code"].as_str().expect("a code").to_owned();
    // 16 made-up devices from one address: 4 wait, the others are told why not.
    let mut refused = Vec::new();
    for i in 0..16u8 {
        let (status, e) = d.call(66, "/xiaozhi/ota/", &format!("02:00:00:00:00:{i:02x}"), CLIENT, &[]).await;
        if status != 200 {
            refused.push((status, e));
        }
    }
    assert_eq!(refused.len(), 12, "{refused:?}");
    let msg = refused[0].1["error"].as_str().unwrap_or_default().to_owned();
    assert!(refused.iter().all(|(s, _)| *s == 503), "{refused:?}");
    assert!(msg.contains("127.0.0.66") && msg.contains("chela device deny all"), "{msg}");
    // From other addresses too: the queue fills (xiaozhi.max_pending = 16), the first stays.
    for from in 67..72u8 {
        for i in 0..4u8 {
            d.call(from, "/xiaozhi/ota/", &format!("02:00:00:00:{from:02x}:{i:02x}"), CLIENT, &[]).await;
        }
    }
    let (status, e) = d.call(80, "/xiaozhi/ota/", "02:00:00:00:50:00", CLIENT, &[]).await;
    assert!(status == 503 && e["error"].as_str().unwrap().contains("xiaozhi.max_pending"), "{status} {e}");
    assert_eq!(d.call(1, "/xiaozhi/ota/activate", MAC, CLIENT, &[]).await.0, 202, "the device still waits");
    let (ok, list) = d.device(&["list"]);
    assert!(ok && list.contains(&code) && list.contains("from 127.0.0.66"), "{list}");
    let (ok, out) = d.device(&["approve", &code]);
    assert!(ok, "{out}");
    assert_eq!(d.call(1, "/xiaozhi/ota/activate", MAC, CLIENT, &[]).await.0, 200);
    // The owner clears the queue at once; a new device gets a code again.
    let (ok, out) = d.device(&["deny", "all"]);
    assert!(ok && out.contains("15"), "{out}");
    let (status, a) = d.ota("aa:bb:cc:dd:ee:03", CLIENT).await;
    assert!(status == 200 && a["activation"]["code"].is_string(), "{a}");
}

#[tokio::test]
async fn another_client_id_on_a_waiting_mac_does_not_replace_its_request() {
    let d = Daemon::start();
    let (_, a) = d.ota(MAC, CLIENT).await;
    let code = a["activation"]["code"].as_str().expect("a code").to_owned();
    let (status, e) = d.call(66, "/xiaozhi/ota/", MAC, "intruder-client-id", &[]).await;
    let msg = e["error"].as_str().unwrap_or_default();
    assert!(status == 409 && msg.contains("another Client-Id") && !msg.contains(&code), "{status} {e}");
    // The device's own request and code are untouched: approving it binds the device's Client-Id.
    let (_, again) = d.ota(MAC, CLIENT).await;
    assert_eq!(again["activation"]["code"], code.as_str());
    assert_eq!(d.call(66, "/xiaozhi/ota/activate", MAC, "intruder-client-id", &[]).await.0, 403);
    let (ok, out) = d.device(&["approve", &code]);
    assert!(ok, "{out}");
    let (_, a) = d.ota(MAC, CLIENT).await;
    let token = a["websocket"]["token"].as_str().expect("the device's token").to_owned();
    assert_eq!(d.dial(Some(MAC), Some(CLIENT), &token).await, Ok(()));
    let (_, a) = d.call(66, "/xiaozhi/ota/", MAC, "intruder-client-id", &[]).await;
    assert!(a["websocket"].is_null(), "the intruder is not bound: {a}");
}
