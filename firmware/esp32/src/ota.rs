//! Over-the-air updates on the chip (the logic and its tests are `chela_chip::ota`): the boot's
//! trial count and rollback, "ready" keeping a new image, and an update fetched from an
//! `https://` URL (the console's `ota URL`) or pushed by a caller that has the update as a body
//! ([`Updates::receive`]: what the gateway's `POST /ota` hands its request body to). Progress and
//! the result go to the serial console; the status LED shows "thinking" while an update comes
//! in and "error" when one is refused.

use alloc::format;
use alloc::string::String;

use chela_chip::link::Answer;
use chela_chip::ota::{self, BootCheck, MAX_TRIAL_BOOTS, OtaError, Progress, Receiver, Update};
use chela_chip::say;

use crate::board::Esp;
use crate::certs;
use crate::flash::{OtaParts, Partition};
use crate::led::{Led, State};
use crate::net::{self, Https};

/// The update key `firmware/build.sh --sign KEYFILE` builds in; without it every update is
/// refused, saying so.
const KEY: Option<[u8; 32]> = match option_env!("CHELA_OTA_PUBKEY") {
    Some(hex) => match ota::parse_key(hex) {
        Some(k) => Some(k),
        None => panic!("CHELA_OTA_PUBKEY is not 64 hex digits (firmware/sign.sh --pubkey KEYFILE)"),
    },
    None => None,
};

#[cfg(feature = "esp32c3")]
const CHIP: u16 = ota::CHIP_ESP32C3;
#[cfg(feature = "esp32c6")]
const CHIP: u16 = ota::CHIP_ESP32C6;

/// The update partitions, or why updates are off.
pub struct Updates {
    parts: Result<OtaParts, &'static str>,
    on_trial: bool,
}

/// An update coming in as a body: hand it the pieces ([`Answer`]), then [`Incoming::finish`].
pub struct Incoming<'a> {
    receiver: Receiver<'a, Partition>,
    otadata: &'a mut Partition,
}

impl Answer for Incoming<'_> {
    fn head(&mut self, status: u16, headers: &[(&str, &str)]) {
        self.receiver.head(status, headers);
    }
    fn body(&mut self, bytes: &[u8]) -> bool {
        self.receiver.body(bytes)
    }
    fn end(&mut self) {
        self.receiver.end();
    }
}

impl Incoming<'_> {
    /// Checks the signature over what is in the slot and selects it: the slot that boots next
    /// ([`restart_into`] it), or why it was refused.
    pub fn finish(self) -> Result<usize, OtaError> {
        self.receiver.finish(self.otadata)
    }
}

/// Restarts into the update just selected.
pub fn restart_into(slot: usize) -> ! {
    say!(&Esp, "[ota] signature good; slot {slot} boots next, on trial for {MAX_TRIAL_BOOTS} boots: restarting");
    esp_hal::system::software_reset()
}

/// Progress on the serial console.
pub fn report(p: Progress) {
    say!(&Esp, "[ota] {} of {} B", p.written, p.total.unwrap_or(0));
}

impl Updates {
    /// Run first at boot: counts a new image's trial boot, and past the limit rolls it back
    /// (restarting into the previous image).
    pub fn boot(mut parts: Result<OtaParts, &'static str>) -> Updates {
        let mut on_trial = false;
        match &mut parts {
            Ok(p) => match ota::on_boot(&mut p.otadata, p.running, MAX_TRIAL_BOOTS) {
                Ok(BootCheck::Confirmed) => say!(&Esp, "[ota] running slot {}", p.running),
                Ok(BootCheck::Trial { boot, of }) => {
                    on_trial = true;
                    say!(&Esp, "[ota] new image on trial, boot {boot} of {of}: kept once ready (WiFi up for a minute)");
                }
                Ok(BootCheck::RolledBack) => {
                    say!(
                        &Esp,
                        "[ota] the new image was not ready within {MAX_TRIAL_BOOTS} boots: back to the previous one"
                    );
                    esp_hal::system::software_reset()
                }
                Err(e) => say!(&Esp, "[ota] {e}"),
            },
            Err(e) => say!(&Esp, "[ota] updates are off: {e}"),
        }
        Updates { parts, on_trial }
    }

    /// The image is ready (WiFi up, running a while): keep it.
    pub fn ready(&mut self) {
        let Ok(p) = &mut self.parts else { return };
        if !core::mem::take(&mut self.on_trial) {
            return;
        }
        match ota::confirm(&mut p.otadata, p.running) {
            Ok(_) => say!(&Esp, "[ota] this image is ready: kept"),
            Err(e) => say!(&Esp, "[ota] could not mark this image ready: {e}"),
        }
    }

    /// Starts taking an update into the slot not running.
    pub fn receive<'a>(&'a mut self, report: &'a mut dyn FnMut(Progress)) -> Result<Incoming<'a>, OtaError> {
        let p = self.parts.as_mut().map_err(|e| OtaError::Layout(e))?;
        let update = Update::begin(KEY.as_ref(), CHIP, &p.otadata, &p.slots, p.running)?;
        say!(&Esp, "[ota] writing slot {}", update.target());
        Ok(Incoming { receiver: Receiver::new(update, &mut p.slots, report), otadata: &mut p.otadata })
    }

    /// `ota URL`: fetches, checks and installs the update at `url`, then restarts; returns only
    /// when it was refused or failed, having said why.
    pub async fn fetch(&mut self, https: &mut Https, led: &mut Led, url: &str) {
        led.show(State::Thinking);
        let why: String = match self.fetch_inner(https, url).await {
            Ok(e) => format!("{e}"),
            Err(e) => e,
        };
        say!(&Esp, "[ota] refused: {why}");
        led.show(State::Error);
    }

    async fn fetch_inner(&mut self, https: &mut Https, url: &str) -> Result<OtaError, String> {
        let (host, _) = net::split(url).map_err(|e| format!("{e}"))?;
        let roots = certs::update_roots(host);
        let mut progress = report;
        let mut incoming = self.receive(&mut progress).map_err(|e| format!("{e}"))?;
        https
            .exchange_under(Some(roots), "GET", url, &[], net::Windows::new(0, &mut net::whole(&[])), &mut incoming)
            .await
            .map_err(|e| format!("{e}"))?;
        match incoming.finish() {
            Ok(slot) => restart_into(slot),
            Err(e) => Ok(e),
        }
    }
}
