//! Command-line parsing. Global flags (`--workspace`, `-v`) are accepted before or after the
//! subcommand's name; everything else belongs to the subcommand.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};

use crate::config::KeyChoice;

mod help;

pub use help::{USAGE, synopsis};

#[derive(Debug, PartialEq, Eq)]
pub struct Cli {
    pub workspace: Option<PathBuf>,
    pub verbose: u8,
    /// `-q`: only warnings and errors in the log, whatever `log.level` says.
    pub quiet: bool,
    pub command: Command,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Chat(ChatArgs),
    Config(ConfigCmd),
    Cap(CapCmd),
    Skill(SkillCmd),
    Pairing(PairingCmd),
    Doctor,
    /// `chela status [--json]`: what the daemon of this workspace is doing.
    Status {
        json: bool,
    },
    Service(ServiceCmd),
    /// `chela run`: the daemon.
    Run,
    /// `chela setup`: the first-run questions (or their answers as flags).
    Setup(SetupArgs),
    /// `chela gateway token [--rotate] [--yes]`.
    GatewayToken {
        rotate: bool,
        yes: bool,
    },
    /// `chela gateway health`: the container's health check.
    GatewayHealth,
    /// `chela backup [FILE]`.
    Backup(Option<PathBuf>),
    /// `chela restore FILE [--force]`.
    Restore {
        file: PathBuf,
        force: bool,
    },
    /// `chela console`: a one-time login link for the web console.
    Console,
    Cron(CronCmd),
    /// `chela rules …`: the event router's rules.
    Rules(RulesCmd),
    /// `chela heartbeat trigger`.
    Heartbeat,
    /// `chela mcp …`: the MCP servers Chela uses.
    Mcp(McpCmd),
    /// `chela mcp serve`: Chela as an MCP server on stdio.
    McpServe,
    /// `chela board check [FILE]`: validate a board.json.
    Board(Option<PathBuf>),
    /// `chela device …`: xiaozhi voice devices.
    Device(DeviceCmd),
    /// `chela state …`: the seals of Chela's records of the owner's decisions.
    State(StateCmd),
    /// `chela usage [--session S] [--since DATE] [--json]`: tokens and estimated cost.
    Usage {
        session: Option<String>,
        since: Option<String>,
        json: bool,
    },
    /// Print this topic's help.
    Help(Topic),
    Version,
}

/// What a help text is about: the whole program, or one command or verb.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    Main,
    Chat,
    Config,
    ConfigShow,
    ConfigGet,
    ConfigSet,
    ConfigUnset,
    ConfigReset,
    Cap,
    CapList,
    CapCall,
    CapEnable,
    CapShow,
    Skill,
    Pairing,
    PairingList,
    PairingApprove,
    PairingDeny,
    PairingRevoke,
    PairingClear,
    Doctor,
    Status,
    Service,
    ServiceInstall,
    ServiceUninstall,
    ServiceStatus,
    Run,
    Setup,
    Gateway,
    Backup,
    Restore,
    Console,
    Cron,
    Rules,
    Heartbeat,
    Mcp,
    McpList,
    McpTest,
    McpServe,
    Board,
    Device,
    State,
    Usage,
}

impl Topic {
    /// The topic of a command line's words (`["config", "set", ...]`): the most specific one
    /// they name, `None` when the first word is no command.
    fn of(words: &[String]) -> Option<Topic> {
        let first = words.first().map(String::as_str);
        let second = words.get(1).map(String::as_str);
        Some(match (first?, second) {
            ("help", _) => return if words.len() > 1 { Topic::of(&words[1..]) } else { Some(Topic::Main) },
            ("chat", _) => Topic::Chat,
            ("doctor", _) => Topic::Doctor,
            ("status", _) => Topic::Status,
            ("run", _) => Topic::Run,
            ("setup", _) => Topic::Setup,
            ("gateway", _) => Topic::Gateway,
            ("backup", _) => Topic::Backup,
            ("restore", _) => Topic::Restore,
            ("console", _) => Topic::Console,
            ("cron", _) => Topic::Cron,
            ("rules", _) => Topic::Rules,
            ("heartbeat", _) => Topic::Heartbeat,
            ("mcp", Some("list")) => Topic::McpList,
            ("mcp", Some("test")) => Topic::McpTest,
            ("mcp", Some("serve")) => Topic::McpServe,
            ("mcp", _) => Topic::Mcp,
            ("board", _) => Topic::Board,
            ("device", _) => Topic::Device,
            ("state", _) => Topic::State,
            ("usage", _) => Topic::Usage,
            ("config", Some("show")) => Topic::ConfigShow,
            ("config", Some("get")) => Topic::ConfigGet,
            ("config", Some("set")) => Topic::ConfigSet,
            ("config", Some("unset")) => Topic::ConfigUnset,
            ("config", Some("reset")) => Topic::ConfigReset,
            ("config", _) => Topic::Config,
            ("cap", Some("list")) => Topic::CapList,
            ("cap", Some("call")) => Topic::CapCall,
            ("cap", Some("enable" | "disable")) => Topic::CapEnable,
            ("cap", Some("show" | "hide")) => Topic::CapShow,
            ("cap", _) => Topic::Cap,
            ("skill", _) => Topic::Skill,
            ("pairing", Some("list")) => Topic::PairingList,
            ("pairing", Some("approve")) => Topic::PairingApprove,
            ("pairing", Some("deny")) => Topic::PairingDeny,
            ("pairing", Some("revoke")) => Topic::PairingRevoke,
            ("pairing", Some("clear")) => Topic::PairingClear,
            ("pairing", _) => Topic::Pairing,

            ("service", Some("install")) => Topic::ServiceInstall,
            ("service", Some("uninstall")) => Topic::ServiceUninstall,
            ("service", Some("status")) => Topic::ServiceStatus,
            ("service", _) => Topic::Service,
            _ => return None,
        })
    }

    /// The help text.
    pub fn help(self) -> String {
        help::text(self)
    }

    /// How many of the command line's words name the topic: `chela config set` is 2.
    fn depth(self) -> usize {
        match self {
            Topic::Main => 0,
            Topic::Chat
            | Topic::Config
            | Topic::Cap
            | Topic::Skill
            | Topic::Pairing
            | Topic::Doctor
            | Topic::Status
            | Topic::Service
            | Topic::Run
            | Topic::Setup
            | Topic::Gateway
            | Topic::Backup
            | Topic::Restore
            | Topic::Console
            | Topic::Cron
            | Topic::Rules
            | Topic::Heartbeat
            | Topic::Mcp => 1,
            Topic::Board | Topic::Device | Topic::State | Topic::Usage => 1,
            _ => 2,
        }
    }
}

/// The last line of a mistake's message: where the usage of what was typed is explained.
fn pointer(words: &[String]) -> String {
    // `chela help chat --bogus` is about `chat`.
    let words = if words.first().is_some_and(|w| w == "help") { &words[1..] } else { words };
    match Topic::of(words) {
        Some(t) if t != Topic::Main => format!("Run `chela {} --help` for its usage.", words[..t.depth()].join(" ")),
        _ => "Run `chela help` for the commands and flags.".to_owned(),
    }
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

/// `chela setup`'s answers given as flags. Any of them (or a stdin that is no terminal) makes
/// the run ask nothing: what is not given keeps its current value or the provider's default.
#[derive(Debug, PartialEq, Eq, Default)]
pub struct SetupArgs {
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// `--api-key -`: the key is the first line of stdin (never a literal: `ps` would show it).
    pub key_from_stdin: bool,
    /// `--service`: install the systemd user service once the settings are saved.
    pub service: bool,
}

impl SetupArgs {
    /// Whether any answer came as a flag.
    pub fn any(&self) -> bool {
        self.provider.is_some()
            || self.base_url.is_some()
            || self.model.is_some()
            || self.key_from_stdin
            || self.service
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum ConfigCmd {
    Show,
    Get(String),
    /// The key, the value, and what to do with the API key if `llm.base_url` moves host.
    Set(String, String, KeyChoice),
    Unset(String, KeyChoice),
    Reset,
}

/// `chela service …`: `chela run` as a systemd user service.
#[derive(Debug, PartialEq, Eq)]
pub enum ServiceCmd {
    Install,
    Uninstall,
    Status,
}

/// `chela mcp …`.
#[derive(Debug, PartialEq, Eq)]
pub enum McpCmd {
    /// The configured servers: state, era, tool count.
    List,
    /// Connect to one server, list its tools, print them.
    Test(String),
    /// Issue (or reissue) a token for a tool host on the MCP endpoint; print it once.
    EndpointAdd(String),
    /// The endpoint names tokens were issued for.
    EndpointList,
    /// Take a host's token away.
    EndpointRemove(String),
}

#[derive(Debug, PartialEq, Eq)]
pub enum CapCmd {
    List,
    Call { id: String, json: String },
    Enable(String, bool),
    Show(String, bool),
}

/// `chela skill …`. `session` is a terminal session name (`cli` channel) or `CHANNEL/CHAT`.
#[derive(Debug, PartialEq, Eq)]
pub enum SkillCmd {
    List,
    Show(String),
    Activate { name: String, session: String },
    Deactivate { name: String, session: String },
    New(String),
    Delete(String),
}

#[derive(Debug, PartialEq, Eq)]
pub enum CronCmd {
    List,
    /// A job as JSON, as `scheduler_add_job` takes it.
    Add(String),
    Remove(String),
    Trigger(String),
    Pause(String),
    Resume(String),
    /// Let a job the assistant made act beyond its own chat.
    Approve(String),
}

#[derive(Debug, PartialEq, Eq)]
pub enum RulesCmd {
    List,
    /// Let a rule the assistant made act beyond its own chat.
    Approve(String),
    Remove(String),
}

#[derive(Debug, PartialEq, Eq)]
pub enum DeviceCmd {
    List,
    Approve(String),
    /// A waiting code, or `all`.
    Deny(String),
    Revoke(String),
    /// Offer `file` as `version` to devices running an older one (or to one device).
    FirmwareSet {
        file: PathBuf,
        version: String,
        device: Option<String>,
    },
    FirmwareClear,
}

#[derive(Debug, PartialEq, Eq)]
pub enum StateCmd {
    /// Whether each sealed store is trusted.
    Check,
    /// Trust a store as it is now, after the owner checked it.
    Trust(String),
}

#[derive(Debug, PartialEq, Eq)]
pub enum PairingCmd {
    List,
    Approve(String),
    Deny(String),
    Revoke {
        channel: String,
        sender: String,
    },
    /// Deny every waiting request (of one channel, or all).
    Clear(Option<String>),
}

/// Parses `args` (without the program name). Mistakes come back as one-line errors that say
/// what to type instead and which `--help` to read; `main` prints them and exits with 2.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Cli> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut workspace = None;
    let mut verbose = 0u8;
    let mut quiet = false;
    let mut setup = SetupArgs::default();
    let mut api_key = None;
    let mut rotate = false;
    let mut yes = false;
    let mut force = false;
    let mut message = None;
    let mut session = None;
    let mut new = false;
    let mut device = None;
    let mut key_choice = None;
    let mut json = false;
    let mut since: Option<String> = None;
    let mut help = false;
    let mut version = false;
    let mut words: Vec<String> = Vec::new();
    // The first mistake, reported once the words show which command it was meant for.
    let mut mistake: Option<String> = None;
    loop {
        // The word after `config set KEY` is its value even when it starts with `-` (`-5`):
        // only the flags themselves are read as flags there.
        if words.len() == 3
            && words[..2] == ["config", "set"]
            && let Some(mut raw) = p.try_raw_args()
            && let Some(value) = raw.next_if(|a| a.to_str().is_some_and(|s| s.starts_with('-') && !is_flag(s)))
        {
            words.push(value.to_string_lossy().into_owned());
            continue;
        }
        let arg = match p.next() {
            Ok(Some(arg)) => arg,
            Ok(None) => break,
            Err(e) => {
                mistake.get_or_insert(e.to_string());
                break;
            }
        };
        let step: Result<(), lexopt::Error> = match arg {
            Long("workspace") => p.value().map(|v| workspace = Some(PathBuf::from(v))),
            Short('v') | Long("verbose") => {
                verbose = verbose.saturating_add(1);
                Ok(())
            }
            Short('q') | Long("quiet") => {
                quiet = true;
                Ok(())
            }
            Long("provider") => p.value().and_then(|v| v.string()).map(|v| setup.provider = Some(v)),
            Long("base-url") => p.value().and_then(|v| v.string()).map(|v| setup.base_url = Some(v)),
            Long("model") => p.value().and_then(|v| v.string()).map(|v| setup.model = Some(v)),
            Long("api-key") => p.value().and_then(|v| v.string()).map(|v| api_key = Some(v)),
            Long("service") => {
                setup.service = true;
                Ok(())
            }
            Long("rotate") => {
                rotate = true;
                Ok(())
            }
            Long("yes") => {
                yes = true;
                Ok(())
            }
            Long("force") => {
                force = true;
                Ok(())
            }
            Short('h') | Long("help") => {
                help = true;
                Ok(())
            }
            Short('V') | Long("version") => {
                version = true;
                Ok(())
            }
            Short('m') | Long("message") => p.value().and_then(|v| v.string()).map(|v| message = Some(v)),
            Long("session") => p.value().and_then(|v| v.string()).map(|v| session = Some(v)),
            Long("new") => {
                new = true;
                Ok(())
            }
            Long("device") => p.value().and_then(|v| v.string()).map(|v| device = Some(v)),
            Long("keep-key") => {
                key_choice = Some(KeyChoice::Keep);
                Ok(())
            }
            Long("drop-key") => {
                key_choice = Some(KeyChoice::Drop);
                Ok(())
            }
            Long("since") => p.value().and_then(|v| v.string()).map(|v| since = Some(v)),
            Long("json") => {
                json = true;
                Ok(())
            }
            Value(v) => v.string().map(|v| words.push(v)),
            other => Err(other.unexpected()),
        };
        if let Err(e) = step {
            mistake.get_or_insert(e.to_string());
        }
    }
    if version {
        return Ok(Cli { workspace, verbose, quiet, command: Command::Version });
    }
    if help {
        // `chela nosuch --help` gets the whole program's help rather than an error.
        let topic = Topic::of(&words).unwrap_or(Topic::Main);
        return Ok(Cli { workspace, verbose, quiet, command: Command::Help(topic) });
    }
    if let Some(m) = mistake {
        bail!("{m}. {}", pointer(&words));
    }
    if words.is_empty() {
        return Ok(Cli { workspace, verbose, quiet, command: Command::Help(Topic::Main) });
    }
    let firmware_set = words.len() >= 3 && words[..3] == ["device", "firmware", "set"];
    if device.is_some() && !firmware_set {
        bail!("--device only goes with `chela device firmware set FILE VERSION --device ID`. {}", pointer(&words));
    }
    let mut command = command(&words, message, session, new)?;
    match &mut command {
        Command::Status { json: j } => *j = json,
        Command::Usage { since: s, json: j, .. } => (*s, *j) = (since.take(), json),
        _ if json => bail!("--json only goes with `chela status` and `chela usage`. {}", pointer(&words)),
        _ => {}
    }
    if since.is_some() {
        bail!("--since only goes with `chela usage`. {}", pointer(&words));
    }
    if let Some(choice) = key_choice {
        match &mut command {
            Command::Config(ConfigCmd::Set(_, _, c) | ConfigCmd::Unset(_, c)) => *c = choice,
            _ => bail!("--keep-key and --drop-key only go with `chela config set|unset`. {}", pointer(&words)),
        }
    }
    if let Command::Device(DeviceCmd::FirmwareSet { device: d, .. }) = &mut command {
        *d = device;
    }
    match api_key.as_deref() {
        None => {}
        Some("-") => setup.key_from_stdin = true,
        // A key typed on the command line sits in the shell history and in `ps` for all to read.
        Some(_) => bail!(
            "--api-key takes only `-` (the key on stdin), as in `printf %s \"$KEY\" | chela setup --provider \
             anthropic --api-key -`; a key on the command line is visible to every process. {}",
            pointer(&words)
        ),
    }
    match &mut command {
        Command::Setup(s) => *s = setup,
        _ if setup.any() => {
            bail!(
                "--provider, --base-url, --model, --api-key and --service only go with `chela setup`. {}",
                pointer(&words)
            )
        }
        _ => {}
    }
    match &mut command {
        Command::GatewayToken { rotate: r, yes: y } => (*r, *y) = (rotate, yes),
        _ if rotate || yes => bail!("--rotate and --yes only go with `chela gateway token`. {}", pointer(&words)),
        _ => {}
    }
    match &mut command {
        Command::Restore { force: f, .. } => *f = force,
        _ if force => bail!("--force only goes with `chela restore FILE`. {}", pointer(&words)),
        _ => {}
    }
    Ok(Cli { workspace, verbose, quiet, command })
}

/// The command the words name, with the chat flags where they belong.
fn command(words: &[String], message: Option<String>, session: Option<String>, new: bool) -> Result<Command> {
    let chat_flags = message.is_some() || new;
    let session_flag = session.is_some();
    let skill_session = || session.clone().unwrap_or_else(|| "local".to_owned());
    let rest: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let command = match (words[0].as_str(), rest.as_slice()) {
        ("chat", []) => {
            if let Some(m) = &message {
                check_message(m)?;
            }
            Command::Chat(ChatArgs { message, session: session.unwrap_or_else(|| "local".to_owned()), new })
        }
        ("chat", extra) => {
            // The shell split the message into words: only the first went to -m (or none did).
            let said = message.iter().map(String::as_str).chain(extra.iter().copied()).collect::<Vec<_>>().join(" ");
            let why = if message.is_some() { "the message must be one argument" } else { "a message goes after -m" };
            bail!("{why}: put it in quotes, as in `chela chat -m \"{said}\"`. {}", pointer(words));
        }
        ("help", _) => Command::Help(Topic::of(words).unwrap_or(Topic::Main)),
        ("config", ["show"] | []) => Command::Config(ConfigCmd::Show),
        ("config", ["get", key]) => Command::Config(ConfigCmd::Get((*key).to_owned())),
        ("config", ["set", key, value]) => {
            Command::Config(ConfigCmd::Set((*key).to_owned(), (*value).to_owned(), KeyChoice::Ask))
        }
        ("config", ["unset", key]) => Command::Config(ConfigCmd::Unset((*key).to_owned(), KeyChoice::Ask)),
        ("config", ["reset"]) => Command::Config(ConfigCmd::Reset),
        ("cap", ["list"] | []) => Command::Cap(CapCmd::List),
        ("cap", ["call", id]) => Command::Cap(CapCmd::Call { id: (*id).to_owned(), json: "{}".to_owned() }),
        ("cap", ["call", id, json]) => Command::Cap(CapCmd::Call { id: (*id).to_owned(), json: (*json).to_owned() }),
        ("cap", ["enable", g]) => Command::Cap(CapCmd::Enable((*g).to_owned(), true)),
        ("cap", ["disable", g]) => Command::Cap(CapCmd::Enable((*g).to_owned(), false)),
        ("cap", ["show", g]) => Command::Cap(CapCmd::Show((*g).to_owned(), true)),
        ("cap", ["hide", g]) => Command::Cap(CapCmd::Show((*g).to_owned(), false)),
        ("mcp", ["list"] | []) => Command::Mcp(McpCmd::List),
        ("mcp", ["test", name]) => Command::Mcp(McpCmd::Test((*name).to_owned())),
        ("mcp", ["endpoint", "add", name]) => Command::Mcp(McpCmd::EndpointAdd((*name).to_owned())),
        ("mcp", ["endpoint", "list"] | ["endpoint"]) => Command::Mcp(McpCmd::EndpointList),
        ("mcp", ["endpoint", "remove", name]) => Command::Mcp(McpCmd::EndpointRemove((*name).to_owned())),
        ("skill", ["list"] | []) => Command::Skill(SkillCmd::List),
        ("skill", ["show", name]) => Command::Skill(SkillCmd::Show((*name).to_owned())),
        ("skill", ["activate", name]) => {
            Command::Skill(SkillCmd::Activate { name: (*name).to_owned(), session: skill_session() })
        }
        ("skill", ["deactivate", name]) => {
            Command::Skill(SkillCmd::Deactivate { name: (*name).to_owned(), session: skill_session() })
        }
        ("skill", ["new", name]) => Command::Skill(SkillCmd::New((*name).to_owned())),
        ("skill", ["delete", name]) => Command::Skill(SkillCmd::Delete((*name).to_owned())),
        ("pairing", ["list"] | []) => Command::Pairing(PairingCmd::List),
        ("pairing", ["approve", code]) => Command::Pairing(PairingCmd::Approve((*code).to_owned())),
        ("pairing", ["deny", code]) => Command::Pairing(PairingCmd::Deny((*code).to_owned())),
        ("pairing", ["clear"]) => Command::Pairing(PairingCmd::Clear(None)),
        ("pairing", ["clear", channel]) => Command::Pairing(PairingCmd::Clear(Some((*channel).to_owned()))),
        ("pairing", ["revoke", channel, sender]) => {
            Command::Pairing(PairingCmd::Revoke { channel: (*channel).to_owned(), sender: (*sender).to_owned() })
        }
        ("pairing", ["revoke", both]) => match both.split_once(':') {
            Some((channel, sender)) if !channel.is_empty() && !sender.is_empty() => {
                Command::Pairing(PairingCmd::Revoke { channel: channel.to_owned(), sender: sender.to_owned() })
            }
            _ => bail!(
                "`{both}` names no sender: write the channel and the sender id, as in \
                 `chela pairing revoke telegram:123456789`. {}",
                pointer(words)
            ),
        },
        ("doctor", []) => Command::Doctor,
        ("status", []) => Command::Status { json: false },
        ("service", ["install"]) => Command::Service(ServiceCmd::Install),
        ("service", ["uninstall"]) => Command::Service(ServiceCmd::Uninstall),
        ("service", ["status"] | []) => Command::Service(ServiceCmd::Status),
        ("run", []) => Command::Run,
        ("setup", []) => Command::Setup(SetupArgs::default()),
        ("gateway", ["token"]) => Command::GatewayToken { rotate: false, yes: false },
        ("gateway", ["health"]) => Command::GatewayHealth,
        ("backup", []) => Command::Backup(None),
        ("backup", [file]) => Command::Backup(Some(PathBuf::from(file))),
        ("restore", [file]) => Command::Restore { file: PathBuf::from(file), force: false },
        ("console", []) => Command::Console,
        ("mcp", ["serve"]) => Command::McpServe,
        ("cron", ["list"] | []) => Command::Cron(CronCmd::List),
        ("cron", ["add", json]) => Command::Cron(CronCmd::Add((*json).to_owned())),
        ("cron", ["remove", id]) => Command::Cron(CronCmd::Remove((*id).to_owned())),
        ("cron", ["trigger", id]) => Command::Cron(CronCmd::Trigger((*id).to_owned())),
        ("cron", ["pause", id]) => Command::Cron(CronCmd::Pause((*id).to_owned())),
        ("cron", ["resume", id]) => Command::Cron(CronCmd::Resume((*id).to_owned())),
        ("cron", ["approve", id]) => Command::Cron(CronCmd::Approve((*id).to_owned())),
        ("rules", ["list"] | []) => Command::Rules(RulesCmd::List),
        ("rules", ["approve", id]) => Command::Rules(RulesCmd::Approve((*id).to_owned())),
        ("rules", ["remove", id]) => Command::Rules(RulesCmd::Remove((*id).to_owned())),
        ("heartbeat", ["trigger"]) => Command::Heartbeat,
        ("device", ["list"] | []) => Command::Device(DeviceCmd::List),
        ("device", ["approve", code]) => Command::Device(DeviceCmd::Approve((*code).to_owned())),
        ("device", ["deny", code]) => Command::Device(DeviceCmd::Deny((*code).to_owned())),
        ("device", ["revoke", id]) => Command::Device(DeviceCmd::Revoke((*id).to_owned())),
        ("device", ["firmware", "set", file, version]) => Command::Device(DeviceCmd::FirmwareSet {
            file: PathBuf::from(file),
            version: (*version).to_owned(),
            device: None,
        }),
        ("device", ["firmware", "clear"]) => Command::Device(DeviceCmd::FirmwareClear),
        ("state", ["check"] | []) => Command::State(StateCmd::Check),
        ("state", ["trust", name]) => Command::State(StateCmd::Trust((*name).to_owned())),
        ("usage", []) => Command::Usage { session: session.clone(), since: None, json: false },
        ("board", ["check"]) => Command::Board(None),
        ("board", ["check", file]) => Command::Board(Some(PathBuf::from(file))),
        (
            "config" | "cap" | "skill" | "pairing" | "doctor" | "status" | "service" | "run" | "console" | "cron"
            | "rules" | "heartbeat" | "board" | "device" | "state" | "setup" | "gateway" | "backup" | "restore"
            | "usage",
            _,
        ) => {
            let topic = Topic::of(words).unwrap_or(Topic::Main);
            let shape = synopsis(topic);
            bail!("`chela {}` does not fit `{shape}`. {}", words.join(" "), pointer(words))
        }
        (other, _) => match suggest_command(other) {
            Some(close) => {
                bail!("unknown command `{other}`. Did you mean `chela {close}`? Run `chela help` for the commands.")
            }
            None => bail!("unknown command `{other}`. Run `chela help` for the commands."),
        },
    };
    let takes_session = matches!(
        command,
        Command::Chat(_)
            | Command::Usage { .. }
            | Command::Skill(SkillCmd::Activate { .. } | SkillCmd::Deactivate { .. })
    );
    if (chat_flags && !matches!(command, Command::Chat(_))) || (session_flag && !takes_session) {
        bail!(
            "-m and --new only go with `chela chat`, --session with `chela chat`, `chela usage` and \
             `chela skill activate|deactivate`. {}",
            pointer(words)
        );
    }
    Ok(command)
}

/// Every command's first word.
const COMMANDS: &[&str] = &[
    "chat",
    "config",
    "cap",
    "skill",
    "pairing",
    "doctor",
    "status",
    "service",
    "run",
    "setup",
    "gateway",
    "backup",
    "restore",
    "console",
    "cron",
    "rules",
    "heartbeat",
    "mcp",
    "board",
    "device",
    "state",
    "usage",
    "help",
];

/// The command a mistyped first word most likely meant. Words shorter than three letters
/// are too far from any to guess.
fn suggest_command(word: &str) -> Option<&'static str> {
    if word.chars().count() < 3 {
        return None;
    }
    chela_core::config::suggest(word, COMMANDS.iter().copied())
}

/// Whether a word that starts with `-` is one of the flags, rather than a value such as `-5`.
fn is_flag(word: &str) -> bool {
    if let Some(long) = word.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or_default();
        return name.is_empty()
            || [
                "workspace",
                "verbose",
                "help",
                "version",
                "message",
                "session",
                "new",
                "device",
                "keep-key",
                "drop-key",
                "json",
                "quiet",
                "provider",
                "base-url",
                "model",
                "api-key",
                "service",
                "rotate",
                "yes",
                "force",
                "since",
            ]
            .contains(&name);
    }
    word.len() > 1 && word[1..].chars().all(|c| matches!(c, 'v' | 'q' | 'h' | 'V' | 'm'))
}

/// Refuses a message with nothing to say, before anything is sent.
pub fn check_message(message: &str) -> Result<()> {
    if message.trim().is_empty() {
        return Err(anyhow!("the message is empty; nothing was sent. Say something, as in `chela chat -m \"hello\"`."));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
