//! The command line as typed, and what each form parses to or why it is refused.

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
    assert_eq!(a.command, Command::Chat(ChatArgs { message: Some("hi".into()), session: "local".into(), new: false }));
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
        Command::Config(ConfigCmd::Set("llm.model".into(), "gpt-4o".into(), KeyChoice::Ask))
    );
    assert_eq!(
        cli(&["config", "set", "llm.base_url", "http://127.0.0.1:8080/v1", "--keep-key"]).unwrap().command,
        Command::Config(ConfigCmd::Set("llm.base_url".into(), "http://127.0.0.1:8080/v1".into(), KeyChoice::Keep))
    );
    assert_eq!(
        cli(&["config", "unset", "llm.base_url", "--drop-key"]).unwrap().command,
        Command::Config(ConfigCmd::Unset("llm.base_url".into(), KeyChoice::Drop))
    );
    let e = cli(&["chat", "--keep-key"]).unwrap_err().to_string();
    assert!(e.contains("only go with `chela config set|unset`"), "{e}");
    assert_eq!(cli(&["console"]).unwrap().command, Command::Console);
    assert_eq!(
        cli(&["cap", "call", "get_current_time"]).unwrap().command,
        Command::Cap(CapCmd::Call { id: "get_current_time".into(), json: "{}".into() })
    );
    assert_eq!(cli(&["cap", "hide", "files"]).unwrap().command, Command::Cap(CapCmd::Show("files".into(), false)));
    assert!(cli(&["config", "set", "llm.model"]).is_err());
    assert!(cli(&["cap", "explode"]).is_err());
    assert_eq!(cli(&["service", "install"]).unwrap().command, Command::Service(ServiceCmd::Install));
    assert_eq!(cli(&["service"]).unwrap().command, Command::Service(ServiceCmd::Status));
    let e = cli(&["service", "start"]).unwrap_err().to_string();
    assert!(e.contains("chela service --help"), "{e}");
}

#[test]
fn help_version_and_mistakes() {
    assert_eq!(cli(&[]).unwrap().command, Command::Help(Topic::Main));
    assert_eq!(cli(&["chat", "--help"]).unwrap().command, Command::Help(Topic::Chat));
    assert_eq!(cli(&["-V"]).unwrap().command, Command::Version);
    assert_eq!(cli(&["-vv", "doctor"]).unwrap().verbose, 2);
    let e = cli(&["chta"]).unwrap_err().to_string();
    assert!(e.contains("unknown command `chta`"), "{e}");
    assert!(e.contains("Did you mean `chela chat`?"), "{e}");
    let e = cli(&["doctr"]).unwrap_err().to_string();
    assert!(e.contains("Did you mean `chela doctor`?"), "{e}");
    let e = cli(&["xylophone"]).unwrap_err().to_string();
    assert!(!e.contains("Did you mean"), "nothing is close: {e}");
    let e = cli(&["chat", "--bogus"]).unwrap_err().to_string();
    assert!(e.contains("--bogus"), "{e}");
}

#[test]
fn every_command_and_verb_has_its_own_help() {
    for (args, topic) in [
        (&["chat", "-h"][..], Topic::Chat),
        (&["config", "--help"], Topic::Config),
        (&["config", "show", "--help"], Topic::ConfigShow),
        (&["config", "get", "--help"], Topic::ConfigGet),
        (&["--help", "config", "set"], Topic::ConfigSet),
        (&["config", "unset", "-h"], Topic::ConfigUnset),
        (&["config", "reset", "-h"], Topic::ConfigReset),
        (&["cap", "-h"], Topic::Cap),
        (&["cap", "list", "-h"], Topic::CapList),
        (&["cap", "call", "x", "--help"], Topic::CapCall),
        (&["cap", "disable", "-h"], Topic::CapEnable),
        (&["cap", "hide", "-h"], Topic::CapShow),
        (&["skill", "-h"], Topic::Skill),
        (&["skill", "activate", "x", "--help"], Topic::Skill),
        (&["doctor", "--help"], Topic::Doctor),
        (&["cron", "list", "--help"], Topic::Cron),
        (&["help", "cron"], Topic::Cron),
        (&["mcp", "test", "--help"], Topic::McpTest),
        (&["help", "mcp"], Topic::Mcp),
        (&["pairing", "-h"], Topic::Pairing),
        (&["pairing", "list", "-h"], Topic::PairingList),
        (&["pairing", "approve", "X", "--help"], Topic::PairingApprove),
        (&["help", "pairing", "deny"], Topic::PairingDeny),
        (&["pairing", "revoke", "--help"], Topic::PairingRevoke),
        (&["pairing", "clear", "--help"], Topic::PairingClear),
        (&["service", "-h"], Topic::Service),
        (&["service", "install", "-h"], Topic::ServiceInstall),
        (&["service", "uninstall", "--help"], Topic::ServiceUninstall),
        (&["help", "service", "status"], Topic::ServiceStatus),
        (&["help", "cap", "call"], Topic::CapCall),
        (&["help"], Topic::Main),
        (&["nosuch", "--help"], Topic::Main),
        (&["chat", "--bogus", "--help"], Topic::Chat),
    ] {
        assert_eq!(cli(args).unwrap().command, Command::Help(topic), "{args:?}");
        let text = topic.help();
        assert!(text.contains(&format!("Usage: {}", synopsis(topic))), "{topic:?}:\n{text}");
    }
}

#[test]
fn skill_subcommands() {
    let p = |args: &[&str]| cli(args).map(|c| c.command);
    assert_eq!(p(&["skill"]).unwrap(), Command::Skill(SkillCmd::List));
    assert_eq!(p(&["skill", "show", "x"]).unwrap(), Command::Skill(SkillCmd::Show("x".into())));
    assert_eq!(
        p(&["skill", "activate", "x"]).unwrap(),
        Command::Skill(SkillCmd::Activate { name: "x".into(), session: "local".into() })
    );
    assert_eq!(
        p(&["skill", "deactivate", "x", "--session", "telegram/42"]).unwrap(),
        Command::Skill(SkillCmd::Deactivate { name: "x".into(), session: "telegram/42".into() })
    );
    assert_eq!(p(&["skill", "new", "x"]).unwrap(), Command::Skill(SkillCmd::New("x".into())));
    assert_eq!(p(&["skill", "delete", "x"]).unwrap(), Command::Skill(SkillCmd::Delete("x".into())));
    assert!(p(&["skill", "show", "x", "--session", "s"]).is_err());
    assert!(p(&["skill", "activate", "x", "-m", "hi"]).is_err());
    let e = p(&["skill", "explode"]).unwrap_err().to_string();
    assert!(e.contains("chela skill --help"), "{e}");
}

#[test]
fn pairing_subcommands() {
    let p = |args: &[&str]| cli(args).map(|c| c.command);
    assert_eq!(p(&["pairing"]).unwrap(), Command::Pairing(PairingCmd::List));
    assert_eq!(p(&["pairing", "list"]).unwrap(), Command::Pairing(PairingCmd::List));
    assert_eq!(
        p(&["pairing", "approve", "7kq4mxt2"]).unwrap(),
        Command::Pairing(PairingCmd::Approve("7kq4mxt2".into()))
    );
    assert_eq!(p(&["pairing", "deny", "7KQ4MXT2"]).unwrap(), Command::Pairing(PairingCmd::Deny("7KQ4MXT2".into())));
    let revoke = Command::Pairing(PairingCmd::Revoke { channel: "telegram".into(), sender: "42".into() });
    assert_eq!(p(&["pairing", "revoke", "telegram:42"]).unwrap(), revoke);
    assert_eq!(p(&["pairing", "revoke", "telegram", "42"]).unwrap(), revoke);
    // An id with a colon of its own keeps it: only the first one separates.
    assert_eq!(
        p(&["pairing", "revoke", "ws:a:b"]).unwrap(),
        Command::Pairing(PairingCmd::Revoke { channel: "ws".into(), sender: "a:b".into() })
    );
    let e = p(&["pairing", "revoke", "42"]).unwrap_err().to_string();
    assert!(e.contains("chela pairing revoke telegram:123456789") && e.contains("chela pairing revoke --help"), "{e}");
    let e = p(&["pairing", "approve"]).unwrap_err().to_string();
    assert!(e.contains("`chela pairing approve CODE`") && e.contains("chela pairing approve --help"), "{e}");
    assert!(p(&["pairing", "accept", "X"]).is_err());
}

#[test]
fn a_message_split_by_the_shell_says_to_quote_it() {
    let e = cli(&["chat", "-m", "hello", "world"]).unwrap_err().to_string();
    assert!(e.contains(r#"`chela chat -m "hello world"`"#), "{e}");
    assert!(!e.contains("Usage") && !e.contains('\n'), "one line, no usage dump: {e}");
    let e = cli(&["chat", "hello"]).unwrap_err().to_string();
    assert!(e.contains(r#"`chela chat -m "hello"`"#), "{e}");
}

#[test]
fn mistakes_are_one_line_and_point_at_the_commands_help() {
    for (args, want) in [
        (&["chat", "--bogus"][..], "chela chat --help"),
        (&["--bogus", "chat"], "chela chat --help"),
        (&["config", "set", "llm.model"], "chela config set --help"),
        (&["cap", "call"], "chela cap call --help"),
        (&["cap", "explode"], "chela cap --help"),
        (&["doctor", "now"], "chela doctor --help"),
        (&["chat", "-m"], "chela chat --help"),
        (&["config", "show", "-m", "x"], "chela config show --help"),
    ] {
        let e = cli(args).unwrap_err().to_string();
        assert!(e.contains(want) && !e.contains('\n') && !e.contains("Usage:"), "{args:?}: {e}");
    }
    let e = cli(&["config", "set", "llm.model"]).unwrap_err().to_string();
    assert!(e.contains("`chela config set KEY VALUE [--keep-key|--drop-key]`"), "{e}");
    let e = cli(&["--bogus"]).unwrap_err().to_string();
    assert!(e.contains("--bogus") && e.contains("chela help"), "no command, still an error: {e}");
}

#[test]
fn a_value_after_config_set_key_is_a_value_even_with_a_dash() {
    let set = |k: &str, v: &str, c| Command::Config(ConfigCmd::Set(k.into(), v.into(), c));
    assert_eq!(
        cli(&["config", "set", "llm.max_tokens", "-5"]).unwrap().command,
        set("llm.max_tokens", "-5", KeyChoice::Ask)
    );
    assert_eq!(cli(&["config", "set", "x", "-"]).unwrap().command, set("x", "-", KeyChoice::Ask));
    assert_eq!(cli(&["config", "set", "x", "--not-a-flag"]).unwrap().command, set("x", "--not-a-flag", KeyChoice::Ask));
    assert_eq!(
        cli(&["config", "set", "x", "-1", "--keep-key"]).unwrap().command,
        set("x", "-1", KeyChoice::Keep),
        "flags after the value are still flags"
    );
    assert_eq!(cli(&["config", "set", "x", "--help"]).unwrap().command, Command::Help(Topic::ConfigSet));
    assert_eq!(cli(&["-v", "config", "set", "x", "-v", "y"]).unwrap().verbose, 2);
    // Anywhere else a dash still starts a flag.
    assert!(cli(&["config", "get", "-5"]).is_err());
    assert!(cli(&["config", "set", "x", "y", "-5"]).is_err());
}

#[test]
fn status_takes_json_and_nothing_else_does() {
    assert_eq!(cli(&["status"]).unwrap().command, Command::Status { json: false });
    assert_eq!(cli(&["status", "--json"]).unwrap().command, Command::Status { json: true });
    assert_eq!(cli(&["--json", "status"]).unwrap().command, Command::Status { json: true });
    assert_eq!(cli(&["status", "-h"]).unwrap().command, Command::Help(Topic::Status));
    let e = cli(&["doctor", "--json"]).unwrap_err().to_string();
    assert!(e.contains("--json only goes with `chela status`"), "{e}");
    assert!(cli(&["status", "now"]).is_err());
    assert!(cli(&["statsu"]).unwrap_err().to_string().contains("Did you mean `chela status`?"));
}

#[test]
fn an_empty_message_is_refused() {
    for m in ["", "   ", "\n\t"] {
        let e = cli(&["chat", "-m", m]).unwrap_err().to_string();
        assert!(e.contains("the message is empty"), "{m:?}: {e}");
    }
    assert!(cli(&["chat", "-m", "-"]).is_ok(), "stdin is read and checked later");
}

#[test]
fn setup_gateway_backup_and_restore_take_their_own_flags_only() {
    let c = cli(&["setup", "--provider", "openai", "--model", "m", "--api-key", "-", "--service"]).unwrap();
    let want = SetupArgs {
        provider: Some("openai".into()),
        base_url: None,
        model: Some("m".into()),
        key_from_stdin: true,
        service: true,
    };
    assert_eq!(c.command, Command::Setup(want));
    assert_eq!(cli(&["setup"]).unwrap().command, Command::Setup(SetupArgs::default()));
    assert!(cli(&["setup", "--api-key", "sk-secret"]).unwrap_err().to_string().contains("only `-`"));
    assert!(cli(&["chat", "--provider", "openai"]).unwrap_err().to_string().contains("only go with `chela setup`"));
    assert_eq!(
        cli(&["gateway", "token", "--rotate", "--yes"]).unwrap().command,
        Command::GatewayToken { rotate: true, yes: true }
    );
    assert_eq!(cli(&["gateway", "health"]).unwrap().command, Command::GatewayHealth);
    assert!(cli(&["status", "--rotate"]).is_err());
    assert_eq!(cli(&["backup"]).unwrap().command, Command::Backup(None));
    assert_eq!(cli(&["backup", "b.tar"]).unwrap().command, Command::Backup(Some("b.tar".into())));
    assert_eq!(
        cli(&["restore", "b.tar", "--force"]).unwrap().command,
        Command::Restore { file: "b.tar".into(), force: true }
    );
    assert!(cli(&["backup", "--force"]).is_err());
    assert!(cli(&["restore"]).is_err());
    assert!(cli(&["-q", "status"]).unwrap().quiet);
    assert_eq!(Topic::of(&["gateway".into(), "token".into()]), Some(Topic::Gateway));
}

#[test]
fn usage_takes_a_session_a_date_and_json() {
    let usage = |session: Option<&str>, since: Option<&str>, json: bool| Command::Usage {
        session: session.map(str::to_owned),
        since: since.map(str::to_owned),
        json,
    };
    assert_eq!(cli(&["usage"]).unwrap().command, usage(None, None, false));
    assert_eq!(
        cli(&["usage", "--session", "telegram:42", "--since", "2026-12-01", "--json"]).unwrap().command,
        usage(Some("telegram:42"), Some("2026-12-01"), true)
    );
    assert_eq!(cli(&["usage", "-h"]).unwrap().command, Command::Help(Topic::Usage));
    let e = cli(&["status", "--since", "2026-12-01"]).unwrap_err().to_string();
    assert!(e.contains("--since only goes with `chela usage`"), "{e}");
    assert!(cli(&["usage", "today"]).is_err());
    assert!(cli(&["usgae"]).unwrap_err().to_string().contains("Did you mean `chela usage`?"));
}
