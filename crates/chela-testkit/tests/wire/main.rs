//! Integration tests of the fake LLM over real HTTP/1.1 on 127.0.0.1, plus the binary.
//! One test binary with modules, to keep link time down.

mod anthropic;
mod binary;
mod client;
mod openai;
mod proto;
mod server;
mod steps;
