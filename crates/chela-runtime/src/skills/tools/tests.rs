//! The skill_mgr tools, and the attacks on them: bad names, planted symlinks and hard links,
//! oversize files, a FIFO, a damaged activation file.

use std::os::unix::fs::symlink;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::skills::SessionRef;
use crate::testing::Fixture;
use crate::tools::ToolErrorKind;

fn skill_md(name: &str, description: &str, groups: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\ngroups: [{groups}]\n---\nDo the {name} thing.\n")
}

fn in_session(mut f: Fixture, chat: &str) -> Fixture {
    f.session = Some(Arc::new(SessionRef::new("cli", chat, Vec::new())));
    f
}

async fn list(f: &Fixture) -> Value {
    serde_json::from_str(&f.call(SkillList(Arc::clone(&f.skills)), json!({})).await.unwrap()).unwrap()
}

/// The skills' names, leaving out `board_hardware_info`: a built-in skill of the optional
/// `board` feature, tested with its tools (board/tools).
fn names(list: &Value) -> Vec<String> {
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .filter(|n| n != "board_hardware_info")
        .collect()
}

/// The listed skill called `name`.
fn skill<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

#[tokio::test]
async fn save_list_activate_deactivate_delete() {
    let f = in_session(Fixture::new(&[]), "t");
    let out = f
        .call(SkillSave(Arc::clone(&f.skills)), json!({"name": "notes", "content": skill_md("notes", "Take notes.", "settings"), "lua": "function run(a) return 1 end"}))
        .await
        .unwrap();
    assert!(out.contains("saved skill `notes`") && out.contains("scripts/main.lua"), "{out}");
    assert!(f.root().join("skills/notes/scripts/main.lua").is_file());
    let l = list(&f).await;
    assert_eq!(names(&l), ["chela_settings", "notes"]);
    assert_eq!(skill(&l, "notes")["origin"], "workspace");
    assert_eq!(skill(&l, "notes")["unlocks"], json!(["settings"]));
    assert_eq!(skill(&l, "notes")["active"], false);

    let out = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "notes"})).await.unwrap();
    assert!(out.contains("It unlocks: settings.") && out.contains("Do the notes thing."), "{out}");
    assert_eq!(f.session.as_ref().unwrap().named_groups(), ["settings"], "the running turn sees it at once");
    assert_eq!(skill(&list(&f).await, "notes")["active"], true);
    let saved = std::fs::read_to_string(f.root().join("sessions/cli_t.skills.json")).unwrap();
    assert_eq!(saved, r#"["notes"]"#);
    // Activating twice keeps one entry.
    f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "notes"})).await.unwrap();
    assert_eq!(f.skills.active(&f.ws, "cli", "t"), ["notes"]);

    let out = f.call(SkillDeactivate(Arc::clone(&f.skills)), json!({"name": "notes"})).await.unwrap();
    assert!(out.contains("no longer active"), "{out}");
    assert!(f.session.as_ref().unwrap().named_groups().is_empty());
    let out = f.call(SkillDeactivate(Arc::clone(&f.skills)), json!({"name": "notes"})).await.unwrap();
    assert!(out.contains("was not active"), "{out}");

    let out = f.call(SkillDelete(Arc::clone(&f.skills)), json!({"name": "notes"})).await.unwrap();
    assert!(out.contains("deleted the skill and `skills/notes/`"), "{out}");
    assert!(!f.root().join("skills/notes").exists());
    assert_eq!(names(&list(&f).await), ["chela_settings"]);
}

#[tokio::test]
async fn built_in_skills_are_read_only_and_a_workspace_skill_overrides_them() {
    let f = Fixture::new(&[]);
    let e = f.call(SkillDelete(Arc::clone(&f.skills)), json!({"name": "chela_settings"})).await.unwrap_err();
    assert!(e.0.contains("built-in skill; it cannot be deleted"), "{e}");
    assert_eq!(e.kind(), ToolErrorKind::Refused);
    f.call(
        SkillSave(Arc::clone(&f.skills)),
        json!({"name": "chela_settings", "content": skill_md("chela_settings", "Mine.", "")}),
    )
    .await
    .unwrap();
    let l = list(&f).await;
    assert_eq!(skill(&l, "chela_settings")["description"], "Mine.");
    assert_eq!(skill(&l, "chela_settings")["origin"], "workspace, overrides the built-in one");
    // Deleting the override brings the built-in one back.
    f.call(SkillDelete(Arc::clone(&f.skills)), json!({"name": "chela_settings"})).await.unwrap();
    assert_eq!(skill(&list(&f).await, "chela_settings")["origin"], "built-in");
}

#[tokio::test]
async fn activation_needs_a_conversation_and_is_bounded() {
    let f = Fixture::new(&[("skills.max_active", "1")]);
    let e = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "chela_settings"})).await.unwrap_err();
    assert!(e.0.contains("works inside a conversation") && e.0.contains("chela skill activate"), "{e}");
    let f = in_session(f, "t");
    f.call(SkillSave(Arc::clone(&f.skills)), json!({"name": "a", "content": skill_md("a", "A.", "")})).await.unwrap();
    f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "a"})).await.unwrap();
    let e = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "chela_settings"})).await.unwrap_err();
    assert!(e.0.contains("skills.max_active") && e.0.contains("skill_deactivate"), "{e}");
    let e = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "nope"})).await.unwrap_err();
    // (With the `board` feature, board_hardware_info is listed between them.)
    assert!(e.0.contains("There is no skill `nope`. Skills: a, ") && e.0.ends_with("chela_settings."), "{e}");
    assert_eq!(e.kind(), ToolErrorKind::NotFound);
}

#[tokio::test]
async fn bad_names_and_bad_files_are_refused_before_anything_is_written() {
    let f = in_session(Fixture::new(&[]), "t");
    for bad in ["../x", "a/b", ".x", "", "X", "a b", "../../etc"] {
        for tool in ["save", "activate", "delete"] {
            let args = json!({"name": bad, "content": skill_md("x", "d", "")});
            let e = match tool {
                "save" => f.call(SkillSave(Arc::clone(&f.skills)), args).await,
                "activate" => f.call(SkillActivate(Arc::clone(&f.skills)), args).await,
                _ => f.call(SkillDelete(Arc::clone(&f.skills)), args).await,
            }
            .unwrap_err();
            assert!(e.0.contains("is not a valid skill name"), "{tool} {bad:?}: {e}");
        }
    }
    let e =
        f.call(SkillSave(Arc::clone(&f.skills)), json!({"name": "x", "content": "no front matter"})).await.unwrap_err();
    assert!(e.0.contains("must start with front matter"), "{e}");
    let e = f
        .call(SkillSave(Arc::clone(&f.skills)), json!({"name": "x", "content": skill_md("y", "d", "")}))
        .await
        .unwrap_err();
    assert!(e.0.contains("the two must match"), "{e}");
    let huge = skill_md("x", "d", "") + &"x".repeat(40_000);
    let e = f.call(SkillSave(Arc::clone(&f.skills)), json!({"name": "x", "content": huge})).await.unwrap_err();
    assert!(e.0.contains("skills.max_bytes"), "{e}");
    assert!(!f.root().join("skills").exists(), "nothing was written");
}

#[tokio::test]
async fn a_huge_skill_md_on_disk_is_refused_without_reading_it_into_the_prompt() {
    let f = in_session(Fixture::new(&[]), "t");
    std::fs::create_dir_all(f.root().join("skills/big")).unwrap();
    let text = skill_md("big", "d", "") + &"x".repeat(10 * 1024 * 1024);
    std::fs::write(f.root().join("skills/big/SKILL.md"), text).unwrap();
    let e = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "big"})).await.unwrap_err();
    assert!(e.0.contains("skills/big/SKILL.md") && e.0.contains("skills.max_bytes"), "{e}");
    let l = list(&f).await;
    assert_eq!(names(&l), ["chela_settings"]);
    assert!(l["problems"][0].as_str().unwrap().contains("over the 32768-byte limit"), "{l}");
    let s = f.skills.for_session(&f.ws, &f.cfg, "cli", "t");
    assert!(!s.prompt.contains("xxxx"), "the oversize file is not in the prompt");
}

#[tokio::test]
async fn planted_symlinks_and_hard_links_are_not_followed() {
    let f = in_session(Fixture::new(&[]), "t");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("SKILL.md"), skill_md("evil", "Outside.", "settings")).unwrap();
    std::fs::create_dir_all(f.root().join("skills")).unwrap();
    symlink(outside.path(), f.root().join("skills/evil")).unwrap();

    let e = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "evil"})).await.unwrap_err();
    assert!(e.0.contains("`skills/evil` is a symlink"), "{e}");
    let l = list(&f).await;
    assert_eq!(names(&l), ["chela_settings"]);
    assert!(l["problems"].to_string().contains("skills/evil` is a symlink"), "{l}");
    let e = f
        .call(SkillSave(Arc::clone(&f.skills)), json!({"name": "evil", "content": skill_md("evil", "Mine.", "")}))
        .await
        .unwrap_err();
    assert!(e.0.contains("symlink"), "{e}");
    let e = f.call(SkillDelete(Arc::clone(&f.skills)), json!({"name": "evil"})).await.unwrap_err();
    assert!(e.0.contains("symlink"), "{e}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("SKILL.md")).unwrap(),
        skill_md("evil", "Outside.", "settings"),
        "nothing outside was touched"
    );

    // A symlinked SKILL.md in a real folder, and a hard-linked one.
    std::fs::create_dir_all(f.root().join("skills/link")).unwrap();
    symlink(outside.path().join("SKILL.md"), f.root().join("skills/link/SKILL.md")).unwrap();
    let e = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "link"})).await.unwrap_err();
    assert!(e.0.contains("symlink"), "{e}");
    std::fs::create_dir_all(f.root().join("skills/hard")).unwrap();
    let mine = f.root().join("hard.md");
    std::fs::write(&mine, skill_md("hard", "Shared.", "")).unwrap();
    std::fs::hard_link(&mine, f.root().join("skills/hard/SKILL.md")).unwrap();
    let e = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "hard"})).await.unwrap_err();
    assert!(e.0.contains("hard links"), "{e}");

    // `skills` itself a symlink to a folder outside.
    let f = in_session(Fixture::new(&[]), "t");
    std::fs::create_dir_all(outside.path().join("evil")).unwrap();
    std::fs::write(outside.path().join("evil/SKILL.md"), skill_md("evil", "Outside.", "")).unwrap();
    symlink(outside.path(), f.root().join("skills")).unwrap();
    let l = list(&f).await;
    assert_eq!(names(&l), ["chela_settings"]);
    assert!(l["problems"].to_string().contains("`skills` in the workspace is a symlink"), "{l}");
    let e = f
        .call(SkillSave(Arc::clone(&f.skills)), json!({"name": "new", "content": skill_md("new", "d", "")}))
        .await
        .unwrap_err();
    assert!(e.0.contains("symlink"), "{e}");
    assert!(!outside.path().join("new").exists(), "nothing was written outside");
}

#[tokio::test]
async fn a_fifo_as_skill_md_does_not_hang() {
    let f = in_session(Fixture::new(&[]), "t");
    std::fs::create_dir_all(f.root().join("skills/pipe")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.root().join("skills/pipe/SKILL.md"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let e = f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "pipe"})).await.unwrap_err();
    assert!(e.0.contains("not a regular file"), "{e}");
}

#[tokio::test]
async fn a_damaged_activation_file_counts_as_none() {
    let f = in_session(Fixture::new(&[]), "t");
    std::fs::create_dir_all(f.root().join("sessions")).unwrap();
    for junk in ["{not json", r#"["../../etc", "chela_settings", 7]"#, r#"["../../etc", "chela_settings"]"#] {
        std::fs::write(f.root().join("sessions/cli_t.skills.json"), junk).unwrap();
        let active = f.skills.active(&f.ws, "cli", "t");
        assert!(active.is_empty() || active == ["chela_settings"], "{junk}: {active:?}");
        assert!(!active.iter().any(|a| a.contains("..")));
    }
    // A working activation replaces the damaged file.
    std::fs::write(f.root().join("sessions/cli_t.skills.json"), "{not json").unwrap();
    f.call(SkillActivate(Arc::clone(&f.skills)), json!({"name": "chela_settings"})).await.unwrap();
    assert_eq!(f.skills.active(&f.ws, "cli", "t"), ["chela_settings"]);
}
