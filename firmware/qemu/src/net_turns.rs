//! Turns 5 and 6: `web_search` through a local Tavily speaking its documented format (POST
//! /search with a bearer key; `results[]` of `title`, `url`, `content`, `score`), and a
//! heartbeat: `HEARTBEAT.md` written on the console, its open item prompted when due.

use alloc::string::String;
use alloc::vec::Vec;

use chela_chip::heartbeat::{self, Beat, Heartbeat};
use chela_chip::search;
use chela_core::exchange::Kind;
use chela_core::heartbeat::ActiveHours;

use crate::wire::{Answer, Call, Server};
use crate::{ANTHROPIC_HEADERS, Emulated, SSE, check, heap, println, serial, turn};

/// The key typed on the console before turn 5: never printed whole.
pub const TAVILY_KEY: &str = "tvly-qemu-console-SECRET-0042";

const ASK: &str = "How much SRAM does the ESP32-C3 have? Search the web.";
const ANSWER: &str = "The ESP32-C3 has 400 KB of SRAM, 16 KB of it for the cache.";

static SEARCH_SCRIPT: [Call; 3] = [
    Call {
        url: "https://api.anthropic.com/v1/messages",
        headers: ANTHROPIC_HEADERS,
        content_type: SSE,
        body_has: &[r#""name":"web_search""#, ASK],
        answer: Answer::Recorded(include_bytes!("../fixtures/anthropic_search.sse")),
    },
    Call {
        url: "https://api.tavily.com/search",
        headers: &[("authorization", "Bearer tvly-qemu-console-SECRET-0042"), ("content-type", "application/json")],
        content_type: "application/json",
        body_has: &[r#""query":"ESP32-C3 SRAM size""#, r#""max_results":5"#, r#""search_depth":"basic""#],
        answer: Answer::Recorded(include_bytes!("../fixtures/tavily_search.json")),
    },
    Call {
        url: "https://api.anthropic.com/v1/messages",
        headers: ANTHROPIC_HEADERS,
        content_type: SSE,
        body_has: &[
            r#""type":"tool_result","tool_use_id":"toolu_01Srch6VbQ3nXw9TzKp2LmYe""#,
            // The engine's snippet on one line; the results as the host renders them.
            r#"1. ESP32-C3 Series Datasheet\n   https://www.espressif.com/sites/default/files/documentation/esp32-c3_datasheet_en.pdf\n   ESP32-C3 has 384 KB of ROM and 400 KB of SRAM (16 KB for cache)"#,
            r#"3. ESP32-C3 memory types - ESP-IDF Programming Guide"#,
        ],
        answer: Answer::Recorded(include_bytes!("../fixtures/anthropic_search_answer.sse")),
    },
];

const HEARTBEAT_FILE: &[u8] =
    b"heartbeat_write \"# Heartbeat\\n- [x] water the plants\\n- [ ] remind me to charge the drill\"\n";

static HEARTBEAT_SCRIPT: [Call; 1] = [Call {
    url: "https://api.anthropic.com/v1/messages",
    headers: ANTHROPIC_HEADERS,
    content_type: SSE,
    body_has: &["[Heartbeat] HEARTBEAT.md has these open items.", r#"\n- [ ] remind me to charge the drill\n"#],
    answer: Answer::Recorded(include_bytes!("../fixtures/anthropic_heartbeat.sse")),
}];

/// What turn 5 took from the heap: its peak above what was held when it began.
pub struct SearchHeap {
    pub peak: usize,
    pub held: usize,
    pub largest_body: usize,
}

/// Turn 5: the model searches the web; returns the wire and the turn's heap figures.
pub fn web_search(chip: &mut Emulated, wire: &'static mut [u8]) -> Result<(&'static mut [u8], SearchHeap), String> {
    let typed = serial::type_in(chip, alloc::format!("set_tavily_key {TAVILY_KEY}\n").as_bytes());
    check("the Tavily key was saved, masked", typed.printed == "tavily_key = tvly****42 (saved)\n")?;
    check("web_search is offered once a key is set", search::available(&chip.config))?;
    let mut server = Server::new(wire, &SEARCH_SCRIPT, chip.board.clone());
    heap::reset_peak();
    let before = heap::stats().live;
    println!("--- turn 5: web_search through Tavily (Anthropic SSE)\n> {ASK}");
    let t = turn(chip, Kind::Anthropic, &mut server, Vec::new(), ASK)?;
    let peak = heap::stats().peak - before;
    check("turn 5 answer", t.text == ANSWER)?;
    check("turn 5 made 2 model calls and 1 tool call", t.model_calls == 2 && t.tool_calls == 1)?;
    check("turn 5 used the whole script (model, Tavily, model)", server.calls_left() == 0)?;
    let largest_body = server.largest;
    Ok((server.into_wire(), SearchHeap { peak, held: before, largest_body }))
}

/// Turn 6: the heartbeat fires after its interval and prompts the open item only.
pub fn heartbeat(chip: &mut Emulated, wire: &'static mut [u8]) -> Result<(&'static mut [u8], usize), String> {
    let typed = serial::type_in(chip, HEARTBEAT_FILE);
    check("HEARTBEAT.md was written", typed.printed.starts_with("HEARTBEAT.md written"))?;
    let mut beat = Heartbeat::new(heartbeat::EVERY_MS, ActiveHours::ALWAYS, chela_chip::Board::now_ms(&chip.board));
    check("no heartbeat before its interval", beat.poll(chip)? == Beat::NotYet)?;
    chip.board.advance(heartbeat::EVERY_MS);
    let Beat::Prompt(prompt) = beat.poll(chip)? else {
        return Err("the heartbeat was due with an open item, and gave no prompt".into());
    };
    check("the done item is left out", !prompt.contains("water the plants"))?;
    let mut server = Server::new(wire, &HEARTBEAT_SCRIPT, chip.board.clone());
    heap::reset_peak();
    let before = heap::stats().live;
    println!("--- turn 6: the heartbeat (Anthropic SSE)\n> {}", prompt.trim_end());
    let t = turn(chip, Kind::Anthropic, &mut server, Vec::new(), &prompt)?;
    let peak = heap::stats().peak - before;
    check("turn 6 answer", t.text == "Reminder: charge the drill before the weekend.")?;
    check("turn 6 used the whole script", server.calls_left() == 0)?;
    check("the next heartbeat is an interval away", beat.poll(chip)? == Beat::NotYet)?;
    Ok((server.into_wire(), peak))
}
