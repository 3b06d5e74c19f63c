//! Plain GPIO: a level read from an `InputPin`, a level written to an `OutputPin`; the board
//! (board.json's allowlist) decides which pins and which direction.

use embedded_hal::digital::{InputPin, OutputPin};

use crate::fault::Fault;

pub fn read<P: InputPin>(pin: &mut P) -> Result<bool, Fault> {
    pin.is_high().map_err(|_| Fault::Bus { what: "GPIO pin" })
}

pub fn write<P: OutputPin>(pin: &mut P, high: bool) -> Result<(), Fault> {
    if high { pin.set_high() } else { pin.set_low() }.map_err(|_| Fault::Bus { what: "GPIO pin" })
}
