//! The store against its promises: round trips, reboots, power cuts at every unit of work,
//! bit rot, a full partition, wear, bounds. The flash is [`RamFlash`], which keeps the
//! [`Flash`](super::Flash) contract strictly.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::ops::ControlFlow;

use proptest::prelude::*;

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

/// Every key's records, oldest first, and what each key reports as dropped. Keys with no
/// records left are not listed: a reboot cannot know about them.
type Snapshot = BTreeMap<String, (Vec<(Kind, Vec<u8>)>, u32)>;

fn snapshot(s: &Store) -> Snapshot {
    s.keys()
        .into_iter()
        .filter(|k| k.records > 0)
        .map(|k| (k.key.clone(), (read(s, &k.key, Order::OldestFirst), k.dropped)))
        .collect()
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
    // Kept lines over the limit are refused whole, not in part.
    let many = "m".repeat(1000) + "\n";
    let err = s.append("entries.jsonl", &many.repeat(8)).unwrap_err();
    assert!(matches!(err, Error::Full { .. }), "{err:?}");
    assert_eq!(contract::read_all(&s, "entries.jsonl").0, Vec::new(), "nothing of a refused append");
    s.append("entries.jsonl", &many).unwrap();
}

#[test]
fn sessions_and_memory_run_on_the_flash_store_through_the_contract() {
    use crate::session::{self, Budget};
    let mut s = fresh(1024, 8);
    use chela_proto::chat::Message;
    let turn = [Message::user_text("What time is it?"), Message::assistant_text("Twenty past one.")];
    // Memory entries as the memory tools write them: one JSON line each, in a kept file.
    let mut mem = crate::memory::Entries::default();
    for fact in ["Ada likes tea", "the cat is called Mo"] {
        let e = mem.store(fact, &[], "test", 1).unwrap().clone();
        s.append("entries.jsonl", &(serde_json::to_string(&e).unwrap() + "\n")).unwrap();
    }
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
    let (lines, _) = contract::read_all(&s, "entries.jsonl");
    let text: String = lines.iter().rev().map(|(l, _)| format!("{l}\n")).collect();
    assert_eq!(crate::memory::Entries::parse(&text).0, mem, "memory survives the sessions wrapping round");
}

/// One write in a generated workload. Payloads are unique (they start with the op's number),
/// so a record read back can be traced to the write that made it.
#[derive(Clone, Debug)]
enum Op {
    Line(usize, usize),
    Entry(usize),
    Replace(usize, usize),
}

const KEYS: [&str; 3] = ["s0", "s1", "s2"];

fn payload(n: usize, len: usize) -> Vec<u8> {
    let mut p = format!("{n}:").into_bytes();
    p.resize(len.max(p.len()), b'x');
    p
}

fn apply(s: &mut Store, n: usize, op: &Op) -> Result<(), Error<RamError>> {
    match *op {
        Op::Line(k, len) => s.append_line(KEYS[k], &payload(n, len)),
        Op::Entry(len) => s.append_entry("mem", &payload(n, len)),
        Op::Replace(k, len) => s.replace(if k == 0 { "mem" } else { KEYS[k] }, &payload(n, len)),
    }
}

fn op_key(op: &Op) -> &'static str {
    match *op {
        Op::Line(k, _) => KEYS[k],
        Op::Entry(_) | Op::Replace(0, _) => "mem",
        Op::Replace(k, _) => KEYS[k],
    }
}

fn open_clean(f: RamFlash) -> Store {
    FlashStore::open(f).expect("the boot scan never fails on a flash that works")
}

/// Runs `ops` on a small partition; for each op, cuts the power at every unit of work the op
/// does (every programmed byte, every erase), reboots, and checks what the store then holds:
/// each key is as before the op, as after it, or (for the op's own key) as after its reclaim
/// but before its record. Returns how many cut points there were, and how many hit a reclaim.
fn cut_everywhere(ops: &[Op], sector_size: u32, sectors: u32) -> (usize, usize) {
    let mut s = fresh(sector_size, sectors);
    let mut reclaim_cuts = 0;
    let mut cuts = 0;
    for (n, op) in ops.iter().enumerate() {
        let base = s.flash().clone();
        let before = snapshot(&s);
        let w0 = s.flash().work();
        let erases0: u32 = s.flash().erase_counts().iter().sum();
        let result = apply(&mut s, n, op);
        if let Err(e) = &result {
            assert!(matches!(e, Error::Full { .. }), "op {n} {op:?}: {e:?}");
            assert_eq!(snapshot(&s), before, "a refused write changes nothing");
            continue;
        }
        let units = s.flash().work() - w0;
        let reclaimed = s.flash().erase_counts().iter().sum::<u32>() > erases0;
        let after = snapshot(&s);
        for cut in 0..units {
            let mut f = base.clone();
            f.cut_after(cut);
            let mut t = open_clean(f);
            let e = apply(&mut t, n, op).expect_err("the power was cut");
            assert_eq!(e, Error::Flash(RamError::PowerCut));
            let mut f = t.into_flash();
            f.power_on();
            let t = open_clean(f);
            let got = snapshot(&t);
            check_cut_state(&before, &after, &got, op)
                .unwrap_or_else(|m| panic!("op {n} {op:?}, cut after {cut} of {units}: {m}"));
            reclaim_cuts += usize::from(reclaimed);
            cuts += 1;
            // The store goes on working after the cut.
            let mut t = t;
            // (Kept records may be refused: the cut can leave the op done, and this repeats it.)
            match apply(&mut t, n, op) {
                Err(Error::Full { .. }) if !matches!(op, Op::Line(..)) => {}
                r => r.unwrap_or_else(|e| panic!("op {n} {op:?} after a cut at {cut}: {e}")),
            }
            let again = snapshot(&t);
            assert_eq!(snapshot(&reboot(t)), again);
        }
        if n % 8 == 7 {
            s = reboot(s);
            assert_eq!(snapshot(&s), after, "op {n}: a reboot changes nothing");
        }
    }
    (cuts, reclaim_cuts)
}

/// What a cut during `op` may leave, key by key: reclaims only drop droppable records
/// (session lines and clears), oldest first, and keep the rest; the op's own record is written
/// last and whole or not at all. Dropped counts must match the lines missing before the
/// oldest one left.
fn check_cut_state(before: &Snapshot, after: &Snapshot, got: &Snapshot, op: &Op) -> Result<(), String> {
    type Rec = (Kind, Vec<u8>);
    type Recs = [Rec];
    fn droppable(r: &Rec) -> bool {
        r.0 == Kind::Line || (r.0 == Kind::Replace && r.1.is_empty())
    }
    fn split(v: &Recs) -> (Vec<&Rec>, Vec<&Rec>) {
        v.iter().partition(|r| droppable(r))
    }
    let empty = (Vec::new(), 0);
    let key = op_key(op);
    let names: alloc::collections::BTreeSet<&String> = before.keys().chain(after.keys()).chain(got.keys()).collect();
    for name in names {
        let (g, gd) = got.get(name).unwrap_or(&empty);
        let (b, bd) = before.get(name).unwrap_or(&empty);
        let (a, ad) = after.get(name).unwrap_or(&empty);
        let mine = name == key;
        let whole_op = mine && g == a;
        // Without the op's own record (the last one of its key, unless it replaced the key).
        let a_core: &Recs = if mine && !matches!(op, Op::Replace(..)) { &a[..a.len() - 1] } else { a };
        let (g_drop, g_kept) = split(g);
        let (b_drop, b_kept) = split(b);
        let (a_drop, a_kept) = split(a_core);
        let ok = whole_op
            || (g_kept == b_kept
                && (g_kept == a_kept || (mine && matches!(op, Op::Replace(..))))
                && b_drop.ends_with(&g_drop)
                && (g_drop.ends_with(&a_drop) || (mine && matches!(op, Op::Replace(..)))));
        if !ok {
            return Err(format!("{name} holds {g:?}\nbefore {b:?}\nafter {a:?}"));
        }
        // The first session line left, and how many lines went before it.
        let first = g.iter().find(|r| r.0 != Kind::Replace);
        let want = match first {
            None => 0,
            Some(r) => match b.iter().filter(|r| r.0 != Kind::Replace).position(|x| x == r) {
                Some(i) if !(whole_op && matches!(op, Op::Replace(..))) => bd + i as u32,
                _ => *ad,
            },
        };
        if *gd != want {
            return Err(format!("{name} reports {gd} dropped, not {want}: {g:?}"));
        }
    }
    Ok(())
}

#[test]
fn a_power_cut_at_any_unit_of_appends_and_reclaims_loses_nothing_committed() {
    // Lines in three sessions, kept entries and replacements on four 256-byte sectors: the
    // partition wraps several times, so many ops reclaim.
    let mut ops = Vec::new();
    for i in 0..60 {
        ops.push(match i % 10 {
            3 => Op::Entry(10 + i % 7),
            6 => Op::Replace(i % 3, 20),
            9 => Op::Replace(0, 0),
            _ => Op::Line(i % 3, 30 + i % 40),
        });
    }
    let (cuts, reclaim_cuts) = cut_everywhere(&ops, 256, 4);
    assert!(cuts > 4000 && reclaim_cuts > 500, "the workload must cut often, reclaims too: {cuts}, {reclaim_cuts}");
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, 0..120usize).prop_map(|(k, l)| Op::Line(k, l)),
        2 => (0..60usize).prop_map(Op::Entry),
        1 => (0..3usize, 0..60usize).prop_map(|(k, l)| Op::Replace(k, l)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn power_cuts_in_random_workloads_lose_nothing_committed(ops in proptest::collection::vec(op(), 1..40)) {
        cut_everywhere(&ops, 256, 3);
    }
}

#[test]
fn a_full_partition_drops_the_oldest_lines_first_and_keeps_entries() {
    let mut s = fresh(1024, 4);
    s.append_entry("mem", b"the user's name is Ada").unwrap();
    for i in 0..200 {
        s.append_line(if i % 2 == 0 { "a" } else { "b" }, format!("line {i:03} {}", "x".repeat(40)).as_bytes())
            .unwrap();
    }
    let check = |s: &Store| {
        assert_eq!(payloads(s, "mem"), [b"the user's name is Ada".to_vec()], "kept entries survive every reclaim");
        for (key, parity) in [("a", 0), ("b", 1)] {
            let got = payloads(s, key);
            let first: usize = core::str::from_utf8(&got[0][5..8]).unwrap().parse().unwrap();
            // The newest lines are all there, in order, and nothing older than the first.
            let want: Vec<Vec<u8>> = (first..200)
                .filter(|i| i % 2 == parity)
                .map(|i| format!("line {i:03} {}", "x".repeat(40)).into_bytes())
                .collect();
            assert_eq!(got, want, "{key}");
            let stats = s.keys().into_iter().find(|k| k.key == key).unwrap();
            assert_eq!(stats.dropped as usize, first / 2, "{key}: every line before the first left is counted");
            assert!(got.len() > 10, "three sectors hold more than 10 lines of {key}");
        }
    };
    check(&s);
    let st = s.stats();
    assert!(st.dropped > 100, "{st:?}");
    assert_eq!(st.free_sectors, 1, "one sector is kept free to reclaim into");
    let s = reboot(s);
    check(&s);
    // The oldest sector went each time: the log's sectors are the newest three.
    assert_eq!(s.stats().records, s.keys().iter().map(|k| k.records).sum::<usize>());
}

#[test]
fn rotted_records_are_skipped_and_counted_and_the_rest_read() {
    let mut s = fresh(1024, 3);
    for i in 0..12 {
        s.append_line("s", format!("line {i:02}").as_bytes()).unwrap();
    }
    let mut f = s.into_flash();
    // Record i starts at 24 + 32 * i in sector 0 (header 24, key 1, payload 7).
    f.rot(24 + 32 * 3 + 28, 2); // payload of line 03
    f.rot(24 + 32 * 7 + 9, 5); // sequence of line 07: its header check fails
    f.rot(24 + 32 * 9 + 1, 0); // magic of line 09
    let s = open_clean(f);
    let got: Vec<String> = payloads(&s, "s").into_iter().map(|p| String::from_utf8(p).unwrap()).collect();
    let want: Vec<String> = [0, 1, 2, 4, 5, 6, 8, 10, 11].iter().map(|i| format!("line {i:02}")).collect();
    assert_eq!(got, want, "the boot scan steps over a bad body and searches past a bad header");
    assert_eq!(s.stats().corrupt, 3);
    // Appends go on after the damage, and a second boot reads the same.
    let mut s = s;
    s.append_line("s", b"line 12").unwrap();
    let s = reboot(s);
    assert_eq!(payloads(&s, "s").len(), 10);
    assert_eq!(payloads(&s, "s").last().unwrap(), b"line 12");
}

#[test]
fn rot_after_boot_is_skipped_when_read_and_never_copied_forward() {
    let mut s = fresh(512, 3);
    s.append_entry("mem", b"kept one").unwrap();
    s.append_entry("mem", b"kept two").unwrap();
    let mut f = s.into_flash();
    let mut s = open_clean(f.clone());
    // Rot the first entry's payload under a running store: simulate by rotting the flash the
    // store owns through a reboot-free path is impossible, so rot a copy and open it.
    f.rot(24 + 24 + 3 + 2, 1);
    let rotted = open_clean(f);
    assert_eq!(payloads(&rotted, "mem"), [b"kept two".to_vec()]);
    assert_eq!(rotted.stats().corrupt, 1);
    // The healthy store wraps many times: its entries move and stay whole.
    for i in 0..100 {
        s.append_line("s", format!("{i:03}{}", "y".repeat(60)).as_bytes()).unwrap();
    }
    assert_eq!(payloads(&s, "mem"), [b"kept one".to_vec(), b"kept two".to_vec()]);
    assert!(s.flash().erase_counts().iter().all(|&n| n > 5), "{:?}", s.flash().erase_counts());
}

#[test]
fn a_damaged_sector_header_or_planted_garbage_is_repaired_at_boot() {
    let mut s = fresh(256, 4);
    for i in 0..3 {
        s.append_line("s", format!("{i}").as_bytes()).unwrap();
    }
    let mut f = s.into_flash();
    // Garbage planted in a free sector, and a free sector's header broken.
    let mut planted = f.clone();
    planted.program(2 * 256 + 64, &[0x12, 0x34, 0x56, 0x78]).unwrap();
    planted.rot(3 * 256 + 2, 3);
    let s = open_clean(planted);
    assert_eq!(s.stats().repaired, 2);
    assert_eq!(payloads(&s, "s").len(), 3);
    let f2 = s.into_flash();
    assert!(f2.bytes()[2 * 256 + 24..3 * 256].iter().all(|&b| b == 0xFF), "the garbage was erased");
    // A rotted magic in a sector of the log costs its erase count, not its records.
    let mut rotted = f.clone();
    rotted.rot(1, 4);
    let s = open_clean(rotted);
    assert_eq!(payloads(&s, "s").len(), 3);
    assert_eq!(s.stats().repaired, 0);
    // A partition of foreign data is formatted, not trusted.
    f.program(0, &[0; 24]).unwrap();
    let s = open_clean(f);
    assert_eq!(payloads(&s, "s"), Vec::<Vec<u8>>::new());
}

#[test]
fn wear_is_spread_evenly_across_sectors() {
    let mut s = fresh(1024, 16);
    for i in 0..20 {
        s.append_entry("mem", format!("entry {i}").as_bytes()).unwrap();
    }
    for i in 0..6000 {
        s.append_line(["a", "b", "c"][i % 3], format!("{i:05} {}", "z".repeat(50)).as_bytes()).unwrap();
    }
    let counts = s.flash().erase_counts().to_vec();
    let (min, max) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    assert!(min >= 20, "every sector took its turn: {counts:?}");
    assert!(max - min <= 1, "erases differ by at most one between sectors: {counts:?}");
    let st = s.stats();
    assert_eq!((st.min_erases, st.max_erases), (min, max), "the headers carry the counts");
    let s = reboot(s);
    assert_eq!((s.stats().min_erases, s.stats().max_erases), (min, max), "and they survive a reboot");
    assert_eq!(payloads(&s, "mem").len(), 20);
}

#[test]
fn a_payload_holding_a_whole_record_stays_a_payload() {
    // A hostile line that is, byte for byte, a valid record of another key.
    let mut a = fresh(512, 2);
    a.append_line("victim", b"planted").unwrap();
    let forged = a.flash().bytes()[24..24 + 24 + 6 + 7].to_vec();
    let mut s = fresh(512, 3);
    s.append_line("x", &forged).unwrap();
    s.append_line("x", b"after").unwrap();
    let s = reboot(s);
    assert_eq!(payloads(&s, "x"), [forged, b"after".to_vec()]);
    assert_eq!(payloads(&s, "victim"), Vec::<Vec<u8>>::new(), "the boot scan steps by lengths, not by magic");
    assert_eq!(s.stats().corrupt, 0);
}
