//! The flash store on a RAM model of the chip's partition: 64 sectors of 4 KiB (256 KiB).
//!
//! Reported: appends per second of 64-byte session lines in the steady state (the partition
//! full, so appends reclaim), the flash bytes each record takes beyond its payload, the boot
//! scan of a full partition, and the RAM the index holds then. The RAM model costs nothing
//! per byte, so the figures are the store's own work (CRC, scan, copies), not flash timing:
//! real NOR flash adds its program and erase times (see docs/BENCHMARKS.md).
//!
//! Run: `cargo bench -p chela-core --bench flash`.

use std::hint::black_box;
use std::time::Instant;

use chela_core::flash::{FlashStore, RamFlash};

const SECTOR: u32 = 4096;
const SECTORS: u32 = 64;

fn line(i: usize) -> Vec<u8> {
    // 64 bytes, like a short session line.
    let mut l = format!("{{\"role\":\"user\",\"content\":\"{i:08}\",\"ts\":1738764800}}").into_bytes();
    l.resize(64, b' ');
    l
}

fn main() {
    let keys = ["telegram_1234567890", "telegram_2345678901", "cli_local"];
    let mut store = FlashStore::open(RamFlash::new(SECTOR, SECTORS)).expect("open");
    for i in 0..20 {
        store
            .append_entry("entries.jsonl", format!("{{\"id\":\"m{i}\",\"content\":\"a fact\"}}").as_bytes())
            .expect("entry");
    }
    // Fill the partition once so every measured append is in the steady state.
    let mut i = 0;
    while store.stats().dropped == 0 {
        store.append_line(keys[i % 3], &line(i)).expect("fill");
        i += 1;
    }
    let n = 200_000;
    let t = Instant::now();
    for j in 0..n {
        store.append_line(keys[j % 3], &line(i + j)).expect("append");
    }
    let dt = t.elapsed();
    let st = store.stats();
    println!("flash store, {SECTORS} sectors x {SECTOR} B, 64-byte lines, 3 sessions, 20 kept entries");
    println!(
        "append (steady state, with reclaim): {:.0} appends/s ({:.2} us each)",
        n as f64 / dt.as_secs_f64(),
        dt.as_secs_f64() * 1e6 / n as f64
    );
    for key in [keys[0], keys[2]] {
        let rec = (24 + key.len() + 64).div_ceil(4) * 4;
        println!(
            "space per 64-byte record with key {key:?} ({} B): {rec} B on flash, {} B overhead ({:.0}%)",
            key.len(),
            rec - 64,
            (rec - 64) as f64 * 100.0 / 64.0
        );
    }
    println!(
        "live records {}, {} B on flash; lines dropped {}; erases per sector {}..{}",
        st.records, st.record_bytes, st.dropped, st.min_erases, st.max_erases
    );
    let flash = store.into_flash();
    let runs = 20;
    let mut best = f64::MAX;
    let mut opened = None;
    for _ in 0..runs {
        let f = flash.clone();
        let t = Instant::now();
        let s = FlashStore::open(black_box(f)).expect("boot");
        best = best.min(t.elapsed().as_secs_f64());
        opened = Some(s);
    }
    let s = opened.expect("opened");
    let st = s.stats();
    println!(
        "boot scan of the full partition ({} KiB, {} records): {:.2} ms (best of {runs})",
        SECTOR * SECTORS / 1024,
        st.records,
        best * 1e3
    );
    println!(
        "RAM after boot (index, key table, sectors): {} B ({:.1} B per record)",
        st.ram_bytes,
        st.ram_bytes as f64 / st.records as f64
    );
}
