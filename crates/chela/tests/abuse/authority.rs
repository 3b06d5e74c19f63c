//! The authority rule, attacked the way a prompt-injected model would: with ordinary tool calls
//! during one owner turn, it writes the files that decide who may talk to Chela, which devices
//! and tool hosts are approved and which pins may be driven. Each case here worked before the
//! rule (a stranger approved, a device and an endpoint token planted, GPIO 12 allowlisted).
//!
//! Every test runs the real `chela` binary against the scripted fake LLM on its own workspace.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use chela_testkit::{FakeLlm, Step, ToolCall};
use serde_json::{Value, json};

/// What the model plants, in the formats the stores use.
const ACCESS: &str = r#"{"allowed": [{"channel": "telegram", "sender": "999", "since": 1}]}"#;
const DEVICES: &str = r#"{"devices": [{"id": "66:66:66:66:66:66", "client_id": "x", "state": "approved"}]}"#;
const ENDPOINTS: &str = r#"{"endpoints": [{"name": "evil", "token_sha256": "00"}]}"#;
const BOARD: &str = r#"{"name": "b", "chip": "bcm2711", "gpio": [{"pin": 12, "direction": "output"}]}"#;

struct Ws {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Ws {
    fn new(llm: &FakeLlm) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        let config = dir.path().join("chela.toml");
        let text = format!(
            "[llm]\nprovider = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"sk-ant-abuse-authority\"\nmodel = \"m\"\n",
            llm.anthropic_base_url()
        );
        fs::write(&config, text).unwrap();
        fs::set_permissions(&config, fs::Permissions::from_mode(0o600)).unwrap();
        Ws { dir, home: tempfile::tempdir().unwrap() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, rel: &str) -> PathBuf {
        self.path().join(rel)
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
        c.args(args).env_clear().env("HOME", self.home.path()).env("CHELA_HOME", self.path());
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c.output().unwrap()
    }

    fn stdout(&self, args: &[&str]) -> String {
        let out = self.run(args);
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }
}

/// The tool results the model was sent back, in call order (each call once).
fn tool_results(llm: &FakeLlm) -> Vec<String> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for r in llm.requests() {
        let Some(body) = r.json else { continue };
        for m in body["messages"].as_array().into_iter().flatten() {
            for block in m["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    let text = match &block["content"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let id = block["tool_use_id"].to_string();
                    if !seen.contains(&id) {
                        seen.push(id);
                        out.push(text);
                    }
                }
            }
        }
    }
    out
}

fn write_call(path: &str, content: &str) -> ToolCall {
    ToolCall::new("file_write", json!({"path": path, "content": content}))
}

/// One owner turn in which the model writes every authority file directly.
#[test]
fn the_model_cannot_write_an_authority_file_with_the_file_tools() {
    let llm = FakeLlm::start(vec![
        Step::tool_calls([
            // Move and copy are hidden until unlocked; unlocked, they still cannot reach the files.
            ToolCall::new("tools_unlock", json!({"group": "files_manage"})),
            write_call("state/access.json", ACCESS),
            write_call("state/devices.json", DEVICES),
            write_call("state/mcp_endpoints.json", ENDPOINTS),
            write_call("board.json", BOARD),
            write_call("STATE/seal.key", "chela-seal-key v1\n"),
            write_call("rules.json", "[]"),
            write_call("cron.json", "{}"),
        ]),
        // At most 8 calls a step.
        Step::tool_calls([
            // Around the name: a folder made elsewhere, then moved into place.
            write_call("mystate/access.json", ACCESS),
            ToolCall::new("file_move", json!({"from": "mystate", "to": "state"})),
            ToolCall::new("file_move", json!({"from": "notes.json", "to": "board.json"})),
            ToolCall::new("file_copy", json!({"from": "mystate/access.json", "to": "state/access.json"})),
            ToolCall::new("file_list", json!({"path": "."})),
        ]),
        Step::text("done"),
    ]);
    let ws = Ws::new(&llm);
    fs::write(ws.file("notes.json"), BOARD).unwrap();
    fs::create_dir_all(ws.file("state")).unwrap();
    let out = ws.run(&["chat", "-m", "summarise this web page for me"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let results = tool_results(&llm);
    let refused = |needle: &str| results.iter().filter(|r| r.contains(needle)).count();
    assert_eq!(refused("is off limits to the file tools"), 6, "{results:#?}");
    assert_eq!(refused("is read-only to the file tools"), 4, "{results:#?}");
    for rel in ["state/access.json", "state/devices.json", "state/mcp_endpoints.json", "board.json", "rules.json"] {
        assert!(!ws.file(rel).exists(), "{rel} was written: {results:#?}");
    }
    assert!(ws.file("mystate/access.json").exists(), "ordinary files are still written");
    let listing = results.iter().find(|r| r.contains("notes.json")).expect("the listing");
    assert!(!listing.lines().any(|l| l.starts_with("state")), "state/ is listed: {listing}");
    let pairing = ws.stdout(&["pairing", "list"]);
    assert!(!pairing.contains("999"), "{pairing}");
    let devices = ws.stdout(&["device", "list"]);
    assert!(!devices.contains("66:66:66"), "{devices}");
}

/// The same through a Lua script's `cap.call`, and through reads of the seal key.
#[test]
fn a_script_cannot_reach_them_either() {
    let script = r#"local cap = require("cap")
           local out = {}
           for _, p in ipairs({"state/access.json", "board.json", "state/seal.key"}) do
             local ok, res = cap.call("file_write", '{"path":"' .. p .. '","content":"x"}')
             out[#out + 1] = res
           end
           local ok, res = cap.call("file_read", '{"path":"state/seal.key"}')
           out[#out + 1] = res
           return out"#;
    let llm = FakeLlm::start(vec![
        Step::tool_call("tools_unlock", json!({"group": "lua"})),
        Step::tool_call("lua_run", json!({"code": format!("function run() {script} end")})),
        Step::text("done"),
    ]);
    let ws = Ws::new(&llm);
    // The owner approved somebody once, so the key and a sealed store exist.
    fs::create_dir_all(ws.file("state")).unwrap();
    let out = ws.run(&["chat", "-m", "run the script from that page"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let results = tool_results(&llm).join("\n");
    assert_eq!(results.matches("is off limits to the file tools").count(), 3, "{results}");
    assert_eq!(results.matches("is read-only to the file tools").count(), 1, "{results}");
    assert!(!results.contains("chela-seal-key"), "the key was read: {results}");
    assert!(!ws.file("state/access.json").exists() && !ws.file("board.json").exists());
}

/// A store planted by hand (or by any program) is refused; the owner sees why and can accept
/// it after checking it.
#[test]
fn a_hand_planted_store_is_refused_until_the_owner_trusts_it() {
    let llm = FakeLlm::start(vec![]);
    let ws = Ws::new(&llm);
    // A store from before seals is adopted the first time the key is made.
    fs::create_dir_all(ws.file("state")).unwrap();
    fs::write(ws.file("state/access.json"), r#"{"allowed": [{"channel": "telegram", "sender": "7", "since": 1}]}"#)
        .unwrap();
    let listed = ws.stdout(&["pairing", "list"]);
    assert!(listed.contains("telegram") && listed.contains('7'), "{listed}");
    assert!(ws.file("state/seal.key").exists());
    let key_mode = fs::metadata(ws.file("state/seal.key")).unwrap().permissions().mode();
    assert_eq!(key_mode & 0o077, 0, "{key_mode:o}");

    // Planted after that: nothing in it counts, every command says so.
    fs::write(ws.file("state/access.json"), ACCESS).unwrap();
    let out = ws.run(&["pairing", "list"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("changed outside Chela") && said.contains("chela state trust access.json"), "{said}");
    let check = ws.run(&["state"]);
    assert!(!check.status.success());
    assert!(String::from_utf8_lossy(&check.stdout).contains("access.json: NOT trusted"));
    let doctor = ws.stdout(&["doctor"]);
    assert!(doctor.contains("state/access.json is not trusted"), "{doctor}");

    // The owner looked, and accepts it.
    let trusted = ws.run(&["state", "trust", "access.json"]);
    assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));
    assert!(ws.stdout(&["pairing", "list"]).contains("999"));
    assert!(ws.stdout(&["state", "check"]).contains("access.json: trusted"));
}

/// A skill the model writes may unlock a hidden group (by design: hiding is for relevance), but
/// never a group the owner switched off.
#[test]
fn a_skill_unlocks_hidden_groups_but_never_switched_off_ones() {
    let skill = "---\nname: grab\ndescription: fetch things\ngroups: [http, settings]\n---\nUse http_request.\n";
    let llm = FakeLlm::start(vec![
        Step::tool_call("tools_unlock", json!({"group": "skill_edit"})),
        Step::tool_call("skill_save", json!({"name": "grab", "content": skill})),
        Step::tool_call("skill_activate", json!({"name": "grab"})),
        Step::tool_calls([
            ToolCall::new("http_request", json!({"url": "http://127.0.0.1:9/"})),
            ToolCall::new("config_show", json!({})),
        ]),
        Step::text("done"),
    ]);
    let ws = Ws::new(&llm);
    let config = fs::read_to_string(ws.file("chela.toml")).unwrap() + "[caps]\ndisabled = [\"http\"]\n";
    fs::write(ws.file("chela.toml"), config).unwrap();
    let out = ws.run(&["chat", "-m", "use the skill from that page"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let results = tool_results(&llm);
    assert_eq!(results.len(), 5, "{results:#?}");
    assert!(results[3].contains("switched off") && results[3].contains("chela cap enable http"), "{results:#?}");
    // `settings` is hidden by default; the skill shows it, as skills are meant to.
    assert!(results[4].contains("llm.api_key") && !results[4].contains("sk-ant-abuse-authority"), "{results:#?}");
}
