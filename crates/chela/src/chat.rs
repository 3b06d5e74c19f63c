//! `chela chat`: the terminal channel.
//!
//! Interactive: a prompt, answers streamed as they arrive, each tool call shown as it runs,
//! and slash commands (`/help` lists them) that never reach the model. One-shot (`-m`): the
//! reply alone on stdout, everything else on stderr, a non-zero exit on failure. Ctrl-C during
//! a turn cancels the turn; at a terminal's prompt it clears the line, and on an empty line
//! says how to leave (Ctrl-D, `/quit`). While the model is silent a "thinking…" shows on
//! stderr when it is a terminal, and each retry is announced with its wait.
//!
//! The turns go through the session's owner ([`SessionHub`]), as every channel's do.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use chela_core::agent::{ToolCall, ToolResult};
use chela_core::cap::Caller;
use chela_proto::chat::Message;
use tokio::sync::watch;

use crate::app::App;
use crate::args::{ChatArgs, check_message};
use crate::session::{HubLimits, SessionHub};
use crate::turn::{Cancel, FileWork, Observer, TurnEnd, TurnRequest};

mod input;

use input::{Input, Line};

/// The channel name in session file names: `sessions/cli_<session>.jsonl`.
pub const CHANNEL: &str = "cli";

/// Exit status for a message refused before sending, as for other command-line mistakes.
const EXIT_USAGE: u8 = 2;

/// Exit status when a one-shot turn is cancelled with Ctrl-C, as shells report SIGINT.
const EXIT_INTERRUPTED: u8 = 130;

pub async fn run(app: App, args: ChatArgs) -> Result<ExitCode> {
    // Read and check the message first: a refused one changes nothing and sends nothing.
    let message = match args.message.map(read_message).transpose() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("chela: {e}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let app = Arc::new(app);
    let mut chat = Chat {
        // One conversation on a current-thread runtime: its file work runs inline (see FileWork).
        hub: SessionHub::new(
            Arc::clone(&app),
            HubLimits { files: FileWork::Inline, ..HubLimits::from_config(&app.base.cfg) },
        ),
        app,
        session: args.session,
    };
    if args.new {
        chat.restart().await?;
    }
    let mut ctrl_c = CtrlC::install()?;
    match message {
        Some(m) => one_shot(&chat, m, &mut ctrl_c).await,
        None => interactive(&mut chat, &mut ctrl_c).await,
    }
}

/// The terminal's one conversation.
struct Chat {
    app: Arc<App>,
    hub: SessionHub,
    session: String,
}

impl Chat {
    /// Runs one turn through the session's owner; Ctrl-C meanwhile cancels it.
    async fn turn(&self, message: String, term: &SharedTerminal, ctrl_c: &mut CtrlC) -> Result<TurnEnd> {
        let cancel = Cancel::default();
        let pending = self.hub.submit(TurnRequest {
            channel: CHANNEL.to_owned(),
            chat_id: self.session.clone(),
            user: Message::user_text(message),
            scope: Vec::new(),
            caller: Caller::Manual,
            depth: 0,
            cancel: cancel.clone(),
            observer: Box::new(term.clone()),
            client: None,
        })?;
        term.lock().thinking();
        let done = pending.finish();
        tokio::pin!(done);
        loop {
            tokio::select! {
                end = &mut done => return end,
                () = ctrl_c.interrupted() => cancel.cancel(),
            }
        }
    }

    async fn restart(&self) -> Result<()> {
        self.hub.restart(CHANNEL, &self.session)?.finish().await
    }

    fn path(&self) -> PathBuf {
        self.app.base.ws.session_path(CHANNEL, &self.session)
    }

    /// Answers the rest of this chat with `model`; the configuration file is left as it is.
    fn switch_model(&mut self, model: &str) -> Result<(), String> {
        check_model_name(model)?;
        // The same workspace, tools and settings; only the provider's model differs.
        let mut app = self.app.with_config(Arc::clone(&self.app.base.cfg)).map_err(|e| format!("{e:#}"))?;
        app.provider = self.app.provider.with_model(model);
        let app = Arc::new(app);
        self.hub.set_app(Some(Arc::clone(&app)));
        self.app = app;
        Ok(())
    }
}

/// The longest model name `/model NAME` takes; vendors' names are far shorter.
const MAX_MODEL_NAME: usize = 200;

/// A model name goes into every request's JSON and onto the screen: one printable word.
fn check_model_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_MODEL_NAME {
        return Err(format!("a model name is at most {MAX_MODEL_NAME} bytes"));
    }
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a model name is one word without spaces or control characters".to_owned());
    }
    Ok(())
}

/// The most `-m -` reads from stdin.
const MAX_STDIN_MESSAGE: u64 = 1024 * 1024;

/// The message of `-m`: the argument itself, or for `-m -` all of stdin without its final
/// newline (the one `echo` and editors add). Empty messages are refused.
fn read_message(m: String) -> Result<String> {
    if m != "-" {
        check_message(&m)?;
        return Ok(m);
    }
    let mut s = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(std::io::stdin(), MAX_STDIN_MESSAGE + 1), &mut s)
        .context("cannot read the message from stdin (it must be UTF-8 text)")?;
    if s.len() as u64 > MAX_STDIN_MESSAGE {
        anyhow::bail!("the message on stdin is over {} KiB; send a shorter one", MAX_STDIN_MESSAGE / 1024);
    }
    let s = strip_final_newline(s);
    check_message(&s)?;
    Ok(s)
}

/// Drops one final `\n` or `\r\n`, no more: blank lines the person typed at the end stay.
fn strip_final_newline(mut s: String) -> String {
    if s.ends_with("\r\n") {
        s.truncate(s.len() - 2);
    } else if s.ends_with('\n') {
        s.pop();
    }
    s
}

async fn one_shot(chat: &Chat, message: String, ctrl_c: &mut CtrlC) -> Result<ExitCode> {
    let live = std::io::stdout().is_terminal();
    let shared = SharedTerminal::new(live);
    let end = chat.turn(message, &shared, ctrl_c).await?;
    let mut term = shared.lock();
    match end {
        TurnEnd::Done(o) if o.cancelled => {
            term.end_line();
            eprintln!("cancelled");
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        TurnEnd::Done(o) => {
            if live {
                term.end_line();
            } else {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", o.text)?;
                out.flush()?;
            }
            if o.hit_tool_limit {
                eprintln!("note: the tool budget (agent.max_iterations) ran out before the model finished");
            }
            Ok(ExitCode::SUCCESS)
        }
        TurnEnd::Failed(e) => {
            term.end_line();
            eprintln!("chela: {}", chat.app.explain(&e));
            Ok(ExitCode::FAILURE)
        }
    }
}

async fn interactive(chat: &mut Chat, ctrl_c: &mut CtrlC) -> Result<ExitCode> {
    let path = chat.path();
    let mut input = Input::open(chat.app.base.ws.root());
    let color = color_enabled();
    eprintln!(
        "Chela {} — {} · model {} · session {}. /help lists the commands; Ctrl-D or /quit leaves.",
        env!("CARGO_PKG_VERSION"),
        chat.app.provider.describe(),
        chat.app.provider.model,
        path.display()
    );
    loop {
        ctrl_c.reset();
        let line = tokio::select! {
            l = input.next(if color { "\x1b[1m› \x1b[0m" } else { "› " }) => l,
            // A signal reaches the prompt only when no line editor reads the keys (a pipe).
            () = ctrl_c.interrupted() => Line::End,
        };
        let line = match line {
            Line::Text(line) => line,
            Line::Interrupted => {
                eprintln!("(to leave, press Ctrl-D or type /quit)");
                continue;
            }
            Line::Cleared => continue,
            Line::End => {
                eprintln!();
                return Ok(ExitCode::SUCCESS);
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(command) = slash_command(line) {
            match command {
                Slash::Quit => return Ok(ExitCode::SUCCESS),
                Slash::New => {
                    chat.restart().await?;
                    eprintln!("Started a new session; the old one is in {}.", path.with_file_name("archive").display());
                }
                Slash::Help => eprintln!("{SLASH_HELP}"),
                Slash::Model(None) => eprintln!(
                    "model {} · {}. `/model NAME` switches this chat to another; `chela config set llm.model NAME` \
                     changes it for good (from the next chat on).",
                    chat.app.provider.model,
                    chat.app.provider.describe()
                ),
                Slash::Model(Some(name)) => match chat.switch_model(name) {
                    Ok(()) => eprintln!(
                        "model {name} from now on in this chat only (not saved; `chela config set llm.model {name}` \
                         keeps it)."
                    ),
                    Err(why) => eprintln!("model unchanged: {why}."),
                },
                Slash::Session => eprintln!(
                    "session {} · {}. `chela chat --session NAME` opens another; /new starts this one over.",
                    chat.session,
                    path.display()
                ),
                Slash::Usage => {
                    // This conversation only: `chela usage` sums the others.
                    let filter = chela_runtime::usage::Filter {
                        session: Some(format!("{CHANNEL}:{}", chat.session)),
                        since: None,
                    };
                    match chela_runtime::usage::Report::gather(&chat.app.base.ws, &chat.app.base.cfg, &filter) {
                        Ok(r) => eprintln!("this session: {}", chela_runtime::usage::describe(&r.all)),
                        Err(e) => eprintln!("the usage log could not be read: {e}"),
                    }
                }
                Slash::Unknown(name) => {
                    eprintln!("unknown command /{name}; nothing was sent. /help lists the commands.")
                }
            }
            continue;
        }
        let shared = SharedTerminal::new(true);
        ctrl_c.reset();
        let end = chat.turn(line.to_owned(), &shared, ctrl_c).await?;
        let mut term = shared.lock();
        match end {
            TurnEnd::Done(o) if o.cancelled => {
                term.end_line();
                eprintln!("{}", term.dim("(turn cancelled)"));
            }
            TurnEnd::Done(_) => term.end_line(),
            TurnEnd::Failed(e) => {
                term.end_line();
                eprintln!("{}", chat.app.explain(&e));
            }
        }
    }
}

/// What `/help` prints.
const SLASH_HELP: &str = "\
/help      this list
/new       start a fresh conversation (the old one is archived)
/model     the model and provider answering; /model NAME switches this chat to NAME (not saved)
/session   this conversation's name and file
/usage     tokens this conversation used, and their estimated cost
/quit      leave (also /exit, or Ctrl-D)
Ctrl-C stops an answer; at the prompt it clears the line.";

/// A line the chat answers itself.
#[derive(Debug, PartialEq, Eq)]
enum Slash<'a> {
    Help,
    New,
    Usage,
    /// `/model`, or `/model NAME` to switch.
    Model(Option<&'a str>),
    Session,
    Quit,
    Unknown(&'a str),
}

/// The slash command `line` is, if it is one: `/word` alone, or `/model NAME`. A line that only
/// starts with a slash (`/etc/hosts is missing`, `/new please`) is a message.
fn slash_command(line: &str) -> Option<Slash<'_>> {
    let line = line.strip_prefix('/')?;
    if let Some(arg) = line.strip_prefix("model ") {
        let arg = arg.trim();
        return (!arg.is_empty() && !arg.contains(char::is_whitespace)).then_some(Slash::Model(Some(arg)));
    }
    let name = line;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return None;
    }
    Some(match name {
        "help" => Slash::Help,
        "new" => Slash::New,
        "model" => Slash::Model(None),
        "session" => Slash::Session,
        "usage" => Slash::Usage,
        "quit" | "exit" => Slash::Quit,
        other => Slash::Unknown(other),
    })
}

fn color_enabled() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Ctrl-C: every SIGINT bumps a counter the chat watches.
pub struct CtrlC {
    rx: watch::Receiver<u64>,
    /// The signal watcher: it ends with the chat, so no task outlives `chela chat`'s loop.
    _watcher: crate::tasks::TaskHandle,
}

impl CtrlC {
    pub fn install() -> Result<CtrlC> {
        CtrlC::on(tokio::signal::unix::SignalKind::interrupt())
    }

    /// Counts the signals of `kind` (a test watches one that nothing else sends).
    fn on(kind: tokio::signal::unix::SignalKind) -> Result<CtrlC> {
        let mut sig = tokio::signal::unix::signal(kind)?;
        let (tx, rx) = watch::channel(0u64);
        let watcher = crate::tasks::TaskHandle::spawn(async move {
            while sig.recv().await.is_some() {
                tx.send_modify(|n| *n += 1);
            }
        });
        Ok(CtrlC { rx, _watcher: watcher })
    }

    /// Forgets interrupts that came before now.
    fn reset(&mut self) {
        self.rx.mark_unchanged();
    }

    /// Resolves at the next Ctrl-C.
    async fn interrupted(&mut self) {
        if self.rx.changed().await.is_err() {
            // The signal task is gone; no interrupt can come.
            std::future::pending::<()>().await;
        }
    }
}

/// The terminal as the session's owner shows a turn on it, while the chat keeps a handle to
/// finish the line after the turn.
#[derive(Clone)]
struct SharedTerminal(Arc<Mutex<Terminal>>);

impl SharedTerminal {
    fn new(live: bool) -> SharedTerminal {
        SharedTerminal(Arc::new(Mutex::new(Terminal::new(live))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Terminal> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Observer for SharedTerminal {
    fn text(&mut self, text: &str) {
        self.lock().text(text);
    }

    fn reply_done(&mut self, tools_follow: bool) {
        self.lock().reply_done(tools_follow);
    }

    fn tool_started(&mut self, call: &ToolCall) {
        self.lock().tool_started(call);
    }

    fn tool_finished(&mut self, call: &ToolCall, result: &ToolResult, elapsed: Duration) {
        self.lock().tool_finished(call, result, elapsed);
    }

    fn retrying(&mut self, why: &str, wait: Duration) {
        self.lock().retrying(why, wait);
    }
}

/// Shows a turn in the terminal.
struct Terminal {
    /// Stream text to stdout as it arrives.
    live: bool,
    color: bool,
    /// Text of the current model reply.
    round: String,
    /// Whether stdout's cursor is at the start of a line.
    at_line_start: bool,
    /// stderr is a terminal: "thinking…" can be shown there and taken back.
    indicate: bool,
    /// "thinking…" is on the screen now.
    thinking: bool,
}

impl Terminal {
    fn new(live: bool) -> Terminal {
        Terminal {
            live,
            color: color_enabled(),
            round: String::new(),
            at_line_start: true,
            indicate: std::io::stderr().is_terminal(),
            thinking: false,
        }
    }

    /// Shows "thinking…" on stderr until the next text, tool or end: the model is working.
    fn thinking(&mut self) {
        if self.indicate && !self.thinking && self.at_line_start {
            eprint!("{}", self.dim("thinking…"));
            let _ = std::io::stderr().flush();
            self.thinking = true;
        }
    }

    /// Takes "thinking…" back off its line.
    fn done_thinking(&mut self) {
        if self.thinking {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
            self.thinking = false;
        }
    }

    fn retrying(&mut self, why: &str, wait: Duration) {
        self.done_thinking();
        self.end_line();
        let line = format!("{why}, retrying in {}", format_wait(wait));
        eprintln!("{}", self.dim(&line));
        self.thinking();
    }

    fn dim(&self, s: &str) -> String {
        if self.color { format!("\x1b[2m{s}\x1b[0m") } else { s.to_owned() }
    }

    fn end_line(&mut self) {
        self.done_thinking();
        if !self.at_line_start {
            outln!();
            self.at_line_start = true;
        }
        let _ = std::io::stdout().flush();
    }
}

impl Observer for Terminal {
    fn text(&mut self, text: &str) {
        self.done_thinking();
        self.round.push_str(text);
        if self.live {
            out!("{text}");
            let _ = std::io::stdout().flush();
            self.at_line_start = text.ends_with('\n');
        }
    }

    fn reply_done(&mut self, tools_follow: bool) {
        if tools_follow {
            if self.live {
                self.end_line();
            } else if !self.round.trim().is_empty() {
                // Narration before tool calls is not the reply: stderr keeps stdout clean.
                eprintln!("{}", self.dim(self.round.trim_end()));
            }
        }
        self.round.clear();
    }

    fn tool_started(&mut self, call: &ToolCall) {
        self.end_line();
        let args = short_args(call.input.as_str());
        eprint!("{}", self.dim(&format!("  ⚙ {} {args}", call.name)));
        let _ = std::io::stderr().flush();
    }

    fn tool_finished(&mut self, _call: &ToolCall, result: &ToolResult, elapsed: Duration) {
        let took = format_duration(elapsed);
        let line = if result.is_error {
            let first = result.content.lines().next().unwrap_or("");
            format!(" … error ({took}): {}", chela_core::text::prefix(first, 160))
        } else {
            format!(" … ok ({took})")
        };
        if self.color && result.is_error {
            eprintln!("\x1b[31m{line}\x1b[0m");
        } else {
            eprintln!("{}", self.dim(&line));
        }
        // The model reads the result and answers next.
        self.thinking();
    }
}

/// Tool arguments on one short line.
fn short_args(json: &str) -> String {
    let one_line: String = json.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if one_line.len() <= 80 {
        return one_line;
    }
    format!("{}…", chela_core::text::prefix(&one_line, 79))
}

/// A retry's wait as people say it: whole seconds from about one second up. The wait is measured
/// when it is shown, a few milliseconds after the exchange set it: a one-second Retry-After
/// reads "1 s", not "999 ms".
fn format_wait(d: Duration) -> String {
    if d >= Duration::from_millis(950) {
        format!("{} s", d.as_secs_f64().round())
    } else {
        format!("{} ms", d.as_millis())
    }
}

fn format_duration(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    } else if d < Duration::from_secs(10) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_signal_watcher_ends_with_its_ctrl_c() {
        let ctrl_c = CtrlC::on(tokio::signal::unix::SignalKind::user_defined2()).unwrap();
        let mut seen = ctrl_c.rx.clone();
        drop(ctrl_c);
        // The watcher holds the sender: the receiver sees it gone once the watcher ended. The
        // timeout only turns a regression into a failure instead of a hang.
        let changed = tokio::time::timeout(std::time::Duration::from_secs(10), seen.changed()).await;
        assert!(changed.expect("the watcher ended").is_err(), "no signal was counted, the sender is gone");
    }

    #[test]
    fn one_final_newline_is_dropped() {
        for (raw, want) in [
            ("hi\n", "hi"),
            ("hi\r\n", "hi"),
            ("hi", "hi"),
            ("hi\n\n", "hi\n"),
            ("hi\r\n\r\n", "hi\r\n"),
            ("\n", ""),
            ("a\nb\n", "a\nb"),
        ] {
            assert_eq!(strip_final_newline(raw.to_owned()), want, "{raw:?}");
        }
    }

    #[test]
    fn slash_commands_are_words_after_a_slash_and_paths_are_messages() {
        assert_eq!(slash_command("/help"), Some(Slash::Help));
        assert_eq!(slash_command("/exit"), Some(Slash::Quit));
        assert_eq!(slash_command("/quit"), Some(Slash::Quit));
        assert_eq!(slash_command("/model"), Some(Slash::Model(None)));
        assert_eq!(slash_command("/model claude-x-1"), Some(Slash::Model(Some("claude-x-1"))));
        assert_eq!(slash_command("/model  gpt-4o "), Some(Slash::Model(Some("gpt-4o"))));
        assert_eq!(slash_command("/model is the best one"), None, "more words are a message");
        assert_eq!(slash_command("/session"), Some(Slash::Session));
        assert_eq!(slash_command("/new"), Some(Slash::New));
        assert_eq!(slash_command("/usage"), Some(Slash::Usage));
        assert_eq!(slash_command("/foo"), Some(Slash::Unknown("foo")));
        for message in ["/etc/hosts is missing", "/ alone", "/", "hello /help", "/new please"] {
            assert_eq!(slash_command(message), None, "{message}");
        }
        for name in ["help", "new", "model", "session", "usage", "quit"] {
            assert!(SLASH_HELP.contains(&format!("/{name} ")), "/help lists /{name}");
        }
        assert_eq!(format_wait(Duration::from_millis(4000)), "4 s");
        assert_eq!(format_wait(Duration::from_millis(1600)), "2 s");
        assert_eq!(format_wait(Duration::from_millis(250)), "250 ms");
        assert_eq!(format_wait(Duration::from_millis(999)), "1 s");
    }

    #[test]
    fn a_model_name_is_one_bounded_printable_word() {
        assert!(check_model_name("claude-sonnet-4-5").is_ok());
        assert!(check_model_name("qwen2.5:7b").is_ok());
        assert!(check_model_name(&"m".repeat(MAX_MODEL_NAME)).is_ok());
        assert!(check_model_name(&"m".repeat(MAX_MODEL_NAME + 1)).is_err());
        for bad in ["", "a b", "a\u{1b}[2J", "a\nb", "tab\there"] {
            assert!(check_model_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn arguments_and_durations_are_short() {
        assert_eq!(short_args("{\"a\":1}"), "{\"a\":1}");
        let long = format!("{{\"text\":\"{}\"}}", "x".repeat(200));
        assert_eq!(short_args(&long).chars().count(), 80);
        assert_eq!(short_args("{\"a\":\"l1\nl2\"}"), "{\"a\":\"l1 l2\"}");
        assert_eq!(format_duration(Duration::from_micros(1500)), "1.5 ms");
        assert_eq!(format_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(format_duration(Duration::from_secs(12)), "12.0 s");
    }
}
