//! [`Reader::raw_deep`]: one value of any nesting depth, checked and skipped.
//!
//! Why: the reader refuses nesting past [`super::MAX_DEPTH`], which is right for a value that is
//! read, but a tolerant reader of a list (`cron.json`'s jobs) must be able to step over one absurd
//! entry and refuse only that one, as serde_json's `RawValue` let it. The open containers are
//! kept on the heap, one byte each, so the stack does not grow with the input; the input's own
//! length bounds that.

use alloc::vec::Vec;

use super::{Reader, Result};

impl<'a> Reader<'a> {
    /// Reads and checks one value of any kind and nesting depth, and gives its text, as it stands
    /// in the input (what [`Reader::raw`] gives, without its depth limit).
    pub fn raw_deep(&mut self) -> Result<&'a str> {
        self.ws();
        let start = self.pos;
        // The closing byte of each open container, innermost last.
        let mut open: Vec<u8> = Vec::new();
        loop {
            match self.next_byte()? {
                b @ (b'{' | b'[') => {
                    let close = if b == b'{' { b'}' } else { b']' };
                    self.pos += 1;
                    if self.next_byte()? == close {
                        self.pos += 1;
                    } else {
                        open.push(close);
                        if close == b'}' {
                            self.deep_key()?;
                        }
                        continue;
                    }
                }
                b'"' => {
                    self.string(false)?;
                }
                b'-' | b'0'..=b'9' => {
                    self.number_text()?;
                }
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                _ => return Err(self.error("expected value")),
            }
            // A value ended: close what ends here, or step to the next element.
            loop {
                let Some(&close) = open.last() else {
                    return core::str::from_utf8(&self.src[start..self.pos])
                        .map_err(|_| self.error("invalid unicode code point"));
                };
                match self.next_byte()? {
                    b',' => {
                        self.pos += 1;
                        if self.next_byte()? == close {
                            return Err(self.error("trailing comma"));
                        }
                        if close == b'}' {
                            self.deep_key()?;
                        }
                        break;
                    }
                    b if b == close => {
                        self.pos += 1;
                        open.pop();
                    }
                    _ => {
                        return Err(self.error(if close == b'}' {
                            "expected `,` or `}`"
                        } else {
                            "expected `,` or `]`"
                        }));
                    }
                }
            }
        }
    }

    /// A key and its colon, inside an object [`Reader::raw_deep`] opened.
    fn deep_key(&mut self) -> Result<()> {
        if self.next_byte()? != b'"' {
            return Err(self.error("key must be a string"));
        }
        self.string(false)?;
        if self.next_byte()? != b':' {
            return Err(self.error("expected `:`"));
        }
        self.pos += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::string::String;

    use proptest::prelude::*;

    use super::super::Reader;

    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just(String::from("null")),
            Just(String::from("true")),
            Just(String::from("-1.5e3")),
            Just(String::from("01")),
            Just(String::from("\"a\\u00e9\"")),
            Just(String::from("\"\\x\"")),
            Just(String::from("tru")),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec(inner, 0..4).prop_map(|v| {
                    let kv: alloc::vec::Vec<String> = v.iter().map(|x| format!("\"k\": {x}")).collect();
                    format!("{{{}}}", kv.join(", "))
                }),
                Just(String::from("[1,]")),
                Just(String::from("{\"a\" 1}")),
                Just(String::from("{1: 2}")),
            ]
        })
    }

    proptest! {
        /// Within the depth limit it accepts, refuses and gives the text exactly as `raw` does.
        #[test]
        fn agrees_with_raw_within_the_depth_limit(v in value(), tail in prop_oneof![Just(""), Just(" ,1"), Just("]")]) {
            let text = format!(" {v}{tail}");
            let deep = Reader::new(text.as_bytes()).raw_deep().map_err(|e| e.offset);
            let raw = Reader::new(text.as_bytes()).raw().map_err(|e| e.offset);
            prop_assert_eq!(deep.is_ok(), raw.is_ok(), "{}", text);
            if let (Ok(a), Ok(b)) = (deep, raw) {
                prop_assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn any_depth_is_stepped_over() {
        let deep = format!("{}1{}, 2", "[{\"k\":".repeat(50_000), "}]".repeat(50_000));
        let mut r = Reader::new(deep.as_bytes());
        assert_eq!(r.raw_deep().unwrap().len(), deep.len() - 3);
        assert!(Reader::new(deep.as_bytes()).raw().is_err(), "raw keeps its limit");
        assert!(Reader::new(b"[[[[1]]]").raw_deep().is_err());
    }
}
