//! An update pushed to the gateway with `POST /ota` over loopback, as the firmware's gateway
//! task takes it: the head checked (`gateway::request`), the body streamed into RAM flash app
//! slots through `ota::Receiver`, the signature checked before anything is selected, and the
//! answer (`gateway::update_answer`) sent back.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;

use chela_chip::gateway::{self, Request};
use chela_chip::link::Answer;
use chela_chip::ota::{self, CHIP_ESP32C3, Header, Receiver, Update};
use chela_core::flash::RamFlash;
use ed25519_compact::{KeyPair, Seed};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const SECTOR: u32 = 4096;

fn keys(seed: u8) -> KeyPair {
    KeyPair::from_seed(Seed::new([seed; 32]))
}

/// The start of an ESP app image for the C3 (magic, chip id at 12..14), then noise.
fn esp_image(len: usize) -> Vec<u8> {
    let mut img = vec![0xE9, 3, 2, 0x20, 0x72, 0x00, 0x02, 0x42, 0xEE, 0, 0, 0];
    img.extend_from_slice(&CHIP_ESP32C3.to_le_bytes());
    img.resize(24, 0);
    img.extend((0..len - 24).map(|i| (i * 7 + i / 251) as u8));
    img
}

fn update_file(key: &KeyPair, image: &[u8]) -> Vec<u8> {
    let signature = *key.sk.sign(image, None);
    let mut f = Header { image_len: image.len() as u32, signature }.to_bytes().to_vec();
    f.extend_from_slice(image);
    f
}

/// What the chip's flash held after one request.
struct After {
    answer: String,
    otadata: RamFlash,
    slots: [RamFlash; 2],
}

/// Sends `answer`, then reads what the client still sends (bounded) so that closing does not
/// reset the connection under the answer.
fn answer_and_close(mut sock: TcpStream, answer: &[u8]) {
    sock.write_all(answer).unwrap();
    sock.shutdown(Shutdown::Write).unwrap();
    let _ = (&mut sock).take(1 << 20).read_to_end(&mut Vec::new());
}

/// Serves one request the way the firmware's gateway task does, over flash trusting `key`.
fn serve(mut sock: TcpStream, key: &KeyPair) -> (Option<Result<usize, String>>, RamFlash, [RamFlash; 2]) {
    let mut otadata = RamFlash::new(SECTOR, 2);
    let mut slots = [RamFlash::new(SECTOR, 16), RamFlash::new(SECTOR, 16)];
    let mut head = Vec::new();
    let mut buf = [0u8; 700];
    let end = loop {
        let n = sock.read(&mut buf).unwrap_or(0);
        if n == 0 {
            return (None, otadata, slots);
        }
        head.extend_from_slice(&buf[..n]);
        match gateway::head_end(&head) {
            Ok(Some(end)) => break end,
            Ok(None) => {}
            Err(answer) => {
                answer_and_close(sock, answer.as_bytes());
                return (None, otadata, slots);
            }
        }
    };
    let (len, expect) = match gateway::request(&head[..end], TOKEN) {
        Ok(Request::Update { len, expect_continue }) => (len, expect_continue),
        Ok(Request::Chat(_) | Request::Setup) => panic!("only updates are posted here"),
        Err(answer) => {
            answer_and_close(sock, answer.as_bytes());
            return (None, otadata, slots);
        }
    };
    if expect {
        sock.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap();
    }
    let mut report = |_: ota::Progress| {};
    let result = match Update::begin(Some(&*key.pk), CHIP_ESP32C3, &otadata, &slots, 0) {
        Err(e) => Err(e.to_string()),
        Ok(update) => {
            let mut r = Receiver::new(update, &mut slots, &mut report);
            r.head(200, &[]);
            let mut got = head.len() - end;
            let mut going = r.body(&head[end..]);
            while going && got < len {
                let n = sock.read(&mut buf[..(len - got).min(700)]).unwrap_or(0);
                if n == 0 {
                    break;
                }
                got += n;
                going = r.body(&buf[..n]);
            }
            r.end();
            r.finish(&mut otadata).map_err(|e| e.to_string())
        }
    };
    let answer = gateway::update_answer(result.as_ref().copied().map_err(String::as_str));
    answer_and_close(sock, answer.as_bytes());
    (Some(result), otadata, slots)
}

/// Sends `head` and `body` (all of it, or `body` cut short of the length in `head`) to a chip
/// trusting `keys(seed)`; what it answered and holds then.
fn push(seed: u8, head: &str, body: &[u8]) -> After {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let chip = thread::spawn(move || serve(listener.accept().unwrap().0, &keys(seed)));
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    client.write_all(head.as_bytes()).unwrap();
    client.write_all(body).unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    let (_, otadata, slots) = chip.join().unwrap();
    After { answer, otadata, slots }
}

fn head(len: usize, auth: &str) -> String {
    format!("POST /ota HTTP/1.1\r\nHost: chip:18789\r\n{auth}Content-Length: {len}\r\n\r\n")
}

#[test]
fn a_signed_update_posted_with_the_token_is_taken_and_selected() {
    let key = keys(3);
    let image = esp_image(40_000);
    let file = update_file(&key, &image);
    let after = push(3, &head(file.len(), &format!("Authorization: Bearer {TOKEN}\r\n")), &file);
    assert!(after.answer.starts_with("HTTP/1.1 200 OK"), "{}", after.answer);
    assert!(after.answer.contains("slot 1 boots next"), "{}", after.answer);
    assert_eq!(&after.slots[1].bytes()[..image.len()], &image[..]);
    assert_eq!(ota::selected_slot(&ota::entries(&after.otadata).unwrap()), 1);

    // `Expect: 100-continue` (curl's way with large bodies) is answered before the body.
    let h =
        format!("POST /ota?token={TOKEN} HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n", file.len());
    let after = push(3, &h, &file);
    assert!(after.answer.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"), "{}", after.answer);
}

#[test]
fn a_wrong_key_a_cut_body_or_no_token_selects_nothing() {
    let key = keys(3);
    let image = esp_image(40_000);
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let unchanged = |after: &After| {
        assert_eq!(ota::selected_slot(&ota::entries(&after.otadata).unwrap()), 0, "{}", after.answer);
    };

    let forged = update_file(&keys(4), &image);
    let after = push(3, &head(forged.len(), &auth), &forged);
    assert!(after.answer.starts_with("HTTP/1.1 422"), "{}", after.answer);
    assert!(after.answer.contains("signature does not match"), "{}", after.answer);
    unchanged(&after);

    let file = update_file(&key, &image);
    let after = push(3, &head(file.len(), &auth), &file[..30_000]);
    assert!(after.answer.contains("truncated: 30000 of 40080 bytes"), "{}", after.answer);
    unchanged(&after);

    let after = push(3, &head(file.len(), ""), &file);
    assert!(after.answer.starts_with("HTTP/1.1 401"), "{}", after.answer);
    unchanged(&after);
    assert!(after.slots[1].bytes().iter().all(|&b| b == 0xFF), "nothing is written without the token");
}
