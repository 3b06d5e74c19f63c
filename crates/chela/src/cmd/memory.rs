//! `chela memory reindex`: the memory index built again from the memory files.

use std::process::ExitCode;

use anyhow::Result;

use crate::args::MemoryCmd;
use crate::workspace::Workspace;

#[cfg(feature = "memory")]
pub fn run(ws: &Workspace, cmd: MemoryCmd) -> Result<ExitCode> {
    use anyhow::Context;

    use crate::memory::index::{Index, index_path};
    match cmd {
        MemoryCmd::Reindex => {
            let path = index_path(ws);
            let done = Index::rebuild(ws).with_context(|| format!("cannot build {}", path.display()))?;
            outln!(
                "Indexed {} entries and {} note passages from {} files into {}.",
                done.entries,
                done.chunks,
                done.files,
                path.strip_prefix(ws.root()).unwrap_or(&path).display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(not(feature = "memory"))]
pub fn run(_: &Workspace, _: MemoryCmd) -> Result<ExitCode> {
    anyhow::bail!("this build has no memory tools (the `memory` cargo feature is off)")
}
