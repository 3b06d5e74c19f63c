//! A test run again in a child process of its own test binary, for what only another process
//! can show: a SIGKILL at a chosen moment, a lock held across processes.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Starts test `name` of the module `module` (the caller's `module_path!()`) in a child process
/// of the running test binary, with `var` set to `value` (the test's cue to play the child's
/// part), and returns once a line of the child's output holds `marker`: the parent waits on that
/// event, never on a sleep. The child's stdin is a pipe left open, so a child may wait on it
/// until it is killed; its stdout stays open too. Panics if the child's output ends first.
pub fn started_until(module: &str, name: &str, var: &str, value: impl AsRef<OsStr>, marker: &str) -> Child {
    // The harness knows a test by its path below the test binary's root (`memory::index::tests::NAME`).
    let path = module.split_once("::").map_or(name.to_owned(), |(_, m)| format!("{m}::{name}"));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([path.as_str(), "--exact", "--nocapture"])
        .env(var, value)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.contains(marker) {
        line.clear();
    }
    assert!(line.contains(marker), "the child ({path}) never printed {marker:?}");
    child.stdout = Some(out.into_inner());
    child
}
