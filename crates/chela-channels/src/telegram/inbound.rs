//! A Telegram message from a sender who may talk, turned into the user's [`Message`]: text as
//! is; a photo downloaded (within `channels.telegram.max_file_bytes`) into an image block; a
//! document or voice note downloaded into the workspace's `inbox/` under a safe name and
//! announced by its path.

use std::ffi::OsString;

use base64::Engine;
use chela_proto::chat::{Block, Message, Role};
use serde_json::Value;

use super::api::{Api, ApiError};
use crate::workspace::{Replace, Workspace, open_dir, write_atomic_at};

/// Telegram sends at most 4096 characters of text (16 KiB of UTF-8); anything longer is not
/// from Telegram and is refused rather than given to the model.
const MAX_TEXT_BYTES: usize = 16 * 1024;
/// Longest file name kept from the sender's (the rest is cut).
const MAX_NAME: usize = 80;

/// The user's message; `Ok(None)` for updates with nothing Chela reads (stickers, locations);
/// `Err` with a sentence for the sender when the message cannot be taken.
pub async fn message(api: &Api, ws: &Workspace, msg: &Value, max_file: usize) -> Result<Option<Message>, String> {
    let text = msg["text"].as_str().or_else(|| msg["caption"].as_str()).unwrap_or("");
    if text.len() > MAX_TEXT_BYTES {
        return Err(format!(
            "That message is too long for me ({} bytes; Telegram's own limit is 4096 characters).",
            text.len()
        ));
    }
    let mut content = Vec::new();
    if let Some(sizes) = msg["photo"].as_array() {
        content.push(photo(api, sizes, max_file).await?);
    } else if let Some(doc) = msg.get("document").filter(|d| d.is_object()) {
        let name = doc["file_name"].as_str().unwrap_or("document");
        let path = save(api, ws, doc, name, msg, max_file).await?;
        let mime = doc["mime_type"].as_str().unwrap_or("unknown type");
        content.push(Block::text(format!("[The user sent a file, saved as {path} ({mime}).]")));
    } else if let Some(voice) = msg.get("voice").filter(|v| v.is_object()) {
        let path = save(api, ws, voice, "voice.oga", msg, max_file).await?;
        let secs = voice["duration"].as_u64().unwrap_or(0);
        content.push(Block::text(format!("[The user sent a voice note of {secs} s, saved as {path}.]")));
    } else if text.is_empty() {
        return Ok(None);
    }
    if !text.is_empty() {
        content.push(Block::text(text));
    }
    Ok(Some(Message { role: Role::User, content }))
}

fn too_large(max_file: usize) -> String {
    format!("That file is larger than I accept ({} KB at most; channels.telegram.max_file_bytes).", max_file / 1024)
}

fn refusal(what: &str, e: &ApiError, max_file: usize) -> String {
    match e {
        ApiError::TooLarge => too_large(max_file),
        _ => {
            chela_log::warn!("telegram: {what}: {e}");
            format!("I could not download that {what} from Telegram; please send it again.")
        }
    }
}

/// Downloads the file `file` (a Bot API object with `file_id` and maybe `file_size`).
async fn download(api: &Api, file: &Value, what: &str, max_file: usize) -> Result<bytes::Bytes, String> {
    if file["file_size"].as_u64().is_some_and(|n| n > max_file as u64) {
        return Err(too_large(max_file));
    }
    let Some(id) = file["file_id"].as_str() else { return Err(format!("Telegram sent the {what} without a file id.")) };
    let info = api.get_file(id).await.map_err(|e| refusal(what, &e, max_file))?;
    if info.file_size.is_some_and(|n| n > max_file as u64) {
        return Err(too_large(max_file));
    }
    let Some(path) = info.file_path else { return Err(format!("Telegram has no copy of that {what} to download.")) };
    api.download(&path, max_file).await.map_err(|e| refusal(what, &e, max_file))
}

/// The largest size of a photo that is within the bound (Telegram lists them smallest first).
async fn photo(api: &Api, sizes: &[Value], max_file: usize) -> Result<Block, String> {
    let fits = |s: &&Value| s["file_size"].as_u64().is_none_or(|n| n <= max_file as u64);
    let Some(best) = sizes.iter().rev().find(fits) else { return Err(too_large(max_file)) };
    let bytes = download(api, best, "photo", max_file).await?;
    // Telegram re-encodes every photo as JPEG; the bytes say otherwise only for a fake.
    let media_type = match bytes.get(..4) {
        Some([0x89, b'P', b'N', b'G']) => "image/png",
        Some([b'R', b'I', b'F', b'F']) => "image/webp",
        Some([b'G', b'I', b'F', b'8']) => "image/gif",
        _ => "image/jpeg",
    };
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(Block::Image { media_type: media_type.to_owned(), data })
}

/// `name` reduced to `[A-Za-z0-9._-]`, never hidden, never empty, at most [`MAX_NAME`] bytes.
fn safe_name(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    let trimmed = out.trim_start_matches('.');
    out = if trimmed.is_empty() { "file".to_owned() } else { trimmed.to_owned() };
    if out.len() > MAX_NAME {
        // Keep the extension, which says what the file is.
        let ext = out.rfind('.').map(|i| out[i..].to_owned()).filter(|e| e.len() <= 16).unwrap_or_default();
        out.truncate(MAX_NAME - ext.len());
        out.push_str(&ext);
    }
    out
}

/// Downloads `file` into `inbox/` and returns its path relative to the workspace.
async fn save(
    api: &Api,
    ws: &Workspace,
    file: &Value,
    name: &str,
    msg: &Value,
    max_file: usize,
) -> Result<String, String> {
    let what = if name == "voice.oga" { "voice note" } else { "file" };
    let bytes = download(api, file, what, max_file).await?;
    let secs = crate::clock::Clock::system().unix_secs_u64();
    let unique = format!("{secs}-{}-{}", msg["message_id"].as_i64().unwrap_or(0), safe_name(name));
    let dir = ws.root().join("inbox");
    let file_name = unique.clone();
    let written = crate::tasks::blocking(move || -> std::io::Result<()> {
        std::fs::create_dir_all(&dir)?;
        let dir = open_dir(&dir)?;
        // Never over an existing file: two messages in the same second get different ids.
        write_atomic_at(&dir, &OsString::from(file_name), &bytes, Replace::No)
    })
    .await;
    match written {
        Ok(Ok(())) => Ok(format!("inbox/{unique}")),
        Ok(Err(e)) => {
            chela_log::warn!("telegram: cannot save inbox/{unique}: {e}");
            Err(format!("I could not save that {what} ({e})."))
        }
        Err(e) => Err(format!("I could not save that {what} ({e}).")),
    }
}

#[cfg(test)]
mod tests {
    use super::safe_name;

    #[test]
    fn inbox_names_are_safe() {
        assert_eq!(safe_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_name(".bashrc"), "bashrc");
        assert_eq!(safe_name("..."), "file");
        assert_eq!(safe_name("rapport été.pdf"), "rapport__t_.pdf");
        let long = format!("{}.pdf", "a".repeat(300));
        let cut = safe_name(&long);
        assert_eq!(cut.len(), 80);
        assert!(cut.ends_with(".pdf"));
    }
}
