use super::*;

fn store(dir: &Path) -> PathBuf {
    dir.join(ACCESS_STORE)
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_sealed_store_reads_back_as_the_json_that_was_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    for json in [&b"{}"[..], b"{\n  \"allowed\": [\n    1\n  ]\n}", b"{\"a\":\"seal\"}"] {
        write(&path, &seal(&path, json).unwrap());
        let back = read_sealed(&path, 1 << 20).unwrap().unwrap();
        let want: serde_json::Value = serde_json::from_slice(json).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&back).unwrap(), want);
        // The sealed file itself stays JSON, for people and their tools.
        let on_disk: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk["seal"].as_str().map(str::len), Some(64), "{on_disk}");
    }
}

#[test]
fn a_changed_byte_a_planted_file_and_a_moved_store_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    let sealed = seal(&path, br#"{"allowed": ["telegram:1"]}"#).unwrap();
    write(&path, &sealed);
    read_sealed(&path, 1 << 20).unwrap();

    let tampered = String::from_utf8(sealed.clone()).unwrap().replace("telegram:1", "telegram:9");
    write(&path, tampered.as_bytes());
    let e = read_sealed(&path, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("changed outside Chela") && e.contains("seal does not match"), "{e}");
    assert!(e.contains("chela state trust access.json"), "{e}");

    write(&path, br#"{"allowed": ["telegram:9"]}"#);
    let e = read_sealed(&path, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("it has no seal"), "{e}");

    // The same sealed bytes under another store's name.
    let other = dir.path().join(DEVICES_STORE);
    write(&other, &sealed);
    assert!(matches!(read_sealed(&other, 1 << 20), Err(SealError::Untrusted { .. })));

    // A seal made with another workspace's key.
    let elsewhere = tempfile::tempdir().unwrap();
    let foreign = seal(&store(elsewhere.path()), br#"{"allowed": ["telegram:9"]}"#).unwrap();
    write(&path, &foreign);
    assert!(matches!(read_sealed(&path, 1 << 20), Err(SealError::Untrusted { .. })));
}

#[test]
fn stores_from_before_seals_are_adopted_once_and_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    let old = br#"{"allowed": ["telegram:1"]}"#;
    write(&path, old);
    // The first look makes the key and adopts what is there.
    assert_eq!(read_sealed(&path, 1 << 20).unwrap().unwrap().as_bytes(), old);
    assert!(dir.path().join(KEY_FILE).exists());
    // A change after that is not adopted.
    write(&path, br#"{"allowed": ["telegram:1", "telegram:9"]}"#);
    assert!(matches!(read_sealed(&path, 1 << 20), Err(SealError::Untrusted { .. })));
    // Back to the adopted bytes: trusted again (until Chela writes it sealed).
    write(&path, old);
    read_sealed(&path, 1 << 20).unwrap();
    // A store planted after the key was made is not adopted.
    let devices = dir.path().join(DEVICES_STORE);
    write(&devices, b"{}");
    assert!(matches!(read_sealed(&devices, 1 << 20), Err(SealError::Untrusted { .. })));
}

#[test]
fn the_owner_trusts_a_store_after_checking_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    write(&path, &seal(&path, b"{}").unwrap());
    write(&path, br#"{"allowed": ["telegram:5"]}"#);
    assert_eq!(check(dir.path(), 1 << 20).len(), 1);
    assert!(check(dir.path(), 1 << 20)[0].1.is_err());
    let said = trust(dir.path(), ACCESS_STORE, 1 << 20).unwrap();
    assert!(said.contains("trusted"), "{said}");
    assert!(read_sealed(&path, 1 << 20).unwrap().unwrap().contains("telegram:5"));
    assert!(check(dir.path(), 1 << 20)[0].1.is_ok());
    let e = trust(dir.path(), "../chela.toml", 1 << 20).unwrap_err().to_string();
    assert!(e.contains("not a sealed store"), "{e}");
}

#[test]
fn a_broken_key_file_is_an_error_not_a_new_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    write(&path, &seal(&path, b"{}").unwrap());
    write(&dir.path().join(KEY_FILE), b"garbage");
    let e = read_sealed(&path, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("is not a seal key"), "{e}");
    assert_eq!(std::fs::read(dir.path().join(KEY_FILE)).unwrap(), b"garbage");
    // Moved away: a new key is made, and a store sealed with the old one is not adopted.
    std::fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
    assert!(matches!(read_sealed(&path, 1 << 20), Err(SealError::Untrusted { .. })));
    trust(dir.path(), ACCESS_STORE, 1 << 20).unwrap();
    read_sealed(&path, 1 << 20).unwrap();
}

#[test]
fn the_key_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    seal(&store(dir.path()), b"{}").unwrap();
    let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
}

#[test]
fn protected_names_match_without_case() {
    assert_eq!(protected(b"STATE").map(|p| p.reach), Some(Reach::None));
    assert_eq!(protected(b"Board.JSON").map(|p| p.reach), Some(Reach::ReadOnly));
    assert!(protected(b"notes.md").is_none());
    assert!(protected(BOARD_FILE.as_bytes()).is_some());
}

proptest::proptest! {
    #[test]
    fn a_sealed_store_survives_any_content_and_any_change_is_caught(
        value in proptest::collection::btree_map("[a-z\"\\\\ ]{0,6}", "[ -~\u{e9}\u{4e2d}]{0,12}", 0..5),
        flip in proptest::prelude::any::<proptest::sample::Index>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = store(dir.path());
        let json = serde_json::to_vec_pretty(&value).unwrap();
        let sealed = seal(&path, &json).unwrap();
        write(&path, &sealed);
        let back: std::collections::BTreeMap<String, String> =
            serde_json::from_str(&read_sealed(&path, 1 << 20).unwrap().unwrap()).unwrap();
        proptest::prop_assert_eq!(&back, &value);
        // Any one byte changed (to another printable byte) is refused.
        let mut bad = sealed.clone();
        let i = flip.index(bad.len());
        bad[i] = if bad[i] == b'x' { b'y' } else { b'x' };
        write(&path, &bad);
        proptest::prop_assert!(read_sealed(&path, 1 << 20).is_err());
    }
}
