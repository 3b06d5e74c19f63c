//! `string.find`, `match`, `gmatch`, `gsub` and `rep` for the sandbox, in Rust.
//!
//! Lua's own versions are C loops the instruction hook never interrupts: a pattern such as
//! `.-.-.-.-.-b` backtracks for hours on a 200-byte string, and `(""):rep(2^62)` spins without
//! allocating, so no limit stopped them and `lua_job_stop` could only walk away from the thread.
//! These are the same matcher (a port of Lua 5.4's `lstrlib.c`, same results and messages) with a
//! meter: every step counts as one instruction towards `lua.max_instructions`, and every few
//! thousand steps the deadline and a forced stop are checked, as the hook does between
//! instructions. Results built here are bounded by `lua.max_memory_bytes` before they are built.

use mlua::{Lua, MultiValue, Value};

use super::run::Run;

/// Nested `match` calls before "pattern too complex" (Lua's `MAXCCALLS`).
const MAX_DEPTH: usize = 200;
/// Captures in one pattern (Lua's `LUA_MAXCAPTURES`).
const MAX_CAPTURES: usize = 32;
const CAP_UNFINISHED: isize = -1;
const CAP_POSITION: isize = -2;
const SPECIALS: &[u8] = b"^$*+?.([%-";
/// Steps between two checks of the run's limits: well under a millisecond of matching.
const CHECK_EVERY: u64 = 4096;

type R<T> = mlua::Result<T>;

fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

/// Counts the work of one library call and charges it to the run every [`CHECK_EVERY`] steps.
pub(super) struct Meter {
    run: Option<std::sync::Arc<Run>>,
    what: &'static str,
    pending: u64,
}

impl Meter {
    pub fn new(lua: &Lua, what: &'static str) -> Meter {
        Meter { run: Run::of(lua).ok(), what, pending: 0 }
    }

    #[inline]
    pub fn step(&mut self, n: u64) -> R<()> {
        self.pending += n;
        if self.pending >= CHECK_EVERY { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> R<()> {
        let n = std::mem::take(&mut self.pending);
        match &self.run {
            Some(run) => run.charge(n, Some(self.what)),
            None => Ok(()),
        }
    }

    /// The most bytes a result built outside Lua's allocator may have.
    pub fn max_bytes(&self) -> usize {
        self.run.as_ref().map_or(usize::MAX, |r| r.limits.max_memory)
    }

    pub fn too_large(&self, fname: &str, bytes: u128) -> mlua::Error {
        rt(format!(
            "{fname}: the result would be {bytes} bytes, more than a script may use. The limit is the setting \
             lua.max_memory_bytes ({}; `chela config set lua.max_memory_bytes …`).",
            self.max_bytes()
        ))
    }
}

/// One capture's value: a piece of the subject, or a position (`()`).
enum Cap {
    Str(usize, usize),
    Pos(usize),
}

struct Matcher<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    depth: usize,
    level: usize,
    capture: [(usize, isize); MAX_CAPTURES],
    meter: &'a mut Meter,
}

fn match_class(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        // C's isspace, with the vertical tab Rust's is_ascii_whitespace leaves out.
        b's' => matches!(c, b' ' | b'\t'..=b'\r'),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    if cl.is_ascii_lowercase() { res } else { !res }
}

impl<'a> Matcher<'a> {
    fn new(src: &'a [u8], pat: &'a [u8], meter: &'a mut Meter) -> Matcher<'a> {
        Matcher { src, pat, depth: MAX_DEPTH, level: 0, capture: [(0, 0); MAX_CAPTURES], meter }
    }

    /// Byte `i` of the pattern, `0` past its end (C reads the terminating NUL there).
    fn p(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    fn s(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    fn class_end(&self, mut p: usize) -> R<usize> {
        let c = self.p(p);
        p += 1;
        match c {
            b'%' => {
                if p >= self.pat.len() {
                    return Err(rt("malformed pattern (ends with '%')"));
                }
                Ok(p + 1)
            }
            b'[' => {
                if self.p(p) == b'^' {
                    p += 1;
                }
                loop {
                    if p >= self.pat.len() {
                        return Err(rt("malformed pattern (missing ']')"));
                    }
                    let c = self.pat[p];
                    p += 1;
                    if c == b'%' && p < self.pat.len() {
                        p += 1;
                    }
                    if self.p(p) == b']' {
                        return Ok(p + 1);
                    }
                }
            }
            _ => Ok(p),
        }
    }

    /// Whether `c` is in the set `[...]` from `p` (the `[`) to `ec` (the `]`).
    fn bracket(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut sig = true;
        if self.p(p + 1) == b'^' {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                return !sig;
            }
            if self.pat[p] == b'%' {
                p += 1;
                if match_class(c, self.p(p)) {
                    return sig;
                }
            } else if self.p(p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if self.pat[p - 2] <= c && c <= self.pat[p] {
                    return sig;
                }
            } else if self.pat[p] == c {
                return sig;
            }
        }
    }

    fn single(&self, s: usize, p: usize, ep: usize) -> bool {
        let Some(&c) = self.src.get(s) else { return false };
        match self.pat[p] {
            b'.' => true,
            b'%' => match_class(c, self.p(p + 1)),
            b'[' => self.bracket(c, p, ep - 1),
            pc => pc == c,
        }
    }

    fn balance(&mut self, s: usize, p: usize) -> R<Option<usize>> {
        if p + 1 >= self.pat.len() {
            return Err(rt("malformed pattern (missing arguments to '%b')"));
        }
        if self.s(s) != self.pat[p] {
            return Ok(None);
        }
        let (open, close) = (self.pat[p], self.pat[p + 1]);
        let mut depth = 1usize;
        for i in s + 1..self.src.len() {
            self.meter.step(1)?;
            let c = self.src[i];
            if c == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(Some(i + 1));
                }
            } else if c == open {
                depth += 1;
            }
        }
        Ok(None)
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> R<Option<usize>> {
        let mut i = 0;
        while self.single(s + i, p, ep) {
            self.meter.step(1)?;
            i += 1;
        }
        loop {
            if let Some(r) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(r));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> R<Option<usize>> {
        loop {
            if let Some(r) = self.do_match(s, ep + 1)? {
                return Ok(Some(r));
            }
            if !self.single(s, p, ep) {
                return Ok(None);
            }
            s += 1;
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: isize) -> R<Option<usize>> {
        if self.level >= MAX_CAPTURES {
            return Err(rt("too many captures"));
        }
        self.capture[self.level] = (s, what);
        self.level += 1;
        let r = self.do_match(s, p)?;
        if r.is_none() {
            self.level -= 1;
        }
        Ok(r)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> R<Option<usize>> {
        let l = (0..self.level)
            .rev()
            .find(|&l| self.capture[l].1 == CAP_UNFINISHED)
            .ok_or_else(|| rt("invalid pattern capture"))?;
        self.capture[l].1 = isize::try_from(s - self.capture[l].0).unwrap_or(isize::MAX);
        let r = self.do_match(s, p)?;
        if r.is_none() {
            self.capture[l].1 = CAP_UNFINISHED;
        }
        Ok(r)
    }

    fn match_capture(&mut self, s: usize, digit: u8) -> R<Option<usize>> {
        let l = usize::from(digit).wrapping_sub(usize::from(b'1'));
        if l >= self.level || self.capture[l].1 == CAP_UNFINISHED {
            return Err(rt(format!("invalid capture index %{}", l.wrapping_add(1) as isize)));
        }
        let (init, len) = self.capture[l];
        let Ok(len) = usize::try_from(len) else { return Ok(None) };
        self.meter.step(len as u64)?;
        Ok((self.src.len() - s >= len && self.src[init..init + len] == self.src[s..s + len]).then_some(s + len))
    }

    fn do_match(&mut self, mut s: usize, mut p: usize) -> R<Option<usize>> {
        if self.depth == 0 {
            return Err(rt("pattern too complex"));
        }
        self.depth -= 1;
        let r = loop {
            self.meter.step(1)?;
            if p == self.pat.len() {
                break Some(s);
            }
            match self.pat[p] {
                b'(' if self.p(p + 1) == b')' => break self.start_capture(s, p + 2, CAP_POSITION)?,
                b'(' => break self.start_capture(s, p + 1, CAP_UNFINISHED)?,
                b')' => break self.end_capture(s, p + 1)?,
                b'$' if p + 1 == self.pat.len() => break (s == self.src.len()).then_some(s),
                b'%' if self.p(p + 1) == b'b' => match self.balance(s, p + 2)? {
                    Some(e) => {
                        s = e;
                        p += 4;
                    }
                    None => break None,
                },
                b'%' if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        return Err(rt("missing '[' after '%f' in pattern"));
                    }
                    let ep = self.class_end(p)?;
                    let prev = if s == 0 { 0 } else { self.s(s - 1) };
                    if self.bracket(prev, p, ep - 1) || !self.bracket(self.s(s), p, ep - 1) {
                        break None;
                    }
                    p = ep;
                }
                b'%' if self.p(p + 1).is_ascii_digit() => match self.match_capture(s, self.p(p + 1))? {
                    Some(e) => {
                        s = e;
                        p += 2;
                    }
                    None => break None,
                },
                _ => {
                    let ep = self.class_end(p)?;
                    let suffix = self.p(ep);
                    if !self.single(s, p, ep) {
                        if matches!(suffix, b'*' | b'?' | b'-') {
                            p = ep + 1;
                            continue;
                        }
                        break None;
                    }
                    match suffix {
                        b'?' => {
                            if let Some(r) = self.do_match(s + 1, ep + 1)? {
                                break Some(r);
                            }
                            p = ep + 1;
                        }
                        b'+' => break self.max_expand(s + 1, p, ep)?,
                        b'*' => break self.max_expand(s, p, ep)?,
                        b'-' => break self.min_expand(s, p, ep)?,
                        _ => {
                            s += 1;
                            p = ep;
                        }
                    }
                }
            }
        };
        self.depth += 1;
        Ok(r)
    }

    fn reset(&mut self) {
        self.level = 0;
        self.depth = MAX_DEPTH;
    }

    fn one_capture(&self, i: usize, s: usize, e: usize) -> R<Cap> {
        if i >= self.level {
            if i != 0 {
                return Err(rt(format!("invalid capture index %{}", i + 1)));
            }
            return Ok(Cap::Str(s, e));
        }
        let (init, len) = self.capture[i];
        match len {
            CAP_UNFINISHED => Err(rt("unfinished capture")),
            CAP_POSITION => Ok(Cap::Pos(init + 1)),
            len => Ok(Cap::Str(init, init + len.unsigned_abs())),
        }
    }

    fn cap_value(&self, lua: &Lua, cap: Cap) -> R<Value> {
        Ok(match cap {
            Cap::Str(a, b) => Value::String(lua.create_string(&self.src[a..b])?),
            Cap::Pos(i) => Value::Integer(int(i)),
        })
    }

    /// The captures as values; the whole match `s..e` when the pattern has none (and `whole`).
    fn captures(&self, lua: &Lua, whole: Option<(usize, usize)>) -> R<Vec<Value>> {
        let n = if self.level == 0 && whole.is_some() { 1 } else { self.level };
        let (s, e) = whole.unwrap_or((0, 0));
        (0..n).map(|i| self.cap_value(lua, self.one_capture(i, s, e)?)).collect()
    }
}

fn int(i: usize) -> i64 {
    i64::try_from(i).unwrap_or(i64::MAX)
}

fn arg(args: &MultiValue, i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Nil)
}

fn check_str(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> R<mlua::String> {
    let v = arg(args, i);
    let tname = v.type_name();
    lua.coerce_string(v)?
        .ok_or_else(|| rt(format!("bad argument #{} to 'string.{fname}' (string expected, got {tname})", i + 1)))
}

fn opt_int(lua: &Lua, args: &MultiValue, i: usize, fname: &str, default: i64) -> R<i64> {
    match arg(args, i) {
        Value::Nil => Ok(default),
        v => {
            let tname = v.type_name();
            lua.coerce_integer(v)?.ok_or_else(|| {
                rt(format!("bad argument #{} to 'string.{fname}' (number expected, got {tname}, or a number with no integer representation)", i + 1))
            })
        }
    }
}

/// Lua's `posrelatI`: a 1-based start position, negative from the end, clipped to `[1, ∞)`.
fn start_at(pos: i64, len: usize) -> usize {
    if pos > 0 {
        usize::try_from(pos).unwrap_or(usize::MAX)
    } else if pos == 0 || pos.unsigned_abs() > len as u64 {
        1
    } else {
        len - usize::try_from(pos.unsigned_abs()).unwrap_or(len) + 1
    }
}

fn find_aux(lua: &Lua, args: &MultiValue, find: bool) -> R<MultiValue> {
    let fname = if find { "find" } else { "match" };
    let (s, p) = (check_str(lua, args, 0, fname)?, check_str(lua, args, 1, fname)?);
    let (s, p) = (s.as_bytes(), p.as_bytes());
    let init = start_at(opt_int(lua, args, 2, fname, 1)?, s.len()) - 1;
    let fail = || Ok(MultiValue::from_vec(vec![Value::Nil]));
    if init > s.len() {
        return fail();
    }
    let plain = find
        && (!matches!(arg(args, 3), Value::Nil | Value::Boolean(false)) || !p.iter().any(|c| SPECIALS.contains(c)));
    let mut meter = Meter::new(lua, if find { "string.find" } else { "string.match" });
    if plain {
        // Two-way search: linear, where Lua's memchr-and-memcmp loop is quadratic.
        return match memchr::memmem::find(&s[init..], &p) {
            Some(at) => Ok(MultiValue::from_vec(vec![
                Value::Integer(int(init + at + 1)),
                Value::Integer(int(init + at + p.len())),
            ])),
            None => fail(),
        };
    }
    let (anchor, pat) = match p.first() {
        Some(b'^') => (true, &p[1..]),
        _ => (false, &p[..]),
    };
    let mut m = Matcher::new(&s, pat, &mut meter);
    let mut s1 = init;
    loop {
        m.reset();
        if let Some(e) = m.do_match(s1, 0)? {
            let values = if find {
                let mut v = vec![Value::Integer(int(s1 + 1)), Value::Integer(int(e))];
                v.extend(m.captures(lua, None)?);
                v
            } else {
                m.captures(lua, Some((s1, e)))?
            };
            return Ok(MultiValue::from_vec(values));
        }
        if s1 >= s.len() || anchor {
            return fail();
        }
        s1 += 1;
    }
}

fn gmatch(lua: &Lua, args: &MultiValue) -> R<mlua::Function> {
    let (s, p) = (check_str(lua, args, 0, "gmatch")?, check_str(lua, args, 1, "gmatch")?);
    let len = s.as_bytes().len();
    let init = (start_at(opt_int(lua, args, 2, "gmatch", 1)?, len) - 1).min(len + 1);
    let state = std::sync::Mutex::new((init, None::<usize>));
    lua.create_function(move |lua, ()| {
        let (src, pat) = (s.as_bytes(), p.as_bytes());
        let mut meter = Meter::new(lua, "string.gmatch");
        let mut m = Matcher::new(&src, &pat, &mut meter);
        let mut st = state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for at in st.0..=src.len() {
            m.reset();
            if let Some(e) = m.do_match(at, 0)?
                && Some(e) != st.1
            {
                *st = (e, Some(e));
                return Ok(MultiValue::from_vec(m.captures(lua, Some((at, e)))?));
            }
        }
        Ok(MultiValue::new())
    })
}

enum Repl {
    Str(mlua::String),
    Table(mlua::Table),
    Func(mlua::Function),
}

/// Appends the replacement for the match `s..e`; whether the subject changed.
fn add_value(lua: &Lua, m: &Matcher<'_>, out: &mut Vec<u8>, s: usize, e: usize, repl: &Repl) -> R<bool> {
    let value = match repl {
        Repl::Str(r) => {
            let r = r.as_bytes();
            let mut i = 0;
            while let Some(at) = memchr::memchr(b'%', &r[i..]) {
                out.extend_from_slice(&r[i..i + at]);
                let c = r.get(i + at + 1).copied().unwrap_or(0);
                match c {
                    b'%' => out.push(b'%'),
                    b'0' => out.extend_from_slice(&m.src[s..e]),
                    b'1'..=b'9' => match m.one_capture(usize::from(c - b'1'), s, e)? {
                        Cap::Str(a, b) => out.extend_from_slice(&m.src[a..b]),
                        Cap::Pos(p) => out.extend_from_slice(p.to_string().as_bytes()),
                    },
                    _ => return Err(rt("invalid use of '%' in replacement string")),
                }
                i += at + 2;
            }
            out.extend_from_slice(&r[i..]);
            return Ok(true);
        }
        Repl::Table(t) => t.get::<Value>(m.cap_value(lua, m.one_capture(0, s, e)?)?)?,
        Repl::Func(f) => f.call::<Value>(MultiValue::from_vec(m.captures(lua, Some((s, e)))?))?,
    };
    match value {
        Value::Nil | Value::Boolean(false) => {
            out.extend_from_slice(&m.src[s..e]);
            Ok(false)
        }
        v @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
            let text = lua.coerce_string(v)?.ok_or_else(|| rt("invalid replacement value"))?;
            out.extend_from_slice(&text.as_bytes());
            Ok(true)
        }
        other => Err(rt(format!("invalid replacement value (a {})", other.type_name()))),
    }
}

fn gsub(lua: &Lua, args: &MultiValue) -> R<(Value, i64)> {
    let subject = check_str(lua, args, 0, "gsub")?;
    let p = check_str(lua, args, 1, "gsub")?;
    let repl = match arg(args, 2) {
        v @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
            Repl::Str(lua.coerce_string(v)?.ok_or_else(|| rt("bad argument #3 to 'string.gsub'"))?)
        }
        Value::Table(t) => Repl::Table(t),
        Value::Function(f) => Repl::Func(f),
        other => {
            return Err(rt(format!(
                "bad argument #3 to 'string.gsub' (string/function/table expected, got {})",
                other.type_name()
            )));
        }
    };
    let (src, p) = (subject.as_bytes(), p.as_bytes());
    let max_n = opt_int(lua, args, 3, "gsub", int(src.len()) + 1)?;
    let (anchor, pat) = match p.first() {
        Some(b'^') => (true, &p[1..]),
        _ => (false, &p[..]),
    };
    let mut meter = Meter::new(lua, "string.gsub");
    let max_bytes = meter.max_bytes();
    let mut m = Matcher::new(&src, pat, &mut meter);
    let (mut out, mut at, mut last, mut n, mut changed) = (Vec::new(), 0, None, 0i64, false);
    while n < max_n {
        m.reset();
        match m.do_match(at, 0)? {
            Some(e) if Some(e) != last => {
                n += 1;
                changed |= add_value(lua, &m, &mut out, at, e, &repl)?;
                at = e;
                last = Some(e);
            }
            _ if at < src.len() => {
                out.push(src[at]);
                at += 1;
            }
            _ => break,
        }
        if out.len() > max_bytes {
            return Err(m.meter.too_large("string.gsub", out.len() as u128));
        }
        if anchor {
            break;
        }
    }
    if !changed {
        return Ok((Value::String(subject.clone()), n));
    }
    out.extend_from_slice(&src[at..]);
    if out.len() > max_bytes {
        return Err(m.meter.too_large("string.gsub", out.len() as u128));
    }
    Ok((Value::String(lua.create_string(&out)?), n))
}

/// `string.rep`: sized before it is built. Lua's loops `n` times even when every copy is empty.
fn rep(lua: &Lua, args: &MultiValue) -> R<mlua::String> {
    let s = check_str(lua, args, 0, "rep")?;
    let n = match arg(args, 1) {
        Value::Nil => return Err(rt("bad argument #2 to 'string.rep' (number expected, got no value)")),
        v => opt_int(lua, args, 1, "rep", 0).map_err(|_| {
            rt(format!("bad argument #2 to 'string.rep' (number expected, got {}, or not an integer)", v.type_name()))
        })?,
    };
    let sep = match arg(args, 2) {
        Value::Nil => None,
        _ => Some(check_str(lua, args, 2, "rep")?),
    };
    let (s, sep) = (s.as_bytes(), sep.as_ref().map(|x| x.as_bytes()));
    let sep: &[u8] = sep.as_deref().unwrap_or(b"");
    if n <= 0 || s.len() + sep.len() == 0 {
        return lua.create_string("");
    }
    let n = n.unsigned_abs();
    let total = u128::from(n) * s.len() as u128 + u128::from(n - 1) * sep.len() as u128;
    let meter = Meter::new(lua, "string.rep");
    if total > meter.max_bytes() as u128 {
        return Err(meter.too_large("string.rep", total));
    }
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for i in 0..n {
        if i > 0 {
            out.extend_from_slice(sep);
        }
        out.extend_from_slice(&s);
    }
    lua.create_string(&out)
}

/// Puts the metered functions into `string` (the string metatable's `__index` is that table, so
/// `s:find(…)` uses them too).
pub(super) fn install(lua: &Lua) -> mlua::Result<()> {
    let string: mlua::Table = lua.globals().get("string")?;
    string.set("find", lua.create_function(|lua, a: MultiValue| find_aux(lua, &a, true))?)?;
    string.set("match", lua.create_function(|lua, a: MultiValue| find_aux(lua, &a, false))?)?;
    string.set("gmatch", lua.create_function(|lua, a: MultiValue| gmatch(lua, &a))?)?;
    string.set("gsub", lua.create_function(|lua, a: MultiValue| gsub(lua, &a))?)?;
    string.set("rep", lua.create_function(|lua, a: MultiValue| rep(lua, &a))?)?;
    Ok(())
}

#[cfg(test)]
mod tests;
