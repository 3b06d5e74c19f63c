//! The `im` group: Chela sends on its own, through the outlet of a running channel
//! ([`crate::daemon::Outlets`]). Registered by the daemon, which owns the outlets; `chela chat`
//! alone has no channel to send through and so no such group. `im_send_text` ([`super::send`])
//! and `im_send_media` send to any running channel.
//!
//! Only chats the pairing gate lets Chela write to are sent to ([`Gate::may_send`]): listed in a
//! channel's `allow_from`, an approved person's own chat, a chat where someone allowed talked,
//! and the gateway's clients, who are the owner.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;

use super::outlet::Outlets;
use crate::access::{Gate, send_refused};
use crate::tools::{Group, Tool, ToolCtx, ToolError, ToolResult};
use chela_runtime::read_args;

/// The largest file sent: what the Telegram Bot API accepts from a bot, the smallest platform
/// limit of the channels.
pub const MAX_MEDIA_BYTES: u64 = 50 * 1024 * 1024;

/// The longest caption: Telegram's limit for a media caption.
pub const MAX_CAPTION_CHARS: usize = 1024;

pub fn group(outlets: Arc<Outlets>, gate: Arc<Gate>) -> Group {
    Group::new("im", "Send messages and files to the chats of the running channels.")
        .hidden("send to chats")
        .guidance(
            "IM: im_send_text sends a message and im_send_media a workspace file (for example a report \
             you wrote) to a chat of a running channel (telegram, feishu, ws); only chats allowed to talk \
             to you can be reached.",
        )
        .with(super::send::ImSendText { outlets: Arc::clone(&outlets), gate: Arc::clone(&gate) })
        .with(ImSendMedia { outlets, gate })
}

pub struct ImSendMedia {
    outlets: Arc<Outlets>,
    gate: Arc<Gate>,
}

pub struct MediaArgs {
    channel: String,
    chat_id: String,
    path: String,
    caption: String,
}

read_args!(MediaArgs { channel: need, chat_id: need, path: need, caption: or_default });

impl Tool for ImSendMedia {
    const NAME: &'static str = "im_send_media";
    const DESCRIPTION: &'static str =
        "Send a file from the workspace to a chat of a running channel, with an optional caption.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"channel":{"type":"string","description":"telegram, feishu or ws"},"chat_id":{"type":"string","description":"The chat to send to, as the channel names it"},"path":{"type":"string","description":"The file, relative to the workspace"},"caption":{"type":"string","description":"Text shown with the file (at most 1024 characters)"}},"required":["channel","chat_id","path"]}"#;
    type Args = MediaArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: MediaArgs) -> ToolResult {
        if a.caption.chars().count() > MAX_CAPTION_CHARS {
            return Err(ToolError::invalid_args(format!(
                "The caption is over {MAX_CAPTION_CHARS} characters; shorten it or send the text as a message."
            )));
        }
        if !self.gate.may_send(&ctx.cfg, &a.channel, &a.chat_id) {
            return Err(ToolError::refused(send_refused(&a.channel, &a.chat_id)));
        }
        let Some(outlet) = self.outlets.get(&a.channel) else {
            let running = self.outlets.channels();
            let running = if running.is_empty() { "none".to_owned() } else { running.join(", ") };
            return Err(ToolError::not_found(format!(
                "The {} channel is not running, so it cannot send (running: {running}).",
                a.channel
            )));
        };
        // Opened beneath the workspace (no symlink, hard link or special file), off the async
        // workers; the outlet then reads this very file through /proc/self/fd, so a file swapped
        // in under the same name meanwhile is never what is sent.
        let (c, rel) = (ctx.clone(), a.path.clone());
        let (file, size) = crate::tasks::blocking(move || crate::tools::files::open_workspace_file(&c, &rel))
            .await
            .map_err(|e| ToolError::new(format!("opening {} stopped unexpectedly: {e}", a.path)))??;
        if size > MAX_MEDIA_BYTES {
            return Err(ToolError::refused(format!(
                "`{}` is {size} bytes; the most a channel takes is {MAX_MEDIA_BYTES} bytes.",
                a.path
            )));
        }
        let handle = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        outlet
            .send_file(&a.chat_id, &handle, &a.caption)
            .await
            .map_err(|e| ToolError::new(format!("{} did not take the file: {e}", a.channel)))?;
        drop(file);
        Ok(serde_json::json!({"sent": a.path, "bytes": size, "channel": a.channel, "chat_id": a.chat_id}).to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::daemon::outlet::{BoxFuture, Outlet};
    use crate::testing::Fixture;

    /// Records what it was asked to send, reading the file as a channel uploading it would.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, Vec<u8>, String)>>);

    struct Fake(Arc<Recorder>);

    impl Outlet for Fake {
        fn channel(&self) -> &str {
            "telegram"
        }
        fn send_text<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Result<(), String>> {
            Box::pin(async { Err("text is not what this test sends".to_owned()) })
        }
        fn send_file<'a>(
            &'a self,
            chat: &'a str,
            path: &'a Path,
            caption: &'a str,
        ) -> BoxFuture<'a, Result<(), String>> {
            Box::pin(async move {
                let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
                self.0.0.lock().unwrap().push((chat.to_owned(), bytes, caption.to_owned()));
                Ok(())
            })
        }
    }

    /// The tool over the fixture's own pairing store, as the daemon builds it.
    fn tool(rec: &Arc<Recorder>, fx: &Fixture) -> ImSendMedia {
        tool_on(rec, &Arc::new(Gate::open(&fx.ctx().ws).unwrap()))
    }

    fn tool_on(rec: &Arc<Recorder>, gate: &Arc<Gate>) -> ImSendMedia {
        let outlets = Arc::new(Outlets::default());
        outlets.register(Arc::new(Fake(Arc::clone(rec))));
        ImSendMedia { outlets, gate: Arc::clone(gate) }
    }

    #[tokio::test]
    async fn a_workspace_file_goes_to_an_allowed_chat_through_the_channels_outlet() {
        let fx = Fixture::new(&[("channels.telegram.allow_from", "42")]);
        std::fs::write(fx.root().join("report.txt"), b"the numbers").unwrap();
        let rec = Arc::new(Recorder::default());
        let args = json!({"channel": "telegram", "chat_id": "42", "path": "report.txt", "caption": "today"});
        let out = fx.call(tool(&rec, &fx), args).await.unwrap();
        assert!(out.contains("\"bytes\":11"), "{out}");
        assert_eq!(*rec.0.lock().unwrap(), [("42".to_owned(), b"the numbers".to_vec(), "today".to_owned())]);
    }

    #[tokio::test]
    async fn chats_not_allowed_channels_not_running_and_files_outside_are_refused() {
        let fx = Fixture::new(&[("channels.telegram.allow_from", "42")]);
        std::fs::write(fx.root().join("report.txt"), b"x").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), fx.root().join("link")).unwrap();
        let rec = Arc::new(Recorder::default());
        let send = |channel: &str, chat: &str, path: &str| json!({"channel": channel, "chat_id": chat, "path": path});

        let e = fx.call(tool(&rec, &fx), send("telegram", "666", "report.txt")).await.unwrap_err();
        assert!(e.0.contains("may not write") && e.0.contains("channels.telegram.allow_from"), "{}", e.0);
        let e = fx.call(tool(&rec, &fx), send("feishu", "*", "report.txt")).await.unwrap_err();
        assert!(e.0.contains("may not write"), "a chat id of * is no wildcard: {}", e.0);
        // `*` lets anyone talk but opens no chat for writing: only one where someone talked.
        let fx_star = Fixture::new(&[("channels.feishu.allow_from", "*")]);
        std::fs::write(fx_star.root().join("report.txt"), b"x").unwrap();
        let e = fx_star.call(tool(&rec, &fx_star), send("feishu", "oc_1", "report.txt")).await.unwrap_err();
        assert!(e.0.contains("may not write"), "{}", e.0);
        let fx_open = Fixture::new(&[("channels.feishu.allow_from", "ou_1")]);
        std::fs::write(fx_open.root().join("report.txt"), b"x").unwrap();
        let e = fx_open.call(tool(&rec, &fx_open), send("feishu", "ou_1", "report.txt")).await.unwrap_err();
        assert!(e.0.contains("feishu channel is not running") && e.0.contains("running: telegram"), "{}", e.0);
        for path in ["../report.txt", "link", "missing.txt"] {
            let e = fx.call(tool(&rec, &fx), send("telegram", "42", path)).await.unwrap_err();
            assert!(!e.0.is_empty(), "{path}");
        }
        let long = json!({"channel": "telegram", "chat_id": "42", "path": "report.txt", "caption": "x".repeat(1025)});
        assert!(fx.call(tool(&rec, &fx), long).await.unwrap_err().0.contains("caption is over"));
        assert!(rec.0.lock().unwrap().is_empty(), "nothing was sent");
    }

    #[tokio::test]
    async fn a_chat_where_a_paired_person_talked_may_receive_until_they_are_revoked() {
        let fx = Fixture::new(&[]);
        std::fs::write(fx.root().join("report.txt"), b"x").unwrap();
        let rec = Arc::new(Recorder::default());
        let send = |chat: &str| json!({"channel": "telegram", "chat_id": chat, "path": "report.txt"});
        assert!(fx.call(tool(&rec, &fx), send("-77")).await.unwrap_err().0.contains("may not write"));
        // A session file is no pass: only the gate's record of who talked where is.
        let session = fx.ctx().ws.session_path("telegram", "-77");
        std::fs::create_dir_all(session.parent().unwrap()).unwrap();
        std::fs::write(&session, "").unwrap();
        assert!(fx.call(tool(&rec, &fx), send("-77")).await.unwrap_err().0.contains("may not write"));
        // The owner approves sender 7 (another process: its own gate), who then talks in group -77.
        let owner = Gate::open(&fx.ctx().ws).unwrap();
        let code = match owner.admit(&fx.ctx().cfg, "telegram", "7", 1_700_000_000) {
            chela_core::access::Admission::NewCode { code } => code,
            other => panic!("{other:?}"),
        };
        owner.approve(&code, 1_700_000_001).unwrap();
        owner.note_chat("telegram", "-77", "7", 1_700_000_002);
        // One gate for the whole test, as the running daemon keeps one.
        let gate = Arc::new(Gate::open(&fx.ctx().ws).unwrap());
        fx.call(tool_on(&rec, &gate), send("-77")).await.unwrap();
        fx.call(tool_on(&rec, &gate), send("7")).await.unwrap();
        assert_eq!(rec.0.lock().unwrap().len(), 2);
        // Revoked from another process: the running tool's next send is refused at once.
        owner.revoke("telegram", "7").unwrap();
        for chat in ["-77", "7"] {
            assert!(fx.call(tool_on(&rec, &gate), send(chat)).await.unwrap_err().0.contains("may not write"), "{chat}");
        }
        assert_eq!(rec.0.lock().unwrap().len(), 2);
    }
}
