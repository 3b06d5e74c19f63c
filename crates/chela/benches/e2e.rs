//! The whole program as a person runs it: `chela chat -m "what time is it?"`, one tool call,
//! against the fake LLM on 127.0.0.1, from process start to exit.
//!
//! Per run: a fresh temporary workspace (`CHELA_HOME`) whose `chela.toml` points `llm.base_url`
//! at the fake with a dummy key; API keys and `CHELA_*` variables are removed from the child's
//! environment. The fake runs in this process (its own thread), so its CPU time is not the
//! child's. Wall time is spawn to reap; CPU time (user + sys) and peak RSS come from `wait4`,
//! called in a small launcher process (see `run` for why).
//! A second series reuses one workspace (memory files already written, session emptied), as
//! every run after the first is. Providers and series are interleaved so noise hits them alike.
//!
//! Also printed: the size of the binary, and the size of the first request body (system prompt
//! and tool definitions) for each provider, from what the fake recorded.
//!
//! Run: `scripts/bench.sh`, or build the binary and run the bench:
//! `cargo build --profile release-small -p chela && cargo bench -p chela --bench e2e`.
//! The binary is `$CHELA_BIN`, else the first argument, else `target/release-small/chela`
//! (under `$CARGO_TARGET_DIR` when set).

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]
// Unsafe only for `libc::wait4`, which std does not wrap.
#![allow(unsafe_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, Recorded, Step};
use serde_json::{Value, json};

#[path = "common/release_bin.rs"]
mod release_bin;
use release_bin::chela_bin;

const RUNS: usize = 30;
const WARMUP: usize = 3;
const ANSWER: &str = "It is 12:25 in Paris.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Provider {
    Anthropic,
    OpenAi,
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
        }
    }

    fn base_url(self, llm: &FakeLlm) -> String {
        match self {
            Provider::Anthropic => llm.anthropic_base_url(),
            Provider::OpenAi => llm.openai_base_url(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Series {
    /// A new workspace every run: default memory files are written first.
    Fresh,
    /// The workspace exists; only the session file is removed between runs.
    Existing,
}

/// What `wait4` reported for one child.
#[derive(Clone, Copy, Debug)]
struct Usage {
    wall: Duration,
    user: Duration,
    sys: Duration,
    max_rss_kib: u64,
    /// Peak RSS of the launcher that started it: a floor under `max_rss_kib`.
    launcher_rss_kib: u64,
}

/// Runs `bin args` with `CHELA_HOME=home`, returning its usage and what it printed on stdout.
///
/// The child is started by a copy of this program in launcher mode (see [`launch`]) rather than
/// from here: Linux carries the RSS high-water mark of the process that forks across `exec`,
/// so a child forked from this process (which holds the fake server and every recorded request)
/// would report this process's peak RSS instead of its own.
fn run(bin: &Path, args: &[&str], home: Option<&Path>, out_dir: &Path) -> Result<(Usage, String), String> {
    let stdout_path = out_dir.join("stdout");
    let stderr_path = out_dir.join("stderr");
    let result_path = out_dir.join("usage");
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(me);
    cmd.arg(LAUNCH)
        .arg(bin)
        .args(args)
        .env(RESULT_VAR, &result_path)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).map_err(|e| e.to_string())?)
        .stderr(File::create(&stderr_path).map_err(|e| e.to_string())?);
    // Only the workspace's chela.toml configures the child: no real keys, no CHELA_* overrides.
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if n.starts_with("CHELA_") || n == "ANTHROPIC_API_KEY" || n == "OPENAI_API_KEY" {
            cmd.env_remove(&name);
        }
    }
    if let Some(home) = home {
        cmd.env("CHELA_HOME", home);
    }
    let status = cmd.status().map_err(|e| format!("cannot start the launcher: {e}"))?;
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let result = std::fs::read_to_string(&result_path).unwrap_or_default();
    let n: Vec<u64> = result.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    if !status.success() || n.len() != 6 || n[4] != 0 {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        return Err(format!("`chela {}` failed ({status}, usage {result:?}):\n{stdout}{stderr}", args.join(" ")));
    }
    let usage = Usage {
        wall: Duration::from_nanos(n[0]),
        user: Duration::from_micros(n[1]),
        sys: Duration::from_micros(n[2]),
        max_rss_kib: n[3],
        launcher_rss_kib: n[5],
    };
    Ok((usage, stdout))
}

const LAUNCH: &str = "--launch";
const RESULT_VAR: &str = "E2E_USAGE_FILE";

/// Launcher mode: `e2e --launch BIN ARGS…` runs BIN with this process's environment and
/// stdio, reaps it with `wait4`, and writes `wall_ns user_us sys_us maxrss_kib exit_code
/// launcher_hwm_kib` to `$E2E_USAGE_FILE`. The launcher is small, and its own peak RSS is
/// reported so the reader can see it is below the child's (the child's figure cannot be lower
/// than the launcher's, for the reason given at [`run`]).
fn launch(bin: &str, args: &[String]) -> ExitCode {
    let out = std::env::var_os(RESULT_VAR).map(PathBuf::from);
    let own_hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().trim_end_matches(" kB").to_owned()))
        })
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let started = Instant::now();
    let child = match Command::new(bin).args(args).env_remove(RESULT_VAR).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("e2e launcher: cannot start {bin}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Ok(pid) = libc::pid_t::try_from(child.id()) else { return ExitCode::FAILURE };
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain data that `wait4` fills in; all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (std only reaps in `wait`, never called here);
    // `status` and `ru` are valid for writes for the duration of the call.
    let reaped = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut ru) };
    let wall = started.elapsed();
    if reaped != pid {
        eprintln!("e2e launcher: wait4 failed: {}", std::io::Error::last_os_error());
        return ExitCode::FAILURE;
    }
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    let line = format!("{} {} {} {} {code} {own_hwm}", wall.as_nanos(), us(ru.ru_utime), us(ru.ru_stime), ru.ru_maxrss);
    match out.map(|p| std::fs::write(p, line)) {
        Some(Ok(())) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

fn write_config(home: &Path, provider: Provider, llm: &FakeLlm) {
    std::fs::create_dir_all(home).unwrap();
    let toml = format!(
        "[llm]\nprovider = \"{}\"\nbase_url = \"{}\"\napi_key = \"bench-dummy-key\"\n",
        provider.name(),
        provider.base_url(llm)
    );
    std::fs::write(home.join("chela.toml"), toml).unwrap();
}

/// One `chela chat -m` with a tool round; returns its usage and the requests it made.
fn chat_once(
    bin: &Path,
    llm: &FakeLlm,
    provider: Provider,
    series: Series,
    existing: &Path,
) -> Result<(Usage, Vec<Recorded>), String> {
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let home = match series {
        Series::Fresh => {
            let home = scratch.path().join("home");
            write_config(&home, provider, llm);
            home
        }
        Series::Existing => {
            let home = existing.join(provider.name());
            let _ = std::fs::remove_file(home.join("sessions").join("cli_local.jsonl"));
            home
        }
    };
    let before = llm.requests().len();
    llm.push(Step::tool_call("get_current_time", json!({})));
    llm.push(Step::text(ANSWER));
    let (usage, stdout) = run(bin, &["chat", "-m", "what time is it?"], Some(&home), scratch.path())?;
    if !stdout.contains(ANSWER) || llm.remaining() != 0 {
        return Err(format!("unexpected run: stdout {stdout:?}, {} scripted steps left", llm.remaining()));
    }
    let requests: Vec<Recorded> = llm.requests().into_iter().skip(before).collect();
    if requests.len() != 2 {
        return Err(format!("expected 2 model requests, the fake saw {}", requests.len()));
    }
    Ok((usage, requests))
}

fn median<T: Copy + Ord>(v: &[T]) -> T {
    let mut s = v.to_vec();
    s.sort_unstable();
    s[(s.len() - 1) / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Encoded bytes of the system prompt and of the tool definitions in a first request.
fn split(provider: Provider, r: &Recorded) -> (usize, usize, usize, usize) {
    let body = String::from_utf8_lossy(&r.body);
    let v: Value = serde_json::from_slice(&r.body).expect("the request body is JSON");
    let system: String = match provider {
        // Text blocks when the stable part is marked for the prompt cache.
        Provider::Anthropic => match &v["system"] {
            Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
            other => other.as_str().unwrap_or("").to_owned(),
        },
        Provider::OpenAi => v["messages"][0]["content"].as_str().unwrap_or("").to_owned(),
    };
    // Both writers escape strings exactly as serde_json does, so this is the encoded length.
    let system_encoded = serde_json::to_string(&system).unwrap().len();
    // The tools array as sent, byte for byte: from `"tools":[` to the `]` before the key that
    // follows it (tools lead the body, before the system prompt and the messages).
    let tools_bytes = body.find("\"tools\":[").map_or(0, |a| {
        let after = &body[a..];
        let end = ["],\"system\":", "],\"messages\":"].iter().filter_map(|k| after.find(k)).min().unwrap_or(0);
        end.saturating_sub("\"tools\":".len() - 1)
    });
    let tools = v["tools"].as_array().map_or(0, Vec::len);
    (system.len(), system_encoded, tools_bytes, tools)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(LAUNCH) {
        return match args.get(2) {
            Some(bin) => launch(bin, &args[3..]),
            None => ExitCode::from(2),
        };
    }
    let bin = chela_bin();
    let bin = match std::fs::canonicalize(&bin) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "e2e: no chela binary at {} ({e}).\nBuild it with `cargo build --profile release-small -p chela` \
                 (scripts/bench.sh does), or set CHELA_BIN to the binary to measure.",
                bin.display()
            );
            return ExitCode::from(2);
        }
    };
    let size = std::fs::metadata(&bin).map(|m| m.len()).unwrap_or(0);
    let stripped = std::fs::read(&bin).map(|b| !b.windows(8).any(|w| w == b".symtab\0")).unwrap_or(false);
    println!("e2e: {}", bin.display());
    println!(
        "binary: {size} bytes ({:.2} MiB), {}; target <= 3 MiB: {}",
        size as f64 / 1048576.0,
        if stripped { "stripped" } else { "NOT stripped (no release-small build?)" },
        if size <= 3 * 1024 * 1024 { "PASS" } else { "FAIL" }
    );

    let llm = FakeLlm::start(Vec::new());
    let existing = tempfile::tempdir().expect("a temporary folder");
    for p in [Provider::Anthropic, Provider::OpenAi] {
        write_config(&existing.path().join(p.name()), p, &llm);
    }
    let cases: Vec<(Series, Provider)> = [Series::Fresh, Series::Existing]
        .into_iter()
        .flat_map(|s| [(s, Provider::Anthropic), (s, Provider::OpenAi)])
        .collect();
    let mut samples: Vec<Vec<Usage>> = vec![Vec::new(); cases.len()];
    let mut first_requests: Vec<Option<Recorded>> = vec![None; cases.len()];
    let mut version = Vec::new();
    for i in 0..WARMUP + RUNS {
        for (c, &(series, provider)) in cases.iter().enumerate() {
            match chat_once(&bin, &llm, provider, series, existing.path()) {
                Ok((usage, requests)) => {
                    if i >= WARMUP {
                        samples[c].push(usage);
                    }
                    first_requests[c].get_or_insert_with(|| requests[0].clone());
                }
                Err(e) => {
                    eprintln!("e2e: {} {series:?} run failed: {e}", provider.name());
                    return ExitCode::FAILURE;
                }
            }
        }
        // The cost of starting the process at all, for comparison.
        let scratch = tempfile::tempdir().expect("a temporary folder");
        match run(&bin, &["--version"], None, scratch.path()) {
            Ok((usage, _)) if i >= WARMUP => version.push(usage),
            Ok(_) => {}
            Err(e) => {
                eprintln!("e2e: {e}");
                return ExitCode::FAILURE;
            }
        }
    }

    println!(
        "\n`chela chat -m \"what time is it?\"`, one tool call; median (min-max) of {RUNS} runs after {WARMUP} warm-up runs"
    );
    // Only the sum of user and sys time is exact; Linux splits it between them by sampling ticks.
    println!("{:<38} {:>20} {:>20} {:>20}", "", "wall ms", "cpu ms (user+sys)", "peak RSS MiB");
    let mut rows: Vec<(String, &[Usage])> = cases
        .iter()
        .zip(&samples)
        .map(|((s, p), v)| (format!("{} ({s:?} workspace)", p.name()), v.as_slice()))
        .collect();
    rows.push(("chela --version (process start only)".to_owned(), &version));
    let mut pass = true;
    for (i, (name, v)) in rows.iter().enumerate() {
        let wall: Vec<Duration> = v.iter().map(|u| u.wall).collect();
        let cpu: Vec<Duration> = v.iter().map(|u| u.user + u.sys).collect();
        let rss: Vec<u64> = v.iter().map(|u| u.max_rss_kib).collect();
        let range = |d: &[Duration]| {
            format!("{:.1} ({:.1}-{:.1})", ms(median(d)), ms(*d.iter().min().unwrap()), ms(*d.iter().max().unwrap()))
        };
        println!(
            "{:<38} {:>20} {:>20} {:>20}",
            name,
            range(&wall),
            range(&cpu),
            format!(
                "{:.2} ({:.2}-{:.2})",
                mib(median(&rss)),
                mib(*rss.iter().min().unwrap()),
                mib(*rss.iter().max().unwrap())
            )
        );
        if i < 2 {
            pass &= median(&cpu) <= Duration::from_millis(10) && median(&rss) <= 8 * 1024;
        }
    }
    let floor = samples.iter().flatten().map(|u| u.launcher_rss_kib).max().unwrap_or(0);
    println!("(peak RSS of the launcher that starts each run, a floor under the RSS column: {:.2} MiB)", mib(floor));
    println!(
        "target (fresh workspace, medians): cpu <= 10 ms and peak RSS <= 8 MiB: {}",
        if pass { "PASS" } else { "FAIL" }
    );
    println!("reference (same kind of machine): Zig competitor 19.5 ms cpu, 10.8 MiB; Rust competitor 45 ms, 31 MiB");

    println!("\nfirst request body (plain first message, fresh workspace, default memory files, default build):");
    let mut body_pass = true;
    for (c, &(series, provider)) in cases.iter().enumerate() {
        if series != Series::Fresh {
            continue;
        }
        let r = first_requests[c].as_ref().expect("at least one run");
        let (system, system_encoded, tools_bytes, tools) = split(provider, r);
        body_pass &= r.body.len() <= 16 * 1024;
        println!(
            "  {:<9} {} bytes: system prompt {system} B ({system_encoded} B encoded), {tools} tool definitions {tools_bytes} B \
             ({} B each on average), rest {} B",
            provider.name(),
            r.body.len(),
            tools_bytes / tools.max(1),
            r.body.len() - system_encoded - tools_bytes
        );
    }
    println!("target <= 16 KiB (competitors send 33-64 KB): {}", if body_pass { "PASS" } else { "FAIL" });
    ExitCode::SUCCESS
}
