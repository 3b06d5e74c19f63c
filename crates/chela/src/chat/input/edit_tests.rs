use super::*;

fn editor(history: &[&str]) -> Editor {
    let mut ed = Editor::new(history.iter().map(|s| (*s).to_owned()).collect(), 5, 64);
    ed.start();
    ed
}

fn text(s: &str) -> Key {
    Key::Text(s.to_owned())
}

/// The label and the line, with the cursor as `|`.
fn shown(ed: &Editor) -> String {
    let v = ed.view("› ");
    format!("{}{}|{}", v.label, &v.text[..v.cursor], &v.text[v.cursor..])
}

/// Applies `keys` (each a plain edit) and shows the result.
fn keys(ed: &mut Editor, keys: impl IntoIterator<Item = Key>) -> String {
    for k in keys {
        assert_eq!(ed.handle(k), Step::Edited);
    }
    shown(ed)
}

#[test]
fn typing_and_moving() {
    use Key::*;
    let mut ed = editor(&[]);
    assert_eq!(keys(&mut ed, [text("helo world")]), "helo world|");
    assert_eq!(keys(&mut ed, [Home]), "|helo world");
    assert_eq!(keys(&mut ed, [Right, Right, Right, text("l")]), "hell|o world");
    assert_eq!(keys(&mut ed, [End]), "hello world|");
    assert_eq!(keys(&mut ed, [Left, Left]), "hello wor|ld");
    assert_eq!(keys(&mut ed, [Right, Right, Right]), "hello world|", "Right stops at the end");
    assert_eq!(keys(&mut ed, [Home, Left]), "|hello world", "Left stops at the start");
    assert_eq!(ed.handle(Enter), Step::Done(Line::Text("hello world".into())));
    // The sent line stays on show, the cursor at its end, until the next line starts.
    assert_eq!(shown(&ed), "hello world|");
    ed.start();
    assert_eq!(shown(&ed), "|");
}

#[test]
fn words() {
    use Key::*;
    let mut ed = editor(&[]);
    keys(&mut ed, [text("one two-three  four")]);
    assert_eq!(keys(&mut ed, [WordLeft]), "one two-three  |four");
    assert_eq!(keys(&mut ed, [WordLeft]), "one two-|three  four");
    assert_eq!(keys(&mut ed, [WordLeft, WordLeft]), "|one two-three  four");
    assert_eq!(keys(&mut ed, [WordRight]), "one| two-three  four");
    assert_eq!(keys(&mut ed, [WordRight]), "one two|-three  four");
    // Alt-D kills to the word's end; Ctrl-Y puts it back.
    assert_eq!(keys(&mut ed, [KillWordForward]), "one two|  four");
    assert_eq!(keys(&mut ed, [Yank]), "one two-three|  four");
    assert_eq!(keys(&mut ed, [End, KillWordBack]), "one two-three  |");
    // Ctrl-W goes back to a blank: `two-three` is one word for it.
    assert_eq!(keys(&mut ed, [KillBlankWord]), "one |");
    assert_eq!(keys(&mut ed, [KillBlankWord, KillBlankWord]), "|");
}

#[test]
fn deleting_and_killing() {
    use Key::*;
    let mut ed = editor(&[]);
    keys(&mut ed, [text("abcdef")]);
    assert_eq!(keys(&mut ed, [Backspace]), "abcde|");
    assert_eq!(keys(&mut ed, [Home, Backspace]), "|abcde", "Backspace at the start does nothing");
    assert_eq!(keys(&mut ed, [Delete]), "|bcde");
    assert_eq!(keys(&mut ed, [Right, Eof]), "b|de", "Ctrl-D on a line deletes under the cursor");
    assert_eq!(keys(&mut ed, [End, Eof, Delete]), "bde|", "and at the end does nothing");
    assert_eq!(keys(&mut ed, [Left, Left, KillToEnd]), "b|");
    assert_eq!(keys(&mut ed, [Yank, Yank]), "bdede|");
    assert_eq!(keys(&mut ed, [Left, KillToStart]), "|e");
    assert_eq!(keys(&mut ed, [End, Yank]), "ebded|");
    assert_eq!(keys(&mut ed, [Transpose]), "ebdde|", "at the end, the last two");
    assert_eq!(keys(&mut ed, [Home, Right, Transpose]), "be|dde");
}

#[test]
fn ctrl_c_and_ctrl_d_say_how_the_line_ended() {
    let mut ed = editor(&[]);
    assert_eq!(ed.handle(Key::Interrupt), Step::Done(Line::Interrupted));
    ed.start();
    keys(&mut ed, [text("half")]);
    assert_eq!(ed.handle(Key::Interrupt), Step::Done(Line::Cleared));
    ed.start();
    assert_eq!(ed.handle(Key::Eof), Step::Done(Line::End));
    ed.start();
    assert_eq!(ed.handle(Key::ClearScreen), Step::ClearScreen);
    assert_eq!(ed.handle(Key::Suspend), Step::Suspend);
    assert_eq!(keys(&mut ed, [Key::Abort, Key::Escape]), "|");
}

#[test]
fn multi_byte_and_wide_characters_are_edited_whole() {
    use Key::*;
    let mut ed = editor(&[]);
    keys(&mut ed, [text("日本語é🦀")]);
    assert_eq!(keys(&mut ed, [Left]), "日本語é|🦀");
    assert_eq!(keys(&mut ed, [Left, Left]), "日本|語é🦀");
    assert_eq!(keys(&mut ed, [Backspace]), "日|語é🦀");
    assert_eq!(keys(&mut ed, [Delete]), "日|é🦀");
    // e and a combining acute accent: one place for the cursor.
    ed.start();
    keys(&mut ed, [text("ae\u{301}b")]);
    assert_eq!(keys(&mut ed, [Left, Left]), "a|e\u{301}b");
    assert_eq!(keys(&mut ed, [Right]), "ae\u{301}|b");
    assert_eq!(keys(&mut ed, [Backspace]), "a|b");
}

#[test]
fn the_line_is_bounded() {
    let mut ed = editor(&[]);
    keys(&mut ed, [text(&"x".repeat(60))]);
    // Four bytes of room: 日 (three) fits, 本 does not.
    assert_eq!(ed.handle(text("日本")), Step::Bell);
    assert_eq!(ed.view("").text.len(), 63);
    assert_eq!(ed.handle(text("y")), Step::Edited);
    assert_eq!(ed.handle(text("z")), Step::Bell);
    assert_eq!(ed.view("").text.len(), 64);
}

#[test]
fn history_recalls_and_keeps_the_line_being_typed() {
    use Key::*;
    let mut ed = editor(&["first", "second"]);
    keys(&mut ed, [text("draft")]);
    assert_eq!(keys(&mut ed, [Up]), "second|");
    assert_eq!(keys(&mut ed, [Up]), "first|");
    assert_eq!(keys(&mut ed, [Up]), "first|", "the oldest stays");
    assert_eq!(keys(&mut ed, [Down]), "second|");
    assert_eq!(keys(&mut ed, [Down]), "draft|", "the typed line comes back");
    assert_eq!(keys(&mut ed, [Down]), "draft|");
    // A recalled line is edited and sent; the history itself is unchanged.
    keys(&mut ed, [Up, Backspace, text("D")]);
    assert_eq!(ed.handle(Enter), Step::Done(Line::Text("seconD".into())));
    assert!(ed.remember("seconD"));
    ed.start();
    assert_eq!(keys(&mut ed, [Up, Up, Up]), "first|");
}

#[test]
fn remember_skips_blanks_and_repeats_and_keeps_the_bound() {
    let mut ed = editor(&["a", "b", "c", "d", "e", "f"]);
    assert_eq!(ed.history, ["b", "c", "d", "e", "f"], "the oldest beyond the bound are dropped");
    assert!(!ed.remember("  "));
    assert!(!ed.remember("f"), "the same as the last one");
    assert!(ed.remember("b"));
    assert_eq!(ed.history, ["c", "d", "e", "f", "b"]);
}

#[test]
fn reverse_search() {
    use Key::*;
    let mut ed = editor(&["git status", "cargo test", "git commit", "echo hi"]);
    keys(&mut ed, [text("typed")]);
    assert_eq!(keys(&mut ed, [Search]), "(reverse-i-search)`': typed|");
    assert_eq!(keys(&mut ed, [text("gi")]), "(reverse-i-search)`gi': |git commit");
    assert_eq!(keys(&mut ed, [text("t s")]), "(reverse-i-search)`git s': |git status");
    assert_eq!(keys(&mut ed, [Backspace, Backspace]), "(reverse-i-search)`git': |git commit");
    // Ctrl-R again: the next older match.
    assert_eq!(keys(&mut ed, [Search]), "(reverse-i-search)`git': |git status");
    assert_eq!(keys(&mut ed, [Search]), "(failed reverse-i-search)`git': |git status");
    // Ctrl-G: the line from before the search.
    assert_eq!(keys(&mut ed, [Abort]), "typed|");

    // Another key ends the search on the match and applies to it.
    keys(&mut ed, [Search, text("test")]);
    assert_eq!(keys(&mut ed, [End, text("s")]), "cargo tests|");
    // Up goes on from the match's place in the history.
    assert_eq!(keys(&mut ed, [Up]), "git status|");

    // Enter sends the match.
    ed.start();
    keys(&mut ed, [Search, text("echo")]);
    assert_eq!(ed.handle(Enter), Step::Done(Line::Text("echo hi".into())));
    // Ctrl-C leaves the search and clears; on nothing at all it is the plain interrupt.
    ed.start();
    keys(&mut ed, [Search, text("zzz")]);
    assert_eq!(shown(&ed), "(failed reverse-i-search)`zzz': |");
    assert_eq!(ed.handle(Interrupt), Step::Done(Line::Cleared));
    ed.start();
    keys(&mut ed, [Search]);
    assert_eq!(ed.handle(Interrupt), Step::Done(Line::Interrupted));
}

mod any_keys {
    use super::*;
    use proptest::prelude::*;

    fn any_key() -> impl Strategy<Value = Key> {
        use Key::*;
        // Text from a mix that makes boundaries interesting: ASCII, two- and three-byte letters,
        // wide characters, combining marks, an emoji, a newline.
        let text = proptest::collection::vec(
            prop::sample::select(vec!['a', ' ', '-', 'é', 'ж', '中', '\u{301}', '\u{200d}', '🦀', '\n']),
            1..6,
        )
        .prop_map(|cs| Text(cs.into_iter().collect()));
        prop_oneof![
            4 => text,
            3 => prop::sample::select(vec![
                Enter, Left, Right, WordLeft, WordRight, Home, End, Up, Down, Backspace, Delete, KillToEnd,
                KillToStart, KillBlankWord, KillWordBack, KillWordForward, Yank, Transpose, ClearScreen, Search,
                Abort, Escape, Interrupt, Eof, Suspend,
            ]),
        ]
    }

    proptest! {
        /// Whatever is pressed, nothing panics, the cursor stays on a character boundary
        /// within the line, and the line keeps its bound.
        #[test]
        fn any_keys_keep_the_line_well_formed(keys in proptest::collection::vec(any_key(), 0..60)) {
            let mut ed = Editor::new(vec!["a中b".into(), "é\u{301}x".into()], 5, 24);
            ed.start();
            for key in keys {
                if let Step::Done(Line::Text(line)) = ed.handle(key) {
                    ed.remember(&line);
                    ed.start();
                }
                let v = ed.view("› ");
                prop_assert!(v.cursor <= v.text.len() && v.text.is_char_boundary(v.cursor));
                prop_assert!(ed.line.len() <= 24);
                let mut out = Vec::new();
                crate::chat::input::screen::draw(
                    &mut out,
                    &v,
                    crate::chat::input::screen::Size { cols: 10, rows: 3 },
                    &mut Default::default(),
                    false,
                );
            }
        }
    }
}
