//! The chip's turn driver: `chela-core`'s [`AgentRun`] stepped to the end, each model call made
//! through the core's [`Exchange`], the request body written in fixed windows
//! ([`json::Window`]) and the answer fed to the proto stream decoder in pieces, the tool calls
//! run against the core's memory entries. The network is [`Server`]; time is [`Clock`].

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use chela_core::agent::{AgentRun, Limits, ModelCall, Step, ToolCall, ToolResult};
use chela_core::console::{BootGuard, ChipConfig};
use chela_core::exchange::{Context, Endpoint, Exchange, ModelError, Options, Outcome};
use chela_core::flash::{FlashStore, RamFlash};
use chela_core::memory::{self, Entries};
use chela_core::prompt;
use chela_proto::chat::{Message, Reply, StopReason, ToolSpec, Update, Usage};
use chela_proto::json::{Counter, Window};
use serde::Deserialize;

use crate::clock::Clock;
use crate::wire::Server;
use crate::{print, println};

/// Bytes of request body encoded and sent at a time: the chip's socket write buffer.
pub const WINDOW: usize = 512;

/// Response pieces as the socket hands them out: uneven, so SSE lines and UTF-8 split anywhere.
const PIECES: [usize; 5] = [1, 7, 64, 300, 29];

/// Answer bytes echoed on the console per model call.
const MAX_ECHO: usize = 512;

/// The memory tools the chip offers, with the host's names, descriptions and schemas.
pub const TOOLS: [ToolSpec<'static>; 2] = [
    ToolSpec {
        name: "memory_store",
        description: "Remember a fact for future conversations. Returns its id.",
        input_schema: r#"{"type":"object","properties":{"content":{"type":"string","description":"One self-contained fact."},"tags":{"type":"array","items":{"type":"string"}},"source":{"type":"string","description":"Where it came from, e.g. chat."}},"required":["content"]}"#,
    },
    ToolSpec {
        name: "memory_recall",
        description: "Search remembered facts by keywords, best matches first.",
        input_schema: r#"{"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":50}},"required":["query"]}"#,
    },
];

/// Where memory entries are kept in the store (a kept key: never dropped for room).
pub const ENTRIES: &str = "entries.jsonl";

/// What the chip keeps between turns.
pub struct Chip {
    /// The flash partition, through the core's record store.
    pub store: FlashStore<RamFlash>,
    /// The memory entries, loaded from `store` at boot and written back on every change.
    pub entries: Entries,
    pub clock: Clock,
    /// Seeds the retry jitter; the chip would take it from its RNG.
    pub seed: u64,
    /// Response bytes the last model call read.
    pub last_answer_bytes: usize,
    /// The settings in force: the build's, overridden by those set over the console.
    pub config: ChipConfig,
    /// The boot counter; its mode says whether channels may start.
    pub guard: BootGuard,
}

/// How a turn went.
#[derive(Debug)]
pub struct Turn {
    pub text: String,
    /// A model call failed and the turn was closed with a note saying why.
    pub aborted: bool,
    /// The messages the turn added, the person's first: what is persisted.
    pub messages: Vec<Message>,
    pub iterations: u32,
    pub model_calls: u32,
    pub tool_calls: u32,
    pub usage: Usage,
}

/// Runs one turn to its end. `history` is the session as loaded.
pub fn run(
    chip: &mut Chip,
    endpoint: &Endpoint,
    server: &mut Server,
    history: Vec<Message>,
    user: &str,
) -> Result<Turn, String> {
    let system = system_prompt(chip);
    let limits = Limits { history_budget: 16 * 1024, max_tool_output: 4 * 1024, ..Limits::default() };
    let mut run = AgentRun::new(history, Message::user_text(user), system, limits);
    let (mut model_calls, mut tool_calls) = (0u32, 0u32);
    loop {
        // Each arm ends the borrow of `run` that `next_step` took before feeding it.
        let results = match run.next_step() {
            Step::CallModel(call) => {
                model_calls += 1;
                match call_model(chip, endpoint, server, &call)? {
                    Ok(reply) => run.handle_reply(reply).map_err(|e| e.to_string())?,
                    // What the host does too: the turn ends with a short reply saying why,
                    // and what is persisted stays well-formed.
                    Err(e) => {
                        let ctx = Context { who: endpoint.base_url.as_str(), model: &endpoint.model, key_fix: "" };
                        run.abort(&format!("(this turn stopped: {})", e.explain(&ctx)));
                    }
                }
                continue;
            }
            Step::CallTools(calls) => {
                tool_calls += calls.len() as u32;
                calls.iter().map(|c| run_tool(chip, c)).collect::<Vec<_>>()
            }
            Step::Done(outcome) => {
                if outcome.cancelled || outcome.hit_tool_limit {
                    return Err(format!("the turn ended early: {}", outcome.text));
                }
                let text = outcome.text.clone();
                let aborted = outcome.stop_reason == StopReason::Other("aborted".into());
                let (iterations, usage) = (outcome.iterations, outcome.usage);
                return Ok(Turn {
                    text,
                    aborted,
                    messages: run.turn_messages().to_vec(),
                    iterations,
                    model_calls,
                    tool_calls,
                    usage,
                });
            }
        };
        run.handle_tool_results(results).map_err(|e| e.to_string())?;
    }
}

/// The system prompt from the default memory files and the remembered entries.
fn system_prompt(chip: &Chip) -> String {
    let entries = chip.entries.render(prompt::Bounds::default().entries);
    let (local_time, weekday) = chip.clock.utc();
    let inputs = prompt::Inputs {
        soul: memory::SOUL_DEFAULT,
        agents: memory::AGENTS_DEFAULT,
        user: memory::USER_DEFAULT,
        memory: memory::MEMORY_DEFAULT,
        entries: &entries,
        daily: "",
        tool_guidance: "Save what the user asks you to remember with memory_store; look it up with memory_recall.",
        context: prompt::TurnContext {
            channel: "serial",
            chat_id: "console",
            local_time: &local_time,
            weekday,
            timezone: "UTC",
        },
    };
    prompt::build(&inputs, &prompt::Bounds::default())
}

/// One model call through the core's exchange: send, stream the answer in, take the reply.
/// The outer error is a broken script (the run fails); the inner one is the model call failing
/// as the core judged it (the turn ends with a note).
fn call_model(
    chip: &mut Chip,
    endpoint: &Endpoint,
    server: &mut Server,
    call: &ModelCall<'_>,
) -> Result<Result<Reply, ModelError>, String> {
    let mut ex = Exchange::new(endpoint.clone(), Options::CHIP, chip.clock.now_ms(), chip.seed);
    chip.seed = chip.seed.wrapping_add(1);
    ex.start(chip.clock.now_ms());
    if !ex.wants_input() {
        return Err("the exchange did not start".into());
    }
    // Two passes, as on the chip: count for the Content-Length, then encode again window by
    // window straight onto the socket; the body is never held whole.
    let mut length = Counter::default();
    endpoint.write_body(call, &TOOLS, &mut length);
    server.handle_head(&ex.head(), length.0)?;
    let mut buf = Vec::with_capacity(WINDOW);
    let mut sent = 0;
    while sent < length.0 {
        endpoint.write_body(call, &TOOLS, &mut Window::new(sent, WINDOW, &mut buf));
        if buf.is_empty() {
            return Err(format!("the body encoder stopped at byte {sent} of {}", length.0));
        }
        server.handle_body(&buf)?;
        sent += buf.len();
    }
    drop(buf);
    let (content_type, mut body) = server.respond()?;

    chip.clock.advance(350);
    ex.handle_head(200, &[("content-type", content_type)], chip.clock.now_ms());
    // The console shows the answer as it streams, up to a bound: a serial line is slow.
    let mut echoed = 0usize;
    let mut shown = |u: Update<'_>| {
        if let Update::Text(t) = u {
            if echoed < MAX_ECHO {
                print!("{}", chela_core::text::prefix(t, MAX_ECHO - echoed));
            }
            echoed += t.len();
        }
    };
    for &n in PIECES.iter().cycle() {
        if !ex.wants_input() {
            break;
        }
        let Some(piece) = body.next_piece(n) else {
            ex.handle_end(chip.clock.now_ms(), &mut shown);
            break;
        };
        chip.clock.advance(3);
        ex.handle_body(piece, chip.clock.now_ms(), &mut shown);
    }
    if echoed > MAX_ECHO {
        print!(" [... {} more bytes]", echoed - MAX_ECHO);
    }
    println!();
    chip.last_answer_bytes = body.sent();
    match ex.poll_outcome() {
        Some(Outcome::Reply(reply)) => Ok(Ok(reply)),
        Some(Outcome::Failed(e)) => {
            println!("[model] failed after {} response bytes: {e}", body.sent());
            Ok(Err(e))
        }
        Some(Outcome::RetryAt(t)) => Err(format!("the model call wants a retry at {t} ms: {:?}", ex.last_failure())),
        None => Err("the model call did not finish".into()),
    }
}

#[derive(Deserialize)]
struct StoreArgs {
    content: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    source: String,
}

#[derive(Deserialize)]
struct RecallArgs {
    query: String,
    #[serde(default)]
    max_results: Option<usize>,
}

/// Runs one tool call against the core's memory entries.
fn run_tool(chip: &mut Chip, call: &ToolCall) -> ToolResult {
    println!("[tool] {} {}", call.name, call.input.as_str());
    let out = match call.name.as_str() {
        "memory_store" => serde_json::from_str::<StoreArgs>(call.input.as_str()).map_err(bad_args).and_then(|a| {
            let source = if a.source.is_empty() { "chat" } else { a.source.as_str() };
            let id = chip
                .entries
                .store(&a.content, &a.tags, source, chip.clock.unix())
                .map_err(|e| e.to_string())?
                .id
                .clone();
            // Durable before the model hears it is stored; if flash refuses, it is not stored.
            match chip.store.replace(ENTRIES, chip.entries.to_jsonl().as_bytes()) {
                Ok(()) => Ok(format!("stored as {id}")),
                Err(e) => {
                    let _ = chip.entries.forget(&id);
                    Err(format!("The entry could not be saved to flash: {e}"))
                }
            }
        }),
        "memory_recall" => serde_json::from_str::<RecallArgs>(call.input.as_str()).map_err(bad_args).map(|a| {
            let hits = chip.entries.recall(&a.query, a.max_results.unwrap_or(8).clamp(1, 50));
            if hits.is_empty() {
                format!("Nothing remembered matches \"{}\".", a.query)
            } else {
                hits.iter().map(|(_, e)| memory::render_line(e)).collect::<Vec<_>>().join("\n")
            }
        }),
        other => Err(format!("There is no tool `{other}` on this device.")),
    };
    match out {
        Ok(content) => {
            println!("[tool] -> {content}");
            ToolResult::ok(call.id.clone(), content)
        }
        Err(e) => {
            println!("[tool] failed: {e}");
            ToolResult::error(call.id.clone(), e)
        }
    }
}

fn bad_args(e: serde_json::Error) -> String {
    format!("The arguments do not fit the tool's schema: {e}")
}
