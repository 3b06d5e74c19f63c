//! [`FakeLlm`], the handle a test holds: it owns the server's thread and runtime, the script
//! queue and the recording of every request.
//!
//! The server runs as every fake's does ([`crate::running`]): dropping the handle stops it and
//! cancels every connection, pending delay and half-sent stream with it.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

use crate::answer::Ids;
use crate::running::Running;
use crate::script::Step;
use crate::server;
pub use crate::state::Recorded;
use crate::state::{Shared, lock};

/// How many requests [`Options::max_recorded`] keeps by default.
pub const DEFAULT_MAX_RECORDED: usize = 10_000;

/// How to start a [`FakeLlm`].
#[derive(Clone, Debug)]
pub struct Options {
    pub script: Vec<Step>,
    /// When set, requests must carry this key (`x-api-key` plus an `anthropic-version` header
    /// for Anthropic, `Authorization: Bearer` for OpenAI) or get the vendor's auth error.
    pub expected_key: Option<String>,
    /// 0 picks a free port.
    pub port: u16,
    /// The recording keeps this many most recent requests, so a long benchmark does not grow
    /// without bound.
    pub max_recorded: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options { script: Vec::new(), expected_key: None, port: 0, max_recorded: DEFAULT_MAX_RECORDED }
    }
}

/// A running fake LLM server. See the crate docs for what it speaks.
#[derive(Debug)]
pub struct FakeLlm {
    server: Running<Shared>,
}

impl FakeLlm {
    /// Starts a server on `127.0.0.1:0` answering with `script`.
    ///
    /// # Panics
    /// If no port can be bound; [`FakeLlm::try_start_with`] returns the error instead.
    pub fn start(script: Vec<Step>) -> FakeLlm {
        FakeLlm::start_with(Options { script, ..Options::default() })
    }

    /// # Panics
    /// If the port cannot be bound or the runtime cannot start.
    pub fn start_with(opts: Options) -> FakeLlm {
        let port = opts.port;
        FakeLlm::try_start_with(opts)
            .unwrap_or_else(|e| panic!("chela-testkit: cannot start the fake LLM on 127.0.0.1:{port}: {e}"))
    }

    pub fn try_start_with(opts: Options) -> io::Result<FakeLlm> {
        let shared = Shared {
            script: Mutex::new(opts.script.into()),
            recorded: Mutex::new(VecDeque::new()),
            max_recorded: opts.max_recorded.max(1),
            expected_key: opts.expected_key,
            ids: Ids::default(),
            open_connections: AtomicUsize::new(0),
            held: watch::Sender::new(false),
        };
        Ok(FakeLlm { server: Running::start("chela-fake-llm", opts.port, shared, server::serve)? })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `http://127.0.0.1:PORT`: the Anthropic SDK convention, without `/v1`.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// `http://127.0.0.1:PORT/v1`: the OpenAI SDK convention, with `/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.server.addr())
    }

    /// Every request received so far (up to [`Options::max_recorded`]), oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.server.shared().recorded).iter().cloned().collect()
    }

    /// Appends a step to the script.
    pub fn push(&self, step: Step) {
        lock(&self.server.shared().script).push_back(step);
    }

    /// Keeps every answer back (its request is recorded at once) until [`FakeLlm::release`]:
    /// what a test needs to act while a turn is in the middle of its model call.
    pub fn hold(&self) {
        self.server.shared().held.send_replace(true);
    }

    /// Lets the answers kept back by [`FakeLlm::hold`] go.
    pub fn release(&self) {
        self.server.shared().held.send_replace(false);
    }

    /// Scripted steps not yet used.
    pub fn remaining(&self) -> usize {
        lock(&self.server.shared().script).len()
    }

    /// Client connections open right now. A test of cancellation can wait for this to reach
    /// zero to see that the client really hung up.
    pub fn open_connections(&self) -> usize {
        self.server.shared().open_connections.load(Ordering::SeqCst)
    }
}
