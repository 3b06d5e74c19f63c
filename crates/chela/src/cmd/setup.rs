//! `chela setup`: the first-run questions. Provider, address, model and key are tried with one
//! small request before anything is written, so a wrong key or address is found here, with the
//! provider's own words, and not at the first chat. Only then do the answers go to the runtime
//! layer together (one `set_overrides`, under its lock). Optional after that: a Telegram token
//! and the systemd service.
//!
//! The same run without questions takes its answers from flags (and the key from stdin), for
//! scripts and images.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use tokio::time::Instant;

use anyhow::{Context, Result, bail};
use chela_core::config::{self as keys, Key};

use crate::app::http_client;
use crate::args::{ServiceCmd, SetupArgs};
use crate::config::{Config, KeyChoice, set_overrides};
use crate::provider::Provider;
use crate::workspace::Workspace;

/// Wrong answers to one question before setup gives up (stdin may be a file of bad lines).
const MAX_TRIES: usize = 5;
/// The longest answer read: keys and URLs are a few hundred bytes.
const MAX_ANSWER: usize = 4096;
/// What the test call asks; the answer is shown, so it should be short and readable.
const TEST_PROMPT: &str = "This is a connection test. Reply with one short sentence.";

/// The answers, as they will be stored.
#[derive(Debug, Default)]
struct Answers {
    provider: String,
    /// Empty: the provider's own address.
    base_url: String,
    /// Empty: the provider's default model.
    model: String,
    /// `None` keeps the stored key; `Some("")` stores none (a keyless local server).
    api_key: Option<String>,
    telegram_token: Option<String>,
}

pub async fn run(ws: &Workspace, args: SetupArgs) -> Result<ExitCode> {
    ws.ensure()?;
    let cfg = Config::load(ws)?;
    let interactive = !args.any();
    if interactive && !std::io::stdin().is_terminal() {
        bail!(
            "`chela setup` asks its questions on a terminal, and stdin is none. In a script, give the answers \
             as flags, as in `printf %s \"$KEY\" | chela setup --provider anthropic --api-key -` (see `chela setup --help`)."
        );
    }
    let mut stdin = std::io::stdin().lock();
    let mut answers = if interactive { ask(&cfg, &mut stdin)? } else { from_flags(&cfg, &args, &mut stdin)? };
    let (candidate, choice) = candidate(ws, &cfg, &answers)?;
    test_call(&candidate).await?;
    if interactive {
        answers.telegram_token = ask_telegram(&cfg, &mut stdin)?;
    }
    let mut pairs: Vec<(&str, &str)> = vec![
        (keys::LLM_PROVIDER.name, &answers.provider),
        (keys::LLM_BASE_URL.name, &answers.base_url),
        (keys::LLM_MODEL.name, &answers.model),
    ];
    if let Some(k) = &answers.api_key {
        pairs.push((keys::LLM_API_KEY.name, k));
    }
    if let Some(t) = &answers.telegram_token {
        pairs.push((keys::TELEGRAM_TOKEN.name, t));
    }
    set_overrides(ws, &pairs, choice)?;
    let names: Vec<&str> = pairs.iter().map(|(n, _)| *n).collect();
    outln!("Saved {} in {}.", names.join(", "), ws.overrides_path().display());
    for (name, _) in &pairs {
        if let Ok(key) = keys::key(name)
            && std::env::var_os(key.env_var()).is_some()
        {
            eprintln!("note: the environment variable {} overrides the saved {name}", key.env_var());
        }
    }
    if answers.telegram_token.is_some() {
        outln!("{PAIRING_NOTE}");
    }
    let service = args.service || (interactive && yes_no(&mut stdin, "Install the systemd user service now?")?);
    if service {
        return super::service::run(ws, ServiceCmd::Install);
    }
    outln!("Next: `chela chat` to talk in this terminal, or `chela run` for the gateway and the channels.");
    Ok(ExitCode::SUCCESS)
}

const PAIRING_NOTE: &str = "\
Telegram: nobody may talk to your bot until you approve them. Write to the bot; it answers
with a pairing code. Then, with `chela run` going, approve the code here:
  chela pairing list
  chela pairing approve CODE";

/// The answers from `--provider`, `--base-url`, `--model` and `--api-key -`.
fn from_flags(cfg: &Config, args: &SetupArgs, stdin: &mut impl BufRead) -> Result<Answers> {
    let provider = match &args.provider {
        Some(p) => crate::config::check(keys::LLM_PROVIDER, p)?,
        None => cfg.effective(keys::LLM_PROVIDER).to_owned(),
    };
    let same = provider == cfg.effective(keys::LLM_PROVIDER);
    let kept = |key: &'static Key, given: &Option<String>| -> Result<String> {
        match given {
            Some(v) => crate::config::check(key, v),
            // Another provider starts from its own defaults, not the old one's address and model.
            None if same => Ok(cfg.get(key).to_owned()),
            None => Ok(String::new()),
        }
    };
    let base_url = kept(keys::LLM_BASE_URL, &args.base_url)?;
    let model = kept(keys::LLM_MODEL, &args.model)?;
    let api_key = if args.key_from_stdin {
        let line = read_line(stdin)?.context("--api-key -: stdin ended before the key")?;
        Some(crate::config::check(keys::LLM_API_KEY, line.trim())?)
    } else {
        None
    };
    Ok(Answers { provider, base_url, model, api_key, telegram_token: None })
}

/// The questions, on the terminal.
fn ask(cfg: &Config, stdin: &mut impl BufRead) -> Result<Answers> {
    eprintln!("Chela setup. Press Enter to keep the value in [brackets]; nothing is saved until a test call works.");
    let current = cfg.effective(keys::LLM_PROVIDER).to_owned();
    let provider = question(stdin, "Provider: anthropic, or openai (any OpenAI-compatible server)", &current, |v| {
        crate::config::check(keys::LLM_PROVIDER, v)
    })?;
    let same = provider == current;
    let default_url = keys::default_base_url(&provider);
    let shown_url =
        if same && !cfg.get(keys::LLM_BASE_URL).is_empty() { cfg.get(keys::LLM_BASE_URL) } else { default_url };
    let base_url = question(stdin, "Address (base URL)", shown_url, |v| crate::config::check(keys::LLM_BASE_URL, v))?;
    let base_url = if base_url == default_url { String::new() } else { base_url };
    let default_model = keys::default_model(&provider);
    let shown_model =
        if same && !cfg.get(keys::LLM_MODEL).is_empty() { cfg.get(keys::LLM_MODEL) } else { default_model };
    let model = question(stdin, "Model", shown_model, |v| crate::config::check(keys::LLM_MODEL, v))?;
    let model = if model == default_model { String::new() } else { model };
    let stored = cfg.entry(keys::LLM_API_KEY);
    let hint = if stored.value.is_empty() {
        "none stored; Enter for none, as a local server needs".to_owned()
    } else {
        format!("Enter keeps {}", stored.shown())
    };
    eprint!("API key (typing is not shown; {hint}): ");
    let typed = hidden_line(stdin)?;
    let api_key = match typed.trim() {
        "" if stored.value.is_empty() => Some(String::new()),
        "" => None,
        k => Some(crate::config::check(keys::LLM_API_KEY, k)?),
    };
    Ok(Answers { provider, base_url, model, api_key, telegram_token: None })
}

fn ask_telegram(cfg: &Config, stdin: &mut impl BufRead) -> Result<Option<String>> {
    let stored = !cfg.get(keys::TELEGRAM_TOKEN).is_empty();
    let keep = if stored { "Enter keeps the stored one" } else { "Enter skips" };
    eprint!("Telegram bot token from @BotFather (typing is not shown; {keep}): ");
    for _ in 0..MAX_TRIES {
        let typed = hidden_line(stdin)?;
        if typed.trim().is_empty() {
            return Ok(None);
        }
        match crate::config::check(keys::TELEGRAM_TOKEN, typed.trim()) {
            Ok(t) => return Ok(Some(t)),
            Err(e) => eprint!("{e:#}. Again ({keep}): "),
        }
    }
    bail!("no valid Telegram token after {MAX_TRIES} tries; the provider settings were saved, nothing else")
}

/// Asks until `check` accepts the answer; Enter takes `default`.
fn question(
    stdin: &mut impl BufRead,
    what: &str,
    default: &str,
    check: impl Fn(&str) -> Result<String>,
) -> Result<String> {
    for _ in 0..MAX_TRIES {
        eprint!("{what} [{default}]: ");
        let _ = std::io::stderr().flush();
        let line = read_line(stdin)?.context("stdin ended; nothing was saved")?;
        let answer = if line.trim().is_empty() { default } else { line.trim() };
        match check(answer) {
            Ok(v) => return Ok(v),
            Err(e) => eprintln!("{e:#}"),
        }
    }
    bail!("no valid answer after {MAX_TRIES} tries; nothing was saved")
}

fn yes_no(stdin: &mut impl BufRead, what: &str) -> Result<bool> {
    eprint!("{what} [y/N]: ");
    let _ = std::io::stderr().flush();
    Ok(read_line(stdin)?.is_some_and(|l| matches!(l.trim(), "y" | "Y" | "yes" | "Yes")))
}

/// One line, without its newline; `None` at the end of input. Longer than [`MAX_ANSWER`] is refused.
fn read_line(stdin: &mut impl BufRead) -> Result<Option<String>> {
    let mut bytes = Vec::new();
    let n = std::io::Read::take(&mut *stdin, MAX_ANSWER as u64 + 1)
        .read_until(b'\n', &mut bytes)
        .context("cannot read stdin")?;
    if n == 0 {
        return Ok(None);
    }
    if bytes.len() > MAX_ANSWER {
        bail!("an answer of over {MAX_ANSWER} bytes; nothing was saved");
    }
    let text = String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the answer is not UTF-8 text"))?;
    Ok(Some(text.trim_end_matches(['\n', '\r']).to_owned()))
}

/// A line typed with the terminal's echo off, so a secret never shows on the screen.
fn hidden_line(stdin: &mut impl BufRead) -> Result<String> {
    let _ = std::io::stderr().flush();
    let _echo = EchoOff::new();
    let line = read_line(stdin)?.context("stdin ended; nothing was saved")?;
    // The Enter the person pressed was not echoed either.
    eprintln!();
    Ok(line)
}

/// Turns the terminal's echo off while it lives.
struct EchoOff(Option<rustix::termios::Termios>);

impl EchoOff {
    fn new() -> EchoOff {
        let stdin = std::io::stdin();
        let Ok(saved) = rustix::termios::tcgetattr(&stdin) else { return EchoOff(None) };
        let mut quiet = saved.clone();
        quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
        match rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet) {
            Ok(()) => EchoOff(Some(saved)),
            Err(_) => EchoOff(None),
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = rustix::termios::tcsetattr(std::io::stdin(), rustix::termios::OptionalActions::Now, saved);
        }
    }
}

/// The configuration as it will be once the answers are saved: the workspace's layers with the
/// answers on top. The key goes only where the owner sent it: when the address moves to
/// another host and no new key was given, the stored one is left out of the test call and
/// dropped on saving (`KeyChoice::Drop`).
fn candidate(ws: &Workspace, cfg: &Config, a: &Answers) -> Result<(Config, KeyChoice)> {
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    let effective_url = |provider: &str, url: &str| {
        if url.is_empty() { keys::default_base_url(provider).to_owned() } else { url.to_owned() }
    };
    let before = origin(cfg.effective(keys::LLM_BASE_URL));
    let after = origin(&effective_url(&a.provider, &a.base_url));
    let mut choice = KeyChoice::Ask;
    let key = match &a.api_key {
        Some(k) => Some(k.clone()),
        None if before != after => {
            choice = KeyChoice::Drop;
            Some(String::new())
        }
        None => None,
    };
    let mut put = |key: &'static Key, v: &str| env.push((key.env_var(), v.to_owned()));
    put(keys::LLM_PROVIDER, &a.provider);
    put(keys::LLM_BASE_URL, &a.base_url);
    put(keys::LLM_MODEL, &a.model);
    if let Some(k) = &key {
        put(keys::LLM_API_KEY, k);
    }
    // A short answer, at once: the test shows whether the settings work, nothing more.
    put(keys::LLM_MAX_TOKENS, "64");
    put(keys::LLM_STREAM, "false");
    put(keys::LLM_MAX_RETRIES, "0");
    Ok((Config::load_with_env(ws, &env)?, choice))
}

/// Scheme, host and port: where a request goes.
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    format!("{}://{}", scheme.to_ascii_lowercase(), authority.to_ascii_lowercase())
}

/// One small request with the candidate settings; prints the provider's answer.
async fn test_call(cfg: &Config) -> Result<()> {
    let provider = Provider::from_config(cfg, http_client(cfg)?).context("nothing was saved")?;
    eprintln!("Testing {} with model {}…", provider.describe(), provider.model);
    let started = Instant::now();
    match provider.ask(TEST_PROMPT).await {
        Ok(reply) => {
            let text: String =
                reply.into_message().text().chars().map(|c| if c.is_control() { ' ' } else { c }).take(200).collect();
            outln!("The provider answered in {} ms: {}", started.elapsed().as_millis(), text.trim());
            Ok(())
        }
        Err(e) => {
            // The key was typed here, not taken from a variable: no environment variable to blame.
            let why = provider.explain(&e, &crate::config::Layer::Runtime);
            bail!("the test call failed: {why}\nNothing was saved; run `chela setup` again with the right values.")
        }
    }
}
