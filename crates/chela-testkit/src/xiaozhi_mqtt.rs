//! A xiaozhi device on MQTT + UDP for tests and benchmarks, written from the firmware
//! (`mqtt_protocol.cc`) and sharing no code with Chela: raw MQTT 3.1.1 packets (rumqttc's
//! codec) on its own connection, never a SUBSCRIBE, messages published to `device-server`, and
//! audio datagrams built the firmware's way (the hello's nonce with length, timestamp and
//! sequence written over it, the payload AES-128-CTR-encrypted with that header as the IV).
//!
//! Also the set-up the xiaozhi benchmarks share: a workspace whose device store already holds
//! approved devices with known tokens ([`approved_store`]), and the `chela run` over it
//! ([`voice_daemon`]).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use aes::cipher::{KeyIvInit, StreamCipher};
use bytes::BytesMut;
use rumqttc::mqttbytes::v4::{Connect, ConnectReturnCode, Login, Packet, Publish};
use rumqttc::mqttbytes::{self, QoS};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream, UdpSocket};
use tokio::time::timeout;

/// The firmware's hello on MQTT (protocol version 3, audio over UDP).
pub const HELLO: &str = r#"{"type":"hello","version":3,"features":{"mcp":false},"transport":"udp","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;
/// Longest wait for a packet before a test fails rather than hangs.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The MQTT client id the OTA answer hands device `mac` with Client-Id `client`.
pub fn client_id(mac: &str, client: &str) -> String {
    format!("GID_chela@@@{}@@@{client}", mac.replace(':', "_"))
}

/// SHA-256 of a token, lowercase hex: what the device store keeps instead of the token.
pub fn token_hash(token: &str) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref())
}

/// The MQTT password the OTA answer gives with `token`: HMAC-SHA256 of `chela mqtt|mac|client`
/// keyed by the token's hash.
pub fn password(mac: &str, client: &str, token: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token_hash(token).as_bytes());
    hex(ring::hmac::sign(&key, format!("chela mqtt|{mac}|{client}").as_bytes()).as_ref())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// An audio datagram the firmware's way: `nonce` with the payload length at [2..4), the
/// timestamp at [8..12) and the sequence at [12..16), then the payload encrypted with that
/// header as the IV.
pub fn seal(key: &[u8; 16], nonce: &[u8; 16], timestamp: u32, sequence: u32, payload: &[u8]) -> Vec<u8> {
    let mut h = *nonce;
    h[2..4].copy_from_slice(&u16::try_from(payload.len()).expect("a datagram payload").to_be_bytes());
    h[8..12].copy_from_slice(&timestamp.to_be_bytes());
    h[12..16].copy_from_slice(&sequence.to_be_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(payload);
    ctr::Ctr128BE::<aes::Aes128>::new(key.into(), (&h).into()).apply_keystream(&mut out[16..]);
    out
}

/// The payload of a datagram from the server, decrypted with its header as the IV.
pub fn open(key: &[u8; 16], datagram: &[u8]) -> Vec<u8> {
    let (iv, payload) = datagram.split_first_chunk::<16>().expect("a 16-byte header");
    let mut out = payload.to_vec();
    ctr::Ctr128BE::<aes::Aes128>::new(key.into(), iv.into()).apply_keystream(&mut out);
    out
}

/// Writes one packet.
pub async fn write(tcp: &mut TcpStream, p: &Packet) {
    let mut out = BytesMut::new();
    p.write(&mut out, usize::MAX).expect("a packet the codec writes");
    tcp.write_all(&out).await.expect("the endpoint takes the packet");
}

/// One device: its MQTT connection and, after a hello, its UDP channel.
pub struct Device {
    pub tcp: TcpStream,
    buf: BytesMut,
    /// The device's UDP socket (127.0.0.1, any port).
    pub udp: UdpSocket,
    /// Where Chela pushes to the device: `devices/p2p/<mac_underscored>`.
    topic: String,
    /// From the last hello answer.
    pub key: [u8; 16],
    pub nonce: [u8; 16],
    pub session_id: String,
    /// The `udp` block's server address.
    pub server: Option<SocketAddr>,
    /// The last uplink sequence sent; the first after a hello is 1.
    pub up: u32,
}

impl Device {
    /// CONNECTs from `from` (any local address when `None`) with a login and keep-alive; the
    /// CONNACK's refusal otherwise, after checking the endpoint closed the connection.
    pub async fn connect(
        addr: SocketAddr,
        from: Option<IpAddr>,
        client_id: &str,
        user: &str,
        pass: &str,
        keepalive: u16,
    ) -> Result<Device, ConnectReturnCode> {
        let tcp = match from {
            None => TcpStream::connect(addr).await.expect("the MQTT endpoint accepts"),
            Some(ip) => {
                let sock = if ip.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.unwrap();
                sock.bind(SocketAddr::new(ip, 0)).expect("a local address to dial from");
                sock.connect(addr).await.expect("the MQTT endpoint accepts")
            }
        };
        let mut c = Connect::new(client_id);
        c.keep_alive = keepalive;
        c.login = Some(Login::new(user, pass));
        let topic = match client_id.split("@@@").nth(1) {
            Some(mac) => format!("devices/p2p/{mac}"),
            None => String::new(),
        };
        let mut d = Device {
            tcp,
            buf: BytesMut::new(),
            udp: UdpSocket::bind("127.0.0.1:0").await.unwrap(),
            topic,
            key: [0; 16],
            nonce: [0; 16],
            session_id: String::new(),
            server: None,
            up: 0,
        };
        write(&mut d.tcp, &Packet::Connect(c)).await;
        match d.packet().await {
            Some(Packet::ConnAck(a)) if a.code == ConnectReturnCode::Success => Ok(d),
            Some(Packet::ConnAck(a)) => {
                assert!(d.packet().await.is_none(), "a refused connection is closed");
                Err(a.code)
            }
            other => panic!("expected CONNACK, got {other:?}"),
        }
    }

    /// The next packet; `None` once the endpoint closed the connection.
    pub async fn packet(&mut self) -> Option<Packet> {
        loop {
            match Packet::read(&mut self.buf, 1 << 20) {
                Ok(p) => return Some(p),
                Err(mqttbytes::Error::InsufficientBytes(_)) => {}
                Err(e) => panic!("{e}"),
            }
            let n = timeout(READ_TIMEOUT, self.tcp.read_buf(&mut self.buf)).await.expect("a packet in time");
            if !matches!(n, Ok(k) if k > 0) {
                return None;
            }
        }
    }

    /// Sends one packet.
    pub async fn send(&mut self, p: &Packet) {
        write(&mut self.tcp, p).await;
    }

    /// The next message pushed to the device, checked to come on the device's own topic.
    pub async fn json(&mut self) -> Value {
        loop {
            match self.packet().await {
                Some(Packet::Publish(p)) => {
                    assert_eq!(p.topic, self.topic, "pushed on the device's own topic");
                    return serde_json::from_slice(&p.payload).unwrap();
                }
                Some(_) => {}
                None => panic!("the connection closed"),
            }
        }
    }

    /// Publishes a message to `device-server` at QoS 0, as the firmware does.
    pub async fn publish(&mut self, text: &str) {
        let p = Packet::Publish(Publish::new("device-server", QoS::AtMostOnce, text.as_bytes().to_vec()));
        write(&mut self.tcp, &p).await;
    }

    /// Says [`HELLO`] and takes the answer's `udp` block (key, nonce, server) and session id;
    /// the uplink numbers from 1 again. Returns the answer.
    pub async fn hello(&mut self) -> Value {
        self.hello_with(HELLO).await
    }

    /// [`Device::hello`] with another hello message (features, a wrong version…).
    pub async fn hello_with(&mut self, hello: &str) -> Value {
        self.publish(hello).await;
        let a = self.json().await;
        assert_eq!(a["type"], "hello", "{a}");
        let hex16 = |k: &str| -> [u8; 16] {
            let s = a["udp"][k].as_str().unwrap();
            let v: Vec<u8> = (0..16).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect();
            v.try_into().unwrap()
        };
        self.key = hex16("key");
        self.nonce = hex16("nonce");
        self.session_id = a["session_id"].as_str().unwrap_or_default().to_owned();
        let port = u16::try_from(a["udp"]["port"].as_u64().unwrap()).unwrap();
        self.server = Some(SocketAddr::new(a["udp"]["server"].as_str().unwrap().parse().unwrap(), port));
        self.up = 0;
        a
    }

    /// An uplink datagram with sequence `seq` (timestamp 60 ms a packet).
    pub fn datagram(&self, seq: u32, payload: &[u8]) -> Vec<u8> {
        seal(&self.key, &self.nonce, seq.wrapping_mul(60), seq, payload)
    }

    /// Sends the next uplink packet to the hello's server.
    pub async fn send_audio(&mut self, opus: &[u8]) {
        self.up += 1;
        let d = self.datagram(self.up, opus);
        self.udp.send_to(&d, self.server.expect("a hello first")).await.unwrap();
    }

    /// A typed utterance (`listen detect`) in this session.
    pub async fn detect(&mut self, text: &str) {
        let m = json!({"session_id": self.session_id, "type": "listen", "state": "detect", "text": text});
        self.publish(&m.to_string()).await;
    }

    /// Messages until `tts stop` (included), then the downlink datagrams waiting in the socket
    /// (they were sent before it), each checked for the session's header and decrypted, with
    /// its sequence.
    pub async fn until_tts_stop(&mut self) -> (Vec<Value>, Vec<(u32, Vec<u8>)>) {
        let mut js = Vec::new();
        loop {
            let v = self.json().await;
            let stop = v["type"] == "tts" && v["state"] == "stop";
            js.push(v);
            if stop {
                break;
            }
        }
        let mut audio = Vec::new();
        let mut buf = vec![0u8; 4096];
        while let Ok((n, _)) = self.udp.try_recv_from(&mut buf) {
            let d = &buf[..n];
            assert!(n >= 16, "a datagram has a 16-byte header");
            assert_eq!(&d[..2], &[1, 0]);
            assert_eq!(&d[4..8], &self.nonce[4..8], "the session's ssrc");
            let len = usize::from(u16::from_be_bytes([d[2], d[3]]));
            assert_eq!(len, n - 16, "the header's length is the payload's");
            let seq = u32::from_be_bytes([d[12], d[13], d[14], d[15]]);
            audio.push((seq, open(&self.key, d)));
        }
        (js, audio)
    }
}

/// A device of a benchmark's store: MAC, Client-Id and the token issued to it.
pub struct Approved {
    pub mac: String,
    pub client: String,
    pub token: String,
}

/// Writes `root/state/devices.json` with `devices` approved (their tokens' hashes kept).
pub fn approved_store(root: &Path, devices: &[Approved]) {
    let state = root.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let list: Vec<_> = devices
        .iter()
        .map(|d| {
            json!({"id": d.mac, "client_id": d.client, "info": {}, "state": "approved",
                   "token_sha256": token_hash(&d.token), "created": 1, "last_seen": 1})
        })
        .collect();
    std::fs::write(state.join("devices.json"), json!({"devices": list, "pending": []}).to_string()).unwrap();
}

/// A `chela run` on a fresh workspace holding `devices`, with the model at `llm_base_url`
/// (Anthropic's format) and speech at `audio_base_url`, plus `env` (`CHELA_…` settings).
/// Drop the workspace and home after the daemon.
pub fn voice_daemon(
    bin: &str,
    llm_base_url: &str,
    audio_base_url: &str,
    devices: &[Approved],
    env: &[(&str, &str)],
) -> (crate::daemon::Running, tempfile::TempDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    approved_store(dir.path(), devices);
    let home = tempfile::tempdir().unwrap();
    let mut c = crate::daemon::command(bin, dir.path(), home.path());
    c.arg("run")
        .env("CHELA_GATEWAY__LISTEN", "127.0.0.1:0")
        .env("CHELA_LLM__PROVIDER", "anthropic")
        .env("CHELA_LLM__BASE_URL", llm_base_url)
        .env("CHELA_LLM__API_KEY", "bench-key")
        .env("CHELA_VOICE__ASR_BASE_URL", audio_base_url)
        .env("CHELA_VOICE__TTS_BASE_URL", audio_base_url);
    for (k, v) in env {
        c.env(k, v);
    }
    let daemon = crate::daemon::Running::start(c, Duration::from_secs(30));
    (daemon, dir, home)
}

/// The MQTT and UDP addresses `chela run` says it listens on (waits up to 30 s for the line).
pub fn endpoints(run: &crate::daemon::Running) -> (SocketAddr, SocketAddr) {
    const LINE: &str = "xiaozhi devices connect over MQTT to ";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let log = run.log();
        if let Some(i) = log.find(LINE)
            && let Some((line, _)) = log[i + LINE.len()..].split_once('\n')
        {
            let (tcp, rest) = line.split_once(" (UDP audio on ").expect("the UDP address follows");
            return (tcp.parse().unwrap(), rest.trim_end_matches(')').parse().unwrap());
        }
        assert!(std::time::Instant::now() < deadline, "no MQTT endpoint:\n{log}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_round_trips_and_its_header_is_the_firmwares() {
        let key = [7u8; 16];
        let mut nonce = [0u8; 16];
        nonce[0] = 1;
        nonce[4..8].copy_from_slice(&0xA1B2_C3D4u32.to_be_bytes());
        let d = seal(&key, &nonce, 120, 2, b"opus!");
        assert_eq!(&d[..2], &[1, 0]);
        assert_eq!(&d[2..4], &5u16.to_be_bytes());
        assert_eq!(&d[4..8], &0xA1B2_C3D4u32.to_be_bytes());
        assert_eq!(&d[8..12], &120u32.to_be_bytes());
        assert_eq!(&d[12..16], &2u32.to_be_bytes());
        assert_ne!(&d[16..], b"opus!", "the payload is encrypted");
        assert_eq!(open(&key, &d), b"opus!");
    }

    #[test]
    fn client_ids_and_passwords_are_the_ota_answers() {
        assert_eq!(client_id("aa:bb:cc:dd:ee:ff", "u"), "GID_chela@@@aa_bb_cc_dd_ee_ff@@@u");
        // SHA-256("abc"), FIPS 180-2's example.
        assert_eq!(token_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(password("m", "c", "t").len(), 64);
        assert_ne!(password("m", "c", "t"), password("m", "c", "u"));
    }
}
