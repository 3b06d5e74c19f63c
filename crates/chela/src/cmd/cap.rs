//! `chela cap list|call|enable|disable|show|hide`: the capability groups, by hand.

use std::process::ExitCode;

use anyhow::{Result, bail};
use chela_core::cap::{Caller, ControlError, Scope};
use chela_core::config::{CAPS_DISABLED, CAPS_HIDDEN, CAPS_SHOWN};

use crate::app::Base;
use crate::args::CapCmd;
use crate::config::edit_list_override;

pub async fn run(base: Base, cmd: CapCmd) -> Result<ExitCode> {
    // The MCP servers' tools are groups too: connect them first, stop them at the end.
    base.tools.mcp.ensure(&base.tools.toolbox).await;
    let out = run_cmd(&base, cmd).await;
    base.tools.mcp.shutdown().await;
    out
}

async fn run_cmd(base: &Base, cmd: CapCmd) -> Result<ExitCode> {
    match cmd {
        CapCmd::List => {
            out!("{}", list(base));
            Ok(ExitCode::SUCCESS)
        }
        CapCmd::Call { id, json } => {
            if !serde_json::from_str::<serde_json::Value>(&json).is_ok_and(|v| v.is_object()) {
                bail!("the arguments must be a JSON object, e.g. '{{\"path\":\"notes.md\"}}'");
            }
            let ctx = base.tool_ctx();
            match base.tools.toolbox.call(&ctx, &id, &json, Caller::Manual, Scope::default()).await {
                Ok(out) => {
                    outln!("{out}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("chela: {id}: {e}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        CapCmd::Enable(group, on) => {
            let mut reg = chela_core::cap::Registry::clone(&base.tools.toolbox.registry());
            reg.set_enabled(&group, on).map_err(explain)?;
            edit_list_override(&base.ws, CAPS_DISABLED, &group, !on)?;
            outln!("{group}: {}", if on { "enabled" } else { "disabled for every caller" });
            Ok(ExitCode::SUCCESS)
        }
        CapCmd::Show(group, visible) => {
            let mut reg = chela_core::cap::Registry::clone(&base.tools.toolbox.registry());
            reg.set_visible(&group, visible).map_err(explain)?;
            let default_visible = reg.group(&group).is_some_and(|g| g.spec.visible_by_default);
            // Record only what differs from the group's default, so defaults can change later.
            edit_list_override(&base.ws, CAPS_HIDDEN, &group, !visible && default_visible)?;
            edit_list_override(&base.ws, CAPS_SHOWN, &group, visible && !default_visible)?;
            outln!("{group}: {}", if visible { "visible to the model" } else { "hidden from the model" });
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn explain(e: ControlError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Groups, their switches and their tools.
pub fn list(base: &Base) -> String {
    let reg = &base.tools.toolbox.registry();
    let mut out = String::new();
    for g in reg.groups() {
        let state = match (g.spec.core, g.enabled, g.visible) {
            (true, _, _) => "core (always on)",
            (false, false, _) => "disabled",
            (false, true, true) => "enabled, visible",
            (false, true, false) => "enabled, hidden from the model",
        };
        out.push_str(&format!("{}  [{state}]  {}\n", g.spec.id, g.spec.description));
        for c in reg.in_group(&g.spec.id) {
            let who = if c.llm_callable { "" } else { " (people and scripts only)" };
            out.push_str(&format!("    {}{who}: {}\n", c.id, c.description));
        }
    }
    out
}
