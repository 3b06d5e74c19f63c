//! What the fake answers when its script is empty: a small deterministic "model" that lets a
//! newcomer chat with the fake and watch a tool call happen.
//!
//! 1. If the request ends with tool results, it reports them: `Tool get_current_time returned: …`.
//! 2. Else, if a tool named `get_current_time` is offered and the last user text mentions
//!    "time", it calls that tool with `{}`.
//! 3. Else it echoes: `You said: <last user text>`.

use crate::answer::{Answer, empty_input};
use crate::script::ToolCall;

/// The demo's tool.
pub(crate) const TIME_TOOL: &str = "get_current_time";

/// What the demo reads from a request, in neither wire format.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Conversation {
    /// Text of the last user message, if there is one.
    pub last_user_text: Option<String>,
    /// `(tool name, result text)` for the tool results that end the conversation.
    pub tool_results: Vec<(String, String)>,
    /// Names of the offered tools.
    pub tools: Vec<String>,
}

pub(crate) fn answer(conv: &Conversation) -> Answer {
    if !conv.tool_results.is_empty() {
        let lines: Vec<String> =
            conv.tool_results.iter().map(|(name, content)| format!("Tool {name} returned: {content}")).collect();
        return Answer::text(lines.join("\n"));
    }
    let said = person_text(conv.last_user_text.as_deref().unwrap_or_default());
    if conv.tools.iter().any(|t| t == TIME_TOOL) && said.to_lowercase().contains("time") {
        return Answer { text: None, calls: vec![ToolCall { name: TIME_TOOL.into(), input: empty_input() }] };
    }
    Answer::text(format!("You said: {said}"))
}

/// What the person wrote, without the context Chela sends in front of it each turn (the time,
/// the channel, recent notes, in `<turn_context>…</turn_context>`): a model answers the
/// person, not the context, and the context's "Local time" is no question about the time.
pub fn person_text(text: &str) -> &str {
    match text.strip_prefix("<turn_context>\n").and_then(|rest| rest.split_once("\n</turn_context>")) {
        Some((_, after)) => after.strip_prefix("\n\n").unwrap_or(after),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(text: &str, tools: &[&str], results: &[(&str, &str)]) -> Conversation {
        Conversation {
            last_user_text: Some(text.into()),
            tool_results: results.iter().map(|(n, c)| (n.to_string(), c.to_string())).collect(),
            tools: tools.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn the_turns_context_is_not_what_the_person_said() {
        let sent = "<turn_context>\n## This conversation\n\nLocal time: noon.\n</turn_context>\n\nhello";
        assert_eq!(answer(&conv(sent, &[TIME_TOOL], &[])), Answer::text("You said: hello"));
        assert_eq!(person_text("<turn_context>\nno end"), "<turn_context>\nno end");
    }

    #[test]
    fn echoes_without_the_time_tool_or_without_asking_the_time() {
        assert_eq!(answer(&conv("What TIME is it?", &["other"], &[])), Answer::text("You said: What TIME is it?"));
        assert_eq!(answer(&conv("hello", &[TIME_TOOL], &[])), Answer::text("You said: hello"));
        assert_eq!(answer(&Conversation::default()), Answer::text("You said: "));
    }

    #[test]
    fn calls_the_time_tool_when_asked_the_time() {
        let a = answer(&conv("What TIME is it?", &["x", TIME_TOOL], &[]));
        assert_eq!(a.text, None);
        assert_eq!(a.calls, vec![ToolCall { name: TIME_TOOL.into(), input: empty_input() }]);
    }

    #[test]
    fn reports_tool_results_before_anything_else() {
        let a = answer(&conv("time?", &[TIME_TOOL], &[("get_current_time", "12:00"), ("b", "2")]));
        assert_eq!(a, Answer::text("Tool get_current_time returned: 12:00\nTool b returned: 2"));
    }
}
