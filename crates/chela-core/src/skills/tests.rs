use super::*;
use crate::cap::GroupSpec;
use alloc::string::ToString;
use alloc::vec;
use proptest::prelude::*;

const MAX: usize = 64 * 1024;

fn skill(name: &str, description: &str, groups: &[&str]) -> Skill {
    Skill {
        name: name.into(),
        description: description.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        always: false,
        body: String::new(),
        extra: Vec::new(),
    }
}

#[test]
fn an_agent_skills_file_from_another_assistant_loads_unchanged() {
    // The shape of Anthropic's published skills: extra keys, a nested map, a folded description.
    let src = "---\nname: pdf-forms\ndescription: >\n  Fill in PDF forms.\n  Use when the user sends a form.\nlicense: Apache-2.0\nallowed-tools: Read, Write\nmetadata:\n  author: someone\n  version: \"1.0\"\n---\n\n# PDF forms\n\nRead the form first.\n";
    let s = parse("pdf-forms", src, MAX).unwrap();
    assert_eq!(s.name, "pdf-forms");
    assert_eq!(s.description, "Fill in PDF forms. Use when the user sends a form.");
    assert!(s.groups.is_empty() && !s.always);
    assert_eq!(s.body, "# PDF forms\n\nRead the form first.");
    let keys: Vec<&str> = s.extra.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["license", "allowed-tools", "metadata"]);
    assert_eq!(s.extra[2].1, "\n  author: someone\n  version: \"1.0\"");
}

#[test]
fn chela_keys_groups_in_both_list_forms_and_always() {
    let flow = "---\nname: hw\ndescription: \"Board pins: read \\\"them\\\"\"\ngroups: [board, 'settings', board]\nalways: true\n---\nbody";
    let s = parse("hw", flow, MAX).unwrap();
    assert_eq!(s.groups, ["board", "settings"], "duplicates dropped");
    assert!(s.always);
    assert_eq!(s.description, "Board pins: read \"them\"");
    let block = "---\r\nname: hw\r\ndescription: d # a comment\r\ngroups:\r\n  - board\r\n  - settings\r\n---\r\n";
    let s = parse("hw", block, MAX).unwrap();
    assert_eq!(s.groups, ["board", "settings"]);
    assert_eq!(s.description, "d");
    assert_eq!(s.body, "");
    assert_eq!(parse("hw", "---\nname: hw\ndescription: x\ngroups: board\n---", MAX).unwrap().groups, ["board"]);
}

#[test]
fn bad_files_get_clear_errors() {
    let cases: &[(&str, &str)] = &[
        ("no front matter here", "must start with front matter"),
        ("---\nname: a\ndescription: b\n", "no closing `---`"),
        ("---\ndescription: b\n---\n", "no `name:`"),
        ("---\nname: a\n---\n", "no `description:`"),
        ("---\nname: a\ndescription: \"\"\n---\n", "it is empty"),
        ("---\nname: b\ndescription: x\n---\n", "its folder is `skills/a/`"),
        ("---\nname: a\ndescription: x\nalways: maybe\n---\n", "`maybe` is not true or false"),
        ("---\nname: a\ndescription: x\ngroups: [a\n---\n", "not closed with `]`"),
        ("---\nname: a\ndescription: x\ngroups: [../etc]\n---\n", "not a capability group name"),
        ("---\nname: a\ndescription: \"x\n---\n", "double quote is not closed"),
        ("---\n  name: a\n---\n", "line 1: an indented line"),
        ("---\nname a\n---\n", "line 1: expected `key: value`"),
    ];
    for (src, want) in cases {
        let e = parse("a", src, MAX).unwrap_err().to_string();
        assert!(e.contains(want), "{src:?}: {e}");
    }
    let long = alloc::format!("---\nname: a\ndescription: {}\n---\n", "d".repeat(MAX_DESCRIPTION + 1));
    assert!(parse("a", &long, MAX).unwrap_err().to_string().contains("1025 bytes"));
    let many = (0..=MAX_GROUPS).map(|i| alloc::format!("g{i}")).collect::<Vec<_>>().join(", ");
    let src = alloc::format!("---\nname: a\ndescription: x\ngroups: [{many}]\n---\n");
    assert!(parse("a", &src, MAX).unwrap_err().to_string().contains("more than 16"));
}

#[test]
fn sizes_are_bounded() {
    let huge = alloc::format!("---\nname: a\ndescription: x\n---\n{}", "x".repeat(MAX));
    let e = parse("a", &huge, MAX).unwrap_err();
    assert!(matches!(e, SkillError::TooLarge { .. }));
    assert!(e.to_string().contains("skills.max_bytes"), "{e}");
    let endless = alloc::format!("---\nname: a\n{}", "k: v\n".repeat(5000));
    assert!(matches!(parse("a", &endless, MAX), Err(SkillError::FrontMatterTooLarge { .. })));
    let keys = (0..100).map(|i| alloc::format!("k{i}: v\n")).collect::<String>();
    let src = alloc::format!("---\nname: a\ndescription: x\n{keys}---\n");
    assert!(parse("a", &src, MAX).unwrap_err().to_string().contains("more than 64 keys"));
}

#[test]
fn names_that_could_be_paths_are_refused() {
    for bad in ["", "../x", "a/b", ".hidden", "-x", "_x", "A", "a b", "a.b", "a\0", &"a".repeat(65), "é"] {
        assert!(check_name(bad).is_err(), "{bad:?}");
        assert!(parse(bad, "---\nname: x\ndescription: y\n---\n", MAX).is_err());
    }
    for good in ["a", "pdf-forms", "chela_settings", "x1", &"a".repeat(64)] {
        check_name(good).unwrap();
    }
}

#[test]
fn the_summary_is_one_line_per_skill_within_its_budget() {
    let a = skill("alpha", "First\nskill.", &[]);
    let b = skill("beta", "Second.", &["settings", "board"]);
    let all = summary(&[&a, &b], 1000);
    assert_eq!(all, "- alpha: First skill.\n- beta: Second. [unlocks: settings, board]\n");
    let many: Vec<Skill> = (0..50).map(|i| skill(&alloc::format!("s{i:02}"), "does a thing", &[])).collect();
    let refs: Vec<&Skill> = many.iter().collect();
    let cut = summary(&refs, 200);
    assert!(cut.len() <= 200, "{}", cut.len());
    let shown = cut.lines().filter(|l| !l.contains("more")).count();
    assert!(cut.ends_with(&alloc::format!("- …and {} more, see skill_list\n", 50 - shown)), "{cut}");
    assert_eq!(summary(&refs, 5), "", "not even the count fits");
}

fn registry() -> Registry {
    let spec = |id: &'static str, core: bool, visible: bool| GroupSpec {
        id: id.into(),
        description: "".into(),
        core,
        visible_by_default: visible,
        guidance: "".into(),
    };
    let mut r = Registry::new();
    r.add_group(spec("time", true, true), vec![]).unwrap();
    r.add_group(spec("files", false, true), vec![]).unwrap();
    r.add_group(spec("settings", false, false), vec![]).unwrap();
    r.add_group(spec("board", false, false), vec![]).unwrap();
    r
}

#[test]
fn only_gated_groups_unlock_and_a_person_s_hide_wins() {
    let r = registry();
    let s = skill("x", "d", &["settings", "files", "time", "nope", "board"]);
    assert_eq!(unlocked_groups(&r, &s.groups, &[]), ["settings", "board"]);
    assert_eq!(unlocked_groups(&r, &s.groups, &["board".into()]), ["settings"]);
    assert!(unlocked_groups(&r, &[], &[]).is_empty());
    // Disabled stays disabled: the registry leaves a switched-off group's tools out anyway.
    let mut r = r;
    r.add_group(
        GroupSpec {
            id: "gpio".into(),
            description: "".into(),
            core: false,
            visible_by_default: false,
            guidance: "".into(),
        },
        vec![crate::cap::Capability {
            id: "gpio_write".into(),
            group: "".into(),
            description: "".into(),
            input_schema: "{}".into(),
            llm_callable: true,
        }],
    )
    .unwrap();
    r.set_enabled("gpio", false).unwrap();
    let open = unlocked_groups(&r, &["gpio".to_string()], &[]);
    assert_eq!(open, ["gpio"]);
    assert!(r.tools_for(crate::cap::Scope { extra_visible: &open }).is_empty());
    assert!(is_gated(&r, "settings") && !is_gated(&r, "files") && !is_gated(&r, "time") && !is_gated(&r, "nope"));
}

fn stamp(size: u64) -> Stamp {
    Stamp { mtime_ns: 1, size }
}

#[test]
fn the_cache_checks_the_stamp_and_the_ttl() {
    let mut c: Cache<u32> = Cache::new(4, 1000);
    c.insert("a", stamp(10), 1, 0);
    assert_eq!(c.get("a", stamp(10), 999), Some(1));
    assert_eq!(c.get("a", stamp(11), 999), None, "a size change invalidates at once");
    assert!(c.is_empty(), "and the stale entry is gone");
    c.insert("a", stamp(10), 2, 0);
    assert_eq!(c.get("a", Stamp { mtime_ns: 2, size: 10 }, 1), None, "so does an mtime change");
    c.insert("a", stamp(10), 3, 0);
    assert_eq!(c.get("a", stamp(10), 1000), None, "expired after the TTL");
    c.insert("a", stamp(10), 4, 0);
    c.invalidate("a");
    assert_eq!(c.get("a", stamp(10), 1), None);
}

#[test]
fn the_cache_drops_the_least_recently_used() {
    let mut c: Cache<u32> = Cache::new(2, u64::MAX);
    c.insert("a", stamp(1), 1, 0);
    c.insert("b", stamp(1), 2, 1);
    assert_eq!(c.get("a", stamp(1), 2), Some(1));
    c.insert("c", stamp(1), 3, 3);
    assert_eq!(c.len(), 2);
    assert_eq!(c.get("b", stamp(1), 4), None, "b was used least recently");
    assert_eq!(c.get("a", stamp(1), 4), Some(1));
    assert_eq!(c.get("c", stamp(1), 4), Some(3));
}

proptest! {
    #[test]
    fn parsing_never_panics_and_stays_bounded(src in "(?s).{0,600}", max in 0usize..700) {
        if let Ok(s) = parse("a", &src, max) {
            prop_assert!(src.len() <= max);
            prop_assert_eq!(s.name.as_str(), "a");
            prop_assert!(s.description.len() <= MAX_DESCRIPTION);
            prop_assert!(s.groups.len() <= MAX_GROUPS);
        }
    }

    #[test]
    fn well_formed_files_round_trip(
        desc in "[A-Za-z][A-Za-z0-9 ,.()-]{0,200}",
        groups in proptest::collection::vec("[a-z][a-z0-9_]{0,20}", 0..8),
        always in any::<bool>(),
        body in "(?s)[^\u{0}]{0,300}",
        flow in any::<bool>(),
    ) {
        let list = if flow {
            alloc::format!(" [{}]", groups.join(", "))
        } else {
            groups.iter().map(|g| alloc::format!("\n  - {g}")).collect()
        };
        let src = alloc::format!("---\nname: sk\ndescription: {desc}\ngroups:{list}\nalways: {always}\nx-other: kept\n---\n{body}");
        let s = parse("sk", &src, MAX).unwrap();
        prop_assert_eq!(s.description.as_str(), desc.trim());
        let mut want: Vec<String> = Vec::new();
        for g in groups {
            if !want.contains(&g) {
                want.push(g);
            }
        }
        prop_assert_eq!(s.groups, want);
        prop_assert_eq!(s.always, always);
        prop_assert_eq!(s.body.as_str(), body.trim());
        prop_assert_eq!(s.extra, vec![("x-other".to_string(), "kept".to_string())]);
    }

    #[test]
    fn the_summary_never_exceeds_its_budget_and_counts_the_rest(
        n in 0usize..60,
        desc_len in 0usize..300,
        budget in 0usize..4000,
    ) {
        let skills: Vec<Skill> =
            (0..n).map(|i| skill(&alloc::format!("s{i}"), &"d".repeat(desc_len.max(1)), &["g"])).collect();
        let refs: Vec<&Skill> = skills.iter().collect();
        let out = summary(&refs, budget);
        prop_assert!(out.len() <= budget);
        let shown = out.lines().filter(|l| !l.contains("see skill_list")).count();
        if shown < n && !out.is_empty() {
            let expected = alloc::format!("- …and {} more, see skill_list\n", n - shown);
            prop_assert!(out.ends_with(&expected), "{}", out);
        }
    }
}
