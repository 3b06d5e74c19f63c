use super::*;
use crate::testing::Fixture;

fn md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n")
}

#[test]
fn every_built_in_skill_parses_and_names_registered_groups() {
    // Every group of this build, as every command builds the toolbox.
    let fx = Fixture::new(&[]);
    let registry = fx.toolbox.registry();
    for name in built_in_names() {
        let s = built_in(name).unwrap();
        for g in &s.groups {
            assert!(skills::is_gated(&registry, g), "{name} names {g}, which is not a hidden group");
        }
    }
    // Every hidden-by-default group can be reached without writing a skill: tools_unlock names it
    // in the description the model reads.
    let description = &registry.get(unlock::NAME).unwrap().description;
    for g in registry.groups().iter().filter(|g| !g.spec.core && !g.spec.visible_by_default) {
        let listed = [" ", ",", "."].iter().any(|end| description.contains(&format!("{}{end}", g.spec.id)));
        assert!(listed, "tools_unlock does not name {}: {description}", g.spec.id);
    }
}

#[test]
fn an_edit_is_seen_at_once_and_a_save_invalidates_even_a_same_size_change() {
    let f = Fixture::new(&[]);
    let s = &f.skills;
    s.save(&f.ws, &f.cfg, "a", &md("a", "first"), None).unwrap();
    assert_eq!(s.lookup(&f.ws, &f.cfg, "a").unwrap().unwrap().skill.description, "first");
    // The same size: only the invalidation on save can tell.
    s.save(&f.ws, &f.cfg, "a", &md("a", "again"), None).unwrap();
    assert_eq!(s.lookup(&f.ws, &f.cfg, "a").unwrap().unwrap().skill.description, "again");
    // An edit by hand that changes the size.
    std::fs::write(f.root().join("skills/a/SKILL.md"), md("a", "edited by hand")).unwrap();
    assert_eq!(s.lookup(&f.ws, &f.cfg, "a").unwrap().unwrap().skill.description, "edited by hand");
    // Gone: the built-in or nothing.
    std::fs::remove_file(f.root().join("skills/a/SKILL.md")).unwrap();
    assert!(s.lookup(&f.ws, &f.cfg, "a").unwrap().is_none());
}

#[test]
fn a_same_size_same_mtime_edit_is_read_again_once_the_ttl_is_over() {
    let f = Fixture::new(&[("skills.cache_ttl_secs", "0")]);
    let s = &f.skills;
    s.save(&f.ws, &f.cfg, "a", &md("a", "first"), None).unwrap();
    let path = f.root().join("skills/a/SKILL.md");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    assert_eq!(s.lookup(&f.ws, &f.cfg, "a").unwrap().unwrap().skill.description, "first");
    std::fs::write(&path, md("a", "other")).unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
    assert_eq!(s.lookup(&f.ws, &f.cfg, "a").unwrap().unwrap().skill.description, "other");
}

#[test]
fn the_session_prompt_has_the_summary_and_the_active_skills_text() {
    let f = Fixture::new(&[]);
    let s = &f.skills;
    s.save(&f.ws, &f.cfg, "notes", &md("notes", "Take notes."), None).unwrap();
    let always = "---\nname: house\ndescription: House rules.\nalways: true\n---\nAlways polite.\n";
    s.save(&f.ws, &f.cfg, "house", always, None).unwrap();
    let before = s.for_session(&f.ws, &f.cfg, "cli", "t");
    assert!(before.prompt.starts_with("## Skills\n"), "{}", before.prompt);
    assert!(before.prompt.contains("- notes: Take notes.\n"), "{}", before.prompt);
    assert!(before.prompt.contains("- chela_settings: ") && before.prompt.contains("[unlocks: settings]"));
    assert!(before.prompt.contains("## Skill `house` (always on)\n\nAlways polite."), "{}", before.prompt);
    assert!(!before.prompt.contains("Body of notes."));
    assert!(before.named_groups.is_empty());

    let r = SessionRef::new("cli", "t", Vec::new());
    s.activate(&f.ws, &f.cfg, &r, "notes").unwrap();
    s.activate(&f.ws, &f.cfg, &r, "chela_settings").unwrap();
    let after = s.for_session(&f.ws, &f.cfg, "cli", "t");
    assert!(after.prompt.contains("## Skill `notes` (active)\n\nBody of notes."), "{}", after.prompt);
    assert!(after.prompt.contains("## Skill `chela_settings` (active)"));
    assert_eq!(after.named_groups, ["settings"]);
    assert!(s.for_session(&f.ws, &f.cfg, "cli", "other").named_groups.is_empty(), "only in that session");
}

#[test]
fn the_summary_keeps_to_its_budget() {
    let f = Fixture::new(&[("skills.summary_budget", "300")]);
    for i in 0..20 {
        let name = format!("s{i:02}");
        f.skills.save(&f.ws, &f.cfg, &name, &md(&name, "A skill that does one particular thing."), None).unwrap();
    }
    let p = f.skills.for_session(&f.ws, &f.cfg, "cli", "t").prompt;
    let summary = p.split_once("\n\n").unwrap().1.split_once("\n\n").unwrap().1;
    assert!(summary.len() <= 300, "{}", summary.len());
    assert!(summary.contains("more, see skill_list"), "{summary}");
}
