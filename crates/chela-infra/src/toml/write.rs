//! The writer: a table as a document (`key = value` lines, then a `[section]` per table and a
//! `[[section]]` per table of an array of tables), and any value inline. Every string is a basic
//! string with every control character escaped, so any text reads back as it was.

use super::{Table, Value};

/// `table` as a TOML document that [`super::parse`] reads back equal.
pub fn to_string(table: &Table) -> String {
    let mut out = String::new();
    let mut path = Vec::new();
    body(&mut out, &mut path, table);
    out
}

/// An array that is written as `[[name]]` sections: tables only, at least one.
fn is_tables(v: &Value) -> bool {
    matches!(v, Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_table))
}

/// Whether `v` goes under a header of its own rather than on a `key = value` line.
fn is_section(v: &Value) -> bool {
    v.is_table() || is_tables(v)
}

/// The `key = value` lines of `table`, then its sub-tables, each under its header.
fn body(out: &mut String, path: &mut Vec<String>, table: &Table) {
    for (k, v) in table.iter().filter(|(_, v)| !is_section(v)) {
        key(out, k);
        out.push_str(" = ");
        inline(out, v);
        out.push('\n');
    }
    for (k, v) in table.iter().filter(|(_, v)| is_section(v)) {
        path.push(k.clone());
        match v {
            Value::Table(t) => {
                // A table that holds only tables needs no header of its own: its sub-tables'
                // headers make it. An empty one does, or it would be lost.
                if t.is_empty() || t.values().any(|v| !is_section(v)) {
                    header(out, path, "[", "]");
                }
                body(out, path, t);
            }
            Value::Array(items) => {
                for t in items.iter().filter_map(Value::as_table) {
                    header(out, path, "[[", "]]");
                    body(out, path, t);
                }
            }
            _ => {}
        }
        path.pop();
    }
}

fn header(out: &mut String, path: &[String], open: &str, close: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(open);
    for (i, k) in path.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        key(out, k);
    }
    out.push_str(close);
    out.push('\n');
}

/// A key: bare when it can be, else quoted.
fn key(out: &mut String, k: &str) {
    if !k.is_empty() && k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
        out.push_str(k);
    } else {
        string(out, k);
    }
}

/// A basic string: `"` and `\` escaped, every control character as an escape.
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `v` as TOML writes a value after `=`.
pub(super) fn inline(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => string(out, s),
        Value::Integer(i) => out.push_str(&i.to_string()),
        Value::Float(f) if f.is_nan() => out.push_str(if f.is_sign_negative() { "-nan" } else { "nan" }),
        Value::Float(f) if f.is_infinite() => out.push_str(if *f < 0.0 { "-inf" } else { "inf" }),
        // `{:?}` always writes a `.` or an exponent (`1.0`, `1e300`), as TOML wants of a float.
        Value::Float(f) => out.push_str(&format!("{f:?}")),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Datetime(d) => out.push_str(d),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                inline(out, item);
            }
            out.push(']');
        }
        Value::Table(t) if t.is_empty() => out.push_str("{}"),
        Value::Table(t) => {
            out.push_str("{ ");
            for (i, (k, v)) in t.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                key(out, k);
                out.push_str(" = ");
                inline(out, v);
            }
            out.push_str(" }");
        }
    }
}
