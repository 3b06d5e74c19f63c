//! Over-the-air updates: a signed image written to the app slot the chip is not running from,
//! handed to the ESP-IDF second-stage bootloader through `otadata`, and taken back if the new
//! image never reaches "ready".
//!
//! What it is: the update file's format ([`Header`]: magic, length, an Ed25519 signature over
//! the ESP app image that follows), a streaming writer ([`Update`]: bytes in as they arrive,
//! each slot sector erased just before it is written, the signature checked over what was
//! read back from the slot, then the switch), the `otadata` entries as the bootloader reads
//! them ([`Entry`], [`active`]), and the rollback ([`on_boot`], [`confirm`]).
//!
//! The bootloader boots the slot of the valid `otadata` entry with the highest sequence
//! number ((seq - 1) mod 2); an entry is valid when its sequence is not 0xFFFFFFFF, its CRC
//! matches and its state is neither Invalid (3) nor Aborted (4). Every step here writes so
//! that a power cut at any byte leaves either the old image or the new one bootable:
//! - the image goes to the other slot; `otadata` is untouched until the image verified;
//! - the new entry goes to the `otadata` sector the running image's entry is not in, label
//!   first, sequence next, CRC last: until the CRC is whole the entry is invalid and the
//!   bootloader keeps the running image;
//! - the entry's state stays 0xFFFFFFFF (Undefined, which every bootloader boots) and its
//!   label carries a trial mark and a boot counter: each boot of the new image clears one
//!   more counter bit (programming only clears bits: no erase, nothing to tear);
//! - "ready" programs the state to Valid (0xFFFFFFFF to 2, again only clearing bits);
//! - a trial boot past the limit erases its own entry: the bootloader falls back to the
//!   previous entry, the previous image.
//!
//! The bootloader's own rollback (ESP-IDF's `CONFIG_BOOTLOADER_APP_ROLLBACK_ENABLE`, which
//! also catches an image that dies before it runs any of this) is not needed and, with the
//! state left Undefined, not used: the rule above works with the stock bootloader.

use alloc::format;
use alloc::string::String;
use core::fmt;

use crate::ed25519::Verifying;
use chela_core::flash::Flash;

/// The update file's magic.
pub const MAGIC: [u8; 8] = *b"CHELAOTA";
/// The update file format this firmware reads.
pub const VERSION: u8 = 1;
/// Bytes before the image: magic (8), version (1), three zero bytes, the image length (u32
/// little-endian), the Ed25519 signature (64).
pub const HEADER_LEN: usize = 80;
/// The ESP app image header's first byte.
const ESP_IMAGE_MAGIC: u8 = 0xE9;
/// The ESP app image header (8 bytes) and its extended header (16) whose bytes 4..6 are the
/// chip id: all an update must have before its chip can be checked.
const ESP_HEADER_LEN: usize = 24;
/// The chip ids of the ESP image header, for the chips this firmware builds for.
pub const CHIP_ESP32C3: u16 = 5;
pub const CHIP_ESP32C6: u16 = 13;

/// Boots a new image may take to reach "ready" before it is rolled back.
pub const MAX_TRIAL_BOOTS: u32 = 3;

/// `otadata` entry layout: sequence (4), label (20), state (4), CRC of the sequence (4).
const ENTRY_LEN: usize = 32;
const LABEL_AT: u32 = 4;
const STATE_AT: u32 = 24;
const CRC_AT: u32 = 28;
/// The first label bytes of an entry this code wrote and that is on trial; the other 16
/// label bytes count its boots, one cleared bit per boot.
const TRIAL_MARK: [u8; 4] = *b"CHLA";
const COUNTER_AT: u32 = LABEL_AT + 4;
const COUNTER_BITS: u32 = 128;
const UNSET: u32 = u32::MAX;
const STATE_VALID: u32 = 2;
const STATE_INVALID: u32 = 3;
const STATE_ABORTED: u32 = 4;
/// Programs are at most this long and aligned to it, so none crosses a sector.
const PAGE: usize = 256;

/// The parsed front of an update file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Bytes of ESP app image after the header.
    pub image_len: u32,
    pub signature: [u8; 64],
}

impl Header {
    /// Parses the first [`HEADER_LEN`] bytes of an update file; `slot_len` bounds the image.
    pub fn parse(bytes: &[u8], slot_len: u32) -> Result<Header, OtaError> {
        let b: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(OtaError::Truncated { got: bytes.len() as u64, want: HEADER_LEN as u64 })?;
        if b[..8] != MAGIC {
            return Err(OtaError::NotAnUpdate);
        }
        if b[8] != VERSION || b[9..12] != [0, 0, 0] {
            return Err(OtaError::Version(b[8]));
        }
        let image_len = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        if (image_len as usize) < ESP_HEADER_LEN {
            return Err(OtaError::NotAnEspImage);
        }
        if image_len > slot_len {
            return Err(OtaError::TooLarge { len: image_len, slot: slot_len });
        }
        let mut signature = [0; 64];
        signature.copy_from_slice(&b[16..80]);
        Ok(Header { image_len, signature })
    }

    /// The header's bytes, as `firmware/sign.sh` writes them.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0; HEADER_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[8] = VERSION;
        b[12..16].copy_from_slice(&self.image_len.to_le_bytes());
        b[16..].copy_from_slice(&self.signature);
        b
    }
}

/// Why an update was refused or failed. Each says what to do in its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OtaError {
    /// The firmware was built without a public key (`firmware/build.sh --sign`).
    NoKey,
    NotAnUpdate,
    Version(u8),
    NotAnEspImage,
    WrongChip {
        image: u16,
        this: u16,
    },
    TooLarge {
        len: u32,
        slot: u32,
    },
    /// More bytes came than the header announced.
    TooLong {
        want: u64,
    },
    Truncated {
        got: u64,
        want: u64,
    },
    BadSignature,
    /// The running image is still on trial: its fallback is the slot an update would overwrite.
    OnTrial,
    /// The server did not answer 200 to the update's `GET`.
    Status(u16),
    /// The slot partitions are not two of the same size, or `otadata` is not two 4 KiB sectors.
    Layout(&'static str),
    Flash(String),
}

impl fmt::Display for OtaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OtaError::NoKey => {
                f.write_str("this firmware has no update key built in (build it with firmware/build.sh --sign KEYFILE)")
            }
            OtaError::NotAnUpdate => f.write_str(
                "not a Chela update file (no CHELAOTA header): sign the image with firmware/build.sh --sign",
            ),
            OtaError::Version(v) => write!(f, "update file format {v} is not one this firmware reads ({VERSION})"),
            OtaError::NotAnEspImage => f.write_str("the update does not hold an ESP app image"),
            OtaError::WrongChip { image, this } => write!(f, "the image is for chip id {image}, this chip is {this}"),
            OtaError::TooLarge { len, slot } => write!(f, "the image is {len} B, the app slot holds {slot} B"),
            OtaError::TooLong { want } => write!(f, "more bytes than the {want} the header announced"),
            OtaError::Truncated { got, want } => write!(f, "truncated: {got} of {want} bytes arrived"),
            OtaError::BadSignature => f.write_str("the signature does not match this firmware's update key: refused"),
            OtaError::OnTrial => {
                f.write_str("the running image is still on trial (not ready yet); update again once it is")
            }
            OtaError::Status(s) => write!(f, "the server answered {s}, not 200 with the update"),
            OtaError::Layout(why) => write!(f, "the partition table does not allow updates: {why}"),
            OtaError::Flash(e) => write!(f, "flash error: {e}"),
        }
    }
}

fn flash_err(e: impl fmt::Display) -> OtaError {
    OtaError::Flash(format!("{e}"))
}

/// The CRC the bootloader keeps of an entry's sequence: ESP-IDF's `esp_rom_crc32_le(UINT32_MAX,
/// ..)`, which is the reflected CRC-32 started from 0 and inverted at the end.
pub fn seq_crc(seq: u32) -> u32 {
    let mut crc = 0u32;
    for b in seq.to_le_bytes() {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// One `otadata` entry, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub seq: u32,
    pub label: [u8; 20],
    pub state: u32,
    pub crc: u32,
}

impl Entry {
    fn from_bytes(b: &[u8; ENTRY_LEN]) -> Entry {
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut label = [0; 20];
        label.copy_from_slice(&b[4..24]);
        Entry { seq: word(0), label, state: word(24), crc: word(28) }
    }

    /// What the bootloader boots from: ESP-IDF's `bootloader_common_ota_select_valid`.
    pub fn is_valid(&self) -> bool {
        self.seq != UNSET && self.state != STATE_INVALID && self.state != STATE_ABORTED && self.crc == seq_crc(self.seq)
    }

    /// The slot (0 or 1) a valid entry selects.
    pub fn slot(&self) -> usize {
        (self.seq.wrapping_sub(1) % 2) as usize
    }

    /// Written by [`Update`] and not yet confirmed ready.
    fn on_trial(&self) -> bool {
        self.state == UNSET && self.label[..4] == TRIAL_MARK
    }

    /// Boots counted so far on a trial entry.
    fn boots(&self) -> u32 {
        COUNTER_BITS - self.label[4..].iter().map(|b| b.count_ones()).sum::<u32>()
    }
}

/// Reads both entries of the `otadata` partition.
pub fn entries<D: Flash>(otadata: &D) -> Result<[Entry; 2], OtaError> {
    check_otadata(otadata)?;
    let mut out = [Entry { seq: UNSET, label: [0xFF; 20], state: UNSET, crc: UNSET }; 2];
    for (i, e) in out.iter_mut().enumerate() {
        let mut b = [0; ENTRY_LEN];
        otadata.read(i as u32 * otadata.sector_size(), &mut b).map_err(flash_err)?;
        *e = Entry::from_bytes(&b);
    }
    Ok(out)
}

/// The entry the bootloader follows: the valid one with the highest sequence (the first on a
/// tie), or none (then it boots slot 0).
pub fn active(entries: &[Entry; 2]) -> Option<usize> {
    match (entries[0].is_valid(), entries[1].is_valid()) {
        (true, true) if entries[0].seq >= entries[1].seq => Some(0),
        (true, true) => Some(1),
        (true, false) => Some(0),
        (false, true) => Some(1),
        (false, false) => None,
    }
}

/// The slot the bootloader picks from `otadata`.
pub fn selected_slot(entries: &[Entry; 2]) -> usize {
    active(entries).map_or(0, |i| entries[i].slot())
}

fn check_otadata<D: Flash>(otadata: &D) -> Result<(), OtaError> {
    if otadata.sector_size() != 4096 || otadata.sector_count() != 2 {
        return Err(OtaError::Layout("otadata must be two 4 KiB sectors (0x2000 bytes)"));
    }
    Ok(())
}

/// What this boot is, as far as updates go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootCheck {
    /// The running image is confirmed (or was not installed by an update).
    Confirmed,
    /// A new image's `boot`-th boot of at most `of`: it must reach "ready" ([`confirm`]).
    Trial { boot: u32, of: u32 },
    /// The new image used up its boots; its entry is gone: restart to boot the previous one.
    RolledBack,
}

/// Run once at each boot, before anything that can crash: counts the boots of an image on
/// trial, and rolls it back past `max_boots`. `running` is the slot the bootloader booted.
pub fn on_boot<D: Flash>(otadata: &mut D, running: usize, max_boots: u32) -> Result<BootCheck, OtaError> {
    let es = entries(otadata)?;
    let Some(i) = active(&es).filter(|&i| es[i].slot() == running && es[i].on_trial()) else {
        return Ok(BootCheck::Confirmed);
    };
    let boots = es[i].boots();
    let max_boots = max_boots.clamp(1, COUNTER_BITS);
    // The next counter bit to clear: the lowest set bit of the first byte that has one (a
    // power cut mid-program may have cleared bits out of order; the count is the zero bits).
    let next = es[i].label[4..].iter().position(|&b| b != 0);
    let Some(at) = next.filter(|_| boots < max_boots) else {
        otadata.erase(i as u32).map_err(flash_err)?;
        return Ok(BootCheck::RolledBack);
    };
    let mut word = [0xFF; 4];
    let byte = es[i].label[4 + at];
    let word_at = (COUNTER_AT as usize + at) & !3;
    word[COUNTER_AT as usize + at - word_at] = byte & (byte - 1);
    otadata.program(i as u32 * otadata.sector_size() + word_at as u32, &word).map_err(flash_err)?;
    Ok(BootCheck::Trial { boot: boots + 1, of: max_boots })
}

/// The running image reached "ready": keep it. True when this confirmed a trial.
pub fn confirm<D: Flash>(otadata: &mut D, running: usize) -> Result<bool, OtaError> {
    let es = entries(otadata)?;
    let Some(i) = active(&es).filter(|&i| es[i].slot() == running && es[i].on_trial()) else {
        return Ok(false);
    };
    let at = i as u32 * otadata.sector_size() + STATE_AT;
    otadata.program(at, &STATE_VALID.to_le_bytes()).map_err(flash_err)?;
    Ok(true)
}

/// How far an update got, for the console and the LED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub written: u64,
    /// The image's length, once the header arrived.
    pub total: Option<u64>,
}

/// An update in progress: feed it the update file's bytes in any pieces ([`Update::write`]),
/// then [`Update::finish`]. Dropping it half way leaves the running image selected.
pub struct Update {
    key: [u8; 32],
    chip: u16,
    /// The slot written: the one not running.
    target: usize,
    slot_len: u32,
    head: [u8; HEADER_LEN],
    head_len: usize,
    header: Option<Header>,
    page: [u8; PAGE],
    page_len: usize,
    /// Image bytes taken (programmed or in `page`).
    taken: u32,
    /// Slot bytes from 0 that are erased or written.
    erased_to: u32,
}

impl Update {
    /// Starts an update of the slot the chip does not run from. `key` is the firmware's update
    /// key (32 bytes of Ed25519 public key), `chip` its ESP image chip id.
    pub fn begin<D: Flash, S: Flash>(
        key: Option<&[u8; 32]>,
        chip: u16,
        otadata: &D,
        slots: &[S; 2],
        running: usize,
    ) -> Result<Update, OtaError> {
        let key = *key.ok_or(OtaError::NoKey)?;
        if running > 1 {
            return Err(OtaError::Layout("the running image is not in an OTA slot"));
        }
        let es = entries(otadata)?;
        if active(&es).is_some_and(|i| es[i].slot() == running && es[i].on_trial()) {
            return Err(OtaError::OnTrial);
        }
        let len = |s: &S| u64::from(s.sector_size()) * u64::from(s.sector_count());
        if len(&slots[0]) != len(&slots[1]) || !(slots[0].sector_size() as usize).is_multiple_of(PAGE) {
            return Err(OtaError::Layout("the two app slots differ"));
        }
        let slot_len = u32::try_from(len(&slots[0])).map_err(|_| OtaError::Layout("app slot over 4 GiB"))?;
        Ok(Update {
            key,
            chip,
            target: 1 - running,
            slot_len,
            head: [0; HEADER_LEN],
            head_len: 0,
            header: None,
            page: [0xFF; PAGE],
            page_len: 0,
            taken: 0,
            erased_to: 0,
        })
    }

    /// The slot being written.
    pub fn target(&self) -> usize {
        self.target
    }

    /// Takes the next bytes of the update file.
    pub fn write<S: Flash>(&mut self, slots: &mut [S; 2], mut bytes: &[u8]) -> Result<Progress, OtaError> {
        if self.header.is_none() {
            let n = (HEADER_LEN - self.head_len).min(bytes.len());
            self.head[self.head_len..self.head_len + n].copy_from_slice(&bytes[..n]);
            self.head_len += n;
            bytes = &bytes[n..];
            if self.head_len == HEADER_LEN {
                self.header = Some(Header::parse(&self.head, self.slot_len)?);
            }
        }
        if let Some(h) = &self.header {
            let want = h.image_len;
            if bytes.len() as u64 > u64::from(want - self.taken) {
                return Err(OtaError::TooLong { want: u64::from(want) });
            }
            let slot = &mut slots[self.target];
            while !bytes.is_empty() {
                let n = (PAGE - self.page_len).min(bytes.len());
                self.page[self.page_len..self.page_len + n].copy_from_slice(&bytes[..n]);
                let before = self.taken as usize;
                self.page_len += n;
                self.taken += n as u32;
                bytes = &bytes[n..];
                if before < ESP_HEADER_LEN && self.taken as usize >= ESP_HEADER_LEN {
                    self.check_esp_header()?;
                }
                if self.page_len == PAGE {
                    self.flush(slot)?;
                }
            }
        }
        Ok(self.progress())
    }

    pub fn progress(&self) -> Progress {
        Progress { written: u64::from(self.taken), total: self.header.as_ref().map(|h| u64::from(h.image_len)) }
    }

    /// The ESP image header is in the first page: magic, and the chip it was built for.
    fn check_esp_header(&self) -> Result<(), OtaError> {
        // The page holds image bytes from 0 while fewer than PAGE arrived.
        if self.page[0] != ESP_IMAGE_MAGIC {
            return Err(OtaError::NotAnEspImage);
        }
        let image = u16::from_le_bytes([self.page[12], self.page[13]]);
        if image != self.chip {
            return Err(OtaError::WrongChip { image, this: self.chip });
        }
        Ok(())
    }

    /// Programs the page at its place, erasing the sector first if it was not yet.
    fn flush<S: Flash>(&mut self, slot: &mut S) -> Result<(), OtaError> {
        let at = (self.taken - 1) & !(PAGE as u32 - 1);
        let sector = slot.sector_size();
        while self.erased_to < at + PAGE as u32 {
            slot.erase(self.erased_to / sector).map_err(flash_err)?;
            self.erased_to += sector;
        }
        let len = self.page_len.next_multiple_of(4);
        self.page[self.page_len..len].fill(0xFF);
        slot.program(at, &self.page[..len]).map_err(flash_err)?;
        self.page = [0xFF; PAGE];
        self.page_len = 0;
        Ok(())
    }

    /// The last bytes arrived: checks the length, reads the slot back and checks the signature
    /// over what is there, then selects the slot for the next boot (on trial). Restart after.
    pub fn finish<D: Flash, S: Flash>(mut self, otadata: &mut D, slots: &mut [S; 2]) -> Result<usize, OtaError> {
        let Some(h) = self.header.clone() else {
            return Err(OtaError::Truncated { got: self.head_len as u64, want: HEADER_LEN as u64 });
        };
        if self.taken < h.image_len {
            return Err(OtaError::Truncated {
                got: (HEADER_LEN as u64) + u64::from(self.taken),
                want: (HEADER_LEN as u64) + u64::from(h.image_len),
            });
        }
        if self.page_len > 0 {
            self.flush(&mut slots[self.target])?;
        }
        let mut st = Verifying::new(&self.key, &h.signature).map_err(|_| OtaError::BadSignature)?;
        let mut buf = [0u8; PAGE];
        let mut at = 0u32;
        while at < h.image_len {
            let n = (h.image_len - at).min(PAGE as u32) as usize;
            slots[self.target].read(at, &mut buf[..n]).map_err(flash_err)?;
            st.absorb(&buf[..n]);
            at += n as u32;
        }
        st.verify().map_err(|_| OtaError::BadSignature)?;
        select(otadata, self.target)?;
        Ok(self.target)
    }
}

/// An update arriving as an HTTP body (the console's `ota URL` response, or a gateway's `POST
/// /ota` request body): each piece goes to [`Update::write`]; `report` hears the progress every
/// [`REPORT_EVERY`] bytes. The first error stops the body and is what [`Receiver::finish`] says.
pub struct Receiver<'a, S: Flash> {
    update: Update,
    slots: &'a mut [S; 2],
    report: &'a mut dyn FnMut(Progress),
    error: Option<OtaError>,
    reported: u64,
}

/// How often a [`Receiver`] reports progress.
pub const REPORT_EVERY: u64 = 64 * 1024;

impl<'a, S: Flash> Receiver<'a, S> {
    pub fn new(update: Update, slots: &'a mut [S; 2], report: &'a mut dyn FnMut(Progress)) -> Self {
        Receiver { update, slots, report, error: None, reported: 0 }
    }

    /// Checks and selects what arrived (see [`Update::finish`]).
    pub fn finish<D: Flash>(self, otadata: &mut D) -> Result<usize, OtaError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.update.finish(otadata, self.slots)
    }
}

impl<S: Flash> crate::link::Answer for Receiver<'_, S> {
    fn head(&mut self, status: u16, _: &[(&str, &str)]) {
        if status != 200 {
            self.error = Some(OtaError::Status(status));
        }
    }

    fn body(&mut self, bytes: &[u8]) -> bool {
        if self.error.is_some() {
            return false;
        }
        match self.update.write(self.slots, bytes) {
            Ok(p) => {
                if p.written >= self.reported + REPORT_EVERY {
                    self.reported = p.written;
                    (self.report)(p);
                }
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    fn end(&mut self) {}
}

/// Writes an entry selecting `target` (on trial, no boots counted) into the `otadata` sector
/// the active entry is not in.
fn select<D: Flash>(otadata: &mut D, target: usize) -> Result<(), OtaError> {
    let es = entries(otadata)?;
    let (into, after) = match active(&es) {
        Some(i) => (1 - i, es[i].seq),
        None => (0, 0),
    };
    let step = if after % 2 == target as u32 { 1 } else { 2 };
    let seq = after.checked_add(step).filter(|&s| s != UNSET).ok_or(OtaError::Layout("otadata sequence exhausted"))?;
    let base = into as u32 * otadata.sector_size();
    otadata.erase(into as u32).map_err(flash_err)?;
    let mut label = [0xFF; 20];
    label[..4].copy_from_slice(&TRIAL_MARK);
    otadata.program(base + LABEL_AT, &label).map_err(flash_err)?;
    otadata.program(base, &seq.to_le_bytes()).map_err(flash_err)?;
    otadata.program(base + CRC_AT, &seq_crc(seq).to_le_bytes()).map_err(flash_err)?;
    Ok(())
}

/// Parses a 64-hex-digit Ed25519 public key (the build's `CHELA_OTA_PUBKEY`).
pub const fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let h = hex.as_bytes();
    if h.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 64 {
        let (Some(hi), Some(lo)) = (nibble(h[i]), nibble(h[i + 1])) else { return None };
        out[i / 2] = hi << 4 | lo;
        i += 2;
    }
    Some(out)
}

const fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}
