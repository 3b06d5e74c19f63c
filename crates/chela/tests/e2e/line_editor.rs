//! The chat's line editor through a real pseudo-terminal: keys go in as the bytes a terminal
//! sends, and the test waits on what chela writes back (no sleeps, no terminal emulator).

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, Step};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{LocalModes, Winsize, tcgetattr, tcsetwinsize};

use crate::{Provider, Ws, body, conversation, text_of, wait_exit};

/// The terminal's side of a pseudo-terminal, with `chela chat` on the other.
struct Pty {
    master: File,
    /// What chela wrote, in pieces as they came (read on a thread, so chela never blocks).
    output: mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl Pty {
    /// `chela chat` with the pseudo-terminal as its stdin, stdout and stderr; also returns a
    /// handle on the terminal to read its mode with.
    fn start(ws: &Ws) -> (Pty, Child, OwnedFd) {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let tty: OwnedFd = File::options().read(true).write(true).open(name.to_str().unwrap()).unwrap().into();
        tcsetwinsize(&tty, Winsize { ws_row: 24, ws_col: 80, ws_xpixel: 0, ws_ypixel: 0 }).unwrap();
        let child = ws
            .cmd(&["chat"])
            .stdin(tty.try_clone().unwrap())
            .stdout(tty.try_clone().unwrap())
            .stderr(tty.try_clone().unwrap())
            .spawn()
            .unwrap();
        let master = File::from(master);
        let mut reader = master.try_clone().unwrap();
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once no one holds the terminal's side.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        (Pty { master, output, seen: String::new() }, child, tty)
    }

    fn keys(&mut self, bytes: &str) {
        self.master.write_all(bytes.as_bytes()).unwrap();
    }

    /// Waits until chela has written `needle` after everything waited for so far, and returns
    /// what it wrote up to it.
    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(at) = self.seen.find(needle) {
                let upto = self.seen[..at + needle.len()].to_owned();
                self.seen.drain(..at + needle.len());
                return upto;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(e) => panic!("waiting for {needle:?}: {e}; chela wrote:\n{:?}", self.seen),
            }
        }
    }
}

const LEFT: &str = "\x1b[D";
const RIGHT: &str = "\x1b[C";
const ALT_B: &str = "\x1bb";
const CTRL_A: &str = "\x01";
const CTRL_E: &str = "\x05";
const CTRL_R: &str = "\x12";
const CTRL_W: &str = "\x17";
const CTRL_D: &str = "\x04";
const BACKSPACE: &str = "\x7f";

#[test]
fn lines_typed_with_edits_found_with_ctrl_r_and_pasted_are_sent_and_kept() {
    let llm = FakeLlm::start(vec![Step::text("Answer one."), Step::text("Answer two."), Step::text("Answer three.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let history = ws.path().join(".chat_history");
    fs::write(&history, "an older line about cats\nthe weather in Paris\n").unwrap();
    let (mut pty, mut child, tty) = Pty::start(&ws);
    pty.wait_for("› ");

    // Typed with mistakes and mended: a letter put in from the start, a word jumped back to,
    // a typo wiped with Ctrl-W, and wide characters, one taken back.
    for keys in ["helo wrld", CTRL_A, RIGHT, RIGHT, RIGHT, "l", CTRL_E, ALT_B, RIGHT, "o", CTRL_E] {
        pty.keys(keys);
    }
    for keys in [" tpyo", CTRL_W, "世界!", LEFT, BACKSPACE, "\r"] {
        pty.keys(keys);
    }
    pty.wait_for("Answer one.");
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 0)).iter().map(text_of).collect();
    assert_eq!(said, ["hello world 世!"]);

    // Ctrl-R finds an older line by a piece of it; End leaves the search on it, and it is
    // added to and sent.
    pty.wait_for("› ");
    pty.keys(CTRL_R);
    pty.keys("Par");
    pty.wait_for("(reverse-i-search)`Par': the weather in Paris");
    pty.keys(CTRL_E);
    pty.keys("?\r");
    pty.wait_for("Answer two.");
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 1)).iter().map(text_of).collect();
    assert_eq!(said, ["hello world 世!", "Answer one.", "the weather in Paris?"]);

    // A bracketed paste keeps its newline in the one message; the Enter after it sends it.
    pty.wait_for("› ");
    pty.keys("\x1b[200~first line\r\nsecond line\x1b[201~");
    pty.keys("\r");
    pty.wait_for("Answer three.");
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 2)).iter().map(text_of).collect();
    assert_eq!(said.last().unwrap(), "first line\nsecond line");

    // Ctrl-D on the empty line leaves, and the terminal is back in its own mode.
    pty.wait_for("› ");
    pty.keys(CTRL_D);
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "chela wrote:\n{:?}", pty.seen);
    let mode = tcgetattr(&tty).unwrap();
    assert!(mode.local_modes.contains(LocalModes::ECHO | LocalModes::ICANON | LocalModes::ISIG), "{mode:?}");
    assert_eq!(
        fs::read_to_string(&history).unwrap(),
        "an older line about cats\nthe weather in Paris\nhello world 世!\nthe weather in Paris?\nfirst line\nsecond line\n"
    );
    assert_eq!(llm.requests().len(), 3);
}
