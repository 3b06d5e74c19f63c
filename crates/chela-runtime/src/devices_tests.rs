use super::*;

const MAC: &str = "aa:bb:cc:dd:ee:01";
const CLIENT: &str = "3f1c2a4e-0000-4000-8000-000000000001";

/// An OTA check from `source` 10.0.0.1 without a bearer, allowed a new code.
fn ota(s: &mut DeviceState, id: &str, client: &str, now: u64, max: usize, r: &[u8; 48]) -> Admission {
    check(s, id, client, None, "10.0.0.1", now, max, r).unwrap()
}

#[allow(clippy::too_many_arguments)]
fn check(
    s: &mut DeviceState,
    id: &str,
    client_id: &str,
    bearer: Option<&str>,
    source: &str,
    now: u64,
    max: usize,
    r: &[u8; 48],
) -> Result<Admission, DeviceError> {
    let c = Check { id, client_id, info: Info::default(), bearer, source, now };
    s.ota(c, max, r, || Ok(()))
}

fn rnd(seed: u8) -> [u8; 48] {
    let mut r = [0u8; 48];
    for (i, b) in r.iter_mut().enumerate() {
        *b = seed.wrapping_mul(31).wrapping_add(i as u8);
    }
    r
}

#[test]
fn a_new_device_waits_with_a_code_until_approved_then_gets_a_token_once() {
    let mut s = DeviceState::default();
    let Admission::Waiting { code, challenge } = ota(&mut s, MAC, CLIENT, 100, 16, &rnd(1)) else {
        panic!("a new device is bound")
    };
    assert_eq!(code.len(), 6);
    // The same device asking again keeps its code.
    assert_eq!(
        ota(&mut s, MAC, CLIENT, 101, 16, &rnd(2)),
        Admission::Waiting { code: code.clone(), challenge: challenge.clone() }
    );
    assert_eq!(s.activate(MAC, CLIENT, None, 102), Activation::Waiting);
    assert_eq!(s.activate(MAC, CLIENT, Some("not-it"), 102), Activation::WrongChallenge);
    assert_eq!(s.activate(MAC, "other", None, 102), Activation::Unknown);
    let d = s.approve(&code, 103).unwrap();
    assert_eq!((d.id.as_str(), d.state, d.token_sha256.as_str()), (MAC, State::Approved, ""));
    assert_eq!(s.activate(MAC, CLIENT, Some(&challenge), 104), Activation::Done);
    let Admission::Bound { token: Some(token) } = ota(&mut s, MAC, CLIENT, 105, 16, &rnd(3)) else {
        panic!("no token after approval")
    };
    assert!(s.token_ok(MAC, CLIENT, &token));
    assert!(!s.devices[0].token_sha256.contains(&token), "only the hash is kept");
    // Another Client-Id with the same MAC (an erased flash, or someone else) is not bound.
    assert!(matches!(ota(&mut s, MAC, "someone-else", 107, 16, &rnd(5)), Admission::Waiting { .. }));
    assert!(s.token_ok(MAC, CLIENT, &token), "asking under another Client-Id takes nothing away");
    s.revoke(MAC).unwrap();
    assert!(!s.token_ok(MAC, CLIENT, &token));
    assert!(matches!(ota(&mut s, MAC, CLIENT, 108, 16, &rnd(6)), Admission::Waiting { .. }));
}

/// Approves MAC/CLIENT and returns the token its first OTA check got.
fn bound(s: &mut DeviceState) -> String {
    let Admission::Waiting { code, .. } = ota(s, MAC, CLIENT, 100, 16, &rnd(1)) else { panic!("bound at once") };
    s.approve(&code, 101).unwrap();
    let Admission::Bound { token: Some(token) } = ota(s, MAC, CLIENT, 102, 16, &rnd(2)) else { panic!("no token") };
    token
}

#[test]
fn repeating_an_approved_devices_mac_and_client_id_gets_no_token_and_invalidates_nothing() {
    let mut s = DeviceState::default();
    let token = bound(&mut s);
    let before = s.clone();
    for (i, bearer) in [None, Some(""), Some("not-the-token"), Some(&*"x".repeat(64))].into_iter().enumerate() {
        let a = check(&mut s, MAC, CLIENT, bearer, "10.0.0.66", 200, 16, &rnd(10 + i as u8)).unwrap();
        assert_eq!(a, Admission::Bound { token: None }, "{bearer:?}");
    }
    assert_eq!(s, before, "nothing about the device changed");
    // Before its first check, a check from another address than the one that asked for the code
    // gets no token either, and leaves it for the device.
    let mut fresh = DeviceState::default();
    let Admission::Waiting { code, .. } = ota(&mut fresh, MAC, CLIENT, 100, 16, &rnd(1)) else { panic!() };
    fresh.approve(&code, 101).unwrap();
    let replay = check(&mut fresh, MAC, CLIENT, None, "10.0.0.66", 102, 16, &rnd(2)).unwrap();
    assert_eq!(replay, Admission::Bound { token: None });
    assert!(matches!(ota(&mut fresh, MAC, CLIENT, 103, 16, &rnd(3)), Admission::Bound { token: Some(_) }));
    assert!(s.token_ok(MAC, CLIENT, &token));
    // Proof of possession rotates it: the old token stops, the new one works.
    let Admission::Bound { token: Some(next) } =
        check(&mut s, MAC, CLIENT, Some(&token), "10.0.0.1", 300, 16, &rnd(20)).unwrap()
    else {
        panic!("a device that proves its token gets a new one")
    };
    assert_ne!(next, token);
    assert!(!s.token_ok(MAC, CLIENT, &token) && s.token_ok(MAC, CLIENT, &next));
    assert_eq!(s.devices[0].last_seen, 300);
}

#[test]
fn a_token_works_only_with_its_own_mac_and_client_id() {
    let mut s = DeviceState::default();
    let token = bound(&mut s);
    assert!(s.token_ok(MAC, CLIENT, &token));
    assert!(!s.token_ok(MAC, "", &token), "no Client-Id");
    assert!(!s.token_ok(MAC, "3f1c2a4e-0000-4000-8000-000000000002", &token), "another Client-Id");
    assert!(!s.token_ok("aa:bb:cc:dd:ee:02", CLIENT, &token), "another MAC");
}

#[test]
fn made_up_devices_cannot_push_out_a_waiting_code() {
    let mut s = DeviceState::default();
    let Admission::Waiting { code, .. } = check(&mut s, MAC, CLIENT, None, "10.0.0.5", 100, 16, &rnd(1)).unwrap()
    else {
        panic!("bound at once")
    };
    // 10,000 made-up MACs from one address: 4 wait, the rest are refused with the way out.
    let mut refused = 0;
    for i in 0..10_000u32 {
        let b = i.to_be_bytes();
        let mac = format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3]);
        let mut r = rnd(b[3]);
        r[32..36].copy_from_slice(&b);
        match check(&mut s, &mac, CLIENT, None, "10.0.0.66", 101, 16, &r) {
            Ok(_) => {}
            Err(DeviceError::Busy(m)) => {
                assert!(m.contains("from 10.0.0.66") && m.contains("chela device deny all"), "{m}");
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((s.pending.len(), refused), (1 + MAX_PENDING_PER_SOURCE, 10_000 - MAX_PENDING_PER_SOURCE));
    // From many addresses: the queue fills up to max_pending and then refuses; the first stays.
    for i in 0..40u32 {
        let b = i.to_be_bytes();
        let mac = format!("06:00:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3]);
        let mut r = rnd(b[3]);
        r[32..36].copy_from_slice(&b);
        let res = check(&mut s, &mac, CLIENT, None, &format!("10.1.0.{i}"), 102, 16, &r);
        assert_eq!(res.is_ok(), i < 16 - 5, "{i}: {res:?}");
        if let Err(e) = res {
            assert!(e.to_string().contains("xiaozhi.max_pending"), "{e}");
        }
    }
    assert_eq!(s.pending.len(), 16);
    let mut codes: Vec<&str> = s.pending.iter().map(|p| p.code.as_str()).collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), 16, "codes are unique");
    assert!(s.pending.iter().any(|p| p.id == MAC && p.code == code), "the real device still waits");
    s.approve(&code, 103).unwrap();
    // The owner clears the rest at once.
    assert_eq!(s.deny_all().len(), 15);
    assert!(matches!(ota(&mut s, "06:00:00:00:00:63", CLIENT, 104, 16, &rnd(3)), Admission::Waiting { .. }));
}

#[test]
fn a_new_client_id_on_a_waiting_mac_does_not_replace_its_request() {
    let mut s = DeviceState::default();
    let Admission::Waiting { code, challenge } = ota(&mut s, MAC, CLIENT, 100, 16, &rnd(1)) else { panic!() };
    let before = s.clone();
    let e = check(&mut s, MAC, "intruder", None, "10.0.0.66", 101, 16, &rnd(2)).unwrap_err();
    assert!(matches!(e, DeviceError::Conflict(_)), "{e}");
    let m = e.to_string();
    assert!(m.contains("another Client-Id") && m.contains("chela device deny") && !m.contains(&code), "{m}");
    assert_eq!(s, before);
    assert_eq!(ota(&mut s, MAC, CLIENT, 102, 16, &rnd(3)), Admission::Waiting { code: code.clone(), challenge });
    let d = s.approve(&code, 103).unwrap();
    assert_eq!(d.client_id, CLIENT);
}

#[test]
fn codes_expire_and_bad_codes_are_explained() {
    let mut s = DeviceState::default();
    let Admission::Waiting { code, .. } = ota(&mut s, MAC, CLIENT, 0, 16, &rnd(1)) else { panic!() };
    let e = s.approve("12345", 1).unwrap_err().to_string();
    assert!(e.contains("6 digits"), "{e}");
    let other = if code == "000000" { "000001" } else { "000000" };
    assert!(s.approve(other, 1).unwrap_err().to_string().contains("chela device list"));
    let e = s.approve(&code, CODE_TTL_SECS + 1).unwrap_err().to_string();
    assert!(e.contains("expired"), "{e}");
    assert_eq!(s.activate(MAC, CLIENT, None, CODE_TTL_SECS + 1), Activation::Unknown);
}

#[test]
fn ids_and_names_are_checked() {
    assert_eq!(normalize_id(" AA:bb:CC:dd:EE:ff ").as_deref(), Some("aa:bb:cc:dd:ee:ff"));
    for bad in ["", "aa:bb", "../../etc/passwd", "aa:bb:cc:dd:ee:fg", "aa:bb:cc:dd:ee:ff:00"] {
        assert_eq!(normalize_id(bad), None, "{bad}");
    }
    assert!(
        valid_client_id(CLIENT) && !valid_client_id("") && !valid_client_id("a b") && !valid_client_id(&"x".repeat(65))
    );
    assert!(plain_bin_name("2.0.6.bin"));
    for bad in ["../x.bin", ".bin", "a/b.bin", "x.elf", "a\0.bin"] {
        assert!(!plain_bin_name(bad), "{bad}");
    }
    let i = Info { board: format!("{}\u{1b}[31m", "b".repeat(200)), ..Info::default() }.clipped();
    assert_eq!(i.board.len(), 64);
}

#[test]
fn the_reader_skips_bad_entries_and_refuses_garbage() {
    let mut s = DeviceState::default();
    let Admission::Waiting { code, .. } = ota(&mut s, MAC, CLIENT, 0, 16, &rnd(1)) else { panic!() };
    s.approve(&code, 1).unwrap();
    let mut v = serde_json::to_value(&s).unwrap();
    v["devices"].as_array_mut().unwrap().push(serde_json::json!({"id": "../../x", "client_id": "c"}));
    v["devices"].as_array_mut().unwrap().push(serde_json::json!(7));
    let (back, skipped) = parse(&v.to_string()).unwrap();
    assert_eq!((back.devices.len(), skipped), (1, 2));
    assert_eq!(back.devices[0], s.devices[0]);
    assert!(parse("not json").is_err());
    assert!(parse("[]").is_err());
}

#[test]
fn the_file_store_writes_atomically_and_leaves_a_broken_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().to_path_buf())).unwrap();
    let store = Devices::open(&ws);
    let code = store
        .edit(|s| match ota(s, MAC, CLIENT, 0, 16, &rnd(1)) {
            Admission::Waiting { code, .. } => Ok(code),
            Admission::Bound { .. } => Err(DeviceError::Rule("bound".into())),
        })
        .unwrap();
    assert_eq!(store.load().unwrap().pending[0].code, code);
    std::fs::write(store.path(), "{ garbage").unwrap();
    let e = store.edit(|s| s.approve(&code, 1)).unwrap_err().to_string();
    // Not written by Chela: refused before it is even parsed, and named with the way out.
    assert!(
        e.contains("devices.json was changed outside Chela") && e.contains("chela state trust devices.json"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(store.path()).unwrap(), "{ garbage");
    // Sealed but not a device store: the parser's own complaint.
    std::fs::write(store.path(), crate::authority::seal(store.path(), br#"{"devices": 7}"#).unwrap()).unwrap();
    let e = store.edit(|s| s.approve(&code, 1)).unwrap_err().to_string();
    assert!(e.contains("not a valid device store"), "{e}");
}

#[test]
fn an_activation_code_comes_from_all_eight_random_bytes() {
    // Eight bytes make the code, not the first alone (which gave only 000000..000255:
    // 8 bits, guessable by anyone on the network while a device waits).
    let mut random = [0u8; 48];
    random[32..40].copy_from_slice(&[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
    let mut s = DeviceState::default();
    let Admission::Waiting { code, .. } = ota(&mut s, MAC, CLIENT, 1_000, 8, &random) else {
        panic!("a new device waits")
    };
    assert_eq!(code, format!("{:06}", 0x0123_4567_89ab_cdefu64 % 1_000_000));
    // Taken codes are skipped: the next device with the same bytes gets the next number.
    let Admission::Waiting { code: next, .. } = ota(&mut s, "aa:bb:cc:dd:ee:02", CLIENT, 1_000, 8, &random) else {
        panic!("a second device waits")
    };
    assert_eq!(next, format!("{:06}", (0x0123_4567_89ab_cdefu64 + 1) % 1_000_000));
    // Codes spread over the whole range.
    let high = (0..64u8).filter(|&i| {
        let mut st = DeviceState::default();
        matches!(ota(&mut st, MAC, CLIENT, 1_000, 8, &rnd(i)), Admission::Waiting { code, .. } if code.parse::<u32>().unwrap() > 255)
    });
    assert!(high.count() > 60);
}

#[test]
fn a_denied_code_is_forgotten_and_the_device_is_no_longer_waiting() {
    let mut s = DeviceState::default();
    let Admission::Waiting { code, .. } = ota(&mut s, MAC, CLIENT, 100, 16, &rnd(1)) else {
        panic!("a new device is bound")
    };
    let other = "aa:bb:cc:dd:ee:02";
    let Admission::Waiting { code: kept, .. } = ota(&mut s, other, CLIENT, 100, 16, &rnd(2)) else {
        panic!("a new device is bound")
    };
    let denied = s.deny(&format!(" {code} ")).unwrap();
    assert_eq!(denied.id, MAC);
    assert_eq!(s.activate(MAC, CLIENT, None, 101), Activation::Unknown);
    assert!(s.approve(&code, 101).is_err(), "a denied code cannot be approved afterwards");
    assert_eq!(s.activate(other, CLIENT, None, 101), Activation::Waiting, "the other device still waits");
    let e = s.deny(&code).unwrap_err().to_string();
    assert!(e.contains("no device is waiting with code") && e.contains("chela device list"), "{e}");
    assert!(s.devices.is_empty(), "denying binds nothing");
    assert_eq!(s.pending.len(), 1);
    assert_eq!(s.pending[0].code, kept);
}

/// The owner's approval is one log line in words, for the daemon's log.
#[test]
fn an_approval_is_logged_with_the_device_and_its_code() {
    let lines = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = std::sync::Arc::clone(&lines);
    let mut s = DeviceState::default();
    let Admission::Waiting { code, .. } = ota(&mut s, MAC, CLIENT, 100, 16, &rnd(1)) else { panic!("not waiting") };
    chela_log::capture(
        chela_log::Level::Info,
        move |l| sink.lock().unwrap().push_str(l),
        || s.approve(&code, 103).unwrap(),
    );
    assert_eq!(*lines.lock().unwrap(), format!(" INFO device {MAC} approved with code {code}\n"));
}

#[test]
fn switching_a_devices_transport_hands_it_a_fresh_token_from_its_own_address_only() {
    let mut s = DeviceState::default();
    let token = bound(&mut s);
    assert_eq!(s.transport_of(MAC), None);
    // The same transport again changes nothing: the device keeps its token.
    s.set_transport(MAC, None).unwrap();
    assert!(s.token_ok(MAC, CLIENT, &token));
    let d = s.set_transport("AA:BB:CC:DD:EE:01", Some(Transport::Mqtt)).unwrap();
    assert_eq!(d.transport, Some(Transport::Mqtt));
    assert_eq!(s.transport_of(MAC), Some(Transport::Mqtt));
    assert!(!s.token_ok(MAC, CLIENT, &token), "the old transport's token is gone");
    // Someone replaying its headers from elsewhere gets nothing; the device's next check does.
    let c = check(&mut s, MAC, CLIENT, None, "10.9.9.9", 110, 16, &rnd(7)).unwrap();
    assert_eq!(c, Admission::Bound { token: None });
    let Admission::Bound { token: Some(fresh) } = ota(&mut s, MAC, CLIENT, 111, 16, &rnd(8)) else {
        panic!("no fresh token after the switch")
    };
    assert!(s.token_ok(MAC, CLIENT, &fresh));
    // It survives the file.
    let text = serde_json::to_string(&s).unwrap();
    assert!(text.contains(r#""transport":"mqtt""#), "{text}");
    assert_eq!(parse(&text).unwrap().0.transport_of(MAC), Some(Transport::Mqtt));
    assert!(s.set_transport("aa:bb:cc:dd:ee:99", Some(Transport::Mqtt)).is_err());
    s.revoke(MAC).unwrap();
    assert!(s.set_transport(MAC, None).is_err(), "a revoked device has no transport to pick");
    assert_eq!(Transport::parse("mqtt"), Some(Transport::Mqtt));
    assert_eq!(Transport::parse("websocket").map(Transport::name), Some("websocket"));
    assert_eq!(Transport::parse("udp"), None);
}

fn mac_of(i: usize) -> String {
    format!("aa:bb:cc:{:02x}:{:02x}:{:02x}", i >> 16, (i >> 8) & 0xff, i & 0xff)
}

#[test]
fn the_bound_device_count_is_held_and_revoked_ones_make_room() {
    let mut s = DeviceState::default();
    for i in 0..MAX_DEVICES {
        let Admission::Waiting { code, .. } = ota(&mut s, &mac_of(i), CLIENT, 100, 16, &rnd(i as u8)) else {
            panic!("bound at once")
        };
        s.approve(&code, 101).unwrap();
    }
    assert_eq!(s.devices.len(), MAX_DEVICES);
    let one_more = mac_of(MAX_DEVICES);
    let Admission::Waiting { code, .. } = ota(&mut s, &one_more, CLIENT, 102, 16, &rnd(7)) else { panic!("bound") };
    let refused = s.approve(&code, 103).unwrap_err().to_string();
    assert!(refused.contains(&format!("{MAX_DEVICES} devices are bound")), "{refused}");
    assert_eq!(s.devices.len(), MAX_DEVICES);
    s.revoke(&mac_of(3)).unwrap();
    s.approve(&code, 104).unwrap();
    assert_eq!(s.devices.len(), MAX_DEVICES, "the revoked device made the room");
    assert!(s.devices.iter().all(|d| d.id != mac_of(3)));
}

#[test]
fn a_full_store_at_its_longest_reads_back_within_the_size_limit() {
    // Every reported string at its clipped longest, in 4-byte characters.
    let long = "\u{1F600}".repeat(200);
    let info = Info {
        board: long.clone(),
        name: long.clone(),
        app_version: long.clone(),
        chip: long.clone(),
        language: long.clone(),
        serial: long,
    }
    .clipped();
    let client = "c".repeat(MAX_CLIENT_ID);
    let source = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".to_owned();
    let mut s = DeviceState::default();
    for i in 0..MAX_DEVICES {
        s.devices.push(Device {
            id: mac_of(i),
            client_id: client.clone(),
            info: info.clone(),
            state: State::Approved,
            token_sha256: "f".repeat(64),
            created: u64::MAX,
            last_seen: u64::MAX,
            source: source.clone(),
            transport: Some(Transport::Websocket),
        });
    }
    // `xiaozhi.max_pending` is at most 1,000.
    for i in 0..1000 {
        s.pending.push(Pending {
            id: mac_of(MAX_DEVICES + i),
            client_id: client.clone(),
            info: info.clone(),
            code: format!("{:06}", 100_000 + i),
            challenge: "f".repeat(64),
            expires_at: u64::MAX,
            created: u64::MAX,
            last_seen: u64::MAX,
            source: source.clone(),
        });
    }
    let json = serde_json::to_vec_pretty(&s).unwrap();
    // The seal adds one member of about a hundred bytes.
    assert!(json.len() as u64 + 256 < MAX_STORE_BYTES, "{} bytes", json.len());
    let (back, skipped) = parse(std::str::from_utf8(&json).unwrap()).unwrap();
    assert_eq!((back.devices.len(), back.pending.len(), skipped), (MAX_DEVICES, 1000, 0));
}
