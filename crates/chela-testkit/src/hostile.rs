//! Hostile answers: a server that stays within the wire format but tries to make the client
//! pay without bound (a flood of empty content blocks or tool calls, pings forever, one byte
//! at a time). Each is made lazily, so the fake itself stays small whatever the count.
//!
//! Every frame is still the vendor's documented shape; only the amounts are hostile.

use bytes::Bytes;
use serde_json::json;

use crate::answer::{Answer, Asked, named_event};
use crate::{anthropic, openai};

/// What a hostile step sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flood {
    /// This many empty text blocks (OpenAI: empty content deltas).
    EmptyBlocks(usize),
    /// This many tool calls without arguments.
    EmptyToolCalls(usize),
    /// Pings forever after the start (OpenAI: SSE comments, as compatible servers send).
    Pings,
}

/// Events per frame: large floods go out in big writes, as a fast server would send them.
const BATCH: usize = 256;

/// The streamed flood for the Anthropic format.
pub(crate) fn anthropic_stream(flood: Flood, asked: &Asked) -> impl Iterator<Item = Bytes> + Send + Sync + 'static {
    let start = anthropic::events(&Answer { text: None, calls: Vec::new() }, asked, &Default::default());
    // message_start and ping; the rest (delta, stop) ends the message.
    let (head, tail) = (start[..2].to_vec(), start[2..].to_vec());
    let body: Box<dyn Iterator<Item = Bytes> + Send + Sync> = match flood {
        Flood::EmptyBlocks(n) => Box::new(batched(n, |i| {
            let mut b = block_start(i, &json!({"type": "text", "text": ""}));
            b.extend_from_slice(&block_stop(i));
            b
        })),
        Flood::EmptyToolCalls(n) => Box::new(batched(n, |i| {
            let block = json!({"type": "tool_use", "id": format!("toolu_flood_{i}"), "name": "noop", "input": {}});
            let mut b = block_start(i, &block);
            b.extend_from_slice(&block_stop(i));
            b
        })),
        Flood::Pings => Box::new(std::iter::repeat_with(|| {
            Bytes::from(named_event("ping", &json!({"type": "ping"})).repeat(BATCH))
        })),
    };
    head.into_iter().chain(body).chain(tail)
}

/// The streamed flood for the OpenAI format.
pub(crate) fn openai_stream(flood: Flood, asked: &Asked) -> impl Iterator<Item = Bytes> + Send + Sync + 'static {
    let all = openai::events(&Answer { text: None, calls: Vec::new() }, asked, &Default::default());
    // The role delta first; finish, usage and [DONE] last.
    let (head, tail) = (all[..1].to_vec(), all[1..].to_vec());
    let chunk = |delta: serde_json::Value| {
        let c = json!({"id": "chatcmpl-flood", "object": "chat.completion.chunk", "created": 0, "model": "flood",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]});
        format!("data: {c}\n\n").into_bytes()
    };
    let body: Box<dyn Iterator<Item = Bytes> + Send + Sync> = match flood {
        Flood::EmptyBlocks(n) => Box::new(batched(n, move |_| chunk(json!({"content": ""})))),
        Flood::EmptyToolCalls(n) => Box::new(batched(n, move |i| {
            let call = json!({"index": i, "id": format!("call_flood_{i}"), "type": "function",
                "function": {"name": "noop", "arguments": ""}});
            chunk(json!({"tool_calls": [call]}))
        })),
        Flood::Pings => Box::new(std::iter::repeat_with(|| Bytes::from(b": ping\n\n".repeat(BATCH)))),
    };
    head.into_iter().chain(body).chain(tail)
}

/// A whole (not streamed) flood: the vendor's object with the flood as its content, written
/// as it is sent. Pings have no whole form; the server sends whitespace instead.
pub(crate) fn whole(anthropic: bool, flood: Flood) -> impl Iterator<Item = Bytes> + Send + Sync + 'static {
    let (n, tools) = match flood {
        Flood::EmptyBlocks(n) => (n, false),
        Flood::EmptyToolCalls(n) => (n, true),
        Flood::Pings => (0, false),
    };
    let (open, close): (&'static str, &'static str) = match (anthropic, tools) {
        (true, _) => (
            r#"{"id":"msg_flood","type":"message","role":"assistant","model":"flood","content":["#,
            r#"],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}"#,
        ),
        (false, true) => (
            r#"{"id":"chatcmpl-flood","object":"chat.completion","created":0,"model":"flood","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":["#,
            r#"]},"finish_reason":"tool_calls"}]}"#,
        ),
        // OpenAI has a single content string; its empty blocks are one empty text.
        (false, false) => (
            r#"{"id":"chatcmpl-flood","object":"chat.completion","created":0,"model":"flood","choices":[{"index":0,"message":{"role":"assistant","content":""#,
            r#""},"finish_reason":"stop"}]}"#,
        ),
    };
    let n = if !anthropic && !tools { 0 } else { n };
    let items = batched(n, move |i| {
        let sep = if i == 0 { "" } else { "," };
        let item = match (anthropic, tools) {
            (true, false) => String::from(r#"{"type":"text","text":""}"#),
            (true, true) => format!(r#"{{"type":"tool_use","id":"toolu_flood_{i}","name":"noop","input":{{}}}}"#),
            (false, _) => format!(
                r#"{{"id":"call_flood_{i}","type":"function","function":{{"name":"noop","arguments":"{{}}"}}}}"#
            ),
        };
        format!("{sep}{item}").into_bytes()
    });
    std::iter::once(Bytes::from_static(open.as_bytes()))
        .chain(items)
        .chain(std::iter::once(Bytes::from_static(close.as_bytes())))
}

/// `n` events made by `event(i)`, [`BATCH`] to a frame.
fn batched(n: usize, event: impl Fn(usize) -> Vec<u8> + Send + Sync) -> impl Iterator<Item = Bytes> + Send + Sync {
    (0..n.div_ceil(BATCH)).map(move |b| {
        let mut frame = Vec::new();
        for i in b * BATCH..((b + 1) * BATCH).min(n) {
            frame.extend_from_slice(&event(i));
        }
        Bytes::from(frame)
    })
}

fn block_start(index: usize, block: &serde_json::Value) -> Vec<u8> {
    let ev = json!({"type": "content_block_start", "index": index, "content_block": block});
    format!("event: content_block_start\ndata: {ev}\n\n").into_bytes()
}

fn block_stop(index: usize) -> Vec<u8> {
    format!("event: content_block_stop\ndata: {}\n\n", json!({"type": "content_block_stop", "index": index}))
        .into_bytes()
}

/// `whole` one byte per frame: a slow trickle.
pub(crate) fn trickle(whole: Vec<Bytes>) -> impl Iterator<Item = Bytes> + Send + Sync + 'static {
    let all: Vec<u8> = whole.iter().flat_map(|b| b.iter().copied()).collect();
    (0..all.len()).map(move |i| Bytes::copy_from_slice(&all[i..=i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked() -> Asked {
        Asked { model: "m".into(), stream: true, include_usage: true, input_tokens: 1 }
    }

    fn text(frames: impl Iterator<Item = Bytes>) -> String {
        frames.map(|b| String::from_utf8(b.to_vec()).unwrap()).collect()
    }

    #[test]
    fn floods_are_the_documented_events_in_the_asked_number() {
        let a = text(anthropic_stream(Flood::EmptyBlocks(600), &asked()));
        assert_eq!(a.matches("event: content_block_start\n").count(), 600);
        assert!(
            a.contains(r#""index":599"#) && a.ends_with("data: {\"type\":\"message_stop\"}\n\n"),
            "{}",
            &a[a.len() - 200..]
        );
        let o = text(openai_stream(Flood::EmptyToolCalls(300), &asked()));
        assert_eq!(o.matches("\"call_flood_").count(), 300);
        assert!(o.ends_with("data: [DONE]\n\n"));
        for line in o.lines().filter(|l| l.starts_with("data: {")) {
            serde_json::from_str::<serde_json::Value>(&line["data: ".len()..]).unwrap();
        }
        let pings: Vec<Bytes> = anthropic_stream(Flood::Pings, &asked()).take(10).collect();
        assert_eq!(pings.len(), 10, "pings never end");
    }

    #[test]
    fn whole_floods_are_valid_json_of_the_asked_size() {
        for (anthropic, flood, key, n) in [
            (true, Flood::EmptyBlocks(700), "content", 700),
            (true, Flood::EmptyToolCalls(300), "content", 300),
            (false, Flood::EmptyToolCalls(300), "tool_calls", 300),
        ] {
            let v: serde_json::Value = serde_json::from_str(&text(whole(anthropic, flood))).unwrap();
            let list = if anthropic { &v[key] } else { &v["choices"][0]["message"][key] };
            assert_eq!(list.as_array().unwrap().len(), n, "{flood:?}");
        }
        let v: serde_json::Value = serde_json::from_str(&text(whole(false, Flood::EmptyBlocks(5)))).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "");
    }

    #[test]
    fn a_trickle_is_the_same_bytes_one_at_a_time() {
        let whole = vec![Bytes::from_static(b"ab"), Bytes::from_static(b"c")];
        let t: Vec<Bytes> = trickle(whole).collect();
        assert_eq!(t, [Bytes::from_static(b"a"), Bytes::from_static(b"b"), Bytes::from_static(b"c")]);
    }
}
