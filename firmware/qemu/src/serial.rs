//! The serial console: command lines typed into the core's `Console`, as the UART
//! would hand them over, in uneven pieces. The replies go to the UART; the effects are
//! returned for the checks (the emulator has no radio to reconnect).

use alloc::string::String;
use alloc::vec::Vec;

use chela_core::console::{Console, Ctx, Effect, Heap, Status, Wifi};

use chela_chip::Board;

use crate::Emulated as Chip;
use crate::{heap, print, println};

/// Typed before the first turn: settings, a typo, a refused value, a pasted key.
pub const SETUP: &[u8] = include_bytes!("../fixtures/console_setup.txt");
/// Typed after a reboot: the settings must be back, masked, with the sessions and memory.
pub const AFTER: &[u8] = include_bytes!("../fixtures/console_after.txt");

/// The UART's pieces: a terminal sends a byte at a time, a paste arrives in bursts.
const PIECES: [usize; 4] = [1, 5, 64, 17];

/// What the console printed and asked for.
#[derive(Debug, Default)]
pub struct Transcript {
    pub printed: String,
    pub effects: Vec<Effect>,
}

/// Types `bytes` into a fresh console on `chip` and prints each command's name (never its
/// arguments: they may be secrets) and the reply.
pub fn type_in(chip: &mut Chip, bytes: &[u8]) -> Transcript {
    let mut console = Console::new();
    let mut out = Transcript::default();
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let name = line.split(|&b| b == b' ' || b == b'\n').next().unwrap_or_default();
        let looks_like_a_command = name.len() <= 24 && name.iter().all(|b| b.is_ascii_lowercase() || *b == b'_');
        match core::str::from_utf8(name) {
            Ok(name) if looks_like_a_command && line.len() <= 200 => println!("chela> {name} …"),
            _ => println!("chela> ({} bytes typed)", line.len()),
        }
        let h = heap::stats();
        let status = Status {
            wifi: Wifi::Off,
            heap: Heap {
                total: heap::arena_size(),
                free: heap::arena_size() - h.live,
                min_free: heap::arena_size() - h.high_water,
            },
            uptime_ms: chip.board.now_ms(),
            mode: Some(chip.guard.mode()),
            // No RNG here: `gateway_token` refuses, as on a board without one.
            random: [0; 16],
            // The whole console, as in an image with the connected parts.
            left_out: None,
            // The emulator runs no Feishu connection.
            feishu: false,
        };
        let mut ctx = Ctx { store: &mut chip.store, config: &mut chip.config, status };
        let mut rest = line;
        for &n in PIECES.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (piece, tail) = rest.split_at(n.min(rest.len()));
            rest = tail;
            console.handle_bytes(piece, &mut ctx, &mut |reply| {
                print!("{}", reply.text);
                out.printed.push_str(&reply.text);
                out.effects.extend(reply.effects);
            });
        }
    }
    out
}
