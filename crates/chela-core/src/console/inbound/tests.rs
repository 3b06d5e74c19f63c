use super::*;

const UPDATE: &str = r#"{"ok":true,"result":[{"update_id":864211045,
"message":{"message_id":77,"from":{"id":5551234,"is_bot":false,"first_name":"Ada \"chat\":{\"id\":1}"},"chat":{"id":5551234,"first_name":"Ada","type":"private"},"date":1764500000,"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"#;

#[test]
fn the_start_of_an_oversize_update_gives_its_id_and_chat() {
    let got = overflowed_update(UPDATE.as_bytes()).unwrap();
    assert_eq!(got, Overflowed { update_id: 864_211_045, chat_id: Some(5_551_234) });
    let group =
        r#"{"ok":true,"result":[{"update_id":7,"message":{"message_id":1,"chat":{"id":-100123,"title":"g"},"text":"…"#;
    assert_eq!(overflowed_update(group.as_bytes()), Some(Overflowed { update_id: 7, chat_id: Some(-100_123) }));
}

#[test]
fn a_cut_too_early_gives_what_it_can_and_never_a_cut_number() {
    let cut_in_chat = UPDATE.find(r#""chat":{"id":55"#).unwrap() + 16;
    assert_eq!(
        overflowed_update(&UPDATE.as_bytes()[..cut_in_chat]),
        Some(Overflowed { update_id: 864_211_045, chat_id: None }),
        "a chat id cut in the middle is not trusted"
    );
    let cut_in_update = UPDATE.find("864211").unwrap() + 6;
    assert_eq!(overflowed_update(&UPDATE.as_bytes()[..cut_in_update]), None);
    assert_eq!(overflowed_update(b""), None);
    assert_eq!(overflowed_update(b"\"update_id\":99999999999999999999999,"), None, "overflow");
    assert_eq!(overflowed_update(b"\"update_id\": -06172,"), None, "not a JSON number");
    assert_eq!(overflowed_update(b"\"update_id\":0,"), Some(Overflowed { update_id: 0, chat_id: None }));
    assert_eq!(
        overflowed_update(br#""update_id":5,"chat":{"x":{"id":3},"id":4}"#),
        Some(Overflowed { update_id: 5, chat_id: None }),
        "an id inside a nested object is not the chat's"
    );
}

#[test]
fn refusals_are_short_and_cut_replies_stay_within_the_bound() {
    assert_eq!(refuse_message(100, 100), None);
    let r = refuse_message(5000, 4096).unwrap();
    assert!(r.len() < 120 && r.contains("5000") && r.contains("4096"), "{r}");
    let long = "é".repeat(3000);
    let fit = fit_reply(&long, 4096);
    assert!(fit.len() <= 4096 && fit.contains("cut"), "{}", fit.len());
    assert_eq!(fit_reply("short", 4096), "short");
}
