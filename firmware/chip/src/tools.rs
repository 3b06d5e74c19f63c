//! The chip's tools: the memory tools (always there, with the host's names and schemas), the
//! clock, and whatever the board adds through a [`Toolbox`] (GPIO, the LED, cron).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use chela_core::agent::{ToolCall, ToolResult};
use chela_core::contract::memory::{self, RecallArgs, StoreArgs, Tags};
use chela_core::contract::{Args, board, time};
use chela_core::flash::Flash;
use chela_core::zone::Zone;
use chela_proto::chat::ToolSpec;

use crate::turn::Chip;
use crate::{Board, say};

/// Where memory entries are kept in the store (a kept key: never dropped for room).
pub const ENTRIES: &str = "entries.jsonl";

/// The memory tools: the core's contract, as the host offers them.
pub const MEMORY: [ToolSpec<'static>; 2] = [memory::STORE, memory::RECALL];

/// `get_current_time` (the core's contract), answered from the board's clock (SNTP on the chip)
/// in UTC, the only zone the chip knows.
pub const TIME: ToolSpec<'static> = time::CURRENT_TIME;

/// The GPIO tools (the core's contract), for a firmware that offers allowlisted pins.
pub const GPIO: [ToolSpec<'static>; 2] = [board::GPIO_WRITE, board::GPIO_READ];

/// `led_set` (the core's contract), for a firmware with a status LED.
pub const LED: [ToolSpec<'static>; 1] = [board::LED_SET];

/// The tools a board adds to the memory tools.
pub trait Toolbox<F: Flash, B: Board> {
    /// Their specs, offered to the model.
    fn specs(&self) -> &[ToolSpec<'static>];
    /// A sentence for the system prompt about them (empty or starting with a space).
    fn guidance(&self) -> &str {
        ""
    }
    /// Runs `name` if it is one of this box's tools.
    fn run(&mut self, chip: &mut Chip<F, B>, name: &str, input: &str) -> Option<Result<String, String>>;
}

/// No tools beyond memory (the emulator turn).
impl<F: Flash, B: Board> Toolbox<F, B> for () {
    fn specs(&self) -> &[ToolSpec<'static>] {
        &[]
    }

    fn run(&mut self, _: &mut Chip<F, B>, _: &str, _: &str) -> Option<Result<String, String>> {
        None
    }
}

/// Runs one tool call: memory here, the rest by the toolbox.
pub fn run<F: Flash, B: Board, X: Toolbox<F, B>>(
    chip: &mut Chip<F, B>,
    toolbox: &mut X,
    call: &ToolCall,
) -> ToolResult {
    say!(&chip.board, "[tool] {} {}", call.name, call.input.as_str());
    let input = call.input.as_str();
    let out = match call.name.as_str() {
        "memory_store" => StoreArgs::parse(input).and_then(|a| store(chip, a)),
        "memory_recall" => RecallArgs::parse(input).map(|a| memory::recall(&chip.entries, &a)),
        "get_current_time" => time::TimeArgs::parse(input).and_then(|a| time_now(&chip.board, &a)),
        other => match toolbox.run(chip, other, input) {
            Some(out) => out,
            None => Err(format!("There is no tool `{other}` on this device.")),
        },
    };
    match out {
        Ok(content) => {
            say!(&chip.board, "[tool] -> {content}");
            ToolResult::ok(call.id.clone(), content)
        }
        Err(e) => {
            say!(&chip.board, "[tool] failed: {e}");
            ToolResult::error(call.id.clone(), e)
        }
    }
}

fn store<F: Flash, B: Board>(chip: &mut Chip<F, B>, a: StoreArgs) -> Result<String, String> {
    let source = if a.source.is_empty() { "chat" } else { a.source.as_str() };
    let now = chip.board.unix().unwrap_or(0);
    let tags = Tags::into_vec(a.tags);
    let id = chip.entries.store(&a.content, &tags, source, now).map_err(|e| e.to_string())?.id.clone();
    // Durable before the model hears it is stored; if flash refuses, it is not stored.
    match chip.store.replace(ENTRIES, chip.entries.to_jsonl().as_bytes()) {
        Ok(()) => Ok(format!("stored as {id}")),
        Err(e) => {
            let _ = chip.entries.forget(&id);
            Err(format!("The entry could not be saved to flash: {e}"))
        }
    }
}

/// The clock as the system prompt's time line reads it, or why there is none.
pub fn current_time<B: Board>(board: &B) -> Result<String, String> {
    match board.unix() {
        Some(secs) => {
            let (iso, weekday) = crate::time::utc(secs);
            Ok(format!("{iso} ({weekday}, UTC)"))
        }
        None => Err("The clock is not set yet: the device has not reached a time server.".into()),
    }
}

/// `get_current_time`'s answer: the contract's JSON, in UTC.
fn time_now<B: Board>(board: &B, a: &time::TimeArgs) -> Result<String, String> {
    if let Some(zone) = a.zone().filter(|z| !z.eq_ignore_ascii_case("UTC")) {
        return Err(format!("This device knows only UTC, not `{zone}`; ask without a timezone and convert."));
    }
    let secs = board.unix().ok_or("The clock is not set yet: the device has not reached a time server.")?;
    Ok(time::describe(i64::try_from(secs).unwrap_or(i64::MAX), &Zone::utc()))
}

/// Two toolboxes offered as one (the firmware's GPIO, LED and cron tools together). A name the
/// first does not run goes to the second.
pub struct Join<A, C> {
    pub first: A,
    pub second: C,
    specs: Vec<ToolSpec<'static>>,
    guidance: String,
}

impl<A, C> Join<A, C> {
    /// Joins `first` and `second`; their specs and guidance are taken once, here.
    pub fn new<F: Flash, B: Board>(first: A, second: C) -> Join<A, C>
    where
        A: Toolbox<F, B>,
        C: Toolbox<F, B>,
    {
        let specs = first.specs().iter().chain(second.specs()).copied().collect();
        let guidance = format!("{}{}", first.guidance(), second.guidance());
        Join { first, second, specs, guidance }
    }
}

impl<F: Flash, B: Board, A: Toolbox<F, B>, C: Toolbox<F, B>> Toolbox<F, B> for Join<A, C> {
    fn specs(&self) -> &[ToolSpec<'static>] {
        &self.specs
    }

    fn guidance(&self) -> &str {
        &self.guidance
    }

    fn run(&mut self, chip: &mut Chip<F, B>, name: &str, input: &str) -> Option<Result<String, String>> {
        match self.first.run(chip, name, input) {
            Some(out) => Some(out),
            None => self.second.run(chip, name, input),
        }
    }
}
