//! `chela.toml` through the layer reader: a file is refused with a message or gives values that
//! pass their own checks unchanged, and written back as TOML it loads to the same values.
#![no_main]

use chela::config::{Config, Layer, check};
use libfuzzer_sys::fuzz_target;

/// A TOML basic string, written independently of the crate's own writer.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fuzz_target!(|data: &[u8]| {
    // The workspace reader hands the layer a `&str`; bytes that are not UTF-8 never get here.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let cfg = match Config::from_layers(Some(text), None, &[]) {
        Ok(cfg) => cfg,
        Err(e) => {
            assert!(!format!("{e:#}").trim().is_empty(), "a refusal without a message");
            return;
        }
    };
    let mut toml = String::new();
    for e in cfg.entries().iter().filter(|e| e.layer == Layer::File) {
        let again = check(e.key, &e.value)
            .unwrap_or_else(|err| panic!("{} = {:?} was accepted, then refused: {err:#}", e.key.name, e.value));
        assert_eq!(again, e.value, "checking {} twice changed it", e.key.name);
        toml.push_str(&format!("{} = {}\n", quoted_key(e.key.name), quoted(&e.value)));
    }
    let back = Config::from_layers(Some(&toml), None, &[])
        .unwrap_or_else(|err| panic!("rewritten config refused: {err:#}\n{toml}"));
    for (a, b) in cfg.entries().iter().zip(back.entries()) {
        assert_eq!((a.key.name, &a.value, &a.layer), (b.key.name, &b.value, &b.layer), "{toml}");
    }
});

/// `section.key` as a dotted TOML key.
fn quoted_key(name: &str) -> String {
    name.split('.').map(quoted).collect::<Vec<_>>().join(".")
}
