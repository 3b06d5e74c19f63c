use super::*;
use crate::testing::Fixture;
use crate::tools::Erased as _;
use std::os::unix::fs::symlink;
use std::sync::Arc;

fn err(r: ToolResult) -> String {
    r.expect_err("expected a refusal").0
}

#[tokio::test]
async fn write_read_append_and_pieces() {
    let fx = Fixture::new(&[]);
    let r = fx.call(FileWrite, serde_json::json!({"path": "notes/todo.md", "content": "milk\n"})).await.unwrap();
    assert!(r.contains("wrote 5 bytes"), "{r}");
    fx.call(FileWrite, serde_json::json!({"path": "notes/todo.md", "content": "eggs\n", "mode": "append"}))
        .await
        .unwrap();
    assert_eq!(fx.call(FileRead, serde_json::json!({"path": "./notes/todo.md"})).await.unwrap(), "milk\neggs\n");
    let piece =
        fx.call(FileRead, serde_json::json!({"path": "notes/todo.md", "offset": 2, "max_bytes": 4})).await.unwrap();
    assert_eq!(piece, "[bytes 2..6 of 10; continue with offset 6]\nlk\ne");
    let tail = fx.call(FileRead, serde_json::json!({"path": "notes/todo.md", "offset": 6})).await.unwrap();
    assert_eq!(tail, "[bytes 6..10 of 10]\nggs\n");
    // A piece never ends inside a character.
    fx.call(FileWrite, serde_json::json!({"path": "zh.txt", "content": "你好世界"})).await.unwrap();
    let p = fx.call(FileRead, serde_json::json!({"path": "zh.txt", "max_bytes": 4})).await.unwrap();
    assert_eq!(p, "[bytes 0..3 of 12; continue with offset 3]\n你");
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() {
    let fx = Fixture::new(&[]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    symlink(outside.path(), fx.root().join("escape")).unwrap();
    symlink(outside.path().join("secret"), fx.root().join("link")).unwrap();
    for (path, why) in [
        ("/etc/passwd", "absolute"),
        ("~/x", "absolute"),
        ("../x", ".."),
        ("notes/../../x", ".."),
        ("escape/secret", "outside"),
        ("link", "outside"),
        ("chela.toml", "off limits"),
        ("overrides.toml", "off limits"),
        ("sessions/cli_local.jsonl", "off limits"),
        ("a\0b", "NUL"),
    ] {
        let e = err(fx.call(FileRead, serde_json::json!({"path": path})).await);
        assert!(e.contains(why), "{path}: {e}");
    }
    let e = err(fx.call(FileWrite, serde_json::json!({"path": "escape/new.txt", "content": "x"})).await);
    assert!(e.contains("outside"), "{e}");
    assert!(!outside.path().join("new.txt").exists());
    let e = err(fx.call(FileMove, serde_json::json!({"from": "escape/secret", "to": "mine"})).await);
    assert!(e.contains("outside"), "{e}");
    let e = err(fx.call(FileCopy, serde_json::json!({"from": "link", "to": "mine"})).await);
    assert!(e.contains("outside"), "{e}");
    assert_eq!(std::fs::read_to_string(outside.path().join("secret")).unwrap(), "s3cret");
}

#[tokio::test]
async fn symlinks_inside_are_not_followed() {
    let fx = Fixture::new(&[]);
    std::fs::write(fx.root().join("real.txt"), "real").unwrap();
    symlink(fx.root().join("real.txt"), fx.root().join("alias")).unwrap();
    let e = err(fx.call(FileRead, serde_json::json!({"path": "alias"})).await);
    assert!(e.contains("symlink"), "{e}");
    let e = err(fx.call(FileWrite, serde_json::json!({"path": "alias", "content": "x"})).await);
    assert!(e.contains("symlink"), "{e}");
    assert_eq!(std::fs::read_to_string(fx.root().join("real.txt")).unwrap(), "real");
}

#[tokio::test]
async fn edits_must_match_exactly_once() {
    let fx = Fixture::new(&[]);
    fx.call(FileWrite, serde_json::json!({"path": "a.md", "content": "one two two"})).await.unwrap();
    let e = err(fx.call(FileEdit, serde_json::json!({"path": "a.md", "old_text": "two", "new_text": "2"})).await);
    assert!(e.contains("occurs 2 times"), "{e}");
    let e = err(fx.call(FileEdit, serde_json::json!({"path": "a.md", "old_text": "three", "new_text": "3"})).await);
    assert!(e.contains("not found"), "{e}");
    let e = err(fx.call(FileEdit, serde_json::json!({"path": "a.md", "old_text": "", "new_text": "3"})).await);
    assert!(e.contains("empty"), "{e}");
    fx.call(FileEdit, serde_json::json!({"path": "a.md", "old_text": "one two", "new_text": "1 two"})).await.unwrap();
    assert_eq!(std::fs::read_to_string(fx.root().join("a.md")).unwrap(), "1 two two");
}

#[tokio::test]
async fn sizes_are_bounded() {
    let fx = Fixture::new(&[("files.max_write_bytes", "2048"), ("files.max_read_bytes", "1024")]);
    let big = "x".repeat(2049);
    let e = err(fx.call(FileWrite, serde_json::json!({"path": "big", "content": big})).await);
    assert!(e.contains("2048-byte limit"), "{e}");
    assert!(!fx.root().join("big").exists());
    fx.call(FileWrite, serde_json::json!({"path": "big", "content": "x".repeat(2000)})).await.unwrap();
    let e =
        err(fx.call(FileWrite, serde_json::json!({"path": "big", "content": "y".repeat(100), "mode": "append"})).await);
    assert!(e.contains("2100 bytes"), "{e}");
    let r = fx.call(FileRead, serde_json::json!({"path": "big", "max_bytes": 100000})).await.unwrap();
    assert!(r.starts_with("[bytes 0..1024 of 2000; continue with offset 1024]"), "{}", &r[..60]);
    std::fs::write(fx.root().join("bin"), [0u8, 1, 2]).unwrap();
    assert!(err(fx.call(FileRead, serde_json::json!({"path": "bin"})).await).contains("binary"));
}

#[tokio::test]
async fn list_delete_move_copy_stat() {
    let fx = Fixture::new(&[]);
    for p in ["a.txt", "dir/b.txt", "dir/sub/c.txt"] {
        fx.call(FileWrite, serde_json::json!({"path": p, "content": "hi"})).await.unwrap();
    }
    let top = fx.call(FileList, serde_json::json!({})).await.unwrap();
    assert!(top.contains("a.txt (2 bytes)") && top.contains("dir/"), "{top}");
    assert!(!top.contains("sessions") && !top.contains("chela.toml") && !top.contains("b.txt"), "{top}");
    let all = fx.call(FileList, serde_json::json!({"path": "dir", "recursive": true})).await.unwrap();
    assert_eq!(all, "dir/b.txt (2 bytes)\ndir/sub/\ndir/sub/c.txt (2 bytes)");

    let e = err(fx.call(FileMove, serde_json::json!({"from": "a.txt", "to": "dir/b.txt"})).await);
    assert!(e.contains("already exists"), "{e}");
    fx.call(FileMove, serde_json::json!({"from": "a.txt", "to": "moved/a.txt"})).await.unwrap();
    assert!(!fx.root().join("a.txt").exists() && fx.root().join("moved/a.txt").exists());
    fx.call(FileCopy, serde_json::json!({"from": "moved/a.txt", "to": "dir/b.txt", "overwrite": true})).await.unwrap();
    assert!(fx.root().join("moved/a.txt").exists());

    let stat: serde_json::Value =
        serde_json::from_str(&fx.call(FileStat, serde_json::json!({"path": "dir/b.txt"})).await.unwrap()).unwrap();
    assert_eq!(stat["type"], "file");
    assert_eq!(stat["size"], 2);
    assert!(stat["modified"].as_str().unwrap().starts_with("20"));

    let e = err(fx.call(FileDelete, serde_json::json!({"path": "dir/sub"})).await);
    assert!(e.contains("not empty"), "{e}");
    fx.call(FileDelete, serde_json::json!({"path": "dir/sub/c.txt"})).await.unwrap();
    fx.call(FileDelete, serde_json::json!({"path": "dir/sub"})).await.unwrap();
    assert!(!fx.root().join("dir/sub").exists());
    assert!(err(fx.call(FileDelete, serde_json::json!({"path": "."})).await).contains("cannot be deleted"));
    assert!(err(fx.call(FileDelete, serde_json::json!({"path": "nope"})).await).contains("does not exist"));
}

#[tokio::test]
async fn bad_arguments_say_what_was_expected() {
    let fx = Fixture::new(&[]);
    let e = err(fx.call(FileRead, serde_json::json!({"file": "x"})).await);
    assert!(e.contains("Invalid arguments for file_read") && e.contains("\"required\":[\"path\"]"), "{e}");

    // Each refusal in serde's words, then the schema.
    let expected =
        |why: &str| format!("Invalid arguments for file_read: {why}. Expected: {}", <FileRead as Tool>::SCHEMA);
    assert_eq!(e, expected("missing field `path`"));
    let e = err(fx.call(FileRead, serde_json::json!({"path": "x", "offset": "3"})).await);
    assert_eq!(e, expected(r#"invalid type: string "3", expected u64"#));
    let e = err(fx.call(FileRead, serde_json::json!({"path": "x", "offset": null})).await);
    assert_eq!(e, expected("invalid type: null, expected u64"));
    let e = err(fx.call(FileWrite, serde_json::json!({"path": "x", "content": "", "mode": "sideways"})).await);
    assert!(e.contains("unknown variant `sideways`, expected `overwrite` or `append`"), "{e}");
    // A field given twice (JSON text the model wrote, not a `Value`).
    let e = Arc::new(FileRead).call_json(fx.ctx(), r#"{"path":"a","path":"b"}"#.into()).await.unwrap_err();
    assert_eq!(
        (e.kind(), e.0),
        (crate::tools::ToolErrorKind::InvalidArgs, expected("duplicate field `path` at line 1 column 18"))
    );
}
