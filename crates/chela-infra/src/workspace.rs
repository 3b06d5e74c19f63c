//! The workspace folder: where Chela keeps its files, and the names of the ones every command
//! knows. The file writes themselves are [`crate::fsio`]'s (re-exported here for the callers
//! that reach them through the workspace).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use crate::fsio::{
    Replace, append_durable, append_whole, archive_session, archive_target, create_private_dir, open_dir, read_bounded,
    read_tail_lines, sweep_stale_temps, temp_path, write_atomic, write_atomic_at,
};

/// Where Chela keeps its files.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
}

pub use crate::authority::{CONFIG_FILE, OVERRIDES_FILE};

impl Workspace {
    /// `--workspace DIR`, else `CHELA_HOME`, else `~/.chela`.
    pub fn locate(flag: Option<PathBuf>) -> Result<Workspace> {
        let root = match flag {
            Some(p) => p,
            None => match std::env::var_os("CHELA_HOME").filter(|v| !v.is_empty()) {
                Some(p) => PathBuf::from(p),
                None => {
                    let home = std::env::var_os("HOME")
                        .filter(|v| !v.is_empty())
                        .context("HOME is not set: pass --workspace DIR or set CHELA_HOME")?;
                    PathBuf::from(home).join(".chela")
                }
            },
        };
        Ok(Workspace { root })
    }

    /// Creates the folder (private to the user) and its subfolders if missing.
    pub fn ensure(&self) -> Result<()> {
        for dir in [self.root.clone(), self.sessions_dir(), self.root.join("memory")] {
            if !dir.is_dir() {
                create_private_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        // Every folder beneath, not only these: the file tools write anywhere in the workspace.
        sweep_stale_temps(&self.root);
        // The seal key from the first start on, so only stores there before it are adopted.
        crate::authority::prepare(&self.root.join(crate::authority::STATE_DIR))
            .with_context(|| format!("cannot make the seal key in {}", self.root.display()))?;
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn config_path(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }

    pub fn overrides_path(&self) -> PathBuf {
        self.root.join(OVERRIDES_FILE)
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `sessions/<channel>_<chat_id>.jsonl`, with anything but `[A-Za-z0-9_-.]` in the id
    /// replaced so an id can never name a path outside the folder.
    pub fn session_path(&self, channel: &str, chat_id: &str) -> PathBuf {
        let clean = |s: &str| -> String {
            s.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' }).collect()
        };
        let mut name = format!("{}_{}", clean(channel), clean(chat_id));
        if name.starts_with('.') {
            name.insert(0, '_');
        }
        self.sessions_dir().join(format!("{name}.jsonl"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_cannot_escape() {
        let ws = Workspace { root: PathBuf::from("/w") };
        assert_eq!(ws.session_path("cli", "local"), PathBuf::from("/w/sessions/cli_local.jsonl"));
        assert_eq!(ws.session_path("tg", "../../etc/passwd"), PathBuf::from("/w/sessions/tg_.._.._etc_passwd.jsonl"));
        assert_eq!(ws.session_path("", ""), PathBuf::from("/w/sessions/_.jsonl"));
    }
}
