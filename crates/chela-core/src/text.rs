//! Cutting text to a byte bound without splitting a UTF-8 character.

use alloc::borrow::Cow;
use alloc::string::String;

/// The longest prefix of `s` that is at most `max` bytes and ends on a character boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The longest suffix of `s` that is at most `max` bytes and starts on a character boundary.
pub fn suffix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// `s` cut to at most `max` bytes, with a visible note saying how much was cut. The note is
/// counted in the bound, so the result never exceeds `max` (unless `max` is smaller than the
/// note itself, when only the note is kept).
pub fn truncate_visibly(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let note = alloc::format!("\n[… cut: {} of {} bytes shown]", max, s.len());
    let keep = prefix(s, max.saturating_sub(note.len()));
    let mut out = String::with_capacity(keep.len() + note.len());
    out.push_str(keep);
    out.push_str(&note);
    Cow::Owned(out)
}

/// Cuts `s` in place to at most `max` bytes on a character boundary.
pub fn truncate_in_place(s: &mut String, max: usize) {
    let n = prefix(s, max).len();
    s.truncate(n);
}

#[cfg(test)]
mod tests;
