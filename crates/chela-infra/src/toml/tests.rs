//! The reader and the writer on documents written for each rule of the spec (its examples,
//! mostly), valid and invalid.

use super::*;

fn read(text: &str) -> Table {
    parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The one value `v = …` sets.
fn value(text: &str) -> Value {
    read(&format!("v = {text}\n")).remove("v").unwrap()
}

fn string(text: &str) -> String {
    match value(text) {
        Value::String(s) => s,
        other => panic!("{other:?}"),
    }
}

/// The error for `text`, which must be refused.
fn refused(text: &str) -> Error {
    match parse(text) {
        Ok(t) => panic!("accepted: {text:?} as {t:?}"),
        Err(e) => e,
    }
}

fn refuses_all(texts: &[&str]) {
    for t in texts {
        let e = refused(t);
        assert!(e.span().start <= t.len() && e.span().end <= t.len(), "{t:?}: {e:?}");
        assert!(t.is_char_boundary(e.span().start), "{t:?}: {e:?}");
    }
}

#[test]
fn comments_and_blank_lines_are_nothing() {
    let t = read("# a comment\n\n  key = \"value\" # after a value\n\t\n# last, no newline");
    assert_eq!(t.len(), 1);
    assert_eq!(t["key"].as_str(), Some("value"));
    assert_eq!(read("a = 1\r\nb = 2\r\n")["b"].as_integer(), Some(2));
    assert!(read("").is_empty());
    assert_eq!(read("\u{feff}a = 1")["a"].as_integer(), Some(1), "a byte-order mark is skipped");
    refuses_all(&["# bell \u{7}\n", "a = 1 # del \u{7f}", "a = 1\rb = 2", "# cr \r alone\n"]);
}

#[test]
fn keys_are_bare_quoted_or_dotted() {
    let t = read(
        "bare_key = 1\nbare-key = 2\n1234 = 3\n\"127.0.0.1\" = 4\n\"character encoding\" = 5\n\"ʎǝʞ\" = 6\n\
         'key2' = 7\n'quoted \"value\"' = 8\n\"\" = 9\n",
    );
    for (k, v) in [("bare_key", 1), ("bare-key", 2), ("1234", 3), ("127.0.0.1", 4), ("character encoding", 5)] {
        assert_eq!(t[k].as_integer(), Some(v), "{k}");
    }
    assert_eq!((t["ʎǝʞ"].as_integer(), t["key2"].as_integer()), (Some(6), Some(7)));
    assert_eq!((t["quoted \"value\""].as_integer(), t[""].as_integer()), (Some(8), Some(9)));
    let t = read(
        "name = \"Orange\"\nphysical.color = \"orange\"\nphysical.shape = \"round\"\nsite.\"google.com\" = true\n",
    );
    assert_eq!(t["physical"]["shape"].as_str(), Some("round"));
    assert_eq!(t["site"]["google.com"].as_bool(), Some(true));
    let t = read("fruit . color = \"yellow\"\n3.14159 = \"pi\"\n");
    assert_eq!(t["fruit"]["color"].as_str(), Some("yellow"));
    assert_eq!(t["3"]["14159"].as_str(), Some("pi"));
    refuses_all(&[
        "key = # no value\n",
        "= \"no key\"\n",
        "first = \"Tom\" last = \"Preston-Werner\"\n",
        "key\n",
        "a.b = 1\na = 2\n",
        "name = \"Tom\"\nname = \"Pradyun\"\n",
        "spelling = \"favorite\"\n\"spelling\" = \"favourite\"\n",
        "fruit.apple = 1\nfruit.apple.smooth = true\n",
        "\"\"\"key\"\"\" = 1\n",
        "a.\n",
        "ké = 1\n",
        "\"a\nb\" = 1\n",
    ]);
}

#[test]
fn basic_strings_take_every_escape() {
    assert_eq!(
        string(r#""I'm a string. \"You can quote me\". Name\tJos\u00E9\nLocation\tSF.""#),
        "I'm a string. \"You can quote me\". Name\tJosé\nLocation\tSF."
    );
    assert_eq!(string(r#""\b\t\n\f\r\"\\\e\x41\u00e9\U0001F600""#), "\u{8}\t\n\u{c}\r\"\\\u{1b}Aé😀");
    refuses_all(&[
        "v = \"\\q\"",
        "v = \"\\u00\"",
        "v = \"\\uD800\"",
        "v = \"\\U00110000\"",
        "v = \"\\xG1\"",
        "v = \"a\tb\u{1}\"",
        "v = \"del\u{7f}\"",
        "v = \"open\n\"",
        "v = \"open",
        "v = \"\\",
    ]);
    assert_eq!(string("\"tab\there\""), "tab\there", "a raw tab is allowed");
}

#[test]
fn multi_line_basic_strings_trim_and_join_lines() {
    assert_eq!(string("\"\"\"\nRoses are red\nViolets are blue\"\"\""), "Roses are red\nViolets are blue");
    assert_eq!(string("\"\"\"\r\nOne\r\nTwo\"\"\""), "One\r\nTwo");
    let joined = "\"\"\"\nThe quick brown \\\n\n\n  fox jumps over \\\n    the lazy dog.\"\"\"";
    assert_eq!(string(joined), "The quick brown fox jumps over the lazy dog.");
    assert_eq!(string("\"\"\"\\\n       The quick brown \\   \n       fox.\\\n       \"\"\""), "The quick brown fox.");
    assert_eq!(
        string(r#""""Here are two quotation marks: "". Simple enough.""""#),
        "Here are two quotation marks: \"\". Simple enough."
    );
    assert_eq!(string(r#""""Here are three quotation marks: ""\".""""#), "Here are three quotation marks: \"\"\".");
    assert_eq!(
        string(r#"""""This," she said, "is just a pointless statement."""""#),
        "\"This,\" she said, \"is just a pointless statement.\""
    );
    refuses_all(&[
        "v = \"\"\"Here are three quotation marks: \"\"\".\"\"\"",
        "v = \"\"\"too many\"\"\"\"\"\"",
        "v = \"\"\"never closed\n",
        "v = \"\"\"bell \u{7}\"\"\"",
        "v = \"\"\"lone \r cr\"\"\"",
        "v = \"\"\"backslash then text \\  x\"\"\"",
    ]);
}

#[test]
fn literal_strings_are_as_written() {
    assert_eq!(string(r"'C:\Users\nodejs\templates'"), r"C:\Users\nodejs\templates");
    assert_eq!(string(r"'<\i\c*\s*>'"), r"<\i\c*\s*>");
    assert_eq!(
        string("'''\nThe first newline is\ntrimmed in raw strings.\n   All other whitespace\n   is preserved.\n'''"),
        "The first newline is\ntrimmed in raw strings.\n   All other whitespace\n   is preserved.\n"
    );
    assert_eq!(string("'''I [dw]on't need \\d{2} apples'''"), "I [dw]on't need \\d{2} apples");
    assert_eq!(string("''''That,' she said, 'is still pointless.''''"), "'That,' she said, 'is still pointless.'");
    refuses_all(&["v = 'open\n'", "v = 'bell\u{7}'", "v = '''a''''''", "v = '''never"]);
}

#[test]
fn integers_are_i64_in_any_base() {
    for (text, v) in [
        ("+99", 99),
        ("42", 42),
        ("0", 0),
        ("-17", -17),
        ("+0", 0),
        ("-0", 0),
        ("1_000", 1000),
        ("5_349_221", 5_349_221),
        ("53_49_221", 5_349_221),
        ("1_2_3_4_5", 12345),
        ("0xDEADBEEF", 0xDEAD_BEEF),
        ("0xdeadbeef", 0xDEAD_BEEF),
        ("0xdead_beef", 0xDEAD_BEEF),
        ("0o01234567", 0o1_234_567),
        ("0o755", 0o755),
        ("0b11010110", 0b1101_0110),
        ("9223372036854775807", i64::MAX),
        ("-9223372036854775808", i64::MIN),
        ("0x7FFFFFFFFFFFFFFF", i64::MAX),
    ] {
        assert_eq!(value(text), Value::Integer(v), "{text}");
    }
    refuses_all(&[
        "v = 9223372036854775808",
        "v = -9223372036854775809",
        "v = 0x8000000000000000",
        "v = 012",
        "v = +012",
        "v = 1__2",
        "v = _1",
        "v = 1_",
        "v = 0x",
        "v = -0x1",
        "v = +0b1",
        "v = 0X1F",
        "v = 0b102",
        "v = 0o8",
        "v = 0x_1",
        "v = 1a",
        "v = +",
        "v = 1 2",
    ]);
}

#[test]
fn floats_take_exponents_inf_and_nan() {
    for (text, v) in [
        ("+1.0", 1.0),
        ("3.25", 3.25),
        ("-0.01", -0.01),
        ("5e+22", 5e22),
        ("1e06", 1e6),
        ("-2E-2", -2e-2),
        ("6.626e-34", 6.626e-34),
        ("224_617.445_991_228", 224_617.445_991_228),
        ("0.0", 0.0),
        ("-0e0", 0.0),
        ("inf", f64::INFINITY),
        ("+inf", f64::INFINITY),
        ("-inf", f64::NEG_INFINITY),
    ] {
        assert_eq!(value(text), Value::Float(v), "{text}");
    }
    assert!(value("-0.0").as_float_bits().is_some_and(|b| b == (-0.0_f64).to_bits()));
    for text in ["nan", "+nan", "-nan"] {
        assert!(matches!(value(text), Value::Float(f) if f.is_nan()), "{text}");
    }
    refuses_all(&[
        "v = .7",
        "v = 7.",
        "v = 3.e+20",
        "v = 1e",
        "v = 1e+",
        "v = 1._5",
        "v = 1.5_",
        "v = 1e_5",
        "v = 01.5",
        "v = 1.5.5",
        "v = Inf",
        "v = NaN",
        "v = infinity",
        "v = 1e5e5",
        "v = 0x1.5",
        "v = 1e309",
        "v = -1.8e308",
    ]);
}

impl Value {
    fn as_float_bits(&self) -> Option<u64> {
        match self {
            Value::Float(f) => Some(f.to_bits()),
            _ => None,
        }
    }
}

#[test]
fn booleans_are_lower_case() {
    assert_eq!(value("true"), Value::Boolean(true));
    assert_eq!(value("false"), Value::Boolean(false));
    refuses_all(&["v = True", "v = truee", "v = fals", "v = tru"]);
}

#[test]
fn dates_and_times_are_checked_and_kept_as_text() {
    let dt = |t: &str| match value(t) {
        Value::Datetime(d) => d,
        other => panic!("{other:?}"),
    };
    for (text, kept) in [
        ("1979-05-27T07:32:00Z", "1979-05-27T07:32:00Z"),
        ("1979-05-27T00:32:00-07:00", "1979-05-27T00:32:00-07:00"),
        ("1979-05-27T00:32:00.999999-07:00", "1979-05-27T00:32:00.999999-07:00"),
        ("1979-05-27 07:32:00Z", "1979-05-27T07:32:00Z"),
        ("1979-05-27t07:32:00z", "1979-05-27T07:32:00Z"),
        ("1979-05-27T07:32:00", "1979-05-27T07:32:00"),
        ("1979-05-27T00:32:00.999999", "1979-05-27T00:32:00.999999"),
        ("1979-05-27", "1979-05-27"),
        ("07:32:00", "07:32:00"),
        ("00:32:00.999999", "00:32:00.999999"),
        ("00:32:00.1234567891", "00:32:00.123456789"),
        ("00:32:00.500", "00:32:00.5"),
        ("00:32:00.000", "00:32:00"),
        ("07:32", "07:32:00"),
        ("1979-05-27T07:32Z", "1979-05-27T07:32:00Z"),
        ("2000-02-29", "2000-02-29"),
        ("1979-05-27T07:32:60Z", "1979-05-27T07:32:60Z"),
        ("1979-05-27T07:32:00-00:00", "1979-05-27T07:32:00+00:00"),
    ] {
        assert_eq!(dt(text), kept, "{text}");
    }
    refuses_all(&[
        "v = 1979-13-27",
        "v = 1979-00-27",
        "v = 1979-05-32",
        "v = 1900-02-29",
        "v = 2001-04-31",
        "v = 1979-05-27T24:00:00",
        "v = 1979-05-27T07:60:00",
        "v = 1979-05-27T07:32:61",
        "v = 1979-05-27T07:32:00+24:00",
        "v = 1979-05-27T07:32:00+07",
        "v = 07:32:00Z",
        "v = 1979-5-27",
        "v = 1979-05-27T7:32:00",
        "v = 1979-05-27T07:32:00.",
        "v = 1979-05-27X07:32:00",
        "v = 1979-05-27 07:32:00 Z",
        "v = 1979-05-27T",
    ]);
}

#[test]
fn arrays_hold_anything_over_many_lines() {
    assert_eq!(value("[ 1, 2, 3 ]"), Value::Array(vec![Value::Integer(1), Value::Integer(2), Value::Integer(3)]));
    let mixed = value("[ 0.1, 0.2, 0.5, 1, 2, 5, \"x\", [1], {a = 1} ]");
    assert_eq!(mixed.as_array().map(Vec::len), Some(9));
    let nested = value("[ [ 1, 2 ], [\"a\", 'b', \"\"\"c\"\"\"] ]");
    assert_eq!(nested.as_array().unwrap()[1].as_array().unwrap()[2].as_str(), Some("c"));
    let long = value("[\n  1, # one\n  2,\n\n  # a comment alone\n  3, # trailing comma next\n]");
    assert_eq!(long.as_array().map(Vec::len), Some(3));
    assert_eq!(value("[]"), Value::Array(Vec::new()));
    assert_eq!(value("[\n]"), Value::Array(Vec::new()));
    refuses_all(&["v = [1,,2]", "v = [,]", "v = [1 2]", "v = [1,", "v = [", "v = [1]]", "v = [1 # c ]"]);
}

#[test]
fn inline_tables_are_closed() {
    let t = read(
        "name = { first = \"Tom\", last = \"Preston-Werner\" }\npoint = {x=1,y=2}\nanimal = { type.name = \"pug\" }\n",
    );
    assert_eq!(t["name"]["last"].as_str(), Some("Preston-Werner"));
    assert_eq!(t["animal"]["type"]["name"].as_str(), Some("pug"));
    assert_eq!(value("{}"), Value::Table(Table::new()));
    // TOML 1.1: newlines, comments and a trailing comma.
    let t = read("t = {\n  a = 1, # one\n  b = 2,\n}\n");
    assert_eq!(t["t"]["b"].as_integer(), Some(2));
    refuses_all(&[
        "[product]\ntype = { name = \"Nail\" }\ntype.edible = false\n",
        "[product]\ntype.name = \"Nail\"\ntype = { edible = false }\n",
        "a = {x = 1}\n[a]\ny = 2\n",
        "a = {x = 1}\n[a.b]\n",
        "a = { b = 1, b = 2 }",
        "a = { b = { c = 1 }, b.d = 2 }",
        "a = { b.c = 1, b = 2 }",
        "a = { , }",
        "a = { b = 1,, }",
        "a = { b = 1 c = 2 }",
        "a = { b }",
        "a = { b = 1",
    ]);
}

#[test]
fn tables_are_defined_once() {
    let t = read(
        "[table-1]\nkey1 = \"some string\"\n\n[table-2]\nkey1 = \"another string\"\n\n[dog.\"tater.man\"]\ntype.name = \"pug\"\n",
    );
    assert_eq!(t["dog"]["tater.man"]["type"]["name"].as_str(), Some("pug"));
    let t = read("[ j . \"ʞ\" . 'l' ]\nx = 1\n[x.y.z.w]\n[x]\na = 1\n");
    assert_eq!(t["j"]["ʞ"]["l"]["x"].as_integer(), Some(1));
    assert_eq!((t["x"]["a"].as_integer(), t["x"]["y"]["z"]["w"].as_table().map(Table::len)), (Some(1), Some(0)));
    // Sub-tables of a table that dotted keys made.
    let t = read("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n[fruit.apple.texture]\nsmooth = true\n");
    assert_eq!(t["fruit"]["apple"]["texture"]["smooth"].as_bool(), Some(true));
    let t = read("a.b = 1\n[a.c]\nd = 2\n");
    assert_eq!(t["a"]["c"]["d"].as_integer(), Some(2));
    refuses_all(&[
        "[fruit]\napple = \"red\"\n[fruit]\norange = \"orange\"\n",
        "[fruit]\napple = \"red\"\n[fruit.apple]\ntexture = \"smooth\"\n",
        "[fruit]\napple.color = \"red\"\n[fruit.apple]\n",
        "[fruit]\napple.taste.sweet = true\n[fruit.apple.taste]\n",
        "[a.b.c]\nz = 9\n[a]\nb.c.t = 1\n",
        "[a.b]\n[a]\nb.y = 1\n",
        "a = 1\n[a]\n",
        "a = 1\n[a.b]\n",
        "[]\n",
        "[a\n",
        "[a]]\n",
        "[a] b = 1\n",
        "[a.]\n",
        "[\"\"\"a\"\"\"]\n",
        "[[a]\n",
        "[ [a]]\n",
        "[[a] ]\n",
    ]);
}

#[test]
fn arrays_of_tables_collect_their_sections() {
    let t = read(
        "[[fruits]]\nname = \"apple\"\n\n[fruits.physical]\ncolor = \"red\"\n\n[[fruits.varieties]]\nname = \"red delicious\"\n\n\
         [[fruits.varieties]]\nname = \"granny smith\"\n\n[[fruits]]\nname = \"banana\"\n\n[[fruits.varieties]]\nname = \"plantain\"\n",
    );
    let fruits = t["fruits"].as_array().unwrap();
    assert_eq!(fruits.len(), 2);
    assert_eq!(fruits[0]["physical"]["color"].as_str(), Some("red"));
    assert_eq!(fruits[0]["varieties"].as_array().map(Vec::len), Some(2));
    assert_eq!(fruits[1]["varieties"].as_array().unwrap()[0]["name"].as_str(), Some("plantain"));
    assert_eq!(read("[[a]]\n[[a]]\n")["a"].as_array().map(Vec::len), Some(2));
    refuses_all(&[
        "[fruit.physical]\ncolor = \"red\"\n[[fruit]]\nname = \"apple\"\n",
        "fruits = []\n[[fruits]]\n",
        "[[fruits]]\nname = \"apple\"\n[[fruits.varieties]]\nname = \"red delicious\"\n[fruits.varieties]\nname = \"granny smith\"\n",
        "[[fruits]]\n[fruits.physical]\n[[fruits.physical]]\n",
        "[[a]]\n[a]\n",
        "a = [{b = 1}]\n[a.c]\n",
        "[[a]]\nb = 1\n[a]\nc = 2\n",
    ]);
}

#[test]
fn nesting_is_bounded() {
    let deep = |n: usize| format!("v = {}{}", "[".repeat(n), "]".repeat(n));
    assert!(parse(&deep(MAX_DEPTH - 1)).is_ok());
    let e = refused(&deep(100_000));
    assert!(e.message().contains("nested deeper"), "{e}");
    let tables = format!("v = {}{}", "{a = ".repeat(100_000), "}".repeat(100_000));
    assert!(refused(&tables).message().contains("nested deeper"));
    let header = format!("[{}]\n", vec!["a"; MAX_DEPTH + 1].join("."));
    assert!(refused(&header).message().contains("64"));
    let key = format!("{} = 1\n", vec!["a"; 100_000].join("."));
    assert!(refused(&key).message().contains("more than"));
    // Headers and dotted keys count together.
    let both = format!("[{}]\n{} = 1\n", vec!["a"; 40].join("."), vec!["b"; 30].join("."));
    assert!(refused(&both).message().contains("nested deeper"));
}

#[test]
fn errors_point_at_the_fault() {
    let at = |text: &str| refused(text).span().start;
    assert_eq!(at("[llm]\nmodel \"gpt-4.1\"\n"), 12, "the missing `=`");
    assert_eq!(at("a = 1 junk\n"), 6, "text after a value");
    assert_eq!(at("a = 1\na = 2\n"), 6, "the second key");
    assert_eq!(at("[a]\n[a]\n"), 5, "the second header's name");
    assert_eq!(at("a = \"open\nb = 1\n"), 4, "the string's opening quote");
    assert_eq!(at("a = 0x\n"), 4, "the bad value");
    assert_eq!(at("a = \"x\\qy\"\n"), 6, "the escape");
    assert_eq!(at("a = \"é\u{1}\"\n"), 7, "the control character, after a two-byte one");
}

#[test]
fn the_writer_writes_sections_and_values_that_read_back() {
    let mut t =
        read("[channels.telegram]\ntoken = \"123:abc\"\n[llm]\nmax_tokens = \"1000\"\nhidden = [\"web\", \"files\"]\n");
    t.insert("top".to_owned(), Value::Integer(1));
    let text = to_string(&t);
    assert_eq!(
        text,
        "top = 1\n\n[channels.telegram]\ntoken = \"123:abc\"\n\n[llm]\nhidden = [\"web\", \"files\"]\nmax_tokens = \"1000\"\n"
    );
    assert_eq!(read(&text), t);
    let all = read(
        "s = \"q\\\"b\\\\n\\n\\u0001\\u007F é 😀\"\nk.\"a b\" = 1\nf = [1.5, -0.0, 1e300, inf, -inf]\nd = [1979-05-27T07:32:00Z, 07:32:00]\n\
         e = {}\ni = { a = [1, { b = 'x' }] }\nm = [[], [1]]\n[empty]\n[[aot]]\n[[aot]]\nx = 1\n[aot.sub]\n[[aot.deep]]\n[\"\".\"\\n\"]\n",
    );
    let text = to_string(&all);
    assert_eq!(read(&text), all, "{text}");
    assert!(text.contains("[empty]\n") && text.contains("[[aot]]\n"), "{text}");
    let nan = to_string(&read("n = nan\n"));
    assert!(matches!(read(&nan)["n"], Value::Float(f) if f.is_nan()), "{nan}");
}

#[test]
fn a_value_displays_as_toml_writes_it_inline() {
    assert_eq!(value("[\"web\", 'files']").to_string(), "[\"web\", \"files\"]");
    assert_eq!(value("{ b = 2, a = 1.0 }").to_string(), "{ a = 1.0, b = 2 }");
    assert_eq!((value("42").to_string(), value("true").to_string()), ("42".to_owned(), "true".to_owned()));
}
