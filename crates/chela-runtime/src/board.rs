//! The board on the host: `board.json` from the workspace (or the built-in simulated board when
//! there is none), the live devices, and the `sensor.reading` events for the router.
//!
//! Loading never fails the caller: a bad file is kept as its problems, which the `board` tools
//! report (with the line of each) until it is fixed and reloaded. The file is read lazily, on
//! the first board tool call, and again on `board_reload`.
//!
//! board.json's backend decides what drives the devices: the simulated backend (the real
//! drivers talking to the bus model in `chela_board::sim`), or, in a build with the
//! `board-linux` feature, the Linux backend (`chela_board::linux`: /dev/gpiochipN, /dev/i2c-N,
//! spidev, sysfs PWM). A board for the firmware (an ESP32) is checked and described, and the
//! acting tools say which build drives it.
//!
//! Events: every reading (a `sensor_read`, or the poll every `board.poll_secs` in `chela run`)
//! is raised as a `sensor.reading` event with fields `device`, `sensor` (its type) and one per
//! quantity (`temperature`, `humidity`, …); thresholds are the rules' `only_if` conditions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use tokio::time::Instant;

use chela_board::board::{Backend, Board, BoardError, Quantity};
use chela_board::sim::Sim;
use chela_board::spec::{self, Driven, Problem, Spec};
use chela_core::router::{Event, Value};
use smart_leds_trait::RGB8;

use crate::workspace::{Workspace, read_bounded};

// The `board` tool group: the model's hands on the board.
pub mod tools;

/// The board description's file name in the workspace.
pub const FILE: &str = crate::authority::BOARD_FILE;
/// Where the built-in board comes from when the workspace has no board.json.
pub const BUILT_IN: &str = "built-in simulated board (no board.json in the workspace)";

/// A board as loaded: its description, and the live devices when this host can drive them.
pub struct Loaded {
    pub source: String,
    pub spec: Result<Spec, Vec<Problem>>,
    live: Result<Live, String>,
}

struct Live {
    board: Box<dyn Ops>,
    /// The simulated hardware, whose clock follows the wall clock; `None` on real hardware.
    sim: Option<Sim>,
}

/// What the tools do with a board, whatever backend drives it: [`Board`]'s operations as a
/// trait object, so one host holds a simulated or a Linux board.
pub trait Ops: Send {
    fn spec(&self) -> &Spec;
    fn read_sensor(&mut self, id: &str) -> Result<Vec<Quantity>, BoardError>;
    fn set_led(&mut self, id: &str, color: RGB8, brightness: u8, pattern: &str) -> Result<Vec<RGB8>, BoardError>;
    fn led_state(&self, id: &str) -> Option<&[RGB8]>;
    fn set_servo(&mut self, id: &str, angle: f32) -> Result<(), BoardError>;
    fn servo_angle(&self, id: &str) -> Option<f32>;
    fn gpio_read(&mut self, pin: u8) -> Result<bool, BoardError>;
    fn gpio_write(&mut self, pin: u8, high: bool) -> Result<(), BoardError>;
}

impl<B: Backend> Ops for Board<B>
where
    Board<B>: Send,
{
    fn spec(&self) -> &Spec {
        Board::spec(self)
    }
    fn read_sensor(&mut self, id: &str) -> Result<Vec<Quantity>, BoardError> {
        Board::read_sensor(self, id)
    }
    fn set_led(&mut self, id: &str, color: RGB8, brightness: u8, pattern: &str) -> Result<Vec<RGB8>, BoardError> {
        Board::set_led(self, id, color, brightness, pattern)
    }
    fn led_state(&self, id: &str) -> Option<&[RGB8]> {
        Board::led_state(self, id)
    }
    fn set_servo(&mut self, id: &str, angle: f32) -> Result<(), BoardError> {
        Board::set_servo(self, id, angle)
    }
    fn servo_angle(&self, id: &str) -> Option<f32> {
        Board::servo_angle(self, id)
    }
    fn gpio_read(&mut self, pin: u8) -> Result<bool, BoardError> {
        Board::gpio_read(self, pin)
    }
    fn gpio_write(&mut self, pin: u8, high: bool) -> Result<(), BoardError> {
        Board::gpio_write(self, pin, high)
    }
}

/// The live board for `s`, or why this program cannot drive it.
fn open(s: &Spec) -> Result<Live, String> {
    match &s.backend {
        Driven::Simulated => {
            let mut sim = Sim::new(s);
            Board::open(s.clone(), &mut sim)
                .map(|board| Live { board: Box::new(board), sim: Some(sim) })
                .map_err(|e| e.to_string())
        }
        #[cfg(feature = "board-linux")]
        Driven::Linux(_) => {
            let mut linux = chela_board::linux::Linux::new(s);
            Board::open(s.clone(), &mut linux)
                .map(|board| Live { board: Box::new(board) as Box<dyn Ops>, sim: None })
                .map_err(|e| format!("The Linux board could not be opened: {e}"))
        }
        #[cfg(not(feature = "board-linux"))]
        Driven::Linux(_) => Err(format!(
            "This board ({}) uses the linux backend, which this build of Chela leaves out. Build it with \
             `cargo build --features board-linux`, or set \"backend\": \"simulated\" in board.json to try it \
             simulated. board_list_devices and board_get_device still describe it.",
            s.chip.summary
        )),
        Driven::Firmware => Err(format!(
            "This board is a {} ({}). Its devices are driven by Chela's firmware on that chip; this program \
             drives simulated and Linux boards. board_list_devices and board_get_device still describe it.",
            s.chip.name, s.chip.summary
        )),
    }
}

impl Loaded {
    fn from_text(source: String, text: &str) -> Loaded {
        let spec = spec::parse(text);
        let live = match &spec {
            Err(_) => Err(String::new()),
            Ok(s) => open(s),
        };
        Loaded { source, spec, live }
    }

    /// What is wrong with the file, for the model or a person.
    pub fn problems_text(&self) -> Option<String> {
        let p = self.spec.as_ref().err()?;
        let lines: Vec<String> = p.iter().map(|x| format!("{}:{x}", self.source)).collect();
        Some(format!(
            "The board description has problems, so the board tools are off until it is fixed:\n{}\nFix the file \
             (`chela board check` shows the same list) and call board_reload.",
            lines.join("\n")
        ))
    }
}

/// Reads the workspace's board.json; the built-in simulated board when there is none.
pub fn load(ws: &Workspace) -> Loaded {
    let path = ws.root().join(FILE);
    load_path(&path).unwrap_or_else(|| Loaded::from_text(BUILT_IN.into(), chela_board::EXAMPLES[0].1))
}

/// `None` when the file does not exist.
pub fn load_path(path: &Path) -> Option<Loaded> {
    let source = path.display().to_string();
    match read_bounded(path, spec::MAX_BYTES as u64) {
        Ok(Some(text)) => Some(Loaded::from_text(source, &text)),
        Ok(None) => None,
        Err(e) => Some(Loaded {
            source,
            spec: Err(vec![Problem { line: 1, message: format!("cannot read it: {e}") }]),
            live: Err(String::new()),
        }),
    }
}

/// One reading, with its time.
pub struct Reading {
    pub device: String,
    pub sensor: &'static str,
    pub values: Vec<Quantity>,
    /// Unix seconds.
    pub at: i64,
}

/// A reading's time as RFC 3339 in UTC: readings go to rules and tools, which compare them.
pub fn at_text(unix_secs: i64) -> String {
    crate::localtime::Local::at(&chela_core::zone::Zone::utc(), unix_secs).rfc3339()
}

impl Reading {
    pub fn to_json(&self) -> serde_json::Value {
        // Inserted, not collected: collecting into a map compiles a sort for this one call.
        let mut values = serde_json::Map::new();
        values.extend(self.values.iter().map(|q| {
            let v = if q.unit == "bool" {
                serde_json::json!(q.value != 0.0)
            } else {
                serde_json::json!({ "value": round(q.value), "unit": q.unit })
            };
            (q.name.to_owned(), v)
        }));
        serde_json::json!({ "device": self.device, "type": self.sensor, "values": values, "at": at_text(self.at) })
    }

    /// The router event for this reading.
    pub fn event(&self) -> Option<Event> {
        let mut e = Event::new("sensor.reading").ok()?.with_source("board").ok()?;
        e.set("device", Value::Str(self.device.clone())).ok()?;
        e.set("sensor", Value::Str(self.sensor.to_owned())).ok()?;
        for q in &self.values {
            let v = if q.unit == "bool" { Value::Bool(q.value != 0.0) } else { Value::Float(round(q.value)) };
            e.set(q.name, v).ok()?;
        }
        Some(e)
    }
}

/// Two decimals: the sensors are not more precise, and the model reads less.
fn round(v: f32) -> f64 {
    // In f64: an f32 rounded to two decimals and widened would print as 47.720001220703125.
    (f64::from(v) * 100.0).round() / 100.0
}

/// The board of one Chela process: loaded on first use, shared by the tools and the poller.
pub struct Host {
    loaded: Mutex<Option<Loaded>>,
    started: Instant,
    /// Where readings go as events: the router's queue, handed in by the daemon above, so the
    /// board knows nothing of the router.
    events: OnceLock<Box<dyn Fn(Event) + Send + Sync>>,
    /// The poller's failing sensors and their last error: a fault is logged when it starts or
    /// changes and when it ends, not on every poll.
    failing: Mutex<BTreeMap<String, String>>,
}

impl Default for Host {
    fn default() -> Self {
        Host {
            loaded: Mutex::new(None),
            started: Instant::now(),
            events: OnceLock::new(),
            failing: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Host {
    /// Readings are handed to `raise` as events from now on (the daemon calls this once).
    pub fn connect(&self, raise: impl Fn(Event) + Send + Sync + 'static) {
        let _ = self.events.set(Box::new(raise));
    }

    /// Runs `f` on the loaded board, loading it first if needed.
    pub fn with<R>(&self, ws: &Workspace, f: impl FnOnce(&mut Loaded) -> R) -> R {
        let mut g = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let loaded = g.get_or_insert_with(|| load(ws));
        // The simulated room follows the wall clock, so readings change as time passes.
        if let Ok(Live { sim: Some(sim), .. }) = &loaded.live {
            let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let behind = elapsed.saturating_sub(sim.now_ms());
            sim.advance_ms(behind);
        }
        f(loaded)
    }

    /// Reads board.json again; the new board replaces the old one (actuators start afresh).
    pub fn reload(&self, ws: &Workspace) {
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) = Some(load(ws));
        self.failing.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// Runs `f` on the live board, or says why there is none.
    pub fn act<R>(&self, ws: &Workspace, f: impl FnOnce(&mut dyn Ops) -> Result<R, BoardError>) -> Result<R, String> {
        self.with(ws, |l| {
            if let Some(p) = l.problems_text() {
                return Err(p);
            }
            match &mut l.live {
                Ok(live) => f(live.board.as_mut()).map_err(|e| e.to_string()),
                Err(why) => Err(why.clone()),
            }
        })
    }

    /// Reads sensor `device` and raises the reading as an event.
    pub fn read(&self, ws: &Workspace, device: &str, clock: &crate::clock::Clock) -> Result<Reading, String> {
        let reading = self.act(ws, |b| {
            let values = b.read_sensor(device)?;
            let sensor = b.spec().device(device).map_or("sensor", |d| d.kind.name());
            Ok(Reading { device: device.to_owned(), sensor, values, at: clock.unix_secs() })
        })?;
        self.raise(&reading);
        Ok(reading)
    }

    fn raise(&self, reading: &Reading) {
        if let (Some(raise), Some(event)) = (self.events.get(), reading.event()) {
            raise(event);
        }
    }

    /// Reads every sensor once (the poller); a failing one is skipped. A sensor's fault is
    /// logged once when it starts (or its sentence changes) and once when it clears, so a
    /// sensor unplugged for a day is one line, not one per poll.
    pub fn poll(&self, ws: &Workspace, clock: &crate::clock::Clock) -> usize {
        let ids: Result<Vec<String>, String> = self.with(ws, |l| match (&l.spec, &l.live) {
            (Ok(s), Ok(_)) => Ok(s.devices.iter().filter(|d| d.kind.is_sensor()).map(|d| d.id.clone()).collect()),
            _ => Err(l.problems_text().or_else(|| l.live.as_ref().err().cloned()).unwrap_or_default()),
        });
        // The whole board unavailable is logged like one failing sensor, under the file's name.
        let (ids, board_error) = match ids {
            Ok(ids) => (ids, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        let results = ids.into_iter().map(|id| {
            let r = self.read(ws, &id, clock).map(drop);
            (id, r)
        });
        let results: Vec<(String, Result<(), String>)> = match board_error {
            Some(why) => vec![(FILE.to_owned(), Err(why))],
            None => results.collect(),
        };
        let mut n = 0;
        for (id, result) in results {
            let mut failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
            match result {
                Ok(_) => {
                    n += 1;
                    if failing.remove(&id).is_some() {
                        chela_log::info!(device = %id, "board poll: the sensor reads again");
                    }
                }
                Err(e) => {
                    if failing.get(&id) != Some(&e) {
                        chela_log::warn!(device = %id, "board poll: {e} (logged once until it changes or clears)");
                        failing.insert(id, e);
                    }
                }
            }
        }
        n
    }
}

/// `chela run`'s poller: every `secs` (`board.poll_secs`; 0: off) reads each sensor of `host`
/// and raises its readings for the router, until `shutdown`.
pub async fn serve(
    host: Arc<Host>,
    ws: Arc<Workspace>,
    secs: u64,
    clock: crate::clock::Clock,
    shutdown: crate::shutdown::Shutdown,
) -> anyhow::Result<()> {
    if secs == 0 {
        return Ok(());
    }
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(secs));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let (host, ws, clock) = (Arc::clone(&host), Arc::clone(&ws), clock.clone());
                crate::tasks::blocking(move || host.poll(&ws, &clock)).await?;
            }
            () = shutdown.wait() => return Ok(()),
        }
    }
}

/// `chela board check [FILE]`: the problems of a board.json, one per line; `Ok(true)` when
/// there are none.
pub fn check(ws: &Workspace, file: Option<PathBuf>) -> anyhow::Result<(bool, String)> {
    let path = file.unwrap_or_else(|| ws.root().join(FILE));
    let Some(loaded) = load_path(&path) else {
        anyhow::bail!(
            "{} does not exist. Without it Chela uses the built-in simulated board; start from one of the \
             example boards in the repository (crates/chela-board/boards/).",
            path.display()
        );
    };
    Ok(match (&loaded.spec, loaded.problems_text()) {
        (Ok(s), _) => (
            true,
            format!(
                "{}: ok: \"{}\" ({}), {} device(s), {} allowlisted pin(s)",
                loaded.source,
                s.name,
                s.chip.name,
                s.devices.len(),
                s.gpio.len()
            ),
        ),
        (Err(p), _) => (false, p.iter().map(|x| format!("{}:{x}", loaded.source)).collect::<Vec<_>>().join("\n")),
    })
}
