//! A WS2812 strip on an SPI bus (`ws2812-spi`: each data bit becomes four SPI bits at about
//! 3 MHz, colours sent green-red-blue, then a low reset). On chips with an RMT peripheral, any
//! `SmartLedsWrite<Color = RGB8>` works with [`Strip`] too.

use alloc::vec::Vec;

use smart_leds_trait::{RGB8, SmartLedsWrite};

use crate::fault::Fault;

/// The static patterns [`render`] knows.
pub const PATTERNS: &[&str] = &["solid", "off", "rainbow", "alternate"];

/// A strip of `count` LEDs behind a writer, with the colours it was last given.
pub struct Strip<W> {
    writer: W,
    shown: Vec<RGB8>,
}

impl<W: SmartLedsWrite<Color = RGB8>> Strip<W> {
    pub fn new(writer: W, count: usize) -> Self {
        Strip { writer, shown: alloc::vec![RGB8::default(); count] }
    }

    pub fn len(&self) -> usize {
        self.shown.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }

    /// Shows `colors` (already scaled).
    pub fn show(&mut self, colors: &[RGB8]) -> Result<(), Fault> {
        self.writer.write(colors.iter().copied()).map_err(|_| Fault::Bus { what: "LED data line (SPI)" })?;
        self.shown = colors.to_vec();
        Ok(())
    }

    /// What the strip was last told to show.
    pub fn shown(&self) -> &[RGB8] {
        &self.shown
    }
}

/// Scales a colour by `brightness` (0–255), as WS2812 has no brightness of its own.
pub fn scale(c: RGB8, brightness: u8) -> RGB8 {
    let s = |v: u8| ((u16::from(v) * u16::from(brightness) + 127) / 255) as u8;
    RGB8 { r: s(c.r), g: s(c.g), b: s(c.b) }
}

/// The colours of `pattern` for a strip of `count` at `brightness`; `None` for an unknown pattern.
pub fn render(pattern: &str, color: RGB8, brightness: u8, count: usize) -> Option<Vec<RGB8>> {
    let colors = match pattern {
        "solid" => alloc::vec![color; count],
        "off" => alloc::vec![RGB8::default(); count],
        "alternate" => (0..count).map(|i| if i % 2 == 0 { color } else { RGB8::default() }).collect(),
        "rainbow" => (0..count).map(|i| hue(((i * 256) / count.max(1)) as u8)).collect(),
        _ => return None,
    };
    Some(colors.into_iter().map(|c| scale(c, brightness)).collect())
}

/// A fully saturated colour at `h` of 256 steps round the wheel.
fn hue(h: u8) -> RGB8 {
    let (region, rem) = (h / 43, (h % 43) * 6);
    let (up, down) = (rem, 255 - rem);
    match region {
        0 => RGB8 { r: 255, g: up, b: 0 },
        1 => RGB8 { r: down, g: 255, b: 0 },
        2 => RGB8 { r: 0, g: 255, b: up },
        3 => RGB8 { r: 0, g: down, b: 255 },
        4 => RGB8 { r: up, g: 0, b: 255 },
        _ => RGB8 { r: 255, g: 0, b: down },
    }
}

/// A colour from `#rrggbb`, `rrggbb` or a few names; `None` otherwise.
pub fn parse_color(s: &str) -> Option<RGB8> {
    let named = match s.trim().to_ascii_lowercase().as_str() {
        "red" => Some((255, 0, 0)),
        "green" => Some((0, 255, 0)),
        "blue" => Some((0, 0, 255)),
        "white" => Some((255, 255, 255)),
        "yellow" => Some((255, 255, 0)),
        "cyan" => Some((0, 255, 255)),
        "magenta" | "purple" => Some((255, 0, 255)),
        "orange" => Some((255, 128, 0)),
        "black" | "off" => Some((0, 0, 0)),
        _ => None,
    };
    if let Some((r, g, b)) = named {
        return Some(RGB8 { r, g, b });
    }
    let hex = s.trim().trim_start_matches('#');
    if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let v = u32::from_str_radix(hex, 16).ok()?;
    Some(RGB8 { r: (v >> 16) as u8, g: (v >> 8) as u8, b: v as u8 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn colors_parse() {
        assert_eq!(parse_color("#ff8000"), Some(RGB8 { r: 255, g: 128, b: 0 }));
        assert_eq!(parse_color("Red"), Some(RGB8 { r: 255, g: 0, b: 0 }));
        assert_eq!(parse_color("#ff80"), None);
        assert_eq!(parse_color("zzzzzz"), None);
        assert!(render("blink-fast", RGB8::default(), 1, 3).is_none());
    }

    proptest! {
        #[test]
        fn scaling_is_monotonic_and_bounded(v in any::<u8>(), b in any::<u8>()) {
            let c = scale(RGB8 { r: v, g: v, b: v }, b);
            prop_assert!(c.r <= v);
            prop_assert_eq!(scale(RGB8 { r: v, g: 0, b: 0 }, 255).r, v);
            prop_assert_eq!(scale(RGB8 { r: v, g: 0, b: 0 }, 0).r, 0);
        }
    }
}
