use alloc::string::ToString;
use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;

#[test]
fn the_firmware_s_hello_parses_and_unknown_fields_are_ignored() {
    let text = r#"{"type":"hello","version":1,"features":{"aec":true,"mcp":true,"glyph_push":true},
        "text_font":{"bundle":"noto-v1","charset":"common","size":20,"bpp":4},"transport":"websocket",
        "audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;
    let Message::Hello(h) = parse(text).unwrap() else { panic!("not a hello") };
    assert_eq!(h.version, Some(1));
    assert_eq!(h.features.unwrap().mcp, Some(true));
    assert_eq!(h.audio_params.unwrap().sample_rate, 16_000);
    let answer = Message::Hello(Hello::server("a1b2c3", 24_000, 60)).to_json();
    assert_eq!(
        answer,
        r#"{"type":"hello","transport":"websocket","session_id":"a1b2c3","audio_params":{"format":"opus","sample_rate":24000,"channels":1,"frame_duration":60}}"#
    );
}

#[test]
fn every_device_message_of_the_protocol_parses() {
    let listen = parse(r#"{"session_id":"x","type":"listen","state":"detect","text":"你好小智"}"#).unwrap();
    assert_eq!(
        listen,
        Message::Listen(Listen {
            session_id: Some("x".into()),
            state: ListenState::Detect,
            mode: None,
            text: Some("你好小智".into())
        })
    );
    for (mode, want) in [("auto", ListenMode::Auto), ("manual", ListenMode::Manual), ("realtime", ListenMode::Realtime)]
    {
        let m = parse(&alloc::format!(r#"{{"type":"listen","state":"start","mode":"{mode}"}}"#)).unwrap();
        assert!(matches!(m, Message::Listen(Listen { mode: Some(m), state: ListenState::Start, .. }) if m == want));
    }
    assert_eq!(
        parse(r#"{"session_id":"x","type":"abort","reason":"wake_word_detected"}"#).unwrap(),
        Message::Abort(Abort { session_id: Some("x".into()), reason: Some("wake_word_detected".into()) })
    );
    assert_eq!(parse(r#"{"type":"abort"}"#).unwrap(), Message::Abort(Abort::default()));
    let Message::Mcp(m) =
        parse(r#"{"session_id":"x","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}"#).unwrap()
    else {
        panic!("not mcp")
    };
    assert_eq!(m.payload["id"], 1);
}

#[test]
fn server_messages_have_the_wire_names() {
    let tts = Message::Tts(Tts { session_id: None, state: TtsState::SentenceStart, text: Some("Hi.".into()) });
    assert_eq!(tts.to_json(), r#"{"type":"tts","state":"sentence_start","text":"Hi."}"#);
    let alert = Message::Alert(Alert {
        session_id: None,
        status: "Warning".into(),
        message: "Battery low".into(),
        emotion: "sad".into(),
    });
    assert_eq!(alert.to_json(), r#"{"type":"alert","status":"Warning","message":"Battery low","emotion":"sad"}"#);
    let reboot = Message::System(System { session_id: None, command: "reboot".into() });
    assert_eq!(reboot.to_json(), r#"{"type":"system","command":"reboot"}"#);
    let llm = Message::Llm(Llm { session_id: None, emotion: "happy".into(), text: Some("🙂".into()) });
    assert_eq!(llm.to_json(), r#"{"type":"llm","emotion":"happy","text":"🙂"}"#);
    assert!(EMOTIONS.contains(&"happy") && EMOTIONS.len() == 21);
}

#[test]
fn bad_messages_are_named() {
    assert_eq!(parse(r#"{"type":"iot","x":1}"#), Err(MessageError::UnknownType("iot".into())));
    assert_eq!(parse(r#"{"state":"start"}"#), Err(MessageError::MissingType));
    assert_eq!(parse(r#"{"type":7}"#), Err(MessageError::MissingType));
    assert!(matches!(parse("[1,2]"), Err(MessageError::NotJson(_))));
    assert!(matches!(parse("{\"type\":\"hello\""), Err(MessageError::NotJson(_))));
    let e = parse(r#"{"type":"listen","state":"shout"}"#).unwrap_err();
    assert!(matches!(&e, MessageError::Invalid { kind, .. } if kind == "listen"), "{e}");
    assert!(matches!(parse(r#"{"type":"alert","status":"x"}"#), Err(MessageError::Invalid { .. })));
    let long = "x".repeat(MAX_MESSAGE + 1);
    assert!(matches!(parse(&long), Err(MessageError::TooLarge { .. })));
    let deep = alloc::format!(r#"{{"type":"mcp","payload":{}1{}}}"#, "[".repeat(10_000), "]".repeat(10_000));
    assert!(parse(&deep).is_err());
    let e = MessageError::UnknownType("y".repeat(1000)).to_string();
    assert!(e.len() < 100, "{e}");
}

fn text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z \"\\\\\u{4f60}\u{1F642}]{0,12}").unwrap()
}

fn opt(s: impl Strategy<Value = String>) -> impl Strategy<Value = Option<String>> {
    proptest::option::of(s)
}

fn message() -> impl Strategy<Value = Message> {
    let listen_state = prop_oneof![Just(ListenState::Start), Just(ListenState::Stop), Just(ListenState::Detect)];
    let mode =
        proptest::option::of(prop_oneof![Just(ListenMode::Auto), Just(ListenMode::Manual), Just(ListenMode::Realtime)]);
    let tts_state = prop_oneof![Just(TtsState::Start), Just(TtsState::SentenceStart), Just(TtsState::Stop)];
    let hello =
        (opt(text()), proptest::option::of(any::<u32>()), proptest::option::of((1u32..100_000, 1u32..3, 1u32..200)))
            .prop_map(|(sid, version, audio)| {
                Message::Hello(Hello {
                    version,
                    transport: Some("websocket".into()),
                    session_id: sid,
                    features: Some(Features { mcp: Some(true), ..Features::default() }),
                    audio_params: audio.map(|(sample_rate, channels, frame_duration)| AudioParams {
                        format: "opus".into(),
                        sample_rate,
                        channels,
                        frame_duration,
                    }),
                })
            });
    prop_oneof![
        hello,
        (opt(text()), listen_state, mode, opt(text()))
            .prop_map(|(session_id, state, mode, text)| Message::Listen(Listen { session_id, state, mode, text })),
        (opt(text()), opt(text())).prop_map(|(session_id, reason)| Message::Abort(Abort { session_id, reason })),
        (opt(text()), text()).prop_map(|(session_id, text)| Message::Stt(Stt { session_id, text })),
        (text(), opt(text())).prop_map(|(emotion, text)| Message::Llm(Llm { session_id: None, emotion, text })),
        (tts_state, opt(text())).prop_map(|(state, text)| Message::Tts(Tts { session_id: None, state, text })),
        (text(), text(), text()).prop_map(|(status, message, emotion)| Message::Alert(Alert {
            session_id: None,
            status,
            message,
            emotion
        })),
        text().prop_map(|command| Message::System(System { session_id: None, command })),
        (opt(text()), any::<i64>(), text()).prop_map(|(session_id, id, method)| Message::Mcp(Mcp {
            session_id,
            payload: serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method}),
        })),
        opt(text()).prop_map(|session_id| Message::Goodbye(Goodbye { session_id })),
    ]
}

proptest! {
    #[test]
    fn messages_round_trip(m in message()) {
        prop_assert_eq!(parse(&m.to_json()).unwrap(), m);
    }

    #[test]
    fn arbitrary_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let s = String::from_utf8_lossy(&bytes);
        let _ = parse(&s);
        let wrapped: Vec<u8> = [b"{\"type\":\"listen\",".as_slice(), &bytes, b"}"].concat();
        let _ = parse(&String::from_utf8_lossy(&wrapped));
    }
}
