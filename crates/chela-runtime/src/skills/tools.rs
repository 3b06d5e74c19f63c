//! The `skill_mgr` group: list and activate skills, unlock hidden groups. Core: always enabled
//! and visible, since it is how hidden groups are reached at all. The `skill_edit` group writes,
//! deletes and deactivates skills.

use std::sync::Arc;

use super::{Found, Origin, Skills};
use crate::read_args;
use crate::tools::{Group, SessionRef, Tool, ToolCtx, ToolError, ToolResult};

/// The group over the workspace's skills and their cache (`skills`, shared with the turns
/// that build prompts from them).
pub fn group(skills: &Arc<Skills>) -> Group {
    Group::new("skill_mgr", "Skills: instructions for particular tasks, activated per conversation.")
        .core()
        .with(SkillActivate(Arc::clone(skills)))
        .with(super::unlock::ToolsUnlock)
}

/// Listing, writing, deleting and deactivating skills: rare (the prompt already lists every
/// skill), so hidden until the model unlocks the group (`tools_unlock`), which keeps every first
/// request lighter.
pub fn edit_group(skills: &Arc<Skills>) -> Group {
    Group::new("skill_edit", "List, write, delete and deactivate skills.")
        .hidden("")
        .with(SkillList(Arc::clone(skills)))
        .with(SkillDeactivate(Arc::clone(skills)))
        .with(SkillSave(Arc::clone(skills)))
        .with(SkillDelete(Arc::clone(skills)))
}

fn session(ctx: &ToolCtx, tool: &str) -> Result<Arc<SessionRef>, ToolError> {
    ctx.session.clone().ok_or_else(|| {
        ToolError::refused(format!(
            "{tool} works inside a conversation. From the terminal use `chela skill {}` with --session.",
            tool.trim_start_matches("skill_")
        ))
    })
}

fn origin(f: &Found) -> &'static str {
    match (f.origin, f.overrides_built_in) {
        (Origin::BuiltIn, _) => "built-in",
        (Origin::Workspace, true) => "workspace, overrides the built-in one",
        (Origin::Workspace, false) => "workspace",
    }
}

pub struct SkillList(pub Arc<Skills>);

pub struct NoArgs {}

read_args!(NoArgs {});

impl Tool for SkillList {
    const NAME: &'static str = "skill_list";
    const DESCRIPTION: &'static str = "Every skill: name, description, where it comes from, the tool groups it unlocks and whether it is active here.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    type Args = NoArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, _: NoArgs) -> ToolResult {
        let (all, problems) = self.0.list(&ctx.ws, &ctx.cfg);
        let active = match &ctx.session {
            Some(s) => self.0.active(&ctx.ws, &s.channel, &s.chat),
            None => Vec::new(),
        };
        let skills: Vec<serde_json::Value> = all
            .iter()
            .map(|f| {
                serde_json::json!({
                    "name": f.skill.name,
                    "description": f.skill.description,
                    "origin": origin(f),
                    "unlocks": f.skill.groups,
                    "always": f.skill.always,
                    "active": active.contains(&f.skill.name),
                })
            })
            .collect();
        Ok(serde_json::json!({ "skills": skills, "problems": problems }).to_string())
    }
}

pub struct SkillActivate(pub Arc<Skills>);

pub struct NameArgs {
    name: String,
}

read_args!(NameArgs { name: need });

impl Tool for SkillActivate {
    const NAME: &'static str = "skill_activate";
    const DESCRIPTION: &'static str = "Activate a skill: returns its instructions and unlocks its tool groups.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#;
    type Args = NameArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: NameArgs) -> ToolResult {
        let session = session(ctx, Self::NAME)?;
        let f = self.0.activate(&ctx.ws, &ctx.cfg, &session, &a.name)?;
        let unlocks = if f.skill.groups.is_empty() {
            String::new()
        } else {
            format!(" It unlocks: {}.", f.skill.groups.join(", "))
        };
        Ok(format!(
            "Skill `{}` is active in this conversation.{unlocks} Its instructions:\n\n{}",
            f.skill.name, f.skill.body
        ))
    }
}

pub struct SkillDeactivate(pub Arc<Skills>);

impl Tool for SkillDeactivate {
    const NAME: &'static str = "skill_deactivate";
    const DESCRIPTION: &'static str =
        "Deactivate a skill in this conversation; the tool groups only it unlocked are hidden again.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#;
    type Args = NameArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: NameArgs) -> ToolResult {
        let session = session(ctx, Self::NAME)?;
        if self.0.deactivate(&ctx.ws, &ctx.cfg, &session, &a.name)? {
            Ok(format!("Skill `{}` is no longer active in this conversation.", a.name))
        } else {
            Ok(format!("Skill `{}` was not active in this conversation.", a.name))
        }
    }
}

pub struct SkillSave(pub Arc<Skills>);

pub struct SaveArgs {
    name: String,
    content: String,
    lua: Option<String>,
}

read_args!(SaveArgs { name: need, content: need, lua: opt });

impl Tool for SkillSave {
    const NAME: &'static str = "skill_save";
    const DESCRIPTION: &'static str = "Create or replace a workspace skill: skills/NAME/SKILL.md (front matter with name and description, optional groups: [...], then the instructions) and optionally its Lua script skills/NAME/scripts/main.lua.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"name":{"type":"string","description":"Lowercase letters, digits, - and _."},"content":{"type":"string","description":"The whole SKILL.md, starting with ---, name:, description:, ---."},"lua":{"type":"string","description":"Optional scripts/main.lua."}},"required":["name","content"]}"#;
    type Args = SaveArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: SaveArgs) -> ToolResult {
        self.0.save(&ctx.ws, &ctx.cfg, &a.name, &a.content, a.lua.as_deref())
    }
}

pub struct SkillDelete(pub Arc<Skills>);

impl Tool for SkillDelete {
    const NAME: &'static str = "skill_delete";
    const DESCRIPTION: &'static str = "Delete a workspace skill (built-in skills cannot be deleted).";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#;
    type Args = NameArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: NameArgs) -> ToolResult {
        self.0.delete(&ctx.ws, &a.name)
    }
}

#[cfg(test)]
mod tests;
