//! `tools_unlock`, and the attacks on it: groups the owner hid or switched off, unknown names,
//! calls outside a conversation, planted and damaged unlock files.

use std::sync::Arc;

use chela_core::cap::{Caller, Scope};
use serde_json::json;

use super::*;
use crate::skills::SessionRef;
use crate::testing::Fixture;
use crate::tools::ToolErrorKind;

fn in_session(mut f: Fixture, chat: &str) -> Fixture {
    f.session = Some(Arc::new(SessionRef::new("cli", chat, Vec::new())));
    f
}

/// The model's call of `id` with the scope a turn gives it (`turn::scope_with_skills`).
async fn model_call(f: &Fixture, id: &str) -> ToolResult {
    let named = f.session.as_ref().map(|s| s.named_groups()).unwrap_or_default();
    let hidden = f.cfg.list(chela_core::config::CAPS_HIDDEN);
    let extra = chela_core::skills::unlocked_groups(&f.toolbox.registry(), &named, &hidden);
    f.toolbox.call(&f.ctx(), id, "{}", Caller::Model, Scope { extra_visible: &extra }).await
}

#[tokio::test]
async fn a_hidden_group_is_refused_until_unlocked_then_stays_for_the_conversation() {
    let f = in_session(Fixture::new(&[]), "t");
    let before = model_call(&f, "config_show").await.unwrap_err();
    assert_eq!(before.kind(), ToolErrorKind::Refused, "{before}");

    let out = f.call(ToolsUnlock, json!({"group": "settings"})).await.unwrap();
    assert!(out.contains("Unlocked `settings`") && out.contains("config_show"), "{out}");
    assert_eq!(f.session.as_ref().unwrap().named_groups(), ["settings"], "the running turn sees it at once");
    model_call(&f, "config_show").await.unwrap();

    // The next turn of the same conversation still has it; another conversation does not.
    assert!(f.skills.for_session(&f.ws, &f.cfg, "cli", "t").named_groups.contains(&"settings".to_owned()));
    assert!(f.skills.for_session(&f.ws, &f.cfg, "cli", "other").named_groups.is_empty());
    // Unlocking twice keeps one entry.
    f.call(ToolsUnlock, json!({"group": "settings"})).await.unwrap();
    assert_eq!(unlocked(&f.ws, "cli", "t"), ["settings"]);
}

#[tokio::test]
async fn a_skill_deactivated_later_does_not_hide_a_group_unlocked_by_hand() {
    let f = in_session(Fixture::new(&[]), "t");
    f.call(ToolsUnlock, json!({"group": "settings"})).await.unwrap();
    let s = f.session.as_ref().unwrap();
    f.skills.activate(&f.ws, &f.cfg, s, "chela_settings").unwrap();
    f.skills.deactivate(&f.ws, &f.cfg, s, "chela_settings").unwrap();
    assert!(s.named_groups().contains(&"settings".to_owned()), "{:?}", s.named_groups());
    model_call(&f, "config_show").await.unwrap();
}

#[tokio::test]
async fn the_model_cannot_unlock_what_the_owner_hid_or_switched_off() {
    for (key, value) in [("caps.hidden", "settings"), ("caps.disabled", "settings")] {
        let f = in_session(Fixture::new(&[(key, value)]), "t");
        let e = f.call(ToolsUnlock, json!({"group": "settings"})).await.unwrap_err();
        assert_eq!(e.kind(), ToolErrorKind::Refused, "{key}: {e}");
        assert!(e.0.contains("owner"), "{e}");
        assert!(unlocked(&f.ws, "cli", "t").is_empty(), "{key}: nothing recorded");
        assert!(model_call(&f, "config_show").await.is_err(), "{key}");
        let list = f.call(ToolsUnlock, json!({})).await.unwrap();
        assert!(!list.contains("- settings:"), "{key}: {list}");
    }
    // An unlock file planted or left from before the owner hid the group unlocks nothing.
    let f = in_session(Fixture::new(&[("caps.hidden", "settings")]), "t");
    std::fs::create_dir_all(f.ws.sessions_dir()).unwrap();
    std::fs::write(f.root().join("sessions/cli_t.unlocked.json"), r#"["settings","files","time","nope"]"#).unwrap();
    let named = f.skills.for_session(&f.ws, &f.cfg, "cli", "t").named_groups;
    let hidden = f.cfg.list(chela_core::config::CAPS_HIDDEN);
    assert!(chela_core::skills::unlocked_groups(&f.toolbox.registry(), &named, &hidden).is_empty());
}

#[tokio::test]
async fn unknown_visible_and_core_groups_and_calls_outside_a_conversation() {
    let f = in_session(Fixture::new(&[]), "t");
    let e = f.call(ToolsUnlock, json!({"group": "../../etc"})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::NotFound, "{e}");
    for visible in ["time", "skill_mgr", "memory"] {
        let out = f.call(ToolsUnlock, json!({"group": visible})).await.unwrap();
        assert!(out.contains("already available"), "{visible}: {out}");
    }
    assert!(unlocked(&f.ws, "cli", "t").is_empty());
    let outside = Fixture::new(&[]);
    let e = outside.call(ToolsUnlock, json!({"group": "settings"})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::Refused, "{e}");
}

#[tokio::test]
async fn the_list_names_each_hidden_group_with_its_description() {
    let f = in_session(Fixture::new(&[]), "t");
    let list = f.call(ToolsUnlock, json!({})).await.unwrap();
    assert!(list.contains("- settings: Chela's own settings"), "{list}");
    assert!(!list.contains("- memory:") && !list.contains("- time:"), "visible groups are not listed: {list}");
}

#[test]
fn a_damaged_or_oversize_unlock_file_counts_as_none() {
    let f = Fixture::new(&[]);
    std::fs::create_dir_all(f.ws.sessions_dir()).unwrap();
    let file = f.root().join("sessions/cli_t.unlocked.json");
    for junk in ["{not json".to_owned(), format!("[\"{}\"]", "x".repeat(MAX_FILE as usize))] {
        std::fs::write(&file, junk).unwrap();
        assert!(unlocked(&f.ws, "cli", "t").is_empty());
    }
    let many: Vec<String> = (0..1000).map(|i| format!("g{i}")).collect();
    std::fs::write(&file, serde_json::to_string(&many).unwrap()).unwrap();
    assert_eq!(unlocked(&f.ws, "cli", "t").len(), MAX_UNLOCKED);
}

#[tokio::test]
async fn a_part_split_off_a_group_the_owner_hid_or_switched_off_stays_off() {
    for (key, value) in [("caps.hidden", "files"), ("caps.disabled", "files")] {
        let f = in_session(Fixture::new(&[(key, value)]), "t");
        let e = f.call(ToolsUnlock, json!({"group": "files_manage"})).await.unwrap_err();
        assert_eq!(e.kind(), ToolErrorKind::Refused, "{key}: {e}");
        // Even named by a skill or a planted file, the part stays off.
        f.session.as_ref().unwrap().set_named_groups(vec!["files_manage".to_owned()]);
        let e = model_call(&f, "file_stat").await.unwrap_err();
        assert_eq!(e.kind(), ToolErrorKind::Refused, "{key}: {e}");
    }
    let f = in_session(Fixture::new(&[]), "t");
    assert_eq!(model_call(&f, "file_stat").await.unwrap_err().kind(), ToolErrorKind::Refused);
    f.call(ToolsUnlock, json!({"group": "files_manage"})).await.unwrap();
    let e = model_call(&f, "file_stat").await;
    // Unlocked: it runs (and fails only for its own reason, the missing path argument).
    assert_ne!(e.map_err(|e| e.kind()).err(), Some(ToolErrorKind::Refused));
}

/// What the model reads of the tool names the groups it can open here and no other: a group the
/// owner hid, switched off or shows already is left out, and one registered later comes in.
#[test]
fn the_description_names_exactly_the_groups_that_can_be_unlocked_here() {
    let described = |f: &Fixture| f.toolbox.registry().get(NAME).unwrap().description.to_string();
    let f = Fixture::new(&[]);
    let all = described(&f);
    assert!(all.starts_with("Unlock a tool group a task needs: "), "{all}");
    assert!(all.contains("settings, ") || all.contains("settings."), "{all}");
    assert!(all.contains("files_manage, ") && all.contains("board (hardware)"), "{all}");
    for visible in ["memory", "time", "skill_mgr", "files,", "files."] {
        assert!(!all.contains(&format!(": {visible}")) && !all.contains(&format!(", {visible}")), "{visible}: {all}");
    }
    for (key, value) in [("caps.hidden", "settings"), ("caps.disabled", "settings"), ("caps.shown", "settings")] {
        let f = Fixture::new(&[(key, value)]);
        let d = described(&f);
        assert!(!d.contains("settings"), "{key}: {d}");
        assert!(d.contains("files_manage"), "{key}: {d}");
    }
    f.toolbox.register(crate::tools::Group::new("extra", "test").hidden("a test hint")).unwrap();
    assert!(described(&f).ends_with(", extra (a test hint). No group: list them."), "{}", described(&f));
    assert!(f.toolbox.unregister("extra"));
    assert_eq!(described(&f), all);
}
