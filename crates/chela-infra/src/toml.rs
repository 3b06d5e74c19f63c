//! Chela's own TOML: a reader of whole documents into a value tree, and a writer of a tree
//! back to text. It is what `chela.toml` and `overrides.toml` need and nothing more: no serde,
//! no spans kept in the tree, no formatting preserved (comments are dropped on a rewrite, as
//! they were with the `toml` crate).
//!
//! The reader takes TOML 1.1 (1.0 plus newlines, comments and a trailing comma in inline
//! tables, the `\e` and `\xHH` escapes, and times without seconds), as the `toml` crate did
//! before it, so every file that loaded before still loads. It refuses every other invalid
//! document with an [`Error`] that carries the byte span of the fault, for a line, a column
//! and a caret. Nesting (headers, dotted keys, arrays and inline tables together) is bounded
//! by [`MAX_DEPTH`]; the reader's recursion is bounded by it too.
//!
//! Tables keep their keys sorted, as `toml::Table` did: the writer's output is the same
//! whatever order the keys were put in.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

mod read;
mod write;

#[cfg(test)]
mod diff_tests;
#[cfg(test)]
mod tests;

pub use write::to_string;

/// How deep a value may sit: tables, arrays and inline tables from the root, counted together.
/// Chela's deepest setting is four levels down; a document past this is refused, not read.
pub const MAX_DEPTH: usize = 64;

/// A TOML table: keys in sorted order.
pub type Table = BTreeMap<String, Value>;

/// A TOML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    /// An offset or local date-time, a local date or a local time, in its checked text form
    /// (`1979-05-27T07:32:00Z`: `T` and `Z` upper case, seconds always written).
    Datetime(String),
    Array(Vec<Value>),
    Table(Table),
}

impl Value {
    /// Equal, with `nan` equal to `nan` (TOML's `nan` is no number, but it is the same value):
    /// what a round trip through the writer must keep.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Float(a), Value::Float(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.same(b)),
            (Value::Table(a), Value::Table(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|((ka, a), (kb, b))| ka == kb && a.same(b))
            }
            (a, b) => a == b,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_integer(&self) -> Option<i64> {
        match self {
            Value::Integer(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_table(&self) -> Option<&Table> {
        match self {
            Value::Table(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_table_mut(&mut self) -> Option<&mut Table> {
        match self {
            Value::Table(t) => Some(t),
            _ => None,
        }
    }

    pub fn is_table(&self) -> bool {
        matches!(self, Value::Table(_))
    }

    /// The value at `key` when this is a table that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_table().and_then(|t| t.get(key))
    }
}

/// `value["key"]`, for tests and fixed documents: panics when this is no table or has no `key`.
impl std::ops::Index<&str> for Value {
    type Output = Value;

    fn index(&self, key: &str) -> &Value {
        self.get(key).unwrap_or_else(|| panic!("no `{key}` in this TOML value"))
    }
}

/// The value as TOML writes it inline: `"text"`, `42`, `[1, 2]`, `{ a = 1 }`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        write::inline(&mut out, self);
        f.write_str(&out)
    }
}

/// Why a document is not TOML, and where: `span` is the byte range of the fault in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    span: Range<usize>,
}

impl Error {
    fn new(message: impl Into<String>, span: Range<usize>) -> Error {
        Error { message: message.into(), span }
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.span.start)
    }
}

impl std::error::Error for Error {}

/// Reads a whole TOML document.
///
/// # Errors
/// The first fault in `text`, with its span.
pub fn parse(text: &str) -> Result<Table, Error> {
    read::document(text)
}
