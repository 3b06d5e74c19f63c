//! The Linux backend up to the syscalls: sysfs PWM against a temporary directory standing in
//! for /sys/class/pwm, and device paths that are missing, not character devices, or character
//! devices that are not what board.json says (the kernel refuses the ioctl). This machine has
//! no gpio-sim or i2c-stub (no configfs, no modules), so real GPIO and I2C lines are not opened.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::board::{Board, BoardError};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "chela-board-linux-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn board(body: &str) -> Spec {
    let text = format!(r#"{{ "name": "pi", "chip": "bcm2711", "backend": "linux", {body} }}"#);
    spec::parse(&text).unwrap_or_else(|p| panic!("{p:?}"))
}

/// A pwmchip directory with channel 0 already exported (its attribute files present).
fn pwmchip(root: &Path) -> PathBuf {
    let chip = root.join("pwmchip0");
    std::fs::create_dir_all(chip.join("pwm0")).unwrap();
    for f in ["export", "npwm"] {
        std::fs::write(chip.join(f), "").unwrap();
    }
    for f in ["period", "duty_cycle", "enable"] {
        std::fs::write(chip.join("pwm0").join(f), "garbage from before").unwrap();
    }
    chip
}

fn open(spec: Spec) -> Result<Board<Linux>, BoardError> {
    let mut linux = Linux::new(&spec);
    Board::open(spec, &mut linux)
}

#[test]
fn a_servo_drives_sysfs_pwm() {
    let tmp = TempDir::new();
    let chip = pwmchip(&tmp.0);
    let spec = board(&format!(
        r#""linux": {{ "pwmchip": "{}" }},
            "devices": [{{ "id": "arm", "type": "servo", "pins": {{ "pwm": 18 }} }}]"#,
        chip.display()
    ));
    let mut b = open(spec).unwrap();
    let read = |f: &str| std::fs::read_to_string(chip.join("pwm0").join(f)).unwrap();
    assert_eq!((read("period").as_str(), read("duty_cycle").as_str(), read("enable").as_str()), ("20000000", "0", "1"));
    b.set_servo("arm", 90.0).unwrap();
    // 90 of 180 degrees: halfway from 500 to 2500 microseconds.
    assert_eq!(read("duty_cycle"), "1500000");
    b.set_servo("arm", 0.0).unwrap();
    assert_eq!(read("duty_cycle"), "500000");
    let e = b.set_servo("arm", 181.0).unwrap_err().to_string();
    assert!(e.contains("outside the allowed range"), "{e}");
    assert_eq!(read("duty_cycle"), "500000", "a refused angle writes nothing");
}

#[test]
fn a_channel_is_exported_when_missing() {
    let tmp = TempDir::new();
    let chip = tmp.0.join("pwmchip0");
    std::fs::create_dir_all(&chip).unwrap();
    std::fs::write(chip.join("export"), "").unwrap();
    let spec = board(&format!(
        r#""linux": {{ "pwmchip": "{}" }},
            "devices": [{{ "id": "arm", "type": "servo", "pins": {{ "pwm": 19 }} }}]"#,
        chip.display()
    ));
    let e = open(spec).err().unwrap().to_string();
    assert_eq!(std::fs::read_to_string(chip.join("export")).unwrap(), "1", "GPIO19 is channel 1");
    assert!(e.contains("channel 1 was exported but did not appear"), "{e}");
}

#[test]
fn a_missing_pwm_chip_says_how_to_enable_it() {
    let tmp = TempDir::new();
    let spec = board(&format!(
        r#""linux": {{ "pwmchip": "{}/pwmchip9" }},
            "devices": [{{ "id": "arm", "type": "servo", "pins": {{ "pwm": 18 }} }}]"#,
        tmp.0.display()
    ));
    let e = open(spec).err().unwrap().to_string();
    assert!(e.contains("no such PWM chip") && e.contains("dtoverlay=pwm-2chan"), "{e}");
}

fn i2c_board(path: &str) -> Spec {
    board(&format!(
        r#""buses": [{{ "id": "i2c1", "type": "i2c", "pins": {{ "sda": 2, "scl": 3 }}, "path": "{path}" }}],
            "devices": [{{ "id": "climate", "type": "aht20", "bus": "i2c1" }}]"#
    ))
}

#[test]
fn a_missing_i2c_bus_says_how_to_enable_it() {
    let e = open(i2c_board("/dev/i2c-chela-none")).err().unwrap().to_string();
    assert!(e.contains("cannot open /dev/i2c-chela-none: there is no such I2C bus; enable I2C"), "{e}");
}

#[test]
fn a_regular_file_is_not_a_bus() {
    let tmp = TempDir::new();
    let file = tmp.0.join("i2c-1");
    std::fs::write(&file, "").unwrap();
    let e = open(i2c_board(&file.display().to_string())).err().unwrap().to_string();
    assert!(e.contains("not a character device"), "{e}");
}

#[test]
fn a_character_device_that_is_no_i2c_bus_is_named() {
    // /dev/null opens, but the kernel refuses the I2C_SLAVE ioctl on it.
    let e = open(i2c_board("/dev/null")).err().unwrap();
    assert!(matches!(e, BoardError::Fault { fault: Fault::Open { .. }, .. }), "{e:?}");
    assert!(e.to_string().contains("/dev/null: it is a character device, but no I2C bus is there"), "{e}");
}

#[test]
fn gpio_on_a_path_that_is_no_gpio_chip_is_a_clear_error() {
    let spec = board(r#""linux": { "gpiochip": "/dev/null" }, "gpio": [{ "pin": 17, "direction": "output" }]"#);
    let e = open(spec).err().unwrap().to_string();
    assert!(
        e.starts_with("`GPIO17`: cannot open /dev/null: it is a character device, but no GPIO chip is there"),
        "{e}"
    );
    let spec =
        board(r#""linux": { "gpiochip": "/dev/gpiochip-chela-none" }, "gpio": [{ "pin": 17, "direction": "input" }]"#);
    let e = open(spec).err().unwrap().to_string();
    assert!(e.contains("there is no such GPIO chip"), "{e}");
}

#[test]
fn a_strip_on_a_missing_spidev_says_how_to_enable_spi() {
    let spec = board(
        r#""linux": { "spidev": "/dev/spidev-chela-none" },
           "devices": [{ "id": "strip", "type": "ws2812", "pins": { "data": 10 }, "params": { "count": 4 } }]"#,
    );
    let e = open(spec).err().unwrap().to_string();
    assert!(e.contains("there is no such SPI device; enable SPI"), "{e}");
}

#[test]
fn permission_and_busy_errors_name_the_fix() {
    // As root (this test machine) a chmod does not refuse an open, so the sentences are
    // checked from the error kinds the kernel's EACCES and EBUSY become.
    let denied = why(&io::Error::from(io::ErrorKind::PermissionDenied), I2C);
    assert!(denied.contains("add the user to the `i2c` group (sudo usermod -aG i2c $USER"), "{denied}");
    let busy = why(&io::Error::from_raw_os_error(16), SPI);
    assert_eq!(busy, "the SPI device is busy: another program holds it");
}
