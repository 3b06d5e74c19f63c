//! The board layer's chip backend: esp-hal's I²C and GPIO behind chela-board's
//! `Backend`, so the host's drivers (AHT20, SGP30, BH1750) run unchanged on the chip, and the
//! `sensor_read` / `board_list_devices` tools (`chela_chip::board::Sensors`) over them.
//!
//! The board is described at build time: `CHELA_BOARD=path/to/board.json` (the host's format,
//! e.g. `crates/chela-board/boards/esp32c3-devkit.json`) is checked by `build.rs` with
//! chela-board's checker and embedded as statics ([`BOARD`]). The chip drives the description's I²C sensors on I2C0;
//! what it leaves out is printed at boot (`chela_chip::board`).

use core::cell::RefCell;

use chela_board::board::Backend;
use chela_board::fault::Fault;
use chela_board::spec::{Bus, Device};
use embedded_hal::i2c::{ErrorType, Operation, SevenBitAddress};
use esp_hal::Blocking;
use esp_hal::delay::Delay;
use esp_hal::gpio::{AnyPin, Input, InputConfig, Level, Output, OutputConfig};
use esp_hal::i2c::master::{Config as I2cConfig, I2c};
use smart_leds_trait::{RGB8, SmartLedsWrite};

/// The board description checked at build time (`CHELA_BOARD`); `None` when none was given.
pub const BOARD: Option<chela_chip::board::Compiled> = include!(concat!(env!("OUT_DIR"), "/board.rs"));

/// The one I²C bus, shared by every device on it: each driver holds a handle, and each
/// transaction borrows the bus for its length (the main loop is the only user).
#[derive(Clone, Copy)]
pub struct SharedI2c(&'static RefCell<I2c<'static, Blocking>>);

impl ErrorType for SharedI2c {
    type Error = esp_hal::i2c::master::Error;
}

impl embedded_hal::i2c::I2c for SharedI2c {
    fn transaction(&mut self, address: SevenBitAddress, ops: &mut [Operation<'_>]) -> Result<(), Self::Error> {
        embedded_hal::i2c::I2c::transaction(&mut *self.0.borrow_mut(), address, ops)
    }
}

/// A device kind the chip's backend does not drive: never made (`Sensors::open` keeps only
/// the sensors), so it has no values.
pub enum Unwired {}

impl SmartLedsWrite for Unwired {
    type Error = Fault;
    type Color = RGB8;
    fn write<T, I>(&mut self, _: T) -> Result<(), Fault>
    where
        T: IntoIterator<Item = I>,
        I: Into<RGB8>,
    {
        match *self {}
    }
}

impl embedded_hal::pwm::ErrorType for Unwired {
    type Error = core::convert::Infallible;
}

impl embedded_hal::pwm::SetDutyCycle for Unwired {
    fn max_duty_cycle(&self) -> u16 {
        match *self {}
    }
    fn set_duty_cycle(&mut self, _: u16) -> Result<(), Self::Error> {
        match *self {}
    }
}

/// esp-hal as chela-board's backend: I2C0 on the description's pins.
pub struct Hw {
    i2c0: Option<esp_hal::peripherals::I2C0<'static>>,
    bus: Option<SharedI2c>,
}

impl Hw {
    pub fn new(i2c0: esp_hal::peripherals::I2C0<'static>) -> Hw {
        Hw { i2c0: Some(i2c0), bus: None }
    }
}

fn unwired(what: &'static str) -> Fault {
    Fault::Bus { what }
}

impl Backend for Hw {
    type I2c = SharedI2c;
    type Delay = Delay;
    type Led = Unwired;
    type Pwm = Unwired;
    type Input = Input<'static>;
    type Output = Output<'static>;

    fn i2c(&mut self, bus: &Bus) -> Result<SharedI2c, Fault> {
        if let Some(shared) = self.bus {
            // The checker gives each device one bus; a second bus has no controller here.
            return Ok(shared);
        }
        let (Some(&sda), Some(&scl)) = (bus.pins.get("sda"), bus.pins.get("scl")) else {
            return Err(unwired("I2C bus description (it needs sda and scl pins)"));
        };
        let peripheral = self.i2c0.take().ok_or(unwired("I2C0 controller (already taken)"))?;
        // SAFETY: chela-board's checker refused pins the chip lacks or reserves (flash, USB),
        // and nothing else in the firmware drives these (the LED is GPIO8, the console USB
        // and UART0's pins).
        let (sda, scl) = unsafe { (AnyPin::steal(sda), AnyPin::steal(scl)) };
        let i2c = I2c::new(peripheral, I2cConfig::default()).map_err(|_| unwired("I2C0 configuration"))?;
        static BUS: static_cell::StaticCell<RefCell<I2c<'static, Blocking>>> = static_cell::StaticCell::new();
        let shared = SharedI2c(BUS.uninit().write(RefCell::new(i2c.with_sda(sda).with_scl(scl))));
        self.bus = Some(shared);
        Ok(shared)
    }

    fn delay(&mut self) -> Delay {
        Delay::new()
    }

    fn led(&mut self, _: &Device, _: u8) -> Result<Unwired, Fault> {
        Err(unwired("WS2812 from the board description (the on-board LED is the status LED: led_set)"))
    }

    fn pwm(&mut self, _: &Device, _: u8) -> Result<Unwired, Fault> {
        Err(unwired("servo PWM on the chip"))
    }

    fn input(&mut self, pin: u8) -> Result<Input<'static>, Fault> {
        // SAFETY: as for the I2C pins.
        Ok(Input::new(unsafe { AnyPin::steal(pin) }, InputConfig::default()))
    }

    fn output(&mut self, pin: u8) -> Result<Output<'static>, Fault> {
        // SAFETY: as for the I2C pins.
        Ok(Output::new(unsafe { AnyPin::steal(pin) }, Level::Low, OutputConfig::default()))
    }
}
