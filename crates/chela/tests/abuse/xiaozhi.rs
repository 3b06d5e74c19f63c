//! xiaozhi onboarding against the real `chela run`: a device's whole onboarding with the
//! owner's `chela device approve`, and what a hostile device (or a planted file) can do to the
//! OTA endpoints: oversize and broken bodies, 10,000 made-up devices, an activation flood, a
//! revoked device, path traversal in the firmware download, and a devices.json that is a FIFO,
//! huge or garbage. Each case checks the refusal, the bound, and that the daemon still serves.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use chela_testkit::daemon::{Running, command};
use serde_json::Value;

const MAC: &str = "aa:bb:cc:dd:ee:01";
const CLIENT: &str = "3f1c2a4e-2222-4000-8000-000000000001";

/// `chela run` on a fresh workspace (no model needed), killed when dropped.
struct Daemon {
    // First, so the daemon is killed before its folders go.
    run: Running,
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    addr: SocketAddr,
}

impl Daemon {
    fn start() -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        Daemon::start_in(dir)
    }

    fn start_in(dir: tempfile::TempDir) -> Daemon {
        let home = tempfile::tempdir().unwrap();
        let mut c = chela(dir.path(), home.path());
        c.arg("run").env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0");
        let run = Running::start(c, Duration::from_secs(30));
        let addr = run.addr();
        Daemon { run, dir, home, addr }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn store(&self) -> PathBuf {
        self.root().join("state").join("devices.json")
    }

    /// `chela device …` on the daemon's workspace: exit success and stdout+stderr.
    fn device(&self, args: &[&str]) -> (bool, String) {
        let out = chela(self.root(), self.home.path()).arg("device").args(args).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }

    fn healthy(&self) {
        let mut c = Conn::open(self.addr);
        assert_eq!(c.request("GET", "/health", &[], b"").0, 200, "{}", self.run.log());
    }
}

fn chela(root: &Path, home: &Path) -> Command {
    command(env!("CARGO_BIN_EXE_chela"), root, home)
}

/// One keep-alive HTTP/1.1 connection, as a device's HTTP client holds it.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Conn { w: s.try_clone().unwrap(), r: BufReader::new(s) }
    }

    /// The status and body. Headers are `(name, value)`; Host is added.
    fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Vec<u8>) {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n", body.len());
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        self.w.write_all(head.as_bytes()).unwrap();
        // The server may answer (413) before taking the whole body.
        let _ = self.w.write_all(body);
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        let status = line.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h).unwrap();
            if h == "\r\n" || h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap();
            }
        }
        let mut out = vec![0u8; len];
        self.r.read_exact(&mut out).unwrap();
        (status, out)
    }

    fn ota(&mut self, mac: &str, body: &str) -> (u16, Value) {
        self.device_call("/xiaozhi/ota/", mac, body)
    }

    fn device_call(&mut self, path: &str, mac: &str, body: &str) -> (u16, Value) {
        let headers = [
            ("Device-Id", mac),
            ("Client-Id", CLIENT),
            ("Activation-Version", "1"),
            ("User-Agent", "bread-compact-wifi/1.9.0"),
            ("Content-Type", "application/json"),
        ];
        let (status, body) = self.request("POST", path, &headers, body.as_bytes());
        (status, serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body))))
    }
}

const BODY: &str = r#"{"application":{"name":"xiaozhi","version":"1.9.0"},"board":{"type":"bread-compact-wifi"}}"#;

#[test]
fn a_device_is_onboarded_with_chela_device_approve_and_revoked() {
    let d = Daemon::start();
    let mut c = Conn::open(d.addr);
    let (status, a) = c.ota(MAC, BODY);
    assert_eq!(status, 200, "{a}");
    let code = a["activation"]["code"].as_str().expect("an activation code").to_owned();
    assert!(a.get("websocket").is_none());
    assert_eq!(c.device_call("/xiaozhi/ota/activate", MAC, "{}").0, 202);
    let (ok, list) = d.device(&["list"]);
    assert!(ok && list.contains(&code) && list.contains(MAC), "{list}");
    let (ok, out) = d.device(&["approve", &code]);
    assert!(ok, "{out}");
    assert_eq!(c.device_call("/xiaozhi/ota/activate", MAC, "{}").0, 200);
    let (_, a) = c.ota(MAC, BODY);
    let token = a["websocket"]["token"].as_str().expect("a token after approval").to_owned();
    assert_eq!(a["websocket"]["url"], format!("ws://{}/xiaozhi/v1/", d.addr));
    assert!(!std::fs::read_to_string(d.store()).unwrap().contains(&token));
    let (_, list) = d.device(&["list"]);
    assert!(list.contains("approved") && list.contains("bread-compact-wifi 1.9.0"), "{list}");

    // Revoked: the token hash is gone and the device is back to asking.
    let (ok, out) = d.device(&["revoke", MAC]);
    assert!(ok, "{out}");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(d.store()).unwrap()).unwrap();
    assert_eq!(stored["devices"][0]["state"], "revoked");
    assert_eq!(stored["devices"][0]["token_sha256"], "");
    let (_, a) = c.ota(MAC, BODY);
    assert!(a.get("websocket").is_none() && a["activation"]["code"].is_string(), "{a}");
    let (ok, out) = d.device(&["approve", "12"]);
    assert!(!ok && out.contains("6 digits"), "{out}");
    d.healthy();
}

#[test]
fn hostile_ota_traffic_is_refused_within_bounds() {
    let d = Daemon::start();
    let mut c = Conn::open(d.addr);
    // Oversize and broken bodies.
    let (status, _) = Conn::open(d.addr).request(
        "POST",
        "/xiaozhi/ota/",
        &[("Device-Id", MAC), ("Client-Id", CLIENT)],
        &vec![b' '; 2 << 20],
    );
    assert_eq!(status, 413);
    assert_eq!(c.ota(MAC, "{\"application\":").0, 400);
    assert_eq!(c.ota(MAC, "\u{0}\u{1}garbage").0, 400);
    assert_eq!(c.ota("../../etc/passwd", BODY).0, 400);

    // 10,000 made-up devices: a few get codes, the rest are told to wait; the file stays small.
    let mut refused = 0;
    for i in 0..10_000u32 {
        let b = i.to_be_bytes();
        let mac = format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3]);
        match c.ota(&mac, "").0 {
            200 => {}
            503 => refused += 1,
            other => panic!("device {i}: status {other}"),
        }
    }
    assert!(refused >= 10_000 - 20, "only {refused} refused");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(d.store()).unwrap()).unwrap();
    assert!(stored["pending"].as_array().unwrap().len() <= 16, "{stored}");
    assert!(std::fs::metadata(d.store()).unwrap().len() < 64 * 1024);

    // An activation flood from devices that never asked: refused, nothing written.
    let before = std::fs::read(d.store()).unwrap();
    for i in 0..1000u32 {
        let mac = format!("06:00:00:00:{:02x}:{:02x}", i >> 8, i & 0xff);
        assert_eq!(c.device_call("/xiaozhi/ota/activate", &mac, "{}").0, 403);
    }
    assert_eq!(std::fs::read(d.store()).unwrap(), before);

    // Path traversal in the firmware download name.
    for path in [
        "/xiaozhi/ota/download/..%2F..%2Fchela.toml",
        "/xiaozhi/ota/download/../../chela.toml",
        "/xiaozhi/ota/download/%2e%2e/state/devices.json",
    ] {
        let (status, body) = Conn::open(d.addr).request("GET", path, &[], b"");
        assert!(status == 404 || status == 400, "{path}: {status}");
        assert!(!String::from_utf8_lossy(&body).contains("pending"), "{path}");
    }
    d.healthy();
}

#[test]
fn an_offered_firmware_is_served_only_by_its_name_and_only_to_older_devices() {
    let d = Daemon::start();
    let image: Vec<u8> = std::iter::once(0xE9u8).chain((0..300_000u32).map(|i| (i % 251) as u8)).collect();
    let file = d.root().join("new.bin");
    std::fs::write(&file, &image).unwrap();
    let (ok, out) = d.device(&["firmware", "set", file.to_str().unwrap(), "2.0.6"]);
    assert!(ok, "{out}");
    let mut c = Conn::open(d.addr);
    let (_, a) = c.ota(MAC, BODY);
    let url = a["firmware"]["url"].as_str().unwrap().to_owned();
    assert_eq!(a["firmware"]["version"], "2.0.6");
    let path = url.strip_prefix(&format!("http://{}", d.addr)).expect("a URL on the gateway");
    let (status, body) = c.request("GET", path, &[], b"");
    assert_eq!((status, body.len()), (200, image.len()));
    assert_eq!(body, image);
    let newer = BODY.replace("1.9.0", "2.0.6");
    let (_, a) = c.ota("aa:bb:cc:dd:ee:02", &newer);
    assert_eq!(a["firmware"]["url"], "", "a device already on 2.0.6 is not offered it: {a}");
    let (ok, out) = d.device(&["firmware", "set", d.store().to_str().unwrap_or(""), "3.0"]);
    assert!(!ok && out.contains("ESP32"), "{out}");
    let (ok, _) = d.device(&["firmware", "clear"]);
    assert!(ok);
    assert_eq!(c.request("GET", path, &[], b"").0, 404);
    d.healthy();
}

#[test]
fn a_planted_store_is_reported_and_never_overwritten() {
    let d = Daemon::start();
    let state = d.root().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let store = d.store();
    let check = |what: &str| {
        let start = Instant::now();
        let (status, e) = Conn::open(d.addr).ota(MAC, BODY);
        assert_eq!(status, 503, "{what}: {e}");
        assert!(start.elapsed() < Duration::from_secs(10), "{what}: took {:?}", start.elapsed());
        let (ok, out) = d.device(&["list"]);
        // Garbage is refused as not written by Chela, the others as unreadable: each names the file.
        assert!(!ok && out.contains("devices.json"), "{what}: {out}");
        d.healthy();
    };
    std::fs::write(&store, "{ not json").unwrap();
    check("garbage");
    assert_eq!(std::fs::read_to_string(&store).unwrap(), "{ not json");
    std::fs::write(&store, vec![b' '; 2 << 20]).unwrap();
    check("huge");
    std::fs::remove_file(&store).unwrap();
    let made = Command::new("mkfifo").arg(&store).status().unwrap();
    assert!(made.success());
    check("fifo");
}
