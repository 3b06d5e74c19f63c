//! The `local` tool group, registered while the gateway runs: `local_send_text`, with which
//! Chela writes on its own (from a schedule, or while working on another chat) to the web
//! console and the other WebSocket clients of a chat.
//!
//! Only to chats that exist now: a chat with a connected client. Nothing is queued for a chat
//! nobody has open, so the model cannot pile up messages for clients that never come.

use std::sync::Arc;

use serde_json::json;

use super::{Clients, check_chat_id};
use crate::tools::{Group, Tool, ToolCtx, ToolError, ToolResult};
use chela_runtime::read_args;

/// The group's id: `chela cap disable local` switches the tool off.
pub const GROUP: &str = "local";
/// Longest text one call sends.
const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Hidden until unlocked: `im_send_text` reaches these clients too, and most turns send nothing.
pub fn group(clients: Arc<Clients>) -> Group {
    Group::new(GROUP, "Send messages to the web console and other local WebSocket clients.")
        .hidden("")
        .with(SendText { clients })
}

pub struct SendText {
    clients: Arc<Clients>,
}

pub struct SendArgs {
    chat_id: String,
    text: String,
}

read_args!(SendArgs { chat_id: need, text: need });

impl Tool for SendText {
    const NAME: &'static str = "local_send_text";
    const DESCRIPTION: &'static str = "Send a text message to a chat of the local web console (its chat_id, e.g. kitchen \
         or ws_9f2c41d07a3b5e68), shown to every client that has it open now.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"chat_id":{"type":"string","description":"The chat id, e.g. kitchen or ws_9f2c41d07a3b5e68."},"text":{"type":"string","description":"The message."}},"required":["chat_id","text"]}"#;
    type Args = SendArgs;

    async fn call<'a>(&'a self, _ctx: &'a ToolCtx, args: SendArgs) -> ToolResult {
        let chat = args.chat_id.trim();
        check_chat_id(chat).map_err(|e| ToolError::invalid_args(format!("`{chat}` is not a chat id: {e}.")))?;
        let text = args.text.trim();
        if text.is_empty() {
            return Err(ToolError::invalid_args("The text is empty."));
        }
        if text.len() > MAX_TEXT_BYTES {
            return Err(ToolError::invalid_args(format!(
                "The text is longer than {MAX_TEXT_BYTES} bytes; send less, or in several messages."
            )));
        }
        let event = json!({"type": "response", "content": text, "chat_id": chat});
        if !self.clients.send(chat, &event) {
            return Err(ToolError::refused(format!(
                "No client has the chat {chat} open now, so the message cannot be delivered."
            )));
        }
        Ok(json!({"sent": true, "chat_id": chat}).to_string())
    }
}
