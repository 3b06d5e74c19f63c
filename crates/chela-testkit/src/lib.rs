//! Fakes for testing Chela: a scripted fake LLM server speaking the Anthropic Messages API and
//! the OpenAI Chat Completions API over plain HTTP/1.1 on 127.0.0.1, a fake Telegram Bot API
//! ([`telegram::FakeTelegram`]) and a fake Feishu open platform ([`feishu`]: tenant tokens, the
//! long connection's WebSocket, webhook events), and a deterministic OpenAI embeddings API
//! ([`embed::FakeEmbeddings`]: hashed character n-grams).
//!
//! What it is: a deterministic stand-in for a model provider, for integration tests and
//! benchmarks. Each model request takes the next [`Step`] of a script (text, tool calls, an
//! HTTP error, a context-too-long error, a malformed body, a connection cut mid-stream, or a
//! hostile flood: empty blocks, empty tool calls, pings forever, a byte-at-a-time trickle; each
//! with optional delays), answered streamed or whole as the request asks. With the script
//! empty it plays a tiny demo model (see the `demo` module docs). Every request is recorded
//! for the test to inspect.
//!
//! What it is not: a model, a TLS server, or a second implementation of Chela's codecs. The
//! wire formats here are written from the vendors' documentation and share no code with
//! `chela-proto`, so the fake cannot inherit our bugs.
//!
//! How to drive it:
//!
//! ```no_run
//! use chela_testkit::{FakeLlm, Step};
//! use serde_json::json;
//!
//! let llm = FakeLlm::start(vec![
//!     Step::tool_call("get_current_time", json!({})),
//!     Step::text("It is noon.").chunk_delay_ms(10),
//! ]);
//! // Point the client under test at llm.anthropic_base_url() or llm.openai_base_url(),
//! // run it, then look at what it sent:
//! let first = &llm.requests()[0];
//! assert_eq!(first.path, "/v1/messages");
//! assert_eq!(llm.remaining(), 0);
//! ```
//!
//! The `chela-fake-llm` binary serves the same fake from the command line with a script file
//! (format in [`script`]).
//!
//! [`daemon`] starts the real `chela run` for integration tests and benchmarks; [`child`] runs a
//! test again in a child process (to kill it at a chosen moment);
//! [`xiaozhi_mqtt`] is a xiaozhi device on MQTT + UDP.

mod accept;
mod answer;
mod anthropic;
pub mod audio;
mod body;
pub mod child;
pub mod daemon;
mod demo;
pub mod embed;
mod fake;
pub mod feishu;
mod hostile;
mod openai;
pub mod peers;
mod running;
pub mod script;
mod server;
mod state;
pub mod telegram;
pub mod xiaozhi_mqtt;

pub use audio::FakeAudio;
pub use demo::person_text;
pub use embed::FakeEmbeddings;
pub use fake::{DEFAULT_MAX_RECORDED, FakeLlm, Options, Recorded};
pub use script::{Action, Step, ToolCall, parse_script};
pub use server::{MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_HEAD_BYTES};
pub use telegram::FakeTelegram;
