//! The permanent escape-and-abuse corpus of the file tools.
//!
//! Each case is what a hostile model, a planted file or a second process did or could do, run
//! against the real tools (in-process, as `chela cap call` calls them) on real files in temp
//! folders. The first group held before the sandbox and must keep holding; the rest broke and
//! are fixed at the mechanism (see `src/tools/files/sandbox.rs`). Cases that need a fresh
//! process (a file size limit, a predictable temp-name counter, a call that could hang) re-run
//! this test binary on that one test with `CHELA_ABUSE_CHILD` set.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]
#![cfg(feature = "files")]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chela::ManualCalls;
use rustix::fs::{self as rfs, Mode, OFlags, RenameFlags};
use serde_json::{Value, json};

const SECRET: &str = "OUTSIDE SECRET";
const CHILD: &str = "CHELA_ABUSE_CHILD";
/// Calls per race case. 300 tries escaped 3–11 % of the time before the sandbox; this many
/// makes an escape near certain with the old code on a busy machine, in about a second.
const TRIES: usize = 3000;

/// A workspace with Chela's files, and a folder outside it holding a secret.
struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    out: PathBuf,
    calls: ManualCalls,
    rt: tokio::runtime::Runtime,
}

impl Ws {
    fn new() -> Ws {
        Ws::with(&[])
    }

    fn with(settings: &[(&str, &str)]) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        let (root, out) = (dir.path().join("ws"), dir.path().join("outside"));
        fs::create_dir(&out).unwrap();
        fs::write(out.join("secret"), SECRET).unwrap();
        let ws = chela::workspace::Workspace::locate(Some(root.clone())).unwrap();
        ws.ensure().unwrap();
        for (k, v) in settings {
            chela::config::set_override(&ws, k, v).unwrap();
        }
        fs::write(root.join("chela.toml"), "[llm]\napi_key = \"sk-ant-KEY\"\n").unwrap();
        fs::write(root.join("sessions/cli_local.jsonl"), "{\"private\":1}\n").unwrap();
        let calls = ManualCalls::load(&root).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        Ws { _dir: dir, root, out, calls, rt }
    }

    fn call(&self, tool: &str, args: Value) -> Result<String, String> {
        self.rt.block_on(self.calls.call(tool, &args.to_string()))
    }

    fn ok(&self, tool: &str, args: Value) -> String {
        self.call(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
    }

    /// Asserts the call is refused with a message containing `why`.
    fn refused(&self, tool: &str, args: Value, why: &str) {
        match self.call(tool, args.clone()) {
            Ok(out) => panic!("{tool} {args} was allowed: {out}"),
            Err(e) => assert!(e.contains(why), "{tool} {args}: expected `{why}` in: {e}"),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The outside folder still holds exactly the secret, untouched.
    fn outside_untouched(&self) {
        assert_eq!(fs::read_to_string(self.out.join("secret")).unwrap(), SECRET);
        let names: Vec<_> = fs::read_dir(&self.out).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["secret"], "something was created outside the workspace");
    }
}

/// Every tool that takes one path, with arguments that would read or change it.
fn one_path_calls(p: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("file_read", json!({"path": p})),
        ("file_write", json!({"path": p, "content": "PWNED"})),
        ("file_write", json!({"path": p, "content": "PWNED", "mode": "append"})),
        ("file_edit", json!({"path": p, "old_text": "SECRET", "new_text": "PWNED"})),
        ("file_delete", json!({"path": p})),
        ("file_stat", json!({"path": p})),
        ("file_move", json!({"from": p, "to": "moved"})),
        ("file_copy", json!({"from": p, "to": "copied"})),
        ("file_move", json!({"from": "mine.txt", "to": p, "overwrite": true})),
        ("file_copy", json!({"from": "mine.txt", "to": p, "overwrite": true})),
    ]
}

// ---- What held before the sandbox; it must keep holding. ----

#[test]
fn dotdot_absolute_tilde_and_nul_are_refused_by_every_tool() {
    let ws = Ws::new();
    ws.ok("file_write", json!({"path": "mine.txt", "content": "mine"}));
    for (p, why) in [
        ("../outside/secret", ".."),
        ("notes/../../outside/secret", ".."),
        ("/etc/passwd", "absolute"),
        ("~/secret", "absolute"),
        ("a\0b", "NUL"),
    ] {
        for (tool, args) in one_path_calls(p) {
            ws.refused(tool, args, why);
        }
        ws.refused("file_list", json!({"path": p}), why);
    }
    ws.outside_untouched();
}

#[test]
fn a_symlinked_folder_leading_out_is_refused_by_every_tool() {
    let ws = Ws::new();
    ws.ok("file_write", json!({"path": "mine.txt", "content": "mine"}));
    symlink(&ws.out, ws.path("escape")).unwrap();
    symlink("../outside", ws.path("relative")).unwrap();
    for dir in ["escape", "relative"] {
        for (tool, args) in one_path_calls(&format!("{dir}/secret")) {
            ws.refused(tool, args, "outside");
        }
        ws.refused("file_list", json!({"path": dir}), "outside");
        ws.refused("file_write", json!({"path": format!("{dir}/new/file"), "content": "x"}), "outside");
    }
    ws.outside_untouched();
}

#[test]
fn a_symlink_as_the_last_part_is_never_followed() {
    let ws = Ws::new();
    ws.ok("file_write", json!({"path": "mine.txt", "content": "mine"}));
    symlink(ws.out.join("secret"), ws.path("out_link")).unwrap();
    fs::write(ws.path("real.txt"), "real SECRET").unwrap();
    symlink("real.txt", ws.path("in_link")).unwrap();
    for (tool, args) in one_path_calls("out_link") {
        match tool {
            // These act on the link itself, which is inside.
            "file_delete" | "file_stat" | "file_move" if args.get("from") != Some(&json!("mine.txt")) => continue,
            _ => ws.refused(tool, args, "outside"),
        }
    }
    for tool in ["file_read", "file_edit"] {
        ws.refused(tool, json!({"path": "in_link", "old_text": "SECRET", "new_text": "x"}), "symlink");
    }
    ws.refused("file_write", json!({"path": "in_link", "content": "x"}), "symlink");
    ws.refused("file_write", json!({"path": "in_link", "content": "x", "mode": "append"}), "symlink");
    assert_eq!(fs::read_to_string(ws.path("real.txt")).unwrap(), "real SECRET");
    ws.outside_untouched();
}

/// A planted link can be looked at and removed: both act on the link, never on its target.
#[test]
fn a_symlink_itself_can_be_inspected_and_removed() {
    let ws = Ws::new();
    symlink(ws.out.join("secret"), ws.path("out_link")).unwrap();
    let stat: Value = serde_json::from_str(&ws.ok("file_stat", json!({"path": "out_link"}))).unwrap();
    assert_eq!(stat["type"], "symlink");
    ws.ok("file_delete", json!({"path": "out_link"}));
    assert!(fs::symlink_metadata(ws.path("out_link")).is_err());
    ws.outside_untouched();
}

#[test]
fn protected_files_by_their_own_name_are_refused_by_every_tool() {
    let ws = Ws::new();
    ws.ok("file_write", json!({"path": "mine.txt", "content": "mine"}));
    for p in ["chela.toml", "overrides.toml", "sessions/cli_local.jsonl", "sessions", "./chela.toml"] {
        for (tool, args) in one_path_calls(p) {
            ws.refused(tool, args, "off limits");
        }
    }
    ws.refused("file_list", json!({"path": "sessions"}), "off limits");
    let top = ws.ok("file_list", json!({"recursive": true}));
    assert!(!top.contains("chela.toml") && !top.contains("overrides") && !top.contains("sessions"), "{top}");
    assert!(fs::read_to_string(ws.path("chela.toml")).unwrap().contains("sk-ant-KEY"));
    assert!(ws.path("sessions/cli_local.jsonl").exists());
}

// ---- What broke, fixed at the mechanism. ----

/// `ln -s . self`: the first part of the path is not the protected name any more.
#[test]
fn protected_files_through_a_symlink_alias_are_refused() {
    let ws = Ws::new();
    ws.ok("file_write", json!({"path": "mine.txt", "content": "mine"}));
    symlink(".", ws.path("self")).unwrap();
    symlink("sessions", ws.path("chats")).unwrap();
    fs::create_dir(ws.path("sub")).unwrap();
    symlink("..", ws.path("sub/up")).unwrap();
    for p in [
        "self/chela.toml",
        "self/overrides.toml",
        "self/self/chela.toml",
        "sub/up/chela.toml",
        "self/sessions/cli_local.jsonl",
        "chats/cli_local.jsonl",
        "self/sessions",
    ] {
        for (tool, args) in one_path_calls(p) {
            ws.refused(tool, args, "off limits");
        }
    }
    ws.refused("file_list", json!({"path": "chats"}), "off limits");
    ws.refused("file_write", json!({"path": "chats/new.jsonl", "content": "x"}), "off limits");
    ws.refused("file_write", json!({"path": "self/sessions/new/x", "content": "x"}), "off limits");
    let listed = ws.ok("file_list", json!({"path": "self"}));
    assert!(!listed.contains("chela.toml") && !listed.contains("sessions/"), "{listed}");
    assert!(fs::read_to_string(ws.path("chela.toml")).unwrap().contains("sk-ant-KEY"));
    assert!(!ws.path("sessions/new.jsonl").exists() && !ws.path("sessions/new").exists());
}

#[test]
fn protected_names_are_compared_without_ascii_case() {
    // On a case-insensitive file system CHELA.TOML is the configuration file.
    let ws = Ws::new();
    for p in ["CHELA.TOML", "Overrides.Toml", "Sessions/x.jsonl"] {
        ws.refused("file_write", json!({"path": p, "content": "[provider]"}), "off limits");
    }
}

/// Which tool a race case drives, and how it checks its own result.
enum Race {
    Read,
    Write,
    Append,
    Edit,
    List,
    Delete,
    Move,
    Copy,
}

/// A folder higher up the path is swapped for a symlink to the outside, atomically and over
/// and over, while the tool runs 300 times. Nothing outside may be read, written or removed.
fn race(kind: Race) {
    let ws = Ws::new();
    fs::create_dir_all(ws.path("a/sub")).unwrap();
    fs::write(ws.out.join("f"), format!("{SECRET} token")).unwrap();
    // What a list of `a/sub` would show if it escaped.
    fs::create_dir(ws.out.join("sub")).unwrap();
    fs::write(ws.out.join("sub/secret"), SECRET).unwrap();
    fs::write(ws.path("src.txt"), "inside").unwrap();
    symlink(&ws.out, ws.path("b")).unwrap();
    let inside = rfs::open(ws.path("a"), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
    let put_inside = || {
        let fd = rfs::openat(&inside, "f", OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC, Mode::from_raw_mode(0o600));
        std::io::Write::write_all(&mut fs::File::from(fd.unwrap()), b"inside token").unwrap();
    };
    put_inside();
    // Before the race: the call works, so refusals during it are the sandbox at work.
    assert!(ws.call("file_read", json!({"path": "a/f"})).is_ok_and(|t| t == "inside token"));
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root) = (stop.clone(), ws.root.clone());
        std::thread::spawn(move || {
            let dir = rfs::open(&root, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
            let (mut swaps, mut x) = (0u64, 0x9e37_79b9_7f4a_7c15u64);
            while !stop.load(Ordering::Relaxed) {
                rfs::renameat_with(&dir, "a", &dir, "b", RenameFlags::EXCHANGE).unwrap();
                swaps += 1;
                // Now and then let the tool run, so the swaps do not fall into step with its
                // lookups (on a busy machine a tight loop would also starve the tool).
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 64 == 0 {
                    std::thread::yield_now();
                }
            }
            swaps
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut done, mut escapes, mut refusals) = (0, Vec::new(), std::collections::BTreeSet::new());
    for i in 0..TRIES {
        let r = match kind {
            Race::Read => ws.call("file_read", json!({"path": "a/f"})),
            Race::Write => ws.call("file_write", json!({"path": "a/f", "content": "PWNED"})),
            Race::Append => ws.call("file_write", json!({"path": "a/f", "content": "PWNED", "mode": "append"})),
            Race::Edit => ws.call("file_edit", json!({"path": "a/f", "old_text": "token", "new_text": "token+"})),
            Race::List => ws.call("file_list", json!({"path": "a/sub"})),
            Race::Delete => {
                put_inside();
                ws.call("file_delete", json!({"path": "a/f"}))
            }
            Race::Move => {
                put_inside();
                fs::write(ws.path("src.txt"), "inside").unwrap();
                let r = ws.call("file_move", json!({"from": "a/f", "to": format!("got{i}")}));
                let _ = ws.call("file_move", json!({"from": "src.txt", "to": format!("a/new{i}")}));
                r.map(|_| fs::read_to_string(ws.path(&format!("got{i}"))).unwrap_or_default())
            }
            Race::Copy => {
                let r = ws.call("file_copy", json!({"from": "a/f", "to": format!("got{i}")}));
                let _ = ws.call("file_copy", json!({"from": "src.txt", "to": format!("a/new{i}")}));
                r.map(|_| fs::read_to_string(ws.path(&format!("got{i}"))).unwrap_or_default())
            }
        };
        if let Err(e) = &r {
            refusals.insert(e.clone());
        }
        if let Ok(out) = &r {
            done += 1;
            if out.contains(SECRET) || out.contains("secret (") {
                escapes.push(format!("try {i}: {out}"));
            }
        }
        if Instant::now() > deadline {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 0);
    assert!(escapes.is_empty(), "{} escapes, e.g. {}", escapes.len(), escapes[0]);
    eprintln!("{done} calls succeeded, {swaps} swaps; refusals: {refusals:?}");
    assert_eq!(fs::read_to_string(ws.out.join("f")).unwrap(), format!("{SECRET} token"), "written outside");
    let copied = files_containing(&ws.root, SECRET);
    assert!(copied.is_empty(), "the secret was brought inside: {copied:?}");
    let mut names: Vec<_> = fs::read_dir(&ws.out).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["f", "secret", "sub"], "something was created or removed outside the workspace");
}

/// Files under `dir` (symlinks not followed) whose content contains `needle`.
fn files_containing(dir: &std::path::Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let meta = fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            found.extend(files_containing(&p, needle));
        } else if meta.is_file() && fs::read_to_string(&p).is_ok_and(|t| t.contains(needle)) {
            found.push(p);
        }
    }
    found
}

#[test]
fn race_swapping_a_folder_for_a_symlink_read() {
    race(Race::Read);
}

#[test]
fn race_swapping_a_folder_for_a_symlink_write() {
    race(Race::Write);
}

#[test]
fn race_swapping_a_folder_for_a_symlink_append() {
    race(Race::Append);
}

#[test]
fn race_swapping_a_folder_for_a_symlink_edit() {
    race(Race::Edit);
}

#[test]
fn race_swapping_a_folder_for_a_symlink_list() {
    race(Race::List);
}

#[test]
fn race_swapping_a_folder_for_a_symlink_delete() {
    race(Race::Delete);
}

#[test]
fn race_swapping_a_folder_for_a_symlink_move() {
    race(Race::Move);
}

#[test]
fn race_swapping_a_folder_for_a_symlink_copy() {
    race(Race::Copy);
}

/// Runs test `name` again in a fresh process with `CHELA_ABUSE_CHILD` set to `arg`; fails if it
/// fails or takes longer than `limit` (it is killed then).
fn in_child(name: &str, arg: &str, limit: Duration) {
    // The harness knows a test by its path below the test binary's root (`files::NAME`).
    let path = module_path!().split_once("::").map_or(name.to_owned(), |(_, module)| format!("{module}::{name}"));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([path.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, arg)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{name} hung for {limit:?}: {}", String::from_utf8_lossy(&out.stdout));
        }
        // Waiting for another process: there is no clock to advance instead.
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{name} failed in its own process:\n{text}");
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
}

/// `.NAME.PID.SEQ.tmp` was predictable: a symlink planted there received the content (keys
/// included) and the real file became a symlink. Planted at every name the old scheme would
/// use in a fresh process, for the tools and for Chela's own writes.
#[test]
fn planted_symlinks_at_temp_names_receive_nothing() {
    let Ok(root) = std::env::var(CHILD) else {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        fs::create_dir(&root).unwrap();
        in_child("planted_symlinks_at_temp_names_receive_nothing", root.to_str().unwrap(), Duration::from_secs(30));
        return;
    };
    let root = PathBuf::from(root);
    let out = root.parent().unwrap().join("stolen");
    let pid = std::process::id();
    for seq in 0..256 {
        for name in ["notes.md", "overrides.toml", "SOUL.md", "MEMORY.md"] {
            symlink(&out, root.join(format!(".{name}.{pid}.{seq}.tmp"))).unwrap();
        }
    }
    let ws = chela::workspace::Workspace::locate(Some(root.clone())).unwrap();
    chela::config::set_override(&ws, "files.max_read_bytes", "4096").unwrap();
    let calls = ManualCalls::load(&root).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(calls.call("file_write", &json!({"path": "notes.md", "content": "api key sk-1"}).to_string())).unwrap();
    chela::workspace::write_atomic(&root.join("overrides.toml"), b"key = \"sk-2\"\n").unwrap();
    assert!(!out.exists(), "content went through a planted symlink");
    for name in ["notes.md", "overrides.toml"] {
        assert!(fs::symlink_metadata(root.join(name)).unwrap().is_file(), "{name} became a symlink");
    }
    assert_eq!(fs::read_to_string(root.join("notes.md")).unwrap(), "api key sk-1");
}

/// A hard link reaches a file outside whatever the path says: refused by every tool.
#[test]
fn hard_linked_files_are_refused_by_every_tool() {
    let ws = Ws::new();
    ws.ok("file_write", json!({"path": "mine.txt", "content": "mine"}));
    fs::hard_link(ws.out.join("secret"), ws.path("hl")).unwrap();
    for (tool, args) in one_path_calls("hl") {
        if tool == "file_stat" {
            let stat: Value = serde_json::from_str(&ws.ok(tool, args)).unwrap();
            assert_eq!(stat["links"], 2, "{stat}");
        } else {
            ws.refused(tool, args, "hard links");
        }
    }
    assert_eq!(fs::metadata(ws.out.join("secret")).unwrap().nlink(), 2);
    ws.outside_untouched();
}

/// Reading a FIFO hung the tool forever; every tool refuses it at once.
#[test]
fn fifos_and_other_special_files_are_refused_at_once() {
    let Ok(_) = std::env::var(CHILD) else {
        in_child("fifos_and_other_special_files_are_refused_at_once", "1", Duration::from_secs(20));
        return;
    };
    let ws = Ws::new();
    ws.ok("file_write", json!({"path": "mine.txt", "content": "mine"}));
    let root = rfs::open(&ws.root, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
    rfs::mknodat(&root, "pipe", rfs::FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    let started = Instant::now();
    for (tool, args) in one_path_calls("pipe") {
        match tool {
            "file_stat" => assert!(ws.ok(tool, args).contains("FIFO")),
            _ => ws.refused(tool, args, "FIFO"),
        }
    }
    assert!(ws.ok("file_list", json!({})).contains("pipe (FIFO, not opened)"));
    assert!(started.elapsed() < Duration::from_secs(5), "refusals took {:?}", started.elapsed());
}

/// `.git/config` with `core.fsmonitor`, or a hook, runs commands the next time git is used.
#[test]
fn writes_into_version_control_folders_are_refused() {
    let ws = Ws::new();
    fs::create_dir_all(ws.path(".git/hooks")).unwrap();
    fs::create_dir_all(ws.path("proj/.hg")).unwrap();
    fs::write(ws.path(".git/config"), "[core]\n").unwrap();
    fs::write(ws.path("hook.sh"), "#!/bin/sh\ntouch /tmp/pwned\n").unwrap();
    symlink(".git", ws.path("g")).unwrap();
    let writes = [
        ("file_write", json!({"path": ".git/config", "content": "[core]\nfsmonitor = evil\n"})),
        ("file_write", json!({"path": ".git/config", "content": "x", "mode": "append"})),
        ("file_write", json!({"path": "g/config", "content": "[core]\nfsmonitor = evil\n"})),
        ("file_write", json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"})),
        ("file_write", json!({"path": "proj/.hg/hgrc", "content": "[hooks]\n"})),
        ("file_write", json!({"path": "other/.git/config", "content": "x"})),
        ("file_write", json!({"path": ".git", "content": "gitdir: /tmp/evil\n"})),
        ("file_edit", json!({"path": ".git/config", "old_text": "[core]", "new_text": "[core]\nfsmonitor = evil"})),
        ("file_move", json!({"from": "hook.sh", "to": ".git/hooks/post-checkout"})),
        ("file_copy", json!({"from": "hook.sh", "to": "g/hooks/post-checkout"})),
        ("file_delete", json!({"path": ".git/config"})),
        ("file_move", json!({"from": ".git/config", "to": "config"})),
    ];
    for (tool, args) in writes.clone() {
        ws.refused(tool, args, "version-control");
    }
    assert_eq!(fs::read_to_string(ws.path(".git/config")).unwrap(), "[core]\n");
    assert!(!ws.path(".git/hooks/pre-commit").exists() && !ws.path("other").exists());
    // Reading stays allowed, and a setting allows writing.
    assert_eq!(ws.ok("file_read", json!({"path": ".git/config"})), "[core]\n");
    let allowed = Ws::with(&[("files.allow_vcs_writes", "true")]);
    fs::create_dir_all(allowed.path(".git")).unwrap();
    allowed.ok("file_write", json!({"path": ".git/config", "content": "[core]\n"}));
    allowed.ok("file_write", json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}));
}

/// On a full disk (here: a file size limit) a 20 kB append left 4 kB in the file.
#[test]
fn a_failed_append_is_cut_back_to_the_previous_length() {
    let Ok(root) = std::env::var(CHILD) else {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        in_child("a_failed_append_is_cut_back_to_the_previous_length", root.to_str().unwrap(), Duration::from_secs(30));
        // Checked again from outside the limited process.
        assert_eq!(fs::read_to_string(root.join("log.md")).unwrap(), "a".repeat(4096));
        assert_eq!(fs::read_to_string(root.join("sessions/s.jsonl")).unwrap(), "{\"n\":1}\n");
        return;
    };
    let root = PathBuf::from(root);
    let calls = ManualCalls::load(&root).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    // Past the limit the kernel sends SIGXFSZ, which would kill the process; with a handler
    // installed the write fails with EFBIG instead, as it does with ENOSPC on a full disk.
    let _sigxfsz = rt.block_on(async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(libc::SIGXFSZ)).unwrap()
    });
    let call = |args: Value| rt.block_on(calls.call("file_write", &args.to_string()));
    call(json!({"path": "log.md", "content": "a".repeat(4096)})).unwrap();
    chela::workspace::append_durable(&root.join("sessions/s.jsonl"), "{\"n\":1}\n").unwrap();
    let limit = rustix::process::Rlimit { current: Some(16 * 1024), maximum: Some(16 * 1024) };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();

    let e = call(json!({"path": "log.md", "content": "b".repeat(20_000), "mode": "append"})).unwrap_err();
    assert!(e.contains("Cannot append"), "{e}");
    assert_eq!(fs::read_to_string(root.join("log.md")).unwrap(), "a".repeat(4096), "a partial append stayed");
    let line = format!("{{\"big\":\"{}\"}}\n", "c".repeat(20_000));
    assert!(chela::workspace::append_durable(&root.join("sessions/s.jsonl"), &line).is_err());
    assert_eq!(fs::read_to_string(root.join("sessions/s.jsonl")).unwrap(), "{\"n\":1}\n");
    // An overwrite that does not fit leaves the old file whole and no temp file behind.
    call(json!({"path": "log.md", "content": "d".repeat(20_000)})).unwrap_err();
    assert_eq!(fs::read_to_string(root.join("log.md")).unwrap(), "a".repeat(4096));
    let temps =
        fs::read_dir(&root).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"));
    assert_eq!(temps.count(), 0);
}

/// A small tmpfs, unmounted when dropped.
struct SmallDisk(tempfile::TempDir);

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// The same on a real full disk (ENOSPC): a tmpfs of 256 KiB, mounted as root (CI runs as root).
#[test]
fn a_failed_append_on_a_full_disk_is_cut_back() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root; the RLIMIT_FSIZE case covers the same path");
        return;
    }
    let disk = SmallDisk(tempfile::tempdir().unwrap());
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
        .arg(disk.0.path())
        .status()
        .unwrap();
    assert!(mounted.success(), "cannot mount a tmpfs as root");
    let root = disk.0.path().join("ws");
    let calls = ManualCalls::load(&root).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let call = |args: Value| rt.block_on(calls.call("file_write", &args.to_string()));
    call(json!({"path": "log.md", "content": "a".repeat(4096)})).unwrap();
    chela::workspace::append_durable(&root.join("sessions/s.jsonl"), "{\"n\":1}\n").unwrap();
    // Fill the disk, then free two pages: the next append fits partly, then hits ENOSPC.
    let filler = root.join("filler");
    let mut f = fs::File::create(&filler).unwrap();
    let page = [b'z'; 4096];
    while std::io::Write::write_all(&mut f, &page).is_ok() {}
    f.set_len(f.metadata().unwrap().len().saturating_sub(8192)).unwrap();
    drop(f);

    let e = call(json!({"path": "log.md", "content": "b".repeat(20_000), "mode": "append"})).unwrap_err();
    assert!(e.contains("Cannot append") && e.contains("space"), "{e}");
    assert_eq!(fs::read_to_string(root.join("log.md")).unwrap(), "a".repeat(4096), "a partial append stayed");
    let line = format!("{{\"big\":\"{}\"}}\n", "c".repeat(20_000));
    assert!(chela::workspace::append_durable(&root.join("sessions/s.jsonl"), &line).is_err());
    assert_eq!(fs::read_to_string(root.join("sessions/s.jsonl")).unwrap(), "{\"n\":1}\n");
    call(json!({"path": "log.md", "content": "d".repeat(20_000)})).unwrap_err();
    assert_eq!(fs::read_to_string(root.join("log.md")).unwrap(), "a".repeat(4096));
    let temps =
        fs::read_dir(&root).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"));
    assert_eq!(temps.count(), 0);
}

#[test]
fn folders_created_by_tools_are_private() {
    rustix::process::umask(Mode::from_raw_mode(0o022));
    let ws = Ws::new();
    ws.ok("file_write", json!({"path": "new/deep/f.md", "content": "x"}));
    ws.ok("file_copy", json!({"from": "new/deep/f.md", "to": "copies/one/f.md"}));
    ws.ok("file_move", json!({"from": "new/deep/f.md", "to": "moved/two/f.md"}));
    for dir in ["new", "new/deep", "copies", "copies/one", "moved", "moved/two"] {
        let mode = fs::metadata(ws.path(dir)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{dir} is {mode:o}");
    }
}

#[test]
fn stale_temp_files_are_swept_in_every_folder_but_not_through_symlinks() {
    let ws = Ws::new();
    fs::create_dir_all(ws.path("notes/deep/er")).unwrap();
    let stale = [ws.path("notes/.a.md.999999999.0.tmp"), ws.path("notes/deep/er/.b.md.999999999.9f.tmp")];
    let live = ws.path(&format!("notes/.c.md.{}.0.tmp", std::process::id()));
    let outside = ws.out.join(".d.md.999999999.0.tmp");
    for p in stale.iter().chain([&live, &outside]) {
        fs::write(p, "x").unwrap();
    }
    symlink(&ws.out, ws.path("notes/link")).unwrap();
    ManualCalls::load(&ws.root).unwrap();
    for p in &stale {
        assert!(!p.exists(), "{} was left", p.display());
    }
    assert!(live.exists(), "a live writer's temp file was removed");
    assert!(outside.exists(), "the sweeper followed a symlink out");
}
