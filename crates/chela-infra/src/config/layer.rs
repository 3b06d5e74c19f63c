//! Reading one TOML layer (`chela.toml` or `overrides.toml`) into flat key values, typed
//! section leaves and warnings.

use anyhow::{Result, bail};
use chela_core::config::{self as model, KEYS, Key, TYPED_ROOTS};

use super::check;
use crate::toml;

/// What one layer sets.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    /// Values of keys in the flat table, checked and canonical.
    pub values: Vec<(&'static Key, String)>,
    /// Other leaves under the typed roots (`mcp.servers.NAME.command`, …), by path, for the
    /// typed sections. A leaf is anything but a table.
    pub typed: Vec<(Vec<String>, toml::Value)>,
    /// Names that mean nothing to Chela: ignored, with a "did you mean".
    pub unknown: Vec<String>,
}

/// Reads a TOML layer. Sections map to the part before the dot; arrays of strings become
/// comma-separated lists. An unknown key is reported in `unknown`, not an error: one typo
/// must not stop every command. A value of the wrong shape for a known key is an error.
pub(super) fn parse(text: &str) -> Result<Parsed> {
    let table = toml::parse(text).map_err(|e| syntax_error(text, &e))?;
    let mut out = Parsed::default();
    for (name, value) in &table {
        if TYPED_ROOTS.contains(&name.as_str()) {
            let Some(section) = value.as_table() else {
                bail!("`{name}` must be a table such as [{name}.…], not a single value");
            };
            walk_typed(&mut out, &mut vec![name.clone()], section)?;
            continue;
        }
        let is_section = KEYS.iter().any(|k| k.section() == name);
        match value {
            // A whole section nobody reads (`[chanels.telegram]`): one warning for it.
            toml::Value::Table(_) if !is_section => out.unknown.push(name.clone()),
            toml::Value::Table(section) => {
                for (field, v) in section {
                    let path = format!("{name}.{field}");
                    // The one table under a flat section: prices per model, named by the person.
                    if let (Some(prices), "llm.prices") = (v.as_table(), path.as_str()) {
                        walk_typed(&mut out, &mut vec![name.clone(), field.clone()], prices)?;
                        continue;
                    }
                    if v.is_table() {
                        if model::key(&path).is_ok() {
                            bail!("`{path}` is a table, but it holds one value: write `{field} = …` under [{name}]");
                        }
                        bail!("`{path}` is nested too deeply: Chela's keys are `section.key`");
                    }
                    push(&mut out, path, v)?;
                }
            }
            _ if is_section => bail!("`{name}` is a section: write its keys under [{name}]"),
            v => push(&mut out, name.clone(), v)?,
        }
    }
    Ok(out)
}

/// A TOML syntax error with its line and column, the line shown with a caret under the
/// spot. Only what cannot be a secret is shown as written: a section header, and the value of
/// a known setting that is not a credential; every other character after the `=` (or of a line
/// that is no `key = value`) is a `*`, so the caret still points at the right column.
pub(super) fn syntax_error(text: &str, e: &toml::Error) -> anyhow::Error {
    let message = e.message().trim();
    let span = e.span();
    let at = floor_char_boundary(text, span.start.min(text.len()));
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let number = text[..at].matches('\n').count() + 1;
    let section = section_before(&text[..line_start]);
    let raw = text[line_start..line_end].trim_end_matches('\r');
    let shown = masked_line(raw, &section);
    let column = text[line_start..at].chars().count();
    let (window, caret) = window(&shown, column);
    let gutter = " ".repeat(number.to_string().len());
    anyhow::anyhow!(
        "line {number}, column {}: {message}\n  {number} | {window}\n  {gutter} | {}^",
        column + 1,
        " ".repeat(caret)
    )
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The `[section]` the last header before `text`'s end opens (empty at the top).
fn section_before(text: &str) -> String {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && !l.starts_with("[["))
        .map(|l| l.trim_start_matches('[').split(']').next().unwrap_or("").trim().to_owned())
        .unwrap_or_default()
}

/// `line` with what may be a secret replaced by `*`, char for char.
fn masked_line(line: &str, section: &str) -> String {
    let trimmed = line.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('#') || trimmed.is_empty() {
        return line.to_owned();
    }
    let star = |s: &str| s.chars().map(|c| if c.is_whitespace() { c } else { '*' }).collect::<String>();
    // The name is what comes before `=`, or the first word when the `=` is what is missing.
    let (name, value) = match line.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (trimmed.split_whitespace().next().unwrap_or_default(), None),
    };
    let field = name.trim().trim_matches('"');
    let full = if section.is_empty() { field.to_owned() } else { format!("{section}.{field}") };
    let plain = model::key(&full).is_ok_and(|k| !k.is_secret()) && !model::is_secret_name(field);
    match value {
        _ if plain => line.to_owned(),
        Some(value) => format!("{name}={}", star(value)),
        None => star(line),
    }
}

/// At most [`SHOWN_CHARS`] of `line` around `column`, and where the caret goes in them.
fn window(line: &str, column: usize) -> (String, usize) {
    const SHOWN_CHARS: usize = 100;
    let chars: Vec<char> = line.chars().collect();
    let from = column.saturating_sub(SHOWN_CHARS / 2).min(chars.len().saturating_sub(SHOWN_CHARS));
    let to = (from + SHOWN_CHARS).min(chars.len());
    let mut shown: String = chars[from..to].iter().map(|c| if c.is_control() { ' ' } else { *c }).collect();
    let mut caret = column - from;
    if from > 0 {
        shown.insert(0, '…');
        caret += 1;
    }
    if to < chars.len() {
        shown.push('…');
    }
    (shown, caret)
}

/// Collects the leaves under a typed root: known keys into `values`, the rest into `typed`.
fn walk_typed(out: &mut Parsed, path: &mut Vec<String>, table: &toml::Table) -> Result<()> {
    for (field, v) in table {
        path.push(field.clone());
        let dotted = path.join(".");
        let known = model::key(&dotted).is_ok();
        match v {
            toml::Value::Table(_) if known => {
                bail!("`{dotted}` is a table, but it holds one value: write `{field} = …`");
            }
            toml::Value::Table(t) => walk_typed(out, path, t)?,
            v if known => push(out, dotted, v)?,
            v => out.typed.push((path.clone(), v.clone())),
        }
        path.pop();
    }
    Ok(())
}

/// Checks and records one flat value, or notes the name as unknown.
fn push(out: &mut Parsed, name: String, value: &toml::Value) -> Result<()> {
    let Ok(key) = model::key(&name) else {
        out.unknown.push(name);
        return Ok(());
    };
    let text = match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(items) => {
            let mut names = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(s) => names.push(s.to_owned()),
                    None => bail!("`{name}` must be a list of strings"),
                }
            }
            names.join(",")
        }
        _ => bail!("`{name}` must be a string, number, boolean or list of strings"),
    };
    out.values.push((key, check(key, &text)?));
    Ok(())
}

/// Every name a layer may hold at its top or as a key: for "did you mean".
pub(super) fn known_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = KEYS.iter().map(|k| k.name).collect();
    names.extend(KEYS.iter().map(|k| k.section()).filter(|s| !s.is_empty()));
    names.extend(TYPED_ROOTS);
    names.sort_unstable();
    names.dedup();
    names
}

/// The warning for an unknown name in `layer`.
pub(super) fn unknown_warning(name: &str, layer: &str, known: &[&str]) -> String {
    let mut w = format!("{layer}: unknown setting `{name}` is ignored.");
    if let Some(s) = model::suggest(name, known.iter().copied()) {
        w.push_str(&format!(" Did you mean `{s}`?"));
    }
    w
}
