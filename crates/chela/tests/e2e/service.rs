//! `chela service install|uninstall|status` against a fake `systemctl` that records its
//! arguments, with the unit's folder (`XDG_CONFIG_HOME`) in a temporary folder.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Ws;

/// A folder with a `systemctl` script that appends each call's arguments to `calls`, and the
/// workspace set up to find it first on `PATH`.
struct FakeSystemd {
    ws: Ws,
    bin: tempfile::TempDir,
    config: tempfile::TempDir,
}

impl FakeSystemd {
    /// `exit` is the status of every call; `is-enabled`/`is-active` print a word first.
    fn new(exit: i32) -> FakeSystemd {
        let bin = tempfile::tempdir().unwrap();
        let config = tempfile::tempdir().unwrap();
        let script = format!(
            "#!/bin/sh\n\
             echo \"$*\" >> '{calls}'\n\
             case \"$2\" in is-enabled) echo enabled;; is-active) echo active;; esac\n\
             if [ {exit} -ne 0 ]; then echo 'Failed to connect to bus: No medium found' >&2; fi\n\
             exit {exit}\n",
            calls = bin.path().join("calls").display()
        );
        let path = bin.path().join("systemctl");
        fs::write(&path, script).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        let mut ws = Ws::empty();
        ws.set_env("PATH", bin.path().to_str().unwrap());
        ws.set_env("XDG_CONFIG_HOME", config.path().to_str().unwrap());
        FakeSystemd { ws, bin, config }
    }

    fn calls(&self) -> Vec<String> {
        fs::read_to_string(self.bin.path().join("calls")).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    fn unit(&self) -> PathBuf {
        self.config.path().join("systemd/user/chela.service")
    }
}

fn exec_start(unit: &str) -> &str {
    unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("an ExecStart line")
}

fn expected_exec(ws: &Path) -> String {
    let exe = Path::new(env!("CARGO_BIN_EXE_chela")).canonicalize().unwrap();
    format!("\"{}\" \"--workspace\" \"{}\" \"run\"", exe.display(), ws.canonicalize().unwrap().display())
}

#[test]
fn install_writes_the_user_unit_and_enables_it_and_uninstall_undoes_it() {
    let sd = FakeSystemd::new(0);
    let out = sd.ws.run(&["service", "install"]);
    out.expect_ok().stdout_has("Installed").stdout_has(&sd.unit().display().to_string());
    let unit = fs::read_to_string(sd.unit()).expect("the unit is written");
    assert_eq!(exec_start(&unit), expected_exec(sd.ws.path()));
    assert!(unit.contains("\nRestart=on-failure\n"), "{unit}");
    assert_eq!(
        sd.calls(),
        ["--user show-environment", "--user daemon-reload", "--user enable --now chela.service"],
        "probe, reload, enable and start"
    );

    let out = sd.ws.run(&["service", "status"]);
    out.expect_ok()
        .stdout_has("enabled: enabled")
        .stdout_has("active:  active")
        .stdout_has(&expected_exec(sd.ws.path()));
    assert!(!out.stdout.contains("note:"), "the unit is the one this binary writes:\n{}", out.stdout);

    let out = sd.ws.run(&["service", "uninstall"]);
    out.expect_ok().stdout_has("Stopped and removed");
    assert!(!sd.unit().exists());
    let calls = sd.calls();
    assert_eq!(
        calls[calls.len() - 3..],
        ["--user show-environment", "--user disable --now chela.service", "--user daemon-reload"]
    );
    sd.ws.run(&["service", "status"]).expect_ok().stdout_has("not installed");
}

#[test]
fn reinstalling_for_another_workspace_replaces_the_unit_and_restarts_the_service() {
    let sd = FakeSystemd::new(0);
    sd.ws.run(&["service", "install"]).expect_ok();
    let other = tempfile::tempdir().unwrap();
    let out = sd.ws.run(&["--workspace", other.path().to_str().unwrap(), "service", "status"]);
    out.expect_ok().stdout_has("note:    the unit is not the one this binary writes");
    let out = sd.ws.run(&["--workspace", other.path().to_str().unwrap(), "service", "install"]);
    out.expect_ok().stdout_has("Updated");
    assert_eq!(exec_start(&fs::read_to_string(sd.unit()).unwrap()), expected_exec(other.path()));
    assert_eq!(sd.calls().last().unwrap(), "--user restart chela.service", "the running service takes the new command");
}

#[test]
fn without_a_user_manager_the_unit_and_commands_are_printed_and_nothing_is_written() {
    for (what, sd) in [("systemctl fails", FakeSystemd::new(1)), ("no systemctl", FakeSystemd::new(0))] {
        if what == "no systemctl" {
            fs::remove_file(sd.bin.path().join("systemctl")).unwrap();
        }
        let out = sd.ws.run(&["service", "install"]);
        out.expect_code(1)
            .stderr_has("nothing was installed")
            .stderr_has("systemctl --user enable --now chela.service");
        out.stderr_has(&sd.unit().display().to_string());
        assert_eq!(exec_start(&out.stdout), expected_exec(sd.ws.path()), "{what}: the unit is on stdout");
        assert!(!sd.unit().exists(), "{what}");
        if what == "systemctl fails" {
            out.stderr_has("Failed to connect to bus");
            assert_eq!(sd.calls(), ["--user show-environment"], "only the probe ran");
        }
        sd.ws.run(&["service", "status"]).expect_ok().stdout_has("not installed").stdout_has("cannot be reached");
    }
}

#[test]
fn installing_from_the_build_folder_warns_and_an_installed_binary_does_not() {
    let sd = FakeSystemd::new(0);
    let out = sd.ws.run(&["service", "install"]);
    out.expect_ok().stderr_has("warning: this chela runs from the build folder").stderr_has("cargo install --locked");

    // The same program outside any build folder (a hard link, or a copy across file systems).
    let elsewhere = tempfile::tempdir().unwrap();
    let exe = elsewhere.path().join("chela");
    fs::hard_link(env!("CARGO_BIN_EXE_chela"), &exe)
        .or_else(|_| fs::copy(env!("CARGO_BIN_EXE_chela"), &exe).map(drop))
        .unwrap();
    let cmd = sd.ws.cmd(&["service", "install"]);
    let mut installed = std::process::Command::new(&exe);
    installed.args(cmd.get_args()).env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            installed.env(k, v);
        }
    }
    installed
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = crate::finish(installed.spawn().unwrap(), std::time::Duration::from_secs(30));
    out.expect_ok().stdout_has("Updated");
    assert!(!out.stderr.contains("build folder"), "{}", out.stderr);
    let unit = fs::read_to_string(sd.unit()).unwrap();
    assert!(exec_start(&unit).contains(&exe.canonicalize().unwrap().display().to_string()), "{unit}");
}
