//! Who made a rule or a job, when the model did: what the model writes is data, never
//! authority.
//!
//! A rule of `rules.json` or a job of `cron.json` without a `made_by` is the owner's (written
//! by hand, by `chela cron add`, or before this field existed). One with a `made_by` was made by
//! the model through its tools, which set the field from the conversation the call was made in;
//! the model cannot choose it. Such a record acts with that conversation's rights (its tool
//! calls are the model's, with the groups the conversation saw), and only in that conversation,
//! until the owner approves it (`approved`, which only the owner's commands set).

use alloc::string::String;
use alloc::vec::Vec;

use serde::Serialize;

/// The longest channel name kept.
pub const MAX_CHANNEL: usize = 64;
/// The longest chat id kept.
pub const MAX_CHAT_ID: usize = 256;
/// The most capability groups a record keeps as its scope.
pub const MAX_GROUPS: usize = 64;
/// The longest group name kept.
pub const MAX_GROUP: usize = 64;

/// The conversation a model-made rule or job was made in, and what it may do. (Read by
/// `schedule::json::made_by`, which refuses unknown fields; `groups` and `approved` default.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MadeBy {
    pub channel: String,
    pub chat_id: String,
    /// The hidden groups the conversation could call when the record was made (a skill
    /// unlocked them): its tool calls run with these, never with more.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The owner allowed it to act beyond its own conversation.
    #[serde(skip_serializing_if = "is_false")]
    pub approved: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl MadeBy {
    /// Made in `(channel, chat_id)` with `groups` unlocked, not approved.
    pub fn new(channel: &str, chat_id: &str, groups: Vec<String>) -> MadeBy {
        MadeBy { channel: channel.into(), chat_id: chat_id.into(), groups, approved: false }
    }

    /// Checks the bounds; the message names the field under `made_by`.
    pub fn check(&self) -> Result<(), String> {
        let len = |field: &str, v: &str, max: usize| {
            if v.is_empty() || v.len() > max {
                Err(alloc::format!("made_by.{field}: must be 1 to {max} bytes"))
            } else {
                Ok(())
            }
        };
        len("channel", &self.channel, MAX_CHANNEL)?;
        len("chat_id", &self.chat_id, MAX_CHAT_ID)?;
        if self.groups.len() > MAX_GROUPS {
            return Err(alloc::format!("made_by.groups: {} groups; at most {MAX_GROUPS}", self.groups.len()));
        }
        for g in &self.groups {
            len("groups[]", g, MAX_GROUP)?;
        }
        Ok(())
    }

    /// Whether `(channel, chat_id)` is the conversation it was made in.
    pub fn is_own(&self, channel: &str, chat_id: &str) -> bool {
        self.channel == channel && self.chat_id == chat_id
    }

    /// Whether it is held to its own conversation (not approved by the owner).
    pub fn confined(&self) -> bool {
        !self.approved
    }

    /// `telegram/42`, for logs and listings.
    pub fn chat(&self) -> String {
        alloc::format!("{}/{}", self.channel, self.chat_id)
    }
}

#[cfg(test)]
mod tests;
