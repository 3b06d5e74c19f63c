//! The permanent escape and abuse corpus for settings, secrets and writers that run at once.
//!
//! Every test runs the real `chela` binary on its own temporary workspace with a cleared
//! environment, and each item failed before the fix it guards: a secret shown in some output
//! path, a change lost to a parallel writer, a file that stopped every command.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A workspace in a temporary folder and the environment `chela` runs with.
struct Ws {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Ws {
    fn new() -> Ws {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        Ws { dir, home: tempfile::tempdir().unwrap(), env: Vec::new() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) {
        let path = self.path().join(name);
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
        c.args(args).env_clear().env("HOME", self.home.path()).env("CHELA_HOME", self.path());
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        Run::from(self.cmd(args).output().expect("cannot run chela"))
    }

    /// Runs `chela args` with `input` on standard input.
    fn run_with_stdin(&self, args: &[&str], input: &str) -> Run {
        let mut child = self.cmd(args).stdin(Stdio::piped()).spawn().expect("cannot run chela");
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        Run::from(child.wait_with_output().unwrap())
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    #[track_caller]
    fn ok(&self) -> &Run {
        assert_eq!(self.code, Some(0), "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }

    #[track_caller]
    fn failed(&self) -> &Run {
        assert_eq!(self.code, Some(1), "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }

    /// Neither stream shows `secret`.
    #[track_caller]
    fn hides(&self, secret: &str) -> &Run {
        assert!(
            !self.stdout.contains(secret) && !self.stderr.contains(secret),
            "`{secret}` was shown:\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    fn says(&self, needle: &str) -> &Run {
        assert!(
            self.stdout.contains(needle) || self.stderr.contains(needle),
            "expected `{needle}`:\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

// ---- Writers that run at once -------------------------------------------------------------

/// Ten processes set ten different keys at the same moment: all ten are kept.
#[test]
fn parallel_config_sets_of_different_keys_are_all_kept() {
    let ws = Ws::new();
    let keys = [
        ("llm.model", "m-parallel"),
        ("llm.max_tokens", "1234"),
        ("llm.max_retries", "2"),
        ("llm.timeout_secs", "77"),
        ("agent.max_iterations", "9"),
        ("agent.max_tool_calls", "7"),
        ("search.max_results", "3"),
        ("http.timeout_secs", "11"),
        ("memory.recent_days", "5"),
        ("timezone", "Europe/Berlin"),
    ];
    let children: Vec<_> =
        keys.iter().map(|(k, v)| ws.cmd(&["config", "set", k, v]).spawn().expect("cannot run chela")).collect();
    for child in children {
        Run::from(child.wait_with_output().unwrap()).ok();
    }
    for (k, v) in keys {
        let got = ws.run(&["config", "get", k]);
        got.ok();
        assert_eq!(got.stdout.trim(), v, "{k} was lost");
    }
}

/// Twenty processes each store a fact at the same moment: twenty entries, twenty ids.
#[test]
#[cfg(feature = "memory")]
fn parallel_memory_stores_from_processes_are_all_kept() {
    let ws = Ws::new();
    let children: Vec<_> = (0..20)
        .map(|i| {
            let args = format!("{{\"content\":\"process fact {i}\"}}");
            ws.cmd(&["cap", "call", "memory_store", &args]).spawn().expect("cannot run chela")
        })
        .collect();
    let mut ids: Vec<String> = children
        .into_iter()
        .map(|c| {
            let run = Run::from(c.wait_with_output().unwrap());
            run.ok();
            run.stdout.trim().strip_prefix("stored as ").expect("stored as ID").to_owned()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 20, "{ids:?}");
    let text = fs::read_to_string(ws.path().join("memory/entries.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 20, "{text}");
    for i in 0..20 {
        assert!(text.contains(&format!("\"process fact {i}\"")), "fact {i} lost:\n{text}");
    }
}

// ---- Secrets are secrets everywhere -------------------------------------------------------

const PROXY_PASSWORD: &str = "pr0xy-pa55word-leak";

/// A proxy URL with a password: `config show`, `config get` and `config set` mask it.
#[test]
fn a_proxy_password_is_masked_in_show_get_and_set() {
    let ws = Ws::new();
    ws.write("chela.toml", &format!("[proxy]\nurl = \"socks5h://me:{PROXY_PASSWORD}@127.0.0.1:1080\"\n"));
    ws.run(&["config", "show"]).ok().hides(PROXY_PASSWORD).says("socks5h://me:****@127.0.0.1:1080");
    ws.run(&["config", "get", "proxy.url"]).ok().hides(PROXY_PASSWORD).says("me:****@");
    let url = format!("http://you:{PROXY_PASSWORD}@127.0.0.1:3128");
    ws.run(&["config", "set", "proxy.url", &url]).ok().hides(PROXY_PASSWORD);
    assert!(fs::read_to_string(ws.path().join("overrides.toml")).unwrap().contains(PROXY_PASSWORD));
}

/// A refused value is quoted masked, from the command line, the files and the environment.
#[test]
fn invalid_values_are_quoted_masked() {
    let mut ws = Ws::new();
    let bad = format!("ftp://me:{PROXY_PASSWORD}@127.0.0.1:1080");
    ws.run(&["config", "set", "proxy.url", &bad]).failed().hides(PROXY_PASSWORD).says("proxy.url");
    let no_port = format!("socks5://me:{PROXY_PASSWORD}@127.0.0.1");
    ws.run(&["config", "set", "proxy.url", &no_port]).failed().hides(PROXY_PASSWORD).says("port");
    ws.write("chela.toml", &format!("[proxy]\nurl = \"{bad}\"\n"));
    ws.run(&["config", "show"]).failed().hides(PROXY_PASSWORD).says("chela.toml");
    fs::remove_file(ws.path().join("chela.toml")).unwrap();
    ws.env.push(("CHELA_PROXY__URL".into(), bad.clone()));
    ws.run(&["config", "show"]).failed().hides(PROXY_PASSWORD).says("CHELA_PROXY__URL");
}

/// The "still overrides" note names the variable, never its value.
#[test]
fn the_environment_override_note_masks_the_value() {
    let mut ws = Ws::new();
    ws.env.push(("CHELA_LLM__API_KEY".into(), "sk-from-the-env-0123456789".into()));
    ws.run(&["config", "set", "llm.api_key", "sk-typed-by-hand-0123456789"])
        .ok()
        .says("CHELA_LLM__API_KEY")
        .hides("from-the-env")
        .hides("typed-by-hand");
    ws.env = vec![("CHELA_PROXY__URL".into(), format!("http://u:{PROXY_PASSWORD}@127.0.0.1:3128"))];
    ws.run(&["config", "set", "proxy.url", "http://127.0.0.1:3128"])
        .ok()
        .says("CHELA_PROXY__URL")
        .hides(PROXY_PASSWORD);
    ws.run(&["config", "show"]).ok().hides(PROXY_PASSWORD);
}

/// Credentials inside `llm.base_url` are refused, with a pointer to `llm.api_key`, and the
/// refusal does not repeat them; `doctor` on such a file does not either.
#[test]
fn credentials_in_the_base_url_are_refused_without_being_shown() {
    let ws = Ws::new();
    let url = "https://bob:sk-in-the-url-999@127.0.0.1:9/v1";
    ws.run(&["config", "set", "llm.base_url", url]).failed().hides("sk-in-the-url-999").says("llm.api_key");
    assert!(!ws.path().join("overrides.toml").exists());
    ws.write("chela.toml", &format!("[llm]\nprovider = \"openai\"\nbase_url = \"{url}\"\n"));
    ws.run(&["config", "show"]).failed().hides("sk-in-the-url-999").says("llm.api_key");
    ws.run(&["doctor"]).failed().hides("sk-in-the-url-999").says("llm.base_url");
}

/// A password typed without percent-encoding may hold `/`, `?` or `#`, which end a URL's
/// authority: it is still user-info, so it is refused and never printed.
#[test]
fn a_password_with_an_unencoded_slash_is_refused_and_never_shown() {
    let ws = Ws::new();
    for (key, url) in [
        ("llm.base_url", "http://me:pa/ss-slash-secret@127.0.0.1:9/v1"),
        ("proxy.url", "socks5://me:se?q-slash-secret#x@127.0.0.1:1080"),
    ] {
        ws.run(&["config", "set", key, url]).failed().hides("slash-secret").says(key);
    }
    assert!(!ws.path().join("overrides.toml").exists());
}

/// `doctor` shows the key masked and the proxy without its password.
#[test]
fn doctor_masks_keys_and_proxy_passwords() {
    let ws = Ws::new();
    ws.write(
        "chela.toml",
        &format!(
            "[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"sk-doctor-secret-key-42\"\n\
             [proxy]\nurl = \"http://me:{PROXY_PASSWORD}@127.0.0.1:9\"\n"
        ),
    );
    ws.run(&["doctor"]).hides("sk-doctor-secret-key-42").hides(PROXY_PASSWORD);
}

/// `config set KEY -` reads the value from standard input: nothing in argv, one trailing
/// newline dropped, the rest kept as typed.
#[test]
fn a_secret_can_be_set_from_standard_input() {
    let ws = Ws::new();
    ws.run_with_stdin(&["config", "set", "llm.api_key", "-"], "sk-from-stdin-abcdef123\n").ok().hides("from-stdin");
    let stored = fs::read_to_string(ws.path().join("overrides.toml")).unwrap();
    assert!(stored.contains("\"sk-from-stdin-abcdef123\""), "{stored}");
    ws.run(&["config", "get", "llm.api_key"]).ok().hides("from-stdin").says("sk-f****23");
    let huge = "x".repeat(70 * 1024);
    ws.run_with_stdin(&["config", "set", "llm.api_key", "-"], &huge).failed().says("over");
}

// ---- Files that are not what they should be ------------------------------------------------

/// An overrides file far too large is refused by name before it is read.
#[test]
fn a_huge_overrides_file_is_refused_by_name() {
    let ws = Ws::new();
    ws.write("overrides.toml", &format!("# {}\n", "x".repeat(1024 * 1024)));
    ws.run(&["config", "show"]).failed().says("overrides.toml").says("limit");
}

/// Garbage in the overrides file is an error naming the file, not a crash.
#[test]
fn a_garbage_overrides_file_is_named() {
    let ws = Ws::new();
    fs::write(ws.path().join("overrides.toml"), [0xff, 0xfe, 0x00, b'[', b'[', 0x01, b'=']).unwrap();
    let run = ws.run(&["config", "show"]);
    run.failed().says("overrides.toml");
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

/// A table where a value is expected, and a value where a section is expected, are named.
#[test]
fn a_table_where_a_value_belongs_is_named() {
    let ws = Ws::new();
    ws.write("chela.toml", "[llm.model]\nname = \"x\"\n");
    ws.run(&["config", "show"]).failed().says("llm.model");
    ws.write("chela.toml", "llm = 5\n");
    ws.run(&["config", "show"]).failed().says("llm");
}

/// Secrets inside typed sections (a bot token, an MCP server's env and headers) are masked
/// by the same rule: by their names.
#[test]
fn typed_section_secrets_are_masked_in_show_and_get() {
    let ws = Ws::new();
    ws.write(
        "chela.toml",
        "[channels.telegram]\ntoken = \"123456:tg-bot-secret-xyz\"\nallow_from = [\"42\"]\n\
         [mcp.servers.gh]\ncommand = \"gh-mcp\"\nenv = { GITHUB_TOKEN = \"ghp_env-secret-abc\" }\n\
         [mcp.servers.remote]\nurl = \"https://mcp.example.com\"\nheaders = { Authorization = \"Bearer hdr-secret-def\" }\n",
    );
    let show = ws.run(&["config", "show"]);
    show.ok().hides("tg-bot-secret").hides("env-secret").hides("hdr-secret");
    show.says("mcp.servers.gh.command").says("\"gh-mcp\"").says("channels.telegram.allow_from");
    ws.run(&["config", "get", "channels.telegram.token"]).ok().hides("tg-bot-secret");
    ws.run_with_stdin(&["config", "set", "channels.telegram.token", "-"], "999:from-stdin-bot-token\n")
        .ok()
        .hides("from-stdin-bot-token");
    let text = fs::read_to_string(ws.path().join("overrides.toml")).unwrap();
    assert!(text.contains("[channels.telegram]") && text.contains("\"999:from-stdin-bot-token\""), "{text}");
}

/// A typo in a file is a warning with a suggestion; every command still runs.
#[test]
fn an_unknown_key_does_not_stop_commands() {
    let ws = Ws::new();
    ws.write("chela.toml", "[llm]\nmodle = \"x\"\n[gateway]\nlisen = 1\n");
    ws.run(&["config", "show"]).ok().says("Did you mean `llm.model`?").says("Did you mean `gateway.listen`?");
    ws.run(&["config", "set", "llm.model", "m"]).ok();
    ws.run(&["config", "get", "llm.model"]).ok().says("m");
}

// ---- Settings reload ----------------------------------------------------------------------

/// A watcher in this process sees what `chela config set` in another process stored.
#[test]
fn a_config_set_in_another_process_reaches_the_watcher() {
    let ws = Ws::new();
    let workspace = chela::workspace::Workspace::locate(Some(ws.path().to_path_buf())).unwrap();
    let mut watch = chela::config::ConfigWatch::new(workspace).unwrap();
    assert!(watch.poll().unwrap().is_none());
    ws.run(&["config", "set", "gateway.listen", "127.0.0.1:9123"]).ok();
    let cfg = watch.poll().unwrap().expect("the overrides file changed");
    assert_eq!(cfg.settings().gateway.addr().port(), 9123);
    assert_eq!(watch.current().get(chela_core::config::GATEWAY_LISTEN), "127.0.0.1:9123");
    assert!(watch.poll().unwrap().is_none());
}

/// `doctor` checks the typed sections together: an open gateway without a token fails, a
/// channel nobody may use and a missing MCP program are warnings; no secret is printed.
#[test]
fn doctor_checks_the_typed_sections_without_showing_them() {
    let ws = Ws::new();
    ws.write(
        "chela.toml",
        "[channels.telegram]\ntoken = \"123456:doctor-tg-secret\"\n[gateway]\nlisten = \"0.0.0.0:18789\"\n\
         [mcp.servers.gone]\ncommand = \"no-such-mcp-program-xyz\"\nenv = { API_TOKEN = \"doctor-env-secret\" }\n",
    );
    ws.run(&["doctor"])
        .failed()
        .hides("doctor-tg-secret")
        .hides("doctor-env-secret")
        .says("gateway.token is empty")
        .says("allow_from is empty")
        .says("`no-such-mcp-program-xyz` was not found");
}

/// A typed value of the wrong shape is named by its path, never quoted: it may be a secret.
#[test]
fn a_typed_value_of_the_wrong_shape_is_named_not_quoted() {
    let ws = Ws::new();
    ws.write("chela.toml", "[mcp.servers.r]\nurl = \"https://x.example\"\nheaders = \"Bearer shape-secret-77\"\n");
    ws.run(&["config", "show"]).failed().hides("shape-secret-77").says("mcp.servers.r.headers").says("chela.toml");
    ws.run(&["doctor"]).failed().hides("shape-secret-77");
}

/// A syntax error names the file and the line, and never quotes the line: it may hold a key.
#[test]
fn a_syntax_error_names_the_line_without_quoting_it() {
    let ws = Ws::new();
    ws.write("chela.toml", "[llm]\nmodel = \"m\"\napi_key = sk-unquoted-secret-1\n");
    ws.run(&["config", "show"]).failed().hides("sk-unquoted-secret-1").says("chela.toml").says("line 3");
    ws.write("chela.toml", "");
    ws.write("overrides.toml", "[llm]\napi_key = \"sk-unterminated-secret-2\n");
    ws.run(&["config", "set", "llm.model", "x"]).failed().hides("sk-unterminated-secret-2").says("line 2");
    ws.run(&["config", "show"]).failed().hides("sk-unterminated-secret-2").says("overrides.toml");
}
