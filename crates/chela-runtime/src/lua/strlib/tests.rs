//! The Rust matcher against Lua's own C one: the same calls give the same results and errors.

use mlua::{Lua, LuaOptions, StdLib};

/// Runs every case with `string.find`, `match`, `gmatch` (all its results) and `gsub`, and
/// returns one line per case: the results with their types, or `ERR` and the message.
const HARNESS: &str = r##"
local cases = ...
local out = {}
local function show(...)
  local t = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    t[#t + 1] = type(v) .. ":" .. tostring(v)
  end
  return table.concat(t, " ")
end
local function each(f, args)
  local r = table.pack(pcall(f, table.unpack(args, 1, args.n)))
  if not r[1] then
    -- mlua's errors carry a traceback on the next lines.
    local e = tostring(r[2])
    local nl = e:find("\n", 1, true)
    return "ERR " .. (nl and e:sub(1, nl - 1) or e)
  end
  return show(table.unpack(r, 2, r.n))
end
local function gm(s, p, init)
  local all = {}
  for a, b in string.gmatch(s, p, init) do
    all[#all + 1] = tostring(a) .. "," .. tostring(b)
    if #all > 50 then break end
  end
  return table.concat(all, ";")
end
for i, c in ipairs(cases) do
  local s, p = c[1], c[2]
  out[#out + 1] = i .. " find " .. each(string.find, table.pack(s, p, c[3], c[4]))
  out[#out + 1] = i .. " match " .. each(string.match, table.pack(s, p, c[3]))
  out[#out + 1] = i .. " gmatch " .. each(gm, table.pack(s, p, c[3]))
  local repl = c.repl or "<%0>"
  out[#out + 1] = i .. " gsub " .. each(string.gsub, table.pack(s, p, repl, c.n))
end
return table.concat(out, "\n")
"##;

const CASES: &str = r##"return {
  {"hello world", "o w"}, {"hello", "l+"}, {"hello", "()ll()"}, {"hello", "h(.-)o"}, {"abc", "^b"},
  {"abc", "^a"}, {"abc", "c$"}, {"a$c", "$c"}, {"a$c", "a$"}, {"THE (quick) fox", "%((%a+)%)"},
  {"f(a(b)c)d", "%b()"}, {"f(a(b c)d", "%b()"}, {"THE (quick) fox", "%f[%a]%a+", 5}, {"hello", "", 10},
  {"hello", "", 6}, {"hello", "", -2}, {"hello", "l", -100}, {"a.b", ".", 1, true}, {"a.b", ".", 2, 0},
  {"key = value", "(%w+)%s*=%s*(%w+)"}, {"aaa", "a-b"}, {"aaab", "a-b"}, {"  x y  ", "^%s*(.-)%s*$"},
  {"abcabc", "(abc)%1"}, {"x-y", "[%a-z]+"}, {"a]b", "[]]"}, {"a-b", "[a-]+"}, {"^x", "[%^x]+"},
  {"\0ab", "%z"}, {"abc", "[^%a]"}, {"abc\n\v", "%c+"}, {"a1_B", "[%w_]+"}, {"hello", "(h)(e)(l)(l)(o)"},
  {"2024-01-02", "(%d+)-(%d+)-(%d+)"}, {"x", "%"}, {"x", "[a"}, {"x", "(x"}, {"x", "x)"}, {"x", "%1"},
  {"x", "%b"}, {"x", "%fx"}, {"x", "%f[x"}, {"a", string.rep("(", 33) .. "a" .. string.rep(")", 33)},
  {"aaa", "a*"}, {"abc", ""}, {"abc", "()"}, {"hello", "l", 4}, {"abc", "%w", repl = "%0%0"},
  {"abc", "(%w)", repl = "%1-"}, {"abc", "b", repl = "%%"}, {"$name is $age", "%$(%w+)", repl = {name = "x", age = 3}},
  {"abc", "%w", repl = function(c) if c == "b" then return false end return c:upper() end},
  {"abc", "%w", repl = "x", n = 2}, {"abc", "x*", repl = "-"}, {"abc", "()", repl = "%1"},
  {"abc", "b", repl = "%2"}, {"abc", "b", repl = "%x"}, {"abc", "b", repl = 1.5}, {"abc", "b", repl = "%"},
  {"abc", "(b)", repl = {b = {}}}, {"abc", "b", repl = true}, {"a.b.c", "%.", repl = "/"},
  {"one two  three", "%s+", repl = " "}, {"x = 1, y = 2", "(%w+) = (%w+)", repl = "%2=%1"},
  {"hello", "(l)(l)", repl = function(a, b) return a .. b .. "!" end}, {"hello", "l?l?", repl = "#"},
  {"abc", "[a-c]+?", repl = "#"}, {"[[x]]", "%[(.-)%]", repl = "<%1>"}, {"THE END", "%u+", n = 0},
  {"a,b,,c", "([^,]*)", repl = "<%1>"}, {"hello", "%f[%l]", repl = "|"}, {"tab\there", "%S+"},
  {"123abc", "^(%d+)(%a+)$"}, {"é ü", "[\128-\255]+"}, {"x", "[]"}, {"x", "[^]"}, {"ab", "a%"},
  {"hello", "(()l)"}, {12345, 3}, {"a+b", "+"}, {"a+b", "a+", 1, "yes"}, {"hello", "(l)%1"},
}"##;

fn run(lua: &Lua) -> String {
    let cases: mlua::Table = lua.load(CASES).eval().unwrap();
    lua.load(HARNESS).call::<String>(cases).unwrap()
}

#[test]
fn the_rust_matcher_gives_lua_s_results_and_errors() {
    let libs = StdLib::STRING | StdLib::TABLE;
    let c = Lua::new_with(libs, LuaOptions::new()).unwrap();
    let rust = Lua::new_with(libs, LuaOptions::new()).unwrap();
    super::install(&rust).unwrap();
    let (want, got) = (run(&c), run(&rust));
    let mut lines = 0;
    for (w, g) in want.lines().zip(got.lines()) {
        lines += 1;
        // An error from Rust is Lua's message with mlua's traceback after it.
        match w.split_once(" ERR ") {
            Some((head, msg)) => {
                // Lua's iterator error names the line of the loop that called it.
                let msg = msg.rsplit_once(".rs:").map_or(msg, |(_, m)| m.split_once(": ").map_or(m, |x| x.1));
                assert!(g.starts_with(&format!("{head} ERR ")) && g.contains(msg), "\nwant {w}\ngot  {g}");
            }
            None => assert_eq!(w, g),
        }
    }
    assert_eq!(lines, want.lines().count());
    assert_eq!(want.lines().count(), got.lines().count());
}

/// `string.rep` as Lua's: separators, empty strings, non-positive counts, and a count whose
/// result is empty however large it is (Lua's own loops that many times).
#[test]
fn rep_gives_lua_s_results_and_refuses_what_exceeds_the_memory_setting() {
    let libs = StdLib::STRING | StdLib::TABLE;
    let c = Lua::new_with(libs, LuaOptions::new()).unwrap();
    let rust = Lua::new_with(libs, LuaOptions::new()).unwrap();
    super::install(&rust).unwrap();
    let code = r#"return table.concat({("ab"):rep(3), ("ab"):rep(3, ", "), ("x"):rep(0), ("x"):rep(-1),
        (""):rep(5, ""), (""):rep(3, "-"), ("x"):rep(1, "sep"), string.rep(7, 2), ("a"):rep(2.0)}, "|")"#;
    let want: String = c.load(code).eval().unwrap();
    assert_eq!(rust.load(code).eval::<String>().unwrap(), want);
    assert_eq!(rust.load(r#"return ("") :rep(2^62)"#).eval::<String>().unwrap(), "");
    assert_eq!(rust.load(r#"return ("") :rep(2^62, "")"#).eval::<String>().unwrap(), "");
}
