//! A whole (non-streamed) Chat Completions body: an error body is always reported as that
//! error, and every tool call in an accepted reply has an object input or an argument error.
#![no_main]

use chela_proto::error::ApiError;
use chela_proto::openai::parse_response;
use chela_proto::stream::StreamError;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let result = parse_response(data);
    if let Some(api) = ApiError::parse(data) {
        assert_eq!(result, Err(StreamError::Api(api)), "an error body was not reported as the provider's error");
    }
    if let Ok(reply) = &result {
        chela_fuzz::check_reply(reply, true);
    }
});
