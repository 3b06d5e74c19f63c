//! The console's tabs as API calls: remembered entries, typed-as-you-go config checks, the
//! setup form's test call, the job actions and tool steps in a reloaded session, each with the
//! abuse a browser or a stranger could try.

use chela_core::memory::MAX_ENTRY_BYTES;
use chela_testkit::Step;
use hyper::StatusCode;
use serde_json::{Value, json};

use super::tests::{harness, harness_with_settings, req};

fn error_of(v: &Value) -> &str {
    v["error"].as_str().unwrap_or_else(|| panic!("no error sentence in {v}"))
}

fn store(h: &super::tests::Harness, facts: &[(&str, u64)]) {
    crate::memory::update_entries(h.daemon.workspace(), |e| {
        for (fact, at) in facts {
            e.store(fact, &["t".to_owned()], "test", *at).unwrap();
        }
        Ok::<_, std::io::Error>(())
    })
    .unwrap();
}

fn entries_file(h: &super::tests::Harness) -> String {
    std::fs::read_to_string(crate::memory::entries_path(h.daemon.workspace())).unwrap_or_default()
}

#[tokio::test]
async fn remembered_entries_are_paged_searched_edited_and_forgotten() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (status, empty) = h.get("/api/memory/entries").await;
    assert_eq!((status, empty["total"].clone(), empty["entries"].clone()), (StatusCode::OK, json!(0), json!([])));
    store(&h, &[("Ana drinks her coffee black", 100), ("The dog is called Pip", 200), ("Ana lives in Lyon", 300)]);

    let (status, page) = h.get("/api/memory/entries").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let contents: Vec<&str> =
        page["entries"].as_array().unwrap().iter().map(|e| e["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["Ana lives in Lyon", "The dog is called Pip", "Ana drinks her coffee black"], "newest first");

    let (_, found) = h.send("POST", "/api/memory/entries/search", r#"{"query":"coffee"}"#).await;
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["entries"][0]["content"], "Ana drinks her coffee black");
    let id = found["entries"][0]["id"].as_str().unwrap().to_owned();
    // Pages are bounded whatever is asked.
    let (_, paged) = h.send("POST", "/api/memory/entries/search", r#"{"offset":1,"limit":100000}"#).await;
    assert_eq!((paged["limit"].clone(), paged["entries"].as_array().unwrap().len()), (json!(100), 2), "{paged}");
    let (_, one) = h.send("POST", "/api/memory/entries/search", r#"{"limit":1}"#).await;
    assert_eq!((one["total"].clone(), one["entries"].as_array().unwrap().len()), (json!(3), 1));

    let (status, edited) =
        h.send("PUT", &format!("/api/memory/entries/{id}"), r#"{"content":"Ana drinks oat flat whites"}"#).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["content"], "Ana drinks oat flat whites");
    assert!(entries_file(&h).contains("oat flat whites") && !entries_file(&h).contains("coffee black"));
    let too_long = json!({"content": "x".repeat(MAX_ENTRY_BYTES + 1)}).to_string();
    let (status, e) = h.send("PUT", &format!("/api/memory/entries/{id}"), &too_long).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");

    let (status, gone) = h.send("DELETE", &format!("/api/memory/entries/{id}"), "").await;
    assert_eq!((status, gone["forgotten"].clone()), (StatusCode::OK, json!(true)), "{gone}");
    assert!(!entries_file(&h).contains("oat flat whites"));
    let (status, e) = h.send("DELETE", &format!("/api/memory/entries/{id}"), "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{e}");
    assert!(error_of(&e).contains(&id), "{e}");
    // Ids are what the entries file holds, nothing that could name a path.
    for bad in ["..%2fSOUL.md", "m1x", "x1", "m"] {
        let (status, e) = h.send("DELETE", &format!("/api/memory/entries/{bad}"), "").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {e}");
    }
    let (status, _) = h.send("POST", "/api/memory/entries/search", r#"{"query":"x","admin":true}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_entry_routes_need_the_token() {
    let h = harness(vec![], "0.0.0.0:18789", Some("the-right-token"));
    store(&h, &[("a secret fact", 1)]);
    for (method, path, body) in [
        ("GET", "/api/memory/entries", ""),
        ("POST", "/api/memory/entries/search", "{}"),
        ("PUT", "/api/memory/entries/m1", r#"{"content":"overwritten"}"#),
        ("DELETE", "/api/memory/entries/m1", ""),
        ("POST", "/api/scheduler/jobs/delete", r#"{"id":"x"}"#),
        ("POST", "/api/config/check", r#"{"key":"llm.model"}"#),
        ("POST", "/api/setup/test", r#"{"provider":"openai"}"#),
    ] {
        let (status, _, body) = h.call(req(method, path, body)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert!(!body.contains("a secret fact"), "{body}");
    }
    assert!(entries_file(&h).contains("a secret fact"), "nothing changed");
}

#[tokio::test]
async fn config_keys_come_with_their_help_and_are_checked_as_typed() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (_, list) = h.get("/api/config").await;
    let model = list.as_array().unwrap().iter().find(|e| e["key"] == "llm.model").unwrap();
    assert_eq!(model["section"], "llm");
    assert!(model["help"].as_str().is_some_and(|h| h.len() > 10), "{model}");

    let (status, c) = h.send("POST", "/api/config/check", r#"{"key":"llm.modle","value":"x"}"#).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((c["ok"].clone(), c["suggestion"].clone()), (json!(false), json!("llm.model")), "{c}");
    assert!(!error_of(&c).contains("llm.provider"), "one suggestion, not every key: {c}");

    let (_, c) = h.send("POST", "/api/config/check", r#"{"key":"llm.base_url","value":"http://127.0.0.1:"}"#).await;
    assert_eq!(c["ok"], false, "{c}");
    assert!(error_of(&c).contains("llm.base_url"), "{c}");
    let (_, c) = h.send("POST", "/api/config/check", r#"{"key":"llm.max_tokens","value":"-5"}"#).await;
    assert_eq!(c["ok"], false, "{c}");
    let (_, c) = h.send("POST", "/api/config/check", r#"{"key":"llm.max_tokens","value":"2048"}"#).await;
    assert_eq!((c["ok"].clone(), c["value"].clone()), (json!(true), json!("2048")), "{c}");
    assert!(c["key"]["help"].as_str().unwrap().len() > 10, "{c}");
    // A secret typed into the box is never echoed back.
    let (_, c) = h.send("POST", "/api/config/check", r#"{"key":"llm.api_key","value":"sk-typed-secret"}"#).await;
    assert!(c["ok"] == true && !c.to_string().contains("sk-typed-secret"), "{c}");
    // Nothing was stored by checking.
    let stored = std::fs::read_to_string(h.daemon.workspace().overrides_path()).unwrap();
    assert!(!stored.contains("2048") && !stored.contains("sk-typed-secret"), "{stored}");
}

#[tokio::test]
async fn the_setup_test_asks_the_provider_once_and_stores_nothing() {
    let h = harness_with_settings(vec![Step::text("ready")], &[("llm.provider", "anthropic")]);
    let form = json!({
        "provider": "anthropic", "base_url": h.llm.anthropic_base_url(), "model": "m-tested", "api_key": "sk-from-the-form",
    });
    let (status, answer) = h.send("POST", "/api/setup/test", &form.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!((answer["answer"].clone(), answer["model"].clone()), (json!("ready"), json!("m-tested")), "{answer}");
    assert!(!answer.to_string().contains("sk-from-the-form"));
    let asked = h.llm.requests();
    assert_eq!(asked.len(), 1, "one tiny request");
    assert_eq!(asked[0].header("x-api-key"), Some("sk-from-the-form"));
    let stored = std::fs::read_to_string(h.daemon.workspace().overrides_path()).unwrap_or_default();
    assert!(!stored.contains("m-tested") && !stored.contains("sk-from-the-form"), "tested, not saved: {stored}");

    // A provider that is not there: the refusal is explained, and nothing is stored either.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let form = json!({"provider": "openai", "base_url": format!("http://{closed}/v1"), "model": "m", "api_key": "k"});
    let (status, e) = h.send("POST", "/api/setup/test", &form.to_string()).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{e}");
    assert!(error_of(&e).contains(&closed.to_string()), "{e}");
    let (status, e) = h.send("POST", "/api/setup/test", r#"{"provider":"nobody"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    assert!(error_of(&e).contains("llm.provider"), "{e}");
    assert_eq!(h.get("/api/setup").await.1["defaults"]["openai"]["base_url"], "https://api.openai.com/v1");
}

#[tokio::test]
async fn the_setup_test_does_not_send_the_stored_key_to_a_new_host_unasked() {
    let h = harness(vec![Step::text("ready")], "127.0.0.1:18789", None);
    let other = chela_testkit::FakeLlm::start(vec![Step::text("other host")]);
    let form = json!({"provider": "anthropic", "base_url": other.anthropic_base_url(), "model": "m"});
    let (status, e) = h.send("POST", "/api/setup/test", &form.to_string()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{e}");
    assert!(other.requests().is_empty(), "the stored key went nowhere");
    let mut keep = form.clone();
    keep["keep_key"] = json!(true);
    let (status, ok) = h.send("POST", "/api/setup/test", &keep.to_string()).await;
    assert_eq!((status, ok["answer"].clone()), (StatusCode::OK, json!("other host")), "{ok}");
    assert_eq!(other.requests()[0].header("x-api-key"), Some("test-key"));
}

#[tokio::test]
async fn jobs_read_in_words_and_are_paused_resumed_run_and_deleted() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let s = h.daemon.scheduler();
    let now = h.daemon.clock().unix_secs();
    let job: chela_core::schedule::Job =
        serde_json::from_value(json!({"id": "standup", "name": "<img src=x onerror=alert(1)>",
        "trigger": {"type": "cron", "expr": "0 16 * * 1-5", "tz": "Europe/Paris"},
        "action": {"type": "agent", "message": "standup", "channel": "api", "chat_id": "me"}}))
        .unwrap();
    s.upsert(job, now).unwrap();
    let (_, list) = h.get("/api/scheduler/jobs").await;
    assert_eq!(list["jobs"][0]["when"], "every weekday at 16:00 Europe/Paris", "{list}");

    let act = |what: &'static str, id: &'static str| {
        let h = &h;
        async move { h.send("POST", &format!("/api/scheduler/jobs/{what}"), &json!({"id": id}).to_string()).await }
    };
    assert_eq!(act("pause", "standup").await.0, StatusCode::OK);
    assert!(s.get("standup", now).unwrap().job.paused);
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(h.daemon.workspace().root().join("cron.json")).unwrap()).unwrap();
    assert_eq!(file["jobs"][0]["paused"], true, "stored, as `chela cron pause` does: {file}");
    assert_eq!(act("resume", "standup").await.0, StatusCode::OK);
    assert!(!s.get("standup", now).unwrap().job.paused);
    let (status, run) = act("run", "standup").await;
    assert_eq!((status, run["done"].clone()), (StatusCode::OK, json!("started")), "{run}");
    let (status, e) = act("run", "nobody").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{e}");
    assert_eq!(act("explode", "standup").await.0, StatusCode::NOT_FOUND);
    assert_eq!(act("delete", "standup").await.0, StatusCode::OK);
    assert!(s.get("standup", now).is_none());
    assert_eq!(h.get("/api/scheduler/jobs").await.1["jobs"], json!([]));
}

#[tokio::test]
async fn a_reloaded_session_marks_tool_steps_instead_of_showing_empty_messages() {
    let h = harness(
        vec![Step::tool_call("get_current_time", json!({})), Step::text("It is late.")],
        "127.0.0.1:18789",
        None,
    );
    let ask = json!({"user": "t", "messages": [{"role": "user", "content": "what time is it"}]}).to_string();
    assert_eq!(h.send("POST", "/v1/chat/completions", &ask).await.0, StatusCode::OK);
    let (_, view) = h.get("/api/sessions/api_t").await;
    let m = view["messages"].as_array().unwrap();
    assert_eq!(m.len(), 4, "{view}");
    assert_eq!(m[1]["tools"], json!([{"name": "get_current_time", "ok": true}]), "{view}");
    assert_eq!(
        (m[2]["role"].clone(), m[2]["text"].clone(), m[2]["tool_results"].clone()),
        (json!("user"), json!(""), json!(1))
    );
    assert_eq!(m[3]["text"], "It is late.");
}

#[tokio::test]
async fn the_user_file_says_who_writes_it_and_where_learnt_facts_go() {
    // No tool writes USER.md: the memory tools keep what the model learns as entries, which the
    // Memory tab lists. The file must not promise otherwise.
    let h = harness(vec![], "127.0.0.1:18789", None);
    crate::memory::ensure_defaults(h.daemon.workspace()).unwrap();
    let (status, user) = h.get("/api/memory/USER.md").await;
    assert_eq!(status, StatusCode::OK, "{user}");
    let text = user["content"].as_str().unwrap();
    assert!(!text.contains("fills this in"), "{text}");
    assert!(text.contains("does not write it") && text.contains("Memory tab"), "{text}");
    let tools = h.daemon.toolbox().registry().in_group("memory").map(|c| c.id.to_string()).collect::<Vec<_>>();
    assert!(tools.contains(&"memory_store".to_owned()), "{tools:?}");
}

#[tokio::test]
async fn a_memory_search_ranks_through_the_index_and_finds_note_passages() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    store(&h, &[("The needle is a green kiwi", 100), ("Green tea every morning", 200)]);
    let ws = h.daemon.workspace();
    std::fs::write(ws.root().join("memory/2024-07-14.md"), "# 2024-07-14\n\n- 18:00 Planted the kiwi vine\n").unwrap();
    // The index's ranking: a misspelled word is corrected, as memory_recall corrects it.
    let (status, found) = h.send("POST", "/api/memory/entries/search", r#"{"query":"kiwii"}"#).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(
        (found["total"].clone(), found["entries"][0]["content"].clone()),
        (json!(1), json!("The needle is a green kiwi"))
    );
    assert_eq!(found["entries"][0]["tags"], json!(["t"]), "the entry as the file holds it");
    assert_eq!(
        found["notes"],
        json!([{"path": "memory/2024-07-14.md", "first": 3, "last": 3, "snippet": "- 18:00 Planted the kiwi vine"}])
    );
    // No query: the newest entries, no notes.
    let (_, all) = h.get("/api/memory/entries").await;
    assert_eq!((all["total"].clone(), all["notes"].clone()), (json!(2), json!([])));
    // A query of thousands of words is cut, and answered.
    let long = json!({"query": "kiwi ".repeat(5_000)}).to_string();
    let (status, cut) = h.send("POST", "/api/memory/entries/search", &long).await;
    assert_eq!((status, cut["total"].clone()), (StatusCode::OK, json!(1)), "{cut}");
}
