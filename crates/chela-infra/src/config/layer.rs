//! Reading one TOML layer (`chela.toml` or `overrides.toml`) into flat key values, typed
//! section leaves and warnings.

use anyhow::{Result, bail};
use chela_core::config::{self as model, KEYS, Key, TYPED_ROOTS};

use super::check;

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
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| syntax_error(text, &e))?;
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

/// A TOML syntax error with its line, never the text of the line: it may hold a secret.
pub(super) fn syntax_error(text: &str, e: &toml::de::Error) -> anyhow::Error {
    let message = e.message().trim();
    match e.span() {
        Some(span) => {
            let line = text.as_bytes()[..span.start.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1;
            anyhow::anyhow!("line {line}: {message}")
        }
        None => anyhow::anyhow!("{message}"),
    }
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
