//! The shared turn driver on the host, over a scripted link: what the emulator turn does not
//! reach (retries, a link that breaks, garbage answers, the GPIO-style toolbox hook).

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;

use chela_chip::link::{Answer, BodyWriter, Link, LinkError};
use chela_chip::tools::Toolbox;
use chela_chip::turn::{self, Chip, Origin};
use chela_chip::{Board, boot};
use chela_core::console::ChipDefaults;
use chela_core::exchange::{Endpoint, Head, Kind, NetFailure};
use chela_core::flash::RamFlash;
use chela_proto::chat::ToolSpec;

const ANSWER: &[u8] = include_bytes!("../../qemu/fixtures/anthropic_answer.sse");
const STORE: &[u8] = include_bytes!("../../qemu/fixtures/anthropic_store.sse");
const DEFAULTS: ChipDefaults = ChipDefaults {
    wifi_ssid: "",
    wifi_password: "",
    tg_token: "",
    tg_allow: "42",
    provider: "anthropic",
    api_key: "sk-ant-test",
    model: "",
    base_url: "",
    tavily_key: "",
    brave_key: "",
    proxy: "",
    gateway_token: "",
};
const ORIGIN: Origin<'static> = Origin { channel: "telegram", chat_id: "42" };

#[derive(Clone, Default)]
struct TestBoard {
    ms: Rc<Cell<u64>>,
    /// What the driver said on the console, a line each.
    said: Rc<RefCell<Vec<String>>>,
}

impl Board for TestBoard {
    fn now_ms(&self) -> u64 {
        self.ms.get()
    }
    fn unix(&self) -> Option<u64> {
        Some(1_796_037_920 + self.ms.get() / 1000)
    }
    fn print(&self, a: fmt::Arguments<'_>) {
        self.said.borrow_mut().push(a.to_string());
    }
}

/// What the scripted peer does for one `POST`.
enum Step {
    /// Fails before any answer.
    Fail(LinkError),
    /// Answers with this status, headers and body, in 100-byte pieces.
    Answer(u16, &'static [(&'static str, &'static str)], &'static [u8]),
}

struct Scripted {
    steps: Vec<Step>,
    clock: TestBoard,
    bodies: Vec<String>,
    waits: Vec<u64>,
}

impl Link for Scripted {
    async fn post(
        &mut self,
        head: &Head,
        length: usize,
        body: &mut BodyWriter<'_>,
        answer: &mut dyn Answer,
    ) -> Result<(), LinkError> {
        assert_eq!(head.url, "https://api.anthropic.com/v1/messages");
        let mut sent = Vec::new();
        let mut buf = Vec::new();
        while sent.len() < length {
            buf.clear();
            body(sent.len(), &mut buf);
            assert!(!buf.is_empty() && buf.len() <= turn::WINDOW, "windows of at most {} bytes", turn::WINDOW);
            sent.extend_from_slice(&buf);
        }
        assert_eq!(sent.len(), length, "the body is exactly its Content-Length");
        self.bodies.push(String::from_utf8(sent).unwrap());
        assert!(!self.steps.is_empty(), "a model call the script does not have");
        match self.steps.remove(0) {
            Step::Fail(e) => Err(e),
            Step::Answer(status, headers, bytes) => {
                self.clock.ms.set(self.clock.ms.get() + 200);
                answer.head(status, headers);
                for piece in bytes.chunks(100) {
                    if !answer.body(piece) {
                        return Ok(());
                    }
                }
                answer.end();
                Ok(())
            }
        }
    }

    async fn get(&mut self, head: &Head, _: &mut dyn Answer) -> Result<(), LinkError> {
        panic!("these scripts make no GET (asked for {})", head.url)
    }

    async fn wait_until(&mut self, ms: u64) -> Result<(), LinkError> {
        assert!(ms >= self.clock.ms.get(), "a wait into the past");
        self.waits.push(ms);
        self.clock.ms.set(ms);
        Ok(())
    }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the scripted link never waits"),
    }
}

fn endpoint() -> Endpoint {
    Endpoint {
        kind: Kind::Anthropic,
        base_url: "https://api.anthropic.com".into(),
        api_key: "sk-ant-test".into(),
        model: "claude-sonnet-4-5".into(),
        max_tokens: 1024,
        stream: true,
    }
}

fn chip() -> (Chip<RamFlash, TestBoard>, TestBoard) {
    let board = TestBoard::default();
    let chip = boot::power_on(RamFlash::new(4096, 8), board.clone(), 7, DEFAULTS).unwrap();
    (chip, board)
}

const SSE: &[(&str, &str)] = &[("content-type", "text/event-stream")];

fn run(steps: Vec<Step>, user: &str) -> (Result<turn::Turn, String>, Scripted, Chip<RamFlash, TestBoard>) {
    let (mut chip, board) = chip();
    let mut link = Scripted { steps, clock: board, bodies: Vec::new(), waits: Vec::new() };
    let t = block_on(turn::run(&mut chip, &endpoint(), &mut link, &mut (), ORIGIN, Vec::new(), user));
    (t, link, chip)
}

#[test]
fn a_dropped_connection_is_retried_after_the_backoff() {
    let steps =
        vec![Step::Fail(LinkError::Net(NetFailure::Transient("reset by peer".into()))), Step::Answer(200, SSE, ANSWER)];
    let (t, link, _) = run(steps, "hello");
    let t = t.unwrap();
    assert!(!t.aborted);
    assert_eq!(t.model_calls, 1);
    assert_eq!(link.bodies.len(), 2, "the same request twice");
    assert_eq!(link.bodies[0], link.bodies[1]);
    assert_eq!(link.waits.len(), 1);
    assert!(link.waits[0] > 0, "it waited before retrying");
    assert!(t.text.starts_with("Saved"), "{}", t.text);
}

#[test]
fn a_429_waits_as_long_as_retry_after_says() {
    let steps = vec![
        Step::Answer(
            429,
            &[("content-type", "application/json"), ("retry-after", "7")],
            br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        ),
        Step::Answer(200, SSE, ANSWER),
    ];
    let (t, link, chip) = run(steps, "hello");
    assert!(!t.unwrap().aborted);
    assert_eq!(link.waits, vec![200 + 7000]);
    // The retry's note gives the reason in words (its Display), not a derived Debug, which an
    // image built with `-Z fmt-debug=shallow` would cut to the variant's name.
    let said = chip.board.said.borrow();
    let note = said.iter().find(|l| l.starts_with("[model] retry")).expect("a retry note");
    assert!(note.ends_with("ms: rate limited (HTTP 429)"), "{note}");
}

#[test]
fn an_unreachable_host_ends_the_turn_with_a_note_not_an_error() {
    let (t, link, _) = run(vec![Step::Fail(LinkError::Net(NetFailure::Unreachable("no DNS".into())))], "hello");
    let t = t.unwrap();
    assert!(t.aborted);
    assert!(t.text.starts_with("(this turn stopped:"), "{}", t.text);
    assert!(link.waits.is_empty());
    assert_eq!(t.messages.len(), 2, "the person's message and the note: a well-formed exchange");
}

#[test]
fn garbage_from_the_provider_ends_the_turn_with_a_note() {
    let (t, _, _) = run(vec![Step::Answer(200, SSE, b"data: {not json\n\n\x00\xff\xfe garbage")], "hello");
    let t = t.unwrap();
    assert!(t.aborted, "{}", t.text);
}

#[test]
fn a_broken_link_fails_the_run() {
    let (t, _, _) = run(vec![Step::Fail(LinkError::Broken("the peer saw the wrong request".into()))], "hi");
    assert_eq!(t.unwrap_err(), "the peer saw the wrong request");
}

/// A toolbox tool the model does not call, offered beside memory: its spec goes out, and the
/// memory tool the model does call still runs and persists through the flash store.
struct Extra;

impl<F: chela_core::flash::Flash, B: Board> Toolbox<F, B> for Extra {
    fn specs(&self) -> &[ToolSpec<'static>] {
        &[ToolSpec { name: "gpio_write", description: "Drive a pin.", input_schema: r#"{"type":"object"}"# }]
    }
    fn guidance(&self) -> &str {
        " GPIO pins you may use: [5]."
    }
    fn run(&mut self, _: &mut Chip<F, B>, _: &str, _: &str) -> Option<Result<String, String>> {
        panic!("not called")
    }
}

#[test]
fn toolbox_tools_are_offered_and_memory_tools_persist() {
    let (mut chip, board) = chip();
    let steps = vec![Step::Answer(200, SSE, STORE), Step::Answer(200, SSE, ANSWER)];
    let mut link = Scripted { steps, clock: board.clone(), bodies: Vec::new(), waits: Vec::new() };
    let t = block_on(turn::run(&mut chip, &endpoint(), &mut link, &mut Extra, ORIGIN, Vec::new(), "remember it"));
    let t = t.unwrap();
    assert_eq!((t.model_calls, t.tool_calls), (2, 1));
    for name in ["memory_store", "memory_recall", "get_current_time", "gpio_write"] {
        let want = format!(r#""name":"{name}""#);
        assert!(link.bodies[0].contains(&want), "{name} is not offered");
    }
    assert!(link.bodies[0].contains("GPIO pins you may use: [5]."));
    assert!(link.bodies[0].contains("telegram"));
    boot::persist(&mut chip, "tg_42", &t).unwrap();
    let (flash, board, seed) = boot::power_off(chip);
    let chip = boot::power_on(flash, board, seed, DEFAULTS).unwrap();
    assert!(chip.entries.get("m1").is_some(), "the stored entry came back from flash");
    let (history, skipped) = boot::history(&chip, "tg_42").unwrap();
    assert_eq!((history.len(), skipped), (4, 0));
}

#[test]
fn memory_written_on_the_console_reaches_the_next_prompt() {
    let (mut chip, board) = chip();
    let mut link = Scripted {
        steps: vec![Step::Answer(200, SSE, ANSWER)],
        clock: board.clone(),
        bodies: Vec::new(),
        waits: Vec::new(),
    };
    block_on(turn::run(&mut chip, &endpoint(), &mut link, &mut (), ORIGIN, Vec::new(), "hi")).unwrap();
    assert!(!link.bodies[0].contains("The workshop is in the garage."));
    let mut con = chela_core::console::Console::new();
    let effects = chela_chip::console::feed(
        &mut chip,
        &mut con,
        b"memory_write \"# Memory\\n- The workshop is in the garage.\"\n",
        Default::default(),
    );
    assert_eq!(effects, [chela_core::console::Effect::MemoryChanged]);
    link.steps.push(Step::Answer(200, SSE, ANSWER));
    block_on(turn::run(&mut chip, &endpoint(), &mut link, &mut (), ORIGIN, Vec::new(), "hi")).unwrap();
    assert!(link.bodies[1].contains("The workshop is in the garage."), "{}", &link.bodies[1][..600]);
}
