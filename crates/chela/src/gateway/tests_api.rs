//! The dashboard's API as a service: every endpoint, its effect on the running daemon and on
//! the files, and the names that must not lead anywhere.

use chela_testkit::Step;
use hyper::StatusCode;
use serde_json::{Value, json};

use super::tests::{harness, harness_with_settings};
use crate::daemon::{Incoming, Submitted};
use crate::turn::Cancel;

fn error_of(v: &Value) -> &str {
    v["error"].as_str().unwrap_or_else(|| panic!("no error sentence in {v}"))
}

#[cfg(feature = "files")]
#[tokio::test]
async fn a_group_switched_on_the_dashboard_applies_now_and_is_stored_like_chela_cap() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (status, list) = h.get("/api/cap/groups").await;
    assert_eq!(status, StatusCode::OK);
    let files = list.as_array().unwrap().iter().find(|g| g["group_id"] == "files").unwrap();
    assert_eq!(files["runtime_enabled"], true);
    assert!(files["tools"].as_array().unwrap().contains(&json!("file_read")), "{files}");
    let core = list.as_array().unwrap().iter().find(|g| g["is_core"] == true).expect("a core group");

    let (status, g) = h.send("POST", "/api/cap/groups/runtime", r#"{"group_id":"files","enabled":false}"#).await;
    assert_eq!(status, StatusCode::OK, "{g}");
    assert_eq!(g["runtime_enabled"], false);
    assert!(!h.daemon.toolbox().registry().group("files").unwrap().enabled, "the running daemon took it");
    let stored = std::fs::read_to_string(h.daemon.workspace().overrides_path()).unwrap();
    assert!(stored.contains("disabled = [\"files\"]"), "{stored}");

    let (status, g) = h.send("POST", "/api/cap/groups/visibility", r#"{"group_id":"files","visible":false}"#).await;
    assert_eq!(status, StatusCode::OK, "{g}");
    assert_eq!(g["llm_visible"], false);
    assert!(!h.daemon.toolbox().registry().group("files").unwrap().visible);

    let body = json!({"group_id": core["group_id"], "enabled": false}).to_string();
    let (status, e) = h.send("POST", "/api/cap/groups/runtime", &body).await;
    assert_eq!(status, StatusCode::CONFLICT, "{e}");
    assert!(error_of(&e).contains("Core groups are always on"), "{e}");
    let (status, e) = h.send("POST", "/api/cap/groups/runtime", r#"{"group_id":"nope","enabled":true}"#).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{e}");
    let (status, e) = h.send("POST", "/api/cap/groups/runtime", r#"{"group":"files"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_of(&e).contains("group_id"), "{e}");
}

#[tokio::test]
async fn config_is_shown_masked_with_its_source_and_set_into_the_runtime_layer() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (status, list) = h.get("/api/config").await;
    assert_eq!(status, StatusCode::OK);
    let text = list.to_string();
    assert!(!text.contains("test-key"), "the key is masked: {text}");
    let key = list.as_array().unwrap().iter().find(|e| e["key"] == "llm.api_key").unwrap();
    assert_eq!((key["secret"].clone(), key["source"].clone()), (json!(true), json!("runtime (overrides.toml)")));
    let listen = list.as_array().unwrap().iter().find(|e| e["key"] == "gateway.listen").unwrap();
    assert_eq!((listen["value"].clone(), listen["source"].clone()), (json!("127.0.0.1:18789"), json!("default")));

    let (status, set) = h.send("POST", "/api/config", r#"{"key":"llm.model","value":"model-from-dashboard"}"#).await;
    assert_eq!(status, StatusCode::OK, "{set}");
    assert_eq!(set, json!({"key": "llm.model", "value": "model-from-dashboard", "restart_needed": false}));
    assert_eq!(h.daemon.config().get(chela_core::config::LLM_MODEL), "model-from-dashboard", "applied live");
    let (_, set) = h.send("POST", "/api/config", r#"{"key":"gateway.listen","value":"127.0.0.1:9999"}"#).await;
    assert_eq!(set["restart_needed"], true);
    let (_, set) =
        h.send("POST", "/api/config", r#"{"key":"channels.telegram.token","value":"123456:secret-bot-token"}"#).await;
    assert!(!set.to_string().contains("secret-bot-token"), "{set}");
    assert_eq!(set["restart_needed"], true);
    // What the daemon asks per message applies at once, as `chela config set` says too.
    for (key, value) in [("channels.telegram.allow_from", "42"), ("channels.telegram.stream_edits", "false")] {
        let body = json!({"key": key, "value": value}).to_string();
        let (status, set) = h.send("POST", "/api/config", &body).await;
        assert_eq!((status, set["restart_needed"].clone()), (StatusCode::OK, json!(false)), "{key}: {set}");
    }

    let (status, e) = h.send("POST", "/api/config", r#"{"key":"llm.modle","value":"x"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_of(&e).contains("llm.model"), "a suggestion: {e}");
    let (status, e) = h.send("POST", "/api/config", r#"{"key":"gateway.listen","value":"everywhere"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_of(&e).contains("IP address and port"), "{e}");
}

#[tokio::test]
async fn sessions_are_listed_viewed_and_cleared_into_the_archive() {
    let h = harness(vec![Step::text("noted")], "127.0.0.1:18789", None);
    let ask = json!({"user": "notes", "messages": [{"role": "user", "content": "remember milk"}]}).to_string();
    assert_eq!(h.send("POST", "/v1/chat/completions", &ask).await.0, StatusCode::OK);
    let (status, list) = h.get("/api/sessions").await;
    assert_eq!(status, StatusCode::OK);
    let s = &list[0];
    assert_eq!(
        (s["id"].clone(), s["channel"].clone(), s["chat_id"].clone()),
        (json!("api_notes"), json!("api"), json!("notes"))
    );
    assert!(s["bytes"].as_u64().unwrap() > 0 && s["modified"].as_u64().unwrap() > 0, "{s}");

    let (status, view) = h.get("/api/sessions/api_notes").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        view["messages"],
        json!([{"role": "user", "text": "remember milk"}, {"role": "assistant", "text": "noted"}])
    );

    let (status, cleared) = h.send("DELETE", "/api/sessions/api_notes", "").await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    let ws = h.daemon.workspace();
    assert!(!ws.session_path("api", "notes").exists());
    assert_eq!(std::fs::read_dir(ws.sessions_dir().join("archive")).unwrap().count(), 1);
    assert_eq!(h.get("/api/sessions").await.1, json!([]));
    assert_eq!(h.get("/api/sessions/api_notes").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn memory_files_are_read_and_written_atomically_and_only_the_known_ones() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let (status, list) = h.get("/api/memory").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"SOUL.md") && names.contains(&"USER.md"), "{names:?}");

    let (status, soul) = h.get("/api/memory/SOUL.md").await;
    assert_eq!(status, StatusCode::OK);
    let on_disk = std::fs::read_to_string(h.daemon.workspace().root().join("SOUL.md")).unwrap();
    assert_eq!(soul["content"], on_disk.as_str());

    let (status, put) = h.send("PUT", "/api/memory/USER.md", r#"{"content":"Name: Ada\n"}"#).await;
    assert_eq!(status, StatusCode::OK, "{put}");
    assert_eq!(std::fs::read_to_string(h.daemon.workspace().root().join("USER.md")).unwrap(), "Name: Ada\n");
    let (status, _) = h.send("PUT", "/api/memory/2026-01-02.md", r#"{"content":"a day"}"#).await;
    assert_eq!(status, StatusCode::OK);
    let daily = crate::memory::memory_dir(h.daemon.workspace()).join("2026-01-02.md");
    assert_eq!(std::fs::read_to_string(daily).unwrap(), "a day");
    assert!(h.get("/api/memory").await.1.to_string().contains("2026-01-02.md"));
    // Made with the other files, with the comment that explains its format.
    let (status, beat) = h.get("/api/memory/HEARTBEAT.md").await;
    assert_eq!(status, StatusCode::OK);
    assert!(beat["content"].as_str().unwrap().contains("heartbeat.interval"), "{beat}");
}

#[tokio::test]
async fn pairing_requests_are_listed_approved_and_revoked() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let stranger = Incoming {
        channel: "telegram".into(),
        chat_id: "77".into(),
        sender: "77".into(),
        user: chela_proto::chat::Message::user_text("hello?"),
        cancel: Cancel::default(),
    };
    let quiet = Box::new(crate::turn::Quiet);
    assert!(matches!(h.daemon.submit(stranger, quiet), Submitted::Answer(_)), "a code was offered");
    let (status, listing) = h.get("/api/pairing").await;
    assert_eq!(status, StatusCode::OK);
    let pending = &listing["pending"][0];
    assert_eq!((pending["channel"].clone(), pending["sender"].clone()), (json!("telegram"), json!("77")));
    let code = pending["code"].as_str().unwrap().to_owned();
    assert!(pending["expires_at"].as_u64().unwrap() > 0);

    let (status, e) = h.send("POST", "/api/pairing/approve", r#"{"code":"not a code"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    let (status, ok) = h.send("POST", "/api/pairing/approve", &json!({"code": code}).to_string()).await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    assert_eq!(h.get("/api/pairing").await.1["allowed"][0]["sender"], "77");
    let (status, e) = h.send("POST", "/api/pairing/approve", &json!({"code": code}).to_string()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a code is used once: {e}");
    let (status, _) = h.send("POST", "/api/pairing/revoke", r#"{"channel":"telegram","sender":"77"}"#).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(h.get("/api/pairing").await.1["allowed"], json!([]));
    let (status, _) = h.send("POST", "/api/pairing/deny", r#"{"code":"ABCDEFGH"}"#).await;
    assert!(status == StatusCode::NOT_FOUND || status == StatusCode::BAD_REQUEST, "{status}");
}

#[tokio::test]
async fn the_console_clears_a_queue_strangers_filled() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    for who in ["1", "2", "3"] {
        let stranger = Incoming {
            channel: "telegram".into(),
            chat_id: who.into(),
            sender: who.into(),
            user: chela_proto::chat::Message::user_text("let me in"),
            cancel: Cancel::default(),
        };
        h.daemon.submit(stranger, Box::new(crate::turn::Quiet));
    }
    assert_eq!(h.get("/api/pairing").await.1["pending"].as_array().unwrap().len(), 3);
    let (status, e) = h.send("POST", "/api/pairing/clear", r#"{"channel":"telegram","extra":1}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    let (status, cleared) = h.send("POST", "/api/pairing/clear", "{}").await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    assert_eq!(cleared["denied"].as_array().unwrap().len(), 3, "{cleared}");
    assert_eq!(h.get("/api/pairing").await.1["pending"], json!([]));
}

#[tokio::test]
async fn the_setup_form_configures_a_daemon_that_has_no_model_without_a_restart() {
    let h = harness_with_settings(vec![Step::text("set up and answering")], &[("llm.provider", "anthropic")]);
    if h.daemon.app().is_ok() {
        return; // ANTHROPIC_API_KEY is set in this environment: there is nothing to set up.
    }
    let (status, state) = h.get("/api/setup").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(state["needs_setup"], true);
    assert_eq!(state["provider"], "anthropic");

    let (status, e) = h.send("POST", "/api/setup", r#"{"provider":"nobody","api_key":"k"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_of(&e).contains("llm.provider"), "{e}");
    assert!(
        !h.daemon.workspace().overrides_path().exists()
            || !std::fs::read_to_string(h.daemon.workspace().overrides_path()).unwrap().contains("nobody")
    );

    let form = json!({
        "provider": "anthropic", "base_url": h.llm.anthropic_base_url(), "model": "m1",
        "api_key": "sk-from-the-form", "telegram_token": "",
    });
    let (status, state) = h.send("POST", "/api/setup", &form.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{state}");
    assert_eq!(state["needs_setup"], false, "{state}");
    assert_eq!(state["model"], "m1");
    assert!(!state.to_string().contains("sk-from-the-form"));
    let ask = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    let (status, reply) = h.send("POST", "/v1/chat/completions", &ask).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], "set up and answering");
}

#[tokio::test]
async fn jobs_are_listed_with_next_fire_times_and_an_unreachable_chat_is_reported() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let s = h.daemon.scheduler();
    let now = h.daemon.clock().unix_secs();
    let job = |id: &str, chat: &str| -> chela_core::schedule::Job {
        serde_json::from_value(json!({"id": id, "trigger": {"type": "interval", "every_s": 3600},
            "action": {"type": "agent", "message": "hi", "channel": "telegram", "chat_id": chat}}))
        .unwrap()
    };
    s.upsert(job("hourly", "77"), now).unwrap();
    std::fs::write(
        h.daemon.workspace().root().join("cron.json"),
        std::fs::read_to_string(h.daemon.workspace().root().join("cron.json"))
            .unwrap()
            .replace("]}", ",\n  {\"id\": 5}\n]}"),
    )
    .unwrap();
    let (status, list) = h.get("/api/scheduler/jobs").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let first = &list["jobs"][0];
    assert_eq!(first["id"], "hourly");
    let next = first["next_fire"].as_i64().unwrap();
    assert!(next > now && next <= now + 3600, "{first}");
    assert!(first["next_fire_local"].as_str().unwrap().starts_with("20"), "{first}");
    assert!(list["problems"][0].as_str().unwrap().starts_with("cron.json line 4: job 2"), "{list}");

    // Telegram is not running in this daemon: the run is reported, not dropped in silence.
    let task = tokio::spawn(crate::jobs::scheduler::serve(std::sync::Arc::clone(&h.daemon)));
    s.trigger("hourly").unwrap();
    let mut status = None;
    for _ in 0..500 {
        status = s.get("hourly", now).and_then(|v| v.status);
        if status.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let status = status.expect("the job's outcome was noted");
    assert!(status.contains("not run") && status.contains("telegram channel is not running"), "{status}");
    h.daemon.shutdown().trigger();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_heartbeat_gives_the_open_items_to_the_model_inside_the_active_hours_only() {
    use crate::jobs::scheduler::beat;
    let h = harness(vec![Step::text("watered them")], "127.0.0.1:18789", None);
    let ws = h.daemon.workspace();
    let now = h.daemon.clock().unix_secs();
    std::fs::write(ws.root().join("HEARTBEAT.md"), "# Tasks\n\n- [x] feed the cat\n").unwrap();
    assert_eq!(beat(&h.daemon, now, false).await.unwrap(), "HEARTBEAT.md has no open items");
    assert!(h.llm.requests().is_empty());

    std::fs::write(ws.root().join("HEARTBEAT.md"), "# Tasks\n\n- [x] feed the cat\n- [ ] water the plants\n").unwrap();
    // A window that ends an hour before now, in UTC: outside.
    let hour = now.rem_euclid(86_400) / 3600;
    let window = format!("{:02}:00-{:02}:00", (hour + 2) % 24, (hour + 23) % 24);
    crate::config::set_override(ws, "scheduler.timezone", "UTC").unwrap();
    crate::config::set_override(ws, "heartbeat.active_hours", &window).unwrap();
    assert!(h.daemon.reload().unwrap());
    assert!(beat(&h.daemon, now, false).await.unwrap().contains("outside heartbeat.active_hours"));
    assert!(h.llm.requests().is_empty());

    // `chela heartbeat trigger` runs one outside the hours too.
    let said = beat(&h.daemon, now, true).await.unwrap();
    assert!(said.starts_with("1 items;") && said.contains("watered them"), "{said}");
    let asked = String::from_utf8_lossy(&h.llm.requests()[0].body).into_owned();
    assert!(asked.contains("water the plants") && !asked.contains("feed the cat"), "{asked}");
}

#[tokio::test]
async fn the_console_shows_a_job_the_assistant_made_for_another_chat_as_waiting_and_approves_it() {
    let h = harness(vec![], "127.0.0.1:18789", None);
    let s = h.daemon.scheduler();
    let now = h.daemon.clock().unix_secs();
    let job: chela_core::schedule::Job = serde_json::from_value(json!({"id": "far",
        "trigger": {"type": "interval", "every_s": 3600},
        "action": {"type": "agent", "message": "hi", "channel": "telegram", "chat_id": "7"},
        "made_by": {"channel": "ws", "chat_id": "a"}}))
    .unwrap();
    s.upsert(job, now).unwrap();
    let (_, list) = h.get("/api/scheduler/jobs").await;
    assert_eq!(
        (list["jobs"][0]["pending"].clone(), list["jobs"][0]["made_by"]["chat_id"].clone()),
        (json!(true), json!("a"))
    );
    let (status, out) = h.send("POST", "/api/scheduler/jobs/approve", r#"{"id":"far"}"#).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (_, list) = h.get("/api/scheduler/jobs").await;
    assert_eq!(list["jobs"][0]["pending"], json!(false));
    assert_eq!(list["jobs"][0]["made_by"]["approved"], json!(true));
    let (status, e) = h.send("POST", "/api/scheduler/jobs/approve", r#"{"id":"nope"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
}

#[tokio::test]
async fn usage_shows_today_and_all_per_model_and_needs_the_token() {
    use chela_core::usage::Record;
    use chela_proto::chat::Usage;
    let h = harness(vec![], "0.0.0.0:18789", Some("the-right-token"));
    let ws = h.daemon.workspace();
    let u = Usage { input_tokens: 1000, output_tokens: 100, cache_read_tokens: 9000, cache_write_tokens: 0 };
    let now = h.daemon.clock().unix_secs_u64();
    chela_runtime::usage::append(ws, &Record::new(now - 3 * 86_400, "cli", "local", "claude-haiku-4-5", &u)).unwrap();
    chela_runtime::usage::append(ws, &Record::new(now, "telegram", "42", "claude-haiku-4-5", &u)).unwrap();
    let unauthenticated = h.call(super::tests::req("GET", "/api/usage", "")).await;
    assert_eq!(unauthenticated.0, StatusCode::UNAUTHORIZED, "{}", unauthenticated.2);
    assert!(!unauthenticated.2.contains("claude-haiku"), "nothing of the log without the token");
    let mut ok = super::tests::req("GET", "/api/usage", "");
    ok.headers_mut().insert("authorization", "Bearer the-right-token".parse().unwrap());
    let (status, _, body) = h.call(ok).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["today"]["turns"], 1, "{v}");
    assert_eq!(v["all"]["total"]["turns"], 2);
    assert_eq!(v["all"]["total"]["cache_read_tokens"], 18_000);
    assert_eq!(v["all"]["total"]["cached_percent"], 90);
    // 1,000 at $1, 9,000 read at $0.10, 100 out at $5 per million, twice.
    let cost = v["all"]["models"]["claude-haiku-4-5"]["estimated_cost_usd"].as_f64().unwrap();
    assert!((cost - 2.0 * (0.001 + 0.0009 + 0.0005)).abs() < 1e-12, "{cost}");
}

/// The console's Usage view: today and the last seven days per model and per chat, at most 20
/// chats listed (chat ids come from outside; the rest are summed), and where each price is from.
#[tokio::test]
async fn usage_gives_the_periods_per_model_and_per_chat_bounded_with_the_prices_source() {
    use chela_core::usage::Record;
    use chela_proto::chat::Usage;
    let h = harness_with_settings(vec![], &[]);
    let ws = h.daemon.workspace();
    // The person's price for their own model, in the hand-written file.
    let file = ws.root().join("chela.toml");
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    text.push_str("\n[llm.prices.my-model]\ninput = 2.0\noutput = 4.0\n");
    std::fs::write(&file, text).unwrap();
    h.daemon.reload().unwrap();
    let now = h.daemon.clock().unix_secs_u64();
    let u = |n: u64| Usage { input_tokens: n, output_tokens: 10, cache_read_tokens: 0, cache_write_tokens: 0 };
    // 25 chats today with growing use, one a stranger's hostile id; one turn three days ago.
    for i in 0..25u64 {
        let chat = if i == 24 { "<img src=x onerror=alert(1)>".to_owned() } else { format!("c{i}") };
        chela_runtime::usage::append(ws, &Record::new(now, "telegram", &chat, "claude-haiku-4-5", &u(1000 + i)))
            .unwrap();
    }
    chela_runtime::usage::append(ws, &Record::new(now - 3 * 86_400, "cli", "local", "my-model", &u(500))).unwrap();
    let (status, v) = h.send("GET", "/api/usage", "").await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (today, week) = (&v["periods"][0], &v["periods"][1]);
    assert_eq!((today["id"].as_str(), week["id"].as_str()), (Some("today"), Some("week")));
    assert_eq!(today["total"]["turns"], 25);
    assert_eq!(week["total"]["turns"], 26, "the older turn is in the week only");
    let chats = today["chats"].as_array().unwrap();
    assert_eq!(chats.len(), 20, "bounded");
    assert_eq!(chats[0]["chat"], "telegram:<img src=x onerror=alert(1)>", "the busiest first, as data");
    assert_eq!(today["other_chats"]["turns"], 5, "the rest summed");
    assert_eq!(today["models"][0]["model"], "claude-haiku-4-5");
    let prices = v["prices"].as_array().unwrap();
    let of = |m: &str| prices.iter().find(|p| p["model"] == m).unwrap().clone();
    assert_eq!(of("claude-haiku-4-5")["source"], "built-in");
    assert_eq!((of("my-model")["source"].as_str(), of("my-model")["input"].as_f64()), (Some("settings"), Some(2.0)));
    assert_eq!(v["today"], today["total"], "the older shape stays");
}
