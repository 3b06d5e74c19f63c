use super::*;
use alloc::vec;

fn cap(id: &'static str, llm: bool) -> Capability {
    Capability {
        id: id.into(),
        group: "".into(),
        description: "d".into(),
        input_schema: r#"{"type":"object"}"#.into(),
        llm_callable: llm,
    }
}

fn spec(id: &'static str, core: bool, visible: bool) -> GroupSpec {
    GroupSpec { id: id.into(), description: "g".into(), core, visible_by_default: visible, guidance: id.into() }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.add_group(spec("time", true, true), vec![cap("get_current_time", true)]).unwrap();
    r.add_group(spec("files", false, true), vec![cap("file_read", true), cap("file_admin", false)]).unwrap();
    r.add_group(spec("board", false, false), vec![cap("gpio_write", true)]).unwrap();
    r
}

fn names(tools: &[ToolSpec<'_>]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[test]
fn the_model_sees_enabled_visible_callable_tools() {
    let r = registry();
    assert_eq!(names(&r.tools_for(Scope::default())), ["get_current_time", "file_read"]);
    let unlocked = ["board".to_string()];
    assert_eq!(
        names(&r.tools_for(Scope { extra_visible: &unlocked })),
        ["get_current_time", "file_read", "gpio_write"]
    );
}

#[test]
fn disabling_refuses_every_caller() {
    let mut r = registry();
    r.set_enabled("files", false).unwrap();
    assert_eq!(names(&r.tools_for(Scope::default())), ["get_current_time"]);
    for caller in [Caller::Model, Caller::Manual, Caller::Internal] {
        let e = r.authorize("file_read", caller, Scope::default()).unwrap_err();
        assert!(matches!(e, CallError::GroupDisabled { .. }));
        assert!(e.to_string().contains("chela cap enable files"), "{e}");
    }
    r.set_enabled("files", true).unwrap();
    assert!(r.authorize("file_read", Caller::Model, Scope::default()).is_ok());
}

#[test]
fn hiding_affects_only_the_model() {
    let mut r = registry();
    r.set_visible("files", false).unwrap();
    assert_eq!(names(&r.tools_for(Scope::default())), ["get_current_time"]);
    let e = r.authorize("file_read", Caller::Model, Scope::default()).unwrap_err();
    assert!(matches!(e, CallError::Hidden { .. }), "{e:?}");
    assert!(r.authorize("file_read", Caller::Manual, Scope::default()).is_ok());
    assert!(r.authorize("gpio_write", Caller::Model, Scope::default()).is_err());
    let unlocked = ["board".to_string()];
    assert!(r.authorize("gpio_write", Caller::Model, Scope { extra_visible: &unlocked }).is_ok());
}

#[test]
fn person_only_tools_and_unknown_ids() {
    let r = registry();
    assert!(matches!(r.authorize("file_admin", Caller::Model, Scope::default()), Err(CallError::NotForModel { .. })));
    assert!(r.authorize("file_admin", Caller::Manual, Scope::default()).is_ok());
    assert!(matches!(r.authorize("nope", Caller::Manual, Scope::default()), Err(CallError::Unknown { .. })));
}

#[test]
fn core_groups_cannot_be_switched_and_unknown_groups_are_named() {
    let mut r = registry();
    assert_eq!(r.set_enabled("time", false), Err(ControlError::CoreGroup { group: "time".into() }));
    assert!(matches!(r.set_visible("time", false), Err(ControlError::CoreGroup { .. })));
    let e = r.set_enabled("filez", false).unwrap_err();
    assert!(e.to_string().contains("files"), "{e}");
    let disabled = vec!["time".to_string(), "files".to_string(), "mcp_gone".to_string()];
    let unknown = r.apply(&disabled, &[], &[]);
    assert_eq!(unknown, ["mcp_gone"]);
    assert!(r.group("time").unwrap().enabled);
    assert!(!r.group("files").unwrap().enabled);
}

#[test]
fn persisted_visibility_overrides_the_default() {
    let mut r = registry();
    let shown = vec!["board".to_string()];
    let hidden = vec!["files".to_string()];
    r.apply(&[], &hidden, &shown);
    assert_eq!(names(&r.tools_for(Scope::default())), ["get_current_time", "gpio_write"]);
    assert_eq!(r.guidance_for(Scope::default()), "time\n\nboard");
    r.set_enabled("board", false).unwrap();
    assert_eq!(r.guidance_for(Scope::default()), "time");
}

#[test]
fn duplicates_are_refused_and_groups_can_go() {
    let mut r = registry();
    assert!(r.add_group(spec("files", false, true), vec![]).is_err());
    assert!(r.add_group(spec("x", false, true), vec![cap("file_read", true)]).is_err());
    assert!(r.add_group(spec("y", false, true), vec![cap("a", true), cap("a", true)]).is_err());
    assert!(r.remove_group("board"));
    assert!(r.get("gpio_write").is_none());
    assert!(!r.remove_group("board"));
}
