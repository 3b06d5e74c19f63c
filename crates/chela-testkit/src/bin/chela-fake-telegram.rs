//! `chela-fake-telegram`: the fake Telegram Bot API from the command line, for tests written in
//! another language (the browser test drives it from Node.js).
//!
//! Prints `listening on http://127.0.0.1:PORT` first, then one line per message the bot sends:
//! `sent {"chat_id":…,"message_id":…,"text":…}` (the text as Telegram would show it). Each line
//! read from standard input is a JSON object `{"chat": 501, "from": 501, "text": "hello"}`: a
//! text message from user `from` in chat `chat`, queued for `getUpdates`; it is acknowledged
//! with `pushed UPDATE_ID`. Serves until its standard input ends (so a parent that dies cannot
//! leave it behind) or a signal stops it. Argument errors exit with status 2.

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use chela_testkit::FakeTelegram;
use serde::Deserialize;

const USAGE: &str = "\
usage: chela-fake-telegram --token TOKEN [--port N]

Serves a fake Telegram Bot API on 127.0.0.1 for the bot TOKEN (e.g. 123:abc).
Standard input takes one JSON message a line: {\"chat\": 501, \"from\": 501, \"text\": \"hi\"}.
Standard output says `listening on URL`, then `sent {…}` for each message the bot sends.

  --token TOKEN   the bot token the fake accepts
  --port N        port to listen on (default 0: any free port)
  -h, --help      show this help";

/// Longest command line read from standard input; a longer one is refused, not buffered.
const MAX_LINE_BYTES: u64 = 64 * 1024;

#[derive(Debug, Default, PartialEq)]
struct Args {
    token: Option<String>,
    port: u16,
    help: bool,
}

fn parse_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut out = Args::default();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("token") => {
                let value = parser.value().map_err(|e| e.to_string())?;
                out.token = Some(value.into_string().map_err(|_| "--token must be valid UTF-8".to_string())?);
            }
            Long("port") => {
                let value = parser.value().map_err(|e| e.to_string())?;
                let text = value.to_string_lossy();
                out.port = text.parse().map_err(|_| format!("--port takes a port number (0-65535), not {text:?}"))?;
            }
            Short('h') | Long("help") => out.help = true,
            other => return Err(other.unexpected().to_string()),
        }
    }
    if !out.help && out.token.as_deref().is_none_or(str::is_empty) {
        return Err("--token is required".to_string());
    }
    Ok(out)
}

/// One line of standard input.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Push {
    chat: i64,
    from: i64,
    text: String,
}

fn parse_push(line: &str) -> Result<Push, String> {
    serde_json::from_str(line)
        .map_err(|e| format!("not a message ({e}): expected {{\"chat\": 1, \"from\": 1, \"text\": \"…\"}}"))
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("chela-fake-telegram: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let token = args.token.unwrap_or_default();
    let fake = match FakeTelegram::try_start(&token, args.port) {
        Ok(fake) => std::sync::Arc::new(fake),
        Err(e) => {
            eprintln!("chela-fake-telegram: cannot listen on 127.0.0.1:{}: {e}", args.port);
            return ExitCode::FAILURE;
        }
    };
    if say(&format!("listening on {}", fake.base_url())).is_err() {
        return ExitCode::FAILURE;
    }
    let watched = std::sync::Arc::clone(&fake);
    // Reports what the bot sends, by message id, so nothing is printed twice and a bounded
    // record in the fake that dropped old messages loses nothing new.
    std::thread::spawn(move || {
        let mut last = 0;
        loop {
            let sent = watched.wait_sent(Duration::from_secs(1), |s| s.iter().any(|m| m.message_id > last));
            let from = last;
            for m in sent.iter().filter(|m| m.message_id > from) {
                let line = serde_json::json!({"chat_id": m.chat_id, "message_id": m.message_id, "text": m.text});
                if say(&format!("sent {line}")).is_err() {
                    return;
                }
                last = m.message_id;
            }
        }
    });
    let mut stdin = std::io::stdin().lock();
    loop {
        let mut line = String::new();
        match (&mut stdin).take(MAX_LINE_BYTES).read_line(&mut line) {
            Ok(0) => return ExitCode::SUCCESS,
            Ok(_) if !line.ends_with('\n') && line.len() as u64 == MAX_LINE_BYTES => {
                eprintln!("chela-fake-telegram: a line over {MAX_LINE_BYTES} bytes; stopping");
                return ExitCode::FAILURE;
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("chela-fake-telegram: cannot read standard input: {e}");
                return ExitCode::FAILURE;
            }
        }
        if line.trim().is_empty() {
            continue;
        }
        match parse_push(line.trim()) {
            Ok(p) => {
                let id = fake.push_text(p.chat, p.from, &p.text);
                if say(&format!("pushed {id}")).is_err() {
                    return ExitCode::FAILURE;
                }
            }
            Err(e) => eprintln!("chela-fake-telegram: {e}"),
        }
    }
}

/// One line on standard output, flushed at once: the reader waits for it.
fn say(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn parses_every_flag_and_wants_a_token() {
        let args = parse(&["--token", "1:abc", "--port", "8081"]).unwrap();
        assert_eq!(args, Args { token: Some("1:abc".into()), port: 8081, help: false });
        assert!(parse(&[]).unwrap_err().contains("--token is required"));
        assert!(parse(&["--token", ""]).unwrap_err().contains("--token is required"));
        assert!(parse(&["--help"]).unwrap().help);
        assert!(parse(&["--token", "t", "--port", "x"]).unwrap_err().contains("--port takes"));
        assert!(parse(&["--token", "t", "--verbose"]).unwrap_err().contains("--verbose"));
    }

    #[test]
    fn reads_a_message_line_and_explains_a_bad_one() {
        assert_eq!(
            parse_push(r#"{"chat": -5, "from": 7, "text": "hi"}"#).unwrap(),
            Push { chat: -5, from: 7, text: "hi".into() }
        );
        for bad in
            ["", "nonsense", r#"{"chat": 1, "text": "no sender"}"#, r#"{"chat":1,"from":1,"text":"x","extra":1}"#]
        {
            assert!(parse_push(bad).unwrap_err().contains("not a message"), "{bad}");
        }
    }
}
