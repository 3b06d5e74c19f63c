//! Command-line parsing. Global flags (`--workspace`, `-v`) are accepted before or after the
//! subcommand's name; everything else belongs to the subcommand.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Result, bail};

pub const USAGE: &str = "\
Chela: a personal AI assistant.

Usage: chela [--workspace DIR] [-v] <command> [args]

Commands:
  chat [-m MESSAGE] [--session NAME] [--new]
                          Chat in the terminal; -m sends one message and prints the reply
  config show             Every setting, its value and where it came from (secrets masked)
  config get KEY          One setting's value
  config set KEY VALUE    Store a runtime override (in overrides.toml)
  config unset KEY        Remove one runtime override
  config reset            Remove every runtime override
  cap list                Capability groups and their tools
  cap call ID [JSON]      Call a tool by hand
  cap enable|disable GROUP
                          Switch a group on or off for every caller
  cap show|hide GROUP     Show a group to the model, or hide it
  doctor                  Check the configuration, workspace and provider
  help                    This text

Global flags:
  --workspace DIR         Workspace folder (default: $CHELA_HOME, else ~/.chela)
  -v, --verbose           More diagnostics on stderr (repeat for more)
  -V, --version           Print the version
";

#[derive(Debug, PartialEq, Eq)]
pub struct Cli {
    pub workspace: Option<PathBuf>,
    pub verbose: u8,
    pub command: Command,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Chat(ChatArgs),
    Config(ConfigCmd),
    Cap(CapCmd),
    Doctor,
    Help,
    Version,
}

#[derive(Debug, PartialEq, Eq, Default)]
pub struct ChatArgs {
    /// Send this one message, print the reply, exit.
    pub message: Option<String>,
    /// The chat id within the `cli` channel; `local` by default.
    pub session: String,
    /// Start with a fresh session (the old one is archived).
    pub new: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum ConfigCmd {
    Show,
    Get(String),
    Set(String, String),
    Unset(String),
    Reset,
}

#[derive(Debug, PartialEq, Eq)]
pub enum CapCmd {
    List,
    Call { id: String, json: String },
    Enable(String, bool),
    Show(String, bool),
}

/// Parses `args` (without the program name).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Cli> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut workspace = None;
    let mut verbose = 0u8;
    let mut message = None;
    let mut session = None;
    let mut new = false;
    let mut help = false;
    let mut version = false;
    let mut words: Vec<String> = Vec::new();
    while let Some(arg) = p.next()? {
        match arg {
            Long("workspace") => workspace = Some(PathBuf::from(p.value()?)),
            Short('v') | Long("verbose") => verbose = verbose.saturating_add(1),
            Short('h') | Long("help") => help = true,
            Short('V') | Long("version") => version = true,
            Short('m') | Long("message") => message = Some(p.value()?.string()?),
            Long("session") => session = Some(p.value()?.string()?),
            Long("new") => new = true,
            Value(v) => words.push(v.string()?),
            other => bail!("{}\n\nRun `chela help` for the commands and flags.", other.unexpected()),
        }
    }
    let chat_flags = message.is_some() || session.is_some() || new;
    let command = if version {
        Command::Version
    } else if help || words.is_empty() {
        Command::Help
    } else {
        let rest: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        match (words[0].as_str(), rest.as_slice()) {
            ("chat", []) => {
                Command::Chat(ChatArgs { message, session: session.unwrap_or_else(|| "local".to_owned()), new })
            }
            ("config", ["show"] | []) => Command::Config(ConfigCmd::Show),
            ("config", ["get", key]) => Command::Config(ConfigCmd::Get((*key).to_owned())),
            ("config", ["set", key, value]) => Command::Config(ConfigCmd::Set((*key).to_owned(), (*value).to_owned())),
            ("config", ["unset", key]) => Command::Config(ConfigCmd::Unset((*key).to_owned())),
            ("config", ["reset"]) => Command::Config(ConfigCmd::Reset),
            ("cap", ["list"] | []) => Command::Cap(CapCmd::List),
            ("cap", ["call", id]) => Command::Cap(CapCmd::Call { id: (*id).to_owned(), json: "{}".to_owned() }),
            ("cap", ["call", id, json]) => {
                Command::Cap(CapCmd::Call { id: (*id).to_owned(), json: (*json).to_owned() })
            }
            ("cap", ["enable", g]) => Command::Cap(CapCmd::Enable((*g).to_owned(), true)),
            ("cap", ["disable", g]) => Command::Cap(CapCmd::Enable((*g).to_owned(), false)),
            ("cap", ["show", g]) => Command::Cap(CapCmd::Show((*g).to_owned(), true)),
            ("cap", ["hide", g]) => Command::Cap(CapCmd::Show((*g).to_owned(), false)),
            ("doctor", []) => Command::Doctor,
            ("help", _) => Command::Help,
            ("chat" | "config" | "cap" | "doctor", _) => {
                bail!("`chela {}` does not take those arguments.\n\n{USAGE}", words.join(" "))
            }
            (other, _) => bail!("unknown command `{other}`. Run `chela help` for the commands."),
        }
    };
    if chat_flags && !matches!(command, Command::Chat(_) | Command::Help | Command::Version) {
        bail!("-m, --session and --new only go with `chela chat`");
    }
    Ok(Cli { workspace, verbose, command })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Result<Cli> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn workspace_is_global_before_or_after_the_command() {
        let a = cli(&["--workspace", "/w", "chat", "-m", "hi"]).unwrap();
        let b = cli(&["chat", "-m", "hi", "--workspace=/w"]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.workspace, Some(PathBuf::from("/w")));
        assert_eq!(
            a.command,
            Command::Chat(ChatArgs { message: Some("hi".into()), session: "local".into(), new: false })
        );
    }

    #[test]
    fn chat_flags() {
        let c = cli(&["chat", "--session", "work", "--new"]).unwrap();
        assert_eq!(c.command, Command::Chat(ChatArgs { message: None, session: "work".into(), new: true }));
        assert!(cli(&["config", "show", "-m", "x"]).is_err());
    }

    #[test]
    fn config_and_cap_subcommands() {
        assert_eq!(cli(&["config"]).unwrap().command, Command::Config(ConfigCmd::Show));
        assert_eq!(
            cli(&["config", "set", "llm.model", "gpt-4o"]).unwrap().command,
            Command::Config(ConfigCmd::Set("llm.model".into(), "gpt-4o".into()))
        );
        assert_eq!(
            cli(&["cap", "call", "get_current_time"]).unwrap().command,
            Command::Cap(CapCmd::Call { id: "get_current_time".into(), json: "{}".into() })
        );
        assert_eq!(cli(&["cap", "hide", "files"]).unwrap().command, Command::Cap(CapCmd::Show("files".into(), false)));
        assert!(cli(&["config", "set", "llm.model"]).is_err());
        assert!(cli(&["cap", "explode"]).is_err());
    }

    #[test]
    fn help_version_and_mistakes() {
        assert_eq!(cli(&[]).unwrap().command, Command::Help);
        assert_eq!(cli(&["chat", "--help"]).unwrap().command, Command::Help);
        assert_eq!(cli(&["-V"]).unwrap().command, Command::Version);
        assert_eq!(cli(&["-vv", "doctor"]).unwrap().verbose, 2);
        let e = cli(&["chta"]).unwrap_err().to_string();
        assert!(e.contains("unknown command `chta`"), "{e}");
        let e = cli(&["chat", "--bogus"]).unwrap_err().to_string();
        assert!(e.contains("--bogus"), "{e}");
    }
}
