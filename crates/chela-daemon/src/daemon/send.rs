//! The one way a tool sends text to a chat: the pairing gate's check ([`Gate::may_send`]), then
//! the channel's [`Outlet`]. Behind `im_send_text`, and behind the names the channels documented
//! before it (`telegram_send_text`, `feishu_send_message`), which stay as aliases with their
//! own schemas and chat-id checks so prompts and skills written for them keep working.

use std::sync::Arc;

use super::outlet::{Outlet, Outlets};
use crate::access::{Gate, send_refused};
use crate::tools::{Tool, ToolCtx, ToolError, ToolResult};
use chela_runtime::read_args;

/// The longest text one call sends: four messages' worth on the platform with the smallest
/// messages (Feishu's pieces of 4000 characters).
pub const MAX_TEXT_CHARS: usize = 16_000;

/// Sends `text` to `chat_id` through `outlet`, if the gate lets Chela write there. `max_chars`
/// is the caller's bound (an alias keeps the one it documented).
pub async fn send_text(
    outlet: &dyn Outlet,
    gate: &Gate,
    ctx: &ToolCtx,
    chat_id: &str,
    text: &str,
    max_chars: usize,
) -> Result<(), ToolError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ToolError::invalid_args("The text is empty."));
    }
    if text.chars().count() > max_chars {
        return Err(ToolError::invalid_args(format!(
            "The text is longer than {max_chars} characters; send less, or in several messages."
        )));
    }
    let channel = outlet.channel();
    if !gate.may_send(&ctx.cfg, channel, chat_id) {
        return Err(ToolError::refused(send_refused(channel, chat_id)));
    }
    outlet
        .send_text(chat_id, text)
        .await
        .map_err(|e| ToolError::new(format!("{channel} did not take the message: {e}")))
}

/// `im_send_text`: a message to a chat of any running channel.
pub struct ImSendText {
    pub outlets: Arc<Outlets>,
    pub gate: Arc<Gate>,
}

pub struct TextArgs {
    channel: String,
    chat_id: String,
    text: String,
}

read_args!(TextArgs { channel: need, chat_id: need, text: need });

impl Tool for ImSendText {
    const NAME: &'static str = "im_send_text";
    const DESCRIPTION: &'static str =
        "Send a message (Markdown) to a chat of a running channel where an allowed person has talked to you.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"channel":{"type":"string","description":"telegram, feishu or ws"},"chat_id":{"type":"string","description":"The chat to send to, as the channel names it"},"text":{"type":"string","description":"The message, in Markdown."}},"required":["channel","chat_id","text"]}"#;
    type Args = TextArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: TextArgs) -> ToolResult {
        let chat = a.chat_id.trim();
        // Asked first, so a disallowed chat learns nothing of which channels run.
        if !self.gate.may_send(&ctx.cfg, &a.channel, chat) {
            return Err(ToolError::refused(send_refused(&a.channel, chat)));
        }
        let Some(outlet) = self.outlets.get(&a.channel) else {
            let running = self.outlets.channels();
            let running = if running.is_empty() { "none".to_owned() } else { running.join(", ") };
            return Err(ToolError::not_found(format!(
                "The {} channel is not running, so it cannot send (running: {running}).",
                a.channel
            )));
        };
        send_text(outlet.as_ref(), &self.gate, ctx, chat, &a.text, MAX_TEXT_CHARS).await?;
        Ok(serde_json::json!({"sent": true, "channel": a.channel, "chat_id": chat}).to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;

    use super::*;
    use crate::daemon::BoxFuture;
    use crate::testing::Fixture;
    use crate::tools::ToolErrorKind;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, String)>>);

    impl Outlet for Recorder {
        fn channel(&self) -> &str {
            "telegram"
        }
        fn send_text<'a>(&'a self, chat: &'a str, text: &'a str) -> BoxFuture<'a, Result<(), String>> {
            self.0.lock().unwrap().push((chat.to_owned(), text.to_owned()));
            Box::pin(async { Ok(()) })
        }
        fn send_file<'a>(&'a self, _: &'a str, _: &'a Path, _: &'a str) -> BoxFuture<'a, Result<(), String>> {
            Box::pin(async { Err("files are not what this test sends".to_owned()) })
        }
    }

    #[tokio::test]
    async fn it_sends_through_the_channels_outlet_only_to_chats_the_gate_opens() {
        let fx = Fixture::new(&[("channels.telegram.allow_from", "42")]);
        let ctx = fx.ctx();
        let outlets = Arc::new(Outlets::default());
        let rec = Arc::new(Recorder::default());
        outlets.register(Arc::clone(&rec) as Arc<dyn Outlet>);
        let tool = ImSendText { outlets, gate: Arc::new(Gate::open(&ctx.ws).unwrap()) };
        let args = |channel: &str, chat: &str, text: &str| TextArgs {
            channel: channel.into(),
            chat_id: chat.into(),
            text: text.into(),
        };

        tool.call(&ctx, args("telegram", "42", " **hi** ")).await.unwrap();
        assert_eq!(rec.0.lock().unwrap().clone(), [("42".to_owned(), "**hi**".to_owned())]);
        let refused = tool.call(&ctx, args("telegram", "7", "hello")).await.unwrap_err();
        assert_eq!(refused.kind(), ToolErrorKind::Refused, "{refused}");
        let empty = tool.call(&ctx, args("telegram", "42", "  ")).await.unwrap_err();
        assert_eq!(empty.kind(), ToolErrorKind::InvalidArgs, "{empty}");
        let long = "x".repeat(MAX_TEXT_CHARS + 1);
        assert_eq!(
            tool.call(&ctx, args("telegram", "42", &long)).await.unwrap_err().kind(),
            ToolErrorKind::InvalidArgs
        );
        // The gateway's clients are the owner, so the gate opens; but no ws outlet runs here.
        let missing = tool.call(&ctx, args("ws", "ws_1", "hi")).await.unwrap_err();
        assert_eq!(missing.kind(), ToolErrorKind::NotFound, "{missing}");
        assert_eq!(rec.0.lock().unwrap().len(), 1);
    }
}
