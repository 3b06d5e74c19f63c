//! `tools_unlock`: the model asks for a hidden tool group by need, without a skill. Groups most
//! turns never use start hidden, so the first request stays small; one core tool reaches them.
//! Only groups hidden by their own declaration can be unlocked: a group the owner hid
//! (`caps.hidden`) or switched off stays so, whatever the model asks.

use chela_core::cap::Registry;
use std::path::{Path, PathBuf};

use crate::read_args;
use crate::tools::{Tool, ToolCtx, ToolError, ToolResult};
use crate::workspace::{Workspace, read_bounded, write_atomic};

/// Most groups one conversation records as unlocked; more than any build registers.
const MAX_UNLOCKED: usize = 64;
/// The largest unlock file read back; a bigger one is damaged and counts as none.
const MAX_FILE: u64 = 16 * 1024;

pub struct ToolsUnlock;

/// The tool's name, for the registry to describe it (see [`describe`]).
pub const NAME: &str = "tools_unlock";

/// The groups the model may unlock now, in the order they were registered: hidden by their
/// own declaration, switched on, and neither hidden by the owner (`owner_hidden`) nor shown
/// already (`caps.shown`).
pub(crate) fn openable<'r>(registry: &'r Registry, owner_hidden: &[String]) -> Vec<&'r str> {
    registry
        .groups()
        .iter()
        .filter(|g| chela_core::skills::is_gated(registry, &g.spec.id) && g.enabled && !g.visible)
        .filter(|g| !owner_hidden.iter().any(|h| *h == g.spec.id))
        .map(|g| g.spec.id.as_ref())
        .collect()
}

/// What the model reads of `tools_unlock`: every group it can open here, by name with a few
/// words on what it is for, so the model can ask by need without a listing call first. Built
/// from the registry, so a group added or switched off changes it and nothing else does.
pub(crate) fn describe<'a>(groups: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let named: Vec<String> =
        groups.map(|(g, hint)| if hint.is_empty() { g.to_owned() } else { format!("{g} ({hint})") }).collect();
    if named.is_empty() {
        return "Unlock a hidden tool group for this conversation; none can be unlocked now.".to_owned();
    }
    format!("Unlock a tool group a task needs: {}. No group: list them.", named.join(", "))
}

pub struct UnlockArgs {
    group: Option<String>,
}

read_args!(UnlockArgs { group: opt });

impl Tool for ToolsUnlock {
    const NAME: &'static str = NAME;
    // Replaced in the registry by [`describe`], which names the groups of this build.
    const DESCRIPTION: &'static str = "Unlock a hidden tool group for this conversation when a task needs it.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"group":{"type":"string"}}}"#;
    type Args = UnlockArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: UnlockArgs) -> ToolResult {
        let registry = ctx.tools.registry();
        let owner_hidden = ctx.cfg.list(chela_core::config::CAPS_HIDDEN);
        // What the model may ask for: hidden by declaration, on, and not hidden by the owner.
        let open = |g: &chela_core::cap::Group| {
            chela_core::skills::is_gated(&registry, &g.spec.id)
                && g.enabled
                && !owner_hidden.contains(&g.spec.id.to_string())
        };
        let Some(name) = a.group else {
            let lines: Vec<String> = registry
                .groups()
                .iter()
                .filter(|g| open(g))
                .map(|g| format!("- {}: {}", g.spec.id, g.spec.description))
                .collect();
            if lines.is_empty() {
                return Ok("No hidden tool group can be unlocked here.".into());
            }
            return Ok(format!("Hidden tool groups (unlock one with tools_unlock {{group}}):\n{}", lines.join("\n")));
        };
        let Some(g) = registry.group(&name) else {
            return Err(ToolError::not_found(format!(
                "There is no tool group `{name}`; call tools_unlock without a group to list them."
            )));
        };
        if g.spec.core || (g.enabled && g.visible) {
            return Ok(format!("The tools of `{name}` are already available."));
        }
        if !open(g) {
            return Err(ToolError::refused(format!(
                "The owner switched off or hid the tool group `{name}`; only they can make it available \
                 (`chela cap`)."
            )));
        }
        let session = ctx.session.clone().ok_or_else(|| {
            ToolError::refused("tools_unlock works inside a conversation; people call hidden tools directly.")
        })?;
        let unlocked = change(&ctx.ws, &session.channel, &session.chat, |list| {
            if !list.contains(&name) {
                if list.len() >= MAX_UNLOCKED {
                    return Err(ToolError::refused("This conversation unlocked too many groups already."));
                }
                list.push(name.clone());
            }
            Ok(())
        })?;
        let mut named = session.named_groups();
        for g in unlocked {
            if !named.contains(&g) {
                named.push(g);
            }
        }
        session.set_named_groups(named);
        let tools: Vec<String> = registry.in_group(&name).map(|c| c.id.to_string()).collect();
        Ok(format!("Unlocked `{name}` for this conversation: {}.", tools.join(", ")))
    }
}

fn path(ws: &Workspace, channel: &str, chat: &str) -> PathBuf {
    ws.session_path(channel, chat).with_extension("unlocked.json")
}

/// The groups a conversation unlocked with `tools_unlock`; a missing or damaged file is none.
/// Callers still filter them through `chela_core::skills::unlocked_groups`, so a name here
/// never makes visible a group that is not hidden by declaration.
pub fn unlocked(ws: &Workspace, channel: &str, chat: &str) -> Vec<String> {
    read(&path(ws, channel, chat))
}

fn read(path: &Path) -> Vec<String> {
    let text = match read_bounded(path, MAX_FILE) {
        Ok(Some(t)) => t,
        Ok(None) => return Vec::new(),
        Err(e) => {
            chela_log::warn!("{}: {e}; no tool group counts as unlocked", path.display());
            return Vec::new();
        }
    };
    match serde_json::from_str::<Vec<String>>(&text) {
        Ok(mut names) => {
            names.truncate(MAX_UNLOCKED);
            names
        }
        Err(e) => {
            chela_log::warn!("{}: not a JSON list of group names ({e}); none counts as unlocked", path.display());
            Vec::new()
        }
    }
}

fn change(
    ws: &Workspace,
    channel: &str,
    chat: &str,
    f: impl FnOnce(&mut Vec<String>) -> Result<(), ToolError>,
) -> Result<Vec<String>, ToolError> {
    let path = path(ws, channel, chat);
    let io = |e: std::io::Error| ToolError::new(format!("Cannot save the unlocked groups in {}: {e}.", path.display()));
    std::fs::create_dir_all(ws.sessions_dir()).map_err(io)?;
    let changed = crate::lock::with_file_lock(&path, || -> std::io::Result<Result<Vec<String>, ToolError>> {
        let mut list = read(&path);
        if let Err(e) = f(&mut list) {
            return Ok(Err(e));
        }
        let json = serde_json::to_string(&list).map_err(std::io::Error::other)?;
        write_atomic(&path, json.as_bytes())?;
        Ok(Ok(list))
    });
    changed.map_err(io)?
}

#[cfg(test)]
mod tests;
