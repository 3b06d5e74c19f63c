//! The emulator turn: `chela-core` runs scripted agent turns with tool calls on
//! QEMU's riscv32 `virt` machine, built for the ESP32-C3's `riscv32imc` like the chip firmware.
//!
//! What it is: the chip's turn driver without the radio. Turn 1 (Anthropic Messages, streamed)
//! asks the model to remember something, and it calls `memory_store`; the chip "reboots" and
//! reads the session and the entry back from the core's flash store; turn 2 (OpenAI Chat
//! Completions, streamed) asks where it is, with turn 1 as history, and the model calls
//! `memory_recall`. Turns 3 and 4 are hostile servers (an endless stream, an endless whole
//! body) that must be refused with a short reply within the heap. Turn 5 calls `web_search`
//! through a local Tavily, turn 6 is a heartbeat ([`net_turns`]). Every request body is encoded
//! by `chela-proto` in 512-byte windows and checked by the scripted server (`wire`); every
//! answer is fed to the proto decoders in uneven pieces. The replies are checked, the heap,
//! stack and flash use printed over the UART, and QEMU exits through the sifive_test device:
//! 0 when every check passed.
//!
//! What it is not: the ESP32 firmware. Debian's QEMU has no ESP32 machine, so esp-hal cannot
//! run here; this proves that the core's turn fits and works on the chip's instruction set and
//! memory budget. Run it with `firmware/qemu/run.sh`; see docs/DESIGN.md, "The emulator turn".
#![no_std]
#![no_main]

extern crate alloc;

mod clock;
mod console;
mod heap;
mod net_turns;
mod serial;
mod stack;
mod wire;

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use chela_chip::turn::{self, Chip, Origin, Turn};
use chela_chip::{Board, boot};
use chela_core::console::{BootMode, ChipDefaults, Console, Effect, Field, Source};
use chela_core::exchange::{Endpoint, Kind};
use chela_core::flash::RamFlash;
use chela_proto::chat::Message;

use crate::clock::Clock;
use crate::wire::{Answer, Call, Server, block_on};

/// The build's settings: from the environment at build time (`build.rs` rebuilds when they
/// change), else the emulator's own. The console's overrides in flash win over them.
pub const DEFAULTS: ChipDefaults = ChipDefaults {
    wifi_ssid: env_or(option_env!("CHELA_WIFI_SSID"), "Build Default Net"),
    wifi_password: env_or(option_env!("CHELA_WIFI_PASSWORD"), ""),
    tg_token: env_or(option_env!("CHELA_TG_TOKEN"), ""),
    tg_allow: env_or(option_env!("CHELA_TG_ALLOW"), ""),
    provider: env_or(option_env!("CHELA_PROVIDER"), "anthropic"),
    api_key: env_or(option_env!("CHELA_API_KEY"), ""),
    model: env_or(option_env!("CHELA_MODEL"), ""),
    base_url: env_or(option_env!("CHELA_BASE_URL"), ""),
    tavily_key: "",
    brave_key: "",
    proxy: "",
    gateway_token: "",
};

const fn env_or(v: Option<&'static str>, or: &'static str) -> &'static str {
    match v {
        Some(v) => v,
        None => or,
    }
}

/// The serial console's session.
const SESSION: &str = "serial_console.jsonl";

/// Where the emulator's turns come from, for the system prompt.
const ORIGIN: Origin<'static> = Origin { channel: "serial", chat_id: "console" };

/// The emulated flash partition: 8 sectors of 4 KiB.
const FLASH_SECTOR: u32 = 4096;
const FLASH_SECTORS: u32 = 8;

/// The receive buffer of the scripted server: the largest request body it takes.
const WIRE_BYTES: usize = 8 * 1024;
static mut WIRE: [u8; WIRE_BYTES] = [0; WIRE_BYTES];

const REMEMBER: &str = "Please remember: the spare key is under the blue flowerpot by the back door.";
const ASK: &str = "Where is the spare key?";
const STORED: &str = "Saved: the spare key is under the blue flowerpot by the back door.";
const FOUND: &str = "It is under the blue flowerpot by the back door.";
const ENTRY_LINE: &str = "[m1] The spare key is under the blue flowerpot by the back door. (tags: home)";

/// The secrets typed in `fixtures/console_setup.txt`: never printed whole.
const SECRETS: [&str; 3] =
    ["sk-ant-api03-qemu-console-SECRET-0042", "8123456789:AAHqemuConsoleSecretToken0042", "solder-and-flux-42"];

const SSE: &str = "text/event-stream; charset=utf-8";

const ANTHROPIC_HEADERS: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("accept", "text/event-stream"),
    ("anthropic-version", "2023-06-01"),
    ("x-api-key", "sk-ant-qemu-test"),
];
const OPENAI_HEADERS: &[(&str, &str)] =
    &[("content-type", "application/json"), ("accept", "text/event-stream"), ("authorization", "Bearer sk-qemu-test")];

/// Turn 1 (Anthropic): the model stores the fact, then confirms.
static ANTHROPIC_SCRIPT: [Call; 2] = [
    Call {
        url: "https://api.anthropic.com/v1/messages",
        headers: ANTHROPIC_HEADERS,
        content_type: SSE,
        body_has: &[
            r#""model":"claude-sonnet-4-5""#,
            r#""stream":true"#,
            r#""name":"memory_store""#,
            r#""name":"memory_recall""#,
            r#"Local time: 2026-11-30T11:25:20+00:00 (Monday, UTC)"#,
            REMEMBER,
        ],
        answer: Answer::Recorded(include_bytes!("../fixtures/anthropic_store.sse")),
    },
    Call {
        url: "https://api.anthropic.com/v1/messages",
        headers: ANTHROPIC_HEADERS,
        content_type: SSE,
        body_has: &[
            r#""type":"tool_use","id":"toolu_01Qe7xU9Lh2cTzgE6P4WzbmK","name":"memory_store""#,
            r#""type":"tool_result","tool_use_id":"toolu_01Qe7xU9Lh2cTzgE6P4WzbmK""#,
            "stored as m1",
        ],
        answer: Answer::Recorded(include_bytes!("../fixtures/anthropic_answer.sse")),
    },
];

/// Turn 2 (OpenAI), with turn 1 as history: the model recalls the fact, then answers.
static OPENAI_SCRIPT: [Call; 2] = [
    Call {
        url: "https://api.openai.com/v1/chat/completions",
        headers: OPENAI_HEADERS,
        content_type: SSE,
        body_has: &[
            r#""model":"gpt-4.1-mini""#,
            r#""max_completion_tokens":1024"#,
            REMEMBER,
            r#""tool_call_id":"toolu_01Qe7xU9Lh2cTzgE6P4WzbmK""#,
            STORED,
            ENTRY_LINE,
            ASK,
        ],
        answer: Answer::Recorded(include_bytes!("../fixtures/openai_recall.sse")),
    },
    Call {
        url: "https://api.openai.com/v1/chat/completions",
        headers: OPENAI_HEADERS,
        content_type: SSE,
        body_has: &[r#""role":"tool","tool_call_id":"call_7Hn3KqWz2VbX8mLrT5yPcD4e""#, ENTRY_LINE],
        answer: Answer::Recorded(include_bytes!("../fixtures/openai_answer.sse")),
    },
];

const STORY: &str = "Tell me a very long story.";
/// Where the endless server would give up by itself.
const ENDLESS_LIMIT: usize = 1024 * 1024;

/// Turn 3 (Anthropic): a server that streams text forever. The decoder's reply bound
/// (`Limits::CHIP`, 32 KiB) must stop it, and the turn must end with a short reply, not a reset.
static ENDLESS_SCRIPT: [Call; 1] = [Call {
    url: "https://api.anthropic.com/v1/messages",
    headers: ANTHROPIC_HEADERS,
    content_type: SSE,
    body_has: &[STORY],
    answer: Answer::Endless {
        head: b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01Zz\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":2210,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        event: b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"All work and no play makes Jack a dull boy. \"}}\n\n",
        limit: ENDLESS_LIMIT,
    },
}];

const WHOLE: &str = "Answer without streaming.";

/// Turn 4 (OpenAI): a server that ignores `stream: true` and sends one JSON body that never
/// ends. The exchange's whole-body bound (`Options::CHIP`) must stop it the same way.
static WHOLE_SCRIPT: [Call; 1] = [Call {
    url: "https://api.openai.com/v1/chat/completions",
    headers: OPENAI_HEADERS,
    content_type: "application/json",
    body_has: &[WHOLE],
    answer: Answer::Endless {
        head: b"{\"id\":\"chatcmpl-C2hR1\",\"object\":\"chat.completion\",\"model\":\"gpt-4.1-mini\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"",
        event: b"All work and no play makes Jack a dull boy. ",
        limit: ENDLESS_LIMIT,
    },
}];

#[riscv_rt::entry]
fn main() -> ! {
    stack::paint();
    heap::init();
    println!(
        "chela-qemu: riscv32imc, {} KiB heap arena, {} KiB stack",
        heap::arena_size() / 1024,
        stack::size() / 1024
    );
    match run() {
        Ok(()) => {
            println!("chela-qemu: turn ok");
            console::exit(0)
        }
        Err(reason) => {
            println!("chela-qemu: FAILED: {reason}");
            console::exit(1)
        }
    }
}

fn endpoint(kind: Kind) -> Endpoint {
    let (base_url, api_key, model) = match kind {
        Kind::Anthropic => ("https://api.anthropic.com", "sk-ant-qemu-test", "claude-sonnet-4-5"),
        Kind::OpenAi => ("https://api.openai.com/v1", "sk-qemu-test", "gpt-4.1-mini"),
    };
    Endpoint {
        kind,
        base_url: base_url.into(),
        api_key: api_key.into(),
        model: model.into(),
        max_tokens: 1024,
        stream: true,
    }
}

fn check(what: &str, ok: bool) -> Result<(), String> {
    if ok { Ok(()) } else { Err(alloc::format!("check failed: {what}")) }
}

/// The chip this emulates: the RAM model of flash and the fake clock.
type Emulated = Chip<RamFlash, Clock>;

/// The session as a turn starts with it; an unreadable line is a failure here.
fn load_history(chip: &Emulated) -> Result<Vec<Message>, String> {
    let (messages, skipped) = boot::history(chip, SESSION)?;
    if skipped > 0 {
        return Err(alloc::format!("the session has {skipped} unreadable lines"));
    }
    Ok(messages)
}

/// One turn on the scripted server.
fn turn(
    chip: &mut Emulated,
    kind: Kind,
    server: &mut Server,
    history: Vec<Message>,
    user: &str,
) -> Result<Turn, String> {
    let ep = endpoint(kind);
    let mut no_tools = ();
    let fut = turn::run_searching(chip, &ep, server, &mut no_tools, ORIGIN, history, user);
    // The turn's whole state machine sits on this stack while block_on polls it: the
    // largest single item on the emulator's stack (on the chip it lives in the task arena).
    println!("chela-qemu: turn future {} B on the stack", core::mem::size_of_val(&fut));
    block_on(fut)?
}

fn run() -> Result<(), String> {
    // SAFETY: the only reference to WIRE ever made; main runs once on the single hart.
    let wire: &'static mut [u8] = unsafe { &mut *(&raw mut WIRE) };
    // The flash partition: 8 sectors of 4 KiB, in RAM here (its bytes count in the arena).
    let flash = RamFlash::new(FLASH_SECTOR, FLASH_SECTORS);
    let mut chip = boot::power_on(flash, Clock::default(), 0x5eed, DEFAULTS)?;
    check(
        "a blank flash boots with no history and no memory",
        load_history(&chip)?.is_empty() && chip.entries.is_empty(),
    )?;

    // The serial console, before any turn: MimiClaw's commands set the settings, kept in flash.
    println!("--- serial console: settings (fixtures/console_setup.txt)");
    let setup = serial::type_in(&mut chip, serial::SETUP);
    for want in [
        "wifi_ssid = Chela Workshop (saved)\nwifi_password = sold****42 (saved)\n",
        "api_key = sk-a****42 (saved)\n",
        "tg_token = 8123****42 (saved)\n",
        "tg_allow = 5551234 (saved)\n",
        "model = gpt-4.1-mini (saved)\n",
        "error: provider must be anthropic or openai\n",
        "error: unknown command wifi_sett; did you mean wifi_set?\n",
        "error: unknown command; type help for the list\n",
        "api_key        flash  sk-a****42\n",
    ] {
        check(&alloc::format!("the console printed {want:?}"), setup.printed.contains(want))?;
    }
    check("no secret was printed whole", SECRETS.iter().all(|s| !setup.printed.contains(s)))?;
    check(
        "the WiFi is to reconnect and the settings to reload",
        setup.effects.contains(&Effect::ReconnectWifi) && setup.effects.contains(&Effect::ConfigChanged),
    )?;
    check(
        "only Telegram chat 5551234 gets answers",
        chip.config.telegram_allows(5_551_234) && !chip.config.telegram_allows(1),
    )?;
    // Garbage on the wire and a line longer than the console takes: short errors, no reset.
    let mut noise = alloc::vec![b'x'; 3000];
    noise.extend_from_slice(b"\n\x1b[A\x00\xff\n\xc3\x28\nheap_info\n");
    let noisy = serial::type_in(&mut chip, &noise);
    check(
        "garbage and an over-long line got short errors, and the console went on",
        noisy.printed.starts_with(
            "error: line too long (at most 1024 bytes); nothing was done\n\
             error: control characters in the line; nothing was done\n\
             error: the line is not UTF-8 text; nothing was done\nheap: ",
        ),
    )?;
    // The transcripts are the test's, not the chip's: free them before the turns are measured.
    drop((setup, noisy));
    let at_boot = heap::stats();

    // Turn 1: Anthropic Messages, streamed; the model calls memory_store.
    let mut server = Server::new(wire, &ANTHROPIC_SCRIPT, chip.board.clone());
    heap::reset_peak();
    let before1 = heap::stats().live;
    println!("--- turn 1: Anthropic Messages (SSE)\n> {REMEMBER}");
    let t1 = turn(&mut chip, Kind::Anthropic, &mut server, Vec::new(), REMEMBER)?;
    let peak1 = heap::stats().peak - before1;
    check("turn 1 answer", t1.text == STORED)?;
    check(
        "turn 1 made 2 model calls and 1 tool call",
        t1.model_calls == 2 && t1.tool_calls == 1 && t1.iterations == 1,
    )?;
    check("turn 1 used the whole script", server.calls_left() == 0)?;
    check("turn 1 usage summed", t1.usage.input_tokens == 1873 + 1968 && t1.usage.output_tokens == 71 + 18)?;
    check("turn 1 stored 4 messages", t1.messages.len() == 4)?;
    let stored = chip.entries.get("m1").ok_or("memory entry m1 is missing")?;
    check(
        "entry m1 as the model asked, at the clock's time",
        stored.content == "The spare key is under the blue flowerpot by the back door."
            && stored.tags == ["home"]
            && stored.created == chip.board.unix().unwrap_or(0),
    )?;
    let (received1, largest1) = (server.received, server.largest);
    let wire = server.into_wire();
    boot::persist(&mut chip, SESSION, &t1)?;

    // Reboot: only the flash survives. The session and the memory entry must come back from it.
    let (flash, clock, seed) = boot::power_off(chip);
    println!("--- reboot");
    let mut chip = boot::power_on(flash, clock, seed, DEFAULTS)?;
    let history: Vec<Message> = load_history(&chip)?;
    check("the session survived the reboot", history == t1.messages)?;
    check(
        "the memory entry survived the reboot",
        chip.entries.get("m1").is_some_and(|e| e.content.starts_with("The spare key")),
    )?;
    check(
        "the settings survived the reboot",
        chip.config.get(Field::WifiSsid) == "Chela Workshop" && chip.config.source(Field::ApiKey) == Source::Flash,
    )?;
    println!("--- serial console after the reboot (fixtures/console_after.txt)");
    let after = serial::type_in(&mut chip, serial::AFTER);
    for want in [
        "wifi_ssid      flash  \"Chela Workshop\"\n",
        "wifi_password  flash  sold****42\n",
        "tg_token       flash  8123****42\n",
        "api_key        flash  sk-a****42\n",
        "provider       flash  openai\n",
        "wifi: off; \"Chela Workshop\"\n",
        "serial_console.jsonl  4 lines, ",
        "# Memory\n- The workshop is in the garage.\n",
        "heap: ",
    ] {
        check(&alloc::format!("the console printed {want:?} after the reboot"), after.printed.contains(want))?;
    }
    check("no secret was printed whole after the reboot", SECRETS.iter().all(|s| !after.printed.contains(s)))?;
    check("memory_write asked for the prompt's memory to be rebuilt", after.effects == [Effect::MemoryChanged])?;
    drop(t1);

    // Turn 2: OpenAI Chat Completions, streamed, with turn 1 as history; the model calls memory_recall.
    let mut server = Server::new(wire, &OPENAI_SCRIPT, chip.board.clone());
    heap::reset_peak();
    let before = heap::stats().live;
    println!("--- turn 2: OpenAI Chat Completions (SSE)\n> {ASK}");
    let t2 = turn(&mut chip, Kind::OpenAi, &mut server, history, ASK)?;
    let peak2 = heap::stats().peak - before;
    check("turn 2 answer", t2.text == FOUND)?;
    check(
        "turn 2 made 2 model calls and 1 tool call",
        t2.model_calls == 2 && t2.tool_calls == 1 && t2.iterations == 1,
    )?;
    check("turn 2 used the whole script", server.calls_left() == 0)?;
    check("turn 2 usage summed", t2.usage.input_tokens == 2114 + 2163 && t2.usage.output_tokens == 17 + 11)?;
    let (received2, largest2) = (server.received, server.largest);
    boot::persist(&mut chip, SESSION, &t2)?;
    drop(t2);
    let wire = server.into_wire();

    // Turn 3: a reply that never ends. Refused at the chip's reply bound with a short reply.
    let mut server = Server::new(wire, &ENDLESS_SCRIPT, chip.board.clone());
    heap::reset_peak();
    let before3 = heap::stats().live;
    println!("--- turn 3: a server that never stops sending (Anthropic SSE)\n> {STORY}");
    let history = load_history(&chip)?;
    let t3 = turn(&mut chip, Kind::Anthropic, &mut server, history, STORY)?;
    let peak3 = heap::stats().peak - before3;
    println!("{}", t3.text);
    check("turn 3 was stopped", t3.aborted && t3.model_calls == 1 && t3.tool_calls == 0)?;
    check(
        "turn 3 says why",
        t3.text.starts_with(
            "(this turn stopped: The provider https://api.anthropic.com sent a reply Chela will not hold (the reply is larger than 32768 bytes)",
        ),
    )?;
    // 32 KiB of text is about 115 KiB of SSE; refused long before the server would stop by itself.
    check("turn 3 was refused by the bound, not ended by the server", chip.last_answer_bytes < ENDLESS_LIMIT / 2)?;
    check("turn 3 keeps a well-formed exchange", t3.messages.len() == 2)?;
    let endless_bytes = chip.last_answer_bytes;
    boot::persist(&mut chip, SESSION, &t3)?;
    drop(t3);
    let wire = server.into_wire();

    // Turn 4: a whole JSON body that never ends. Refused at the chip's body bound.
    let mut server = Server::new(wire, &WHOLE_SCRIPT, chip.board.clone());
    heap::reset_peak();
    let before4 = heap::stats().live;
    println!("--- turn 4: a server that sends one endless JSON body (OpenAI, not streamed)\n> {WHOLE}");
    let history = load_history(&chip)?;
    let t4 = turn(&mut chip, Kind::OpenAi, &mut server, history, WHOLE)?;
    let peak4 = heap::stats().peak - before4;
    println!("{}", t4.text);
    check("turn 4 was stopped", t4.aborted && t4.model_calls == 1 && t4.tool_calls == 0)?;
    check(
        "turn 4 says why",
        t4.text.starts_with(
            "(this turn stopped: The provider https://api.openai.com/v1 sent a reply Chela will not hold (the response body is larger than",
        ),
    )?;
    check("turn 4 was refused by the bound, not ended by the server", chip.last_answer_bytes < ENDLESS_LIMIT / 2)?;
    let whole_bytes = chip.last_answer_bytes;
    boot::persist(&mut chip, SESSION, &t4)?;
    let note4 = t4.text.clone();
    drop(t4);

    // Turns 5 and 6, outside the session: web_search through a local Tavily, and a heartbeat.
    let wire = server.into_wire();
    let search = net_turns::web_search(&mut chip, wire)?;
    let wire = search.0;
    let search = search.1;
    let (_wire, peak6) = net_turns::heartbeat(&mut chip, wire)?;

    // A last reboot: all four turns are in the session, the refused ones closed by their notes.
    let (flash, clock, seed) = boot::power_off(chip);
    println!("--- reboot");
    let chip = boot::power_on(flash, clock, seed, DEFAULTS)?;
    let session = load_history(&chip)?;
    check("the session holds the four turns", session.len() == 12)?;
    check("the last message is turn 4's note", session.last().is_some_and(|m| m.text() == note4))?;
    let flash_stats = chip.store.stats();
    let note3 = session[session.len() - 3].text();
    drop(session);

    // Planted damage: one bit of turn 4's note rots, as a flash cell losing charge does. The
    // boot skips that record and counts it; the session loads without it, and the person's
    // message it answered, now without a reply, is left out too.
    let (mut flash, clock, seed) = boot::power_off(chip);
    let needle = b"the response body is larger than";
    let at = flash.bytes().windows(needle.len()).position(|w| w == needle);
    let at = at.ok_or("turn 4's note is not in the flash")?;
    flash.rot(at as u32, 2);
    println!("--- a bit of turn 4's note rots; reboot");
    let chip = boot::power_on(flash, clock, seed, DEFAULTS)?;
    let rotted = chip.store.stats();
    let session = load_history(&chip)?;
    check("the boot skipped the damaged record", rotted.corrupt == 1)?;
    check("the session ends with turn 3", session.len() == 10 && session.last().is_some_and(|m| m.text() == note3))?;
    check("the memory entry is intact", chip.entries.get("m1").is_some())?;
    drop(session);
    check("four boots so far, three quick resets: still a normal boot", chip.guard.mode() == BootMode::Normal)?;

    // The boot guard: a minute up clears the counter; then the chip crashes right after
    // every boot. The fifth boot in a row starts in safe mode, with the console on.
    let mut chip = chip;
    chip.board.advance(60_000);
    let settled = chip.guard.handle_uptime(&mut chip.store, 60_000).map_err(|e| e.to_string())?;
    check("a minute up clears the boot counter", settled)?;
    println!("--- a crash loop: five resets, each right after boot");
    let mut modes = Vec::new();
    for _ in 0..5 {
        let (flash, clock, seed) = boot::power_off(chip);
        chip = boot::power_on(flash, clock, seed, DEFAULTS)?;
        modes.push(chip.guard.mode());
    }
    check(
        "four quick resets in a row, then safe mode",
        modes[..4].iter().all(|m| *m == BootMode::Normal) && modes[4] == BootMode::Safe { quick_resets: 4 },
    )?;
    print!("{}", Console::banner(chip.guard.mode()));
    let safe = serial::type_in(&mut chip, b"config_show\nrestart\n");
    check(
        "the console works in safe mode, and restart asks for a reboot",
        safe.effects == [Effect::Restart]
            && safe.printed.contains("\"Chela Workshop\"")
            && safe.printed.ends_with("restarting\n"),
    )?;
    let (flash, clock, seed) = boot::power_off(chip);
    println!("--- restart");
    let chip = boot::power_on(flash, clock, seed, DEFAULTS)?;
    check("a restart asked for on the console is not a crash", chip.guard.mode() == BootMode::Normal)?;
    drop(chip);

    let s = heap::stats();
    check("no allocation failed", s.failures == 0)?;
    println!("chela-qemu: heap before the turns {} B", at_boot.live);
    // The chip's figures (run.sh checks them against the chip's heap and stack): the flash model
    // lives in this arena but is flash on the chip, so it is not counted.
    let flash_model = (FLASH_SECTOR * FLASH_SECTORS) as usize;
    println!(
        "chela-qemu: idle after start-up {} B held on the heap (the flash model's {flash_model} B not counted)",
        at_boot.live - flash_model
    );
    println!(
        "chela-qemu: web_search turn heap peak {} B in all (the flash model's {flash_model} B not counted)",
        search.held + search.peak - flash_model
    );
    println!(
        "chela-qemu: turn 1 (anthropic) heap peak {} B above {} B held; request bodies {} B (largest {} B)",
        peak1, before1, received1, largest1
    );
    println!(
        "chela-qemu: turn 2 (openai) heap peak {} B above {} B held (history + memory); request bodies {} B (largest {} B)",
        peak2, before, received2, largest2
    );
    println!(
        "chela-qemu: turn 3 (endless reply) heap peak {} B above {} B held; refused after {} response bytes",
        peak3, before3, endless_bytes
    );
    println!(
        "chela-qemu: turn 4 (endless whole body) heap peak {} B above {} B held; refused after {} response bytes",
        peak4, before4, whole_bytes
    );
    println!(
        "chela-qemu: turn 5 (web_search, Tavily) heap peak {} B above {} B held; largest request body {} B",
        search.peak, search.held, search.largest_body
    );
    println!("chela-qemu: turn 6 (heartbeat) heap peak {} B", peak6);
    println!(
        "chela-qemu: arena {} B: high-water {} B, allocator used peak (turn 4) {} B, {} allocations",
        heap::arena_size(),
        s.high_water,
        s.used_peak,
        s.allocations
    );
    println!(
        "chela-qemu: flash {} records, {} B of {} sectors x {} B, {} sectors free, erases {}..{}",
        flash_stats.records,
        flash_stats.record_bytes,
        flash_stats.sectors,
        flash_stats.sector_size,
        flash_stats.free_sectors,
        flash_stats.min_erases,
        flash_stats.max_erases
    );
    println!("chela-qemu: stack peak {} B of {} B", stack::used(), stack::size());
    check("the stack stayed within its region", stack::used() < stack::size())?;
    Ok(())
}
