//! Provider failures: each is told in one sentence on stderr, with exit 1 and nothing on
//! stdout; what is worth retrying is retried, as often and as late as it should be.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, Step};

use crate::{Out, Provider, Ws};

/// Checks the shape every failed one-shot chat has.
#[track_caller]
fn failed(out: &Out) -> &Out {
    out.expect_code(1);
    assert_eq!(out.stdout, "", "a failure prints nothing on stdout");
    out
}

/// The time between request `a` and request `b`.
fn gap(llm: &FakeLlm, a: usize, b: usize) -> Duration {
    let r = llm.requests();
    r[b].at.duration_since(r[a].at)
}

#[test]
fn a_rejected_key_says_how_to_set_one_and_is_not_retried() {
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![Step::status(401), Step::text("unused")]);
        let ws = Ws::for_llm(provider, &llm, "");
        let out = ws.chat("hi", &[]);
        failed(&out)
            .stderr_has("rejected the API key (HTTP 401)")
            .stderr_has("chela config set llm.api_key")
            .stderr_has(if provider == Provider::Anthropic { "ANTHROPIC_API_KEY" } else { "OPENAI_API_KEY" });
        assert_eq!(llm.requests().len(), 1, "{provider:?}: a 401 is not retried");
    }
}

#[test]
fn a_key_from_the_environment_is_named_when_rejected() {
    let llm = FakeLlm::start_with(chela_testkit::Options {
        expected_key: Some("the-right-key".into()),
        ..Default::default()
    });
    let mut ws = Ws::empty();
    ws.write_config(&format!("[llm]\nbase_url = \"{}\"\n", llm.anthropic_base_url()));
    ws.set_env("ANTHROPIC_API_KEY", "a-wrong-key");
    let out = ws.chat("hi", &[]);
    failed(&out).stderr_has("fix the ANTHROPIC_API_KEY environment variable, which is where this key came from");
    assert_eq!(llm.requests()[0].header("x-api-key"), Some("a-wrong-key"));
}

#[test]
fn rate_limit_retry_after_seconds_is_honoured() {
    let llm = FakeLlm::start(vec![Step::status(429).retry_after("1"), Step::text("Made it.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let out = ws.chat("hi", &[]);
    out.expect_ok();
    assert_eq!(out.stdout, "Made it.\n");
    assert_eq!(llm.requests().len(), 2);
    let waited = gap(&llm, 0, 1);
    assert!(waited >= Duration::from_millis(980), "retried after {waited:?}, before the server's retry-after of 1 s");
}

#[test]
fn retry_after_ms_is_honoured_and_wins_over_retry_after() {
    // 700 ms is longer than the computed first backoff (250..500 ms), so ignoring the header
    // would retry too early; the 5 s retry-after must lose to it, or the retry comes too late.
    let llm = FakeLlm::start(vec![Step::status(429).retry_after("5").retry_after_ms(700), Step::text("Made it.")]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
    ws.chat("hi", &[]).expect_ok().stdout_has("Made it.");
    let waited = gap(&llm, 0, 1);
    assert!(
        waited >= Duration::from_millis(690) && waited < Duration::from_secs(3),
        "retried after {waited:?}; retry-after-ms asked for 700 ms"
    );
}

#[test]
fn server_errors_are_retried_up_to_the_limit_then_explained() {
    let llm = FakeLlm::start(vec![Step::status(500), Step::status(500), Step::status(500), Step::text("unused")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "max_retries = 2");
    let out = ws.chat("hi", &[]);
    failed(&out).stderr_has("is unavailable (HTTP 500) after 2 retries; try again later.");
    assert_eq!(llm.requests().len(), 3, "one try and two retries");
    assert_eq!(llm.remaining(), 1);
    // Backoff: the second wait is drawn from a range twice as late as the first's.
    assert!(gap(&llm, 0, 1) >= Duration::from_millis(240), "{:?}", gap(&llm, 0, 1));
    assert!(gap(&llm, 1, 2) >= Duration::from_millis(490), "{:?}", gap(&llm, 1, 2));
}

#[test]
fn a_too_long_context_suggests_a_new_session() {
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![Step::context_too_long(), Step::text("unused")]);
        let ws = Ws::for_llm(provider, &llm, "");
        let out = ws.chat("hi", &[]);
        failed(&out).stderr_has("too long").stderr_has("`/new`").stderr_has("chela chat --new");
        assert_eq!(llm.requests().len(), 1, "{provider:?}: shrinking, not retrying, is the fix");
    }
}

#[test]
fn a_malformed_answer_is_reported_not_retried() {
    for provider in Provider::BOTH {
        for stream in [true, false] {
            let llm = FakeLlm::start(vec![Step::malformed(), Step::text("unused")]);
            let ws = Ws::for_llm(provider, &llm, if stream { "" } else { "stream = false" });
            let out = ws.chat("hi", &[]);
            failed(&out).stderr_has("sent a response Chela could not read");
            assert_eq!(llm.requests().len(), 1, "{provider:?} stream={stream}");
        }
    }
}

#[test]
fn a_stream_cut_before_any_text_is_retried_transparently() {
    for provider in Provider::BOTH {
        // One event: Anthropic's message_start, OpenAI's empty role delta. Nothing shown yet.
        let llm = FakeLlm::start(vec![Step::drop_after_events(1), Step::text("Recovered.")]);
        let ws = Ws::for_llm(provider, &llm, "");
        let out = ws.chat("hi", &[]);
        out.expect_ok();
        assert_eq!(out.stdout, "Recovered.\n", "{provider:?}: {}", out.stderr);
        assert_eq!(llm.requests().len(), 2, "{provider:?}");
        assert_eq!(ws.session("local").len(), 2);
    }
}

#[test]
fn a_stream_cut_after_text_is_reported_not_retried() {
    for (provider, events) in [(Provider::Anthropic, 4), (Provider::OpenAi, 2)] {
        // Anthropic: message_start, ping, block start, first text delta. OpenAI: role, text.
        let llm = FakeLlm::start(vec![Step::drop_after_events(events), Step::text("unused")]);
        let ws = Ws::for_llm(provider, &llm, "");
        let out = ws.chat("hi", &[]);
        failed(&out).stderr_has("broke off midway").stderr_has("send the message again");
        assert_eq!(llm.requests().len(), 1, "{provider:?}: a retry would repeat text already shown");
    }
}

#[test]
fn no_key_for_a_hosted_provider_stops_before_any_request() {
    for (provider, url, var) in [
        (Provider::Anthropic, "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        (Provider::OpenAi, "https://api.openai.com/v1", "OPENAI_API_KEY"),
    ] {
        // Any request would go through this "proxy", which records it.
        let trap = FakeLlm::start(vec![]);
        let ws = Ws::empty();
        ws.write_config(&format!(
            "[llm]\nprovider = \"{}\"\nbase_url = \"{url}\"\n[proxy]\nurl = \"http://{}\"\n",
            provider.name(),
            trap.addr()
        ));
        let started = Instant::now();
        let out = ws.chat("hi", &[]);
        assert_ne!(out.code(), Some(0), "{out:?}");
        assert_eq!(out.stdout, "");
        out.stderr_has("No API key is configured").stderr_has("chela config set llm.api_key").stderr_has(var);
        assert!(trap.requests().is_empty(), "{provider:?}: a request was made: {:?}", trap.requests());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(!ws.session_path("local").exists());
    }
}

// A refused connection used to be retried (5.7 s before the person heard anything);
// nothing listening is not transient, so it is said at once. Transient failures keep their
// retries (the next test).
#[test]
fn an_unreachable_provider_fails_at_once_naming_the_url() {
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ws = Ws::empty();
    ws.write_config(&format!("[llm]\nbase_url = \"http://127.0.0.1:{port}\"\nmax_retries = 4\n"));
    let started = Instant::now();
    let out = ws.run(&["-v", "chat", "-m", "hi"]);
    let took = started.elapsed();
    failed(&out)
        .stderr_has(&format!("Could not reach anthropic (http://127.0.0.1:{port}): "))
        .stderr_has("connection refused");
    assert!(!out.stderr.contains("retr"), "no retry, no retry count: {}", out.stderr);
    assert!(took < Duration::from_secs(2), "took {took:?}; the old retries took 5.7 s");
}

#[test]
fn a_name_that_does_not_resolve_fails_at_once() {
    // `.invalid` never resolves (RFC 6761). The resolver options bound the lookup even where no
    // resolver answers, so the test cannot hang on outside DNS.
    let mut ws = Ws::empty();
    ws.write_config(
        "[llm]\nbase_url = \"http://no-such-host.invalid\"\napi_key = \"k\"\nmax_retries = 4\ntimeout_secs = 3\n",
    );
    ws.set_env("RES_OPTIONS", "timeout:1 attempts:1");
    let started = Instant::now();
    let out = ws.chat("hi", &[]);
    let took = started.elapsed();
    failed(&out).stderr_has("Could not reach anthropic (http://no-such-host.invalid)");
    assert!(!out.stderr.contains("retr"), "no retry, no retry count: {}", out.stderr);
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn transient_failures_keep_their_retries_and_log_them() {
    let llm = FakeLlm::start(vec![Step::status(503), Step::drop_after_events(1), Step::text("Made it.")]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
    let out = ws.run(&["-v", "chat", "-m", "hi"]);
    out.expect_ok().stdout_has("Made it.").stderr_has("retry 1 in").stderr_has("retry 2 in");
    assert_eq!(llm.requests().len(), 3);
}

/// A first exchange long enough that halving a 4 KiB budget must drop it.
fn long_first_exchange(provider: Provider, llm: &FakeLlm) -> Ws {
    let ws = Ws::for_llm(provider, llm, "[agent]\nhistory_budget = 4096");
    ws.chat(&"x".repeat(2500), &[]).expect_ok();
    ws
}

#[test]
fn a_too_long_context_is_shrunk_and_asked_again_once() {
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![Step::text("First."), Step::context_too_long(), Step::text("Second.")]);
        let ws = long_first_exchange(provider, &llm);
        let out = ws.chat("And now?", &[]);
        out.expect_ok();
        assert_eq!(out.stdout, "Second.\n", "{provider:?}: {}", out.stderr);
        let reqs = llm.requests();
        assert_eq!(reqs.len(), 3, "{provider:?}");
        assert!(reqs[2].body.len() + 2000 < reqs[1].body.len(), "{provider:?}: the second ask is smaller");
        let said: Vec<String> =
            crate::conversation(provider, &crate::body(&llm, 2)).iter().map(crate::text_of).collect();
        assert_eq!(said, ["And now?"], "{provider:?}: the older exchange was left out, the turn kept");
        // Left out of the request, not out of the record.
        assert_eq!(ws.session("local").len(), 4);
    }
}

#[test]
fn a_context_still_too_long_after_shrinking_is_explained() {
    let llm = FakeLlm::start(vec![
        Step::text("First."),
        Step::context_too_long(),
        Step::context_too_long(),
        Step::text("unused"),
    ]);
    let ws = long_first_exchange(Provider::Anthropic, &llm);
    failed(&ws.chat("And now?", &[])).stderr_has("too long").stderr_has("`/new`").stderr_has("chela chat --new");
    assert_eq!(llm.requests().len(), 3, "asked again once, not more");
    assert_eq!(llm.remaining(), 1);
}

#[test]
fn a_failed_turn_is_recorded_with_the_sentence_not_a_rust_form() {
    let llm = FakeLlm::start(vec![
        Step::tool_call("get_current_time", serde_json::json!({})),
        Step::status(500),
        Step::text("unused"),
    ]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "max_retries = 0");
    failed(&ws.chat("What time is it?", &[])).stderr_has("is unavailable (HTTP 500)");
    let session = ws.session("local");
    let note = crate::text_of(session.last().unwrap());
    assert!(note.starts_with("(this turn stopped: The provider anthropic (http://127.0.0.1:"), "{note}");
    assert!(note.contains("is unavailable (HTTP 500); try again later."), "{note}");
    for rust in ["Some(", "ErrorClass", "{ ", "Unavailable ("] {
        assert!(!note.contains(rust), "the session holds a Rust form {rust:?}: {note}");
    }
}

#[cfg(feature = "files")]
#[test]
fn a_failure_after_tools_ran_keeps_a_closed_record_of_them() {
    let llm = FakeLlm::start(vec![
        Step::tool_call("file_write", serde_json::json!({"path": "done.txt", "content": "x"})),
        Step::context_too_long(),
        Step::text("Picking up again."),
    ]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    failed(&ws.chat("Write it.", &[])).stderr_has("`/new`").stderr_has("⚙ file_write");
    assert!(ws.path().join("done.txt").exists());
    // What the tool did stays on record, and the turn is closed so the history stays valid.
    let session = ws.session("local");
    let roles: Vec<&str> = session.iter().map(|m| m["role"].as_str().unwrap_or("?")).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"], "{session:#?}");
    assert!(crate::text_of(&session[3]).starts_with("(this turn stopped"), "{}", session[3]);

    ws.chat("Again?", &[]).expect_ok().stdout_has("Picking up again.");
    let sent = crate::conversation(Provider::Anthropic, &crate::body(&llm, 2));
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap_or("?")).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
}
