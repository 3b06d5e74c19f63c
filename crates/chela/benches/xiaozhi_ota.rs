//! A xiaozhi device's OTA check through the real gateway: `chela run` on a fresh workspace and
//! 127.0.0.1, one keep-alive connection, the firmware's headers and a system-info body. Two
//! series: a device waiting for approval (its code is looked up and `last_seen` written) and an
//! approved device (its first check draws, hashes and stores its token; the later ones, without
//! proof of that token, get the URL alone and write nothing). A write is a locked
//! read-modify-write of `state/devices.json` with an fsync'd atomic replace, which dominates.
//!
//! Run: `cargo bench -p chela --bench xiaozhi_ota` (the binary is `$CHELA_BIN`, else the one
//! cargo built for this bench). `CHELA_BENCH_ITERS` sets the requests per series (default 300).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use chela_testkit::daemon::{Running, command};

const BODY: &str = r#"{"version":2,"language":"en-US","mac_address":"aa:bb:cc:dd:ee:01","chip_model_name":"esp32s3",
"application":{"name":"xiaozhi","version":"1.9.0","elf_sha256":"00"},"board":{"type":"bread-compact-wifi","name":"b"}}"#;

fn request(r: &mut BufReader<TcpStream>, w: &mut TcpStream, mac: &str) -> (u16, String) {
    let head = format!(
        "POST /xiaozhi/ota/ HTTP/1.1\r\nHost: 127.0.0.1\r\nDevice-Id: {mac}\r\nClient-Id: 3f1c2a4e-0000-4000-8000-00000000000b\r\n\
         Activation-Version: 1\r\nUser-Agent: bread-compact-wifi/1.9.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        BODY.len()
    );
    w.write_all(head.as_bytes()).unwrap();
    w.write_all(BODY.as_bytes()).unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut len = 0;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        if h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn series(addr: SocketAddr, mac: &str, iters: usize) -> Vec<Duration> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        let (status, body) = request(&mut r, &mut w, mac);
        times.push(t.elapsed());
        assert_eq!(status, 200, "{body}");
    }
    times.sort();
    times
}

fn show(name: &str, t: &[Duration]) {
    let at = |q: f64| t[((t.len() as f64 - 1.0) * q) as usize];
    println!(
        "| {name} | {:.2} ms | {:.2} ms | {:.2} ms |",
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        t[t.len() - 1].as_secs_f64() * 1e3
    );
}

fn main() {
    let iters: usize = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let bin = std::env::var("CHELA_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_chela").to_owned());
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let chela = |root: &Path| command(&bin, root, home.path());
    let mut run = chela(dir.path());
    run.arg("run").env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0");
    let daemon = Running::start(run, Duration::from_secs(60));
    let addr = daemon.addr();
    let waiting = series(addr, "aa:bb:cc:dd:ee:0a", iters);
    let s = TcpStream::connect(addr).unwrap();
    let (_, body) =
        request(&mut BufReader::new(s.try_clone().unwrap()), &mut s.try_clone().unwrap(), "aa:bb:cc:dd:ee:0b");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let code = v["activation"]["code"].as_str().unwrap();
    let out = chela(dir.path()).args(["device", "approve", code]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bound = series(addr, "aa:bb:cc:dd:ee:0b", iters);
    drop(daemon);
    println!("{iters} OTA requests per series, one keep-alive connection:\n");
    println!("| device | median | p99 | max |\n|---|---|---|---|");
    show("waiting (activation code)", &waiting);
    show("approved (URL, token kept)", &bound);
}
