//! The help texts: `chela help` for everything, and one per subcommand and verb for
//! `chela <command> --help`. Each names its own usage line, arguments and flags, and gives an
//! example, so a person who asks about one command reads about that one.

use super::Topic;

/// The synopsis line of each topic, as its help shows it after `Usage: `; errors about a
/// command's arguments quote it too.
pub fn synopsis(topic: Topic) -> &'static str {
    match topic {
        Topic::Main => "chela [--workspace DIR] [-v] <command> [args]",
        Topic::Chat => "chela chat [-m MESSAGE] [--session NAME] [--new]",
        Topic::Config => "chela config <show|get|set|unset|reset> [args]",
        Topic::ConfigShow => "chela config show",
        Topic::ConfigGet => "chela config get KEY",
        Topic::ConfigSet => "chela config set KEY VALUE [--keep-key|--drop-key]",
        Topic::ConfigUnset => "chela config unset KEY [--keep-key|--drop-key]",
        Topic::ConfigReset => "chela config reset",
        Topic::Cap => "chela cap <list|call|enable|disable|show|hide> [args]",
        Topic::CapList => "chela cap list",
        Topic::CapCall => "chela cap call ID [JSON]",
        Topic::CapEnable => "chela cap enable|disable GROUP",
        Topic::CapShow => "chela cap show|hide GROUP",
        Topic::Skill => "chela skill <list|show|activate|deactivate|new|delete> [NAME] [--session NAME]",
        Topic::Pairing => "chela pairing <list|approve|deny|revoke> [args]",
        Topic::PairingList => "chela pairing list",
        Topic::PairingApprove => "chela pairing approve CODE",
        Topic::PairingDeny => "chela pairing deny CODE",
        Topic::PairingRevoke => "chela pairing revoke CHANNEL:SENDER",
        Topic::State => "chela state [check] | state trust FILE",
        Topic::Usage => "chela usage [--session S] [--since YYYY-MM-DD] [--json]",
        Topic::Memory => "chela memory reindex",
        Topic::PairingClear => "chela pairing clear [CHANNEL]",
        Topic::Doctor => "chela doctor",
        Topic::Status => "chela status [--json]",
        Topic::Service => "chela service <install|uninstall|status>",
        Topic::ServiceInstall => "chela service install",
        Topic::ServiceUninstall => "chela service uninstall",
        Topic::ServiceStatus => "chela service status",
        Topic::Run => "chela run",
        Topic::Setup => "chela setup [--provider NAME] [--base-url URL] [--model NAME] [--api-key -] [--service]",
        Topic::Gateway => "chela gateway <token [--rotate] [--yes]|health>",
        Topic::Backup => "chela backup [FILE]",
        Topic::Restore => "chela restore FILE [--force]",
        Topic::Console => "chela console",
        Topic::Cron => "chela cron <list|add|remove|trigger|pause|resume|approve> [args]",
        Topic::Rules => "chela rules <list|approve|remove> [ID]",
        Topic::Heartbeat => "chela heartbeat trigger",
        Topic::Mcp => "chela mcp <list|test|serve> [NAME]",
        Topic::McpList => "chela mcp list",
        Topic::McpTest => "chela mcp test NAME",
        Topic::McpServe => "chela mcp serve",
        Topic::Board => "chela board check [FILE]",
        Topic::Device => {
            "chela device <list|approve CODE|revoke ID|transport ID mqtt|websocket|default|firmware set FILE VERSION [--device ID]|firmware clear>"
        }
    }
}

/// The whole help text of `topic`.
pub fn text(topic: Topic) -> String {
    let (about, body) = match topic {
        Topic::Main => return USAGE.to_owned(),
        Topic::Chat => ("chat with Chela in the terminal.", CHAT),
        Topic::Config => ("read and change the settings.", CONFIG),
        Topic::ConfigShow => ("every setting, its value and where it came from.", CONFIG_SHOW),
        Topic::ConfigGet => ("one setting's value.", CONFIG_GET),
        Topic::ConfigSet => ("store a runtime override of one setting.", CONFIG_SET),
        Topic::ConfigUnset => ("remove one runtime override.", CONFIG_UNSET),
        Topic::ConfigReset => ("remove every runtime override.", CONFIG_RESET),
        Topic::Cap => ("the capability groups: the tools Chela can use.", CAP),
        Topic::CapList => ("the capability groups, their state and their tools.", CAP_LIST),
        Topic::CapCall => ("call one tool by hand.", CAP_CALL),
        Topic::CapEnable => ("switch a capability group on or off.", CAP_ENABLE),
        Topic::CapShow => ("show a capability group to the model, or hide it.", CAP_SHOW),
        Topic::Skill => ("skills: instructions for particular tasks, activated per conversation.", SKILL),
        Topic::Pairing => ("who may talk to Chela on Telegram, Feishu and the gateway.", PAIRING),
        Topic::PairingList => ("pairing requests waiting for you, and the approved senders.", PAIRING_LIST),
        Topic::PairingApprove => ("let the sender of a pairing code talk to Chela.", PAIRING_APPROVE),
        Topic::PairingDeny => ("refuse a pairing request.", PAIRING_DENY),
        Topic::PairingRevoke => ("take an approved sender's access away.", PAIRING_REVOKE),
        Topic::Memory => ("build the memory index again from the memory files.", MEMORY),
        Topic::State => ("check the seals of the pairing, device and endpoint stores, or trust one.", STATE),
        Topic::Usage => ("tokens used and their estimated cost, per model.", USAGE_CMD),
        Topic::PairingClear => ("deny every waiting pairing request.", PAIRING_CLEAR),
        Topic::Doctor => ("check the configuration, the workspace and the provider.", DOCTOR),
        Topic::Status => ("what the daemon of this workspace is doing, and what waits for you.", STATUS),
        Topic::Service => ("run Chela as a systemd user service.", SERVICE),
        Topic::ServiceInstall => ("install and start the systemd user service.", SERVICE_INSTALL),
        Topic::ServiceUninstall => ("stop and remove the systemd user service.", SERVICE_UNINSTALL),
        Topic::ServiceStatus => ("whether the service is installed, enabled and running.", SERVICE_STATUS),
        Topic::Run => ("the always-on assistant: the gateway and every configured channel.", RUN),
        Topic::Console => ("a one-time login link for the web console.", CONSOLE),
        Topic::Setup => ("choose the provider, key and model, test them, and save them.", SETUP),
        Topic::Gateway => ("show the gateway's token, or replace it with a new one.", GATEWAY),
        Topic::Backup => ("write the whole workspace to one archive.", BACKUP),
        Topic::Restore => ("put a workspace back from an archive `chela backup` wrote.", RESTORE),
        Topic::Cron => ("the scheduled jobs in cron.json.", CRON),
        Topic::Rules => ("the event router's rules in rules.json.", RULES),
        Topic::Heartbeat => ("ask the running daemon for a heartbeat now.", HEARTBEAT),
        Topic::Mcp => ("the MCP servers whose tools Chela uses ([mcp.servers.NAME]).", MCP),
        Topic::McpList => ("the configured MCP servers: state, protocol era, tool count.", MCP_LIST),
        Topic::McpTest => ("connect to one MCP server and list its tools.", MCP_TEST),
        Topic::McpServe => {
            ("Chela as an MCP server on stdin/stdout, for Claude Desktop, Cursor and other MCP clients.", MCP_SERVE)
        }
        Topic::Board => ("check a board description (board.json).", BOARD),
        Topic::Device => ("xiaozhi voice devices: approve, revoke, offer firmware.", DEVICE),
    };
    let name = synopsis(topic).split(" [").next().unwrap_or_default();
    let name = name.split(" <").next().unwrap_or(name);
    format!("{name}: {about}\n\nUsage: {}\n\n{body}\n{GLOBAL}", synopsis(topic))
}

const GLOBAL: &str = "\
Global flags (see `chela help`): --workspace DIR, -v/--verbose, -q/--quiet. -h, --help prints this text.
";

pub const USAGE: &str = "\
Chela: a personal AI assistant.

Usage: chela [--workspace DIR] [-v] <command> [args]

Commands:
  setup                   First steps: provider, key, model, a test call, Telegram, service
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
  skill list|show NAME     The skills (workspace and built-in), or one skill's SKILL.md
  skill activate|deactivate NAME [--session NAME]
                          Switch a skill on or off in one conversation
  skill new|delete NAME   Start a workspace skill from a template, or delete one
  pairing list            Pairing requests waiting for you, and the approved senders
  pairing approve|deny CODE
                          Let a code's sender talk to Chela, or refuse it
  pairing revoke CHANNEL:SENDER
                          Take an approved sender's access away
  pairing clear [CHANNEL] Deny every waiting request (a queue strangers filled)
  doctor                  Check the configuration, workspace and provider
  status [--json]         Whether `chela run` serves this workspace, and what waits for you
  usage [--json]          Tokens used (cached, written to the cache) and their estimated cost
  service install|uninstall|status
                          Run `chela run` as a systemd user service
  run                     The always-on assistant: gateway, channels, in one process
  console                 A one-time login link for the web console of `chela run`
  gateway token [--rotate]
                          Show the gateway's token (your terminal only), or make a new one
  gateway health          Whether the gateway answers (exit status 0 when it does)
  backup [FILE]           Write the workspace to a .tar archive (secrets included)
  restore FILE [--force]  Put a workspace back from a backup
  cron list|add|remove|trigger|pause|resume|approve [JSON|ID]
                          The scheduled jobs (cron.json)
  rules list|approve|remove [ID]
                          The event router's rules (rules.json)
  heartbeat trigger       Ask the running daemon for a heartbeat now
  mcp list|test NAME      The MCP servers (state, era, tools), or connect to one and list its tools
  mcp endpoint add|list|remove [NAME]
                          Tokens for tool hosts (mcp2xiaozhi) dialling ws://…/xiaozhi/mcp/
  board check [FILE]      Check board.json (the board's devices and GPIO allowlist)
  device list|approve CODE|deny CODE|revoke ID
                          xiaozhi voice devices: those waiting with a code, approved, revoked
  device transport ID mqtt|websocket|default
                          How one device talks to Chela (default: xiaozhi.transport)
  device firmware set FILE VERSION [--device ID] | firmware clear
                          Offer a firmware image to older devices, or stop offering it
  state [check] | state trust FILE
                          Whether the pairing, device and endpoint stores are Chela's own, or
                          trust one you changed by hand
  memory reindex          Build the index of the memory files again
  help [COMMAND]          This text, or one command's (as does `chela COMMAND --help`)

Global flags:
  --workspace DIR         Workspace folder (default: $CHELA_HOME, else ~/.chela)
  -v, --verbose           More diagnostics on stderr (repeat for more)
  -q, --quiet             Only warnings and errors on stderr
  -V, --version           Print the version
";

const CHAT: &str = "\
Without -m: an interactive prompt with line editing and a history (the workspace's
.chat_history). /new starts a fresh session, /exit or Ctrl-D leaves, Ctrl-C stops a turn.

Options:
  -m, --message MESSAGE   Send one message, print the reply on stdout, exit. A message of
                          several words goes in quotes. `-m -` reads it from stdin (one final
                          newline is dropped). An empty message is refused.
  --session NAME          The conversation to continue (default: local)
  --new                   Archive the session first and start a fresh one

Examples:
  chela chat
  chela chat -m \"What is on my list for today?\"
  git diff | chela chat -m - --session review
";

const CONFIG: &str = "\
Verbs:
  show                    Every setting, its value and where it came from (secrets masked)
  get KEY                 One setting's value
  set KEY VALUE           Store a runtime override (in overrides.toml)
  unset KEY               Remove one runtime override
  reset                   Remove every runtime override

`chela config` alone shows every setting. Values come from, lowest first: the defaults,
chela.toml, overrides.toml, the environment. `chela config VERB --help` tells more.

Example:
  chela config set llm.model claude-sonnet-4-5
";

const CONFIG_SHOW: &str = "\
Prints each setting with its value and its source (default, chela.toml, override or
environment). Secrets such as API keys are masked.

Example:
  chela config show
";

const CONFIG_GET: &str = "\
Arguments:
  KEY                     A setting's name, as `chela config show` lists them

Example:
  chela config get llm.model
";

const CONFIG_SET: &str = "\
Arguments:
  KEY                     A setting's name, as `chela config show` lists them
  VALUE                   Its new value

The override is kept in overrides.toml and wins over chela.toml; an environment variable
still wins over it.

Flags:
  --keep-key              The change moves llm.base_url to another host: send it the stored
                          llm.api_key too (without a flag such a change is refused)
  --drop-key              The change moves llm.base_url to another host: store an empty
                          llm.api_key for it instead; set its own key afterwards

Examples:
  chela config set llm.provider openai
  chela config set llm.api_key none        (a local or LAN server that needs no key)
";

const CONFIG_UNSET: &str = "\
Arguments:
  KEY                     The setting whose override to remove

The value from chela.toml (or the default) applies again. If that moves llm.base_url to
another host, --keep-key or --drop-key says what happens to llm.api_key (see `config set`).

Example:
  chela config unset llm.model
";

const CONFIG_RESET: &str = "\
Removes overrides.toml's every entry: chela.toml and the defaults apply again.

Example:
  chela config reset
";

const CAP: &str = "\
Verbs:
  list                    Capability groups and their tools
  call ID [JSON]          Call a tool by hand
  enable|disable GROUP    Switch a group on or off for every caller
  show|hide GROUP         Show a group to the model, or hide it

`chela cap` alone lists the groups. `chela cap VERB --help` tells more.

Example:
  chela cap call get_current_time
";

const SKILL: &str = "\
Verbs:
  list                    Every skill: name, origin (workspace or built-in), what it unlocks
  show NAME               One skill's SKILL.md
  activate NAME           Activate it in a conversation: its text enters the prompt and the
                          hidden tool groups it names become visible there
  deactivate NAME         The opposite
  new NAME                Write skills/NAME/SKILL.md from a template, to edit
  delete NAME             Delete a workspace skill (built-in ones cannot be deleted)

Options:
  --session NAME          The conversation for activate/deactivate: a `chela chat` session
                          name (default: local), or CHANNEL/CHAT such as telegram/123456

A skill is skills/NAME/SKILL.md in the workspace (Agent Skills format: front matter with
name and description; Chela adds `groups: [...]` and `always: true`), with an optional
scripts/main.lua. A workspace skill overrides a built-in one of the same name.

Example:
  chela skill activate chela_settings --session work
";

const MCP: &str = "\
Each server in [mcp.servers.NAME] of chela.toml is the capability group mcp_NAME: its tools
are listed by `chela cap list` and called by the model or with `chela cap call`.
`chela mcp serve` is the other direction: Chela's own tools for other MCP clients.

Example:
  chela mcp test time
";

const MCP_LIST: &str = "\
Prints each configured server: how it is reached, whether it is connected (this command
connects the enabled ones), the protocol revision it speaks and how many tools it offers.

Example:
  chela mcp list
";

const MCP_TEST: &str = "\
Arguments:
  NAME                    A server's name, as in [mcp.servers.NAME]

Starts the server, finds its protocol era, lists its tools and prints them with the names
the model sees.

Example:
  chela mcp test time
";

const CAP_LIST: &str = "\
Prints each group: enabled or not, visible to the model or not, and its tools.

Example:
  chela cap list
";

const CAP_CALL: &str = "\
Arguments:
  ID                      The tool's name, as `chela cap list` shows it
  JSON                    Its arguments as one JSON object (default: {})

Example:
  chela cap call file_read '{\"path\":\"notes.md\"}'
";

const CAP_ENABLE: &str = "\
Arguments:
  GROUP                   A group's name, as `chela cap list` shows it

A disabled group's tools cannot be called, by the model or by hand.

Example:
  chela cap disable web
";

const CAP_SHOW: &str = "\
Arguments:
  GROUP                   A group's name, as `chela cap list` shows it

A hidden group's tools are not offered to the model.

Example:
  chela cap hide http
";

const DOCTOR: &str = "\
Checks the configuration, the workspace's files and permissions, and that the provider
answers (one small request). Each problem comes with what to do about it.

Example:
  chela doctor
";

const STATUS: &str = "\
Whether a `chela run` serves this workspace (a daemon of another workspace does not count):
its process id, version, uptime and address, and whether its gateway answers. Then each
channel: off, configured, or as the running daemon sees it (connected for how long, or
failing and why, with the last error); the voice devices (approved, seen lately, waiting), the pairing
requests waiting for you, and the next scheduled jobs. --json prints the same as JSON for
scripts. Exit status: 0 when a daemon runs here, 3 when none does.

Examples:
  chela status
  chela status --json
";

const SETUP: &str = "\
Asks, one at a time: the provider (anthropic, or openai for any OpenAI-compatible server),
its address and model (Enter keeps the provider's default), the API key (typed without
echo). Then it sends one tiny request and shows the provider's answer; only when that works
are the settings saved (as runtime overrides, in overrides.toml). A wrong key or address
saves nothing. Then, optionally, a Telegram bot token (and how pairing works) and the
systemd user service.

With any flag below, or when stdin is no terminal, nothing is asked: what is not given keeps
its current value (or the provider's default), and the test call still decides.

Options:
  --provider NAME         anthropic or openai
  --base-url URL          The provider's address (default: the provider's own)
  --model NAME            The model (default: the provider's)
  --api-key -             Read the API key from the first line of stdin
  --service               Install and start the systemd user service after saving

Examples:
  chela setup
  printf %s \"$OPENAI_API_KEY\" | chela setup --provider openai --model gpt-4.1-mini --api-key -
";

const GATEWAY: &str = "\
Prints gateway.token, which the web console and every gateway client must send. It shows the
secret itself, so it is printed only to a terminal (stdin and stdout both), never into a
pipe or a log, unless --yes says the output's destination is safe.

`chela gateway health` asks the gateway of gateway.listen for GET /healthz, which needs no
token and answers only that it is up; exit status 0 when it does (the Dockerfile's
HEALTHCHECK).

Options:
  --rotate                Make a new random token and store it (runtime override); the old
                          one stops working at once on a running daemon. Prints the new one.
  --yes                   Print even when stdin or stdout is not a terminal

Examples:
  chela gateway token
  chela gateway token --rotate
";

const BACKUP: &str = "\
Writes every file of the workspace to one tar archive (default:
chela-backup-YYYYMMDD-HHMMSS.tar in the current folder), taking the workspace's write locks
so no store changes half-way through. The archive holds the secrets (chela.toml,
overrides.toml, the sealed stores and their key) with their file modes kept, and is itself
written private to you (mode 600): keep it as safe as the workspace.

Examples:
  chela backup
  chela backup /mnt/usb/chela.tar
";

const RESTORE: &str = "\
Unpacks an archive `chela backup` wrote into the workspace, file modes kept. It refuses a
workspace that already holds files unless --force is given (then the archive's files replace
those of the same name), and refuses any archive entry that is not a plain file or folder
inside the workspace (absolute paths, `..`, links, devices). Stop `chela run` first.

Options:
  --force                 Restore over a workspace that is not empty

Examples:
  chela restore chela-backup-20261205-120000.tar --workspace ~/.chela
";

const USAGE_CMD: &str = "\
Sums the usage log every turn appends to (state/usage.jsonl): tokens in at the full price,
read from the provider's prompt cache, written to it, and out, per model and in all, with the
estimated cost from the price table ([llm.prices] in chela.toml, US dollars per million
tokens, over built-in prices for the common models). --session takes CHANNEL:CHAT or a chat
id; --since a local date. --json prints the same as JSON.

Examples:
  chela usage
  chela usage --session telegram:123456789 --since 2026-12-01
  chela usage --json
";

const STATE: &str = "\
Verbs:
  check                   Each store in state/ that Chela seals, and whether it is trusted
  trust FILE              Trust FILE (access.json, devices.json, mcp_endpoints.json) as it is

Who may talk to Chela (access.json), the approved voice devices (devices.json) and the
tokens of MCP tool hosts (mcp_endpoints.json) are sealed: Chela writes them only when you
act, with a seal only it can make. A store changed any other way (by hand, by another
program) is not trusted, and nothing in it takes effect, until you check it and trust it
here. The assistant's tools cannot reach state/ at all. `chela state` alone checks.

Example:
  chela state trust access.json
";

const MEMORY: &str = "\
Verbs:
  reindex                 Empty the memory index (state/memory-index/) and build it again

memory_recall and memory_search look things up in an index of memory/entries.jsonl,
MEMORY.md and the notes memory/*.md. The files stay the truth: the index is brought up to
date before every search (a file edited by hand is read again) and rebuilt whenever it is
missing or damaged, so this is rarely needed; it prints what was indexed.

Example:
  chela memory reindex
";

const PAIRING: &str = "\
Verbs:
  list                    Pairing requests waiting for you, and the approved senders
  approve CODE            Let the sender of CODE talk to Chela
  deny CODE               Refuse the request; its sender gets no new code for an hour
  revoke CHANNEL:SENDER   Take an approved sender's access away
  clear [CHANNEL]         Deny every waiting request, so a queue strangers filled is free again

Someone not in a channel's allow_from who messages Chela gets a one-time code of 8
letters and digits, valid for one hour, and nothing they send reaches the model. They pass
the code to you; you approve or deny it here or on the dashboard. At most 3 requests wait
per channel; when strangers fill them, `chela pairing clear` frees the queue. allow_from = [\"*\"] opens a channel to everyone; access.rate_per_hour limits
how often anyone may write (default 30 messages an hour). `chela pairing` alone lists.

Example:
  chela pairing approve 7KQ4MXT2
";

const PAIRING_LIST: &str = "\
Prints each waiting code with its channel, sender and the minutes it has left, then the
senders approved by pairing, then the channels' allow_from settings.

Example:
  chela pairing list
";

const PAIRING_APPROVE: &str = "\
Arguments:
  CODE                    The code the sender was given (any case; dashes and spaces are ignored)

The sender may talk to Chela from its next message on, also while `chela run` is running.

Example:
  chela pairing approve 7KQ4MXT2
";

const PAIRING_DENY: &str = "\
Arguments:
  CODE                    The code of the request to refuse

The request is dropped and the sender gets no new code for an hour; their messages are
ignored meanwhile.

Example:
  chela pairing deny 7KQ4MXT2
";

const PAIRING_CLEAR: &str = "\
Arguments:
  CHANNEL                 Only this channel's requests (telegram, feishu); all when left out

Every waiting request is denied, as `chela pairing deny` would: its code stops working and
its sender gets no new code for an hour, so the same strangers cannot fill the queue again.
Someone you want to let in asks for a new code afterwards (or approve them first).

Example:
  chela pairing clear telegram
";

const PAIRING_REVOKE: &str = "\
Arguments:
  CHANNEL:SENDER          The channel and the sender id, as `chela pairing list` shows them
                          (`chela pairing revoke CHANNEL SENDER` works too)

The sender's next message is a stranger's again: it gets a new pairing code. Senders listed in
a channel's allow_from setting are changed there, with `chela config set`.

Example:
  chela pairing revoke telegram:123456789
";

const SERVICE: &str = "\
Verbs:
  install                 Write the user unit for `chela run` on this workspace and start it
  uninstall               Stop it and remove the unit
  status                  Whether the unit is installed, enabled and running

`chela service` alone shows the status. `chela service VERB --help` tells more.

Example:
  chela --workspace ~/assistant service install
";

const SERVICE_INSTALL: &str = "\
Writes ~/.config/systemd/user/chela.service (under $XDG_CONFIG_HOME when set): this binary
and this workspace by absolute path, restarted on failure. Then runs
`systemctl --user daemon-reload` and `systemctl --user enable --now chela.service`.
Where systemd's user manager cannot be reached, it installs nothing: it prints the unit on
stdout and the commands to run, and exits with status 1.

The service does not see this shell's environment: keep API keys in the workspace
(`chela config set llm.api_key -`). `loginctl enable-linger` keeps it running while you
are logged out.

Example:
  chela service install
";

const SERVICE_UNINSTALL: &str = "\
Runs `systemctl --user disable --now chela.service`, removes the unit and reloads systemd.
The workspace is left as it is.

Example:
  chela service uninstall
";

const SERVICE_STATUS: &str = "\
Prints where the unit is, the command it runs, and what systemd says of it (enabled,
active). Logs: `journalctl --user -u chela`.

Example:
  chela service status
";

const CRON: &str = "\
Verbs:
  list                    Every job, its next fire time in your zone, and bad entries
  add JSON                Add a job, or replace the one with its id
  remove ID               Remove a job
  trigger ID              Ask the running daemon to run a job now (within a second)
  pause ID | resume ID    Stop a job from firing until resumed
  approve ID              Let a job the assistant made act on another chat (listed as
                          `waits for your approval`); until then it does nothing

A job: {\"id\":\"tea\",\"trigger\":{\"type\":\"cron\",\"expr\":\"0 16 * * 1-5\"},
\"action\":{\"type\":\"agent\",\"message\":\"Time for tea?\",\"channel\":\"telegram\",\"chat_id\":\"42\"}}
Triggers: once {at}, interval {every_s}, cron {expr, tz}. Actions: agent {message, channel,
chat_id} (the answer goes to that chat), cap {name, args}. The running daemon sees changes
within a second. scheduler.timezone, scheduler.missed_grace_secs and scheduler.max_jobs
are the settings.

Example:
  chela cron pause tea
";

const RULES: &str = "\
Verbs:
  list                    Every rule, who made it, and bad entries of rules.json
  approve ID              Let a rule the assistant made act beyond the chat it was made in
  remove ID               Remove a rule

A rule the assistant made (router_add_rule) acts only on the events of the chat it was made
in, and one that would talk or send to another chat does nothing until you approve it.
Rules you write into rules.json by hand are yours and run as written.

Example:
  chela rules approve daily-report
";

const HEARTBEAT: &str = "\
Every heartbeat.interval minutes (default 30) the daemon reads HEARTBEAT.md and, inside
heartbeat.active_hours, gives its open items (lines that are not blank, a heading or a
checked `- [x]` box) to the model. Its answer goes to heartbeat.channel/heartbeat.chat_id.
`chela heartbeat trigger` asks the running daemon for one now, inside the hours or not.
";

const RUN: &str = "\
Starts the daemon in the foreground: the gateway on gateway.listen (a web page, a WebSocket
and an OpenAI-compatible endpoint) and every configured channel. Many chats are answered
at once; the messages of one chat are answered in order. Settings changed with
`chela config set` or `chela cap` apply to the running daemon. SIGTERM or Ctrl-C stops it:
it takes no new messages, lets running turns finish for a moment, saves, and exits.

Example:
  chela run
";

const CONSOLE: &str = "\
Prints a link that opens the web console of the running `chela run` logged in. The link works
once, within 10 minutes; `chela run` prints one when it starts. Every gateway request but the
page needs gateway.token, on loopback too; the link is how the page gets it (one is made and
stored in overrides.toml if none is set). Keep the link to yourself as you would the token.

Example:
  chela console
";

const MCP_SERVE: &str = "\
Speaks the Model Context Protocol on stdin and stdout (one JSON-RPC message per line; logs go
to stderr), so an MCP client can use Chela's tools and a `chat` tool that runs a whole turn.
Both the initialize handshake (2024-11-05 to 2025-11-25) and 2026-07-28 are answered. The
running daemon (`chela run`) serves the same over HTTP at http://127.0.0.1:18789/mcp.

Settings:
  mcp.serve.groups   capability groups offered (default: memory,chat); disabled ones never are

Example (Claude Desktop's claude_desktop_config.json):
  {\"mcpServers\": {\"chela\": {\"command\": \"chela\", \"args\": [\"mcp\", \"serve\"]}}}
";

const BOARD: &str = "\
Checks the workspace's board.json (or FILE): its syntax, the chip, the device types, pins the
chip does not have or reserves, a pin used twice, duplicate ids and addresses. Each problem is
printed with its line; the exit status is 1 when there are any. Without a board.json Chela
uses the built-in simulated board.

Examples:
  chela board check
  chela board check crates/chela-board/boards/esp32c3-devkit.json
";

const DEVICE: &str = "\
xiaozhi-esp32 devices dial Chela's OTA URL, http://<gateway.listen>/xiaozhi/ota/. A device
Chela has not seen gets a 6-digit code, which it shows and says; nothing else until you approve
that code. An approved device gets the WebSocket URL and its own token on its first OTA check
after that, and the URL alone afterwards (it keeps the token it stored). At most
xiaozhi.max_pending devices wait, 4 from one address; more are refused until you clear them.

Verbs:
  list                    Waiting devices with their codes, approved and revoked devices
  approve CODE            Bind the device showing CODE (its next OTA check gets a token)
  deny CODE|all           Turn away the device waiting with CODE, or every waiting device
  revoke ID               Take a device's access away (ID is its MAC, aa:bb:cc:dd:ee:ff)
  transport ID mqtt|websocket|default
                          The transport its OTA answer hands out (default: xiaozhi.transport);
                          a change gives it a new login at its next OTA check (restart it)
  firmware set FILE VERSION [--device ID]
                          Copy FILE (a .bin) into the workspace and offer it to devices running
                          a version older than VERSION (or to one device)
  firmware clear          Stop offering firmware

Examples:
  chela device approve 123456
  chela device transport aa:bb:cc:dd:ee:ff mqtt
  chela device firmware set build/xiaozhi.bin 2.0.6
";
