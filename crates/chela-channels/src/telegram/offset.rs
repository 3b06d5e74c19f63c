//! The next `getUpdates` offset, kept in `state/telegram.offset` so a restart goes on where
//! the last run stopped. Written atomically after each handled update; the file is one decimal
//! number and a newline.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::workspace::{Workspace, write_atomic};

pub struct Store {
    path: PathBuf,
}

impl Store {
    pub fn new(ws: &Workspace) -> Store {
        Store { path: ws.root().join("state").join("telegram.offset") }
    }

    /// The saved offset; 0 (every update Telegram still holds) when there is none. An
    /// unreadable file is reported and read as 0 too: at worst some updates are seen twice.
    pub async fn load(&self) -> i64 {
        let path = self.path.clone();
        let read = crate::tasks::blocking(move || std::fs::read_to_string(&path)).await;
        match read {
            Ok(Ok(text)) => text.trim().parse().unwrap_or_else(|_| {
                chela_log::warn!("telegram: {} does not hold a number; starting from 0", self.path.display());
                0
            }),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Ok(Err(e)) => {
                chela_log::warn!("telegram: cannot read {}: {e}; starting from 0", self.path.display());
                0
            }
            Err(e) => {
                chela_log::warn!("telegram: reading the offset failed: {e}; starting from 0");
                0
            }
        }
    }

    pub async fn save(&self, offset: i64) -> Result<()> {
        let path = self.path.clone();
        crate::tasks::blocking(move || -> Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
            write_atomic(&path, format!("{offset}\n").as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))
        })
        .await
        .context("the offset writer stopped")?
    }
}
