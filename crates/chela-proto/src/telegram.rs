//! Telegram's message text: Markdown rendered to the Bot API's HTML subset, and split into
//! messages within Telegram's length limit; and the Bot API's wire types ([`wire`]), which the
//! host's channel and the chip read and write alike.
//!
//! What it is: two pure functions the host and the chip share. [`markdown_to_html`] turns what
//! models write into `parse_mode=HTML` text (tags `b`, `i`, `s`, `code`, `pre`, `a`,
//! `blockquote`; `<`, `>`, `&` escaped). [`split_html`] cuts any such text into chunks of at
//! most [`MAX_MESSAGE_UNITS`] UTF-16 units of text, each valid HTML by itself; [`split_plain`]
//! does the same for the plain-text fallback (sent when Telegram still refuses the markup).
//!
//! What it is not: a Markdown implementation (see `markdown` for what is recognised) or an
//! HTML sanitiser for arbitrary input: [`split_html`] expects valid HTML, as the renderer
//! writes it.
//!
//! How to drive it: `split_html(&markdown_to_html(reply), MAX_MESSAGE_UNITS)`, then send each
//! chunk in order; on "can't parse entities" send `split_plain(reply, MAX_MESSAGE_UNITS)`.

mod markdown;
mod split;
#[cfg(test)]
mod tests;
pub mod wire;

pub use markdown::{escape_into, markdown_to_html};
pub use split::{MAX_MESSAGE_UNITS, split_html, split_plain, utf16_len, visible_text};

/// Renders `markdown` and splits it into messages of at most [`MAX_MESSAGE_UNITS`] units.
pub fn render_chunks(markdown: &str) -> alloc::vec::Vec<alloc::string::String> {
    split_html(&markdown_to_html(markdown), MAX_MESSAGE_UNITS)
}
