use std::collections::BTreeMap;

use crate::toml::Value;

use super::*;

fn read(text: &str) -> Read<Settings> {
    Settings::read(Value::Table(crate::toml::parse(text).unwrap()))
}

/// Every field, each with a value that is not its default: a field whose name the reader
/// misspelt would stay at its default and land in `unknown`.
#[test]
fn every_field_is_read_under_its_own_name() {
    let text = r#"
        [channels.telegram]
        token = "t"
        allow_from = ["1", "2"]
        api_base = "http://t"
        max_file_bytes = 7
        stream_edits = true
        [channels.feishu]
        app_id = "a"
        app_secret = "s"
        allow_from = ["ou"]
        api_base = "http://f"
        encrypt_key = "e"
        mode = "webhook"
        verification_token = "v"
        webhook_listen = "127.0.0.1:1"
        [mcp.serve]
        groups = ["chat"]
        [mcp.servers.x]
        command = "c"
        args = ["a"]
        env = { K = "v" }
        url = "http://u"
        headers = { H = "h" }
        bearer = "b"
        cwd = "/tmp"
        connect = "lazy"
        timeout_secs = 9
        enabled = false
        [lua]
        enabled = true
        max_memory_bytes = 1
        timeout_ms = 2
        job_timeout_ms = 3
        max_instructions = 4
        max_output_bytes = 5
        max_jobs = 6
        stop_grace_ms = 7
        [gateway]
        listen = "127.0.0.1:2"
        token = "g"
        max_connections = 1
        connections_per_address = 2
        max_websockets = 3
        websockets_per_address = 4
        websocket_idle_secs = 5
        [llm.prices.m]
        input = 1
        output = 2.5
        cache_read = 0.5
        cache_write = 3
    "#;
    let s = read(text).unwrap();
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let pairs = |k: &str, v: &str| BTreeMap::from([(k.to_owned(), v.to_owned())]);
    let want = Settings {
        channels: Channels {
            telegram: Telegram {
                token: "t".into(),
                allow_from: strings(&["1", "2"]),
                api_base: "http://t".into(),
                max_file_bytes: 7,
                stream_edits: true,
                unknown: BTreeMap::new(),
            },
            feishu: Feishu {
                app_id: "a".into(),
                app_secret: "s".into(),
                allow_from: strings(&["ou"]),
                api_base: "http://f".into(),
                encrypt_key: "e".into(),
                mode: "webhook".into(),
                verification_token: "v".into(),
                webhook_listen: "127.0.0.1:1".into(),
                unknown: BTreeMap::new(),
            },
            unknown: BTreeMap::new(),
        },
        mcp: Mcp {
            servers: BTreeMap::from([(
                "x".to_owned(),
                McpServer {
                    command: "c".into(),
                    args: strings(&["a"]),
                    env: pairs("K", "v"),
                    url: "http://u".into(),
                    headers: pairs("H", "h"),
                    bearer: "b".into(),
                    cwd: "/tmp".into(),
                    connect: "lazy".into(),
                    timeout_secs: 9,
                    enabled: false,
                    unknown: BTreeMap::new(),
                },
            )]),
            serve: McpServe { groups: strings(&["chat"]), unknown: BTreeMap::new() },
            unknown: BTreeMap::new(),
        },
        lua: Lua {
            enabled: true,
            max_memory_bytes: 1,
            timeout_ms: 2,
            job_timeout_ms: 3,
            max_instructions: 4,
            max_output_bytes: 5,
            max_jobs: 6,
            stop_grace_ms: 7,
            unknown: BTreeMap::new(),
        },
        gateway: Gateway {
            listen: "127.0.0.1:2".into(),
            token: "g".into(),
            max_connections: 1,
            connections_per_address: 2,
            max_websockets: 3,
            websockets_per_address: 4,
            websocket_idle_secs: 5,
            unknown: BTreeMap::new(),
        },
        llm: Llm {
            prices: BTreeMap::from([(
                "m".to_owned(),
                PriceSetting {
                    input: Some(1.0),
                    output: Some(2.5),
                    cache_read: Some(0.5),
                    cache_write: Some(3.0),
                    unknown: BTreeMap::new(),
                },
            )]),
            unknown: BTreeMap::new(),
        },
        unknown: BTreeMap::new(),
    };
    assert_eq!(s, want);
}

#[test]
fn a_missing_field_keeps_its_default_and_an_unknown_name_is_kept_aside() {
    let s = read("[mcp.servers.x]\ncommand = \"c\"\ncomand = 1\n[lua]\nenabeld = true\n[extra]\nx = 1\n").unwrap();
    let x = &s.mcp.servers["x"];
    assert_eq!((x.connect.as_str(), x.timeout_secs, x.enabled), ("start", 60, true), "McpServer's own defaults");
    assert_eq!(x.unknown["comand"], Value::Integer(1));
    assert!(!s.lua.enabled);
    assert_eq!(s.lua.unknown["enabeld"], Value::Boolean(true));
    assert!(s.unknown.contains_key("extra"));
    assert_eq!(read("").unwrap(), Settings::default());
}

/// What serde refused is refused, and the words for what was expected are serde's (the error
/// messages quote them).
#[test]
fn a_value_of_the_wrong_type_says_what_was_expected() {
    for (text, expected) in [
        ("[channels.telegram]\ntoken = 5\n", "a string"),
        ("[channels.telegram]\nstream_edits = \"yes\"\n", "a boolean"),
        ("[channels.telegram]\nmax_file_bytes = -1\n", "u64"),
        ("[channels.telegram]\nmax_file_bytes = 1.5\n", "u64"),
        ("[channels.telegram]\nallow_from = \"1\"\n", "a sequence"),
        ("[channels.telegram]\nallow_from = [1]\n", "a string"),
        ("[mcp.servers.x]\nheaders = \"Bearer x\"\n", "a map"),
        ("[mcp.servers.x]\nenv = { K = 1 }\n", "a string"),
        ("[mcp]\nservers = 1\n", "a map"),
        ("[mcp.servers]\nx = 1\n", "struct McpServer"),
        ("[llm.prices.m]\ninput = \"cheap\"\n", "f64"),
        ("[llm]\nprices = []\n", "a map"),
        ("channels = 1\n", "struct Channels"),
        ("[channels]\ntelegram = 1\n", "struct Telegram"),
        ("[channels]\nfeishu = []\n", "struct Feishu"),
        ("[mcp]\nserve = 1\n", "struct McpServe"),
        ("lua = 1\n", "struct Lua"),
        ("gateway = 1\n", "struct Gateway"),
        ("llm = 1\n", "struct Llm"),
        ("mcp = 1\n", "struct Mcp"),
        ("[llm]\nprices = { m = 1 }\n", "struct PriceSetting"),
        ("[gateway]\nlisten = 1979-05-27\n", "a string"),
    ] {
        assert_eq!(read(text).unwrap_err().expected(), expected, "{text}");
    }
    assert_eq!(Settings::read(Value::Integer(1)).unwrap_err().expected(), "struct Settings");
}
