//! The capability registry: what Chela can do, in groups that can be switched off or hidden.
//!
//! A capability (a tool) has an id, a group, a description, a JSON input schema, and says
//! whether the model may call it at all. Control happens per group, in the three layers of
//! Ameba-Claw's design:
//! 1. build features decide whether a group is registered at all (the driver's business);
//! 2. *enabled*: a disabled group's tools fail for every caller;
//! 3. *visible*: a hidden group's tools are left out of the model's tool list and refused when
//!    the model calls them anyway; people and scripts can still call them.
//!
//! A session may see extra groups (a skill unlocks them) through its [`Scope`]. Core groups
//! are always enabled and visible.
//!
//! The registry only decides; running a tool is the driver's job, after [`Registry::authorize`].

use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use chela_proto::chat::ToolSpec;

pub type Text = Cow<'static, str>;

/// One capability.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capability {
    pub id: Text,
    pub group: Text,
    pub description: Text,
    /// A JSON Schema object, as JSON text.
    pub input_schema: Text,
    /// Whether the model may call it. Some tools exist only for people and scripts.
    pub llm_callable: bool,
}

impl Capability {
    pub fn tool_spec(&self) -> ToolSpec<'_> {
        ToolSpec { name: &self.id, description: &self.description, input_schema: &self.input_schema }
    }
}

/// How a group is declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub id: Text,
    pub description: Text,
    /// Always enabled and visible; cannot be switched off.
    pub core: bool,
    /// Visible to the model unless someone hides it. Groups that need context first (hardware,
    /// say) start hidden and are unlocked per session.
    pub visible_by_default: bool,
    /// A few lines for the system prompt on when and how to use the group's tools; empty for
    /// none. Only groups the model can see contribute.
    pub guidance: Text,
}

/// A group and its current switches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub spec: GroupSpec,
    pub enabled: bool,
    pub visible: bool,
}

/// Who is calling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The model, through a tool call.
    Model,
    /// A person: `chela cap call`, or someone chatting (the turn's caller; the tool calls
    /// inside a turn are the model's).
    Manual,
    /// Chela itself: a schedule, a rule, a script.
    Internal,
}

/// Per-session view: groups this session sees on top of the base visibility.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scope<'a> {
    pub extra_visible: &'a [String],
}

/// Why a call is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    Unknown { id: String },
    GroupDisabled { id: String, group: String },
    Hidden { id: String, group: String },
    NotForModel { id: String },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Unknown { id } => write!(f, "There is no tool called `{id}`."),
            CallError::GroupDisabled { id, group } => write!(
                f,
                "The tool `{id}` is switched off: its group `{group}` is disabled. Enable it with `chela cap enable {group}`."
            ),
            CallError::Hidden { id, group } => write!(
                f,
                "The tool `{id}` is not available to the assistant: its group `{group}` is hidden. Show it with `chela cap show {group}`."
            ),
            CallError::NotForModel { id } => write!(f, "The tool `{id}` can only be called by a person or a script."),
        }
    }
}

impl core::error::Error for CallError {}

/// Why a registry change is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlError {
    UnknownGroup { group: String, known: Vec<String> },
    CoreGroup { group: String },
    Duplicate { id: String },
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::UnknownGroup { group, known } => {
                write!(f, "There is no capability group `{group}`. Groups: {}.", known.join(", "))
            }
            ControlError::CoreGroup { group } => {
                write!(f, "`{group}` is a core group: it is always enabled and visible.")
            }
            ControlError::Duplicate { id } => write!(f, "`{id}` is registered twice."),
        }
    }
}

impl core::error::Error for ControlError {}

/// All capabilities and their groups.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    groups: Vec<Group>,
    caps: Vec<Capability>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers a group with its capabilities. Ids must be new.
    pub fn add_group(&mut self, spec: GroupSpec, caps: Vec<Capability>) -> Result<(), ControlError> {
        if self.group(&spec.id).is_some() {
            return Err(ControlError::Duplicate { id: spec.id.into_owned() });
        }
        for (i, c) in caps.iter().enumerate() {
            if self.get(&c.id).is_some() || caps[..i].iter().any(|d| d.id == c.id) {
                return Err(ControlError::Duplicate { id: c.id.to_string() });
            }
        }
        let visible = spec.visible_by_default || spec.core;
        self.caps.extend(caps.into_iter().map(|mut c| {
            c.group = spec.id.clone();
            c
        }));
        self.groups.push(Group { spec, enabled: true, visible });
        Ok(())
    }

    /// Removes a group and its capabilities (an MCP server that went away).
    pub fn remove_group(&mut self, id: &str) -> bool {
        let before = self.groups.len();
        self.groups.retain(|g| g.spec.id != id);
        self.caps.retain(|c| c.group != id);
        before != self.groups.len()
    }

    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    pub fn group(&self, id: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.spec.id == id)
    }

    pub fn capabilities(&self) -> &[Capability] {
        &self.caps
    }

    /// The capabilities of one group.
    pub fn in_group<'a>(&'a self, group: &'a str) -> impl Iterator<Item = &'a Capability> + 'a {
        self.caps.iter().filter(move |c| c.group == group)
    }

    pub fn get(&self, id: &str) -> Option<&Capability> {
        self.caps.iter().find(|c| c.id == id)
    }

    /// Replaces what the model is told of capability `id` (a description built from the
    /// registry itself, such as the groups `tools_unlock` can open); false if there is none.
    pub fn describe(&mut self, id: &str, description: Text) -> bool {
        match self.caps.iter_mut().find(|c| c.id == id) {
            Some(c) => {
                c.description = description;
                true
            }
            None => false,
        }
    }

    fn group_mut(&mut self, id: &str) -> Result<&mut Group, ControlError> {
        let known: Vec<String> = self.groups.iter().map(|g| g.spec.id.to_string()).collect();
        let g = self
            .groups
            .iter_mut()
            .find(|g| g.spec.id == id)
            .ok_or(ControlError::UnknownGroup { group: id.to_string(), known })?;
        if g.spec.core {
            return Err(ControlError::CoreGroup { group: id.to_string() });
        }
        Ok(g)
    }

    /// Enables or disables a group for every caller.
    pub fn set_enabled(&mut self, group: &str, enabled: bool) -> Result<(), ControlError> {
        self.group_mut(group)?.enabled = enabled;
        Ok(())
    }

    /// Shows or hides a group from the model.
    pub fn set_visible(&mut self, group: &str, visible: bool) -> Result<(), ControlError> {
        self.group_mut(group)?.visible = visible;
        Ok(())
    }

    /// Applies persisted switches. Names of groups that are not registered (left out of this
    /// build, or an MCP server not connected) are skipped and returned.
    pub fn apply<'a>(&mut self, disabled: &'a [String], hidden: &'a [String], shown: &'a [String]) -> Vec<&'a str> {
        let mut unknown = Vec::new();
        for g in &mut self.groups {
            if g.spec.core {
                continue;
            }
            let id = g.spec.id.as_ref();
            g.enabled = !disabled.iter().any(|d| d == id);
            g.visible = if hidden.iter().any(|h| h == id) {
                false
            } else {
                shown.iter().any(|s| s == id) || g.spec.visible_by_default
            };
        }
        for name in disabled.iter().chain(hidden).chain(shown) {
            if self.group(name).is_none() && !unknown.contains(&name.as_str()) {
                unknown.push(name.as_str());
            }
        }
        unknown
    }

    fn visible_in(&self, g: &Group, scope: Scope<'_>) -> bool {
        g.spec.core || g.visible || scope.extra_visible.iter().any(|x| *x == g.spec.id)
    }

    /// The tools the model sees in `scope`, in registration order.
    pub fn tools_for(&self, scope: Scope<'_>) -> Vec<ToolSpec<'_>> {
        self.caps
            .iter()
            .filter(|c| c.llm_callable)
            .filter(|c| self.group(&c.group).is_some_and(|g| (g.enabled || g.spec.core) && self.visible_in(g, scope)))
            .map(Capability::tool_spec)
            .collect()
    }

    /// Guidance of the groups the model sees in `scope`, one paragraph each.
    pub fn guidance_for(&self, scope: Scope<'_>) -> String {
        let mut out = String::new();
        for g in &self.groups {
            if g.spec.guidance.is_empty() || !(g.enabled || g.spec.core) || !self.visible_in(g, scope) {
                continue;
            }
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(&g.spec.guidance);
        }
        out
    }

    /// Checks that `caller` may call `id` in `scope`.
    pub fn authorize(&self, id: &str, caller: Caller, scope: Scope<'_>) -> Result<&Capability, CallError> {
        let cap = self.get(id).ok_or_else(|| CallError::Unknown { id: id.to_string() })?;
        let Some(g) = self.group(&cap.group) else {
            return Err(CallError::Unknown { id: id.to_string() });
        };
        if !g.enabled && !g.spec.core {
            return Err(CallError::GroupDisabled { id: id.to_string(), group: g.spec.id.to_string() });
        }
        if caller == Caller::Model {
            if !cap.llm_callable {
                return Err(CallError::NotForModel { id: id.to_string() });
            }
            if !self.visible_in(g, scope) {
                return Err(CallError::Hidden { id: id.to_string(), group: g.spec.id.to_string() });
            }
        }
        Ok(cap)
    }
}

#[cfg(test)]
mod tests;
