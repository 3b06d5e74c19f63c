//! The chip's turn driver: `chela-core`'s [`AgentRun`] stepped to the end, each model call made
//! through the core's [`Exchange`] over the board's [`Link`], the request body written in fixed
//! windows ([`Window`]) and the answer fed to the proto stream decoder as it arrives, the tool
//! calls run by [`tools`](crate::tools).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use chela_core::agent::{AgentRun, Limits, ModelCall, Step, ToolCall, ToolResult};
use chela_core::console::{BootGuard, ChipConfig, MEMORY_FILE};
use chela_core::exchange::{Context, Endpoint, Exchange, ModelError, Options, Outcome};
use chela_core::flash::{self, Flash, FlashStore, Order};
use chela_core::memory::{self, Entries};
use chela_core::prompt;
use chela_proto::chat::{Message, Reply, ToolSpec, Update, Usage};
use chela_proto::json::{Counter, Window};

use crate::link::{Answer, Link, LinkError};
use crate::search;
use crate::tools::{self, Toolbox};
use crate::{Board, say};

/// Bytes of request body encoded and sent at a time: the chip's socket write buffer.
pub const WINDOW: usize = 512;

/// Answer bytes echoed on the console per model call.
const MAX_ECHO: usize = 512;

/// History bytes a turn sends to the model (and loads from flash).
pub const HISTORY_BYTES: usize = 16 * 1024;

/// What the chip keeps between turns.
pub struct Chip<F: Flash, B: Board> {
    /// The flash partition, through the core's record store.
    pub store: FlashStore<F>,
    /// The memory entries, loaded from `store` at boot and written back on every change.
    pub entries: Entries,
    pub board: B,
    /// Seeds the retry jitter (from the board's RNG).
    pub seed: u64,
    /// Response bytes the last model call read.
    pub last_answer_bytes: usize,
    /// The settings in force: the build's, overridden by those set over the console.
    pub config: ChipConfig,
    /// The boot counter; its mode says whether channels may start.
    pub guard: BootGuard,
}

/// Where the turn comes from, for the system prompt.
#[derive(Clone, Copy, Debug)]
pub struct Origin<'a> {
    pub channel: &'a str,
    pub chat_id: &'a str,
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

/// Runs one turn to its end. `history` is the session as loaded. An `Err` is a broken link or
/// core invariant; a failing model call ends the turn with a short note instead (`aborted`).
pub async fn run<F: Flash, B: Board, L: Link, X: Toolbox<F, B>>(
    chip: &mut Chip<F, B>,
    endpoint: &Endpoint,
    link: &mut L,
    toolbox: &mut X,
    origin: Origin<'_>,
    history: Vec<Message>,
    user: &str,
) -> Result<Turn, String> {
    drive(chip, endpoint, link, toolbox, &mut search::Off, origin, history, user).await
}

/// [`run`], with `web_search` over `link` offered when a search key is set ([`search`]). A
/// firmware links it only through here: the ESP32 image does not have the room for it yet.
pub async fn run_searching<F: Flash, B: Board, L: Link, X: Toolbox<F, B>>(
    chip: &mut Chip<F, B>,
    endpoint: &Endpoint,
    link: &mut L,
    toolbox: &mut X,
    origin: Origin<'_>,
    history: Vec<Message>,
    user: &str,
) -> Result<Turn, String> {
    drive(chip, endpoint, link, toolbox, &mut search::Web, origin, history, user).await
}

#[allow(clippy::too_many_arguments)] // the two entry points above name them all
async fn drive<F: Flash, B: Board, L: Link, X: Toolbox<F, B>, S: search::Search<L>>(
    chip: &mut Chip<F, B>,
    endpoint: &Endpoint,
    link: &mut L,
    toolbox: &mut X,
    searcher: &mut S,
    origin: Origin<'_>,
    history: Vec<Message>,
    user: &str,
) -> Result<Turn, String> {
    let system = system_prompt(chip, toolbox, origin);
    let limits = Limits { history_budget: HISTORY_BYTES, max_tool_output: 4 * 1024, ..Limits::default() };
    let mut run = AgentRun::new(history, Message::user_text(user), system, limits);
    let searching: &[ToolSpec<'static>] = if searcher.offered(&chip.config) { &search::SPECS } else { &[] };
    let specs: Vec<ToolSpec<'static>> =
        tools::MEMORY.iter().chain([&tools::TIME]).chain(toolbox.specs()).chain(searching).copied().collect();
    let (mut model_calls, mut tool_calls) = (0u32, 0u32);
    loop {
        // Each arm ends the borrow of `run` that `next_step` took before feeding it.
        let results = match run.next_step() {
            Step::CallModel(call) => {
                model_calls += 1;
                match call_model(chip, endpoint, link, &specs, &call).await? {
                    Ok(reply) => run.handle_reply(reply).map_err(|e| e.to_string())?,
                    // What the host does too: the turn ends with a short reply saying why,
                    // and what is persisted stays well-formed.
                    Err(e) => {
                        let ctx = Context { who: endpoint.base_url.as_str(), model: &endpoint.model, key_fix: "" };
                        // The chip keeps the person's message and the note even when no tool
                        // ran: the exchange shows in the history the console prints.
                        run.fail(&format!("(this turn stopped: {})", e.explain(&ctx)));
                    }
                }
                continue;
            }
            Step::CallTools(calls) => {
                tool_calls += calls.len() as u32;
                let mut results = Vec::with_capacity(calls.len());
                for c in calls.iter() {
                    // The one tool that needs the network: it runs over the turn's link.
                    results.push(if !searching.is_empty() && c.name == search::SPECS[0].name {
                        web_search(chip, link, searcher, c).await
                    } else {
                        tools::run(chip, toolbox, c)
                    });
                }
                results
            }
            Step::Done(outcome) => {
                if outcome.cancelled || outcome.hit_tool_limit {
                    return Err(format!("the turn ended early: {}", outcome.text));
                }
                let text = outcome.text.clone();
                let aborted = outcome.aborted;
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

/// Runs a `web_search` call over `link`, logged on the console as the other tools are.
async fn web_search<F: Flash, B: Board, L: Link, S: search::Search<L>>(
    chip: &Chip<F, B>,
    link: &mut L,
    searcher: &mut S,
    call: &ToolCall,
) -> ToolResult {
    say!(&chip.board, "[tool] web_search {}", call.input.as_str());
    match searcher.run(&chip.config, link, call.input.as_str()).await {
        Ok(text) => {
            say!(&chip.board, "[tool] -> {} bytes of results", text.len());
            ToolResult::ok(call.id.clone(), text)
        }
        Err(e) => {
            say!(&chip.board, "[tool] failed: {e}");
            ToolResult::error(call.id.clone(), e)
        }
    }
}

/// `MEMORY.md` as the serial console's `memory_write` left it in flash, read up to the prompt's
/// bound; `None` when it was never written (or is unreadable: the default stands in).
fn memory_file<F: Flash, B: Board>(chip: &Chip<F, B>) -> Option<String> {
    let bound = prompt::Bounds::default().memory;
    let mut content = Vec::new();
    chip.store
        .read(MEMORY_FILE, Order::OldestFirst, &mut |r| {
            if r.kind == flash::Kind::Replace {
                content.clear();
            }
            if content.len() <= bound {
                content.extend_from_slice(r.payload);
            }
            core::ops::ControlFlow::Continue(())
        })
        .ok()?;
    let text = String::from_utf8_lossy(&content);
    (!text.trim().is_empty()).then(|| chela_core::text::truncate_visibly(&text, bound).into_owned())
}

/// The system prompt from the default memory files, `MEMORY.md` from flash and the remembered
/// entries.
fn system_prompt<F: Flash, B: Board, X: Toolbox<F, B>>(chip: &Chip<F, B>, toolbox: &X, origin: Origin<'_>) -> String {
    let entries = chip.entries.render(prompt::Bounds::default().entries);
    let (local_time, weekday) = match chip.board.unix() {
        Some(secs) => crate::time::utc(secs),
        None => ("unknown (the clock is not set yet)".into(), "unknown"),
    };
    let guidance = format!(
        "Save what the user asks you to remember with memory_store; look it up with memory_recall.{}",
        toolbox.guidance()
    );
    let written = memory_file(chip);
    let inputs = prompt::Inputs {
        soul: memory::SOUL_DEFAULT,
        agents: memory::AGENTS_DEFAULT,
        user: memory::USER_DEFAULT,
        memory: written.as_deref().unwrap_or(memory::MEMORY_DEFAULT),
        entries: &entries,
        daily: "",
        tool_guidance: &guidance,
        context: prompt::TurnContext {
            channel: origin.channel,
            chat_id: origin.chat_id,
            local_time: &local_time,
            weekday,
            timezone: "UTC",
        },
    };
    prompt::build(&inputs, &prompt::Bounds::default())
}

/// Feeds the response to the exchange as it arrives and echoes the text on the console.
struct Feed<'a, B: Board> {
    ex: &'a mut Exchange,
    board: &'a B,
    echoed: usize,
    /// Response body bytes received.
    bytes: usize,
}

impl<B: Board> Feed<'_, B> {
    fn shown<'b>(board: &'b B, echoed: &'b mut usize) -> impl FnMut(Update<'_>) + 'b {
        move |u| {
            if let Update::Text(t) = u {
                if *echoed < MAX_ECHO {
                    board.print(format_args!("{}", chela_core::text::prefix(t, MAX_ECHO - *echoed)));
                }
                *echoed += t.len();
            }
        }
    }
}

impl<B: Board> Answer for Feed<'_, B> {
    fn head(&mut self, status: u16, headers: &[(&str, &str)]) {
        self.ex.handle_head(status, headers, self.board.now_ms());
    }

    fn body(&mut self, bytes: &[u8]) -> bool {
        self.bytes += bytes.len();
        let now = self.board.now_ms();
        self.ex.handle_body(bytes, now, &mut Self::shown(self.board, &mut self.echoed));
        self.ex.wants_input()
    }

    fn end(&mut self) {
        let now = self.board.now_ms();
        self.ex.handle_end(now, &mut Self::shown(self.board, &mut self.echoed));
    }
}

/// One model call through the core's exchange: send, stream the answer in, take the reply;
/// retried as the exchange decides. The outer error is a broken link (the run fails); the
/// inner one is the model call failing as the core judged it (the turn ends with a note).
async fn call_model<F: Flash, B: Board, L: Link>(
    chip: &mut Chip<F, B>,
    endpoint: &Endpoint,
    link: &mut L,
    specs: &[ToolSpec<'_>],
    call: &ModelCall<'_>,
) -> Result<Result<Reply, ModelError>, String> {
    let mut ex = Exchange::new(endpoint.clone(), Options::CHIP, chip.board.now_ms(), chip.seed);
    chip.seed = chip.seed.wrapping_add(1);
    loop {
        ex.start(chip.board.now_ms());
        if !ex.wants_input() {
            return Err("the exchange did not start".into());
        }
        // Two passes: count for the Content-Length, then encode again window by window
        // straight onto the socket; the body is never held whole.
        let mut length = Counter::default();
        endpoint.write_body(call, specs, &mut length);
        let mut write =
            |from: usize, buf: &mut Vec<u8>| endpoint.write_body(call, specs, &mut Window::new(from, WINDOW, buf));
        let mut feed = Feed { ex: &mut ex, board: &chip.board, echoed: 0, bytes: 0 };
        let sent = link.post(&ex_head(endpoint), length.0, &mut write, &mut feed).await;
        let (echoed, bytes) = (feed.echoed, feed.bytes);
        if echoed > MAX_ECHO {
            chip.board.print(format_args!(" [... {} more bytes]", echoed - MAX_ECHO));
        }
        chip.board.print(format_args!("\n"));
        chip.last_answer_bytes = bytes;
        match sent {
            Ok(()) => {}
            Err(LinkError::Net(failure)) => ex.handle_net_error(failure, chip.board.now_ms()),
            Err(LinkError::Broken(why)) => return Err(why),
        }
        if ex.wants_input() {
            // The link stopped before the answer was over and said nothing: the body ended.
            let now = chip.board.now_ms();
            ex.handle_end(now, &mut |_| {});
        }
        match ex.poll_outcome() {
            Some(Outcome::Reply(reply)) => return Ok(Ok(reply)),
            Some(Outcome::Failed(e)) => {
                say!(&chip.board, "[model] failed after {bytes} response bytes: {e}");
                return Ok(Err(e));
            }
            Some(Outcome::RetryAt(t)) => {
                let why = ex.last_failure().map(|e| e.to_string()).unwrap_or_default();
                say!(&chip.board, "[model] retry {} at {t} ms: {why}", ex.retries());
                link.wait_until(t).await.map_err(|e| e.to_string())?;
            }
            None => return Err("the model call did not finish".into()),
        }
    }
}

/// The request head (the exchange builds the same one; this keeps the key out of a copy).
fn ex_head(endpoint: &Endpoint) -> chela_core::exchange::Head {
    endpoint.head()
}
