use super::*;

#[test]
fn a_level_is_read_in_every_way_models_write_it() {
    for (json, high) in [
        (r#"{"pin":4,"value":1}"#, true),
        (r#"{"pin":4,"value":false}"#, false),
        (r#"{"pin":4,"value":"HIGH"}"#, true),
        (r#"{"pin":4,"level":"low"}"#, false),
    ] {
        assert_eq!(serde_json::from_str::<WriteArgs>(json).unwrap().value, Level(high), "{json}");
    }
    let e = serde_json::from_str::<WriteArgs>(r#"{"pin":4,"value":2}"#).unwrap_err();
    assert!(alloc::string::ToString::to_string(&e).contains("is not a level"), "{e}");
}

#[test]
fn brightness_is_a_percent() {
    let led = |b: Option<u8>| LedArgs { device: None, color: None, brightness: b, pattern: None };
    assert_eq!(led(None).brightness(100), Ok((100, 255)));
    assert_eq!(led(None).brightness(25), Ok((25, 64)));
    assert_eq!(led(Some(50)).brightness(100), Ok((50, 128)));
    assert!(led(Some(101)).brightness(100).unwrap_err().contains("over 100"));
}
