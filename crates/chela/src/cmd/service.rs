//! `chela service install|uninstall|status`: `chela run` as a systemd *user* service.
//!
//! A user unit needs no root and runs as the person whose workspace it serves. The unit names
//! this binary and the current workspace by absolute path, so it keeps working whatever the
//! service manager's working folder and environment are. Where systemd's user manager cannot
//! be reached (no `systemctl`, a container, a session without a user bus) nothing is changed:
//! the unit and the commands to install it are printed instead, and the exit status says the
//! service was not installed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::args::ServiceCmd;
use crate::workspace::Workspace;

/// The unit's file name, and the name `systemctl` knows it by.
pub const UNIT: &str = "chela.service";

/// How long one `systemctl` call may take. `enable --now` waits for the start job, which for a
/// simple service is the fork; a manager that does not answer in this time is stuck.
const SYSTEMCTL_LIMIT: Duration = Duration::from_secs(30);

/// The most of `systemctl`'s output kept (for `status` and error messages).
const MAX_OUTPUT: u64 = 16 * 1024;

pub fn run(ws: &Workspace, cmd: ServiceCmd) -> Result<ExitCode> {
    let path = unit_path()?;
    match cmd {
        ServiceCmd::Install => install(ws, &path),
        ServiceCmd::Uninstall => uninstall(&path),
        ServiceCmd::Status => status(ws, &path),
    }
}

/// `$XDG_CONFIG_HOME/systemd/user/chela.service`, else `~/.config/systemd/user/chela.service`:
/// where `systemctl --user` looks for the units a person installs.
pub fn unit_path() -> Result<PathBuf> {
    // The XDG spec says a relative value is invalid and must be ignored; systemd does the same.
    let config = match std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
        Some(dir) => dir,
        None => {
            let home = std::env::var_os("HOME").map(PathBuf::from).filter(|p| p.is_absolute()).context(
                "neither XDG_CONFIG_HOME nor HOME is set to an absolute folder, so the user unit's place is unknown",
            )?;
            home.join(".config")
        }
    };
    Ok(config.join("systemd").join("user").join(UNIT))
}

/// The unit for `chela --workspace WS run` with `exe`, both absolute.
pub fn unit_text(exe: &Path, ws: &Path) -> Result<String> {
    let exec = [quote(exe)?, quote_str("--workspace"), quote(ws)?, quote_str("run")].join(" ");
    Ok(format!(
        "\
# Written by `chela service install`; `chela service uninstall` removes it.
[Unit]
Description=Chela, a personal AI assistant (chela run)
Documentation=https://github.com/chela-ai/chela

[Service]
Type=simple
ExecStart={exec}
Restart=on-failure
RestartSec=5
# chela run stops within 5 s of SIGTERM; this leaves room before systemd kills it.
TimeoutStopSec=15
# Files it creates are the user's alone: they hold conversations and keys.
UMask=0077
# Hardening a user manager can apply without privileges (seccomp and no_new_privs). The mount
# namespace options (ProtectSystem, ProtectHome, PrivateTmp) need user namespaces in a user
# unit and make the service fail to start where those are off, so they are left out.
NoNewPrivileges=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
MemoryDenyWriteExecute=yes
SystemCallArchitectures=native

[Install]
WantedBy=default.target
"
    ))
}

/// One ExecStart word for a path: systemd splits on spaces, expands `%` specifiers and `$`
/// variables and reads C escapes inside quotes, so each is neutralised; a control character
/// cannot be written on a unit line at all.
fn quote(path: &Path) -> Result<String> {
    let Some(s) = path.to_str() else {
        bail!("{} is not valid UTF-8, which a systemd unit cannot name; move it to a plain path", path.display())
    };
    if s.chars().any(char::is_control) {
        bail!("{s:?} holds a control character, which a systemd unit cannot name; move it to a plain path");
    }
    Ok(quote_str(s))
}

fn quote_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// This binary and the workspace, as absolute paths the unit can name.
fn targets(ws: &Workspace) -> Result<(PathBuf, PathBuf)> {
    let exe = std::env::current_exe().context("cannot tell where this chela binary is")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let root = std::path::absolute(ws.root())
        .with_context(|| format!("cannot make the workspace path {} absolute", ws.root().display()))?;
    // A workspace that does not exist yet is created by `chela run` at this path.
    let root = root.canonicalize().unwrap_or(root);
    Ok((exe, root))
}

fn install(ws: &Workspace, path: &Path) -> Result<ExitCode> {
    let (exe, root) = targets(ws)?;
    if let Some(folder) = build_folder(&exe) {
        eprintln!(
            "warning: this chela runs from the build folder {}: the unit would point into it, so the \
             next `cargo build` or `cargo clean` changes or removes the service's program. Install \
             it first (`cargo install --locked --path crates/chela` puts it in ~/.cargo/bin), then \
             run `~/.cargo/bin/chela service install`.",
            folder.display()
        );
    }
    let text = unit_text(&exe, &root)?;
    let systemctl = match Systemctl::reachable() {
        Ok(s) => s,
        Err(why) => {
            print_by_hand(path, &text, &why);
            return Ok(ExitCode::FAILURE);
        }
    };
    let before = std::fs::read_to_string(path).ok();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    crate::workspace::write_atomic(path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    systemctl.must(&["daemon-reload"])?;
    systemctl.must(&["enable", "--now", UNIT])?;
    if before.as_deref().is_some_and(|b| b != text) {
        // enable --now does not restart a service that already runs the old command line.
        systemctl.must(&["restart", UNIT])?;
    }
    let verb = if before.is_some() { "Updated" } else { "Installed" };
    outln!("{verb} {}", path.display());
    outln!("`chela run` on {} now runs, and starts again at each login.", root.display());
    outln!("  status:  chela service status");
    outln!("  logs:    journalctl --user -u chela");
    outln!("  to keep it running while you are logged out: loginctl enable-linger \"$USER\"");
    outln!(
        "Environment variables of this shell do not reach the service: keep API keys in the workspace \
         (`chela config set llm.api_key -`)."
    );
    Ok(ExitCode::SUCCESS)
}

/// The cargo build folder `exe` lies in, if it does: a profile folder (`target/debug`,
/// `target/release`, `target/<triple>/release`) holds cargo's `.fingerprint` folder. `CACHEDIR.TAG`
/// is not enough: cargo writes it only when it makes `target/` itself, and a `target/` that a
/// script made first (CI's logs) has none.
fn build_folder(exe: &Path) -> Option<&Path> {
    exe.ancestors().skip(1).find(|dir| dir.join(".fingerprint").is_dir())
}

/// Without a reachable user manager: the unit and what to run, on stdout, so it can be saved.
fn print_by_hand(path: &Path, text: &str, why: &str) {
    eprintln!("chela: systemd's user manager cannot be reached here ({why}), so nothing was installed.");
    eprintln!("To install it where systemd runs, save the unit below as {}", path.display());
    eprintln!("and run:");
    eprintln!("  systemctl --user daemon-reload");
    eprintln!("  systemctl --user enable --now {UNIT}");
    eprintln!("Without systemd, start `chela run` from your own supervisor instead.");
    out!("{text}");
}

fn uninstall(path: &Path) -> Result<ExitCode> {
    let exists = path.try_exists().with_context(|| format!("cannot look at {}", path.display()))?;
    match Systemctl::reachable() {
        Ok(systemctl) => {
            if exists {
                systemctl.must(&["disable", "--now", UNIT])?;
                remove(path)?;
                systemctl.must(&["daemon-reload"])?;
                outln!("Stopped and removed {}", path.display());
            } else {
                outln!("There is no Chela unit at {}; nothing to remove.", path.display());
            }
        }
        Err(why) => {
            if exists {
                remove(path)?;
                outln!("Removed {}", path.display());
            } else {
                outln!("There is no Chela unit at {}; nothing to remove.", path.display());
            }
            eprintln!("note: systemd's user manager cannot be reached here ({why}), so nothing was stopped.");
            eprintln!("Where it runs, stop the service with: systemctl --user disable --now {UNIT}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn remove(path: &Path) -> Result<()> {
    std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))
}

fn status(ws: &Workspace, path: &Path) -> Result<ExitCode> {
    let installed = std::fs::read_to_string(path).ok();
    match &installed {
        None => outln!("unit:    not installed ({} does not exist); `chela service install` adds it", path.display()),
        Some(text) => {
            outln!("unit:    {}", path.display());
            let (exe, root) = targets(ws)?;
            let exec = text.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap_or("(none)");
            outln!("command: {exec}");
            if unit_text(&exe, &root).ok().as_deref() != Some(text.as_str()) {
                outln!(
                    "note:    the unit is not the one this binary writes for {}; \
                     `chela service install` replaces it",
                    root.display()
                );
            }
        }
    }
    match Systemctl::reachable() {
        Ok(systemctl) => {
            // These two answer with a word on stdout and a status that is non-zero for "no".
            let enabled = systemctl.word(&["is-enabled", UNIT])?;
            let active = systemctl.word(&["is-active", UNIT])?;
            outln!("enabled: {enabled}");
            outln!("active:  {active}");
            if installed.is_some() && active != "active" {
                outln!("logs:    journalctl --user -u chela");
            }
        }
        Err(why) => outln!("systemd: its user manager cannot be reached here ({why})"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `systemctl --user`, found on `PATH`.
struct Systemctl {
    program: PathBuf,
}

impl Systemctl {
    /// The user manager, if it answers; else why not, for the person.
    fn reachable() -> Result<Systemctl, String> {
        let program = super::doctor::find_program("systemctl").ok_or_else(|| "no `systemctl` on PATH".to_owned())?;
        let s = Systemctl { program };
        // Cheap and changes nothing; fails the same way every other call would without a user bus.
        match s.call(&["show-environment"]) {
            Ok((status, _)) if status.success() => Ok(s),
            Ok((_, out)) => Err(format!("`systemctl --user` failed: {}", first_line(&out))),
            Err(e) => Err(format!("cannot run systemctl: {e:#}")),
        }
    }

    /// Runs `systemctl --user ARGS`; a failure is an error with what systemctl said.
    fn must(&self, args: &[&str]) -> Result<()> {
        let (status, out) = self.call(args)?;
        if !status.success() {
            bail!(
                "`systemctl --user {}` failed ({status}): {}\nSee `journalctl --user -u chela` for the service's own messages.",
                args.join(" "),
                out.trim()
            );
        }
        Ok(())
    }

    /// The first word `systemctl --user ARGS` prints, whatever its status.
    fn word(&self, args: &[&str]) -> Result<String> {
        let (_, out) = self.call(args)?;
        Ok(out.split_whitespace().next().unwrap_or("unknown").to_owned())
    }

    /// Runs it to the end within [`SYSTEMCTL_LIMIT`], with stdout and stderr together.
    fn call(&self, args: &[&str]) -> Result<(ExitStatus, String)> {
        let mut child = Command::new(&self.program)
            .arg("--user")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", self.program.display()))?;
        let readers = [child.stdout.take().map(drain), child.stderr.take().map(drain)];
        let deadline = crate::clock::real_instant() + SYSTEMCTL_LIMIT;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if crate::clock::real_instant() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("`systemctl --user {}` did not finish within {} s", args.join(" "), SYSTEMCTL_LIMIT.as_secs());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut out = String::new();
        for r in readers.into_iter().flatten() {
            out.push_str(&r.join().unwrap_or_default());
        }
        Ok((status, out))
    }
}

/// Reads a child's stream on a thread (so a chatty child never blocks on a full pipe), keeping
/// at most [`MAX_OUTPUT`] bytes and discarding the rest.
fn drain(stream: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut stream = stream;
        let mut kept = Vec::new();
        let _ = (&mut stream).take(MAX_OUTPUT).read_to_end(&mut kept);
        let _ = std::io::copy(&mut stream, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    })
}

fn first_line(s: &str) -> &str {
    s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no message")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_in_a_cargo_build_folder_is_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("proj/target");
        let release = target.join("release");
        std::fs::create_dir_all(&release).unwrap();
        let exe = release.join("chela");
        assert_eq!(build_folder(&exe), None, "a folder called target without cargo's mark is not one");
        // What CI has: a target/ made before cargo ran, so without CACHEDIR.TAG.
        std::fs::create_dir_all(release.join(".fingerprint")).unwrap();
        assert_eq!(build_folder(&exe), Some(release.as_path()));
        assert_eq!(build_folder(&release.join("deps/chela-1234")), Some(release.as_path()));
        assert_eq!(build_folder(&dir.path().join("bin/chela")), None);
        assert_eq!(build_folder(&target.join("chela")), None, "target/ itself holds no fingerprints");
    }

    #[test]
    fn the_unit_runs_this_binary_on_the_workspace_and_restarts_on_failure() {
        let text = unit_text(Path::new("/opt/chela/bin/chela"), Path::new("/home/ann/.chela")).unwrap();
        assert!(text.contains("\nExecStart=\"/opt/chela/bin/chela\" \"--workspace\" \"/home/ann/.chela\" \"run\"\n"));
        assert!(text.contains("\nRestart=on-failure\n") && text.contains("\nWantedBy=default.target\n"));
        assert!(text.contains("\nNoNewPrivileges=yes\n"));
        // These make a user unit fail where user namespaces are off.
        for line in ["ProtectSystem=", "ProtectHome=", "PrivateTmp="] {
            assert!(!text.lines().any(|l| l.starts_with(line)), "{line}");
        }
    }

    #[test]
    fn paths_are_quoted_against_splitting_specifiers_and_variables() {
        let text = unit_text(Path::new("/my apps/chela"), Path::new("/w/100%/$HOME/a\"b\\c")).unwrap();
        let exec = text.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
        assert_eq!(exec, r#""/my apps/chela" "--workspace" "/w/100%%/$$HOME/a\"b\\c" "run""#);
        let e = unit_text(Path::new("/bin/chela"), Path::new("/w/a\nExecStartPre=/bin/evil")).unwrap_err();
        assert!(e.to_string().contains("control character"), "{e}");
    }
}
