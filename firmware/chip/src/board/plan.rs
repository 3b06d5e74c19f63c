//! A build's board description, checked on the host: `firmware/esp32/build.rs`
//! runs [`check`] with chela-board's own checker, so a bad board.json fails the build with the
//! checker's message, and writes [`to_rust`]'s text, a [`super::Compiled`] the chip reads with
//! no JSON parser and no checker in the image.
//!
//! `build.rs` compiles this file too (`#[path]`), so it uses only `alloc` and `chela_board`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use chela_board::spec::{self, Kind, Spec};

/// The longest board description a build may embed.
pub const MAX_BOARD_JSON: usize = 16 * 1024;

/// What the chip drives of a description (its I²C sensors and their buses), and the notes it
/// prints at boot about what it leaves out.
pub struct Checked {
    pub spec: Spec,
    pub notes: Vec<String>,
}

/// Checks `board_json` for chip `chip` (`esp32c3`, `esp32c6`) and keeps what the chip drives.
/// An empty description is no board; one that is too long, does not pass the checker or is
/// for another chip is an error, one line per problem.
pub fn check(board_json: &str, chip: &str) -> Result<Option<Checked>, String> {
    if board_json.trim().is_empty() {
        return Ok(None);
    }
    if board_json.len() > MAX_BOARD_JSON {
        return Err(format!("the description is {} bytes, over {MAX_BOARD_JSON}", board_json.len()));
    }
    let mut spec = spec::parse(board_json).map_err(|problems| {
        problems.iter().map(|p| format!("board.json line {}: {}", p.line, p.message)).collect::<Vec<_>>().join("\n")
    })?;
    if spec.chip.name != chip {
        return Err(format!("the description is for {}, this image for {chip}", spec.chip.name));
    }
    let mut notes = Vec::new();
    spec.devices.retain(|d| {
        let keep = d.kind.is_sensor();
        if !keep {
            notes.push(format!("[board] {} ({}) is not driven on the chip; left out", d.id, d.kind.name()));
        }
        keep
    });
    if !spec.gpio.is_empty() {
        notes.push("[board] the description's GPIO list is not used on the chip: set CHELA_GPIO_ALLOW".into());
        spec.gpio.clear();
    }
    // Sensors take no params; a description that gave some would lose them in the compact form.
    if let Some(d) = spec.devices.iter().find(|d| !d.params.is_empty()) {
        return Err(format!("device `{}` has params, which the chip's sensors do not take", d.id));
    }
    Ok(Some(Checked { spec, notes }))
}

/// `checked` as a Rust expression of type `chela_chip::board::Compiled` (strings as Rust
/// literals through `{:?}`, which escapes what a literal needs).
pub fn to_rust(checked: &Checked) -> String {
    let s = &checked.spec;
    let mut out = String::new();
    let pins = |pins: &alloc::collections::BTreeMap<String, u8>| {
        let mut t = String::from("&[");
        for (role, pin) in pins {
            let _ = write!(t, "({role:?}, {pin}), ");
        }
        t.push(']');
        t
    };
    let _ = write!(out, "chela_chip::board::Compiled {{ name: {:?}, chip: {:?}, notes: &[", s.name, s.chip.name);
    for n in &checked.notes {
        let _ = write!(out, "{n:?}, ");
    }
    out.push_str("], buses: &[");
    for b in &s.buses {
        let _ = write!(
            out,
            "chela_chip::board::CompiledBus {{ id: {:?}, pins: {}, path: {:?} }}, ",
            b.id,
            pins(&b.pins),
            b.path
        );
    }
    out.push_str("], devices: &[");
    for d in &s.devices {
        let kind = match d.kind {
            Kind::Aht20 => "Aht20",
            Kind::Sgp30 => "Sgp30",
            Kind::Bh1750 => "Bh1750",
            // `check` kept only the sensors.
            Kind::Ws2812 { .. } | Kind::Servo(_) => unreachable!("only sensors are compiled"),
        };
        let _ = write!(
            out,
            "chela_chip::board::CompiledDevice {{ id: {:?}, kind: chela_board::spec::Kind::{kind}, bus: {:?}, \
             address: {:?}, pins: {}, line: {} }}, ",
            d.id,
            d.bus,
            d.address,
            pins(&d.pins),
            d.line
        );
    }
    out.push_str("] }");
    out
}
