//! The `feishu` tool group, registered while the channel runs (like an MCP server's tools):
//! `feishu_send_message`, with which Chela writes to a Feishu chat on its own, e.g. from a
//! schedule or while working on another chat's request. A documented alias of `im_send_text`
//! for Feishu: it checks the chat id's shape, then sends the same way ([`crate::daemon::send`],
//! the channel's outlet).
//!
//! Only chats the pairing gate opens ([`Gate::may_send`]): where a person who may talk to Chela
//! (allowed or approved) has talked, while they still may; a revoke closes them at once. A
//! stranger's messages never open one. So the model cannot be talked into messaging arbitrary
//! chats the bot happens to be in.

use std::sync::Arc;

use super::api::Api;
use super::{FeishuOutlet, MAX_CHUNK_CHARS, chunks};
use crate::access::Gate;
use crate::tools::{Group, Tool, ToolCtx, ToolError, ToolResult};
use chela_runtime::read_args;

/// The group's id: `chela cap disable feishu` switches the tool off.
pub const GROUP: &str = "feishu";
/// Longest text one call sends (it goes out in pieces of [`MAX_CHUNK_CHARS`]).
const MAX_TEXT_CHARS: usize = 4 * MAX_CHUNK_CHARS;

/// Hidden until unlocked: `im_send_text` reaches this chat too, and most turns send nothing.
pub fn group(api: Arc<Api>, gate: Arc<Gate>) -> Group {
    Group::new(GROUP, "Send messages to Feishu chats.")
        .hidden("")
        .with(SendMessage { outlet: FeishuOutlet { api }, gate })
}

pub struct SendMessage {
    outlet: FeishuOutlet,
    gate: Arc<Gate>,
}

pub struct SendArgs {
    chat_id: String,
    text: String,
}

read_args!(SendArgs { chat_id: need, text: need });

impl Tool for SendMessage {
    const NAME: &'static str = "feishu_send_message";
    const DESCRIPTION: &'static str =
        "Send a text message to a Feishu chat (its chat_id, oc_…) where an allowed person has talked to you.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"chat_id":{"type":"string","description":"The Feishu chat id, e.g. oc_5ad11d72b830411d72b836c20."},"text":{"type":"string","description":"The message."}},"required":["chat_id","text"]}"#;
    type Args = SendArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, args: SendArgs) -> ToolResult {
        let chat = args.chat_id.trim();
        // Feishu's ids are letters, digits, `_` and `-`; anything else is not a chat.
        if chat.is_empty() || !chat.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(ToolError::invalid_args(format!("`{chat}` is not a Feishu chat id (they look like oc_…).")));
        }
        crate::daemon::send::send_text(&self.outlet, &self.gate, ctx, chat, &args.text, MAX_TEXT_CHARS).await?;
        // The outlet sends in these pieces.
        let pieces = chunks(args.text.trim(), MAX_CHUNK_CHARS).len();
        Ok(serde_json::json!({"sent": true, "chat_id": chat, "messages": pieces}).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::super::CHANNEL;
    use super::*;
    use crate::net::{ClientOptions, HttpClient};
    use crate::tools::ToolErrorKind;
    use chela_testkit::feishu::{FakeFeishu, FeishuOptions};

    #[tokio::test]
    async fn it_sends_only_to_chats_where_an_allowed_person_talked() {
        let fake = FakeFeishu::start(FeishuOptions::default());
        let http = HttpClient::new(ClientOptions::default());
        let fixture = crate::testing::Fixture::new(&[("channels.feishu.allow_from", "ou_owner")]);
        let ctx = fixture.ctx();
        let gate = Arc::new(Gate::open(&ctx.ws).unwrap());
        let api = Arc::new(Api::new(http, &fake.base_url(), "cli_test", "secret-test"));
        let tool = SendMessage { outlet: FeishuOutlet { api }, gate: Arc::clone(&gate) };
        let args = |chat: &str, text: &str| SendArgs { chat_id: chat.into(), text: text.into() };

        let refused = tool.call(&ctx, args("oc_known", "hello")).await.unwrap_err();
        assert_eq!(refused.kind(), ToolErrorKind::Refused, "{refused}");
        // A session file is no pass; the gate's record that the owner talked there is.
        std::fs::create_dir_all(ctx.ws.sessions_dir()).unwrap();
        std::fs::write(ctx.ws.session_path(CHANNEL, "oc_known"), "").unwrap();
        assert_eq!(tool.call(&ctx, args("oc_known", "hello")).await.unwrap_err().kind(), ToolErrorKind::Refused);
        gate.note_chat(CHANNEL, "oc_known", "ou_owner", 1_700_000_000);
        let out = tool.call(&ctx, args("oc_known", "hello")).await.unwrap();
        assert!(out.contains("\"messages\":1"), "{out}");
        let sent = fake.sent();
        assert_eq!((sent[0].receive_id.as_deref(), sent[0].text.as_str()), (Some("oc_known"), "hello"));

        for (chat, text) in [("oc/known", "x"), ("", "x"), ("oc_known", "  ")] {
            let e = tool.call(&ctx, args(chat, text)).await.unwrap_err();
            assert_eq!(e.kind(), ToolErrorKind::InvalidArgs, "{e}");
        }
        assert_eq!(fake.sent().len(), 1);
    }
}
