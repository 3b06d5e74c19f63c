use super::*;

#[test]
fn program_only_clears_bits_and_erase_sets_them() {
    let mut f = RamFlash::new(256, 2);
    f.program(4, &[0xF0, 0x0F, 0xFF, 0x00]).unwrap();
    f.program(4, &[0x3C, 0xFF, 0x0F, 0xFF]).unwrap();
    let mut buf = [0u8; 4];
    f.read(4, &mut buf).unwrap();
    assert_eq!(buf, [0x30, 0x0F, 0x0F, 0x00]);
    f.erase(0).unwrap();
    f.read(4, &mut buf).unwrap();
    assert_eq!(buf, [0xFF; 4]);
    assert_eq!(f.erase_counts(), [1, 0]);
}

#[test]
fn contract_breaches_are_refused() {
    let mut f = RamFlash::new(256, 2);
    assert_eq!(f.program(2, &[0; 4]), Err(RamError::Misaligned { offset: 2, len: 4 }));
    assert_eq!(f.program(0, &[0; 3]), Err(RamError::Misaligned { offset: 0, len: 3 }));
    assert_eq!(f.program(252, &[0; 8]), Err(RamError::OutOfRange { offset: 252, len: 8 }), "crosses a sector");
    assert_eq!(f.read(510, &mut [0; 4]), Err(RamError::OutOfRange { offset: 510, len: 4 }));
    assert_eq!(f.erase(2), Err(RamError::OutOfRange { offset: 512, len: 256 }));
    assert!(f.bytes().iter().all(|&b| b == 0xFF), "a refused call changes nothing");
}

#[test]
fn a_cut_tears_the_program_and_stops_everything() {
    let mut f = RamFlash::new(256, 1);
    f.cut_after(5);
    assert_eq!(f.program(0, &[0x00; 8]), Err(RamError::PowerCut));
    assert_eq!(&f.bytes()[..8], [0, 0, 0, 0, 0, 0x0F, 0xFF, 0xFF]);
    assert!(f.is_off());
    assert_eq!(f.read(0, &mut [0; 4]), Err(RamError::PowerCut));
    f.power_on();
    f.cut_after(0);
    assert_eq!(f.erase(0), Err(RamError::PowerCut));
    assert_eq!(&f.bytes()[..8], [0xFF; 8], "the first half is erased");
    assert_eq!(f.bytes()[200], 0xFF, "never programmed");
    f.power_on();
    assert_eq!(f.work(), 5);
    f.rot(3, 1);
    assert_eq!(f.bytes()[3], 0xFD);
}
