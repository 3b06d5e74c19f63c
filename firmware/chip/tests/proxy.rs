//! The chip's CONNECT exchange (`chela_chip::proxy`) against Debian's tinyproxy on loopback
//! (what the host's proxy tests use), and against a loopback peer for the answers tinyproxy
//! does not give.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use chela_chip::proxy::{MAX_ANSWER_HEAD, Proxy, connect_answer};

struct Tinyproxy {
    child: Child,
    port: u16,
    _dir: tempdir::Dir,
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

mod tempdir {
    /// A folder under cargo's scratch folder for tests, removed at the end.
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new(name: &str) -> Dir {
            let d =
                std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Dir(d)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// tinyproxy allowing CONNECT to `allowed_port` only.
fn tinyproxy(name: &str, allowed_port: u16) -> Tinyproxy {
    let dir = tempdir::Dir::new(name);
    let port = free_port();
    let conf = format!(
        "Port {port}\nListen 127.0.0.1\nAllow 127.0.0.1\nDisableViaHeader Yes\nConnectPort {allowed_port}\nLogLevel Connect\nLogFile \"{}\"\n",
        dir.0.join("tinyproxy.log").display()
    );
    std::fs::write(dir.0.join("tinyproxy.conf"), conf).unwrap();
    let child = Command::new("tinyproxy")
        .arg("-d")
        .arg("-c")
        .arg(dir.0.join("tinyproxy.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run tinyproxy ({e}); apt-get install -y tinyproxy"));
    let mut p = Tinyproxy { child, port, _dir: dir };
    // Bounded wait for the process to listen: a real process, not an event this test can await.
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "tinyproxy did not start listening");
        assert!(p.child.try_wait().unwrap().is_none(), "tinyproxy exited at start-up");
        thread::sleep(Duration::from_millis(10));
    }
    p
}

/// Opens the tunnel as the firmware does: head out, answer in pieces until decided.
fn tunnel(proxy: &Proxy, port: u16, dest: u16) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(proxy.connect_head("127.0.0.1", dest).as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut piece = [0u8; 64];
    loop {
        match connect_answer(&buf) {
            Ok(true) => return Ok(s),
            Ok(false) => {}
            Err(e) => return Err(e.reason),
        }
        let n = s.read(&mut piece).unwrap();
        if n == 0 {
            return Err("closed".into());
        }
        buf.extend_from_slice(&piece[..n]);
    }
}

#[test]
fn a_tunnel_through_tinyproxy_carries_bytes_both_ways() {
    let dest = TcpListener::bind("127.0.0.1:0").unwrap();
    let dest_port = dest.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut s, _) = dest.accept().unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        s.write_all(&[&b"echo:"[..], &b[..]].concat()).unwrap();
    });
    let tp = tinyproxy("proxy-ok", dest_port);
    let proxy = Proxy::parse(&format!("http://127.0.0.1:{}", tp.port)).unwrap().unwrap();
    let mut s = tunnel(&proxy, tp.port, dest_port).unwrap();
    s.write_all(b"hello").unwrap();
    let mut back = [0u8; 10];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"echo:hello");
}

#[test]
fn tinyproxy_refusing_the_port_is_a_refusal() {
    let tp = tinyproxy("proxy-refused", 1);
    let proxy = Proxy::parse(&format!("http://127.0.0.1:{}", tp.port)).unwrap().unwrap();
    let e = tunnel(&proxy, tp.port, free_port()).unwrap_err();
    assert_eq!(e, "the proxy refused the tunnel: HTTP/1.1 403 Access violation");
}

#[test]
fn settings_parse_and_mask() {
    assert_eq!(Proxy::parse("").unwrap(), None);
    let p = Proxy::parse("http://u:secret@proxy.lan:3128/").unwrap().unwrap();
    assert_eq!((p.host.as_str(), p.port), ("proxy.lan", 3128));
    assert_eq!(p.shown(), "http://user:****@proxy.lan:3128");
    assert!(!p.shown().contains("secret"));
    // RFC 7617: base64 of user:password.
    assert!(p.connect_head("api.telegram.org", 443).contains("Proxy-Authorization: Basic dTpzZWNyZXQ=\r\n"));
    assert_eq!(
        Proxy::parse("http://proxy.lan").unwrap().unwrap().connect_head("h", 443),
        "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n"
    );
    for bad in [
        "socks5://h:1",
        "https://h:1",
        "http://h:0",
        "http://h:99999",
        "http://",
        "http://h/x",
        "http://nocolon@h:1",
        "http://a b:1",
    ] {
        assert!(Proxy::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn answers_the_firmware_must_not_trust() {
    assert_eq!(connect_answer(b"HTTP/1.1 200 Connection established\r\n"), Ok(false));
    assert_eq!(connect_answer(b"HTTP/1.1 200 OK\r\n\r\n"), Ok(true));
    let early = connect_answer(b"HTTP/1.1 200 OK\r\n\r\n\x16\x03").unwrap_err();
    assert!(early.reason.contains("before the tunnel"), "{early:?}");
    let auth = connect_answer(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n").unwrap_err();
    assert!(auth.reason.contains("user name and password") && !auth.retryable);
    assert!(connect_answer(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").unwrap_err().retryable);
    assert!(connect_answer(b"SSH-2.0-OpenSSH\r\n\r\n").unwrap_err().reason.starts_with("not an HTTP proxy"));
    // A head that never ends is cut at the bound, not buffered.
    let endless = vec![b'x'; MAX_ANSWER_HEAD];
    assert!(connect_answer(&endless).is_err());
    let mut long = b"HTTP/1.1 200 OK\r\n".to_vec();
    long.extend(std::iter::repeat_n(b'x', MAX_ANSWER_HEAD));
    long.extend_from_slice(b"\r\n\r\n");
    assert!(connect_answer(&long).is_err());
}
