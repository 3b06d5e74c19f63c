//! The interactive chat, driven through a pipe: commands, errors that do not end the session,
//! and leaving with Ctrl-C at the prompt.

use std::fs;
use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::time::Duration;

use chela_testkit::{FakeLlm, Step};

use crate::ctrl_c::interrupt;
use crate::{Capture, Provider, Ws, body, conversation, text_of, wait_exit, wait_for};

/// A running `chela chat` with its pipes.
struct Repl {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Capture,
    stderr: Capture,
}

impl Repl {
    fn start(ws: &Ws) -> Repl {
        let mut child = ws.cmd(&["chat"]).stdin(Stdio::piped()).spawn().unwrap();
        let stdout = Capture::start(child.stdout.take());
        let stderr = Capture::start(child.stderr.take());
        Repl { stdin: child.stdin.take(), child, stdout, stderr }
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// Waits until stderr shows `n` prompts: chela is idle, waiting for a line. (Off a
    /// terminal the prompt goes to stderr: stdout carries only the answers.)
    fn wait_prompts(&self, n: usize) {
        wait_for(&format!("prompt #{n}"), Duration::from_secs(10), || self.stderr.now().matches("› ").count() >= n);
    }

    fn wait_stderr(&self, needle: &str) {
        wait_for(needle, Duration::from_secs(10), || self.stderr.now().contains(needle));
    }

    /// Closes stdin and returns the exit code, stdout and stderr.
    fn end(mut self) -> (Option<i32>, String, String) {
        drop(self.stdin.take());
        let status = wait_exit(&mut self.child, Duration::from_secs(10));
        (status.code(), self.stdout.finish(), self.stderr.finish())
    }
}

#[test]
fn slash_new_starts_over_and_errors_do_not_end_the_session() {
    let llm = FakeLlm::start(vec![Step::text("Hello, Ada."), Step::status(401), Step::text("Fresh.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut repl = Repl::start(&ws);
    repl.wait_prompts(1);
    assert!(repl.stderr.now().contains("cli_local.jsonl"), "the banner names the session: {}", repl.stderr.now());

    repl.say("I am Ada.");
    repl.wait_prompts(2);
    assert!(repl.stdout.now().contains("Hello, Ada."), "{}", repl.stdout.now());

    // A failed turn is explained and the prompt comes back.
    repl.say("Still there?");
    repl.wait_stderr("rejected the API key");
    repl.wait_prompts(3);

    repl.say("/new");
    repl.wait_stderr("Started a new session");
    repl.say("Who am I?");
    wait_for("the fresh answer", Duration::from_secs(10), || repl.stdout.now().contains("Fresh."));
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 2)).iter().map(text_of).collect();
    assert_eq!(said, ["Who am I?"], "/new must leave the old history out");

    let (code, stdout, stderr) = repl.end();
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stdout.contains('›'), "no prompt among the answers: {stdout}");
    assert!(!stderr.contains("thinking"), "no indicator off a terminal: {stderr}");
    let archived: Vec<_> = fs::read_dir(ws.path().join("sessions/archive")).unwrap().collect();
    assert_eq!(archived.len(), 1);
    assert_eq!(llm.requests().len(), 3);
}

#[test]
fn ctrl_c_at_the_prompt_leaves() {
    let llm = FakeLlm::start(vec![]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
    let mut repl = Repl::start(&ws);
    repl.wait_prompts(1);
    interrupt(&repl.child);
    let status = wait_exit(&mut repl.child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{}", repl.stderr.now());
    assert!(llm.requests().is_empty());
}

#[test]
fn exit_command_leaves_without_calling_the_model() {
    let llm = FakeLlm::start(vec![]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut repl = Repl::start(&ws);
    repl.say("");
    repl.say("/exit");
    let status = wait_exit(&mut repl.child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{}", repl.stderr.now());
    assert!(llm.requests().is_empty());
    assert!(!ws.session_path("local").exists());
}

/// A `chela chat` in a real terminal: a private tmux server (Debian package `tmux`) with one
/// pane, driven by keystrokes and read back from the screen.
pub(crate) struct Tty {
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Tty {
    fn start(ws: &Ws) -> Tty {
        Tty::start_with(ws, "chat")
    }

    /// `chela ARGS` (words, unquoted) in the terminal; the pane stays after it exits, so its
    /// last words can be read.
    pub(crate) fn start_with(ws: &Ws, args: &str) -> Tty {
        let dir = tempfile::tempdir().unwrap();
        let tty = Tty { socket: dir.path().join("tmux.sock"), _dir: dir };
        // The child sees only what it needs, as `Ws::cmd` arranges for piped runs.
        let command = format!(
            "env -i HOME='{}' CHELA_HOME='{}' PATH='{}' TERM=screen '{}' {args}",
            ws.home().display(),
            ws.path().display(),
            std::env::var("PATH").unwrap_or_default(),
            env!("CARGO_BIN_EXE_chela"),
        );
        tty.tmux(&["new-session", "-d", "-x", "120", "-y", "40", "-s", "chela", &command]);
        if args != "chat" {
            assert!(tty.tmux(&["set-option", "-t", "chela", "remain-on-exit", "on"]).status.success());
        }
        tty
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            // UTF-8 whatever the test's locale: the prompt is `›`.
            .env("LANG", "C.UTF-8")
            .arg("-u")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("this test drives a terminal with tmux: install it (Debian: apt-get install tmux)")
    }

    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "chela"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    pub(crate) fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "chela"]).stdout).into_owned()
    }

    /// Waits until the screen satisfies `cond`. Trailing blanks are not on the screen: a
    /// waiting prompt is `›` at the end of a line.
    pub(crate) fn wait_screen(&self, what: &str, cond: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn wait_gone(&self) {
        wait_for("chela to leave", Duration::from_secs(10), || {
            !self.tmux(&["has-session", "-t", "chela"]).status.success()
        });
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        // Only this test's own server, by its socket.
        let _ = self.tmux(&["kill-server"]);
    }
}

#[test]
fn a_terminal_gets_line_editing_and_a_kept_history() {
    use std::os::unix::fs::PermissionsExt;
    // Far longer than the test waits for the cancelled turn to end.
    let slow = Step::text("Too late.").delay_ms(5000);
    let llm = FakeLlm::start(vec![Step::text("First."), Step::text("Second."), slow]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let tty = Tty::start(&ws);
    tty.wait_screen("the prompt", |s| s.contains('›'));
    tty.keys(&["hello there", "Enter"]);
    tty.wait_screen("the first answer", |s| s.contains("First."));
    tty.wait_screen("the second prompt", |s| s.matches('›').count() >= 2);

    // Up brings the last line back; it is edited (five backspaces) and sent again.
    tty.keys(&["Up"]);
    tty.wait_screen("the recalled line", |s| s.matches("hello there").count() >= 2);
    tty.keys(&["BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "again", "Enter"]);
    tty.wait_screen("the second answer", |s| s.contains("Second."));
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 1)).iter().map(text_of).collect();
    assert_eq!(said, ["hello there", "First.", "hello again"]);

    // Ctrl-C during a turn cancels the turn, and the prompt comes back.
    tty.wait_screen("the third prompt", |s| s.matches('›').count() >= 3);
    tty.keys(&["take your time", "Enter"]);
    wait_for("the slow request", Duration::from_secs(10), || llm.requests().len() == 3);
    tty.keys(&["C-c"]);
    tty.wait_screen("the cancelled turn", |s| s.contains("(turn cancelled)"));
    tty.wait_screen("the fourth prompt", |s| s.matches('›').count() >= 4);

    // Ctrl-D at the prompt leaves.
    tty.keys(&["C-d"]);
    tty.wait_gone();
    let history = ws.path().join(".chat_history");
    assert_eq!(fs::read_to_string(&history).unwrap(), "hello there\nhello again\ntake your time\n");
    assert_eq!(fs::metadata(&history).unwrap().permissions().mode() & 0o777, 0o600);

    // The next run starts with that history. Ctrl-C clears a typed line, as shells do; on an
    // empty line it says how to leave, and Ctrl-D leaves.
    let tty = Tty::start(&ws);
    tty.wait_screen("the prompt", |s| s.contains('›'));
    tty.keys(&["Up"]);
    tty.wait_screen("the line from the last run", |s| s.contains("› take your time"));
    tty.keys(&["C-c"]);
    tty.wait_screen("a fresh, empty prompt", |s| s.matches('›').count() >= 2 && s.trim_end().ends_with('›'));
    assert!(!tty.screen().contains("to leave"), "a typed line is only cleared:\n{}", tty.screen());
    tty.keys(&["C-c"]);
    tty.wait_screen("how to leave", |s| s.contains("to leave, press Ctrl-D or type /quit"));
    tty.wait_screen("the prompt again", |s| s.trim_end().ends_with('›'));
    tty.keys(&["C-d"]);
    tty.wait_gone();
    assert_eq!(llm.requests().len(), 3, "nothing more was sent");
}

#[test]
fn a_long_line_of_wide_characters_wraps_on_screen_and_is_edited_in_place() {
    let llm = FakeLlm::start(vec![Step::text("Got it.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let tty = Tty::start(&ws);
    tty.wait_screen("the prompt", |s| s.contains('›'));
    // 140 wide characters: 280 cells, three rows of the 120-column terminal.
    let wide = "中文".repeat(70);
    tty.keys(&[&wide]);
    tty.wait_screen("the typed line", |s| s.contains("中文中文\n"));
    // Home goes up two rows to the start; the letter put there moves every row along.
    tty.keys(&["Home", "X", "Enter"]);
    tty.wait_screen("the answer", |s| s.contains("Got it."));
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 0)).iter().map(text_of).collect();
    assert_eq!(said, [format!("X{wide}")]);
    // On screen, the line as sent: `› X` and 58 wide characters (a wide one does not fit in the
    // last cell), then 60, then the 22 left; nothing left over from the drawings before.
    let screen = tty.screen();
    let rows: Vec<&str> = screen.lines().skip_while(|l| !l.starts_with("› X")).take(3).collect();
    let chars: Vec<char> = wide.chars().collect();
    let part = |r: std::ops::Range<usize>| chars[r].iter().collect::<String>();
    assert_eq!(rows, [format!("› X{}", part(0..58)), part(58..118), part(118..140)], "the screen:\n{screen}");
    assert_eq!(screen.matches('中').count(), 70, "the screen:\n{screen}");
    tty.wait_screen("the next prompt", |s| s.trim_end().ends_with('›'));
    tty.keys(&["C-d"]);
    tty.wait_gone();
}

#[test]
fn slash_commands_are_answered_by_the_chat_and_never_sent() {
    let llm = FakeLlm::start(vec![Step::text("Hello.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut repl = Repl::start(&ws);
    repl.wait_prompts(1);
    repl.say("/help");
    for command in ["/help", "/new", "/model", "/session", "/quit"] {
        repl.wait_stderr(command);
    }
    repl.say("/foo");
    repl.wait_stderr("unknown command /foo; nothing was sent");
    repl.say("/model");
    repl.wait_stderr(&format!("model {}", crate::MODEL));
    repl.say("/session");
    repl.wait_stderr("session local");
    repl.wait_prompts(5);
    assert!(llm.requests().is_empty(), "no slash command reaches the model");
    // A line that only starts with a slash is a message.
    repl.say("/etc/hosts is missing");
    repl.wait_prompts(6);
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 0)).iter().map(text_of).collect();
    assert_eq!(said, ["/etc/hosts is missing"]);
    repl.say("/quit");
    let status = wait_exit(&mut repl.child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{}", repl.stderr.now());
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn slash_model_name_switches_this_chat_only() {
    let llm = FakeLlm::start(vec![Step::text("One."), Step::text("Two."), Step::text("Three.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let tty = Tty::start(&ws);
    tty.wait_screen("the prompt", |s| s.contains('›'));
    tty.keys(&["first", "Enter"]);
    tty.wait_screen("the first answer", |s| s.contains("One."));
    tty.wait_screen("the second prompt", |s| s.matches('›').count() >= 2);
    tty.keys(&["/model other-model-7", "Enter"]);
    tty.wait_screen("the switch", |s| s.contains("model other-model-7 from now on in this chat only (not saved"));
    tty.keys(&["/model", "Enter"]);
    tty.wait_screen("the model shown", |s| s.contains("model other-model-7 ·"));
    // A name that is no word is refused and changes nothing.
    tty.keys(&["/model ", &"x".repeat(201), "Enter"]);
    tty.wait_screen("the refusal", |s| s.contains("model unchanged: a model name is at most 200 bytes"));
    tty.wait_screen("the fifth prompt", |s| s.matches('›').count() >= 5);
    tty.keys(&["second", "Enter"]);
    tty.wait_screen("the second answer", |s| s.contains("Two."));
    tty.wait_screen("the sixth prompt", |s| s.matches('›').count() >= 6);
    tty.keys(&["C-d"]);
    tty.wait_gone();
    assert_eq!(llm.requests().len(), 2, "no slash command reached the model");
    assert_eq!(body(&llm, 0)["model"], crate::MODEL);
    assert_eq!(body(&llm, 1)["model"], "other-model-7");
    // Not saved: the next chat answers with the configured model again.
    let out = ws.chat("third", &[]);
    out.expect_ok();
    assert_eq!(body(&llm, 2)["model"], crate::MODEL);
}

#[test]
fn a_terminal_shows_thinking_while_the_model_is_silent_and_each_retry() {
    // A rate limit first (retried after a second), then an answer that takes its time.
    let llm = FakeLlm::start(vec![Step::status(429).retry_after("1"), Step::text("Here.").delay_ms(3000)]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let tty = Tty::start(&ws);
    tty.wait_screen("the prompt", |s| s.contains('›'));
    tty.keys(&["hello", "Enter"]);
    // The wait is the server's Retry-After, rounded to whole seconds (jitter may add one).
    tty.wait_screen("the retry", |s| s.contains("rate limited (HTTP 429), retrying in ") && s.contains(" s\n"));
    tty.wait_screen("thinking while the slow answer comes", |s| s.contains("thinking…"));
    tty.wait_screen("the answer in its place", |s| s.contains("Here.") && !s.contains("thinking…"));
    tty.wait_screen("the next prompt", |s| s.matches('›').count() >= 2);
    tty.keys(&["C-d"]);
    tty.wait_gone();

    // Piped, the reply alone is on stdout and no indicator is drawn; the retry is still told.
    let llm = FakeLlm::start(vec![Step::status(429).retry_after("1"), Step::text("Piped.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let out = ws.chat("hi", &[]);
    out.expect_ok().stderr_has("rate limited (HTTP 429), retrying in ");
    assert_eq!(out.stdout, "Piped.\n");
    assert!(!out.stderr.contains("thinking"), "{}", out.stderr);
}
