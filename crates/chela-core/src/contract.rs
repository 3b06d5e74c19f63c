//! The tools both the host and the chip offer, as one contract: what the model is shown (the
//! [`ToolSpec`]: name, description, JSON schema), the argument types the answers are read
//! into, and the handlers that need no IO. Both toolboxes advertise the specs from here, so a
//! model that learnt a tool on one side finds it the same on the other; the host's test
//! `shared_tools_are_advertised_as_the_core_contract` and the chip's `tests/contract.rs` check
//! each side against [`SHARED`].
//!
//! What a side does with a call stays its own: the host answers from files and the board
//! host, the chip from flash and its drivers. Where one side cannot do what the contract
//! allows (the chip knows only UTC, has one LED), it refuses with a sentence instead of
//! advertising a narrower schema.

use alloc::format;
use alloc::string::String;

use chela_proto::chat::ToolSpec;

pub mod board;
pub mod cron;
pub mod memory;
pub mod time;
pub mod web;

/// Every tool of the contract, in the order the specs are listed here.
pub static SHARED: [ToolSpec<'static>; 12] = [
    memory::STORE,
    memory::RECALL,
    time::CURRENT_TIME,
    cron::ADD,
    cron::LIST,
    cron::REMOVE,
    board::LIST_DEVICES,
    board::SENSOR_READ,
    board::GPIO_READ,
    board::GPIO_WRITE,
    board::LED_SET,
    web::SEARCH,
];

/// The contract's spec of `name`, if it is a shared tool.
pub fn spec(name: &str) -> Option<&'static ToolSpec<'static>> {
    SHARED.iter().find(|s| s.name == name)
}

/// The sentence a side answers when the arguments do not parse as the contract's type.
pub fn bad_args(e: &serde_json::Error) -> String {
    format!("The arguments do not fit the tool's schema: {e}")
}
