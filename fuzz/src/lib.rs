//! Helpers shared by the fuzz targets: input-driven chunking and the checks every decoded reply
//! must pass. The targets themselves are in `fuzz_targets/`; README.md says how to run them.

use chela_proto::chat::{Block, Reply, Update};
use chela_proto::stream::{Accumulate, Decoder, StreamError};

/// Cuts `data` into pieces whose sizes come from a small PRNG seeded with a hash of `data`, so
/// the same input always splits the same way (a crash reproduces) and different inputs split
/// differently. Sizes are 1..=64 bytes: small enough to cut inside `\r\n`, UTF-8 characters and
/// JSON strings, large enough to keep several lines together.
pub fn chunks(data: &[u8]) -> Vec<&[u8]> {
    // FNV-1a, then xorshift64: no dependency, and the same cut on every machine.
    let mut state =
        data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    state |= 1;
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let n = usize::try_from(state % 64).unwrap_or(0) + 1;
        let (head, tail) = rest.split_at(n.min(rest.len()));
        out.push(head);
        rest = tail;
    }
    out
}

/// An [`Update`] that outlives the callback, to compare two runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeenUpdate {
    Text(String),
    ToolUseStart { id: String, name: String },
    Retrying { why: String, wait_ms: u64 },
}

/// What a decoder made of a body: the updates it reported, in order, and its result. An error
/// from `handle_bytes` ends the run, as it ends a provider call.
pub type Run = (Vec<SeenUpdate>, Result<Reply, StreamError>);

/// Feeds `pieces` to a fresh decoder from `new`, then finishes it.
pub fn decode<A: Accumulate>(new: impl Fn() -> Decoder<A>, pieces: &[&[u8]]) -> Run {
    let mut seen = Vec::new();
    let mut on_update = |u: Update<'_>| {
        seen.push(match u {
            Update::Text(t) => SeenUpdate::Text(t.to_owned()),
            Update::ToolUseStart { id, name } => SeenUpdate::ToolUseStart { id: id.to_owned(), name: name.to_owned() },
            Update::Retrying { why, wait_ms } => SeenUpdate::Retrying { why: why.to_owned(), wait_ms },
        });
    };
    let mut dec = new();
    for p in pieces {
        if let Err(e) = dec.handle_bytes(p, &mut on_update) {
            return (seen, Err(e));
        }
    }
    let result = dec.finish();
    (seen, result)
}

/// The same body in one piece, in input-driven pieces and one byte at a time must give the same
/// updates and the same reply or error: a provider's TCP segments split the body anywhere.
pub fn check_chunking_invariance<A: Accumulate>(new: impl Fn() -> Decoder<A> + Copy, data: &[u8]) -> Run {
    let whole = decode(new, &[data]);
    let pieces = decode(new, &chunks(data));
    assert_eq!(whole, pieces, "splitting the body changed what was decoded");
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    let one_by_one = decode(new, &bytes);
    assert_eq!(whole, one_by_one, "feeding the body byte by byte changed what was decoded");
    whole
}

/// What every reply handed to the agent must satisfy, whatever the server sent.
///
/// `inputs_are_objects`: whether every tool input must be a JSON object (true where the decoder
/// reads the arguments through `parse_tool_input`, which turns anything else into `{}` plus an
/// [`chela_proto::chat::ArgError`]).
pub fn check_reply(reply: &Reply, inputs_are_objects: bool) {
    for b in &reply.content {
        if let Block::ToolUse { input, .. } = b {
            let v: serde_json::Value = serde_json::from_str(input.as_str())
                .unwrap_or_else(|e| panic!("tool input is not JSON ({e}): {input:?}"));
            if inputs_are_objects {
                assert!(v.is_object(), "tool input is not an object: {input:?}");
            }
        }
    }
    for err in &reply.arg_errors {
        let answered = reply
            .content
            .iter()
            .filter(
                |b| matches!(b, Block::ToolUse { id, input, .. } if *id == err.tool_use_id && input.as_str() == "{}"),
            )
            .count();
        assert!(answered >= 1, "an argument error names no tool call kept with `{{}}` as its input: {err:?}");
    }
}
