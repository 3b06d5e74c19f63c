//! An [`App`] in a fresh workspace whose model is the scripted fake LLM over 127.0.0.1: the
//! fixture the session owner's and the memory flush's tests share.

use std::sync::Arc;

use chela_testkit::{FakeLlm, Step};

use crate::app::App;
use crate::workspace::Workspace;

/// The wire format the app speaks to the fake.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wire {
    Anthropic,
    OpenAi,
}

impl Wire {
    pub(crate) const BOTH: [Wire; 2] = [Wire::Anthropic, Wire::OpenAi];
}

pub(crate) struct FakeApp {
    /// Holds the workspace; dropped last with the fixture.
    pub dir: tempfile::TempDir,
    pub llm: FakeLlm,
    pub app: Arc<App>,
}

/// The fake answers with `script`; `overrides` (key, value) come after the model's settings
/// (provider, URL, key, no retries), so a test can change those too.
pub(crate) fn start(wire: Wire, script: Vec<Step>, overrides: &[(&str, &str)]) -> FakeApp {
    let llm = FakeLlm::start(script);
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    let (provider, url) = match wire {
        Wire::Anthropic => ("anthropic", llm.anthropic_base_url()),
        Wire::OpenAi => ("openai", llm.openai_base_url()),
    };
    let base = [
        ("llm.provider", provider),
        ("llm.base_url", url.as_str()),
        ("llm.api_key", "test-key"),
        ("llm.max_retries", "0"),
    ];
    for (k, v) in base.iter().chain(overrides) {
        crate::config::set_override(&ws, k, v).unwrap();
    }
    let app = Arc::new(App::load(ws).unwrap());
    FakeApp { dir, llm, app }
}
