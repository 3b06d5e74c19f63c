//! The Anthropic Messages stream decoder: any split of the body gives the same reply or error,
//! and a reply it accepts is one the agent can use.
#![no_main]

use chela_proto::anthropic::StreamDecoder;
use chela_proto::stream::Limits;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (_, result) = chela_fuzz::check_chunking_invariance(|| StreamDecoder::new(Limits::default()), data);
    if let Ok(reply) = &result {
        chela_fuzz::check_reply(reply, true);
    }
    // Tight bounds: a refusal is fine, but it must not depend on the split either.
    let tight = Limits { max_event_bytes: 256, max_reply_bytes: 128, max_blocks: 4, max_tool_calls: 2 };
    let (_, small) = chela_fuzz::check_chunking_invariance(|| StreamDecoder::new(tight), data);
    if let Ok(reply) = &small {
        chela_fuzz::check_reply(reply, true);
    }
});
