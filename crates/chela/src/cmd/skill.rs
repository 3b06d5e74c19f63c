//! `chela skill list|show|activate|deactivate|new|delete`: the skills, by hand.

use std::process::ExitCode;

use anyhow::{Result, anyhow};

use crate::app::Base;
use crate::args::SkillCmd;
use crate::skills::{Origin, SessionRef};

/// What `chela skill new` writes: valid as it is, to be edited.
fn template(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: Say in one sentence what this skill is for and when to use it.\n# groups: [settings]   capability groups it unlocks while active\n---\n# {name}\n\nThe instructions the assistant follows while this skill is active.\n"
    )
}

/// A `--session` value: a terminal session name, or `CHANNEL/CHAT`.
fn session_of(s: &str) -> (&str, &str) {
    s.split_once('/').unwrap_or((crate::chat::CHANNEL, s))
}

pub fn run(base: &Base, cmd: SkillCmd) -> Result<ExitCode> {
    let (ws, cfg, skills) = (&*base.ws, &*base.cfg, &*base.tools.skills);
    let fail = |e: crate::tools::ToolError| anyhow!("{e}");
    match cmd {
        SkillCmd::List => {
            let (all, problems) = skills.list(ws, cfg);
            let width = all.iter().map(|f| f.skill.name.len()).max().unwrap_or(0);
            for f in &all {
                let origin = match (f.origin, f.overrides_built_in) {
                    (Origin::BuiltIn, _) => "built-in",
                    (Origin::Workspace, true) => "workspace, overrides built-in",
                    (Origin::Workspace, false) => "workspace",
                };
                let mut notes = vec![origin.to_owned()];
                if !f.skill.groups.is_empty() {
                    notes.push(format!("unlocks {}", f.skill.groups.join(", ")));
                }
                if f.skill.always {
                    notes.push("always on".to_owned());
                }
                outln!("{:width$}  [{}]  {}", f.skill.name, notes.join("; "), f.skill.description);
            }
            for p in &problems {
                eprintln!("warning: {p}");
            }
        }
        SkillCmd::Show(name) => {
            let f =
                skills.lookup(ws, cfg, &name).map_err(fail)?.ok_or_else(|| anyhow!("there is no skill `{name}`"))?;
            let s = &f.skill;
            outln!("name: {}\ndescription: {}", s.name, s.description);
            if !s.groups.is_empty() {
                outln!("groups: [{}]", s.groups.join(", "));
            }
            if s.always {
                outln!("always: true");
            }
            let origin = if f.origin == Origin::BuiltIn { "built-in" } else { "workspace" };
            outln!("origin: {origin}\n\n{}", s.body);
        }
        SkillCmd::Activate { name, session } => {
            let (channel, chat) = session_of(&session);
            let r = SessionRef::new(channel, chat, Vec::new());
            let f = skills.activate(ws, cfg, &r, &name).map_err(fail)?;
            let unlocks = if f.skill.groups.is_empty() {
                String::new()
            } else {
                format!("; unlocks {}", f.skill.groups.join(", "))
            };
            outln!("{name}: active in {channel}/{chat}{unlocks}");
        }
        SkillCmd::Deactivate { name, session } => {
            let (channel, chat) = session_of(&session);
            let r = SessionRef::new(channel, chat, Vec::new());
            let was = skills.deactivate(ws, cfg, &r, &name).map_err(fail)?;
            outln!("{name}: {} in {channel}/{chat}", if was { "deactivated" } else { "was not active" });
        }
        SkillCmd::New(name) => {
            if let Some(f) = skills.lookup(ws, cfg, &name).map_err(fail)?
                && f.origin == Origin::Workspace
            {
                return Err(anyhow!("the skill `{name}` exists already in skills/{name}/; edit its SKILL.md"));
            }
            skills.save(ws, cfg, &name, &template(&name), None).map_err(fail)?;
            outln!("{}", ws.root().join("skills").join(&name).join("SKILL.md").display());
        }
        SkillCmd::Delete(name) => outln!("{}", skills.delete(ws, &name).map_err(fail)?),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_is_a_valid_skill() {
        let s = chela_core::skills::parse("my_skill", &template("my_skill"), 4096).unwrap();
        assert!(s.groups.is_empty() && s.body.starts_with("# my_skill"));
    }

    #[test]
    fn sessions_are_terminal_names_or_channel_and_chat() {
        assert_eq!(session_of("work"), ("cli", "work"));
        assert_eq!(session_of("telegram/42"), ("telegram", "42"));
    }
}
