//! A limit stops the work, not only the wait: each library function that loops in
//! C, given input that makes it run for hours, is stopped by `lua.timeout_ms`, and the thread
//! that ran it uses no more CPU once the run has answered. Also `lua_job_stop` on a job stuck
//! in one, and a job's own time limit.

use std::sync::Mutex;
use std::time::Duration;

use chela_core::cap::{Caller, Scope};
use serde_json::{Value, json};

use crate::testing::Fixture;
use crate::tools::ToolResult;

/// Which thread ran each script (by its code), so a test can read that thread's CPU time.
static WORKERS: Mutex<Vec<(String, i32)>> = Mutex::new(Vec::new());

pub(super) fn record_worker(code: &str) {
    // "/proc/thread-self" links to "<pid>/task/<tid>".
    let link = std::fs::read_link("/proc/thread-self").unwrap_or_default();
    let tid = link.file_name().and_then(|t| t.to_str()?.parse().ok()).unwrap_or(-1);
    WORKERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((code.to_owned(), tid));
}

fn worker_of(code: &str) -> i32 {
    let workers = WORKERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    workers.iter().rev().find(|(c, _)| c == code).map(|(_, t)| *t).expect("the script never started")
}

/// The thread's time on a CPU so far, in ns (`schedstat`); 0 once it has exited.
fn cpu_ns(tid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Real time on purpose (the tests that use it end in `_real_time`): a script runs on a thread
/// of its own and its limit is a real deadline, so only a real window shows that the thread
/// stopped spending CPU. How long the worker is watched after the run answered, and the CPU it may use meanwhile
/// (preparing the next states takes about a millisecond; a spinning thread, even on a loaded
/// machine, takes several times that).
const WATCH: Duration = Duration::from_millis(500);
const IDLE_CPU: Duration = Duration::from_millis(10);

async fn assert_worker_idle(code: &str, what: &str) {
    let tid = worker_of(code);
    let before = cpu_ns(tid);
    tokio::time::sleep(WATCH).await;
    let used = Duration::from_nanos(cpu_ns(tid).saturating_sub(before));
    assert!(used < IDLE_CPU, "{what}: the script's thread kept working after its limit: {used:?} of CPU in {WATCH:?}");
}

/// The model's call in a conversation that unlocked the `lua` group (hidden by default).
async fn call(fx: &Fixture, id: &str, args: Value) -> ToolResult {
    let unlocked = ["lua".to_owned()];
    fx.toolbox.call(&fx.ctx(), id, &args.to_string(), Caller::Model, Scope { extra_visible: &unlocked }).await
}

/// Runs `code` (made unique with `tag`) under a 300 ms limit; returns its outcome once the
/// worker is seen idle. A run that does not answer within seconds is dropped (which kills it)
/// and then fails on the CPU its thread keeps using.
async fn run_limited(fx: &Fixture, tag: &str, code: &str) -> Result<Value, String> {
    let code = format!("-- {tag}\n{code}");
    let r = tokio::time::timeout(Duration::from_secs(5), call(fx, "lua_run", json!({ "code": code }))).await;
    assert_worker_idle(&code, tag).await;
    match r.unwrap_or_else(|_| panic!("{tag}: the run did not answer within 5 s of a 300 ms limit")) {
        Ok(v) => Ok(serde_json::from_str(&v).unwrap()),
        Err(e) => Err(e.0),
    }
}

fn fixture() -> Fixture {
    Fixture::new(&[("lua.timeout_ms", "300"), ("lua.max_instructions", "1000000000000")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pattern_matching_that_backtracks_for_hours_stops_at_the_time_limit_real_time() {
    let fx = fixture();
    let cases = [
        ("find", "return ('a'):rep(200):find('.-.-.-.-.-b')"),
        ("match", "return ('a'):rep(200):match('(.-)(.-)(.-)(.-)(.-)b')"),
        ("gmatch", "for x in ('a'):rep(200):gmatch('.-.-.-.-.-b') do end"),
        ("gsub", "return (('a'):rep(200):gsub('.-.-.-.-.-b', ''))"),
        // Quadratic rather than exponential: every start scans the rest for its match.
        ("gsub", "return (('('):rep(300000):gsub('%b()', ''))"),
    ];
    for (f, code) in cases {
        let e = run_limited(&fx, &format!("string.{f}: {code}"), code).await.unwrap_err();
        assert!(e.contains("longer than 300 ms") && e.contains("lua.timeout_ms"), "{f}: {e}");
        assert!(e.contains(&format!("inside string.{f}")) && e.contains("anchor it"), "{f}: {e}");
    }
    // The same calls on ordinary input are as before.
    let r = run_limited(&fx, "ok", "return {('aab'):find('a-b'), ('x=1'):match('(%w+)=(%w+)')}").await;
    assert_eq!(r.unwrap()["result"], json!([1, "x", "1"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_find_is_linear_and_an_empty_rep_returns_at_once_real_time() {
    let fx = fixture();
    // Lua's plain search compares the needle at every place its first byte occurs: 2e6 × 2e6.
    let code = "local s = ('a'):rep(4000000) return {s:find(('a'):rep(2000000) .. 'b', 1, true)}";
    assert_eq!(run_limited(&fx, "plain find", code).await.unwrap()["result"], json!({}));
    // Lua's string.rep copies nothing 2^62 times.
    let code = "return {(''):rep(2^62), (''):rep(2^62, '')}";
    assert_eq!(run_limited(&fx, "rep", code).await.unwrap()["result"], json!(["", ""]));
    let e = run_limited(&fx, "big rep", "return ('x'):rep(2^40)").await.unwrap_err();
    assert!(e.contains("string.rep") && e.contains("lua.max_memory_bytes"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_functions_over_huge_ranges_stop_at_the_time_limit_real_time() {
    let fx = fixture();
    let huge_len = "local t = setmetatable({}, {__len = function() return 1 << 62 end}) ";
    let cases = [
        ("table.move", "table.move({}, 1, 2^62, 2)".to_owned()),
        ("table.insert", format!("{huge_len} table.insert(t, 1, 'x')")),
        ("table.remove", format!("{huge_len} table.remove(t, 1)")),
    ];
    for (f, code) in &cases {
        let e = run_limited(&fx, f, code).await.unwrap_err();
        assert!(e.contains("longer than 300 ms") && e.contains("lua.timeout_ms"), "{f}: {e}");
    }
    // Ordinary uses work as Lua's own, on plain tables and on tables with a metatable.
    let code = "local t = {1, 2, 3} table.insert(t, 1, 0) table.remove(t) local m = setmetatable({1, 2}, {}) \
                table.insert(m, 'x') table.insert(m, 1, 'y') local r = table.remove(m, 2) \
                local big = {} for i = 1, 10000 do big[i] = i end table.move(big, 1, 9999, 2) \
                return {t, m, r, big[1], big[2], big[10000], table.move({1, 2, 3}, 1, 3, 1, {})}";
    let r = run_limited(&fx, "table ok", code).await.unwrap();
    assert_eq!(r["result"], json!([[0, 1, 2], ["y", 2, "x"], 1, 1, 1, 9999, [1, 2, 3]]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoding_a_table_that_holds_itself_many_times_stops_at_a_limit_real_time() {
    let fx = fixture();
    // 2^26 leaves from 26 small tables.
    let code = "local t = {} for i = 1, 26 do t = {t, t} end return require('cjson').encode(t)";
    let e = run_limited(&fx, "cjson", code).await.unwrap_err();
    assert!(e.contains("cjson.encode") && (e.contains("lua.timeout_ms") || e.contains("lua.max_memory_bytes")), "{e}");
    let code = "local t = {} for i = 1, 26 do t = {t, t} end return t";
    let e = run_limited(&fx, "result", code).await.unwrap_err();
    assert!(e.contains("lua.timeout_ms") || e.contains("lua.max_memory_bytes"), "{e}");
}

async fn wait_status(fx: &Fixture, id: &str, want: &str) -> Value {
    for _ in 0..500 {
        let v: Value = serde_json::from_str(&call(fx, "lua_job_get", json!({"job_id": id})).await.unwrap()).unwrap();
        if v["status"] == want {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("job {id} never became {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_stuck_in_a_pattern_is_stopped_by_lua_job_stop_and_by_its_own_limit_real_time() {
    let fx = Fixture::new(&[
        ("lua.stop_grace_ms", "100"),
        ("lua.job_timeout_ms", "600000"),
        ("lua.max_instructions", "1000000000000"),
    ]);
    let code = "-- stop me\nreturn ('a'):rep(200):find('.-.-.-.-.-b')";
    let v: Value = serde_json::from_str(&call(&fx, "lua_run_async", json!({ "code": code })).await.unwrap()).unwrap();
    let id = v["job_id"].as_str().unwrap().to_owned();
    let r = call(&fx, "lua_job_stop", json!({ "job_id": id })).await.unwrap();
    assert!(r.contains("by force"), "{r}");
    wait_status(&fx, &id, "stopped").await;
    assert_worker_idle(code, "lua_job_stop").await;

    let fx = Fixture::new(&[("lua.job_timeout_ms", "300"), ("lua.max_instructions", "1000000000000")]);
    let code = "-- job limit\nreturn ('a'):rep(200):gsub('.-.-.-.-.-b', '')";
    let v: Value = serde_json::from_str(&call(&fx, "lua_run_async", json!({ "code": code })).await.unwrap()).unwrap();
    let v = wait_status(&fx, v["job_id"].as_str().unwrap(), "failed").await;
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("lua.job_timeout_ms") && e.contains("string.gsub"), "{e}");
    assert_worker_idle(code, "job limit").await;
}
