//! `chela-fake-llm`: the scripted fake LLM server from the command line.
//!
//! Prints exactly one line, `listening on http://127.0.0.1:PORT`, then serves until SIGINT or
//! SIGTERM (or, with `--exit-on-stdin-eof`, until its standard input closes, so a parent
//! process that dies cannot leave it behind). Argument errors exit with status 2.

use std::io::Write;
use std::process::ExitCode;

use chela_testkit::{FakeLlm, Options, parse_script};

const USAGE: &str = "\
usage: chela-fake-llm [--port N] [--script FILE] [--key KEY] [--exit-on-stdin-eof]

Serves a fake LLM on 127.0.0.1 speaking the Anthropic Messages API (POST /v1/messages)
and the OpenAI Chat Completions API (POST /v1/chat/completions).

  --port N              port to listen on (default 0: any free port)
  --script FILE         JSON array of scripted steps, e.g. [{\"text\": \"hi\"}, {\"status\": 429}];
                        once it is used up (or without one) a small demo model answers
  --key KEY             require this API key (x-api-key / Authorization: Bearer)
  --exit-on-stdin-eof   also stop when standard input reaches end of file
  -h, --help            show this help";

/// The command line, parsed.
#[derive(Debug, Default, PartialEq)]
struct Args {
    port: u16,
    script: Option<std::path::PathBuf>,
    key: Option<String>,
    exit_on_stdin_eof: bool,
    help: bool,
}

fn parse_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut out = Args::default();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("port") => {
                let value = parser.value().map_err(|e| e.to_string())?;
                let text = value.to_string_lossy();
                out.port = text.parse().map_err(|_| format!("--port takes a port number (0-65535), not {text:?}"))?;
            }
            Long("script") => out.script = Some(parser.value().map_err(|e| e.to_string())?.into()),
            Long("key") => {
                let value = parser.value().map_err(|e| e.to_string())?;
                out.key = Some(value.into_string().map_err(|_| "--key must be valid UTF-8".to_string())?);
            }
            Long("exit-on-stdin-eof") => out.exit_on_stdin_eof = true,
            Short('h') | Long("help") => out.help = true,
            other => return Err(other.unexpected().to_string()),
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("chela-fake-llm: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let script = match &args.script {
        None => Vec::new(),
        Some(path) => {
            let read = std::fs::read_to_string(path).map_err(|e| e.to_string());
            match read.and_then(|text| parse_script(&text)) {
                Ok(script) => script,
                Err(e) => {
                    eprintln!("chela-fake-llm: cannot use the script {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        }
    };
    let opts = Options { script, expected_key: args.key, port: args.port, ..Options::default() };
    let llm = match FakeLlm::try_start_with(opts) {
        Ok(llm) => llm,
        Err(e) => {
            eprintln!("chela-fake-llm: cannot listen on 127.0.0.1:{}: {e}", args.port);
            return ExitCode::FAILURE;
        }
    };
    let stop = match Stop::install(args.exit_on_stdin_eof) {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("chela-fake-llm: cannot listen for stop signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "listening on http://{}", llm.addr()).and_then(|()| stdout.flush()).is_err() {
        // Whoever started us can no longer learn the port; serving would be pointless.
        return ExitCode::FAILURE;
    }
    stop.wait();
    ExitCode::SUCCESS
}

/// What ends the server: SIGINT, SIGTERM, or (if asked) the end of standard input.
///
/// Installed before the listening line is printed: a parent that signals as soon as it reads
/// the line must find the handlers in place, not the default action.
struct Stop {
    runtime: tokio::runtime::Runtime,
    #[cfg(unix)]
    signals: [tokio::signal::unix::Signal; 2],
    stdin_closed: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Stop {
    fn install(on_stdin_eof: bool) -> std::io::Result<Stop> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        #[cfg(unix)]
        let signals = {
            use tokio::signal::unix::{SignalKind, signal};
            let _in_runtime = runtime.enter();
            [signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?]
        };
        let stdin_closed = on_stdin_eof.then(|| {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            // A plain thread, not tokio's stdin: a blocking read would hold up runtime
            // shutdown. It is left blocked in read when a signal wins; process exit ends it.
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                let _ = tx.send(());
            });
            rx
        });
        Ok(Stop {
            runtime,
            #[cfg(unix)]
            signals,
            stdin_closed,
        })
    }

    /// Blocks until one of the stop conditions happens.
    fn wait(self) {
        let Stop {
            runtime,
            #[cfg(unix)]
                signals: [mut int, mut term],
            stdin_closed,
        } = self;
        runtime.block_on(async {
            let eof = async {
                match stdin_closed {
                    // Sent or dropped, either way the reader thread is done: stdin has ended.
                    Some(rx) => drop(rx.await),
                    None => std::future::pending().await,
                }
            };
            #[cfg(unix)]
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                () = eof => {}
            }
            #[cfg(not(unix))]
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = eof => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn parses_every_flag() {
        let args = parse(&["--port", "8080", "--script", "s.json", "--key", "k", "--exit-on-stdin-eof"]).unwrap();
        assert_eq!(
            args,
            Args {
                port: 8080,
                script: Some("s.json".into()),
                key: Some("k".into()),
                exit_on_stdin_eof: true,
                help: false
            }
        );
        assert_eq!(parse(&[]).unwrap(), Args::default());
    }

    #[test]
    fn explains_bad_arguments() {
        assert!(parse(&["--port", "http"]).unwrap_err().contains("--port takes a port number"));
        assert!(parse(&["--port", "70000"]).unwrap_err().contains("not \"70000\""));
        assert!(parse(&["--port"]).unwrap_err().contains("--port"));
        assert!(parse(&["--verbose"]).unwrap_err().contains("--verbose"));
    }
}
