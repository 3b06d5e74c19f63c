//! The `router` group: the model keeps the event router's rules in `rules.json` (see
//! [`crate::router`]). Registered by the daemon, whose router task runs the rules.

use std::sync::Arc;

use chela_core::router::Added;

use crate::router::Rules;
use crate::tools::{Group, Tool, ToolCtx, ToolError, ToolResult};
use chela_runtime::read_args;

pub fn group(rules: Arc<Rules>) -> Group {
    let r = || Arc::clone(&rules);
    Group::new("router", "Event rules: act on chat messages and events without the model.")
        .hidden("event rules")
        .guidance(
            "ROUTER: router_add_rule adds a rule to rules.json that acts on events (a chat message is an event \
             of type `message`) without you: `send` a text, call a tool (`cap`), start a turn (`agent`), \
             `emit` another event, or `drop` it. router_list_rules shows the rules and any bad ones.",
        )
        .with(AddRule(r()))
        .with(ListRules(r()))
        .with(RemoveRule(r()))
}

pub struct AddRule(Arc<Rules>);

pub struct RuleArgs {
    rule: serde_json::Value,
}

read_args!(strict RuleArgs { rule: need });

impl Tool for AddRule {
    const NAME: &'static str = "router_add_rule";
    const DESCRIPTION: &'static str = "Add an event rule, or replace the rule with the same id.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"rule":{"type":"object","description":"{\"id\":\"ping\",\"match\":{\"type\":\"message\",\"text\":{\"prefix\":\"ping\"}},\"only_if\":[{\"field\":\"x\",\"op\":\"gt\",\"value\":1}],\"cooldown_ms\":0,\"consume_on_match\":true,\"actions\":[{\"type\":\"send\",\"text\":\"pong {{event.text}}\"}]}; action types: agent (message), cap (cap, args), send (text), emit (event, text), drop"}},"required":["rule"]}"#;
    const BLOCKING: bool = true;
    type Args = RuleArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: RuleArgs) -> ToolResult {
        let mut rule = a.rule;
        if rule.get("made_by").is_some() {
            return Err(ToolError::refused(
                "`made_by` is set by Chela from the conversation the rule is made in, not by the tool call; \
                 leave it out",
            ));
        }
        if let (Some(m), Some(spec)) =
            (crate::automation::made_by(ctx).map_err(ToolError::refused)?, rule.as_object_mut())
        {
            spec.insert("made_by".to_owned(), serde_json::to_value(m).map_err(|e| ToolError::new(e.to_string()))?);
        }
        self.0.refresh();
        let id = rule.get("id").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
        let added = self.0.add(rule).map_err(|e| ToolError::invalid_args(format!("{e:#}")))?;
        let waits = if self.0.pending(&id) {
            " It acts on another chat than this one, so it waits for the owner's approval (`chela rules approve`) \
             and does nothing until then."
        } else {
            ""
        };
        Ok(format!("{} rule {id}.{waits}", if added == Added::Replaced { "Replaced" } else { "Added" }))
    }
}

pub struct NoArgs {}

read_args!(strict NoArgs {});

pub struct ListRules(Arc<Rules>);

impl Tool for ListRules {
    const NAME: &'static str = "router_list_rules";
    const DESCRIPTION: &'static str = "List the event rules, and any bad entries of rules.json with their line.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    const BLOCKING: bool = true;
    type Args = NoArgs;

    async fn call<'a>(&'a self, _: &'a ToolCtx, _: NoArgs) -> ToolResult {
        self.0.refresh();
        let v = serde_json::json!({ "rules": self.0.list(), "problems": self.0.problems().lines() });
        Ok(serde_json::to_string_pretty(&v).unwrap_or_default())
    }
}

pub struct IdArgs {
    id: String,
}

read_args!(strict IdArgs { id: need });

pub struct RemoveRule(Arc<Rules>);

impl Tool for RemoveRule {
    const NAME: &'static str = "router_remove_rule";
    const DESCRIPTION: &'static str = "Remove the event rule with this id.";
    const SCHEMA: &'static str =
        r#"{"type":"object","properties":{"id":{"type":"string","description":"The rule's id"}},"required":["id"]}"#;
    const BLOCKING: bool = true;
    type Args = IdArgs;

    async fn call<'a>(&'a self, _: &'a ToolCtx, a: IdArgs) -> ToolResult {
        self.0.refresh();
        self.0.remove(&a.id).map_err(|e| ToolError::invalid_args(format!("{e:#}")))?;
        Ok(format!("Removed rule {}.", a.id))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::testing::Fixture;
    use crate::tools::Erased;

    async fn call<T: Tool>(fx: &Fixture, tool: T, args: Value) -> ToolResult {
        Arc::new(tool).call_json(fx.ctx(), args.to_string()).await.map(crate::tools::ToolOutput::into_text)
    }

    #[tokio::test]
    async fn add_list_and_remove_a_rule_through_the_tools_and_the_file() {
        let fx = Fixture::new(&[]);
        let rules = Arc::new(Rules::open(&fx.ws));
        let rule = json!({"id": "ping", "match": {"type": "message", "text": {"prefix": "ping"}},
            "actions": [{"type": "send", "text": "pong"}]});
        let out = call(&fx, AddRule(Arc::clone(&rules)), json!({ "rule": rule })).await.unwrap();
        assert_eq!(out, "Added rule ping.");
        assert_eq!(Rules::open(&fx.ws).len(), 1, "the rule is in rules.json");
        let bad = json!({"rule": {"id": "b", "actions": [{"type": "teleport"}]}});
        let e = call(&fx, AddRule(Arc::clone(&rules)), bad).await.unwrap_err();
        assert!(e.to_string().contains("rule `b`"), "{e}");
        let list = call(&fx, ListRules(Arc::clone(&rules)), json!({})).await.unwrap();
        let list: Value = serde_json::from_str(&list).unwrap();
        assert_eq!(list["rules"][0]["id"], json!("ping"));
        assert_eq!(list["rules"].as_array().unwrap().len(), 1);
        call(&fx, RemoveRule(Arc::clone(&rules)), json!({"id": "ping"})).await.unwrap();
        assert_eq!(Rules::open(&fx.ws).len(), 0);
        assert!(call(&fx, RemoveRule(rules), json!({"id": "ping"})).await.is_err());
    }
}
