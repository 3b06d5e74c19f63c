//! Chela's wire formats, as pure data and codecs.
//!
//! What it is: the provider-neutral message model ([`chat`]), a small streaming JSON writer and
//! a pull reader ([`json`], [`json::read`]), an incremental Server-Sent Events parser ([`sse`]),
//! and the two LLM wire formats: Anthropic Messages ([`anthropic`]) and OpenAI Chat Completions
//! ([`openai`]), each with a request encoder, a response decoder and a stream accumulator.
//! Also Telegram's message text ([`telegram`]): Markdown to the Bot API's HTML subset, split
//! within its length limit. And xiaozhi-esp32's device protocol ([`xiaozhi`]): its JSON
//! messages, binary audio frames and OTA.
//!
//! What it is not: a client. Nothing here opens a socket, reads a clock or allocates without
//! bound; the host (tokio) and the firmware (embassy) own the IO and feed bytes in.
//!
//! How to drive it: encode a [`chat::Request`] with [`anthropic::write_request`] or
//! [`openai::write_request`] into any [`json::Sink`] (a `String`, or a [`json::Counter`] first to
//! learn the `Content-Length`). Feed the response body to [`anthropic::StreamDecoder`] /
//! [`openai::StreamDecoder`] chunk by chunk, or parse a whole body with `parse_response`; both
//! give the same [`chat::Reply`].
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod anthropic;
pub mod chat;
pub mod error;
pub mod feishu;
pub mod gateway;
pub mod json;
pub mod openai;
pub mod sse;
pub mod stream;
pub mod telegram;
pub mod websocket;
pub mod xiaozhi;

/// The Anthropic API version header value Chela speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
