//! The weight of the tool list in a fresh workspace's first request, as every command but the
//! daemon builds the toolbox: it is paid on every model call, so it has a budget.

use chela_core::cap::Scope;

use super::testing::tool_weight;
use crate::testing::Fixture;

/// Most tools offered before anything is unlocked.
pub const MAX_TOOLS: usize = 16;
/// Most bytes of the `tools` array (Anthropic form) before anything is unlocked.
pub const MAX_BYTES: usize = 4096;
/// Most bytes one tool may take: a description says what the model needs and no more.
pub const MAX_TOOL_BYTES: usize = 480;

#[test]
fn the_first_request_of_a_fresh_workspace_keeps_the_tool_budget() {
    let fx = Fixture::new(&[]);
    let registry = fx.toolbox.registry();
    let tools = registry.tools_for(Scope::default());
    let w = tool_weight(&tools);
    let names: Vec<&str> = tools.iter().map(|t| t.name).collect();
    eprintln!("first request: {w:?}\n{names:?}");
    for t in &tools {
        eprintln!("{:5} {}", tool_weight(std::slice::from_ref(t)).anthropic, t.name);
    }
    assert!(w.count <= MAX_TOOLS, "{} tools offered: {names:?}", w.count);
    assert!(w.anthropic <= MAX_BYTES, "{} bytes of tools (Anthropic form)", w.anthropic);
    assert!(w.heaviest.1 <= MAX_TOOL_BYTES, "{} takes {} bytes", w.heaviest.0, w.heaviest.1);
}
