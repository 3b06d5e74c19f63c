//! Capability groups are cargo features: a build without one has none of its tools.
//! CI runs this with the default features and with `--no-default-features`.

use std::process::Command;

fn cap_list() -> String {
    let dir = tempfile::tempdir().unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_chela")).env("CHELA_HOME", dir.path()).args(["cap", "list"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn cap_list_has_exactly_the_groups_this_build_includes() {
    let list = cap_list();
    assert!(list.contains("time  [core (always on)]") && list.contains("get_current_time"), "{list}");
    for (feature, group, tool) in [
        (cfg!(feature = "files"), "files", "file_read"),
        (cfg!(feature = "memory"), "memory", "memory_store"),
        (cfg!(feature = "web"), "web", "web_search"),
        (cfg!(feature = "http"), "http", "http_request"),
        (cfg!(feature = "lua"), "lua", "lua_run"),
        (cfg!(feature = "board"), "board", "sensor_read"),
    ] {
        let has = list.lines().any(|l| l.starts_with(&format!("{group}  ["))) && list.contains(tool);
        assert_eq!(
            has,
            feature,
            "group {group} should be {} in this build:\n{list}",
            if feature { "present" } else { "absent" }
        );
    }
}
