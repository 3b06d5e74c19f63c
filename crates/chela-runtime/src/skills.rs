//! Skills on the host: `skills/<name>/SKILL.md` in the workspace, the built-in ones compiled
//! into the binary, the cache of parsed files, and which skills are active in a conversation.
//!
//! Workspace skills are read through the file tools' sandbox ([`crate::tools::sandbox`]): a skill
//! folder that is a symlink, a `SKILL.md` that is a symlink, hard-linked or special, and any
//! path that would leave the workspace are refused. A workspace skill overrides the built-in one
//! of the same name; built-in skills cannot be changed or deleted.
//!
//! Which skills are active is per conversation, in `sessions/<channel>_<chat>.skills.json`
//! beside the conversation's file (a JSON list of names, written atomically under the file
//! lock), so it survives a restart and the file tools cannot touch it. A turn reads it when it
//! starts ([`Skills::for_session`]); `skill_activate` during a turn also updates the turn's
//! [`SessionRef`], so the next model call in the same turn already sees the unlocked groups.
//!
//! Everything here blocks (file IO): call it from blocking tools or the turn's file work.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use tokio::time::Instant;

use chela_core::config as keys;
use chela_core::skills::{self, Cache, Skill, Stamp};
use rustix::fs::{self as rfs, AtFlags};

use crate::config::Config;
use crate::tools::ToolError;
use crate::tools::sandbox::{Access, How, Kind, Opened, Sandbox, kind_of, refuse_links};
use crate::workspace::{Replace, Workspace, read_bounded, write_atomic, write_atomic_at};

// The `skill_mgr` group beside the skills it manages, as every service keeps its tools.
pub mod tools;
pub mod unlock;

/// The built-in skills: name and `SKILL.md` text.
const BUILT_IN: &[(&str, &str)] = &[
    ("chela_settings", include_str!("skills/chela_settings.md")),
    #[cfg(feature = "board")]
    ("board_hardware_info", include_str!("skills/board_hardware_info.md")),
];

/// Most folders under `skills/` looked at when listing; the rest are reported as left out.
const MAX_LISTED: usize = 1000;

/// Largest `sessions/*.skills.json` read.
const MAX_ACTIVE_FILE: u64 = 64 * 1024;

/// Where a skill comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    BuiltIn,
    Workspace,
}

/// A skill as found.
#[derive(Clone, Debug)]
pub struct Found {
    pub skill: Arc<Skill>,
    pub origin: Origin,
    /// A workspace skill with the name of a built-in one.
    pub overrides_built_in: bool,
}

// The conversation a turn runs in; it lives with the tools, which all get it.
pub use crate::tools::SessionRef;

/// What a turn needs from the skills: its part of the system prompt and the groups named by
/// the active skills.
#[derive(Debug, Default)]
pub struct SessionSkills {
    pub prompt: String,
    pub named_groups: Vec<String>,
}

/// The skills of one workspace, with the cache of parsed files. Shared (`Arc`) by every
/// session and tool call.
pub struct Skills {
    cache: Mutex<Cache<Arc<Skill>>>,
    /// The cache's clock: milliseconds since this instant.
    epoch: Instant,
}

impl Skills {
    /// A cache sized by `skills.cache_max` and `skills.cache_ttl_secs`.
    pub fn new(cfg: &Config) -> Skills {
        let ttl_ms = cfg.int(keys::SKILLS_CACHE_TTL_SECS).unsigned_abs().saturating_mul(1000);
        Skills { cache: Mutex::new(Cache::new(cfg.usize(keys::SKILLS_CACHE_MAX), ttl_ms)), epoch: Instant::now() }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The skill called `name`: the workspace's if it has one, else the built-in one.
    pub fn lookup(&self, ws: &Workspace, cfg: &Config, name: &str) -> Result<Option<Found>, ToolError> {
        skills::check_name(name).map_err(|e| ToolError::invalid_args(e.to_string()))?;
        let built_in = built_in(name);
        match self.workspace_skill(ws, cfg, name)? {
            Some(skill) => Ok(Some(Found { skill, origin: Origin::Workspace, overrides_built_in: built_in.is_some() })),
            None => Ok(built_in.map(|skill| Found { skill, origin: Origin::BuiltIn, overrides_built_in: false })),
        }
    }

    /// The workspace's `skills/<name>/SKILL.md`, from the cache while its size and mtime are
    /// unchanged and its entry is younger than the TTL.
    fn workspace_skill(&self, ws: &Workspace, cfg: &Config, name: &str) -> Result<Option<Arc<Skill>>, ToolError> {
        let sb = sandbox(ws)?;
        // A `skills` that is not a real folder holds no workspace skills (the built-in ones still
        // work); `list` reports why.
        if !skills_folder(&sb).unwrap_or(false) {
            return Ok(None);
        }
        self.workspace_skill_in(&sb, cfg, name)
    }

    /// [`Skills::workspace_skill`] with the sandbox already open and `skills/` checked.
    fn workspace_skill_in(&self, sb: &Sandbox, cfg: &Config, name: &str) -> Result<Option<Arc<Skill>>, ToolError> {
        let folder = format!("skills/{name}");
        match sb.kind(&sb.place(&folder, Access::Read, false)?, &folder)? {
            Kind::Dir => {}
            Kind::Missing => return Ok(None),
            Kind::Symlink => {
                return Err(ToolError::refused(format!(
                    "`{folder}` is a symlink; skills are read only from real folders in the workspace."
                )));
            }
            Kind::File(_) | Kind::Special(_) => {
                return Err(ToolError::new(format!("`{folder}` is not a folder, so it is not a skill.")));
            }
        }
        let rel = format!("{folder}/SKILL.md");
        let place = sb.place(&rel, Access::Read, false)?;
        let st = match sb.kind(&place, &rel)? {
            Kind::Missing => return Ok(None),
            Kind::File(st) => st,
            Kind::Symlink => return Err(sb.symlink_refused(&rel)),
            Kind::Dir | Kind::Special(_) => {
                return Err(ToolError::new(format!("`{rel}` is not a regular file, so it is not a skill.")));
            }
        };
        refuse_links(&st, &rel)?;
        let stamp = stamp_of(&st);
        let now = self.now();
        if let Some(hit) = self.cache.lock().unwrap_or_else(PoisonError::into_inner).get(name, stamp, now) {
            return Ok(Some(hit));
        }
        let max = cfg.usize(keys::SKILLS_MAX_BYTES);
        let size = usize::try_from(stamp.size).unwrap_or(usize::MAX);
        if size > max {
            return Err(ToolError::new(format!("`{rel}`: {}", skills::SkillError::TooLarge { bytes: size, max })));
        }
        let Opened::File(f, st) = sb.open(&place, How::Read, &rel)? else {
            return Err(ToolError::new(format!("`{rel}` is a folder, not a SKILL.md file.")));
        };
        let text = read_text(f, max, &rel)?;
        let skill = Arc::new(skills::parse(name, &text, max).map_err(|e| ToolError::new(format!("`{rel}`: {e}")))?);
        // The stamp of the file that was read, so an edit between the stat and the open is seen.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).insert(name, stamp_of(&st), Arc::clone(&skill), now);
        Ok(Some(skill))
    }

    /// Every skill, by name, and the problems found (a broken `SKILL.md`, a symlinked folder),
    /// each naming its folder.
    pub fn list(&self, ws: &Workspace, cfg: &Config) -> (Vec<Found>, Vec<String>) {
        let mut names: Vec<String> = BUILT_IN.iter().map(|(n, _)| (*n).to_owned()).collect();
        let mut problems = Vec::new();
        // One workspace handle for every lookup: opening it is most of a lookup's cost.
        let sb = match sandbox(ws) {
            Ok(sb) if skills_folder(&sb).unwrap_or(false) => Some(sb),
            _ => None,
        };
        match workspace_names(ws) {
            Ok((found, left_out)) => {
                names.extend(found);
                if left_out > 0 {
                    problems.push(format!("skills/: {left_out} more folders were not looked at (over {MAX_LISTED})"));
                }
            }
            Err(e) => problems.push(e.0),
        }
        chela_infra::sort::sort_by(&mut names, Ord::cmp);
        names.dedup();
        let mut out = Vec::new();
        for name in names {
            if skills::check_name(&name).is_err() {
                problems.push(format!("skills/{name}: not a valid skill name (lowercase letters, digits, - and _)"));
                continue;
            }
            let found = match &sb {
                Some(sb) => self.workspace_skill_in(sb, cfg, &name),
                None => Ok(None),
            };
            let built_in = built_in(&name);
            match found {
                Ok(Some(skill)) => {
                    out.push(Found { skill, origin: Origin::Workspace, overrides_built_in: built_in.is_some() })
                }
                Ok(None) => out.extend(built_in.map(|skill| Found {
                    skill,
                    origin: Origin::BuiltIn,
                    overrides_built_in: false,
                })),
                Err(e) => problems.push(e.0),
            }
        }
        (out, problems)
    }

    /// Writes `skills/<name>/SKILL.md` (and `scripts/main.lua`) after checking that it parses;
    /// the cache forgets the old one at once.
    pub fn save(
        &self,
        ws: &Workspace,
        cfg: &Config,
        name: &str,
        text: &str,
        lua: Option<&str>,
    ) -> Result<String, ToolError> {
        let max = cfg.usize(keys::SKILLS_MAX_BYTES);
        skills::parse(name, text, max).map_err(|e| ToolError::invalid_args(e.to_string()))?;
        let max_write = cfg.usize(keys::FILES_MAX_WRITE_BYTES);
        if let Some(code) = lua
            && code.len() > max_write
        {
            return Err(ToolError::invalid_args(format!(
                "The script is {} bytes, over the {max_write}-byte limit (files.max_write_bytes).",
                code.len()
            )));
        }
        let sb = sandbox(ws)?;
        skills_folder(&sb)?;
        let folder = format!("skills/{name}");
        if let Kind::Symlink = sb.kind(&sb.place(&folder, Access::Write, true)?, &folder)? {
            return Err(ToolError::refused(format!(
                "`{folder}` is a symlink; a skill is saved only in a real folder."
            )));
        }
        let mut files = vec![(format!("{folder}/SKILL.md"), text)];
        if let Some(code) = lua {
            files.push((format!("{folder}/scripts/main.lua"), code));
        }
        let result = (|| {
            for (rel, content) in &files {
                let place = sb.place(rel, Access::Write, true)?;
                match sb.kind(&place, rel)? {
                    Kind::Missing | Kind::File(_) => {}
                    Kind::Symlink => return Err(sb.symlink_refused(rel)),
                    Kind::Dir | Kind::Special(_) => {
                        return Err(ToolError::new(format!("`{rel}` is not a regular file.")));
                    }
                }
                let file = place.name.as_deref().ok_or_else(|| ToolError::new("no file name"))?;
                write_atomic_at(&place.dir, file, content.as_bytes(), Replace::Yes)
                    .map_err(|e| ToolError::new(format!("Cannot write `{rel}`: {e}.")))?;
            }
            Ok(())
        })();
        self.invalidate(name);
        result?;
        let lua_note = if lua.is_some() { " and scripts/main.lua" } else { "" };
        Ok(format!("saved skill `{name}` ({folder}/SKILL.md{lua_note})"))
    }

    /// Deletes the workspace skill `name`: its `SKILL.md`, `scripts/main.lua` and the folders if
    /// they are left empty. Built-in skills are refused.
    pub fn delete(&self, ws: &Workspace, name: &str) -> Result<String, ToolError> {
        skills::check_name(name).map_err(|e| ToolError::invalid_args(e.to_string()))?;
        let sb = sandbox(ws)?;
        let folder = format!("skills/{name}");
        let kind = if skills_folder(&sb)? {
            sb.kind(&sb.place(&folder, Access::Write, false)?, &folder)?
        } else {
            Kind::Missing
        };
        let result = match kind {
            Kind::Dir => remove_skill_files(&sb, &folder),
            Kind::Missing if built_in(name).is_some() => Err(ToolError::refused(format!(
                "`{name}` is a built-in skill; it cannot be deleted. A workspace skill of the same name \
                 (skill_save) overrides it."
            ))),
            Kind::Missing => Err(ToolError::not_found(format!("There is no skill `{name}` in the workspace."))),
            Kind::Symlink => Err(ToolError::refused(format!(
                "`{folder}` is a symlink, not a skill folder; remove it with file_delete."
            ))),
            Kind::File(_) | Kind::Special(_) => Err(ToolError::new(format!("`{folder}` is not a skill folder."))),
        };
        self.invalidate(name);
        result
    }

    pub fn invalidate(&self, name: &str) {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).invalidate(name);
    }

    /// The skills' part of a conversation's system prompt, and the groups its active skills
    /// name: the summary of every skill (within `skills.summary_budget`), then the whole text of
    /// each active or `always` skill. Problems are logged, never fatal to the turn.
    pub fn for_session(&self, ws: &Workspace, cfg: &Config, channel: &str, chat: &str) -> SessionSkills {
        let (all, problems) = self.list(ws, cfg);
        for p in &problems {
            chela_log::warn!("skill: {p}");
        }
        let active = read_active(&active_path(ws, channel, chat));
        let refs: Vec<&Skill> = all.iter().map(|f| &*f.skill).collect();
        let summary = skills::summary(&refs, cfg.usize(keys::SKILLS_SUMMARY_BUDGET));
        let mut prompt = String::new();
        if !summary.is_empty() {
            prompt.push_str(
                "## Skills\n\nSkills hold instructions for particular tasks. When a task matches one, call \
                 skill_activate with its name first: its instructions then enter this conversation and the \
                 tools it unlocks appear.\n\n",
            );
            prompt.push_str(summary.trim_end());
        }
        let mut named_groups = Vec::new();
        for f in &all {
            let is_active = active.contains(&f.skill.name);
            if !is_active && !f.skill.always {
                continue;
            }
            if is_active {
                named_groups.extend(f.skill.groups.iter().cloned());
            }
            let state = if is_active { "active" } else { "always on" };
            prompt.push_str(&format!("\n\n## Skill `{}` ({state})\n\n{}", f.skill.name, f.skill.body));
        }
        named_groups.extend(unlock::unlocked(ws, channel, chat));
        SessionSkills { prompt, named_groups }
    }

    /// Activates `name` in the conversation `session`; returns the skill.
    pub fn activate(&self, ws: &Workspace, cfg: &Config, session: &SessionRef, name: &str) -> Result<Found, ToolError> {
        let found = self.lookup(ws, cfg, name)?.ok_or_else(|| self.no_such(ws, cfg, name))?;
        let max = cfg.usize(keys::SKILLS_MAX_ACTIVE);
        let active = change_active(ws, &session.channel, &session.chat, |active| {
            if !active.iter().any(|a| a == name) {
                if active.len() >= max {
                    return Err(ToolError::refused(format!(
                        "{} skills are already active here, the most allowed (skills.max_active): {}. \
                         Deactivate one first with skill_deactivate.",
                        active.len(),
                        active.join(", ")
                    )));
                }
                active.push(name.to_owned());
            }
            Ok(())
        })?;
        session.set_named_groups(self.groups_of(ws, cfg, session, &active));
        Ok(found)
    }

    /// Deactivates `name` in `session`; whether it was active.
    pub fn deactivate(
        &self,
        ws: &Workspace,
        cfg: &Config,
        session: &SessionRef,
        name: &str,
    ) -> Result<bool, ToolError> {
        skills::check_name(name).map_err(|e| ToolError::invalid_args(e.to_string()))?;
        let mut was = false;
        let active = change_active(ws, &session.channel, &session.chat, |active| {
            was = active.iter().any(|a| a == name);
            active.retain(|a| a != name);
            Ok(())
        })?;
        session.set_named_groups(self.groups_of(ws, cfg, session, &active));
        Ok(was)
    }

    /// The names active in a conversation.
    pub fn active(&self, ws: &Workspace, channel: &str, chat: &str) -> Vec<String> {
        read_active(&active_path(ws, channel, chat))
    }

    /// The groups the active skills name, and those the conversation unlocked by hand.
    fn groups_of(&self, ws: &Workspace, cfg: &Config, session: &SessionRef, active: &[String]) -> Vec<String> {
        let mut out = unlock::unlocked(ws, &session.channel, &session.chat);
        for name in active {
            if let Ok(Some(f)) = self.lookup(ws, cfg, name) {
                out.extend(f.skill.groups.iter().cloned());
            }
        }
        out
    }

    fn no_such(&self, ws: &Workspace, cfg: &Config, name: &str) -> ToolError {
        let names: Vec<String> = self.list(ws, cfg).0.iter().map(|f| f.skill.name.clone()).collect();
        ToolError::not_found(format!("There is no skill `{name}`. Skills: {}.", names.join(", ")))
    }
}

/// The built-in skill `name`, parsed once.
fn built_in(name: &str) -> Option<Arc<Skill>> {
    static PARSED: OnceLock<Vec<Arc<Skill>>> = OnceLock::new();
    let all = PARSED.get_or_init(|| {
        BUILT_IN
            .iter()
            .map(|(n, text)| {
                // Checked by a test: a built-in skill that does not parse is a programming error.
                Arc::new(skills::parse(n, text, usize::MAX).unwrap_or_else(|e| panic!("built-in skill {n}: {e}")))
            })
            .collect()
    });
    all.iter().find(|s| s.name == name).cloned()
}

/// The built-in skills' names.
pub fn built_in_names() -> impl Iterator<Item = &'static str> {
    BUILT_IN.iter().map(|(n, _)| *n)
}

fn sandbox(ws: &Workspace) -> Result<Sandbox, ToolError> {
    // Skills are never written inside version-control folders: their names cannot reach one.
    Sandbox::open_root(ws.root(), false)
}

/// Whether the workspace has a `skills/` folder; a symlink or a file there is refused, so no
/// skill is read through a link, wherever it points.
fn skills_folder(sb: &Sandbox) -> Result<bool, ToolError> {
    match sb.kind(&sb.place("skills", Access::Read, false)?, "skills")? {
        Kind::Dir => Ok(true),
        Kind::Missing => Ok(false),
        Kind::Symlink => {
            Err(ToolError::refused("`skills` in the workspace is a symlink; skills are read only from a real folder."))
        }
        Kind::File(_) | Kind::Special(_) => Err(ToolError::new("`skills` in the workspace is not a folder.")),
    }
}

#[allow(clippy::unnecessary_cast)] // The field types differ between targets.
fn stamp_of(st: &rfs::Stat) -> Stamp {
    Stamp {
        mtime_ns: i128::from(st.st_mtime as i64) * 1_000_000_000 + i128::from(st.st_mtime_nsec as i64),
        size: st.st_size as u64,
    }
}

fn read_text(f: std::fs::File, max: usize, rel: &str) -> Result<String, ToolError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    f.take(max as u64 + 1).read_to_end(&mut bytes).map_err(|e| ToolError::new(format!("Cannot read `{rel}`: {e}.")))?;
    if bytes.len() > max {
        return Err(ToolError::new(format!("`{rel}`: {}", skills::SkillError::TooLarge { bytes: bytes.len(), max })));
    }
    String::from_utf8(bytes).map_err(|_| ToolError::new(format!("`{rel}` is not UTF-8 text.")))
}

/// The folder names under `skills/` (real folders only; symlinks are listed so they are
/// reported), at most [`MAX_LISTED`], and how many were left out.
fn workspace_names(ws: &Workspace) -> Result<(Vec<String>, usize), ToolError> {
    let sb = sandbox(ws)?;
    if !skills_folder(&sb)? {
        return Ok((Vec::new(), 0));
    }
    let dir = sb.dir("skills")?;
    let mut entries = rfs::Dir::read_from(&dir).map_err(|e| ToolError::new(format!("Cannot list skills/: {e}.")))?;
    let (mut names, mut left_out) = (Vec::new(), 0);
    while let Some(entry) = entries.read() {
        let Ok(entry) = entry else { break };
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." || name.as_bytes().starts_with(b".") {
            continue;
        }
        let Ok(st) = rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
        if !matches!(kind_of(st), Kind::Dir | Kind::Symlink) {
            continue;
        }
        if names.len() >= MAX_LISTED {
            left_out += 1;
            continue;
        }
        names.push(name.to_string_lossy().into_owned());
    }
    Ok((names, left_out))
}

fn remove_skill_files(sb: &Sandbox, folder: &str) -> Result<String, ToolError> {
    for rel in [format!("{folder}/SKILL.md"), format!("{folder}/scripts/main.lua")] {
        let Ok(place) = sb.place(&rel, Access::Write, false) else { continue };
        if let (Kind::File(_) | Kind::Symlink, Some(name)) = (sb.kind(&place, &rel)?, place.name.as_deref()) {
            rfs::unlinkat(&place.dir, name, AtFlags::empty())
                .map_err(|e| ToolError::new(format!("Cannot delete `{rel}`: {}.", std::io::Error::from(e))))?;
        }
    }
    let mut left = false;
    for rel in [format!("{folder}/scripts"), folder.to_owned()] {
        let Ok(place) = sb.place(&rel, Access::Write, false) else { continue };
        if let (Kind::Dir, Some(name)) = (sb.kind(&place, &rel)?, place.name.as_deref()) {
            match rfs::unlinkat(&place.dir, name, AtFlags::REMOVEDIR) {
                Ok(()) => {}
                Err(rustix::io::Errno::NOTEMPTY) => left = true,
                Err(e) => return Err(ToolError::new(format!("Cannot delete `{rel}`: {}.", std::io::Error::from(e)))),
            }
        }
    }
    if left {
        Ok(format!("deleted the skill (its SKILL.md); `{folder}/` still holds other files, left in place"))
    } else {
        Ok(format!("deleted the skill and `{folder}/`"))
    }
}

/// `sessions/<channel>_<chat>.skills.json`: beside the conversation, where the file tools
/// cannot reach.
pub fn active_path(ws: &Workspace, channel: &str, chat: &str) -> PathBuf {
    ws.session_path(channel, chat).with_extension("skills.json")
}

/// The active names in `path`; a missing file is none, a damaged one is none with a warning.
fn read_active(path: &Path) -> Vec<String> {
    let text = match read_bounded(path, MAX_ACTIVE_FILE) {
        Ok(Some(t)) => t,
        Ok(None) => return Vec::new(),
        Err(e) => {
            chela_log::warn!("{}: {e}; no skill counts as active", path.display());
            return Vec::new();
        }
    };
    match serde_json::from_str::<Vec<String>>(&text) {
        Ok(names) => names.into_iter().filter(|n| skills::check_name(n).is_ok()).collect(),
        Err(e) => {
            chela_log::warn!("{}: not a JSON list of skill names ({e}); no skill counts as active", path.display());
            Vec::new()
        }
    }
}

/// Changes the active list of a conversation under its lock and writes it back atomically.
fn change_active(
    ws: &Workspace,
    channel: &str,
    chat: &str,
    f: impl FnOnce(&mut Vec<String>) -> Result<(), ToolError>,
) -> Result<Vec<String>, ToolError> {
    let path = active_path(ws, channel, chat);
    let io = |e: std::io::Error| ToolError::new(format!("Cannot save the active skills in {}: {e}.", path.display()));
    std::fs::create_dir_all(ws.sessions_dir()).map_err(io)?;
    // The lock's own failures are IO errors; the change's refusals travel inside.
    let changed = crate::lock::with_file_lock(&path, || -> std::io::Result<Result<Vec<String>, ToolError>> {
        let mut active = read_active(&path);
        if let Err(e) = f(&mut active) {
            return Ok(Err(e));
        }
        let json = serde_json::to_string(&active).map_err(std::io::Error::other)?;
        write_atomic(&path, json.as_bytes())?;
        Ok(Ok(active))
    });
    changed.map_err(io)?
}

#[cfg(test)]
mod tests;
