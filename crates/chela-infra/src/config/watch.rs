//! Settings reload: a snapshot of the configuration that is re-read when a file changes.
//!
//! The daemon holds a [`ConfigWatch`] and calls [`ConfigWatch::poll`] (on a timer, or when a
//! file-change notification arrives); work in progress keeps the `Arc<Config>` it started
//! with, new work takes [`ConfigWatch::current`]. A poll costs two `stat`s when nothing
//! changed. `chela config set` in another process replaces `overrides.toml` by rename, so
//! its inode changes even when size and time do not.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use anyhow::Result;

use super::Config;
use crate::workspace::Workspace;

/// What identifies one version of a file: changed by any write or replacement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

/// The configuration of a workspace as a snapshot that follows `chela.toml` and
/// `overrides.toml`. The environment is read once, when the watch is made: a process's
/// environment does not change under it.
#[derive(Debug)]
pub struct ConfigWatch {
    ws: Workspace,
    env: Vec<(String, String)>,
    stamps: [Option<Stamp>; 2],
    current: Arc<Config>,
}

impl ConfigWatch {
    /// Reads the configuration of `ws` now.
    pub fn new(ws: Workspace) -> Result<ConfigWatch> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let stamps = Self::stamps(&ws);
        let current = Arc::new(Config::load_with_env(&ws, &env)?);
        Ok(ConfigWatch { ws, env, stamps, current })
    }

    /// The latest snapshot.
    pub fn current(&self) -> Arc<Config> {
        Arc::clone(&self.current)
    }

    /// Re-reads the files if either changed since the last read. `Ok(Some)` is the new
    /// snapshot (also kept as [`current`](Self::current)); `Ok(None)`: nothing changed. A file
    /// that changed into something invalid is reported once as `Err`, and the last good
    /// snapshot stays current until the file is fixed.
    pub fn poll(&mut self) -> Result<Option<Arc<Config>>> {
        // Stamped before reading: a write during the read shows as a change at the next poll.
        let now = Self::stamps(&self.ws);
        if now == self.stamps {
            return Ok(None);
        }
        self.stamps = now;
        let cfg = Arc::new(Config::load_with_env(&self.ws, &self.env)?);
        self.current = Arc::clone(&cfg);
        Ok(Some(cfg))
    }

    fn stamps(ws: &Workspace) -> [Option<Stamp>; 2] {
        [stamp(&ws.config_path()), stamp(&ws.overrides_path())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_core::config::{LLM_MAX_TOKENS, LLM_MODEL};

    #[test]
    fn a_poll_yields_a_new_snapshot_only_when_a_file_changed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
        ws.ensure().unwrap();
        let mut watch = ConfigWatch::new(ws.clone()).unwrap();
        assert_eq!(watch.current().get(LLM_MODEL), "");
        assert!(watch.poll().unwrap().is_none());

        super::super::set_override(&ws, "llm.model", "after-set").unwrap();
        let cfg = watch.poll().unwrap().expect("overrides.toml changed");
        assert_eq!(cfg.get(LLM_MODEL), "after-set");
        assert!(watch.poll().unwrap().is_none(), "nothing changed since");

        // Same length, same second: the rename still shows.
        super::super::set_override(&ws, "llm.model", "after-sex").unwrap();
        assert_eq!(watch.poll().unwrap().expect("changed").get(LLM_MODEL), "after-sex");

        std::fs::write(ws.config_path(), "[llm]\nmax_tokens = \"lots\"\n").unwrap();
        let e = watch.poll().unwrap_err();
        assert!(format!("{e:#}").contains("llm.max_tokens"), "{e:#}");
        assert_eq!(watch.current().get(LLM_MODEL), "after-sex", "the last good snapshot stays");
        assert!(watch.poll().unwrap().is_none(), "a broken file is reported once");

        std::fs::write(ws.config_path(), "[llm]\nmax_tokens = 77\n").unwrap();
        assert_eq!(watch.poll().unwrap().expect("fixed").int(LLM_MAX_TOKENS), 77);
        std::fs::remove_file(ws.config_path()).unwrap();
        assert_eq!(watch.poll().unwrap().expect("removed").int(LLM_MAX_TOKENS), 4096);
    }
}
