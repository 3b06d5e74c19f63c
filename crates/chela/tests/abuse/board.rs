//! The abuse corpus of the board layer, against the real binary (`chela board check` and
//! `chela cap call`, cleared environment) and, for the race, the library's `board::Host`:
//! a board.json that is a FIFO, 3 MB, nested past any parser's depth, or lists 10,000 devices;
//! pins out of range; ids with control characters; the allowlist and directions; servo angles
//! out of limits or not finite; LED colours and sizes out of bounds; `board_reload` racing
//! tool calls; and a bus stuck busy. Each ends quickly with a sentence that says what is wrong.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]
#![cfg(feature = "board")]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

/// Every call here must end well within this (a stuck read would hang the test instead).
const QUICK: Duration = Duration::from_secs(10);

struct Ws {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Ws {
    fn new() -> Ws {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        Ws { dir, home: tempfile::tempdir().unwrap() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn board(&self) -> PathBuf {
        self.path().join("board.json")
    }

    fn write_board(&self, text: &str) {
        std::fs::write(self.board(), text).unwrap();
    }

    /// Runs `chela ARGS`, which must end within [`QUICK`].
    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
        c.args(args).env_clear().env("HOME", self.home.path()).env("CHELA_HOME", self.path());
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = c.spawn().unwrap();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if started.elapsed() > QUICK {
                let _ = child.kill();
                panic!("chela {args:?} did not end within {QUICK:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    /// `chela cap call TOOL ARGS`: the failure's stderr (the call must fail).
    fn refused(&self, tool: &str, args: &serde_json::Value) -> String {
        let out = self.run(&["cap", "call", tool, &args.to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{tool} {args} should fail: {stderr}");
        stderr
    }

    /// `chela cap call TOOL ARGS`: its stdout (the call must succeed).
    fn ok(&self, tool: &str, args: &serde_json::Value) -> String {
        let out = self.run(&["cap", "call", tool, &args.to_string()]);
        assert!(out.status.success(), "{tool} {args}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `chela board check`: exit code 1 and its stderr.
    fn check_fails(&self) -> String {
        let out = self.run(&["board", "check"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        stderr
    }
}

/// The simulated default board, with `extra` top-level fields.
fn simulated(extra: &str) -> String {
    let base = include_str!("../../../chela-board/boards/simulated.json");
    let at = base.rfind('}').unwrap();
    let body = base[..at].trim_end();
    if extra.is_empty() { base.to_owned() } else { format!("{body},\n{extra}\n}}\n") }
}

#[test]
fn a_board_json_that_is_a_fifo_is_refused_without_blocking() {
    let ws = Ws::new();
    let status = Command::new("mkfifo").arg(ws.board()).status().unwrap();
    assert!(status.success());
    let e = ws.check_fails();
    assert!(e.contains("board.json:line 1: cannot read it") && e.contains("not a regular file"), "{e}");
    let e = ws.refused("board_list_devices", &json!({}));
    assert!(e.contains("The board description has problems"), "{e}");
}

#[test]
fn a_3_mb_board_json_is_refused_at_its_size() {
    let ws = Ws::new();
    let pad = " ".repeat(3 * 1024 * 1024);
    ws.write_board(&format!("{{\"name\": \"big\", \"chip\": \"simulated\"{pad}}}"));
    let e = ws.check_fails();
    assert!(e.contains("65536"), "{e}");
    assert!(e.len() < 1000, "the error is short: {} bytes", e.len());
    let e = ws.refused("sensor_read", &json!({"device": "climate"}));
    assert!(e.contains("65536"), "{e}");
}

#[test]
fn deeply_nested_json_is_a_syntax_error_not_a_crash() {
    let ws = Ws::new();
    let depth = 20_000;
    ws.write_board(&format!(
        "{{\"name\": \"deep\", \"chip\": \"simulated\",\n\"devices\": [{{\"id\": \"s\", \"type\": \"ws2812\", \"params\": {{\"count\": {}{}}}}}]}}",
        "[".repeat(depth),
        "]".repeat(depth)
    ));
    let e = ws.check_fails();
    assert!(e.contains("board.json:line 2: recursion limit exceeded"), "{e}");
}

#[test]
fn ten_thousand_devices_are_refused_at_the_size_and_65_at_the_count() {
    let ws = Ws::new();
    let devices: Vec<String> =
        (0..10_000).map(|i| format!("{{\"id\":\"d{i}\",\"type\":\"aht20\",\"bus\":\"i2c0\"}}")).collect();
    ws.write_board(&format!(
        "{{\"name\":\"many\",\"chip\":\"simulated\",\"buses\":[{{\"id\":\"i2c0\",\"type\":\"i2c\"}}],\"devices\":[{}]}}",
        devices.join(",")
    ));
    let e = ws.check_fails();
    assert!(e.contains("over the 65536-byte limit"), "{e}");
    // Under the byte limit, the entry limit still holds.
    let gpio: Vec<String> = (0..65).map(|i| format!("{{\"pin\":{i},\"direction\":\"input\"}}")).collect();
    ws.write_board(&format!("{{\"name\":\"many\",\"chip\":\"simulated\",\n\"gpio\":[{}]}}", gpio.join(",")));
    let e = ws.check_fails();
    assert!(e.contains("board.json:line 2: 65 entries in `gpio`; the limit is 64"), "{e}");
}

#[test]
fn pins_out_of_range_are_refused_with_their_line() {
    let ws = Ws::new();
    ws.write_board(
        "{\"name\": \"p\", \"chip\": \"simulated\",\n\"gpio\": [\n{\"pin\": 4294967296, \"direction\": \"input\"}]}",
    );
    let e = ws.check_fails();
    assert!(e.contains("board.json:line 3:"), "{e}");
    ws.write_board(
        "{\"name\": \"p\", \"chip\": \"simulated\",\n\"gpio\": [\n{\"pin\": -1, \"direction\": \"input\"}]}",
    );
    assert!(ws.check_fails().contains("board.json:line 3:"));
    ws.write_board("{\"name\": \"p\", \"chip\": \"bcm2711\", \"backend\": \"simulated\",\n\"gpio\": [\n{\"pin\": 28, \"direction\": \"input\"}]}");
    let e = ws.check_fails();
    assert!(e.contains("board.json:line 3: gpio allowlist: GPIO28 does not exist on bcm2711 (GPIO0-27)"), "{e}");
}

#[test]
fn control_characters_in_ids_are_refused_and_never_printed_raw() {
    let ws = Ws::new();
    ws.write_board(
        "{\"name\": \"c\", \"chip\": \"simulated\",\n\"devices\": [\n{\"id\": \"evil\\u001b[2J\\u0007\", \"type\": \"thermo\\u001b]0;x\\u0007\"}]}",
    );
    let e = ws.check_fails();
    assert!(e.contains("board.json:line 3: device id `evil\\u{1b}[2J\\u{7}`: use 1-64 letters"), "{e}");
    assert!(!e.contains('\u{1b}') && !e.contains('\u{7}'), "a raw control character reached the terminal: {e:?}");
    // A tool's argument is shown the same way.
    let ws = Ws::new();
    let e = ws.refused("sensor_read", &json!({"device": format!("x\u{1b}[31m{}", "y".repeat(100_000))}));
    assert!(e.contains("There is no device `x\\u{1b}[31m"), "{e:.300}");
    assert!(!e.contains('\u{1b}') && e.len() < 2000, "{} bytes: {e:.300}", e.len());
}

#[test]
fn gpio_write_refuses_pins_outside_the_allowlist_and_input_pins() {
    let ws = Ws::new();
    let e = ws.refused("gpio_write", &json!({"pin": 13, "value": 1}));
    assert!(e.contains("GPIO13 is not in board.json's gpio allowlist") && e.contains("Allowed: GPIO2, GPIO3"), "{e}");
    let e = ws.refused("gpio_write", &json!({"pin": 5, "value": 1}));
    assert!(e.contains("GPIO5 is allowlisted as an input pin; it cannot be written"), "{e}");
    let e = ws.refused("gpio_write", &json!({"pin": 256, "value": 1}));
    assert!(e.contains("pin"), "{e}");
    assert!(ws.ok("gpio_write", &json!({"pin": 2, "value": "high"})).contains("GPIO2 is high"));
}

#[test]
fn servo_set_refuses_angles_outside_its_limits_and_non_numbers() {
    let ws = Ws::new();
    ws.write_board(&simulated("").replace("\"max_angle\": 180", "\"max_angle\": 120"));
    let e = ws.refused("servo_set", &json!({"device": "arm", "angle": 150}));
    assert!(e.contains("servo angle 150 is outside the allowed range 0 to 120"), "{e}");
    let e = ws.refused("servo_set", &json!({"device": "arm", "angle": -0.5}));
    assert!(e.contains("outside the allowed range"), "{e}");
    // JSON has no NaN: the nearest a caller gets is a number too big for f32 (infinity) or text.
    let e = ws.refused("servo_set", &json!({"device": "arm", "angle": 1e300}));
    assert!(e.contains("servo angle inf is outside the allowed range"), "{e}");
    let e = ws.refused("servo_set", &json!({"device": "arm", "angle": "NaN"}));
    assert!(e.contains("angle"), "{e}");
    let e = ws.refused("servo_set", &json!({"device": "strip", "angle": 10}));
    assert!(e.contains("`strip` is a ws2812, not a servo"), "{e}");
    assert!(ws.ok("servo_set", &json!({"device": "arm", "angle": 120})).contains("at 120 degrees"));
}

#[test]
fn led_set_refuses_bad_colours_and_board_json_refuses_huge_strips() {
    let ws = Ws::new();
    for bad in ["#12345g", "#1234567", "ultraviolet", ""] {
        let e = ws.refused("led_set", &json!({"device": "strip", "color": bad}));
        assert!(e.contains("is not a colour; use #rrggbb"), "{bad}: {e}");
    }
    let e = ws.refused("led_set", &json!({"device": "strip", "color": "z".repeat(100_000)}));
    assert!(e.len() < 2000, "the colour is echoed bounded: {} bytes", e.len());
    let e = ws.refused("led_set", &json!({"device": "strip", "brightness": 101}));
    assert!(e.contains("brightness 101 is over 100"), "{e}");
    let e = ws.refused("led_set", &json!({"device": "strip", "brightness": 100_000}));
    assert!(e.contains("brightness"), "{e}");
    let e = ws.refused("led_set", &json!({"device": "strip", "pattern": "strobe\u{7}"}));
    assert!(e.contains("Unknown pattern `strobe\\u{7}`"), "{e}");
    for count in ["1025", "1e12", "-1", "0"] {
        ws.write_board(&simulated("").replace("\"count\": 8", &format!("\"count\": {count}")));
        let e = ws.check_fails();
        assert!(e.contains("device `strip`: count must be a number from 1 to 1024"), "{count}: {e}");
    }
}

#[test]
fn a_bus_stuck_busy_and_a_sensor_stuck_busy_end_with_a_clear_error_quickly() {
    let ws = Ws::new();
    ws.write_board(&simulated("\"simulate\": { \"faults\": { \"i2c0\": \"busy\" } }"));
    let started = Instant::now();
    let e = ws.refused("sensor_read", &json!({"device": "light"}));
    assert!(e.contains("`light`: the I2C bus is busy"), "{e}");
    ws.write_board(&simulated("\"simulate\": { \"faults\": { \"climate\": \"stuck_busy\", \"air\": \"bad_crc\" } }"));
    let e = ws.refused("sensor_read", &json!({"device": "climate"}));
    assert!(e.contains("`climate`: the AHT20 stayed busy for"), "{e}");
    let e = ws.refused("sensor_read", &json!({"device": "air"}));
    assert!(e.contains("CRC-8 does not match"), "{e}");
    // The other sensors on the bus still read.
    assert!(ws.ok("sensor_read", &json!({"device": "light"})).contains("\"lx\""));
    assert!(started.elapsed() < QUICK, "{:?}", started.elapsed());
    ws.write_board(&simulated("\"simulate\": { \"faults\": { \"arm\": \"nack\", \"nobody\": \"busy\" } }"));
    let e = ws.check_fails();
    assert!(e.contains("`arm`: `nack` is not a fault it can play"), "{e}");
    assert!(e.contains("there is no sensor or bus `nobody`"), "{e}");
}

#[test]
fn board_reload_racing_tool_calls_gives_each_call_a_whole_board() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Arc::new(chela::workspace::Workspace::locate(Some(dir.path().join("ws"))).unwrap());
    ws.ensure().unwrap();
    let host = Arc::new(chela::board::Host::default());
    let good = simulated("");
    // A board whose humidity is known, and a broken one.
    let humid = simulated("\"simulate\": { \"humidity\": 90 }");
    let broken = "{\"name\": \"half-written\", \"chip\": \"simul";
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (host, ws, stop) = (Arc::clone(&host), Arc::clone(&ws), Arc::clone(&stop));
            std::thread::spawn(move || {
                let (mut ok, mut refused) = (0, 0);
                while !stop.load(Ordering::Relaxed) {
                    match host.read(&ws, "climate", &chela::clock::Clock::system()) {
                        Ok(r) => {
                            assert_eq!(r.values[1].name, "humidity");
                            ok += 1;
                        }
                        Err(e) => {
                            assert!(e.contains("The board description has problems"), "{e}");
                            refused += 1;
                        }
                    }
                }
                (ok, refused)
            })
        })
        .collect();
    let file = ws.root().join("board.json");
    for i in 0..200 {
        let text = [good.as_str(), humid.as_str(), broken][i % 3];
        // Written whole (as an editor saving atomically would), then reloaded.
        let tmp = ws.root().join("board.json.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        host.reload(&ws);
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for r in readers {
        let (ok, refused) = r.join().expect("a reader panicked");
        total += ok + refused;
    }
    assert!(total > 0);
    // After the race the last board (200 - 1 = 199, 199 % 3 = 1: humid) is the one in use.
    let r = host.read(&ws, "climate", &chela::clock::Clock::system()).unwrap();
    assert!(r.values[1].value > 75.0, "{:?}", r.values);
}
