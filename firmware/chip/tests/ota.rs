//! Over-the-air updates on the host: the update file through the streaming writer into RAM
//! flash partitions (`otadata` and two app slots), a model of the ESP-IDF bootloader's choice,
//! power cut at every step, the trial boots and the rollback, and an update signed by
//! `firmware/sign.sh` (openssl) taken by the chip's check.

use chela_chip::link::Answer;
use chela_chip::ota::{
    self, BootCheck, CHIP_ESP32C3, CHIP_ESP32C6, Entry, HEADER_LEN, Header, MAX_TRIAL_BOOTS, OtaError, Update,
};
use chela_core::flash::{Flash, RamFlash};
use ed25519_compact::{KeyPair, Seed};

const SECTOR: u32 = 4096;
/// 64 KiB slots: the same code as the chip's 1.7 MB ones, a test that runs in moments.
const SLOT_SECTORS: u32 = 16;
const IMAGE_LEN: usize = 20_000;

fn keys(seed: u8) -> KeyPair {
    KeyPair::from_seed(Seed::new([seed; 32]))
}

/// An ESP app image as `esptool elf2image` starts one: magic, segment count, flash mode and
/// size, entry point, then the extended header with the chip id at bytes 12..14. The rest is
/// noise from `salt`.
fn esp_image(chip: u16, len: usize, salt: u64) -> Vec<u8> {
    let mut img = vec![0xE9, 3, 2, 0x20, 0x72, 0x00, 0x02, 0x42, 0xEE, 0, 0, 0];
    img.extend_from_slice(&chip.to_le_bytes());
    img.resize(24, 0);
    let mut x = salt | 1;
    while img.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        img.push(x as u8);
    }
    img
}

fn update_file(key: &KeyPair, image: &[u8]) -> Vec<u8> {
    let signature = *key.sk.sign(image, None);
    let mut f = Header { image_len: image.len() as u32, signature }.to_bytes().to_vec();
    f.extend_from_slice(image);
    f
}

/// A chip's flash: `otadata` and two app slots, slot 0 holding `old` (as flashed over USB:
/// `otadata` blank, so the bootloader boots slot 0).
struct Chip {
    otadata: RamFlash,
    slots: [RamFlash; 2],
}

impl Chip {
    fn new(old: &[u8]) -> Chip {
        let mut slots = [RamFlash::new(SECTOR, SLOT_SECTORS), RamFlash::new(SECTOR, SLOT_SECTORS)];
        write_raw(&mut slots[0], old);
        Chip { otadata: RamFlash::new(SECTOR, 2), slots }
    }

    /// The ESP-IDF bootloader: the slot of the valid entry with the highest sequence, slot 0
    /// when none is valid.
    fn boots(&self) -> usize {
        ota::selected_slot(&ota::entries(&self.otadata).unwrap())
    }

    fn power_on(&mut self) {
        self.otadata.power_on();
        self.slots.iter_mut().for_each(RamFlash::power_on);
    }

    fn slot_holds(&self, slot: usize, image: &[u8]) -> bool {
        &self.slots[slot].bytes()[..image.len()] == image
    }

    /// Starts, feeds `file` in pieces of varying size, finishes: the target slot or the error.
    fn update(&mut self, key: &KeyPair, file: &[u8], running: usize) -> Result<usize, OtaError> {
        let mut u = Update::begin(Some(&*key.pk), CHIP_ESP32C3, &self.otadata, &self.slots, running)?;
        let mut rest = file;
        let mut n = 1usize;
        while !rest.is_empty() {
            n = (n * 7 + 3) % 1500 + 1;
            let (piece, tail) = rest.split_at(n.min(rest.len()));
            let p = u.write(&mut self.slots, piece)?;
            assert!(p.written <= p.total.unwrap_or(0), "progress past the total: {p:?}");
            rest = tail;
        }
        u.finish(&mut self.otadata, &mut self.slots)
    }
}

fn write_raw(f: &mut RamFlash, data: &[u8]) {
    for (i, chunk) in data.chunks(256).enumerate() {
        let at = i as u32 * 256;
        if at.is_multiple_of(SECTOR) {
            f.erase(at / SECTOR).unwrap();
        }
        let mut page = chunk.to_vec();
        page.resize(chunk.len().next_multiple_of(4), 0xFF);
        f.program(at, &page).unwrap();
    }
}

#[test]
fn a_good_image_is_written_switched_to_counted_and_confirmed() {
    let old = esp_image(CHIP_ESP32C3, 30_000, 1);
    let new = esp_image(CHIP_ESP32C3, IMAGE_LEN, 2);
    let key = keys(7);
    let mut chip = Chip::new(&old);
    assert_eq!(chip.boots(), 0);

    assert_eq!(chip.update(&key, &update_file(&key, &new), 0), Ok(1));
    assert!(chip.slot_holds(1, &new) && chip.slot_holds(0, &old), "the running slot stays as it was");
    assert_eq!(chip.boots(), 1, "the bootloader now picks the new slot");
    // The entry is one ESP-IDF's bootloader reads: sequence 2 selects ota_1, state Undefined.
    let es = ota::entries(&chip.otadata).unwrap();
    let e = es[ota::active(&es).unwrap()];
    assert_eq!((e.seq, e.state, e.crc), (2, u32::MAX, 0x55F6_3774));

    assert_eq!(ota::on_boot(&mut chip.otadata, 1, MAX_TRIAL_BOOTS), Ok(BootCheck::Trial { boot: 1, of: 3 }));
    assert_eq!(ota::confirm(&mut chip.otadata, 1), Ok(true));
    assert_eq!(ota::confirm(&mut chip.otadata, 1), Ok(false), "confirming twice changes nothing");
    for _ in 0..5 {
        assert_eq!(ota::on_boot(&mut chip.otadata, 1, MAX_TRIAL_BOOTS), Ok(BootCheck::Confirmed));
        assert_eq!(chip.boots(), 1);
    }

    // The next update goes the other way, over the old image, and is picked as well.
    let newer = esp_image(CHIP_ESP32C3, 25_000, 3);
    assert_eq!(chip.update(&key, &update_file(&key, &newer), 1), Ok(0));
    assert!(chip.slot_holds(0, &newer) && chip.slot_holds(1, &new));
    assert_eq!(chip.boots(), 0);
    let es = ota::entries(&chip.otadata).unwrap();
    assert_eq!(es[ota::active(&es).unwrap()].seq, 3);
}

#[test]
fn a_wrongly_signed_or_altered_image_is_refused_and_nothing_switches() {
    let old = esp_image(CHIP_ESP32C3, 30_000, 1);
    let new = esp_image(CHIP_ESP32C3, IMAGE_LEN, 2);
    let key = keys(7);
    let mut chip = Chip::new(&old);

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("signed by another key", update_file(&keys(8), &new)),
        ("one image byte changed after signing", {
            let mut f = update_file(&key, &new);
            f[HEADER_LEN + 5000] ^= 0x01;
            f
        }),
        ("one signature byte changed", {
            let mut f = update_file(&key, &new);
            f[40] ^= 0x80;
            f
        }),
        ("no signature (zeros)", {
            let mut f = update_file(&key, &new);
            f[16..80].fill(0);
            f
        }),
    ];
    for (what, file) in cases {
        let before = chip.otadata.bytes().to_vec();
        let got = chip.update(&key, &file, 0);
        assert_eq!(got, Err(OtaError::BadSignature), "{what}");
        assert!(got.unwrap_err().to_string().contains("signature"), "{what}: the reason is given");
        assert_eq!(chip.otadata.bytes(), &before[..], "{what}: otadata untouched");
        assert_eq!(chip.boots(), 0, "{what}");
        assert!(chip.slot_holds(0, &old));
    }
}

#[test]
fn a_truncated_update_is_refused_with_how_much_arrived() {
    let new = esp_image(CHIP_ESP32C3, IMAGE_LEN, 2);
    let key = keys(7);
    let file = update_file(&key, &new);
    let total = file.len() as u64;
    for cut in [0, 10, HEADER_LEN - 1, HEADER_LEN, HEADER_LEN + 23, HEADER_LEN + 4096, file.len() - 1] {
        let mut chip = Chip::new(&esp_image(CHIP_ESP32C3, 30_000, 1));
        let got = chip.update(&key, &file[..cut], 0);
        let want = if cut < HEADER_LEN { HEADER_LEN as u64 } else { total };
        assert_eq!(got, Err(OtaError::Truncated { got: cut as u64, want }), "cut at {cut}");
        assert!(got.unwrap_err().to_string().starts_with("truncated"));
        assert_eq!(chip.boots(), 0, "cut at {cut}");
        assert!(ota::entries(&chip.otadata).unwrap().iter().all(|e| !e.is_valid()));
    }
}

#[test]
fn bad_headers_are_refused_before_anything_is_selected() {
    let key = keys(7);
    let new = esp_image(CHIP_ESP32C3, IMAGE_LEN, 2);
    let good = update_file(&key, &new);
    let slot_len = SECTOR * SLOT_SECTORS;
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = good.clone();
        f(&mut v);
        v
    };
    let cases: Vec<(Vec<u8>, OtaError)> = vec![
        (with(&|v| v[0] = b'X'), OtaError::NotAnUpdate),
        (with(&|v| v[8] = 2), OtaError::Version(2)),
        (with(&|v| v[10] = 1), OtaError::Version(1)),
        (
            with(&|v| v[12..16].copy_from_slice(&(slot_len + 1).to_le_bytes())),
            OtaError::TooLarge { len: slot_len + 1, slot: slot_len },
        ),
        (with(&|v| v[12..16].copy_from_slice(&23u32.to_le_bytes())), OtaError::NotAnEspImage),
        (with(&|v| v[HEADER_LEN] = 0x7F), OtaError::NotAnEspImage),
        (
            update_file(&key, &esp_image(CHIP_ESP32C6, IMAGE_LEN, 2)),
            OtaError::WrongChip { image: CHIP_ESP32C6, this: CHIP_ESP32C3 },
        ),
        (with(&|v| v.push(0)), OtaError::TooLong { want: IMAGE_LEN as u64 }),
    ];
    for (file, want) in cases {
        let mut chip = Chip::new(&esp_image(CHIP_ESP32C3, 30_000, 1));
        let got = chip.update(&key, &file, 0);
        assert_eq!(got, Err(want.clone()));
        assert!(!want.to_string().is_empty());
        assert_eq!(chip.boots(), 0, "{want}");
    }
    let chip = Chip::new(&[0xE9; 24]);
    let no_key = Update::begin(None, CHIP_ESP32C3, &chip.otadata, &chip.slots, 0).err();
    assert_eq!(no_key, Some(OtaError::NoKey));
    assert!(no_key.unwrap().to_string().contains("--sign"));
}

/// The new image never gets ready: it boots `MAX_TRIAL_BOOTS` times, then the next boot takes
/// its entry back and the bootloader boots the old image, which can update again.
#[test]
fn an_image_that_never_gets_ready_is_rolled_back_after_its_boots() {
    let old = esp_image(CHIP_ESP32C3, 30_000, 1);
    let key = keys(7);
    let mut chip = Chip::new(&old);
    chip.update(&key, &update_file(&key, &esp_image(CHIP_ESP32C3, IMAGE_LEN, 2)), 0).unwrap();
    for boot in 1..=MAX_TRIAL_BOOTS {
        assert_eq!(chip.boots(), 1);
        assert_eq!(ota::on_boot(&mut chip.otadata, 1, MAX_TRIAL_BOOTS), Ok(BootCheck::Trial { boot, of: 3 }));
        // While on trial no update may overwrite its fallback.
        let refused = Update::begin(Some(&*key.pk), CHIP_ESP32C3, &chip.otadata, &chip.slots, 1).err();
        assert_eq!(refused, Some(OtaError::OnTrial));
    }
    assert_eq!(ota::on_boot(&mut chip.otadata, 1, MAX_TRIAL_BOOTS), Ok(BootCheck::RolledBack));
    assert_eq!(chip.boots(), 0, "the bootloader falls back to the old image");
    assert!(chip.slot_holds(0, &old));
    assert_eq!(ota::on_boot(&mut chip.otadata, 0, MAX_TRIAL_BOOTS), Ok(BootCheck::Confirmed));
    assert_eq!(ota::confirm(&mut chip.otadata, 0), Ok(false));
    let again = esp_image(CHIP_ESP32C3, IMAGE_LEN, 4);
    assert_eq!(chip.update(&key, &update_file(&key, &again), 0), Ok(1));
    assert_eq!(chip.boots(), 1);
}

/// After a power cut anywhere the bootloader boots a whole image: the old one until the new
/// entry is whole, the new one from then on.
#[test]
fn a_power_cut_at_any_step_leaves_a_whole_image_booting() {
    let old = esp_image(CHIP_ESP32C3, 30_000, 1);
    let new = esp_image(CHIP_ESP32C3, IMAGE_LEN, 2);
    let key = keys(7);
    let file = update_file(&key, &new);
    // The work (programmed bytes and erases) of a clean run, per partition.
    let mut clean = Chip::new(&old);
    let (slot_work, ota_work) = (clean.slots[1].work(), clean.otadata.work());
    clean.update(&key, &file, 0).unwrap();
    let slot_work = clean.slots[1].work() - slot_work;
    let ota_work = clean.otadata.work() - ota_work;
    assert!(slot_work > IMAGE_LEN as u64 && ota_work > 0);

    let mut cuts = 0;
    // In the slot: every 997th unit and the last ones.
    for k in (0..slot_work).step_by(997).chain(slot_work - 3..slot_work) {
        let mut chip = Chip::new(&old);
        chip.slots[1].cut_after(k);
        assert!(chip.update(&key, &file, 0).is_err(), "cut after {k} slot units");
        chip.power_on();
        assert_eq!(chip.boots(), 0, "cut in the slot after {k}: the old image still boots");
        assert_eq!(ota::on_boot(&mut chip.otadata, 0, MAX_TRIAL_BOOTS), Ok(BootCheck::Confirmed));
        assert_eq!(chip.update(&key, &file, 0), Ok(1), "the update is simply done again");
        cuts += 1;
    }
    // In otadata: every unit.
    for k in 0..ota_work {
        let mut chip = Chip::new(&old);
        chip.otadata.cut_after(k);
        assert!(chip.update(&key, &file, 0).is_err(), "cut after {k} otadata units");
        chip.power_on();
        let booted = chip.boots();
        let image: &[u8] = if booted == 0 { &old } else { &new };
        assert!(chip.slot_holds(booted, image), "cut in otadata after {k}: slot {booted} holds a whole image");
        // The new image is always on trial: a half-written entry never skips the rollback.
        let want = if booted == 0 { BootCheck::Confirmed } else { BootCheck::Trial { boot: 1, of: 3 } };
        assert_eq!(ota::on_boot(&mut chip.otadata, booted, MAX_TRIAL_BOOTS), Ok(want), "cut after {k}");
        cuts += 1;
    }
    // In the trial boots, the confirmation and the rollback: every unit of each.
    for step in 0..3 {
        for k in 0..8 {
            let mut chip = Chip::new(&old);
            chip.update(&key, &file, 0).unwrap();
            if step == 2 {
                for _ in 0..MAX_TRIAL_BOOTS {
                    ota::on_boot(&mut chip.otadata, 1, MAX_TRIAL_BOOTS).unwrap();
                }
            }
            chip.otadata.cut_after(k);
            let done = match step {
                0 | 2 => ota::on_boot(&mut chip.otadata, 1, MAX_TRIAL_BOOTS).is_ok(),
                _ => ota::confirm(&mut chip.otadata, 1).is_ok(),
            };
            chip.power_on();
            let booted = chip.boots();
            let image: &[u8] = if booted == 0 { &old } else { &new };
            assert!(chip.slot_holds(booted, image), "step {step}, cut after {k}");
            match step {
                // Counting a boot: the image stays selected, whether or not the count landed.
                0 => assert_eq!(booted, 1, "cut after {k} while counting"),
                // Confirming: once done, no rollback ever; cut before, still on trial.
                1 => {
                    let mut later = Vec::new();
                    for _ in 0..=MAX_TRIAL_BOOTS {
                        later.push(ota::on_boot(&mut chip.otadata, 1, MAX_TRIAL_BOOTS).unwrap());
                    }
                    let trial = [1, 2, 3].map(|boot| BootCheck::Trial { boot, of: 3 });
                    if done || later.iter().all(|c| *c == BootCheck::Confirmed) {
                        assert!(later.iter().all(|c| *c == BootCheck::Confirmed), "cut after {k}: {later:?}");
                        assert_eq!(chip.boots(), 1, "a confirmed image is never taken back");
                    } else {
                        // The cut came before any bit of the state changed: still on trial.
                        assert_eq!(later[..3], trial, "cut after {k}");
                        assert_eq!(later[3], BootCheck::RolledBack);
                        assert_eq!(chip.boots(), 0);
                    }
                }
                // Rolling back: done, the old image; cut before, the next boot finishes it.
                _ => {
                    if done {
                        assert_eq!(booted, 0, "cut after {k} while rolling back");
                    } else if booted == 1 {
                        assert_eq!(ota::on_boot(&mut chip.otadata, 1, MAX_TRIAL_BOOTS), Ok(BootCheck::RolledBack));
                        assert_eq!(chip.boots(), 0);
                    }
                }
            }
            cuts += 1;
        }
    }
    assert!(cuts > 60);
}

/// The entries as ESP-IDF writes them (the bytes esp-bootloader-esp-idf's own tests hold),
/// and the bootloader's rule for choosing between two.
#[test]
fn otadata_entries_are_read_as_the_esp_idf_bootloader_reads_them() {
    let parse = |b: [u8; 32]| {
        let mut f = RamFlash::new(SECTOR, 2);
        f.program(0, &b).unwrap();
        ota::entries(&f).unwrap()[0]
    };
    let entry = |seq: u32, state: u32, crc: [u8; 4]| {
        let mut b = [0xFF; 32];
        b[..4].copy_from_slice(&seq.to_le_bytes());
        b[24..28].copy_from_slice(&state.to_le_bytes());
        b[28..].copy_from_slice(&crc);
        b
    };
    let seq1 = parse(entry(1, u32::MAX, [154, 152, 67, 71]));
    let seq2_new = parse(entry(2, 0, [116, 55, 246, 85]));
    let seq3_pending = parse(entry(3, 1, [17, 80, 74, 237]));
    for (e, slot) in [(seq1, 0), (seq2_new, 1), (seq3_pending, 0)] {
        assert!(e.is_valid(), "{e:?}");
        assert_eq!(e.crc, ota::seq_crc(e.seq));
        assert_eq!(e.slot(), slot);
    }
    let invalid = Entry { state: 3, ..seq3_pending };
    let aborted = Entry { state: 4, ..seq3_pending };
    let bad_crc = Entry { crc: seq3_pending.crc ^ 1, ..seq3_pending };
    let blank = Entry { seq: u32::MAX, label: [0xFF; 20], state: u32::MAX, crc: u32::MAX };
    for e in [invalid, aborted, bad_crc, blank] {
        assert!(!e.is_valid(), "{e:?}");
    }
    assert_eq!(ota::active(&[seq1, seq2_new]), Some(1), "the higher sequence wins");
    assert_eq!(ota::active(&[seq3_pending, seq2_new]), Some(0));
    assert_eq!(ota::active(&[seq1, seq1]), Some(0), "a tie goes to the first");
    assert_eq!(ota::active(&[invalid, seq2_new]), Some(1), "an invalid entry is passed over");
    assert_eq!(ota::active(&[aborted, bad_crc]), None);
    assert_eq!(ota::selected_slot(&[blank, blank]), 0, "no valid entry: ota_0");
}

#[test]
fn the_build_key_is_64_hex_digits() {
    let key = keys(9);
    let hex: String = key.pk.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(ota::parse_key(&hex), Some(*key.pk));
    assert_eq!(ota::parse_key(&hex.to_uppercase()), Some(*key.pk));
    for bad in ["", &hex[1..], &format!("{hex}0"), &hex.replacen('0', "g", 1)] {
        assert_eq!(ota::parse_key(bad), None, "{bad:?}");
    }
}

/// `firmware/sign.sh` (openssl) makes the key and signs; the chip's check takes the result,
/// with the public key `sign.sh --pubkey` prints (what `build.sh --sign` builds in).
#[test]
fn an_update_signed_by_sign_sh_is_taken() {
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("chela-ota-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pem, img, out) = (dir.join("key.pem"), dir.join("image.bin"), dir.join("image.ota"));
    let ok = |c: &mut Command| {
        let o = c.output().expect("openssl and bash are on this machine");
        assert!(o.status.success(), "{c:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    ok(Command::new("openssl").args(["genpkey", "-algorithm", "ed25519", "-out"]).arg(&pem));
    let new = esp_image(CHIP_ESP32C3, IMAGE_LEN, 5);
    std::fs::write(&img, &new).unwrap();
    let sign = concat!(env!("CARGO_MANIFEST_DIR"), "/../sign.sh");
    ok(Command::new("bash").arg(sign).arg(&pem).arg(&img).arg(&out));
    let hex = ok(Command::new("bash").arg(sign).arg("--pubkey").arg(&pem));
    let pk = ota::parse_key(hex.trim()).expect("64 hex digits");
    let file = std::fs::read(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();

    let mut chip = Chip::new(&esp_image(CHIP_ESP32C3, 30_000, 1));
    let mut u = Update::begin(Some(&pk), CHIP_ESP32C3, &chip.otadata, &chip.slots, 0).unwrap();
    u.write(&mut chip.slots, &file).unwrap();
    assert_eq!(u.finish(&mut chip.otadata, &mut chip.slots), Ok(1));
    assert!(chip.slot_holds(1, &new));
    // The same file against another key: refused.
    let mut chip = Chip::new(&esp_image(CHIP_ESP32C3, 30_000, 1));
    let other = keys(1);
    let mut u = Update::begin(Some(&*other.pk), CHIP_ESP32C3, &chip.otadata, &chip.slots, 0).unwrap();
    u.write(&mut chip.slots, &file).unwrap();
    assert_eq!(u.finish(&mut chip.otadata, &mut chip.slots), Err(OtaError::BadSignature));
}

/// The HTTP side: an update as a response body in network-sized pieces, with progress; a
/// non-200 answer or a bad piece stops the body and is the reason.
#[test]
fn an_update_arrives_as_an_http_body() {
    let key = keys(7);
    let new = esp_image(CHIP_ESP32C3, 150_000, 2);
    let file = update_file(&key, &new);
    let mut chip = Chip::new(&esp_image(CHIP_ESP32C3, 30_000, 1));
    chip.slots = [RamFlash::new(SECTOR, 64), RamFlash::new(SECTOR, 64)];
    let mut seen = Vec::new();
    let mut report = |p: ota::Progress| seen.push(p.written);
    let u = Update::begin(Some(&*key.pk), CHIP_ESP32C3, &chip.otadata, &chip.slots, 0).unwrap();
    let mut r = ota::Receiver::new(u, &mut chip.slots, &mut report);
    r.head(200, &[]);
    for piece in file.chunks(512) {
        assert!(r.body(piece));
    }
    r.end();
    assert_eq!(r.finish(&mut chip.otadata), Ok(1));
    assert_eq!(seen.len(), 2, "every 64 KiB of 150,000 B: {seen:?}");
    assert!(seen.windows(2).all(|w| w[1] >= w[0] + ota::REPORT_EVERY));
    assert!(chip.slot_holds(1, &new));

    let mut chip = Chip::new(&esp_image(CHIP_ESP32C3, 30_000, 1));
    let mut none = |_: ota::Progress| {};
    let u = Update::begin(Some(&*key.pk), CHIP_ESP32C3, &chip.otadata, &chip.slots, 0).unwrap();
    let mut r = ota::Receiver::new(u, &mut chip.slots, &mut none);
    r.head(404, &[]);
    assert!(!r.body(&file[..512]), "a 404 body is not written");
    let err = r.finish(&mut chip.otadata).unwrap_err();
    assert_eq!(err, OtaError::Status(404));
    assert!(err.to_string().contains("404"));

    let u = Update::begin(Some(&*key.pk), CHIP_ESP32C3, &chip.otadata, &chip.slots, 0).unwrap();
    let mut r = ota::Receiver::new(u, &mut chip.slots, &mut none);
    r.head(200, &[]);
    assert!(!r.body("<html>not found</html>".repeat(5).as_bytes()));
    assert_eq!(r.finish(&mut chip.otadata), Err(OtaError::NotAnUpdate));
    assert_eq!(chip.boots(), 0);
}
