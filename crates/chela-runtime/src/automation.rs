//! What the rules and the jobs share: who made one (the owner or the model, in which
//! conversation), what a tolerant reader of their stores found wrong, and the line said when a
//! model-made one waits for the owner. (`cron.json` is read by `crate::scheduler::read_file`
//! only, for the daemon, the CLI and `chela doctor` alike.)

use chela_core::cap::Caller;
use chela_core::router::MadeBy;

/// What a tolerant reader of `cron.json` or `rules.json` found wrong: one type for both stores.
#[derive(Clone, Debug)]
pub struct Problems<B> {
    /// Entries left out, with their line.
    pub bad: Vec<B>,
    /// The file could not be used at all (a symlink, too large, not UTF-8, not a list): nothing
    /// from it runs.
    pub whole: Option<String>,
}

impl<B> Default for Problems<B> {
    fn default() -> Self {
        Problems { bad: Vec::new(), whole: None }
    }
}

/// A bad entry as the log and `chela doctor` show it, naming its file and line.
pub trait BadLine {
    fn bad_line(&self) -> String;
}

impl BadLine for chela_core::schedule::file::BadEntry {
    fn bad_line(&self) -> String {
        format!("{} {self}", crate::authority::CRON_FILE)
    }
}

impl BadLine for chela_core::router::Problem {
    fn bad_line(&self) -> String {
        // The core's text already starts with `rules.json line N`.
        self.to_string()
    }
}

impl<B: BadLine> Problems<B> {
    pub fn is_empty(&self) -> bool {
        self.bad.is_empty() && self.whole.is_none()
    }

    /// One line per problem, for the log and `chela doctor`.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.whole.iter().cloned().collect();
        out.extend(self.bad.iter().map(BadLine::bad_line));
        out
    }
}

/// Who makes a rule or job through a tool: `Ok(None)` for the owner (`chela cap call`, the
/// owner's own rules, jobs and scripts), `Ok(Some(..))` for the model, with the conversation
/// the call was made in and the hidden groups that conversation could call then. Anything
/// called from a conversation is the model's, whoever the caller says it is. The model
/// without a conversation (an MCP client of `chela mcp serve`) cannot make one: there is no
/// chat to hold it to.
pub fn made_by(ctx: &crate::tools::ToolCtx) -> Result<Option<MadeBy>, String> {
    let Some((channel, chat_id)) = &ctx.conversation else {
        if ctx.caller == Caller::Model {
            return Err("rules and jobs made by the assistant belong to a conversation, and this call has none; \
                 the owner adds them with `chela cron add` or by editing rules.json"
                .to_owned());
        }
        return Ok(None);
    };
    let groups = ctx.session.as_ref().map_or_else(Vec::new, |s| {
        chela_core::skills::unlocked_groups(
            &ctx.tools.registry(),
            &s.named_groups(),
            &ctx.cfg.list(chela_core::config::CAPS_HIDDEN),
        )
    });
    let m = MadeBy::new(channel, chat_id, groups);
    m.check().map_err(|e| format!("this conversation cannot own a rule or job: {e}"))?;
    Ok(Some(m))
}

/// The context and scope a model-made rule or job calls its tools in: its conversation, and
/// the hidden groups it recorded, less any the person hid since.
pub fn model_ctx(ctx: &mut crate::tools::ToolCtx, m: &MadeBy) -> Vec<String> {
    ctx.conversation = Some((m.channel.clone(), m.chat_id.clone()));
    ctx.session = Some(std::sync::Arc::new(crate::skills::SessionRef::new(&m.channel, &m.chat_id, m.groups.clone())));
    chela_core::skills::unlocked_groups(
        &ctx.tools.registry(),
        &m.groups,
        &ctx.cfg.list(chela_core::config::CAPS_HIDDEN),
    )
}

/// The log line for a model-made rule or job that would have acted but waits for the owner.
pub fn waiting_line(kind: &str, id: &str, approve: &str) -> String {
    format!(
        "{kind} {id} was made by the assistant and acts on another chat than the one it was made in: it waits \
         for the owner's approval and did nothing (approve it with `{approve} {id}`, or remove it)"
    )
}
