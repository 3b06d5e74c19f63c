//! `chela state [check] | state trust FILE`: the seals of Chela's records of the owner's
//! decisions (see [`crate::authority`]).

use std::process::ExitCode;

use anyhow::Result;

use crate::args::StateCmd;
use crate::authority::{self, STATE_DIR};
use crate::workspace::Workspace;

/// Largest store looked at: the stores' own bounds are smaller.
pub(crate) const MAX_STORE_BYTES: u64 = 4 << 20;

pub fn run(ws: &Workspace, cmd: StateCmd) -> Result<ExitCode> {
    let dir = ws.root().join(STATE_DIR);
    match cmd {
        StateCmd::Check => {
            let found = authority::check(&dir, MAX_STORE_BYTES);
            if found.is_empty() {
                outln!("No sealed stores yet: nobody was approved, no device and no endpoint.");
            }
            let mut bad = 0;
            for (name, verdict) in &found {
                match verdict {
                    Ok(()) => outln!("{name}: trusted (sealed by Chela)"),
                    Err(why) => {
                        bad += 1;
                        outln!("{name}: NOT trusted: {why}");
                    }
                }
            }
            Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        StateCmd::Trust(name) => {
            let said = authority::trust(&dir, &name, MAX_STORE_BYTES)?;
            outln!("{said}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
