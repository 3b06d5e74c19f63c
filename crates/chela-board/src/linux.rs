//! The Linux backend (feature `linux`): a single-board computer's device files behind the same
//! embedded-hal traits the simulated bus and esp-hal implement, so the drivers run unchanged.
//!
//! - I2C: each bus's `path` (`/dev/i2c-1`) through `linux-embedded-hal`'s `I2cdev`; every device
//!   on a bus opens its own handle (the kernel serialises the transfers).
//! - GPIO: the character device (`linux.gpiochip`, `/dev/gpiochip0`); allowlisted pin N is line
//!   N, requested once for its direction with the consumer label `chela`.
//! - WS2812: the strip's data line is the MOSI of `linux.spidev`, clocked at 3 MHz.
//! - Servo PWM: sysfs (`linux.pwmchip`, `/sys/class/pwm/pwmchip0`): the channel is exported,
//!   its period set to the servo's 20 ms and enabled; the duty cycle is written in nanoseconds.
//!
//! Opening is where a Linux board goes wrong (the interface is not enabled, the user is not in
//! the group, another program holds the line), so every open first looks at the file and says
//! which of these it is, as a [`Fault::Open`].

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::string::{String, ToString};

use linux_embedded_hal::gpio_cdev::{self, LineRequestFlags};
use linux_embedded_hal::spidev::{SpiModeFlags, SpidevOptions};
use linux_embedded_hal::{CdevPin, Delay, I2cdev, SpidevBus};

use crate::board::Backend;
use crate::fault::Fault;
use crate::spec::{self, Bus, Chip, Device, LinuxPaths, Spec};

/// The consumer label the kernel shows for our GPIO lines (`gpioinfo`).
const CONSUMER: &str = "chela";
/// WS2812-over-SPI needs a 3 MHz clock: four SPI bits per data bit of ~1.25 µs.
const WS2812_SPI_HZ: u32 = 3_000_000;
/// The servo period (50 Hz) in nanoseconds, and the duty steps per period (one per µs).
const SERVO_PERIOD_NS: u64 = 20_000_000;
pub const PWM_STEPS: u16 = 20_000;

/// What a device file is for: its name in messages, how to enable it, and its group.
#[derive(Clone, Copy)]
struct Kind {
    what: &'static str,
    enable: &'static str,
    group: &'static str,
}

const I2C: Kind = Kind {
    what: "I2C bus",
    enable: "enable I2C (raspi-config > Interface Options, or dtparam=i2c_arm=on) and load i2c-dev",
    group: "i2c",
};
const GPIO: Kind =
    Kind { what: "GPIO chip", enable: "check linux.gpiochip in board.json (see `gpiodetect`)", group: "gpio" };
const SPI: Kind = Kind {
    what: "SPI device",
    enable: "enable SPI (raspi-config > Interface Options, or dtparam=spi=on)",
    group: "spi",
};
const PWM: Kind = Kind {
    what: "PWM chip",
    enable: "enable hardware PWM (dtoverlay=pwm-2chan on a Raspberry Pi) and check linux.pwmchip",
    group: "gpio",
};

fn open_fault(path: &Path, why: String) -> Fault {
    Fault::Open { path: path.display().to_string(), why }
}

/// The sentence for an error opening or writing a device file of `kind`.
fn why(e: &io::Error, kind: Kind) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("there is no such {}; {}", kind.what, kind.enable),
        io::ErrorKind::PermissionDenied => format!(
            "permission denied; add the user to the `{g}` group (sudo usermod -aG {g} $USER, then log in again)",
            g = kind.group
        ),
        io::ErrorKind::ResourceBusy => format!("the {} is busy: another program holds it", kind.what),
        _ => format!("{e}"),
    }
}

/// The sentence for an error a library's ioctl gave, from its text (the libraries wrap the
/// errno in their own `nix` versions, whose text starts with the errno's name).
fn ioctl_why(text: &str, kind: Kind) -> String {
    if text.contains("ENOTTY") {
        format!(
            "it is a character device, but no {} is there (the kernel refused the ioctl); is board.json's path right?",
            kind.what
        )
    } else {
        text.to_string()
    }
}

/// Looks at `path` before a library opens it: it must exist, be a character device and open
/// for reading and writing. Each failure gets its own sentence.
fn probe(path: &Path, kind: Kind) -> Result<(), Fault> {
    let meta = std::fs::metadata(path).map_err(|e| open_fault(path, why(&e, kind)))?;
    if !meta.file_type().is_char_device() {
        return Err(open_fault(
            path,
            format!("it is not a character device, so it is not a {} (is board.json's path right?)", kind.what),
        ));
    }
    OpenOptions::new().read(true).write(true).open(path).map(drop).map_err(|e| open_fault(path, why(&e, kind)))
}

/// The Linux devices a board.json names. Lines and channels are claimed as the board opens.
pub struct Linux {
    paths: LinuxPaths,
    chip: &'static Chip,
    gpio: Option<gpio_cdev::Chip>,
}

impl Linux {
    /// The backend for `spec` (its `linux` paths; the defaults when the spec is not Linux's).
    pub fn new(spec: &Spec) -> Linux {
        let paths = match &spec.backend {
            spec::Driven::Linux(p) => p.clone(),
            _ => LinuxPaths::default(),
        };
        Linux { paths, chip: spec.chip, gpio: None }
    }

    fn gpio_chip(&mut self) -> Result<&mut gpio_cdev::Chip, Fault> {
        if self.gpio.is_none() {
            let path = Path::new(&self.paths.gpiochip);
            probe(path, GPIO)?;
            let chip = gpio_cdev::Chip::new(path).map_err(|e| open_fault(path, ioctl_why(&e.to_string(), GPIO)))?;
            self.gpio = Some(chip);
        }
        Ok(self.gpio.as_mut().expect("set just above"))
    }

    fn line(&mut self, pin: u8, flags: LineRequestFlags) -> Result<CdevPin, Fault> {
        let path = PathBuf::from(&self.paths.gpiochip);
        let chip = self.gpio_chip()?;
        let lines = chip.num_lines();
        let fail = |e: gpio_cdev::Error| {
            // gpio-cdev wraps the errno in its own nix version; its text carries the name.
            let text = e.to_string();
            let why = if text.contains("EBUSY") {
                format!("GPIO{pin} is in use by another program (busy); free it (`gpioinfo` shows who holds it)")
            } else {
                format!("GPIO{pin}: {text}")
            };
            open_fault(&path, why)
        };
        if u32::from(pin) >= lines {
            return Err(open_fault(&path, format!("the chip has lines 0-{}, not GPIO{pin}", lines.saturating_sub(1))));
        }
        let handle = chip.get_line(u32::from(pin)).and_then(|l| l.request(flags, 0, CONSUMER)).map_err(fail)?;
        CdevPin::new(handle).map_err(fail)
    }
}

/// One exported sysfs PWM channel.
pub struct SysfsPwm {
    dir: PathBuf,
}

/// Writes `value` to sysfs attribute `path` (which must exist: nothing is created).
fn write_attr(path: &Path, value: &str, kind: Kind) -> Result<(), Fault> {
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| open_fault(path, why(&e, kind)))
}

impl SysfsPwm {
    /// Exports `channel` of the PWM chip at `pwmchip` (a sysfs directory) if needed, sets the
    /// servo period and enables it with no pulse.
    pub fn open(pwmchip: &Path, channel: u32) -> Result<SysfsPwm, Fault> {
        if !pwmchip.is_dir() {
            return Err(open_fault(pwmchip, format!("there is no such {}; {}", PWM.what, PWM.enable)));
        }
        let dir = pwmchip.join(format!("pwm{channel}"));
        if !dir.is_dir() {
            write_attr(&pwmchip.join("export"), &channel.to_string(), PWM)?;
            if !dir.is_dir() {
                return Err(open_fault(
                    &dir,
                    format!("channel {channel} was exported but did not appear; does the chip have it (see npwm)?"),
                ));
            }
        }
        // The duty cycle may never exceed the period, so it is cleared before the period is set.
        write_attr(&dir.join("duty_cycle"), "0", PWM)?;
        write_attr(&dir.join("period"), &SERVO_PERIOD_NS.to_string(), PWM)?;
        write_attr(&dir.join("enable"), "1", PWM)?;
        Ok(SysfsPwm { dir })
    }
}

/// A PWM write that failed (the sentence is in the log; the servo reports a bus fault).
#[derive(Debug)]
pub struct PwmError(pub Fault);

impl embedded_hal::pwm::Error for PwmError {
    fn kind(&self) -> embedded_hal::pwm::ErrorKind {
        embedded_hal::pwm::ErrorKind::Other
    }
}

impl embedded_hal::pwm::ErrorType for SysfsPwm {
    type Error = PwmError;
}

impl embedded_hal::pwm::SetDutyCycle for SysfsPwm {
    fn max_duty_cycle(&self) -> u16 {
        PWM_STEPS
    }

    fn set_duty_cycle(&mut self, duty: u16) -> Result<(), PwmError> {
        let ns = u64::from(duty.min(PWM_STEPS)) * (SERVO_PERIOD_NS / u64::from(PWM_STEPS));
        write_attr(&self.dir.join("duty_cycle"), &ns.to_string(), PWM).map_err(PwmError)
    }
}

impl Backend for Linux {
    type I2c = I2cdev;
    type Delay = Delay;
    type Led = ws2812_spi::Ws2812<SpidevBus>;
    type Pwm = SysfsPwm;
    type Input = CdevPin;
    type Output = CdevPin;

    fn i2c(&mut self, bus: &Bus) -> Result<I2cdev, Fault> {
        let Some(path) = bus.path.as_deref().map(Path::new) else {
            return Err(Fault::Open { path: bus.id.clone(), why: "the bus has no path (like /dev/i2c-1)".into() });
        };
        probe(path, I2C)?;
        I2cdev::new(path).map_err(|e| open_fault(path, ioctl_why(&e.to_string(), I2C)))
    }

    fn delay(&mut self) -> Delay {
        Delay
    }

    fn led(&mut self, _: &Device, _data_pin: u8) -> Result<Self::Led, Fault> {
        let path = Path::new(&self.paths.spidev);
        probe(path, SPI)?;
        let mut bus = SpidevBus::open(path).map_err(|e| open_fault(path, why(e.inner(), SPI)))?;
        let options =
            SpidevOptions::new().bits_per_word(8).max_speed_hz(WS2812_SPI_HZ).mode(SpiModeFlags::SPI_MODE_0).build();
        bus.configure(&options).map_err(|e| open_fault(path, why(&e, SPI)))?;
        Ok(ws2812_spi::Ws2812::new(bus))
    }

    fn pwm(&mut self, device: &Device, pin: u8) -> Result<SysfsPwm, Fault> {
        let channel = spec::pwm_channel(self.chip, device).ok_or_else(|| Fault::Open {
            path: self.paths.pwmchip.clone(),
            why: format!("GPIO{pin} has no hardware PWM channel; set params.pwm_channel"),
        })?;
        SysfsPwm::open(Path::new(&self.paths.pwmchip), channel)
    }

    fn input(&mut self, pin: u8) -> Result<CdevPin, Fault> {
        self.line(pin, LineRequestFlags::INPUT)
    }

    fn output(&mut self, pin: u8) -> Result<CdevPin, Fault> {
        self.line(pin, LineRequestFlags::OUTPUT)
    }
}

#[cfg(test)]
mod tests;
