//! The exchange under virtual time: no socket, the clock is a number the test advances.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use chela_proto::chat::{Message, ToolChoice};

use super::*;

fn endpoint(kind: Kind, base_url: &str) -> Endpoint {
    Endpoint {
        kind,
        base_url: base_url.into(),
        api_key: "sk-test".into(),
        model: "m".into(),
        max_tokens: 64,
        stream: true,
    }
}

fn options() -> Options {
    Options {
        backoff: Backoff { max_retries: 3, ..Backoff::default() },
        idle: Duration::from_secs(5),
        deadline: Duration::from_secs(30),
        ..Options::HOST
    }
}

fn exchange(opts: Options) -> Exchange {
    Exchange::new(endpoint(Kind::Anthropic, "http://127.0.0.1:9"), opts, 1_000, 7)
}

const SSE: &[(&str, &str)] = &[("Content-Type", "text/event-stream; charset=utf-8")];
const JSON: &[(&str, &str)] = &[("content-type", "application/json")];

fn event(data: &str) -> String {
    alloc::format!("data: {data}\n\n")
}

fn text_start() -> String {
    event(r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#)
}

fn text_delta(t: &str) -> String {
    event(&alloc::format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{t}"}}}}"#))
}

fn stop() -> String {
    event(r#"{"type":"message_stop"}"#)
}

/// Feeds `pieces` at `now` and collects the text shown.
fn feed(ex: &mut Exchange, pieces: &[&str], now: u64) -> String {
    let mut shown = String::new();
    for p in pieces {
        ex.handle_body(p.as_bytes(), now, &mut |u| {
            if let Update::Text(t) = u {
                shown.push_str(t);
            }
        });
    }
    shown
}

fn failed(ex: &mut Exchange) -> ModelError {
    match ex.poll_outcome() {
        Some(Outcome::Failed(e)) => e,
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn retry_at(ex: &mut Exchange) -> u64 {
    match ex.poll_outcome() {
        Some(Outcome::RetryAt(t)) => t,
        other => panic!("expected a retry, got {other:?}"),
    }
}

/// A failed status attempt at `now`.
fn status(ex: &mut Exchange, code: u16, headers: &[(&str, &str)], body: &str, now: u64) {
    ex.start(now);
    ex.handle_head(code, headers, now);
    feed(ex, &[body], now);
    ex.handle_end(now, &mut |_| {});
}

#[test]
fn the_head_and_body_follow_the_provider_kind_and_dialect() {
    let a = endpoint(Kind::Anthropic, "https://api.anthropic.com").head();
    assert_eq!(a.url, "https://api.anthropic.com/v1/messages");
    assert!(a.headers.contains(&("x-api-key", "sk-test".into())));
    assert!(a.headers.contains(&("anthropic-version", chela_proto::ANTHROPIC_VERSION.into())));
    assert!(a.headers.contains(&("accept", "text/event-stream".into())));
    let o = endpoint(Kind::OpenAi, "https://api.openai.com/v1");
    assert_eq!(o.head().url, "https://api.openai.com/v1/chat/completions");
    assert!(o.head().headers.contains(&("authorization", "Bearer sk-test".into())));
    let messages = [Message::user_text("hi")];
    let call = ModelCall {
        system: "s",
        messages: &messages,
        tool_choice: ToolChoice::Auto,
        cache: Default::default(),
        format: None,
    };
    let mut body = String::new();
    o.write_body(&call, &[], &mut body);
    assert!(body.contains("\"max_completion_tokens\":64"), "{body}");
    let local = Endpoint { api_key: String::new(), ..endpoint(Kind::OpenAi, "http://127.0.0.1:11434/v1") };
    let mut body = String::new();
    local.write_body(&call, &[], &mut body);
    assert!(body.contains("\"max_tokens\":64"), "{body}");
    assert!(!local.head().headers.iter().any(|(n, _)| *n == "authorization"), "no key, no header");
}

#[test]
fn a_streamed_answer_is_decoded_and_shown_as_it_comes() {
    let mut ex = exchange(options());
    ex.start(1_000);
    assert!(ex.wants_input());
    ex.handle_head(200, SSE, 1_010);
    let shown = feed(&mut ex, &[&text_start(), &text_delta("Hel"), &text_delta("lo"), &stop()], 1_020);
    assert_eq!(shown, "Hello");
    assert!(ex.wants_input(), "still reading until the body ends");
    ex.handle_end(1_030, &mut |_| {});
    assert!(!ex.wants_input());
    let Some(Outcome::Reply(r)) = ex.poll_outcome() else { panic!("no reply") };
    assert_eq!(Exchange::reply_text(&r).collect::<Vec<_>>(), ["Hello"]);
    assert_eq!(ex.poll_outcome(), None, "the outcome is handed out once");
}

#[test]
fn a_whole_json_body_is_accepted_too() {
    let mut ex = exchange(options());
    ex.start(0);
    ex.handle_head(200, JSON, 0);
    assert_eq!(feed(&mut ex, &[r#"{"content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn"}"#], 0), "");
    let mut shown = String::new();
    ex.handle_end(0, &mut |u| {
        if let Update::Text(t) = u {
            shown.push_str(t);
        }
    });
    assert_eq!(shown, "Hi", "a whole reply is shown when it is complete");
    let Some(Outcome::Reply(r)) = ex.poll_outcome() else { panic!("no reply") };
    assert_eq!(Exchange::reply_text(&r).collect::<Vec<_>>(), ["Hi"]);
}

#[test]
fn retry_after_is_honoured_and_the_retry_succeeds() {
    let mut ex = exchange(options());
    status(
        &mut ex,
        429,
        &[("retry-after", "3")],
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}"#,
        2_000,
    );
    assert_eq!(retry_at(&mut ex), 5_000);
    assert_eq!(ex.poll_timeout(), Some(5_000), "the driver sleeps until the retry");
    ex.start(5_000);
    ex.handle_head(200, SSE, 5_000);
    feed(&mut ex, &[&text_start(), &text_delta("ok"), &stop()], 5_000);
    ex.handle_end(5_000, &mut |_| {});
    assert!(matches!(ex.poll_outcome(), Some(Outcome::Reply(_))));
    assert_eq!(ex.retries(), 1);
}

#[test]
fn server_errors_back_off_with_jitter_then_fail_with_the_count() {
    let mut ex = exchange(options());
    let mut now = 1_000;
    let mut waits = vec![];
    for _ in 0..3 {
        status(&mut ex, 503, &[], "busy", now);
        let t = retry_at(&mut ex);
        waits.push(t - now);
        now = t;
    }
    // Equal jitter over 500 ms doubling: [250, 500), [500, 1000), [1000, 2000).
    assert!((250..500).contains(&waits[0]), "{waits:?}");
    assert!((500..1000).contains(&waits[1]), "{waits:?}");
    assert!((1000..2000).contains(&waits[2]), "{waits:?}");
    status(&mut ex, 503, &[], "busy", now);
    assert_eq!(failed(&mut ex), ModelError::Overloaded { status: Some(503), retries: 3 });
    // Another seed, other waits: clients that failed together do not retry together.
    let mut other = Exchange::new(endpoint(Kind::Anthropic, "http://x"), options(), 1_000, 8);
    status(&mut other, 503, &[], "busy", 1_000);
    assert_ne!(retry_at(&mut other) - 1_000, waits[0]);
}

#[test]
fn a_stream_that_showed_text_is_not_retried_but_interrupted() {
    let mut ex = exchange(options());
    ex.start(0);
    ex.handle_head(200, SSE, 0);
    assert_eq!(feed(&mut ex, &[&text_start(), &text_delta("Hal")], 0), "Hal");
    ex.handle_net_error(NetFailure::Transient("connection reset".into()), 10);
    assert_eq!(failed(&mut ex), ModelError::Interrupted("connection reset".into()));
    // The same cut before any text is retried.
    let mut ex = exchange(options());
    ex.start(0);
    ex.handle_head(200, SSE, 0);
    feed(&mut ex, &[&text_start()], 0);
    ex.handle_net_error(NetFailure::Transient("connection reset".into()), 10);
    assert!(retry_at(&mut ex) > 10);
}

#[test]
fn an_unreachable_server_fails_at_once_naming_the_url() {
    let mut ex = exchange(options());
    ex.start(0);
    ex.handle_net_error(NetFailure::Unreachable("connection refused".into()), 3);
    let e = failed(&mut ex);
    assert_eq!(
        e,
        ModelError::Unreachable { url: "http://127.0.0.1:9/v1/messages".into(), reason: "connection refused".into() }
    );
    assert_eq!(ex.retries(), 0);
    let ctx = Context { who: "anthropic (http://127.0.0.1:9)", model: "m", key_fix: "" };
    assert!(e.explain(&ctx).starts_with("Could not reach anthropic (http://127.0.0.1:9): connection refused."));
    // A fatal error is not retried either; a transient one before the answer is.
    let mut ex = exchange(options());
    ex.start(0);
    ex.handle_net_error(NetFailure::Fatal("untrusted certificate".into()), 0);
    assert_eq!(failed(&mut ex), ModelError::Network { reason: "untrusted certificate".into(), retries: 0 });
    let mut ex = exchange(options());
    ex.start(0);
    ex.handle_net_error(NetFailure::Transient("timed out connecting".into()), 0);
    retry_at(&mut ex);
}

#[test]
fn an_idle_gap_ends_the_attempt() {
    let mut ex = exchange(options());
    ex.start(1_000);
    ex.handle_head(200, SSE, 1_000);
    feed(&mut ex, &[&text_start()], 2_000);
    assert_eq!(ex.poll_timeout(), Some(7_000), "idle counts from the last byte");
    ex.handle_timeout(6_999);
    assert!(ex.wants_input(), "not yet");
    ex.handle_timeout(7_000);
    let e = failed(&mut ex);
    assert!(matches!(&e, ModelError::Network { reason, .. } if reason.contains("idle timeout")), "{e:?}");
    // Waiting for the head past the idle gap is a transient failure: retried.
    let mut ex = exchange(options());
    ex.start(1_000);
    assert_eq!(ex.poll_timeout(), Some(6_000));
    ex.handle_timeout(6_000);
    retry_at(&mut ex);
}

#[test]
fn endless_pings_still_end_at_the_overall_deadline() {
    let mut ex = exchange(options());
    ex.start(1_000);
    ex.handle_head(200, SSE, 1_000);
    let ping = "event: ping\ndata: {\"type\":\"ping\"}\n\n";
    let mut now = 1_000;
    // A ping every second: never idle, never done.
    while ex.wants_input() {
        now += 1_000;
        assert!(now <= 31_000, "the deadline did not end it");
        assert!(ex.poll_timeout().unwrap() <= 31_000);
        feed(&mut ex, &[ping], now);
        ex.handle_timeout(now);
    }
    assert_eq!(now, 31_000);
    assert_eq!(failed(&mut ex), ModelError::Timeout { after: Duration::from_secs(30) });
}

#[test]
fn a_retry_that_would_start_past_the_deadline_is_not_waited_for() {
    let opts = Options { deadline: Duration::from_secs(2), ..options() };
    let mut ex = exchange(opts);
    status(&mut ex, 429, &[("retry-after", "5")], "", 1_500);
    assert!(
        matches!(failed(&mut ex), ModelError::RateLimited { retry_after: Some(d), retries: 0, .. } if d == Duration::from_secs(5))
    );
}

#[test]
fn statuses_and_bodies_become_typed_errors() {
    let anthropic =
        |kind: &str, msg: &str| alloc::format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"{msg}"}}}}"#);
    let cases: Vec<(u16, String, ModelError)> = vec![
        (401, anthropic("authentication_error", "invalid x-api-key"), ModelError::Unauthorized { status: Some(401) }),
        (
            402,
            anthropic("billing_error", "no credit"),
            ModelError::Quota { status: Some(402), message: "no credit".into() },
        ),
        (404, anthropic("not_found_error", "model: x"), ModelError::NotFound { message: "model: x".into() }),
        (
            400,
            anthropic("invalid_request_error", "prompt is too long: 9 > 8"),
            ModelError::ContextTooLong { status: Some(400) },
        ),
        (
            400,
            anthropic("invalid_request_error", "bad field"),
            ModelError::BadRequest { status: Some(400), message: "bad field".into() },
        ),
        (
            418,
            String::from("<html>teapot</html>"),
            ModelError::BadRequest { status: Some(418), message: "<html>teapot</html>".into() },
        ),
    ];
    for (code, body, want) in cases {
        let mut ex = exchange(options());
        status(&mut ex, code, JSON, &body, 0);
        assert_eq!(failed(&mut ex), want, "{code} {body}");
    }
    // An error inside a stream is classified by its type.
    let mut ex = exchange(Options { backoff: Backoff { max_retries: 0, ..Backoff::default() }, ..options() });
    ex.start(0);
    ex.handle_head(200, SSE, 0);
    feed(&mut ex, &[&event(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)], 0);
    assert_eq!(failed(&mut ex), ModelError::Overloaded { status: None, retries: 0 });
}

#[test]
fn error_bodies_are_read_only_up_to_their_bound() {
    let mut ex = exchange(Options { max_error_bytes: 16, ..options() });
    ex.start(0);
    ex.handle_head(400, JSON, 0);
    feed(&mut ex, &["0123456789", "0123456789"], 0);
    assert!(!ex.wants_input(), "the rest of the error body is not read");
    assert_eq!(failed(&mut ex), ModelError::BadRequest { status: Some(400), message: "0123456789012345".into() });
}

#[test]
fn reply_bounds_fail_at_once_without_retry() {
    let limits = Limits { max_blocks: 4, ..Limits::HOST };
    let mut ex = exchange(Options { limits, ..options() });
    ex.start(0);
    ex.handle_head(200, SSE, 0);
    let blocks: Vec<String> = (0..5)
        .map(|i| {
            event(&alloc::format!(
                r#"{{"type":"content_block_start","index":{i},"content_block":{{"type":"text","text":""}}}}"#
            ))
        })
        .collect();
    let pieces: Vec<&str> = blocks.iter().map(String::as_str).collect();
    feed(&mut ex, &pieces, 0);
    assert!(!ex.wants_input(), "stops reading at the bound");
    assert_eq!(failed(&mut ex), ModelError::TooLarge("the reply has more than 4 content blocks".into()));
    let mut ex = exchange(Options { max_body_bytes: 8, ..options() });
    ex.start(0);
    ex.handle_head(200, JSON, 0);
    feed(&mut ex, &["{\"content\":"], 0);
    assert!(matches!(failed(&mut ex), ModelError::TooLarge(_)));
}

#[test]
fn the_chips_body_bound_holds_a_whole_reply_near_the_reply_bound_and_no_more() {
    // A server that ignores `stream` sends the reply whole: one near the reply bound (32 KiB)
    // must still fit the body bound (40 KiB), and a body past that is refused, not buffered.
    let text = "x".repeat(Options::CHIP.limits.max_reply_bytes - 1024);
    let body = alloc::format!(
        r#"{{"id":"msg_1","type":"message","role":"assistant","content":[{{"type":"text","text":"{text}"}}],"stop_reason":"end_turn","usage":{{"input_tokens":1,"output_tokens":2}}}}"#
    );
    let mut ex = exchange(Options::CHIP);
    ex.start(0);
    ex.handle_head(200, JSON, 0);
    feed(&mut ex, &[&body], 0);
    ex.handle_end(0, &mut |_| {});
    let Some(Outcome::Reply(reply)) = ex.poll_outcome() else { panic!("no reply") };
    assert_eq!(Exchange::reply_text(&reply).collect::<String>(), text);

    let mut ex = exchange(Options::CHIP);
    ex.start(0);
    ex.handle_head(200, JSON, 0);
    let piece = "y".repeat(4096);
    let pieces: Vec<&str> = core::iter::repeat_n(piece.as_str(), 11).collect();
    feed(&mut ex, &pieces, 0);
    assert!(!ex.wants_input(), "stops reading at the bound");
    assert_eq!(failed(&mut ex), ModelError::TooLarge("the response body is larger than 40960 bytes".into()));
}

#[test]
fn every_sentence_is_plain_words_with_context() {
    let ctx =
        Context { who: "openai (http://h)", model: "gpt", key_fix: " or the OPENAI_API_KEY environment variable" };
    let all = [
        ModelError::RateLimited { status: Some(429), retry_after: Some(Duration::from_secs(1)), retries: 2 },
        ModelError::Overloaded { status: None, retries: 1 },
        ModelError::Unauthorized { status: Some(401) },
        ModelError::Quota { status: Some(429), message: "quota".into() },
        ModelError::ContextTooLong { status: Some(400) },
        ModelError::NotFound { message: "nope".into() },
        ModelError::BadRequest { status: Some(400), message: "bad".into() },
        ModelError::Unreachable { url: "http://h/chat/completions".into(), reason: "connection refused".into() },
        ModelError::Network { reason: "reset".into(), retries: 0 },
        ModelError::Timeout { after: Duration::from_secs(600) },
        ModelError::Malformed("x".into()),
        ModelError::Interrupted("x".into()),
        ModelError::TooLarge("the reply has more than 4 tool calls".into()),
    ];
    for e in &all {
        for text in [e.explain(&ctx), e.to_string()] {
            for debug in ["Some(", "None", "{ ", "ErrorClass"] {
                assert!(!text.contains(debug), "{text}");
            }
        }
        assert!(e.explain(&ctx).contains("openai (http://h)") || e.is_context_too_long(), "{e:?}");
    }
    assert!(all[0].explain(&ctx).contains("(HTTP 429) after 2 retries"));
    assert!(all[2].explain(&ctx).ends_with("or the OPENAI_API_KEY environment variable."));
    assert!(all[4].explain(&ctx).contains("gpt's context window"));
    assert!(all[9].explain(&ctx).contains("`llm.deadline_secs`"));
}
