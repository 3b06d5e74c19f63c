//! A prepared sandboxed Lua state: only the libraries the issue allows, the `cap`, `cjson` and
//! `log` modules, and a hook that enforces the per-run limits of the [`Run`] bound to the state.
//!
//! Every state is used for one run and then dropped, so nothing a script changes (globals, the
//! string library, metatables) can reach another script.

use std::sync::Arc;

use mlua::{HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use super::run::Run;
pub(super) use super::run::{HOOK_EVERY, MAX_DEPTH};
use super::strlib::{self, Meter};

/// Nesting deeper than this is refused by `cjson.encode` (and a table that contains itself).
const MAX_JSON_DEPTH: usize = 64;

/// Runs inside each new state with the host functions as arguments; replaces or refuses every
/// global the sandbox must not expose, so each escape gets its own message.
const PRELUDE: &str = r##"
local emit, cap_call, encode, decode, sleep_ms, killed, null, charge_move = ...
local _pcall, _xpcall, _load, _getmetatable, _resume = pcall, xpcall, load, getmetatable, coroutine.resume
local _collect, _select, _tostring, _error, _type, _setmetatable = collectgarbage, select, tostring, error, type, setmetatable
local concat = table.concat
local SB = " is not available in the Chela Lua sandbox"

local function refuse(what, hint)
  return function() _error(what .. SB .. hint, 2) end
end
local function closed(name, keep, hint)
  return _setmetatable(keep, {
    __index = function(_, k) _error(name .. "." .. _tostring(k) .. SB .. hint, 2) end,
    __newindex = function(_, k) _error(name .. "." .. _tostring(k) .. " cannot be set in the Chela Lua sandbox", 2) end,
    __metatable = false,
  })
end

-- A limit that stopped the script (instructions, time, output, a forced stop) cannot be caught:
-- whatever catches an error re-raises it.
local function after(...)
  local why = killed()
  if why then _error(why, 0) end
  return ...
end
pcall = function(...) return after(_pcall(...)) end
xpcall = function(...) return after(_xpcall(...)) end
coroutine.resume = function(...) return after(_resume(...)) end

load = function(chunk, name, mode, ...)
  if mode ~= nil and mode ~= "t" then
    _error("load: binary chunks are refused in the Chela Lua sandbox (only text chunks load, mode \"t\")", 2)
  end
  if _select("#", ...) > 0 then return _load(chunk, name, "t", ...) end
  return _load(chunk, name, "t")
end
dofile = refuse("dofile", " (read a script with cap.call(\"file_read\", ...) and load it)")
loadfile = refuse("loadfile", " (read a script with cap.call(\"file_read\", ...) and load it)")
string.dump = refuse("string.dump", " (binary chunks cannot be loaded)")
warn = refuse("warn", " (use log.warn)")

local gc_allowed = { collect = true, count = true, step = true, isrunning = true }
collectgarbage = function(opt, ...)
  opt = opt or "collect"
  if not gc_allowed[opt] then
    _error("collectgarbage(\"" .. _tostring(opt) .. "\")" .. SB ..
      " (it changes the collector; allowed: collect, count, step, isrunning)", 2)
  end
  return _collect(opt, ...)
end

-- The string metatable is shared by every string; a script must not reach it.
_getmetatable("").__metatable = false
getmetatable = function(v)
  if _type(v) == "string" then _error("the string metatable is protected in the Chela Lua sandbox", 2) end
  return _getmetatable(v)
end

local osx = os
os = closed("os", { time = osx.time, clock = osx.clock, date = osx.date }, " (only os.time, os.clock and os.date are)")
io = closed("io", {}, " (use cap.call(\"file_read\", ...) and cap.call(\"file_write\", ...))")
debug = closed("debug", {}, "")
package = closed("package", {}, " (scripts cannot load C modules or search paths; require gives cap, cjson and log)")

-- table.insert, table.remove and table.move loop in C, where the instruction hook never runs: a
-- __len of 2^62, or a range of 2^62 elements, would run past every limit. On a table with a
-- metatable (where # may say anything) insert and remove run in Lua, counted like the script;
-- a long move is made in slices, each charged as one instruction per element.
local _insert, _remove, _move = table.insert, table.remove, table.move
local _mtype, _tointeger, _maxinteger, _min = math.type, math.tointeger, math.maxinteger, math.min
local SLICE = 4096
local function length(t)
  local n = #t
  if _mtype(n) ~= "integer" then _error("object length is not an integer", 3) end
  return n
end
local function position(v, i, f)
  local n = _tointeger(v)
  if n == nil then _error("bad argument #" .. i .. " to '" .. f .. "' (number has no integer representation)", 3) end
  return n
end
table.insert = function(t, ...)
  if _type(t) ~= "table" or _getmetatable(t) == nil then return _insert(t, ...) end
  local n, e = _select("#", ...), length(t) + 1
  if n == 1 then t[e] = ... return end
  if n ~= 2 then _error("wrong number of arguments to 'insert'", 2) end
  local pos, v = ...
  pos = position(pos, 2, "insert")
  if pos < 1 or pos > e then _error("bad argument #2 to 'insert' (position out of bounds)", 2) end
  for i = e, pos + 1, -1 do t[i] = t[i - 1] end
  t[pos] = v
end
table.remove = function(t, ...)
  if _type(t) ~= "table" or _getmetatable(t) == nil then return _remove(t, ...) end
  local size, pos = length(t), ...
  if pos == nil then pos = size else pos = position(pos, 2, "remove") end
  if pos ~= size and (pos < 1 or pos > size + 1) then
    _error("bad argument #2 to 'remove' (position out of bounds)", 2)
  end
  local v = t[pos]
  while pos < size do t[pos] = t[pos + 1] pos = pos + 1 end
  t[pos] = nil
  return v
end
table.move = function(a1, f, e, t, a2)
  local fi, ei, ti = _tointeger(f), _tointeger(e), _tointeger(t)
  if not (fi and ei and ti) or ei < fi or ei - fi < SLICE then return _move(a1, f, e, t, a2) end
  if ti > _maxinteger - (ei - fi) then _error("bad argument #4 to 'move' (destination wrap around)", 2) end
  local dest = a2
  if dest == nil then dest = a1 end
  local n = ei - fi + 1
  if ti > ei or ti <= fi or dest ~= a1 then
    for s = 0, n - 1, SLICE do
      local k = _min(SLICE, n - s)
      charge_move(k)
      _move(a1, fi + s, fi + s + k - 1, ti + s, dest)
    end
  else
    -- Overlapping, moving up: from the end, as Lua's own does.
    local s = n
    while s > 0 do
      local k = _min(SLICE, s)
      s = s - k
      charge_move(k)
      _move(a1, fi + s, fi + s + k - 1, ti + s, dest)
    end
  end
  return dest
end

local function line(...)
  local n, t = _select("#", ...), {}
  for i = 1, n do t[i] = _tostring((_select(i, ...))) end
  return concat(t, "\t")
end
print = function(...) emit("print", line(...)) end
sleep = function(ms) return sleep_ms(ms) end

local cap = closed("cap", {
  call = function(id, json)
    if _type(json) == "table" then json = encode(json) end
    return cap_call(id, json)
  end,
}, "")
local cjson = closed("cjson", { encode = encode, decode = decode, null = null }, "")
local log = closed("log", {
  debug = function(...) emit("debug", line(...)) end,
  info = function(...) emit("info", line(...)) end,
  warn = function(...) emit("warn", line(...)) end,
  error = function(...) emit("error", line(...)) end,
}, "")
local modules = {
  cap = cap, cjson = cjson, log = log, string = string, table = table, math = math, utf8 = utf8,
  coroutine = coroutine, os = os,
}
require = function(name)
  local m = modules[name]
  if m == nil then
    _error("module '" .. _tostring(name) .. "'" .. SB ..
      " (require gives cap, cjson, log and the libraries string, table, math, utf8, coroutine, os)", 2)
  end
  return m
end
"##;

/// A fresh sandboxed state, ready for [`Run::bind`]. Takes a few tens of microseconds, which is
/// why the host keeps a few prepared ahead.
pub(super) fn prepare() -> mlua::Result<Lua> {
    let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE | StdLib::OS;
    let lua = Lua::new_with(libs, LuaOptions::new())?;
    let emit = lua.create_function(|lua, (kind, line): (String, String)| Run::of(lua)?.emit(&kind, line))?;
    let cap_call = lua.create_function(|lua, (id, json): (String, Option<String>)| {
        let run = Run::of(lua)?;
        Ok(run.cap_call(&id, json.as_deref().unwrap_or("{}")))
    })?;
    let encode = lua.create_function(|lua, v: Value| {
        let mut out = String::new();
        to_json(&v, 0, &mut out, &mut Meter::new(lua, "cjson.encode"))?;
        Ok(out)
    })?;
    let decode = lua.create_function(|lua, s: mlua::String| {
        let v: serde_json::Value = serde_json::from_slice(&s.as_bytes())
            .map_err(|e| mlua::Error::runtime(format!("cjson.decode: invalid JSON: {e}")))?;
        from_json(lua, &v)
    })?;
    let sleep = lua.create_function(|lua, ms: f64| Run::of(lua)?.sleep(ms))?;
    let killed = lua.create_function(|lua, ()| Ok(Run::of(lua).ok().and_then(|r| r.killed())))?;
    let charge_move = lua.create_function(|lua, n: u64| Run::of(lua)?.charge(n, Some("table.move")))?;
    strlib::install(&lua)?;
    lua.load(PRELUDE).set_name("=sandbox").call::<()>((
        emit,
        cap_call,
        encode,
        decode,
        sleep,
        killed,
        Value::NULL,
        charge_move,
    ))?;
    // The global hook (not the per-thread one) also runs in coroutines the script creates.
    lua.set_global_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), |lua, _| {
        match lua.app_data_ref::<Arc<Run>>() {
            Some(run) => {
                let deep = lua.inspect_stack(MAX_DEPTH, |_| ()).is_some();
                run.on_hook(deep).map(|()| VmState::Continue)
            }
            None => Ok(VmState::Continue),
        }
    })?;
    Ok(lua)
}

/// `v` as JSON text, the way lua-cjson writes it: a table with keys 1..n is an array, any
/// other table an object (an empty table is `{}`), `cjson.null` is `null`. Each value written is
/// charged to `meter`, and the text is bounded by `lua.max_memory_bytes`: a table that holds the
/// same table twice, forty levels deep, is small but writes 2^40 values.
pub(super) fn to_json(v: &Value, depth: usize, out: &mut String, meter: &mut Meter) -> mlua::Result<()> {
    if depth > MAX_JSON_DEPTH {
        return Err(mlua::Error::runtime(format!(
            "cjson.encode: nested deeper than {MAX_JSON_DEPTH} levels (or a table contains itself)"
        )));
    }
    meter.step(1)?;
    if out.len() > meter.max_bytes() {
        return Err(meter.too_large("cjson.encode", out.len() as u128));
    }
    match v {
        Value::Nil => out.push_str("null"),
        Value::LightUserData(p) if p.0.is_null() => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(i) => out.push_str(&i.to_string()),
        Value::Number(n) if n.is_finite() => {
            out.push_str(&serde_json::Number::from_f64(*n).map_or_else(|| "null".into(), |n| n.to_string()))
        }
        Value::Number(_) => return Err(mlua::Error::runtime("cjson.encode: cannot encode NaN or infinity")),
        Value::String(s) => out.push_str(&serde_json::Value::String(s.to_string_lossy()).to_string()),
        Value::Table(t) => table_to_json(t, depth, out, meter)?,
        other => return Err(mlua::Error::runtime(format!("cjson.encode: cannot encode a {}", other.type_name()))),
    }
    Ok(())
}

fn table_to_json(t: &Table, depth: usize, out: &mut String, meter: &mut Meter) -> mlua::Result<()> {
    let n = t.raw_len();
    let mut count = 0usize;
    let mut entries = Vec::new();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        count += 1;
        entries.push((k, v));
    }
    if n > 0 && count == n {
        out.push('[');
        for i in 1..=n {
            if i > 1 {
                out.push(',');
            }
            let v: Value = t.raw_get(i)?;
            to_json(&v, depth + 1, out, meter)?;
        }
        out.push(']');
        return Ok(());
    }
    out.push('{');
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let key = match k {
            Value::String(s) => s.to_string_lossy(),
            Value::Integer(i) => i.to_string(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(mlua::Error::runtime(format!(
                    "cjson.encode: a table key cannot be a {}",
                    other.type_name()
                )));
            }
        };
        out.push_str(&serde_json::Value::String(key).to_string());
        out.push(':');
        to_json(v, depth + 1, out, meter)?;
    }
    out.push('}');
    Ok(())
}

/// JSON as Lua values: objects and arrays become tables, `null` becomes `cjson.null`.
pub(super) fn from_json(lua: &Lua, v: &serde_json::Value) -> mlua::Result<Value> {
    Ok(match v {
        serde_json::Value::Null => Value::NULL,
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(lua.create_string(s)?),
        serde_json::Value::Array(a) => {
            let t = lua.create_table_with_capacity(a.len(), 0)?;
            for (i, x) in a.iter().enumerate() {
                t.raw_set(i + 1, from_json(lua, x)?)?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(o) => {
            let t = lua.create_table_with_capacity(0, o.len())?;
            for (k, x) in o {
                t.raw_set(k.as_str(), from_json(lua, x)?)?;
            }
            Value::Table(t)
        }
    })
}

/// The first value of a chunk's or `run`'s results.
pub(super) fn first(values: MultiValue) -> Value {
    values.into_iter().next().unwrap_or(Value::Nil)
}
