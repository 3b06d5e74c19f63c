//! The Lua group against real Lua: the sandbox escape corpus, Ameba-Claw's example,
//! the limits, the jobs and their journal.

use std::time::Duration;

use chela_core::cap::{Caller, Scope};
use serde_json::{Value, json};

use crate::testing::Fixture;
use crate::tools::ToolResult;

/// The model's call in a conversation that unlocked the groups `lua` and `files_manage` (hidden
/// by default).
async fn call(fx: &Fixture, id: &str, args: Value) -> ToolResult {
    let unlocked = ["lua".to_owned(), "files_manage".to_owned()];
    fx.toolbox.call(&fx.ctx(), id, &args.to_string(), Caller::Model, Scope { extra_visible: &unlocked }).await
}

async fn lua(fx: &Fixture, code: &str) -> ToolResult {
    call(fx, "lua_run", json!({ "code": code })).await
}

fn err(r: ToolResult) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.0,
    }
}

fn ok(r: ToolResult) -> Value {
    serde_json::from_str(&r.unwrap_or_else(|e| panic!("{}", e.0))).unwrap()
}

/// Every file beneath `dir`, with its contents, to see that nothing outside changed.
fn snapshot(dir: &std::path::Path, skip: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p == skip {
            continue;
        }
        if p.is_dir() {
            snapshot(&p, skip, out);
        } else {
            out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_corpus_each_refused_with_its_own_error_and_nothing_outside_touched() {
    // Each script must meet its own limit; the wall-clock bound is not one of them here, and on a
    // loaded machine the default 5 s could end the memory-filling loops first.
    let fx =
        Fixture::new(&[("lua.max_instructions", "2000000"), ("lua.timeout_ms", "60000"), ("caps.disabled", "http")]);
    let outside = fx.root().parent().unwrap().to_owned();
    std::fs::write(outside.join("x"), "secret outside the workspace").unwrap();
    let mut before = Vec::new();
    snapshot(&outside, fx.root(), &mut before);
    let corpus: &[(&str, &str)] = &[
        (r#"os.execute("touch ../pwned")"#, "os.execute is not available in the Chela Lua sandbox"),
        (r#"io.open("../x", "w")"#, "io.open is not available in the Chela Lua sandbox"),
        (r#"require("ffi")"#, "module 'ffi' is not available in the Chela Lua sandbox"),
        (r#"package.loadlib("libc.so.6", "system")"#, "package.loadlib is not available"),
        ("local f = function() end return load(string.dump(f))", "string.dump is not available"),
        (r#"return load("\27Lua\84\0", "x", "b")"#, "binary chunks are refused"),
        (r#"return string.rep("x", 64 * 1024 * 1024)"#, "lua.max_memory_bytes"),
        (r#"local t = {} for i = 1, 1e9 do t[i] = ("y"):rep(1024) .. i end"#, "lua.max_memory_bytes"),
        ("while true do end", "lua.max_instructions"),
        ("local function f(n) return 1 + f(n + 1) end return f(1)", "recursion too deep"),
        (
            "local co = coroutine.wrap(function() while true do coroutine.yield() end end) while true do co() end",
            "lua.max_instructions",
        ),
        (r#"getmetatable("").__index = function() return os.execute end"#, "the string metatable is protected"),
        (r#"debug.setmetatable("", {})"#, "debug.setmetatable is not available"),
        ("dofile('../x')", "dofile is not available"),
        ("collectgarbage('generational')", "collectgarbage(\"generational\") is not available"),
        ("while true do pcall(function() while true do end end) end", "lua.max_instructions"),
        ("sleep(10)", "sleep() is only available in background jobs"),
    ];
    for (code, want) in corpus {
        let e = err(lua(&fx, code).await);
        assert!(e.contains(want), "{code}\n  wanted: {want}\n  got: {e}");
    }
    // Tools through cap.call: a disabled group fails, `..` is refused by the file sandbox.
    let r = ok(lua(
        &fx,
        r#"local cap = require("cap") return {cap.call("http_request", '{"url":"http://127.0.0.1:9/"}')}"#,
    )
    .await);
    assert_eq!(r["result"][0], false, "{r}");
    assert!(r["result"][1].as_str().unwrap().contains("switched off"), "{r}");
    let r = ok(lua(&fx, r#"local cap = require("cap") return {cap.call("file_read", '{"path":"../x"}')}"#).await);
    assert_eq!(r["result"][0], false, "{r}");
    let msg = r["result"][1].as_str().unwrap();
    assert!(msg.contains("..") && !msg.contains("secret"), "{msg}");
    // Scripts do not start scripts.
    let r = ok(lua(&fx, r#"return {require("cap").call("lua_run", '{"code":"return 1"}')}"#).await);
    assert!(r["result"][1].as_str().unwrap().contains("cannot be called from a Lua script"), "{r}");
    let mut after = Vec::new();
    snapshot(&outside, fx.root(), &mut after);
    assert_eq!(before, after, "nothing outside the workspace changed");
}

/// A tool for people and scripts only, like the registry allows.
struct PeopleOnly;

impl crate::tools::Tool for PeopleOnly {
    const NAME: &'static str = "people_only";
    const DESCRIPTION: &'static str = "Not for the model.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    const LLM_CALLABLE: bool = false;
    type Args = crate::tools::testing::fake::NoArgs;

    async fn call<'a>(&'a self, _: &'a crate::tools::ToolCtx, _: Self::Args) -> ToolResult {
        Ok("done for a person".into())
    }
}

/// A script has its caller's rights and no more: one the model starts cannot call
/// a hidden group its conversation has not unlocked, nor a tool for people only, in a run or a
/// job; the groups the conversation unlocked work; a person and Chela itself keep their rights.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_calls_tools_with_its_callers_rights_and_no_more() {
    let fx = Fixture::new(&[("caps.hidden", "files")]);
    fx.toolbox.register(crate::tools::testing::fake::group("test", PeopleOnly)).unwrap();
    std::fs::write(fx.root().join("note.txt"), "hello from the workspace").unwrap();
    let code = r#"local cap = require("cap")
        local a, ra = cap.call("file_read", '{"path":"note.txt"}')
        local b, rb = cap.call("people_only", "{}")
        return {a, ra, b, rb}"#;
    let run = |caller: Caller, unlocked: Vec<String>| {
        let ctx = fx.ctx();
        let tb = std::sync::Arc::clone(&fx.toolbox);
        async move {
            let args = json!({ "code": code }).to_string();
            ok(tb.call(&ctx, "lua_run", &args, caller, Scope { extra_visible: &unlocked }).await)["result"].clone()
        }
    };
    // The model's own calls are refused...
    assert!(err(call(&fx, "file_read", json!({"path": "note.txt"})).await).contains("hidden"));
    assert!(err(call(&fx, "people_only", json!({})).await).contains("only be called by a person"));
    // ...and so are its script's.
    let r = run(Caller::Model, vec!["lua".to_owned()]).await;
    assert_eq!((&r[0], &r[2]), (&json!(false), &json!(false)), "{r}");
    assert!(r[1].as_str().unwrap().contains("group `files` is hidden"), "{r}");
    assert!(r[3].as_str().unwrap().contains("only be called by a person"), "{r}");
    // A conversation that unlocked the group: its scripts may read; the people-only tool stays refused.
    let r = run(Caller::Model, vec!["lua".to_owned(), "files".to_owned()]).await;
    assert_eq!((&r[0], &r[2]), (&json!(true), &json!(false)), "{r}");
    assert!(r[1].as_str().unwrap().contains("hello from the workspace"), "{r}");
    // A person (`chela cap call`) and Chela itself (an owner's job) keep their rights.
    for caller in [Caller::Manual, Caller::Internal] {
        let r = run(caller, Vec::new()).await;
        assert_eq!((&r[0], &r[2], &r[3]), (&json!(true), &json!(true), &json!("done for a person")), "{r}");
    }
    // A job the model starts runs with the model's rights all along.
    let id = ok(call(&fx, "lua_run_async", json!({ "code": code })).await)["job_id"].as_str().unwrap().to_owned();
    let v = wait_status(&fx, &id, "done").await;
    assert_eq!((&v["result"][0], &v["result"][2]), (&json!(false), &json!(false)), "{v}");
    // One a person starts keeps the person's.
    let args = json!({ "code": code }).to_string();
    let started = fx.toolbox.call(&fx.ctx(), "lua_run_async", &args, Caller::Manual, Scope::default()).await;
    let v = wait_status(&fx, ok(started)["job_id"].as_str().unwrap(), "done").await;
    assert_eq!((&v["result"][0], &v["result"][2]), (&json!(true), &json!(true)), "{v}");
}

/// Ameba-Claw's `cap.call` example from its docs (seed 002), character for character.
const AMEBA_EXAMPLE: &str = r#"local cap   = require("cap")
local cjson = require("cjson")

-- Correct: capture both ok (boolean) and result_json (string)
local ok, result_json = cap.call("get_current_time", "{}")
if not ok then
    return '{"error":' .. (result_json or '"cap call failed"') .. '}'
end
local t = cjson.decode(result_json)
-- use fields such as t.timestamp, t.datetime
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ameba_claw_cap_call_example_runs_unchanged() {
    let fx = Fixture::new(&[]);
    std::fs::create_dir_all(fx.root().join("scripts")).unwrap();
    std::fs::write(fx.root().join("scripts/time.lua"), AMEBA_EXAMPLE).unwrap();
    let r = ok(call(&fx, "lua_run", json!({"path": "scripts/time.lua", "args": {}})).await);
    assert_eq!(r, json!({"result": null, "output": ""}));
    // The decoded table is real: the same code returning it gives the tool's fields.
    let r = ok(lua(&fx, &format!("{AMEBA_EXAMPLE}return t")).await);
    assert!(r["result"]["unix"].as_i64().unwrap() > 1_700_000_000, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_gets_args_and_returns_json_with_printed_output() {
    let fx = Fixture::new(&[]);
    let r = ok(call(
        &fx,
        "lua_run",
        json!({"code": "local cjson = require('cjson') function run(a) print('n', a.n) require('log').info('x') \
                        return {a.n * 2, name = a.s, none = cjson.null, e = {}} end",
               "args": {"n": 21, "s": "ok"}}),
    )
    .await);
    assert_eq!(r["result"], json!({"1": 42, "name": "ok", "none": null, "e": {}}));
    assert_eq!(r["output"], "n\t21\n[info] x");
    let r = ok(lua(&fx, "return {1, 2, 'three'}").await);
    assert_eq!(r["result"], json!([1, 2, "three"]));
    assert!(err(lua(&fx, "return (").await).contains("syntax error"));
    assert!(err(call(&fx, "lua_run", json!({"code": "return 1", "path": "a.lua"})).await).contains("either"));
    assert!(err(call(&fx, "lua_run", json!({"path": "../a.lua"})).await).contains(".."));
    // Globals do not leak from one run into the next: every run has a fresh state.
    ok(lua(&fx, "leaked = 1 string.upper = nil").await);
    assert_eq!(ok(lua(&fx, "return {leaked == nil, string.upper('a')}").await)["result"], json!([true, "A"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_limit_names_its_setting_and_other_runs_carry_on() {
    let fx = Fixture::new(&[
        ("lua.timeout_ms", "200"),
        ("lua.max_output_bytes", "1024"),
        ("lua.max_memory_bytes", "1048576"),
    ]);
    let e = err(lua(&fx, "while true do end").await);
    assert!(e.contains("longer than 200 ms") && e.contains("lua.timeout_ms"), "{e}");
    let e = err(lua(&fx, "for i = 1, 1e6 do print('0123456789') end").await);
    assert!(e.contains("lua.max_output_bytes"), "{e}");
    let e = err(lua(&fx, "local s = {} for i = 1, 1e6 do s[i] = {} end").await);
    assert!(e.contains("more than 1048576 bytes") && e.contains("lua.max_memory_bytes"), "{e}");
    // A limit is not caught by pcall; an ordinary error is.
    let e = err(lua(&fx, "pcall(function() while true do end end) return 'escaped'").await);
    assert!(e.contains("lua.timeout_ms"), "{e}");
    assert_eq!(ok(lua(&fx, "return select(1, pcall(error, 'x'))").await)["result"], false);
    assert_eq!(ok(lua(&fx, "return 1").await)["result"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_enabled_false_switches_the_group_off_with_a_message_naming_it() {
    let fx = Fixture::new(&[("lua.enabled", "false")]);
    let e = err(lua(&fx, "return 1").await);
    assert!(e.contains("lua.enabled"), "{e}");
}

async fn wait_status(fx: &Fixture, id: &str, want: &str) -> Value {
    for _ in 0..500 {
        let v = ok(call(fx, "lua_job_get", json!({"job_id": id})).await);
        if v["status"] == want {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("job {id} never became {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_log_stop_cooperatively_or_by_force_and_are_bounded() {
    // A grace long enough that a loaded machine does not turn the polite stop into a forced one,
    // and an instruction budget the stubborn loop cannot spend meanwhile (it would end the job
    // by itself, however long the machine takes to get to the stop).
    let fx = Fixture::new(&[
        ("lua.max_jobs", "2"),
        ("lua.stop_grace_ms", "1000"),
        ("lua.max_instructions", "1000000000000"),
    ]);
    let start = |code: &str| json!({"code": code});
    let polite = ok(call(
        &fx,
        "lua_run_async",
        start("local n = 0 while sleep(5) do n = n + 1 print('tick', n) end print('bye') return n"),
    )
    .await)["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stubborn =
        ok(call(&fx, "lua_run_async", start("while true do end")).await)["job_id"].as_str().unwrap().to_owned();
    let e = err(call(&fx, "lua_run_async", start("return 1")).await);
    assert!(e.contains("lua.max_jobs"), "{e}");
    // Logs arrive while it runs; since_seq returns only newer lines.
    let mut seen = 0;
    for _ in 0..500 {
        let v = ok(call(&fx, "lua_job_get", json!({"job_id": polite})).await);
        seen = v["logs"].as_array().unwrap().len();
        if seen >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen >= 3);
    let v = ok(call(&fx, "lua_job_get", json!({"job_id": polite, "since_seq": 2})).await);
    assert_eq!(v["logs"][0]["seq"], 3, "{v}");
    let r = call(&fx, "lua_job_stop", json!({"job_id": polite})).await.unwrap();
    assert!(r.ends_with("stopped."), "{r}");
    let v = wait_status(&fx, &polite, "stopped").await;
    assert_eq!(v["logs"].as_array().unwrap().last().unwrap()["line"], "bye", "{v}");
    let r = call(&fx, "lua_job_stop", json!({"job_id": stubborn})).await.unwrap();
    assert!(r.contains("by force") && r.contains("lua.stop_grace_ms"), "{r}");
    wait_status(&fx, &stubborn, "stopped").await;
    let list = ok(call(&fx, "lua_job_list", json!({})).await);
    assert_eq!(list["jobs"].as_array().unwrap().len(), 2, "{list}");
    assert!(err(call(&fx, "lua_job_get", json!({"job_id": "nope"})).await).contains("lua_job_list"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_ends_otherwise_while_asked_to_stop_is_not_reported_stopped() {
    // Asked to stop, it spins until its instruction budget ends it: well within the grace.
    let fx = Fixture::new(&[("lua.stop_grace_ms", "5000"), ("lua.max_instructions", "10000000")]);
    let code = "while sleep(5) do end while true do end";
    let id = ok(call(&fx, "lua_run_async", json!({"code": code})).await)["job_id"].as_str().unwrap().to_owned();
    let r = call(&fx, "lua_job_stop", json!({"job_id": id})).await.unwrap();
    assert_eq!(r, format!("Job {id} ended before it stopped (it is failed); lua_job_get shows why."));
    let v = wait_status(&fx, &id, "failed").await;
    assert!(v["error"].as_str().unwrap().contains("lua.max_instructions"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_or_moving_a_script_stops_its_jobs_first() {
    let fx = Fixture::new(&[("lua.stop_grace_ms", "100")]);
    std::fs::create_dir_all(fx.root().join("scripts")).unwrap();
    for name in ["a.lua", "b.lua"] {
        std::fs::write(fx.root().join("scripts").join(name), "while sleep(5) do end").unwrap();
    }
    let a =
        ok(call(&fx, "lua_run_async", json!({"path": "./scripts/a.lua"})).await)["job_id"].as_str().unwrap().to_owned();
    let b =
        ok(call(&fx, "lua_run_async", json!({"path": "scripts/b.lua"})).await)["job_id"].as_str().unwrap().to_owned();
    let r = call(&fx, "file_delete", json!({"path": "scripts/a.lua"})).await.unwrap();
    assert!(r.contains(&a), "{r}");
    assert_eq!(ok(call(&fx, "lua_job_get", json!({"job_id": a})).await)["status"], "stopped");
    assert_eq!(ok(call(&fx, "lua_job_get", json!({"job_id": b})).await)["status"], "running");
    let r = call(&fx, "file_move", json!({"from": "scripts", "to": "old"})).await.unwrap();
    assert!(r.contains(&b), "{r}");
    assert_eq!(ok(call(&fx, "lua_job_get", json!({"job_id": b})).await)["status"], "stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_running_jobs_are_interrupted_and_ended_ones_kept_with_logs() {
    let fx = Fixture::new(&[("lua.stop_grace_ms", "100")]);
    let done = ok(
        call(&fx, "lua_run_async", json!({"code": "print('one') sleep(0) print('two') return {x = 1}"})).await
    )["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_status(&fx, &done, "done").await;
    let running = ok(call(&fx, "lua_run_async", json!({"code": "while sleep(5) do end"})).await)["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A torn last line, as a crash in the middle of an append leaves.
    let journal = fx.root().join(super::jobs::JOURNAL);
    std::fs::OpenOptions::new().append(true).open(&journal).unwrap().write_all(b"{\"ev\":\"end\",\"id\":").unwrap();
    // A second toolbox on the same workspace is what the next process sees.
    let again = crate::app::Tools::load(&fx.cfg, &fx.http);
    let v: Value = serde_json::from_str(&again.lua.jobs.list(fx.root())).unwrap();
    let status = |id: &str| v["jobs"].as_array().unwrap().iter().find(|j| j["job_id"] == id).unwrap()["status"].clone();
    assert_eq!(status(&running), "interrupted", "{v}");
    assert_eq!(status(&done), "done", "{v}");
    let d: Value = serde_json::from_str(&again.lua.jobs.get(fx.root(), &done, 0).unwrap()).unwrap();
    assert_eq!(d["result"], json!({"x": 1}));
    assert_eq!(d["logs"], json!([{"seq": 1, "line": "one"}, {"seq": 2, "line": "two"}]));
    call(&fx, "lua_job_stop", json!({"job_id": running})).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_a_stop_every_running_job_is_stopped_and_ended_before_the_call_returns() {
    let fx = Fixture::new(&[("lua.max_instructions", "1000000000")]);
    let start = |code: &str| json!({ "code": code });
    let id = |v: Value| v["job_id"].as_str().unwrap().to_owned();
    let polite = id(ok(call(&fx, "lua_run_async", start("while sleep(5) do end")).await));
    let stubborn = id(ok(call(&fx, "lua_run_async", start("while true do end")).await));
    let lua = std::sync::Arc::clone(&fx.tools.lua);
    let stopped = tokio::task::spawn_blocking(move || lua.stop_jobs(Duration::from_millis(200))).await.unwrap();
    assert_eq!(stopped, [polite.clone(), stubborn.clone()]);
    // Ended when the call returned, not some time later: nothing is left running.
    for job in [&polite, &stubborn] {
        let v = ok(call(&fx, "lua_job_get", json!({"job_id": job})).await);
        assert_eq!(v["status"], "stopped", "{v}");
    }
}

use std::io::Write as _;
