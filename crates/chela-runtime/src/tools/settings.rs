//! The `settings` group: Chela's own settings, read-only. Hidden from the model until the
//! built-in skill `chela_settings` is active in a conversation (skill-gated).

use super::{Group, Tool, ToolCtx, ToolResult};
use crate::read_args;

pub fn group() -> Group {
    Group::new("settings", "Chela's own settings, read-only (secrets masked).").hidden("").with(ConfigShow)
}

pub struct ConfigShow;

pub struct NoArgs {}

read_args!(NoArgs {});

impl Tool for ConfigShow {
    const NAME: &'static str = "config_show";
    const DESCRIPTION: &'static str =
        "Every setting of Chela: its value (secrets masked) and where it came from. Read-only.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    type Args = NoArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, _: NoArgs) -> ToolResult {
        Ok(crate::config::show(&ctx.cfg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Fixture;

    #[tokio::test]
    async fn settings_are_shown_with_secrets_masked() {
        let f = Fixture::new(&[("llm.api_key", "sk-ant-secret-value-1234"), ("agent.max_iterations", "7")]);
        let out = f.call(ConfigShow, serde_json::json!({})).await.unwrap();
        assert!(out.contains("agent.max_iterations") && out.contains("7"), "{out}");
        assert!(out.contains("llm.api_key"), "{out}");
        assert!(!out.contains("sk-ant-secret-value-1234"), "the key leaked: {out}");
    }
}
