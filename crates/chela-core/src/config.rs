//! The configuration model: every key Chela understands, its type, default and help.
//!
//! The layers (built-in defaults < `chela.toml` < runtime overrides < environment) are read by
//! the driver; this module says which keys exist and which values are valid, so the host, the
//! firmware and `chela config` agree. Values travel as text in every layer and are checked here.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

/// What a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// Shown masked everywhere.
    Secret,
    /// Empty, or an `http://` / `https://` URL.
    Url,
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    Choice(&'static [&'static str]),
    /// Comma-separated names.
    List,
    /// An IANA time zone name, or empty for the system's. Checked by the driver, which has the
    /// zone database.
    TimeZone,
    /// Empty, or `http://host:port` / `socks5://host:port`. Checked by the driver.
    Proxy,
    /// An IP address and port to listen on: `127.0.0.1:18789`, `[::1]:18789`, `0.0.0.0:80`.
    Listen,
}

/// One configuration key.
#[derive(Debug, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    pub help: &'static str,
}

impl Key {
    /// The environment variable that overrides this key: `CHELA_LLM__API_KEY` for `llm.api_key`.
    pub fn env_var(&self) -> String {
        let mut s = String::from("CHELA_");
        for c in self.name.chars() {
            if c == '.' {
                s.push_str("__");
            } else {
                s.push(c.to_ascii_uppercase());
            }
        }
        s
    }

    /// The section (`llm` for `llm.api_key`), empty for top-level keys.
    pub fn section(&self) -> &'static str {
        self.name.split_once('.').map_or("", |(s, _)| s)
    }

    /// The name inside its section.
    pub fn field(&self) -> &'static str {
        self.name.split_once('.').map_or(self.name, |(_, f)| f)
    }

    /// Whether the value is a credential: declared [`Kind::Secret`], or named like one
    /// (see [`is_secret_name`]). Deriving it from the name means a new `*_token` key cannot be
    /// added and forgotten in the masking.
    pub fn is_secret(&self) -> bool {
        self.kind == Kind::Secret || is_secret_name(self.name)
    }

    /// `value` as it may be shown anywhere (`config show/get/set`, errors, logs, doctor):
    /// the whole value masked for a secret key, a URL's user-info masked for any other.
    pub fn shown(&self, value: &str) -> String {
        if self.is_secret() { mask(value) } else { mask_url_userinfo(value) }
    }
}

/// Whether a setting or variable name (`llm.api_key`, `channels.telegram.token`,
/// `GITHUB_TOKEN`, a header `Authorization`) names a credential. The name is split into words
/// at `.`, `_` and `-`; it is secret when its last word is `key` (`*_key`), or a word contains
/// `token`, `secret`, `password`, `passwd`, `credential` or is `authorization`/`cookie`.
/// `tokens` alone is a count (`llm.max_tokens`), not a credential.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(['.', '_', '-']).filter(|w| !w.is_empty()).collect();
    words.last().is_some_and(|w| *w == "key" || *w == "apikey")
        || words.iter().any(|w| {
            (w.contains("token") && *w != "tokens")
                || ["secret", "password", "passwd", "credential"].iter().any(|s| w.contains(s))
                || matches!(*w, "authorization" | "cookie" | "bearer")
        })
}

/// `value` with the password of any URL user-info masked: `socks5://user:****@host:1080`;
/// user-info without a password (`https://TOKEN@host`) is masked whole. Other text is
/// returned as it is.
pub fn mask_url_userinfo(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let skip = match userinfo_end(url_token(tail)) {
            Some(at) => {
                match tail[..at].split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":****");
                    }
                    None => out.push_str("****"),
                }
                at
            }
            None => 0,
        };
        rest = &tail[skip..];
    }
    out.push_str(rest);
    out
}

/// Whether `value` holds a URL with user-info (`scheme://user[:pass]@host`).
pub fn has_url_userinfo(value: &str) -> bool {
    value.split("://").skip(1).any(|t| userinfo_end(url_token(t)).is_some())
}

/// A URL after its `scheme://`, up to the whitespace that ends it.
fn url_token(t: &str) -> &str {
    &t[..t.find(char::is_whitespace).unwrap_or(t.len())]
}

/// Where the user-info of `token` (a URL without its `scheme://`) ends: the index of its `@`.
/// A well-formed URL has it before the first `/`, `?` or `#`. A password written without
/// percent-encoding may itself hold one of those (`user:pa/ss@host`): when the part before the
/// first of them is `something:` followed by anything but a port number, and an `@` comes later,
/// everything up to the last `@` is the user-info. (A password that starts with digits and then
/// a `/` looks exactly like `host:port/path`, and is not caught.)
fn userinfo_end(token: &str) -> Option<usize> {
    let strict = token.find(['/', '?', '#']).unwrap_or(token.len());
    let authority = &token[..strict];
    if let Some(at) = authority.rfind('@') {
        return Some(at);
    }
    // `[::1]` alone is an address, not `user:pass`.
    let after_colon = authority.rsplit_once(':').filter(|_| !authority.ends_with(']'))?.1;
    let is_port = !after_colon.is_empty() && after_colon.bytes().all(|b| b.is_ascii_digit());
    if is_port { None } else { token.rfind('@') }
}

macro_rules! keys {
    ($($id:ident = $name:literal, $kind:expr, $default:literal, $help:literal;)*) => {
        $(pub const $id: &Key = &Key { name: $name, kind: $kind, default: $default, help: $help };)*
        /// Every key, in the order `chela config show` lists them.
        pub const KEYS: &[&Key] = &[$($id),*];
    };
}

const PROVIDERS: &[&str] = &["anthropic", "openai"];
const LOG_LEVELS: &[&str] = &["error", "warn", "info", "debug", "trace"];

keys! {
    LLM_PROVIDER = "llm.provider", Kind::Choice(PROVIDERS), "anthropic",
        "Wire format: anthropic (Messages API) or openai (any Chat Completions server).";
    LLM_BASE_URL = "llm.base_url", Kind::Url, "",
        "Provider URL. Empty: https://api.anthropic.com or https://api.openai.com/v1 (OpenAI-style URLs include /v1).";
    LLM_API_KEY = "llm.api_key", Kind::Secret, "",
        "API key. ANTHROPIC_API_KEY / OPENAI_API_KEY are used when this is empty.";
    LLM_MODEL = "llm.model", Kind::Text, "",
        "Model name. Empty: claude-sonnet-4-5 (anthropic) or gpt-4.1-mini (openai).";
    LLM_MAX_TOKENS = "llm.max_tokens", Kind::Int { min: 1, max: 1_000_000 }, "4096",
        "Most tokens one reply may have.";
    LLM_STREAM = "llm.stream", Kind::Bool, "true",
        "Stream replies token by token.";
    LLM_PROMPT_CACHE = "llm.prompt_cache", Kind::Bool, "true",
        "Mark the stable start of each request (tools, the stable system prompt, earlier history) for the \
         provider's prompt cache: Anthropic cache_control breakpoints.";
    LLM_PROMPT_CACHE_KEY = "llm.prompt_cache_key", Kind::Choice(&["auto", "on", "off"]), "auto",
        "Send OpenAI's prompt_cache_key (one per conversation): auto sends it to api.openai.com only, on to \
         any OpenAI-compatible server (some refuse unknown fields), off never.";
    LLM_MAX_RETRIES = "llm.max_retries", Kind::Int { min: 0, max: 10 }, "4",
        "Retries on rate limits, server errors and dropped connections.";
    LLM_TIMEOUT_SECS = "llm.timeout_secs", Kind::Int { min: 1, max: 3600 }, "120",
        "Seconds to wait for the provider to send anything before giving up.";
    LLM_DEADLINE_SECS = "llm.deadline_secs", Kind::Int { min: 1, max: 86_400 }, "600",
        "Seconds one model call may take in all, retries included, however the server keeps it busy.";
    AGENT_MAX_ITERATIONS = "agent.max_iterations", Kind::Int { min: 1, max: 100 }, "10",
        "Rounds of tool calls in one turn before the model must answer.";
    AGENT_MAX_TOOL_CALLS = "agent.max_tool_calls", Kind::Int { min: 1, max: 64 }, "8",
        "Tool calls run from one model reply.";
    AGENT_HISTORY_BUDGET = "agent.history_budget", Kind::Int { min: 1024, max: 4_000_000 }, "65536",
        "Bytes of conversation sent to the model; older exchanges are left out.";
    AGENT_COMPACTION = "agent.compaction", Kind::Bool, "true",
        "Fold the oldest turns of a long conversation into a summary the model writes, instead of leaving them out.";
    AGENT_MAX_TOOL_OUTPUT = "agent.max_tool_output", Kind::Int { min: 256, max: 1_000_000 }, "16384",
        "Bytes of one tool result the model sees.";
    TIMEZONE = "timezone", Kind::TimeZone, "",
        "Your IANA time zone, e.g. Asia/Shanghai. Empty: the system's.";
    PROXY_URL = "proxy.url", Kind::Proxy, "",
        "Proxy for all outbound traffic: http://host:port (CONNECT) or socks5://[user:pass@]host:port.";
    SEARCH_TAVILY_KEY = "search.tavily_key", Kind::Secret, "",
        "Tavily API key for web_search (preferred when set).";
    SEARCH_BRAVE_KEY = "search.brave_key", Kind::Secret, "",
        "Brave Search API key for web_search (used when no Tavily key is set).";
    SEARCH_TAVILY_URL = "search.tavily_url", Kind::Url, "https://api.tavily.com",
        "Tavily API base URL.";
    SEARCH_BRAVE_URL = "search.brave_url", Kind::Url, "https://api.search.brave.com",
        "Brave Search API base URL.";
    SEARCH_MAX_RESULTS = "search.max_results", Kind::Int { min: 1, max: 20 }, "5",
        "Results web_search returns.";
    HTTP_ALLOW_PRIVATE = "http.allow_private", Kind::Bool, "false",
        "Let http_request reach loopback, private and link-local addresses (your LAN, cloud metadata).";
    HTTP_TIMEOUT_SECS = "http.timeout_secs", Kind::Int { min: 1, max: 300 }, "30",
        "Seconds http_request and web_search wait for an answer.";
    HTTP_MAX_RESPONSE_BYTES = "http.max_response_bytes", Kind::Int { min: 1024, max: 16_777_216 }, "65536",
        "Bytes of a response body http_request returns; the rest is cut.";
    FILES_MAX_READ_BYTES = "files.max_read_bytes", Kind::Int { min: 1024, max: 16_777_216 }, "65536",
        "Bytes file_read returns at most per call (use offset for more).";
    FILES_MAX_WRITE_BYTES = "files.max_write_bytes", Kind::Int { min: 1024, max: 67_108_864 }, "1048576",
        "Largest file the file tools write, copy or append to.";
    FILES_ALLOW_VCS_WRITES = "files.allow_vcs_writes", Kind::Bool, "false",
        "Let the file tools write in version-control folders (.git, .hg, .svn…), where a write can run commands.";
    MEMORY_RECENT_DAYS = "memory.recent_days", Kind::Int { min: 0, max: 30 }, "3",
        "Days of daily notes (memory/YYYY-MM-DD.md) included in the prompt.";
    MEMORY_FLUSH_BEFORE_COMPACT = "memory.flush_before_compact", Kind::Bool, "true",
        "Before the oldest turns are folded into a summary, give the model one silent step to store what the person \
         said that must be remembered (memory_store / memory_update only).";
    MEMORY_INDEX_SESSIONS = "memory.index_sessions", Kind::Bool, "false",
        "Let memory_search find past conversations too (sessions/*.jsonl and the archive: what the person and Chela \
         wrote, never tool calls or results). Off: every conversation's text would be searchable from any chat.";
    MEMORY_EMBEDDINGS_URL = "memory.embeddings_url", Kind::Url, "",
        "OpenAI-compatible embeddings server URL, including /v1 (OpenAI, Ollama, a local server). With \
         memory.embeddings_model set, memories are embedded in the background and searches fuse meaning with \
         keywords. Empty: keyword search alone.";
    MEMORY_EMBEDDINGS_MODEL = "memory.embeddings_model", Kind::Text, "",
        "Embedding model name, e.g. text-embedding-3-small or nomic-embed-text. A new name embeds everything again.";
    MEMORY_EMBEDDINGS_KEY = "memory.embeddings_key", Kind::Secret, "",
        "API key of the embeddings server (none for a local one).";
    PROMPT_SOUL_BYTES = "prompt.soul_bytes", Kind::Int { min: 0, max: 1_000_000 }, "4096",
        "Bytes of SOUL.md in the prompt; more is cut with a note.";
    PROMPT_AGENTS_BYTES = "prompt.agents_bytes", Kind::Int { min: 0, max: 1_000_000 }, "4096",
        "Bytes of AGENTS.md in the prompt.";
    PROMPT_USER_BYTES = "prompt.user_bytes", Kind::Int { min: 0, max: 1_000_000 }, "4096",
        "Bytes of USER.md in the prompt.";
    PROMPT_MEMORY_BYTES = "prompt.memory_bytes", Kind::Int { min: 0, max: 1_000_000 }, "8192",
        "Bytes of MEMORY.md in the prompt.";
    PROMPT_ENTRIES_BYTES = "prompt.entries_bytes", Kind::Int { min: 0, max: 1_000_000 }, "4096",
        "Bytes of remembered entries (newest) in the prompt.";
    PROMPT_DAILY_BYTES = "prompt.daily_bytes", Kind::Int { min: 0, max: 1_000_000 }, "6144",
        "Bytes of recent daily notes (newest) in the prompt.";
    TOOLS_TIMEOUT_SECS = "tools.timeout_secs", Kind::Int { min: 1, max: 3600 }, "120",
        "Seconds one tool call may run before it is stopped and reported as timed out.";
    LOG_LEVEL = "log.level", Kind::Choice(LOG_LEVELS), "info",
        "What `chela run` logs on stderr: error, warn, info (start, channels, pairing, jobs, stop) or debug; -v and -q change it.";
    DAEMON_TRIM_IDLE_SECS = "daemon.trim_idle_secs", Kind::Int { min: 0, max: 86_400 }, "30",
        "Linux: once `chela run` has started, and again after this many seconds without a message, it gives the \
         kernel back the program and library pages it is not using (read again from the page cache when needed) \
         and the allocator's free memory; 0: never. Read when `chela run` starts.";
    SESSIONS_MAX_WAITING = "sessions.max_waiting", Kind::Int { min: 1, max: 1000 }, "8",
        "Messages that may wait in one conversation while a turn runs; more are refused as busy.";
    SESSIONS_MAX_LIVE = "sessions.max_live", Kind::Int { min: 1, max: 10_000 }, "64",
        "Conversations kept open at once (quiet ones close after 10 minutes; when all are taken, the least recently used quiet one closes).";
    SKILLS_SUMMARY_BUDGET = "skills.summary_budget", Kind::Int { min: 0, max: 1_000_000 }, "2048",
        "Bytes of the one-line-per-skill summary in the prompt; skills past it are counted, not listed.";
    SKILLS_MAX_BYTES = "skills.max_bytes", Kind::Int { min: 1024, max: 1_048_576 }, "32768",
        "Largest SKILL.md read; an active skill's whole text enters the prompt.";
    SKILLS_MAX_ACTIVE = "skills.max_active", Kind::Int { min: 1, max: 64 }, "8",
        "Skills active at once in one conversation.";
    SKILLS_CACHE_TTL_SECS = "skills.cache_ttl_secs", Kind::Int { min: 0, max: 86_400 }, "300",
        "Seconds a parsed SKILL.md is trusted before it is read again, even if its size and mtime did not change.";
    SKILLS_CACHE_MAX = "skills.cache_max", Kind::Int { min: 1, max: 4096 }, "64",
        "Parsed skills kept in memory; the least recently used goes first.";
    CAPS_DISABLED = "caps.disabled", Kind::List, "",
        "Capability groups switched off for every caller (`chela cap disable GROUP`).";
    CAPS_HIDDEN = "caps.hidden", Kind::List, "",
        "Capability groups the model does not see (`chela cap hide GROUP`).";
    CAPS_SHOWN = "caps.shown", Kind::List, "",
        "Groups hidden by default that the model sees (`chela cap show GROUP`).";
    MCP_SERVE_GROUPS = "mcp.serve.groups", Kind::List, "memory,chat",
        "Capability groups `chela mcp serve` and the gateway's /mcp offer to MCP clients; `chat` is a tool that runs a whole turn.";
    TELEGRAM_TOKEN = "channels.telegram.token", Kind::Secret, "",
        "Telegram bot token from @BotFather. Empty: the Telegram channel is off.";
    TELEGRAM_ALLOW_FROM = "channels.telegram.allow_from", Kind::List, "",
        "Telegram user ids allowed to talk to Chela; * lets everyone in. Others get a pairing code (`chela pairing`).";
    TELEGRAM_API_BASE = "channels.telegram.api_base", Kind::Url, "https://api.telegram.org",
        "Telegram Bot API base URL (a self-hosted Bot API server works too). Read when `chela run` starts.";
    TELEGRAM_MAX_FILE_BYTES = "channels.telegram.max_file_bytes", Kind::Int { min: 1024, max: 20_971_520 }, "10485760",
        "Largest photo, document or voice note taken from Telegram; bigger ones are refused with a reply.";
    TELEGRAM_STREAM_EDITS = "channels.telegram.stream_edits", Kind::Bool, "true",
        "Show an answer growing in one Telegram message (edited at most once a second) while it is written.";
    FEISHU_APP_ID = "channels.feishu.app_id", Kind::Text, "",
        "Feishu/Lark app id. Empty: the Feishu channel is off.";
    FEISHU_APP_SECRET = "channels.feishu.app_secret", Kind::Secret, "",
        "Feishu/Lark app secret.";
    FEISHU_ALLOW_FROM = "channels.feishu.allow_from", Kind::List, "",
        "Feishu open_ids allowed to talk to Chela; * lets everyone in. Others get a pairing code (`chela pairing`).";
    FEISHU_API_BASE = "channels.feishu.api_base", Kind::Url, "https://open.feishu.cn",
        "Feishu open platform base URL; Lark's is https://open.larksuite.com.";
    FEISHU_ENCRYPT_KEY = "channels.feishu.encrypt_key", Kind::Secret, "",
        "Webhook mode: the app's Encrypt Key; events are then encrypted and signed. Empty: plain events.";
    FEISHU_MODE = "channels.feishu.mode", Kind::Choice(&["ws", "webhook"]), "ws",
        "How Feishu events arrive: ws (a long connection Chela opens, no public address needed) or webhook.";
    FEISHU_VERIFICATION_TOKEN = "channels.feishu.verification_token", Kind::Secret, "",
        "Webhook mode: the app's Verification Token, which every event must carry. Empty: not checked.";
    FEISHU_WEBHOOK_LISTEN = "channels.feishu.webhook_listen", Kind::Text, "127.0.0.1:18790",
        "Webhook mode: the address Chela listens on for Feishu's POSTs (put a TLS proxy in front).";
    GATEWAY_LISTEN = "gateway.listen", Kind::Listen, "127.0.0.1:18789",
        "Address and port the daemon's gateway listens on; every address needs gateway.token.";
    GATEWAY_TOKEN = "gateway.token", Kind::Secret, "",
        "Token clients of the gateway must present, on loopback too; made on first start when empty.";
    GATEWAY_MAX_CONNECTIONS = "gateway.max_connections", Kind::Int { min: 8, max: 65_536 }, "256",
        "Connections the gateway serves at once; the last eighth is kept for this machine and gateway.token holders.";
    GATEWAY_CONNECTIONS_PER_ADDRESS = "gateway.connections_per_address", Kind::Int { min: 1, max: 65_536 }, "16",
        "Connections one address other than this machine may hold on the gateway.";
    GATEWAY_MAX_WEBSOCKETS = "gateway.max_websockets", Kind::Int { min: 1, max: 65_536 }, "128",
        "WebSockets (chat, xiaozhi devices, MCP tool hosts) open on the gateway at once.";
    GATEWAY_WEBSOCKETS_PER_ADDRESS = "gateway.websockets_per_address", Kind::Int { min: 1, max: 65_536 }, "8",
        "WebSockets one address other than this machine may hold on the gateway.";
    GATEWAY_WEBSOCKET_IDLE_SECS = "gateway.websocket_idle_secs", Kind::Int { min: 10, max: 86_400 }, "300",
        "Seconds a /ws chat socket may go without a message either way (and no answer pending) before it is closed.";
    ACCESS_RATE_PER_HOUR = "access.rate_per_hour", Kind::Int { min: 0, max: 3_600_000 }, "30",
        "Messages one sender may send per hour on any channel (bursts allowed); 0: no limit.";
    LUA_ENABLED = "lua.enabled", Kind::Bool, "true",
        "Let the model run Lua scripts in the sandbox (they can use only the tools the model can use).";
    LUA_MAX_MEMORY_BYTES = "lua.max_memory_bytes", Kind::Int { min: 65_536, max: 268_435_456 }, "16777216",
        "Memory one Lua script may use.";
    LUA_TIMEOUT_MS = "lua.timeout_ms", Kind::Int { min: 10, max: 600_000 }, "5000",
        "Milliseconds one Lua script run with lua_run may take.";
    LUA_JOB_TIMEOUT_MS = "lua.job_timeout_ms", Kind::Int { min: 10, max: 86_400_000 }, "600000",
        "Milliseconds one background Lua job (lua_run_async) may run, sleeps included.";
    LUA_MAX_INSTRUCTIONS = "lua.max_instructions", Kind::Int { min: 1000, max: 1_000_000_000_000 }, "100000000",
        "Lua VM instructions one script may run.";
    LUA_MAX_OUTPUT_BYTES = "lua.max_output_bytes", Kind::Int { min: 1024, max: 16_777_216 }, "65536",
        "Bytes one Lua script may print or log.";
    LUA_MAX_JOBS = "lua.max_jobs", Kind::Int { min: 1, max: 64 }, "4",
        "Background Lua jobs running at once.";
    LUA_STOP_GRACE_MS = "lua.stop_grace_ms", Kind::Int { min: 0, max: 60_000 }, "2000",
        "Milliseconds lua_job_stop waits for a job to finish by itself before stopping it by force.";
    SCHEDULER_TIMEZONE = "scheduler.timezone", Kind::TimeZone, "",
        "IANA zone of cron jobs and the heartbeat's active hours. Empty: `timezone`, else the system's (TZ, /etc/localtime).";
    SCHEDULER_MISSED_GRACE_SECS = "scheduler.missed_grace_secs", Kind::Int { min: 0, max: 31_622_400 }, "3600",
        "How late a job missed while Chela was down may still run (once) at start, for jobs that name no grace_s.";
    SCHEDULER_MAX_JOBS = "scheduler.max_jobs", Kind::Int { min: 1, max: 1000 }, "100",
        "Most scheduled jobs kept in cron.json; adding more is refused, extra entries in the file are reported.";
    HEARTBEAT_INTERVAL = "heartbeat.interval", Kind::Int { min: 0, max: 10_080 }, "30",
        "Minutes between heartbeats (HEARTBEAT.md is read and open items go to the model); 0: no heartbeat.";
    HEARTBEAT_ACTIVE_HOURS = "heartbeat.active_hours", Kind::Text, "",
        "Wall-clock window for heartbeats in the scheduler's zone, like 08:00-22:00. Empty: all day.";
    HEARTBEAT_CHANNEL = "heartbeat.channel", Kind::Text, "",
        "Channel whose chat gets the heartbeat's answer (telegram, feishu, ws). Empty: the answer is only logged.";
    HEARTBEAT_CHAT_ID = "heartbeat.chat_id", Kind::Text, "",
        "Chat of heartbeat.channel that gets the heartbeat's answer.";
    MODEL_VISION = "model.vision", Kind::Bool, "true",
        "The model takes images (photos, images tools return). Off (a text-only model): each image is a short note like [image: image/png, 1.2 KiB].";
    TOOLS_MAX_IMAGE_BYTES = "tools.max_image_bytes", Kind::Int { min: 0, max: 20_971_520 }, "1048576",
        "Bytes of images one tool result may show the model; an image past it is a note naming this setting.";
    TOOLS_MAX_TURN_IMAGE_BYTES = "tools.max_turn_image_bytes", Kind::Int { min: 0, max: 104_857_600 }, "4194304",
        "Bytes of tool images one turn may show the model in all; later images are notes naming this setting.";
    BOARD_POLL_SECS = "board.poll_secs", Kind::Int { min: 0, max: 86_400 }, "0",
        "Seconds between readings of every board sensor in `chela run`, each raised as a sensor.reading event for the router; 0: only when sensor_read runs.";
    XIAOZHI_ENABLED = "xiaozhi.enabled", Kind::Bool, "true",
        "Serve xiaozhi devices on the gateway (/xiaozhi/ota/, /xiaozhi/v1/). Safe on: a new device only gets an activation code until you run `chela device approve CODE`.";
    XIAOZHI_PUBLIC_URL = "xiaozhi.public_url", Kind::Text, "",
        "WebSocket URL the OTA answer tells devices to dial (ws:// or wss://). Empty: ws://<gateway.listen>/xiaozhi/v1/.";
    XIAOZHI_MAX_PENDING = "xiaozhi.max_pending", Kind::Int { min: 1, max: 1000 }, "16",
        "Unapproved devices remembered with their activation codes; when more ask, the oldest is forgotten.";
    XIAOZHI_TRANSPORT = "xiaozhi.transport", Kind::Choice(&["websocket", "mqtt"]), "websocket",
        "How approved devices talk: websocket (/xiaozhi/v1/ on the gateway) or mqtt (MQTT on xiaozhi.mqtt_listen, audio over UDP on xiaozhi.udp_listen). A device takes the change at its next OTA check (restart it).";
    XIAOZHI_MQTT_LISTEN = "xiaozhi.mqtt_listen", Kind::Listen, "127.0.0.1:1883",
        "Address and port of the MQTT endpoint for devices (plain MQTT 3.1.1, each device its own login); served while xiaozhi.transport = mqtt, or from the first OTA check of a device switched to mqtt (`chela device transport ID mqtt`).";
    XIAOZHI_MQTT_PUBLIC = "xiaozhi.mqtt_public", Kind::Text, "",
        "host:port the OTA answer tells MQTT devices to dial (also the host of their UDP audio). Empty: xiaozhi.mqtt_listen, or the host the device reached the gateway at when that is a wildcard.";
    XIAOZHI_MQTT_TLS_CERT = "xiaozhi.mqtt_tls_cert", Kind::Text, "",
        "Path of a PEM certificate chain: with xiaozhi.mqtt_tls_key, the MQTT endpoint speaks TLS only. The firmware uses TLS exactly when the port it dials is 8883, and checks the certificate against its bundle of public CAs.";
    XIAOZHI_MQTT_TLS_KEY = "xiaozhi.mqtt_tls_key", Kind::Text, "",
        "Path of the PEM private key of xiaozhi.mqtt_tls_cert.";
    XIAOZHI_UDP_LISTEN = "xiaozhi.udp_listen", Kind::Listen, "127.0.0.1:1883",
        "Address and UDP port of MQTT devices' encrypted audio (AES-128-CTR, keys fresh per conversation).";
    VOICE_ASR_PROVIDER = "voice.asr_provider", Kind::Choice(&["openai"]), "openai",
        "Speech recognition for voice devices: openai (any server with OpenAI's /v1/audio/transcriptions: OpenAI, Groq, SiliconFlow, faster-whisper, FunASR).";
    VOICE_ASR_BASE_URL = "voice.asr_base_url", Kind::Url, "",
        "Speech recognition server URL, including /v1. Empty: https://api.openai.com/v1.";
    VOICE_ASR_API_KEY = "voice.asr_api_key", Kind::Secret, "",
        "API key of the speech recognition server.";
    VOICE_ASR_MODEL = "voice.asr_model", Kind::Text, "whisper-1",
        "Speech recognition model name.";
    VOICE_TTS_PROVIDER = "voice.tts_provider", Kind::Choice(&["openai", "espeak"]), "openai",
        "Speech synthesis for voice devices: openai (any server with OpenAI's /v1/audio/speech) or espeak (local espeak-ng, no cloud).";
    VOICE_TTS_BASE_URL = "voice.tts_base_url", Kind::Url, "",
        "Speech synthesis server URL, including /v1. Empty: https://api.openai.com/v1.";
    VOICE_TTS_API_KEY = "voice.tts_api_key", Kind::Secret, "",
        "API key of the speech synthesis server.";
    VOICE_TTS_MODEL = "voice.tts_model", Kind::Text, "tts-1",
        "Speech synthesis model name (openai provider).";
    VOICE_TTS_VOICE = "voice.tts_voice", Kind::Text, "",
        "Voice name. Empty: alloy (openai) or en (espeak).";
}

/// Top-level tables holding typed sections, which nest deeper than `section.key`:
/// `[channels.telegram]`, `[mcp.servers.NAME]`, `[lua]`, `[gateway]`. Their scalar settings
/// are keys above; the rest (MCP servers, their env and headers) the host deserialises.
pub const TYPED_ROOTS: &[&str] = &["channels", "mcp", "lua", "gateway"];

/// The closest known name to `name` among `names`, for "did you mean".
pub fn suggest<'a>(name: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names.into_iter().map(|n| (distance(n, name), n)).filter(|(d, _)| *d <= 3).min_by_key(|(d, _)| *d).map(|(_, n)| n)
}

/// The URL used when `llm.base_url` is empty, for `provider` (`llm.provider`'s value).
pub fn default_base_url(provider: &str) -> &'static str {
    match provider {
        "openai" => "https://api.openai.com/v1",
        _ => "https://api.anthropic.com",
    }
}

/// The model used when `llm.model` is empty, for `provider`.
pub fn default_model(provider: &str) -> &'static str {
    match provider {
        "openai" => "gpt-4.1-mini",
        _ => "claude-sonnet-4-5",
    }
}

/// The value Chela acts on for `key` when its set value is `value`: an empty `llm.base_url`
/// or `llm.model` means the provider's default, which is what `chela config show` prints.
pub fn effective<'a>(key: &Key, value: &'a str, provider: &str) -> &'a str {
    match key.name {
        "llm.base_url" if value.is_empty() => default_base_url(provider),
        "llm.model" if value.is_empty() => default_model(provider),
        _ => value,
    }
}

/// Why a key or value is refused. The message lists what would be accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    UnknownKey { key: String, suggestion: Option<&'static str> },
    BadValue { key: &'static str, value: String, expected: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownKey { key, suggestion } => {
                write!(f, "unknown config key `{key}`.")?;
                // One suggestion when one is close; the keys of the section it names when none
                // is; never all of them.
                if let Some(s) = suggestion {
                    return write!(f, " Did you mean `{s}`?");
                }
                let section = key.split('.').next().unwrap_or_default();
                let mut same = KEYS.iter().filter(|k| k.section() == section).peekable();
                if same.peek().is_none() {
                    return f.write_str(" `chela config show` lists every key.");
                }
                write!(f, " The keys of [{section}]: ")?;
                for (i, k) in same.enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(k.name)?;
                }
                f.write_str(".")
            }
            // `value` is already in its shown form (see `check`): never a secret in clear.
            ConfigError::BadValue { key, value, expected } => {
                write!(f, "`{value}` is not a valid value for `{key}`: expected {expected}.")
            }
        }
    }
}

impl core::error::Error for ConfigError {}

/// Looks a key up by name.
pub fn key(name: &str) -> Result<&'static Key, ConfigError> {
    KEYS.iter().copied().find(|k| k.name == name).ok_or_else(|| ConfigError::UnknownKey {
        key: name.to_owned(),
        suggestion: suggest(name, KEYS.iter().map(|k| k.name)),
    })
}

/// Checks `value` for `key` and returns it in canonical form (trimmed; booleans and lists
/// normalised). Time zones and proxies are only checked for shape here.
pub fn check(key: &'static Key, value: &str) -> Result<String, ConfigError> {
    let v = value.trim();
    // The value is quoted in its shown form: an error message is output like any other.
    let bad = |expected: String| ConfigError::BadValue { key: key.name, value: key.shown(value), expected };
    match key.kind {
        Kind::Text | Kind::Secret | Kind::TimeZone => Ok(v.to_owned()),
        Kind::Url if has_url_userinfo(v) => {
            // A credential in a URL would be stored, shown and sent where only the URL belongs.
            let secrets: Vec<&str> =
                KEYS.iter().filter(|k| k.section() == key.section() && k.is_secret()).map(|k| k.name).collect();
            let put = match secrets.first() {
                Some(first) => format!(
                    "put the key in `{}` (`chela config set {first} -` reads it from standard input)",
                    secrets.join("` or `")
                ),
                None => "put the credential in its own *_key setting".to_owned(),
            };
            Err(bad(format!("a URL without user:password@ in it; {put}")))
        }
        Kind::Url => {
            // A host is required: `http:///` would otherwise lose its slashes below and be
            // stored as `http:`, a value this same check refuses.
            let rest = v.strip_prefix("http://").or_else(|| v.strip_prefix("https://"));
            let has_host = rest.is_some_and(|r| r.split(['/', '?', '#']).next().is_some_and(|h| !h.is_empty()));
            if v.is_empty() || (has_host && !v.contains(char::is_whitespace)) {
                Ok(v.trim_end_matches('/').to_owned())
            } else {
                Err(bad("an http:// or https:// URL with a host, or empty for the default".to_owned()))
            }
        }
        Kind::Proxy => {
            let ok = ["http://", "socks5://", "socks5h://"].iter().any(|p| v.starts_with(p));
            if v.is_empty() || ok {
                Ok(v.to_owned())
            } else {
                Err(bad("http://host:port, socks5://host:port or socks5h://host:port, or empty for none".to_owned()))
            }
        }
        Kind::Listen => match v.parse::<core::net::SocketAddr>() {
            Ok(addr) => Ok(addr.to_string()),
            Err(_) => Err(bad("an IP address and port, such as 127.0.0.1:18789 or [::1]:18789".to_owned())),
        },
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok("true".to_owned()),
            "false" | "no" | "off" | "0" => Ok("false".to_owned()),
            _ => Err(bad("true or false".to_owned())),
        },
        Kind::Int { min, max } => match v.replace('_', "").parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n.to_string()),
            _ => Err(bad(format!("a whole number from {min} to {max}"))),
        },
        Kind::Choice(choices) => {
            if choices.contains(&v) {
                Ok(v.to_owned())
            } else {
                Err(bad(format!("one of {}", choices.join(", "))))
            }
        }
        Kind::List => {
            let items: Vec<&str> = v.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            // `*` alone means everyone (an `allow_from` that opens a channel on purpose).
            if items == ["*"]
                || items.iter().all(|s| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            {
                Ok(items.join(","))
            } else {
                Err(bad("comma-separated names (letters, digits, _ and -), or * alone for everyone".to_owned()))
            }
        }
    }
}

/// A secret as it may be shown: enough to recognise it, not enough to use it.
pub fn mask(value: &str) -> String {
    let n = value.chars().count();
    if n == 0 {
        return String::new();
    }
    if n < 12 {
        return "****".to_owned();
    }
    let head: String = value.chars().take(4).collect();
    let tail: String = value.chars().skip(n - 2).collect();
    format!("{head}****{tail}")
}

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_defaults_valid() {
        for (i, k) in KEYS.iter().enumerate() {
            assert!(KEYS[..i].iter().all(|o| o.name != k.name), "{} twice", k.name);
            assert_eq!(check(k, k.default).as_deref(), Ok(k.default), "default of {}", k.name);
            assert!(!k.help.is_empty());
        }
    }

    #[test]
    fn env_names_follow_section_double_underscore_key() {
        assert_eq!(LLM_API_KEY.env_var(), "CHELA_LLM__API_KEY");
        assert_eq!(TIMEZONE.env_var(), "CHELA_TIMEZONE");
        assert_eq!(LLM_API_KEY.section(), "llm");
        assert_eq!(LLM_API_KEY.field(), "api_key");
        assert_eq!(TIMEZONE.section(), "");
    }

    #[test]
    fn unknown_keys_suggest_the_closest() {
        let e = key("llm.modle").unwrap_err();
        assert_eq!(e, ConfigError::UnknownKey { key: "llm.modle".into(), suggestion: Some("llm.model") });
        let msg = e.to_string();
        assert!(msg.contains("Did you mean `llm.model`?"), "{msg}");
        assert!(!msg.contains("llm.provider"), "one suggestion, not every key: {msg}");
        assert!(matches!(key("zzzzzzzzzz"), Err(ConfigError::UnknownKey { suggestion: None, .. })));
        let msg = key("zzzzzzzzzz").unwrap_err().to_string();
        assert!(msg.contains("`chela config show` lists every key") && !msg.contains("llm.model"), "{msg}");
        let msg = key("llm.zzzzzzzzzzzz").unwrap_err().to_string();
        assert!(msg.contains("The keys of [llm]: llm.provider, ") && !msg.contains("agent."), "{msg}");
    }

    #[test]
    fn a_star_opens_an_allow_from_list_and_nothing_else() {
        assert_eq!(check(TELEGRAM_ALLOW_FROM, "*").unwrap(), "*");
        assert_eq!(check(FEISHU_ALLOW_FROM, " * ").unwrap(), "*");
        assert!(check(FEISHU_ALLOW_FROM, "ou_1, *.*").is_err());
    }

    #[test]
    fn values_are_checked_and_normalised() {
        assert_eq!(check(LLM_PROVIDER, " openai ").unwrap(), "openai");
        let e = check(LLM_PROVIDER, "gemini").unwrap_err().to_string();
        assert!(e.contains("one of anthropic, openai"), "{e}");
        assert_eq!(check(LLM_STREAM, "off").unwrap(), "false");
        assert!(check(LLM_STREAM, "maybe").is_err());
        assert_eq!(check(LLM_MAX_TOKENS, "8_192").unwrap(), "8192");
        let e = check(LLM_MAX_TOKENS, "0").unwrap_err().to_string();
        assert!(e.contains("from 1 to 1000000"), "{e}");
        assert_eq!(check(LLM_BASE_URL, "http://127.0.0.1:9/v1/").unwrap(), "http://127.0.0.1:9/v1");
        assert!(check(LLM_BASE_URL, "ftp://x").is_err());
        // No host: refused, and never stored as a value that a second check would refuse
        // (`http:///` lost its slashes and became `http:`; found by the `config` fuzz target).
        for hostless in ["http://", "http:///", "https:///v1", "http://?q", "http://#f"] {
            assert!(check(LLM_BASE_URL, hostless).is_err(), "{hostless}");
        }
        for url in ["http://h", "https://h:1/v1/", "http://[::1]:8080"] {
            let once = check(LLM_BASE_URL, url).unwrap();
            assert_eq!(check(LLM_BASE_URL, &once).as_deref(), Ok(once.as_str()), "{url}");
        }
        assert_eq!(check(GATEWAY_LISTEN, " [::1]:80 ").unwrap(), "[::1]:80");
        let e = check(GATEWAY_LISTEN, "localhost:18789").unwrap_err().to_string();
        assert!(e.contains("an IP address and port"), "{e}");
        assert!(check(GATEWAY_LISTEN, "127.0.0.1").is_err(), "the port is needed");
    }

    #[test]
    fn secrecy_follows_the_name() {
        for k in KEYS.iter().filter(|k| k.kind == Kind::Secret) {
            assert!(is_secret_name(k.name), "{} is declared secret but not named like one", k.name);
        }
        for name in [
            "llm.api_key",
            "channels.telegram.token",
            "gateway.token",
            "channels.feishu.app_secret",
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "db.password",
            "Authorization",
            "x.access_token",
            "x.apikey",
            "mcp.servers.remote.bearer",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["llm.max_tokens", "llm.model", "proxy.url", "search.tavily_url", "keyboard.layout", "PATH"] {
            assert!(!is_secret_name(name), "{name}");
        }
        assert!(!LLM_MAX_TOKENS.is_secret());
    }

    #[test]
    fn url_userinfo_is_masked_wherever_it_appears() {
        assert_eq!(mask_url_userinfo("socks5://user:hunter2@host:1080"), "socks5://user:****@host:1080");
        assert_eq!(mask_url_userinfo("https://ghp_abc@github.com/x?y=1"), "https://****@github.com/x?y=1");
        assert_eq!(mask_url_userinfo("via http://a:b@p:1 and http://q:2/p"), "via http://a:****@p:1 and http://q:2/p");
        assert_eq!(mask_url_userinfo("http://host:8080/a@b"), "http://host:8080/a@b");
        // A password with an unencoded `/`, `?` or `#` is masked whole, and such a URL is refused.
        assert_eq!(mask_url_userinfo("socks5://me:se/cret#x@h:1080"), "socks5://me:****@h:1080");
        assert_eq!(mask_url_userinfo("http://me:se?cret@h:1 next"), "http://me:****@h:1 next");
        assert!(has_url_userinfo("http://me:pa/ss@127.0.0.1:1080/v1"));
        assert!(!has_url_userinfo("http://[::1]/v1/@x") && !has_url_userinfo("http://[::1]:8080/a@b"));
        assert_eq!(mask_url_userinfo("plain text"), "plain text");
        assert!(has_url_userinfo("https://u:p@api.example.com/v1") && has_url_userinfo("https://u@x"));
        assert!(!has_url_userinfo("https://api.example.com/v1/@x"));
        assert_eq!(PROXY_URL.shown("http://me:pw123@p:3128"), "http://me:****@p:3128");
    }

    #[test]
    fn bad_values_are_quoted_masked_and_credentials_in_urls_refused() {
        let e = check(PROXY_URL, "ftp://me:pw-very-secret@p:1").unwrap_err().to_string();
        assert!(!e.contains("pw-very-secret") && e.contains("me:****@p:1"), "{e}");
        let e = check(LLM_BASE_URL, "https://bob:sk-inurl-123@api.example.com/v1").unwrap_err().to_string();
        assert!(
            !e.contains("sk-inurl-123") && e.contains("`llm.api_key`") && e.contains("config set llm.api_key -"),
            "{e}"
        );
        let e = check(SEARCH_TAVILY_URL, "https://tvly-abc@api.tavily.com").unwrap_err().to_string();
        assert!(!e.contains("tvly-abc") && e.contains("search.tavily_key"), "{e}");
    }

    #[test]
    fn empty_provider_settings_mean_the_providers_defaults() {
        assert_eq!(effective(LLM_BASE_URL, "", "openai"), "https://api.openai.com/v1");
        assert_eq!(effective(LLM_BASE_URL, "", "anthropic"), "https://api.anthropic.com");
        assert_eq!(effective(LLM_MODEL, "", "anthropic"), "claude-sonnet-4-5");
        assert_eq!(effective(LLM_MODEL, "mine", "openai"), "mine");
        assert_eq!(effective(TIMEZONE, "", "openai"), "");
    }

    #[test]
    fn secrets_are_masked() {
        assert_eq!(mask(""), "");
        assert_eq!(mask("short"), "****");
        assert_eq!(mask("sk-ant-api03-abcdefgh"), "sk-a****gh");
    }
}
