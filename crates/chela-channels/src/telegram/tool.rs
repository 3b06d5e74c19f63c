//! The `telegram` tool group, registered while the channel runs: `telegram_send_text`, with
//! which Chela writes to a Telegram chat on its own (from a schedule, or while working on
//! another chat's request). A documented alias of `im_send_text` for Telegram: it checks the
//! chat id's shape, then sends the same way ([`crate::daemon::send`], the channel's outlet).
//!
//! Only to chats the pairing gate opens ([`Gate::may_send`]): a private chat whose id is listed
//! in `channels.telegram.allow_from` or is an approved person's (a private chat's id is its
//! user's id), or a chat where such a person talked. A revoke closes them at once. The model
//! cannot be talked into writing to any other chat the bot is in.

use std::sync::Arc;

use super::TelegramOutlet;
use super::api::Api;
use crate::access::Gate;
use crate::tools::{Group, Tool, ToolCtx, ToolError, ToolResult};
use chela_runtime::read_args;

/// The group's id: `chela cap disable telegram` switches the tool off.
pub const GROUP: &str = "telegram";
/// Longest text one call sends (four messages' worth).
const MAX_TEXT_CHARS: usize = 4 * 4096;

/// Hidden until unlocked: `im_send_text` reaches this chat too, and most turns send nothing.
pub fn group(api: Api, gate: Arc<Gate>) -> Group {
    Group::new(GROUP, "Send messages to Telegram chats.")
        .hidden("")
        .with(SendText { outlet: TelegramOutlet::new(api), gate })
}

pub struct SendText {
    outlet: TelegramOutlet,
    gate: Arc<Gate>,
}

pub struct SendTextArgs {
    chat_id: String,
    text: String,
}

read_args!(SendTextArgs { chat_id: need, text: need });

impl Tool for SendText {
    const NAME: &'static str = "telegram_send_text";
    const DESCRIPTION: &'static str =
        "Send a message (Markdown) to a Telegram chat where an allowed person has talked to you.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"chat_id":{"type":"string","description":"The Telegram chat id, a number such as 123456789 (negative for groups)."},"text":{"type":"string","description":"The message, in Markdown."}},"required":["chat_id","text"]}"#;
    type Args = SendTextArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, args: SendTextArgs) -> ToolResult {
        let chat = args.chat_id.trim();
        let digits = chat.strip_prefix('-').unwrap_or(chat);
        if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ToolError::invalid_args(format!(
                "`{chat}` is not a Telegram chat id (a number, e.g. 123456789)."
            )));
        }
        crate::daemon::send::send_text(&self.outlet, &self.gate, ctx, chat, &args.text, MAX_TEXT_CHARS).await?;
        Ok(serde_json::json!({"sent": true, "chat_id": chat}).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::super::CHANNEL;
    use super::*;
    use crate::net::{ClientOptions, HttpClient};
    use crate::tools::ToolErrorKind;
    use chela_testkit::FakeTelegram;

    #[tokio::test]
    async fn it_sends_only_to_allowed_chats() {
        let fake = FakeTelegram::start("1:tool-test");
        let api = Api::new(HttpClient::new(ClientOptions::default()), &fake.base_url(), "1:tool-test");
        let fixture = crate::testing::Fixture::new(&[("channels.telegram.allow_from", "9, 42")]);
        let ctx = fixture.ctx();
        let gate = Arc::new(Gate::open(&ctx.ws).unwrap());
        let tool = SendText { outlet: TelegramOutlet::new(api), gate: Arc::clone(&gate) };
        let args = |chat: &str, text: &str| SendTextArgs { chat_id: chat.into(), text: text.into() };

        let refused = tool.call(&ctx, args("7", "hello")).await.unwrap_err();
        assert_eq!(refused.kind(), ToolErrorKind::Refused, "{refused}");
        tool.call(&ctx, args("42", "**hi** <there>")).await.unwrap();
        // A group where an allowed person talked.
        assert_eq!(tool.call(&ctx, args("-100", "group note")).await.unwrap_err().kind(), ToolErrorKind::Refused);
        gate.note_chat(CHANNEL, "-100", "9", 1_700_000_000);
        tool.call(&ctx, args("-100", "group note")).await.unwrap();
        let sent = fake.sent();
        assert_eq!(sent.len(), 2);
        assert_eq!(
            (sent[0].chat_id, sent[0].text.as_str(), sent[0].parse_mode.as_deref()),
            (42, "hi <there>", Some("HTML"))
        );
        assert_eq!((sent[1].chat_id, sent[1].text.as_str()), (-100, "group note"));

        for (chat, text) in [("../42", "x"), ("", "x"), ("42", "  "), ("4-2", "x")] {
            let e = tool.call(&ctx, args(chat, text)).await.unwrap_err();
            assert_eq!(e.kind(), ToolErrorKind::InvalidArgs, "{e}");
        }
        assert_eq!(fake.sent().len(), 2);
    }
}
