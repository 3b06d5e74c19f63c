//! The store against its promises: round trips, reboots, power cuts at every unit of work,
//! bit rot, a full partition, wear, bounds. The flash is [`RamFlash`], which keeps the
//! [`Flash`](super::Flash) contract strictly.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::ops::ControlFlow;

use super::*;
use crate::storage::{Storage, contract};

type Store = FlashStore<RamFlash>;

fn fresh(sector_size: u32, sectors: u32) -> Store {
    FlashStore::open(RamFlash::new(sector_size, sectors)).unwrap()
}

fn reboot(s: Store) -> Store {
    FlashStore::open_with(s.into_flash(), Limits::default()).unwrap()
}

fn read(s: &Store, key: &str, order: Order) -> Vec<(Kind, Vec<u8>)> {
    let mut out = Vec::new();
    s.read(key, order, &mut |r| {
        out.push((r.kind, r.payload.to_vec()));
        ControlFlow::Continue(())
    })
    .unwrap();
    out
}

fn payloads(s: &Store, key: &str) -> Vec<Vec<u8>> {
    read(s, key, Order::OldestFirst).into_iter().map(|(_, p)| p).collect()
}

/// Every key's records, oldest first, and what each key reports as dropped.
type Snapshot = BTreeMap<String, (Vec<(Kind, Vec<u8>)>, u32)>;

fn snapshot(s: &Store) -> Snapshot {
    s.keys().into_iter().map(|k| (k.key.clone(), (read(s, &k.key, Order::OldestFirst), k.dropped))).collect()
}

#[test]
fn records_round_trip_in_order_and_survive_a_reboot() {
    let mut s = fresh(4096, 4);
    s.append_line("tg_1", b"{\"role\":\"user\"}").unwrap();
    s.append_entry("entries.jsonl", b"remember milk").unwrap();
    s.append_line("tg_1", b"{\"role\":\"assistant\"}").unwrap();
    s.append_line("tg_2", b"").unwrap();
    let want = vec![(Kind::Line, b"{\"role\":\"user\"}".to_vec()), (Kind::Line, b"{\"role\":\"assistant\"}".to_vec())];
    assert_eq!(read(&s, "tg_1", Order::OldestFirst), want);
    let mut newest = want.clone();
    newest.reverse();
    assert_eq!(read(&s, "tg_1", Order::NewestFirst), newest);
    assert_eq!(payloads(&s, "tg_2"), vec![Vec::<u8>::new()], "an empty payload is a record too");
    assert_eq!(payloads(&s, "nobody"), Vec::<Vec<u8>>::new());
    let before = snapshot(&s);
    let s = reboot(s);
    assert_eq!(snapshot(&s), before, "the boot scan rebuilds the same index");
    let st = s.stats();
    assert_eq!((st.records, st.corrupt, st.repaired, st.dropped), (4, 0, 0, 0));
    // The reader can stop.
    let mut seen = 0;
    s.read("tg_1", Order::NewestFirst, &mut |_| {
        seen += 1;
        ControlFlow::Break(())
    })
    .unwrap();
    assert_eq!(seen, 1);
}

#[test]
fn replace_supersedes_earlier_records_across_reboots() {
    let mut s = fresh(512, 3);
    s.append_entry("MEMORY.md", b"old").unwrap();
    s.replace("MEMORY.md", b"new content\n").unwrap();
    s.append_entry("MEMORY.md", b"after").unwrap();
    let want = vec![(Kind::Replace, b"new content\n".to_vec()), (Kind::Entry, b"after".to_vec())];
    assert_eq!(read(&s, "MEMORY.md", Order::OldestFirst), want);
    let mut s = reboot(s);
    assert_eq!(read(&s, "MEMORY.md", Order::OldestFirst), want);
    s.replace("MEMORY.md", b"").unwrap();
    let s = reboot(s);
    assert_eq!(read(&s, "MEMORY.md", Order::OldestFirst), vec![(Kind::Replace, Vec::new())], "a clear");
}

#[test]
fn bounds_and_bad_input_get_typed_errors() {
    assert_eq!(
        FlashStore::open(RamFlash::new(4096, 1)).unwrap_err(),
        Error::Geometry { sector_size: 4096, sectors: 1 }
    );
    assert_eq!(FlashStore::open(RamFlash::new(128, 8)).unwrap_err(), Error::Geometry { sector_size: 128, sectors: 8 });
    let mut s = fresh(256, 4);
    let max = s.max_payload(3);
    assert_eq!(max, 256 - 24 - 24 - 3);
    assert_eq!(s.append_line("key", &vec![b'x'; max + 1]), Err(Error::RecordTooBig { len: max + 1, max }));
    s.append_line("key", &vec![b'x'; max]).unwrap();
    assert_eq!(s.append_line("", b"x"), Err(Error::BadKey { len: 0 }));
    let long = "k".repeat(MAX_KEY + 1);
    assert_eq!(s.append_line(&long, b"x"), Err(Error::BadKey { len: MAX_KEY + 1 }));
    let mut s = FlashStore::open_with(RamFlash::new(256, 4), Limits { max_keys: 2, ..Limits::default() }).unwrap();
    s.append_line("a", b"1").unwrap();
    s.append_line("b", b"1").unwrap();
    assert_eq!(s.append_line("c", b"1"), Err(Error::TooManyKeys { max: 2 }));
    s.replace("b", b"").unwrap();
    s.append_line("a", b"2").unwrap();
    assert_eq!(payloads(&s, "a"), [b"1".to_vec(), b"2".to_vec()]);
    // Kept records stop at half the partition (less one sector), with a message that says so.
    let mut s = fresh(256, 4);
    let mut kept = 0;
    let err = loop {
        match s.append_entry("entries.jsonl", &[b'm'; 100]) {
            Ok(()) => kept += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::Full { limit: 348, .. }), "{err:?}");
    assert!(err.to_string().contains("delete memory entries"), "{err}");
    assert_eq!(payloads(&s, "entries.jsonl").len(), kept, "nothing kept was lost on the way");
    s.append_line("tg", b"lines still fit").unwrap();
}

#[test]
fn the_storage_contract_holds_for_what_fits_a_sector() {
    // 4,000 lines of 131 bytes need a big partition; 200,000-byte lines cannot fit a record.
    let big = || fresh(4096, 256);
    contract::appended_lines_come_back_newest_first(big());
    contract::reading_stops_when_told_and_reads_little(big());
    contract::replace_gives_exactly_the_new_bytes(big());
    contract::a_torn_last_line_is_handed_unterminated_and_appends_start_fresh(big());
    contract::a_missing_file_reads_as_empty(big());
    contract::append_takes_whole_lines_only(big());
    let mut s = fresh(4096, 4);
    let long = "L".repeat(5000);
    let err = s.append("l", &format!("short\n{long}\nend\n")).unwrap_err();
    assert_eq!(err, Error::RecordTooBig { len: 5000, max: 4096 - 48 - 1 });
    assert_eq!(contract::read_all(&s, "l").0, Vec::new(), "a refused append writes nothing");
}

#[test]
fn sessions_and_memory_run_on_the_flash_store_through_the_contract() {
    use crate::session::{self, Budget};
    let mut s = fresh(1024, 8);
    use chela_proto::chat::Message;
    let turn = [Message::user_text("What time is it?"), Message::assistant_text("Twenty past one.")];
    for ts in 0..40 {
        session::append_turn(&mut s, "tg_7.jsonl", &turn, ts).unwrap();
    }
    // The partition holds far less than 40 turns: the oldest went, the newest load whole.
    let s = reboot(s);
    let loaded = session::load(&s, "tg_7.jsonl", Budget { bytes: 100_000, max_read: 1 << 20 }).unwrap();
    assert!(loaded.messages.len() >= turn.len());
    assert_eq!(loaded.messages[loaded.messages.len() - turn.len()..], turn[..]);
    assert_eq!(loaded.skipped_lines, 0);
    let k = &s.keys()[0];
    assert!(k.dropped > 0, "{k:?}");
    assert_eq!(k.records + k.dropped as usize, 40 * turn.len(), "every line is there or counted as dropped");
}
