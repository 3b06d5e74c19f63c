//! The JSON text messages of the WebSocket channel, both directions, as one [`Message`] enum.
//!
//! A device sends `hello`, `listen`, `abort`, `mcp` (and over MQTT `goodbye`); the server sends
//! `hello`, `stt`, `llm`, `tts`, `alert`, `system`, `mcp`, `goodbye`. Fields the firmware or a
//! newer server add are ignored; a `type` this module does not know is
//! [`MessageError::UnknownType`], never a silent default. `session_id` is optional everywhere:
//! devices put it on every message, servers need not.

use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::string::ToString;
use core::fmt;

use serde::{Deserialize, Serialize};

/// Longest text message parsed. A device's MCP `tools/list` page is about 8 KB; this leaves room.
pub const MAX_MESSAGE: usize = 256 * 1024;

/// One text message.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Message {
    Hello(Hello),
    Listen(Listen),
    Abort(Abort),
    Stt(Stt),
    Llm(Llm),
    Tts(Tts),
    Alert(Alert),
    System(System),
    Mcp(Mcp),
    Goodbye(Goodbye),
}

/// `hello`: the device's opening message, and the server's answer (within 10 s).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_params: Option<AudioParams>,
}

impl Hello {
    /// The server's answer: WebSocket transport, downlink Opus at `sample_rate` Hz in
    /// `frame_duration` ms packets.
    pub fn server(session_id: &str, sample_rate: u32, frame_duration: u32) -> Hello {
        Hello {
            version: None,
            transport: Some("websocket".to_owned()),
            session_id: Some(session_id.to_owned()),
            features: None,
            audio_params: Some(AudioParams { format: "opus".to_owned(), sample_rate, channels: 1, frame_duration }),
        }
    }
}

/// `features` of a device hello.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aec: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glyph_push: Option<bool>,
    /// Sent by the xiaozhi-sdk simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistent_sample_rate: Option<bool>,
}

/// `audio_params`: Opus, mono, with the sample rate and packet length.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioParams {
    #[serde(default = "opus")]
    pub format: String,
    #[serde(default = "rate")]
    pub sample_rate: u32,
    #[serde(default = "one")]
    pub channels: u32,
    #[serde(default = "sixty")]
    pub frame_duration: u32,
}

fn opus() -> String {
    "opus".to_owned()
}
fn rate() -> u32 {
    16_000
}
fn one() -> u32 {
    1
}
fn sixty() -> u32 {
    60
}

/// `listen`: the microphone starts, stops, or a wake word (or typed text) was detected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listen {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub state: ListenState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ListenMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListenState {
    Start,
    Stop,
    Detect,
}

/// Who ends a turn: the server's VAD (`auto`), the device's `stop` (`manual`), or the server's
/// VAD with the microphone open while the device speaks (`realtime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListenMode {
    Auto,
    Manual,
    Realtime,
}

/// `abort`: stop speaking (barge-in). `reason` is e.g. `wake_word_detected`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Abort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `stt`: what the person said, for the screen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stt {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub text: String,
}

/// `llm`: the face to show (`emotion`, one of [`EMOTIONS`]) and its emoji.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Llm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub emotion: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The emotion names the firmware has faces for.
pub const EMOTIONS: &[&str] = &[
    "neutral",
    "happy",
    "laughing",
    "funny",
    "sad",
    "angry",
    "crying",
    "loving",
    "embarrassed",
    "surprised",
    "shocked",
    "thinking",
    "winking",
    "cool",
    "relaxed",
    "delicious",
    "kissy",
    "confident",
    "sleepy",
    "silly",
    "confused",
];

/// `tts`: speaking starts (send before the first audio frame), a sentence's subtitle, or stops.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub state: TtsState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TtsState {
    Start,
    SentenceStart,
    Stop,
}

/// `alert`: the firmware needs all three fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub status: String,
    pub message: String,
    pub emotion: String,
}

/// `system`: `reboot` is the only command the firmware knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct System {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub command: String,
}

/// `mcp`: one JSON-RPC 2.0 message in an envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mcp {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub payload: serde_json::Value,
}

/// `goodbye`: ends the session (MQTT transport; on WebSocket closing the socket does).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goodbye {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// Why a text message was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageError {
    TooLarge {
        len: usize,
        max: usize,
    },
    /// Not a JSON object.
    NotJson(String),
    /// No string `type`.
    MissingType,
    /// A `type` this version does not know (the driver logs it and carries on).
    UnknownType(String),
    /// A known type with a missing or mistyped field.
    Invalid {
        kind: String,
        reason: String,
    },
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageError::TooLarge { len, max } => {
                write!(f, "a text message of {len} bytes is over the {max}-byte limit")
            }
            MessageError::NotJson(e) => write!(f, "the text message is not a JSON object: {e}"),
            MessageError::MissingType => f.write_str("the message has no string `type`"),
            MessageError::UnknownType(t) => write!(f, "unknown message type `{}`", clip(t)),
            MessageError::Invalid { kind, reason } => write!(f, "a `{kind}` message is not valid: {reason}"),
        }
    }
}

/// At most 40 characters of a peer's string, for messages.
fn clip(s: &str) -> &str {
    s.char_indices().nth(40).map_or(s, |(i, _)| &s[..i])
}

/// One known message's fields.
fn typed<T: serde::de::DeserializeOwned>(kind: &str, v: serde_json::Value) -> Result<T, MessageError> {
    serde_json::from_value(v).map_err(|e| MessageError::Invalid { kind: kind.to_owned(), reason: e.to_string() })
}

/// Parses one text message.
pub fn parse(text: &str) -> Result<Message, MessageError> {
    if text.len() > MAX_MESSAGE {
        return Err(MessageError::TooLarge { len: text.len(), max: MAX_MESSAGE });
    }
    // serde_json's own recursion limit (128) bounds the nesting of an `mcp` payload.
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| MessageError::NotJson(e.to_string()))?;
    let serde_json::Value::Object(ref map) = value else {
        return Err(MessageError::NotJson("it is not an object".to_owned()));
    };
    let Some(kind) = map.get("type").and_then(serde_json::Value::as_str) else { return Err(MessageError::MissingType) };
    let kind = kind.to_owned();
    Ok(match kind.as_str() {
        "hello" => Message::Hello(typed(&kind, value)?),
        "listen" => Message::Listen(typed(&kind, value)?),
        "abort" => Message::Abort(typed(&kind, value)?),
        "stt" => Message::Stt(typed(&kind, value)?),
        "llm" => Message::Llm(typed(&kind, value)?),
        "tts" => Message::Tts(typed(&kind, value)?),
        "alert" => Message::Alert(typed(&kind, value)?),
        "system" => Message::System(typed(&kind, value)?),
        "mcp" => Message::Mcp(typed(&kind, value)?),
        "goodbye" => Message::Goodbye(typed(&kind, value)?),
        _ => return Err(MessageError::UnknownType(kind)),
    })
}

impl Message {
    /// The message as one JSON text, `type` first.
    pub fn to_json(&self) -> String {
        // Plain structs of strings, numbers and a JSON value: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
