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

    /// Waits until stdout shows `n` prompts: chela is idle, waiting for a line.
    fn wait_prompts(&self, n: usize) {
        wait_for(&format!("prompt #{n}"), Duration::from_secs(10), || self.stdout.now().matches("› ").count() >= n);
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
