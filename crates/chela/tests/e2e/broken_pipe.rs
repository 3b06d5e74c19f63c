//! A reader that closes its end (`chela config show | head -1`) ends the command quietly,
//! with success, as it ends `cat`: no panic message, no error status.

use std::process::{Command, Stdio};

/// Runs `chela ARGS` with standard output a pipe nobody reads any more, in a fresh workspace.
fn run_into_a_closed_pipe(args: &[&str]) -> (std::process::ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_chela"))
        .args(["--workspace", dir.path().to_str().unwrap()])
        .args(args)
        .env_remove("CHELA_LOG")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    // `--version` and `help` print before the runtime starts; `config show` and `cap list`
    // print from inside a command.
    for args in [&["--version"][..], &["help"], &["config", "show"], &["cap", "list"]] {
        let (status, stderr) = run_into_a_closed_pipe(args);
        assert!(status.success(), "chela {args:?}: {status}, stderr: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "chela {args:?}: {stderr}");
    }
}
