//! A whole (non-streamed) Anthropic Messages body: an error body is always reported as that
//! error, and an accepted reply carries only valid JSON tool inputs.
#![no_main]

use chela_proto::anthropic::parse_response;
use chela_proto::error::ApiError;
use chela_proto::stream::StreamError;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let result = parse_response(data);
    if let Some(api) = ApiError::parse(data) {
        assert_eq!(result, Err(StreamError::Api(api)), "an error body was not reported as the provider's error");
    }
    if let Ok(reply) = &result {
        // The Messages API sends `input` as a JSON value that this path keeps as it is.
        chela_fuzz::check_reply(reply, false);
    }
});
