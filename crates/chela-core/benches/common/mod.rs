//! Fixtures and the turn driver shared by the `turn` and `heap` benchmarks.
//!
//! The turn is the one `crates/chela-runtime/src/turn.rs` drives, minus the IO: the same `AgentRun`
//! steps, tool list from the `Registry`, request body encoded into a `String` the way
//! `Provider::body` does it, the vendor's SSE stream fed to the real decoder in 100-byte
//! chunks (what a socket delivers), one no-op tool call, and the second round.
//!
//! Everything is deterministic: text comes from a fixed word list and a fixed-seed generator,
//! and the streamed replies are the files in `fixtures/`, so two runs measure the same bytes.

// Each benchmark uses a different part of this module.
#![allow(dead_code)]

use chela_core::agent::{AgentRun, Limits, Step, ToolResult};
use chela_core::cap::{Caller, Capability, GroupSpec, Registry, Scope};
use chela_core::memory::{AGENTS_DEFAULT, MEMORY_DEFAULT, SOUL_DEFAULT, USER_DEFAULT};
use chela_core::prompt::{self, Bounds, Inputs, TurnContext};
use chela_core::session;
use chela_proto::chat::{Block, Json, Message, Reply, Request, Role, Update};
use chela_proto::json::{Counter, Sink, Window};
use chela_proto::{anthropic, openai, stream};
use serde_json::json;
use std::sync::OnceLock;

/// Bytes per `handle_bytes` call: roughly what one TCP read of a streamed reply holds.
pub const CHUNK: usize = 100;

/// What the no-op `get_current_time` returns (the real tool's output shape).
pub const TOOL_OUTPUT: &str =
    r#"{"iso":"2026-11-30T12:25:20+01:00","unix":1796037920,"timezone":"Europe/Paris","weekday":"Monday"}"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Anthropic,
    OpenAi,
}

impl Format {
    pub const BOTH: [Format; 2] = [Format::Anthropic, Format::OpenAi];

    pub fn name(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
        }
    }

    fn model(self) -> &'static str {
        match self {
            Format::Anthropic => "claude-sonnet-4-5",
            Format::OpenAi => "gpt-4.1-mini",
        }
    }
}

/// A fixed-seed generator (64-bit LCG): enough to vary lengths and words deterministically.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }

    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// Between `lo` and `hi` words of text.
    pub fn text(&mut self, lo: usize, hi: usize) -> String {
        let n = self.range(lo, hi);
        self.words(n)
    }

    /// `n` words of plain English-looking text, with the odd comma and full stop.
    pub fn words(&mut self, n: usize) -> String {
        const WORDS: &str = "the meeting is moved to Thursday and we should check whether train leaves at nine \
            please remember that my sister likes green tea not coffee weather in Paris will be rainy tomorrow so \
            take an umbrella file notes project report draft summary budget invoice deadline Friday dentist \
            appointment book flight hotel for two nights near station price euros about around minutes later \
            today this evening it was found";
        let words: Vec<&str> = WORDS.split_whitespace().collect();
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push_str(if self.below(12) == 0 { ", " } else { " " });
            }
            out.push_str(words[self.below(words.len())]);
        }
        out.push('.');
        out
    }
}

const TOOL_NAMES: [&str; 30] = [
    "get_current_time",
    "file_read",
    "file_write",
    "file_edit",
    "file_append",
    "file_list",
    "file_search",
    "file_copy",
    "file_delete",
    "memory_store",
    "memory_recall",
    "memory_list",
    "memory_update",
    "memory_forget",
    "memory_note",
    "web_search",
    "web_fetch",
    "http_request",
    "schedule_add",
    "schedule_list",
    "schedule_remove",
    "rule_add",
    "rule_list",
    "rule_remove",
    "skill_list",
    "skill_read",
    "message_send",
    "gpio_read",
    "gpio_write",
    "sensor_read",
];

/// One generated tool: name, description, schema. Leaked once, so the registry borrows
/// `&'static str`s as it does for Chela's built-in tools (whose texts are constants, in flash on
/// the chip) and its heap size is what a real registry holds.
struct ToolText {
    name: &'static str,
    description: &'static str,
    schema: &'static str,
}

struct GroupText {
    description: &'static str,
    guidance: &'static str,
}

fn texts() -> &'static (Vec<ToolText>, Vec<GroupText>) {
    static TEXTS: OnceLock<(Vec<ToolText>, Vec<GroupText>)> = OnceLock::new();
    TEXTS.get_or_init(|| {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let mut rng = Rng::new(7);
        let tools = TOOL_NAMES
            .iter()
            .map(|name| {
                let mut props = serde_json::Map::new();
                for p in 0..rng.range(1, 2) {
                    props.insert(
                        format!("arg{p}_{}", &name[..3]),
                        json!({"type": "string", "description": rng.text(3, 8)}),
                    );
                }
                let first = props.keys().next().cloned().unwrap_or_default();
                let schema = json!({"type": "object", "properties": props, "required": [first]});
                ToolText { name, description: leak(rng.text(6, 16)), schema: leak(schema.to_string()) }
            })
            .collect();
        let groups = (0..TOOL_NAMES.len().div_ceil(5))
            .map(|_| GroupText { description: leak(rng.words(6)), guidance: leak(rng.text(20, 35)) })
            .collect();
        (tools, groups)
    })
}

/// A registry of the first `n` tools (at most 30) in groups of five, sized like Chela's built-in
/// tools: about 300 bytes per definition on the wire (the e2e benchmark measures the real ones
/// at 265-294).
pub fn registry(n: usize) -> Registry {
    let (tools, groups) = texts();
    let mut reg = Registry::new();
    for (g, chunk) in tools[..n].chunks(5).enumerate() {
        let caps = chunk
            .iter()
            .map(|t| Capability {
                id: t.name.into(),
                group: "".into(),
                description: t.description.into(),
                input_schema: t.schema.into(),
                llm_callable: true,
            })
            .collect();
        let spec = GroupSpec {
            id: GROUP_NAMES[g].into(),
            description: groups[g].description.into(),
            core: g == 0,
            visible_by_default: true,
            guidance: groups[g].guidance.into(),
        };
        reg.add_group(spec, caps).expect("unique tool names");
    }
    reg
}

const GROUP_NAMES: [&str; 6] = ["time", "files", "memory", "web", "schedule", "board"];

/// The system prompt of a fresh workspace: default memory files plus the tools' guidance.
pub fn system_prompt(reg: &Registry) -> String {
    let guidance = reg.guidance_for(Scope::default());
    let inputs = Inputs {
        soul: SOUL_DEFAULT,
        agents: AGENTS_DEFAULT,
        user: USER_DEFAULT,
        memory: MEMORY_DEFAULT,
        entries: "",
        daily: "",
        tool_guidance: &guidance,
        context: TurnContext {
            channel: "cli",
            chat_id: "local",
            local_time: "2026-11-30T12:25:20+01:00",
            weekday: "Monday",
            timezone: "Europe/Paris",
        },
    };
    prompt::build(&inputs, &Bounds::default())
}

/// A well-formed conversation of exchanges: a person's message, sometimes a tool call and its
/// result, then the answer. Stops at `max_messages` messages or `max_bytes` approximate
/// request bytes, whichever comes first, and always ends on a finished exchange.
pub fn history(max_messages: usize, max_bytes: usize) -> Vec<Message> {
    let mut rng = Rng::new(42);
    let mut out: Vec<Message> = Vec::new();
    let mut n = 0;
    loop {
        let mut exchange = vec![Message::user_text(rng.text(8, 40))];
        if n % 3 == 1 {
            let id = format!("toolu_hist{n:04}");
            let name = TOOL_NAMES[rng.below(TOOL_NAMES.len())];
            let input = Json::parse(&json!({"query": rng.words(4)}).to_string()).expect("valid JSON");
            exchange.push(Message {
                role: Role::Assistant,
                content: vec![
                    Block::text(rng.text(4, 10)),
                    Block::ToolUse { id: id.clone(), name: name.into(), input },
                ],
            });
            exchange.push(Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: id.into(),
                    content: rng.text(40, 120),
                    images: Default::default(),
                    is_error: false,
                }],
            });
        }
        exchange.push(Message::assistant_text(rng.text(30, 90)));
        n += 1;
        let bytes = chela_core::history::bytes(&out) + chela_core::history::bytes(&exchange);
        if out.len() + exchange.len() > max_messages || bytes > max_bytes {
            return out;
        }
        out.extend(exchange);
    }
}

/// The history as its session file holds it, so a turn can load it the way the driver does.
pub fn session_text(history: &[Message]) -> String {
    session::encode_turn(history, 1_796_037_000)
}

/// A streamed reply that calls `get_current_time` after a sentence of text, as the vendor
/// sends it: the event sequence, field order and id shapes of the vendors' streams.
pub fn tool_call_stream(format: Format) -> Vec<u8> {
    match format {
        Format::Anthropic => include_bytes!("../fixtures/anthropic_tool_call.sse").to_vec(),
        Format::OpenAi => include_bytes!("../fixtures/openai_tool_call.sse").to_vec(),
    }
}

/// A streamed text answer of about forty words, three words per event.
pub fn text_stream(format: Format) -> Vec<u8> {
    match format {
        Format::Anthropic => include_bytes!("../fixtures/anthropic_text.sse").to_vec(),
        Format::OpenAi => include_bytes!("../fixtures/openai_text.sse").to_vec(),
    }
}

/// Bytes the chip's driver sends per piece of a request body.
pub const WINDOW: usize = 2048;

/// How the request body is held while the request is in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyMode {
    /// The chip's way: a `json::Counter` pass gives the `Content-Length`, then the body goes to
    /// the socket in `WINDOW`-byte pieces (`json::Window`), re-encoded per piece, never held whole.
    Windowed,
    /// The host's way (`Provider::body`): a `String` that starts at 4 KiB and grows, kept until the
    /// reply is in so a retry can resend it.
    Host,
    /// The host's way sized first: a `json::Counter` pass, then a `String` of exactly that size.
    Counted,
}

impl BodyMode {
    pub fn describe(self) -> &'static str {
        match self {
            BodyMode::Windowed => "body sent in 2 KiB json::Window pieces, never held whole (the chip's driver)",
            BodyMode::Host => "body held in a growing String for retries (the host's Provider::body)",
            BodyMode::Counted => "body held in a String sized with json::Counter first",
        }
    }
}

/// Everything a turn reads and does not change.
pub struct Fixture {
    pub format: Format,
    pub registry: Registry,
    pub tool_call: Vec<u8>,
    pub text: Vec<u8>,
    pub body: BodyMode,
}

impl Fixture {
    pub fn new(format: Format, registry: Registry) -> Fixture {
        Fixture {
            format,
            registry,
            tool_call: tool_call_stream(format),
            text: text_stream(format),
            body: BodyMode::Host,
        }
    }
}

fn encode<S: Sink + ?Sized>(format: Format, req: &Request<'_>, sink: &mut S) {
    match format {
        Format::Anthropic => anthropic::write_request(req, sink),
        Format::OpenAi => openai::write_request(req, sink),
    }
}

/// Points inside a turn where the heap benchmark looks at the allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `AgentRun::new` has taken the history and the person's message.
    Started,
    /// A request body is encoded (and, as in `Provider::complete`, is held until the reply is in).
    Encoded {
        round: usize,
        body_len: usize,
        body_capacity: usize,
    },
    /// The reply is decoded; the body and tool list are still alive.
    Decoded {
        round: usize,
    },
    /// The reply is in the run; body and tool list dropped.
    Handled {
        round: usize,
    },
    /// The tool results are in the run.
    ToolsDone,
    Done,
}

fn decode(format: Format, bytes: &[u8]) -> Reply {
    // The driver shows text as it arrives; here it only has to be looked at.
    let mut on_update = |u: Update<'_>| {
        std::hint::black_box(u);
    };
    match format {
        Format::Anthropic => {
            let mut d = anthropic::StreamDecoder::new(stream::Limits::default());
            for c in bytes.chunks(CHUNK) {
                d.handle_bytes(c, &mut on_update).expect("valid stream");
            }
            d.finish().expect("complete stream")
        }
        Format::OpenAi => {
            let mut d = openai::StreamDecoder::new(stream::Limits::default());
            for c in bytes.chunks(CHUNK) {
                d.handle_bytes(c, &mut on_update).expect("valid stream");
            }
            d.finish().expect("complete stream")
        }
    }
}

/// One turn: round 1 answers with a tool call, the no-op tool runs, round 2 answers in text.
/// Mirrors `run_turn` in `crates/chela-runtime/src/turn.rs` without the IO. Returns the finished run.
pub fn turn(fx: &Fixture, history: Vec<Message>, system: String, probe: &mut dyn FnMut(Probe)) -> AgentRun {
    let user = Message::user_text("what time is it in Paris? and when do I have to leave for my train?");
    let mut run = AgentRun::new(history, user, system, Limits::default());
    probe(Probe::Started);
    let mut round = 0;
    loop {
        match run.next_step() {
            Step::Done(_) => {
                probe(Probe::Done);
                return run;
            }
            Step::CallModel(call) => {
                let tools = fx.registry.tools_for(Scope::default());
                let req = Request {
                    model: fx.format.model(),
                    max_tokens: 4096,
                    system: call.system,
                    messages: call.messages,
                    tools: &tools,
                    tool_choice: call.tool_choice,
                    stream: true,
                    cache: call.cache,
                    format: call.format,
                };
                let (body, body_len) = match fx.body {
                    // As `Provider::body` does it.
                    BodyMode::Host => {
                        let mut body = String::with_capacity(4096);
                        encode(fx.format, &req, &mut body);
                        let len = body.len();
                        (body, len)
                    }
                    BodyMode::Counted => {
                        let mut n = Counter::default();
                        encode(fx.format, &req, &mut n);
                        let mut body = String::with_capacity(n.0);
                        encode(fx.format, &req, &mut body);
                        (body, n.0)
                    }
                    BodyMode::Windowed => {
                        let mut n = Counter::default();
                        encode(fx.format, &req, &mut n);
                        let mut piece = Vec::with_capacity(WINDOW);
                        let mut sent = 0;
                        while sent < n.0 {
                            encode(fx.format, &req, &mut Window::new(sent, WINDOW, &mut piece));
                            // socket.write_all(&piece).await on the chip.
                            std::hint::black_box(&piece);
                            sent += piece.len();
                        }
                        assert_eq!(sent, n.0, "the windows add up to the body");
                        (String::new(), sent)
                    }
                };
                probe(Probe::Encoded { round, body_len, body_capacity: body.capacity() });
                let reply = decode(fx.format, if round == 0 { &fx.tool_call } else { &fx.text });
                probe(Probe::Decoded { round });
                std::hint::black_box(&body);
                drop(body);
                drop(tools);
                run.handle_reply(reply).expect("in order");
                probe(Probe::Handled { round });
                round += 1;
            }
            Step::CallTools(calls) => {
                // As the driver does: run in order, record each result, then close the step.
                let calls = calls.to_vec();
                for call in &calls {
                    fx.registry.authorize(&call.name, Caller::Model, Scope::default()).expect("known tool");
                    run.record_tool_result(ToolResult::ok(call.id.clone(), TOOL_OUTPUT)).expect("in order");
                }
                run.handle_tool_results(Vec::new()).expect("in order");
                probe(Probe::ToolsDone);
            }
        }
    }
}

/// A turn plus the lines the driver appends to the session file afterwards.
pub fn turn_lines(fx: &Fixture, history: Vec<Message>, system: String) -> String {
    let run = turn(fx, history, system, &mut |_| {});
    session::encode_turn(run.turn_messages(), 1_796_037_920)
}

/// Checks that a turn went as scripted, so a benchmark never times a broken path.
pub fn check(run: &AgentRun) {
    let Step::Done(outcome) = run.next_step() else { panic!("the turn did not finish") };
    assert_eq!(outcome.iterations, 1, "one tool round");
    assert!(outcome.text.starts_with("It is 12:25 in Paris"), "{}", outcome.text);
    assert!(!outcome.hit_tool_limit && !outcome.cancelled);
}

/// The value at quantile `q` (0..=1) of sorted samples, nearest rank.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Iterations from `CHELA_BENCH_ITERS`, else `default`.
pub fn iterations(default: usize) -> usize {
    std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Size of the first request body for `history`, and how much of it the system prompt and the
/// tool definitions take (each measured by encoding without it).
pub fn body_split(format: Format, system: &str, history: &[Message], reg: &Registry) -> (usize, usize, usize) {
    let tools = reg.tools_for(Scope::default());
    let size = |system: &str, tools: &[chela_proto::chat::ToolSpec<'_>]| {
        let req = Request {
            model: format.model(),
            max_tokens: 4096,
            system,
            messages: history,
            tools,
            tool_choice: Default::default(),
            stream: true,
            cache: Default::default(),
            format: None,
        };
        let mut n = Counter::default();
        encode(format, &req, &mut n);
        n.0
    };
    let total = size(system, &tools);
    (total, total - size("", &tools), total - size(system, &[]))
}
