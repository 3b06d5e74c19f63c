use super::*;
use crate::flash::RamFlash;

type Store = FlashStore<RamFlash>;

fn reboot(s: Store) -> Store {
    FlashStore::open(s.into_flash()).unwrap()
}

#[test]
fn quick_resets_in_a_row_end_in_safe_mode_and_a_good_uptime_ends_it() {
    let policy = BootPolicy { max_quick_resets: 3, stable_after_ms: 60_000 };
    let mut s = FlashStore::open(RamFlash::new(512, 4)).unwrap();
    let mut modes = alloc::vec::Vec::new();
    for _ in 0..6 {
        let g = BootGuard::boot(&mut s, policy).unwrap();
        modes.push(g.mode());
        // A crash after 2 s: the next boot is a quick reset.
        s = reboot(s);
    }
    assert_eq!(
        modes,
        [
            BootMode::Normal,
            BootMode::Normal,
            BootMode::Normal,
            BootMode::Normal,
            BootMode::Safe { quick_resets: 4 },
            BootMode::Safe { quick_resets: 5 },
        ]
    );
    // The safe boot lives a minute: the counter is cleared, once.
    let mut g = BootGuard::boot(&mut s, policy).unwrap();
    assert_eq!(g.mode(), BootMode::Safe { quick_resets: 6 });
    assert!(!g.handle_uptime(&mut s, 59_999).unwrap());
    assert!(g.handle_uptime(&mut s, 60_000).unwrap());
    assert!(!g.handle_uptime(&mut s, 120_000).unwrap(), "one write per boot");
    let mut s = reboot(s);
    let g = BootGuard::boot(&mut s, policy).unwrap();
    assert_eq!((g.mode(), g.boots()), (BootMode::Normal, 1));
}

#[test]
fn a_deliberate_restart_does_not_count_and_a_damaged_counter_reads_as_zero() {
    let policy = BootPolicy::default();
    let mut s = FlashStore::open(RamFlash::new(512, 4)).unwrap();
    for _ in 0..10 {
        BootGuard::boot(&mut s, policy).unwrap();
        before_deliberate_restart(&mut s).unwrap();
        s = reboot(s);
    }
    assert_eq!(BootGuard::boot(&mut s, policy).unwrap().mode(), BootMode::Normal);
    s.replace(BOOT_KEY, b"boots lots\n").unwrap();
    assert_eq!(BootGuard::boot(&mut s, policy).unwrap().boots(), 1);
}
