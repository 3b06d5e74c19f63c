use super::*;

#[test]
fn passes_the_storage_contract() {
    super::super::contract::check_all(MemStorage::new);
}

#[test]
fn a_crash_keeps_only_what_was_synced() {
    let mut s = MemStorage::new();
    s.append("a", "one\n").unwrap();
    s.crash_at(s.ops() + 1);
    assert_eq!(s.append("a", "two\n"), Err(MemError::Crashed), "the write lands, its fsync crashes");
    assert_eq!(s.contents("a"), Some(&b"one\ntwo\n"[..]), "readers saw it in the page cache");
    s.crash(2);
    assert_eq!(s.contents("a"), Some(&b"one\ntw"[..]), "a prefix of the unsynced bytes: a torn line");

    let mut s = MemStorage::new();
    s.replace("b", b"old\n").unwrap();
    // Crash between the rename and the folder sync: the old file survives.
    s.crash_at(s.ops() + 3);
    assert_eq!(s.replace("b", b"new\n"), Err(MemError::Crashed));
    s.crash(usize::MAX);
    assert_eq!(s.contents("b"), Some(&b"old\n"[..]));
}

#[test]
fn without_fsync_a_crash_loses_appends() {
    let mut s = MemStorage::without_fsync();
    s.append("a", "one\n").unwrap();
    s.crash(0);
    assert_eq!(s.contents("a"), None);
}
