//! Images and the model: which images a turn shows it (the bounds and `model.vision`), and a
//! one-shot question about an image ([`describe_image`]) for callers that are not a chat
//! (a xiaozhi device's camera tool will post to `/mcp/vision/explain` through it).
//!
//! A tool's images reach the model in the turn the tool ran, within `tools.max_image_bytes`
//! per result and `tools.max_turn_image_bytes` per turn; an image past a bound, or any image
//! when `model.vision` is off, becomes a note in the result's text naming the setting. The
//! session file keeps notes, not images (`crate::turn`).

use base64::Engine;
use chela_core::agent::ModelCall;
use chela_core::config as keys;
use chela_proto::chat::{Block, Image, Message, Role, ToolChoice, size_words};

use crate::config::Config;
use crate::provider::Provider;
use crate::tools::ToolOutput;

/// What the model may still be shown of tool images in one turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageBudget {
    vision: bool,
    per_result: usize,
    left: usize,
}

impl ImageBudget {
    /// A fresh budget for one turn, from `model.vision`, `tools.max_image_bytes` and
    /// `tools.max_turn_image_bytes`.
    pub fn for_turn(cfg: &Config) -> ImageBudget {
        let bytes = |k| usize::try_from(cfg.int(k)).unwrap_or(0);
        ImageBudget {
            vision: cfg.bool(keys::MODEL_VISION),
            per_result: bytes(keys::TOOLS_MAX_IMAGE_BYTES),
            left: bytes(keys::TOOLS_MAX_TURN_IMAGE_BYTES),
        }
    }

    /// Whether the model takes images at all (`model.vision`).
    pub fn vision(&self) -> bool {
        self.vision
    }

    /// Splits a tool's output into the text the model reads and the images it is shown. An
    /// image that does not fit is a note in the text, saying which bound it hit; the bytes of
    /// those shown are taken from the turn's budget. Sizes are decoded bytes.
    pub fn admit(&mut self, out: ToolOutput) -> (String, Vec<Image>) {
        let ToolOutput { mut text, images } = out;
        let mut shown = Vec::new();
        let mut in_result = 0usize;
        for image in images {
            let size = image.byte_len();
            let why = if !self.vision {
                Some("not shown: the model takes text only (model.vision = false)".to_owned())
            } else if in_result + size > self.per_result {
                Some(format!("not shown: over tools.max_image_bytes ({} per tool result)", size_words(self.per_result)))
            } else if size > self.left {
                Some("not shown: this turn's images are over tools.max_turn_image_bytes".to_owned())
            } else {
                None
            };
            match why {
                None => {
                    in_result += size;
                    self.left -= size;
                    shown.push(image);
                }
                Some(why) => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    let note = image.placeholder();
                    text.push_str(&note[..note.len() - 1]);
                    text.push_str("; ");
                    text.push_str(&why);
                    text.push(']');
                }
            }
        }
        (text, shown)
    }
}

/// Image types both wire formats take, with the bytes each file format starts with.
const SIGNATURES: &[(&str, &[u8])] = &[
    ("image/png", b"\x89PNG\r\n\x1a\n"),
    ("image/jpeg", b"\xff\xd8\xff"),
    ("image/gif", b"GIF8"),
    ("image/webp", b"RIFF"),
];

/// The media type `bytes` are, by their first bytes, if it is one the models take.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    SIGNATURES
        .iter()
        .find(|(mime, magic)| bytes.starts_with(magic) && (*mime != "image/webp" || webp(bytes)))
        .map(|(m, _)| *m)
}

fn webp(bytes: &[u8]) -> bool {
    bytes.get(8..12) == Some(b"WEBP")
}

/// Why [`describe_image`] gave no description.
#[derive(Debug, PartialEq, Eq)]
pub enum VisionError {
    /// The request cannot be sent (switched off, bad or oversize image, empty question).
    Refused(String),
    /// The model was asked and the call failed, or it answered nothing.
    Model(String),
}

impl std::fmt::Display for VisionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VisionError::Refused(s) | VisionError::Model(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for VisionError {}

/// Longest question [`describe_image`] passes on.
pub const MAX_QUESTION_BYTES: usize = 4096;

/// What the configured model says about an image: one call, no tools, no history. `mime` may
/// be empty (the bytes say what they are); when given it must match them. The image is bound
/// by `tools.max_image_bytes`, and refused when `model.vision` is off.
pub async fn describe_image(
    provider: &Provider,
    cfg: &Config,
    bytes: &[u8],
    mime: &str,
    question: &str,
) -> Result<String, VisionError> {
    let refuse = |s: String| Err(VisionError::Refused(s));
    if !cfg.bool(keys::MODEL_VISION) {
        return refuse(
            "The model is set to take text only (model.vision = false), so it cannot look at images. \
             Turn it on with `chela config set model.vision true` if the model takes images."
                .into(),
        );
    }
    let max = usize::try_from(cfg.int(keys::TOOLS_MAX_IMAGE_BYTES)).unwrap_or(0);
    if bytes.len() > max {
        return refuse(format!(
            "The image is {}; at most {} is sent to the model (tools.max_image_bytes).",
            size_words(bytes.len()),
            size_words(max)
        ));
    }
    let Some(found) = sniff(bytes) else {
        return refuse("That is not a PNG, JPEG, GIF or WebP image, the types the model takes.".into());
    };
    let mime = mime.trim().to_ascii_lowercase();
    if !mime.is_empty() && mime != found {
        return refuse(format!("The image was said to be {mime}, but its bytes are {found}."));
    }
    let question = question.trim();
    if question.is_empty() || question.len() > MAX_QUESTION_BYTES {
        return refuse(format!("The question must be 1 to {MAX_QUESTION_BYTES} bytes."));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    let messages = [Message {
        role: Role::User,
        content: vec![Block::Image { media_type: found.to_owned(), data }, Block::text(question)],
    }];
    let call = ModelCall {
        system: "Answer the question about the image briefly and plainly.",
        messages: &messages,
        tool_choice: ToolChoice::None,
        cache: Default::default(),
        format: None,
    };
    let provider = provider.unstreamed();
    let reply = provider.complete(&call, &[], &mut |_| {}).await.map_err(|e| VisionError::Model(provider.tell(&e)))?;
    let text = reply.into_message().text();
    let text = text.trim();
    if text.is_empty() {
        return Err(VisionError::Model("The model gave an empty answer about the image.".into()));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
#[path = "vision_tests.rs"]
mod tests;
