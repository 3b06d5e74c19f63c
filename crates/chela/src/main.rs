//! The `chela` binary: parses the command line, sets up logging and the runtime, and hands
//! over to the command. docs/guide/running.md says what each command does.

use std::process::ExitCode;

use chela::args::{self, Command};
use chela::cmd;
use chela::out;

fn main() -> ExitCode {
    let cli = match args::parse(std::env::args_os().skip(1)) {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Help(topic) => {
            out!("{}", topic.help());
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            out!("{}", chela::cmd::version());
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    // `chela run` logs at its `log.level`, which it reads from the workspace first.
    if !matches!(cli.command, Command::Run) {
        init_logging(cli.verbose, cli.quiet);
    }
    // One thread is plenty for one person's assistant, and keeps start-up and memory small.
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("chela: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(cmd::run(cli));
    // Do not wait for blocking reads (a terminal line) that will never finish.
    rt.shutdown_background();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("chela: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Diagnostics go to stderr: warnings and errors; `-v` for info, `-vv` for debug; `CHELA_LOG`
/// (error … trace) sets the level directly.
fn init_logging(verbose: u8, quiet: bool) {
    let env = std::env::var("CHELA_LOG").ok();
    chela::log::init(chela::log::level_for(verbose, quiet, chela::log::Level::Warn, env.as_deref()));
}
