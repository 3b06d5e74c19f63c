//! `chela doctor`: checks the configuration, the workspace, the provider and its key, and
//! prints what is wrong with the command that fixes it.

use std::os::unix::fs::PermissionsExt;
use std::process::ExitCode;
use tokio::time::Instant;

use anyhow::Result;
use chela_core::config as keys;

use crate::app::http_client;
use crate::config::{Config, Layer};
use crate::provider::Provider;
use crate::workspace::Workspace;

mod services;

/// What the checks found, printed as it is found. Each check of a service calls `ok`, `warn`
/// or `fail`, the last two with the command that fixes it.
#[derive(Default)]
pub(crate) struct Report {
    failures: usize,
    warnings: usize,
    /// Every line printed, for the tests of single checks.
    #[cfg(test)]
    lines: Vec<String>,
}

impl Report {
    pub(crate) fn ok(&mut self, what: &str) {
        self.line(format!("ok    {what}"));
    }

    pub(crate) fn warn(&mut self, what: &str, fix: &str) {
        self.warnings += 1;
        self.line(format!("warn  {what}"));
        if !fix.is_empty() {
            self.line(format!("      fix: {fix}"));
        }
    }

    /// Something that works as set up but could do more; no warning is counted.
    pub(crate) fn note(&mut self, what: &str, how: &str) {
        self.line(format!("note  {what}"));
        self.line(format!("      to turn it on: {how}"));
    }

    pub(crate) fn fail(&mut self, what: &str, fix: &str) {
        self.failures += 1;
        self.line(format!("FAIL  {what}"));
        if !fix.is_empty() {
            self.line(format!("      fix: {fix}"));
        }
    }

    fn line(&mut self, line: String) {
        outln!("{line}");
        #[cfg(test)]
        self.lines.push(line);
    }
}

pub async fn run(ws: Workspace) -> Result<ExitCode> {
    let mut r = Report::default();
    check_workspace(&ws, &mut r);
    let cfg = match Config::load(&ws) {
        Ok(cfg) => {
            r.ok("configuration is valid");
            for w in &cfg.warnings {
                r.warn(w, "unset it, or correct its name (see `chela config show` for the keys)");
            }
            Some(cfg)
        }
        Err(e) => {
            r.fail(
                &format!("configuration: {e:#}"),
                &format!("edit {} or run `chela config unset KEY` / `chela config reset`", ws.config_path().display()),
            );
            None
        }
    };
    if let Some(cfg) = &cfg {
        let tz = cfg.get(keys::TIMEZONE);
        let tz_name =
            if tz.is_empty() { format!("{} (the system's)", crate::localtime::zone("").name()) } else { tz.to_owned() };
        r.ok(&format!("time zone: {tz_name}"));
        check_settings(cfg, &mut r);
        check_search(cfg, &mut r);
        check_cron(&ws, cfg, &mut r);
        check_rules(&ws, &mut r);
        check_state(&ws, &mut r);
        services::check(&ws, cfg, &mut r).await;
        check_provider(cfg, &mut r).await;
        match crate::channels::telegram::doctor(cfg).await {
            Some(Ok(what)) => r.ok(&what),
            Some(Err((what, fix))) => r.fail(&what, &fix),
            None => {}
        }
        check_feishu(cfg, &mut r).await;
    }
    outln!();
    if r.failures == 0 {
        outln!("{} warning(s); Chela is ready.", r.warnings);
        Ok(ExitCode::SUCCESS)
    } else {
        outln!("{} problem(s), {} warning(s).", r.failures, r.warnings);
        Ok(ExitCode::FAILURE)
    }
}

fn check_workspace(ws: &Workspace, r: &mut Report) {
    let root = ws.root();
    if !root.is_dir() {
        r.fail(&format!("workspace {} does not exist", root.display()), "run `chela chat` once, or `mkdir -m 700` it");
        return;
    }
    let probe = root.join(".doctor-probe");
    match std::fs::write(&probe, b"x").and_then(|()| std::fs::remove_file(&probe)) {
        Ok(()) => r.ok(&format!("workspace {} is writable", root.display())),
        Err(e) => r.fail(
            &format!("workspace {} is not writable: {e}", root.display()),
            &format!("chown -R $USER {}", root.display()),
        ),
    }
    let mode = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777).ok();
    if let Some(m) = mode(root)
        && m & 0o077 != 0
    {
        r.warn(
            &format!(
                "workspace {} can be read by other users (mode {m:o}); it holds your conversations",
                root.display()
            ),
            &format!("chmod 700 {}", root.display()),
        );
    }
    for file in [ws.config_path(), ws.overrides_path()] {
        if let Some(m) = mode(&file)
            && m & 0o077 != 0
        {
            r.warn(
                &format!("{} can be read by other users (mode {m:o}); it may hold API keys", file.display()),
                &format!("chmod 600 {}", file.display()),
            );
        }
    }
}

/// Whether a Chela gateway answers `GET /health` at `listen` (a wildcard address through
/// loopback), for `chela status`.
pub(crate) async fn gateway_answers(listen: &str, token: &str) -> Result<(), String> {
    let addr = listen.parse().map_err(|_| format!("`{listen}` is not an address"))?;
    services::health(addr, token).await
}

/// Whether a Chela gateway answers `GET /healthz` at `listen`, without a token.
pub(crate) async fn gateway_healthz(listen: std::net::SocketAddr) -> Result<(), String> {
    services::health_at(listen, crate::gateway::auth::HEALTHZ, "").await
}

/// `GET path` (JSON) on the running gateway at `listen`, with `token`, for `chela status`.
pub(crate) async fn gateway_json(listen: &str, path: &str, token: &str) -> Result<serde_json::Value, String> {
    let addr = listen.parse().map_err(|_| format!("`{listen}` is not an address"))?;
    let (status, body) = services::get(addr, path, token).await?;
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("it answers GET {path} with {status:?}"));
    }
    serde_json::from_str(body.trim()).map_err(|e| format!("its answer to GET {path} is not JSON: {e}"))
}

/// Whether `web_search` is offered: only once a search key is set.
fn check_search(cfg: &Config, r: &mut Report) {
    if !cfg!(feature = "web") {
        return;
    }
    if cfg.get(keys::SEARCH_TAVILY_KEY).is_empty() && cfg.get(keys::SEARCH_BRAVE_KEY).is_empty() {
        r.note(
            "web search is off: no search key is set, so the model is not offered web_search",
            "chela config set search.tavily_key -   (a Tavily key on stdin; or search.brave_key for Brave Search)",
        );
    } else {
        let engine = if cfg.get(keys::SEARCH_TAVILY_KEY).is_empty() { "Brave Search" } else { "Tavily" };
        r.ok(&format!("web search through {engine}"));
    }
}

/// The typed sections: settings that are valid one by one but do not work together.
fn check_settings(cfg: &Config, r: &mut Report) {
    let s = cfg.settings();
    let channels = [
        ("telegram", !s.channels.telegram.token.is_empty(), s.channels.telegram.allow_from.is_empty(), "YOUR_USER_ID"),
        ("feishu", !s.channels.feishu.app_id.is_empty(), s.channels.feishu.allow_from.is_empty(), "YOUR_OPEN_ID"),
    ];
    for (name, on, nobody, example) in channels {
        if on && nobody {
            r.warn(
                &format!(
                    "channels.{name} is set up but its allow_from is empty: everyone who writes there must pair \
                     first (`chela pairing list`)"
                ),
                &format!("chela config set channels.{name}.allow_from {example}"),
            );
        }
    }
    let listen = s.gateway.addr();
    if !listen.ip().is_loopback() && s.gateway.token.is_empty() {
        r.fail(
            &format!("gateway.listen is {listen}, reachable from other machines, but gateway.token is empty"),
            "chela config set gateway.token -   (or listen on 127.0.0.1:18789)",
        );
    }
    for (name, server) in &s.mcp.servers {
        if !server.enabled || server.command.is_empty() {
            continue;
        }
        if find_program(&server.command).is_none() {
            r.warn(
                &format!("MCP server {name}: the program `{}` was not found", server.command),
                &format!("install it, or give its full path in mcp.servers.{name}.command"),
            );
        }
    }
}

/// `cron.json`: every bad entry with its line (the good jobs still run), and every zone the jobs
/// name. Missing is fine: there are no jobs. Read by the scheduler's own reader, so doctor and
/// the daemon see the same jobs (a symlink refused, jobs past `scheduler.max_jobs` reported).
fn check_cron(ws: &Workspace, cfg: &Config, r: &mut Report) {
    let path = ws.root().join(crate::scheduler::FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return;
    }
    let (jobs, problems) = crate::scheduler::read_file(&path, cfg.usize(keys::SCHEDULER_MAX_JOBS));
    if let Some(whole) = &problems.whole {
        r.fail(
            &format!("{whole}; no scheduled job runs until it is fixed, and Chela will not overwrite it"),
            &format!("correct {} by hand, or move it away", path.display()),
        );
        return;
    }
    let fix = format!("correct the entry in {} (the other jobs keep running)", path.display());
    for line in problems.lines() {
        r.warn(&line, &fix);
    }
    let user_zone = cfg.get(keys::TIMEZONE);
    let mut zones_ok = true;
    for job in &jobs {
        if let chela_core::schedule::Trigger::Cron { tz: Some(tz), .. } = &job.job.trigger
            && tz != user_zone
            && let Err(e) = crate::tzdb::load_zone(tz)
        {
            zones_ok = false;
            r.warn(&format!("cron.json line {}: job {:?}: trigger.tz: {e:#}", job.line, job.job.id), &fix);
        }
    }
    if problems.bad.is_empty() && zones_ok {
        r.ok(&format!("cron.json: {} job(s), all valid", jobs.len()));
    }
}

/// `rules.json`: every bad rule with its line (the good rules still run). Missing is fine.
fn check_rules(ws: &Workspace, r: &mut Report) {
    let path = ws.root().join(crate::router::FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return;
    }
    let (router, problems) = crate::router::read_file(&path);
    if let Some(whole) = &problems.whole {
        r.fail(
            &format!("{whole}; no router rule runs until it is fixed, and Chela will not overwrite it"),
            &format!("correct {} by hand, or move it away", path.display()),
        );
        return;
    }
    let fix = format!("correct the rule in {} (the other rules keep running)", path.display());
    for bad in &problems.bad {
        r.warn(&bad.to_string(), &fix);
    }
    if problems.bad.is_empty() {
        r.ok(&format!("rules.json: {} rule(s), all valid", router.len()));
    }
}

/// Where `program` is: itself if it names a path, else the first match on `PATH`.
pub(super) fn find_program(program: &str) -> Option<std::path::PathBuf> {
    let is_exec = |p: &std::path::Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let p = std::path::PathBuf::from(program);
        return is_exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| is_exec(p))
}

/// The Feishu app credentials, when the channel is on: can they get a tenant token?
/// A line for each sealed store that is there (what `chela state check` says in full).
fn check_state(ws: &Workspace, r: &mut Report) {
    let dir = ws.root().join(crate::authority::STATE_DIR);
    for (name, verdict) in crate::authority::check(&dir, super::state::MAX_STORE_BYTES) {
        match verdict {
            Ok(()) => r.ok(&format!("state/{name}: sealed by Chela")),
            Err(why) => r.fail(
                &format!("state/{name} is not trusted: {why}"),
                &format!("check it, then `chela state trust {name}`, or move it away"),
            ),
        }
    }
}

async fn check_feishu(cfg: &Config, r: &mut Report) {
    let feishu = &cfg.settings().channels.feishu;
    if feishu.app_id.is_empty() {
        return;
    }
    if let Some(why) = crate::channels::feishu::unverifiable_webhook(feishu) {
        r.fail(&format!("Feishu: {why}"), "chela config set channels.feishu.encrypt_key -");
    }
    let Ok(http) = http_client(cfg) else { return };
    match crate::channels::feishu::check(http, feishu).await {
        Ok(()) => r.ok(&format!("Feishu app {} gets a tenant token from {}", feishu.app_id, feishu.api_base)),
        Err(e) => r.fail(
            &format!("Feishu: {e:#}"),
            "chela config set channels.feishu.app_secret -   (and check channels.feishu.app_id, channels.feishu.api_base)",
        ),
    }
}

async fn check_provider(cfg: &Config, r: &mut Report) {
    let http = match http_client(cfg) {
        Ok(h) => h,
        Err(e) => {
            r.fail(&format!("{e:#}"), "chela config set proxy.url http://HOST:PORT (or unset it)");
            return;
        }
    };
    let provider = match Provider::from_config(cfg, http) {
        Ok(p) => p,
        Err(e) => {
            r.fail(&format!("{e:#}"), "chela config set llm.api_key <KEY>");
            return;
        }
    };
    let key = cfg.entry(keys::LLM_API_KEY);
    if !key.value.is_empty() {
        r.ok(&format!("API key {} (from {})", key.shown(), key.layer));
    }
    let probe = provider.probe();
    let started = Instant::now();
    match probe.ask("ping").await {
        Ok(_) => r.ok(&format!(
            "provider {} answered with model {} in {} ms: reachable, key accepted",
            provider.describe(),
            provider.model,
            started.elapsed().as_millis()
        )),
        Err(e) => {
            let fix = if e.is_auth() {
                match &key.layer {
                    Layer::Env(var) => {
                        format!("fix the {var} environment variable, or `chela config set llm.api_key <KEY>`")
                    }
                    _ => "chela config set llm.api_key <KEY>".to_owned(),
                }
            } else {
                "check `chela config show` (llm.base_url, llm.model, proxy.url) and your network".to_owned()
            };
            r.fail(&probe.explain(&e, &key.layer), &fix);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron_report(text: Option<&str>) -> (Report, String) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().to_owned())).unwrap();
        if let Some(text) = text {
            std::fs::write(dir.path().join("cron.json"), text).unwrap();
        }
        let cfg = Config::from_layers(None, None, &[]).unwrap();
        let mut r = Report::default();
        check_cron(&ws, &cfg, &mut r);
        let text = r.lines.join("\n");
        (r, text)
    }

    fn rules_report(text: &str) -> (Report, String) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().to_owned())).unwrap();
        std::fs::write(dir.path().join("rules.json"), text).unwrap();
        let mut r = Report::default();
        check_rules(&ws, &mut r);
        let text = r.lines.join("\n");
        (r, text)
    }

    #[test]
    fn rules_json_bad_rules_are_warnings_with_their_line_and_the_good_ones_are_counted() {
        let good =
            r#"{"id": "ping", "match": {"text": {"prefix": "ping"}}, "actions": [{"type": "send", "text": "pong"}]}"#;
        let (r, out) = rules_report(&format!("{{\"rules\": [\n{good},\n{{\"id\": \"bad\", \"actions\": 5}}\n]}}"));
        assert_eq!((r.failures, r.warnings), (0, 1), "{out}");
        assert!(out.contains("warn  rules.json line 3: rule `bad`"), "{out}");
        let (r, out) = rules_report(&format!("{{\"rules\": [{good}]}}"));
        assert_eq!((r.failures, r.warnings), (0, 0), "{out}");
        assert!(out.contains("rules.json: 1 rule(s), all valid"), "{out}");
    }

    const EMIT: &str = r#""action": {"type": "emit", "event": "x"}"#;

    #[test]
    fn cron_json_bad_entries_are_warnings_with_their_line() {
        let text = format!(
            "{{\"version\": 1, \"jobs\": [\n  {{\"id\": \"ok\", \"trigger\": {{\"type\": \"cron\", \"expr\": \"0 8 * * *\", \"tz\": \"Europe/Berlin\"}}, {EMIT}}},\n  {{\"id\": \"bad\", \"trigger\": {{\"type\": \"cron\", \"expr\": \"0 8 * * MOON\"}}, {EMIT}}},\n  {{\"id\": \"where\", \"trigger\": {{\"type\": \"cron\", \"expr\": \"0 8 * * *\", \"tz\": \"Mars/Olympus\"}}, {EMIT}}}\n]}}"
        );
        let (r, out) = cron_report(Some(&text));
        assert_eq!((r.failures, r.warnings), (0, 2), "{out}");
        assert!(
            out.contains(
                "warn  cron.json line 3: job 2 (\"bad\"): trigger.expr: day-of-week field: \"MOON\" is not a number"
            ),
            "{out}"
        );
        assert!(
            out.contains("warn  cron.json line 4: job \"where\": trigger.tz: time zone \"Mars/Olympus\" is not in"),
            "{out}"
        );
        assert!(out.contains("(the other jobs keep running)"), "{out}");
        assert!(!out.contains("all valid"), "{out}");
    }

    #[test]
    fn cron_json_good_missing_and_unreadable() {
        let good = format!(
            "{{\"jobs\": [{{\"id\": \"a\", \"trigger\": {{\"type\": \"interval\", \"every_s\": 60}}, {EMIT}}}]}}"
        );
        let (r, out) = cron_report(Some(&good));
        assert_eq!((r.failures, r.warnings), (0, 0), "{out}");
        assert!(out.contains("ok    cron.json: 1 job(s), all valid"), "{out}");
        let (r, out) = cron_report(None);
        assert_eq!((r.failures, r.warnings, out.as_str()), (0, 0, ""));
        let (r, out) = cron_report(Some("{\"jobs\": [\n  {\"id\": "));
        assert_eq!(r.failures, 1, "{out}");
        assert!(out.contains("cron.json line 2") && out.contains("will not overwrite it"), "{out}");
    }
}
