use super::*;
use alloc::vec;
use proptest::prelude::*;

const NONE: &[&str] = &[];
const T0: u64 = 1_700_000_000;

fn rnd(n: u8) -> [u8; CODE_LEN] {
    [n, n.wrapping_mul(7), n ^ 0x55, 3, n, 9, n.wrapping_add(1), 200]
}

fn code_of_verdict(a: &Admission) -> String {
    match a {
        Admission::NewCode { code } | Admission::StillPending { code } => code.clone(),
        other => panic!("expected a code, got {other:?}"),
    }
}

#[test]
fn allow_from_star_opens_and_listed_ids_pass() {
    let mut s = AccessState::default();
    assert_eq!(s.pairing(&["*"], "telegram", "anyone", T0, rnd(1)), Admission::Allowed);
    assert_eq!(s.pairing(&["42", " 43 "], "telegram", "43", T0, rnd(1)), Admission::Allowed);
    assert!(matches!(s.pairing(&["42"], "telegram", "44", T0, rnd(1)), Admission::NewCode { .. }));
    assert!(s.allowed.is_empty(), "an allow_from match is not stored");
}

#[test]
fn a_stranger_gets_one_code_and_the_same_code_again() {
    let mut s = AccessState::default();
    let a = s.pairing(NONE, "telegram", "7", T0, rnd(1));
    let code = code_of_verdict(&a);
    assert!(matches!(a, Admission::NewCode { .. }));
    assert_eq!(code.len(), CODE_LEN);
    assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)));
    assert!(!code.contains(['0', 'O', '1', 'I']));
    assert_eq!(s.pairing(NONE, "telegram", "7", T0 + 10, rnd(2)), Admission::StillPending { code: code.clone() });
    assert_eq!(s.pending.len(), 1);
    assert_eq!(s.pending[0].expires_at, T0 + CODE_TTL_SECS);
}

#[test]
fn the_fourth_stranger_on_a_channel_waits_but_other_channels_do_not() {
    let mut s = AccessState::default();
    for (i, who) in ["a", "b", "c"].iter().enumerate() {
        assert!(matches!(s.pairing(NONE, "telegram", who, T0, rnd(i as u8)), Admission::NewCode { .. }));
    }
    assert_eq!(s.pairing(NONE, "telegram", "d", T0, rnd(9)), Admission::TooManyPending);
    assert!(matches!(s.pairing(NONE, "feishu", "d", T0, rnd(9)), Admission::NewCode { .. }));
    // Once the first codes expire, the channel takes strangers again.
    assert!(matches!(s.pairing(NONE, "telegram", "d", T0 + CODE_TTL_SECS, rnd(9)), Admission::NewCode { .. }));
}

#[test]
fn an_expired_code_cannot_be_approved_and_its_sender_gets_a_new_one() {
    let mut s = AccessState::default();
    let old = code_of_verdict(&s.pairing(NONE, "telegram", "7", T0, rnd(1)));
    let later = T0 + CODE_TTL_SECS;
    assert_eq!(s.approve(&old, later), Err(AccessError::UnknownCode { code: old.clone() }));
    assert!(s.allowed.is_empty());
    let new = s.pairing(NONE, "telegram", "7", later, rnd(2));
    assert!(matches!(new, Admission::NewCode { .. }));
}

#[test]
fn approve_lets_the_sender_in_and_uses_the_code_up() {
    let mut s = AccessState::default();
    let code = code_of_verdict(&s.pairing(NONE, "telegram", "7", T0, rnd(1)));
    let typed = code.to_ascii_lowercase();
    let peer = s.approve(&format!(" {}-{} ", &typed[..4], &typed[4..]), T0 + 5).unwrap();
    assert_eq!(peer, Peer { channel: "telegram".into(), sender: "7".into(), since: T0 + 5 });
    assert_eq!(s.pairing(NONE, "telegram", "7", T0 + 6, rnd(2)), Admission::Allowed);
    assert!(s.pending.is_empty());
    assert!(matches!(s.approve(&code, T0 + 7), Err(AccessError::UnknownCode { .. })));
    // Another channel's sender with the same id is still a stranger.
    assert!(matches!(s.pairing(NONE, "feishu", "7", T0, rnd(3)), Admission::NewCode { .. }));
}

#[test]
fn deny_drops_the_request_and_keeps_the_sender_quiet_for_an_hour() {
    let mut s = AccessState::default();
    let code = code_of_verdict(&s.pairing(NONE, "telegram", "7", T0, rnd(1)));
    let dropped = s.deny(&code, T0 + 60).unwrap();
    assert_eq!(dropped.sender, "7");
    assert!(s.pending.is_empty());
    assert_eq!(s.pairing(NONE, "telegram", "7", T0 + 61, rnd(2)), Admission::Denied);
    assert_eq!(s.pairing(NONE, "telegram", "7", T0 + 60 + REFUSAL_SECS - 1, rnd(2)), Admission::Denied);
    assert!(matches!(s.pairing(NONE, "telegram", "7", T0 + 60 + REFUSAL_SECS, rnd(2)), Admission::NewCode { .. }));
}

#[test]
fn revoke_makes_a_peer_a_stranger_again() {
    let mut s = AccessState::default();
    let code = code_of_verdict(&s.pairing(NONE, "telegram", "7", T0, rnd(1)));
    s.approve(&code, T0).unwrap();
    s.revoke("telegram", "7").unwrap();
    assert!(matches!(s.pairing(NONE, "telegram", "7", T0, rnd(2)), Admission::NewCode { .. }));
    assert_eq!(
        s.revoke("telegram", "7"),
        Err(AccessError::NotApproved { channel: "telegram".into(), sender: "7".into() })
    );
}

#[test]
fn malformed_codes_are_refused_with_the_rule() {
    let mut s = AccessState::default();
    for bad in ["", "ABC", "ABCDEFG0", "ABCDEFGHJ", "ABCD EFG!", "OOOOOOOO"] {
        let e = s.approve(bad, T0).unwrap_err();
        assert!(matches!(e, AccessError::MalformedCode { .. }), "{bad:?}: {e:?}");
        assert!(e.to_string().contains("no 0, O, 1 or I"), "{e}");
    }
}

#[test]
fn bad_ids_are_denied_and_never_stored() {
    let mut s = AccessState::default();
    let long = "x".repeat(MAX_ID_BYTES + 1);
    for (channel, sender) in [("telegram", ""), ("", "7"), ("telegram", long.as_str()), ("telegram", "a\nb")] {
        assert_eq!(s.pairing(&["*"], channel, sender, T0, rnd(1)), Admission::Denied);
    }
    assert_eq!(s, AccessState::default());
}

#[test]
fn the_allowed_list_is_bounded() {
    let mut s = AccessState::default();
    for i in 0..MAX_ALLOWED {
        s.allowed.push(Peer { channel: "c".into(), sender: i.to_string(), since: 0 });
    }
    let code = code_of_verdict(&s.pairing(NONE, "c", "new", T0, rnd(1)));
    assert_eq!(s.approve(&code, T0), Err(AccessError::AllowedFull));
    assert_eq!(s.pending.len(), 1, "a refused approval keeps the request");
    s.revoke("c", "0").unwrap();
    s.approve(&code, T0).unwrap();
    assert_eq!(s.allowed.len(), MAX_ALLOWED);
}

#[test]
fn refusals_are_bounded_and_forget_the_oldest() {
    let mut s = AccessState::default();
    for i in 0..(MAX_REFUSED + 5) as u64 {
        let code = code_of_verdict(&s.pairing(NONE, "c", &i.to_string(), T0 + i, rnd(i as u8)));
        s.deny(&code, T0 + i).unwrap();
    }
    assert_eq!(s.refused.len(), MAX_REFUSED);
    assert!(!s.refused.iter().any(|r| r.sender == "0"), "the oldest refusal went first");
    s.validate().unwrap();
}

#[test]
fn validate_refuses_states_that_break_a_bound() {
    let mut s = AccessState::default();
    s.pending.push(PendingCode { channel: "c".into(), sender: "s".into(), code: "ABCDEFGH".into(), expires_at: 1 });
    s.validate().unwrap();
    s.pending.push(PendingCode { channel: "c".into(), sender: "t".into(), code: "ABCDEFGH".into(), expires_at: 1 });
    assert!(s.validate().unwrap_err().to_string().contains("appears twice"));
    s.pending.pop();
    s.pending[0].code = "abcdefgh".into();
    assert!(s.validate().unwrap_err().to_string().contains("malformed"));
    let peer = Peer { channel: "c".into(), sender: "s".into(), since: 0 };
    let s = AccessState { allowed: vec![peer; MAX_ALLOWED + 1], ..AccessState::default() };
    assert!(s.validate().unwrap_err().to_string().contains("more than the 512"));
}

#[test]
fn a_flood_is_answered_once_then_silenced_until_the_bucket_refills() {
    let mut r = RateLimiter::default();
    for i in 0..30 {
        assert_eq!(r.limit(Admission::Allowed, 30, "t", "7", T0), Admission::Allowed, "message {i}");
    }
    assert_eq!(r.limit(Admission::Allowed, 30, "t", "7", T0), Admission::RateLimited { retry_after_secs: 120 });
    for _ in 0..100 {
        assert_eq!(r.limit(Admission::Allowed, 30, "t", "7", T0 + 60), Admission::Silent);
    }
    // Another sender is not affected.
    assert_eq!(r.limit(Admission::Allowed, 30, "t", "8", T0), Admission::Allowed);
    // One message more once its interval has passed, then told again.
    assert_eq!(r.limit(Admission::Allowed, 30, "t", "7", T0 + 120), Admission::Allowed);
    assert_eq!(r.limit(Admission::Allowed, 30, "t", "7", T0 + 120), Admission::RateLimited { retry_after_secs: 120 });
    // Zero turns it off.
    for _ in 0..1000 {
        assert_eq!(r.limit(Admission::Allowed, 0, "t", "9", T0), Admission::Allowed);
    }
}

#[test]
fn denied_is_not_counted_and_a_new_code_is_always_delivered() {
    let mut r = RateLimiter::default();
    for _ in 0..10 {
        assert_eq!(r.limit(Admission::Denied, 1, "t", "7", T0), Admission::Denied);
    }
    assert_eq!(r.tracked(), 0);
    assert_eq!(r.limit(Admission::Allowed, 1, "t", "7", T0), Admission::Allowed);
    let code = Admission::NewCode { code: "ABCDEFGH".into() };
    assert_eq!(r.limit(code.clone(), 1, "t", "7", T0), code);
}

#[test]
fn the_tracker_is_bounded() {
    let mut r = RateLimiter::default();
    for i in 0..(MAX_TRACKED * 3) {
        r.limit(Admission::Allowed, 30, "t", &i.to_string(), T0);
        assert!(r.tracked() <= MAX_TRACKED);
    }
    assert_eq!(r.tracked(), MAX_TRACKED);
}

#[test]
fn every_verdict_that_speaks_has_a_sentence() {
    let code = "7KQ4MXT2".to_string();
    let text = Admission::NewCode { code: code.clone() }.reply_text().unwrap();
    assert!(text.contains(&code) && text.contains("chela pairing approve 7KQ4MXT2") && text.contains("owner"));
    assert!(Admission::StillPending { code: code.clone() }.reply_text().unwrap().contains(&code));
    assert!(Admission::TooManyPending.reply_text().unwrap().contains("try again"));
    let slow = Admission::RateLimited { retry_after_secs: 120 }.reply_text().unwrap();
    assert!(slow.contains("2 minutes"), "{slow}");
    assert!(Admission::RateLimited { retry_after_secs: 5 }.reply_text().unwrap().contains("5 seconds"));
    for silent in [Admission::Allowed, Admission::Silent, Admission::Denied] {
        assert_eq!(silent.reply_text(), None);
    }
    assert!(Admission::Allowed.admits() && !Admission::TooManyPending.admits());
}

#[test]
fn the_state_round_trips_through_json() {
    let mut s = AccessState::default();
    let code = code_of_verdict(&s.pairing(NONE, "telegram", "7", T0, rnd(1)));
    s.approve(&code, T0).unwrap();
    s.pairing(NONE, "telegram", "8", T0, rnd(2));
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(serde_json::from_str::<AccessState>(&json).unwrap(), s);
    assert_eq!(serde_json::from_str::<AccessState>("{}").unwrap(), AccessState::default());
}

#[test]
fn chela_writes_to_listed_chats_an_approved_persons_own_chat_and_chats_where_they_talked() {
    let mut s = AccessState::default();
    // Listed ids are private chats; `*` lets anyone talk but opens no chat for writing.
    assert!(s.may_send(&["42"], "telegram", "42"));
    assert!(!s.may_send(&["*"], "telegram", "-100"));
    let code = code_of_verdict(&s.pairing(NONE, "telegram", "7", T0, rnd(1)));
    assert!(!s.may_send(NONE, "telegram", "7"), "a pending sender's chat is closed");
    s.approve(&code, T0).unwrap();
    assert!(s.may_send(NONE, "telegram", "7"), "an approved person's private chat");
    assert!(!s.may_send(NONE, "feishu", "7"), "on its own channel only");
    assert!(!s.may_send(NONE, "telegram", "-100"));
    assert!(s.note_chat("telegram", "-100", "7", T0));
    assert!(!s.note_chat("telegram", "-100", "7", T0 + 1), "known already: nothing to persist");
    assert!(!s.note_chat("telegram", "7", "7", T0), "a private chat needs no link");
    assert!(s.may_send(NONE, "telegram", "-100"));
    // A sender let in by `*` opens the chats they talk in, while `*` stays.
    assert!(s.note_chat("telegram", "-200", "anyone", T0));
    assert!(s.may_send(&["*"], "telegram", "-200") && !s.may_send(NONE, "telegram", "-200"));
    // Revoked: their private chat and every chat they opened close at once.
    s.revoke("telegram", "7").unwrap();
    assert!(!s.may_send(NONE, "telegram", "7"));
    assert!(!s.may_send(NONE, "telegram", "-100"));
    assert!(s.chats.iter().all(|l| l.sender != "7"), "{:?}", s.chats);
    for (channel, chat) in [("", "1"), ("telegram", ""), ("telegram", "a\nb")] {
        assert!(!s.may_send(&[chat], channel, chat), "{channel:?} {chat:?}");
        assert!(!s.note_chat(channel, chat, "x", T0));
    }
}

#[test]
fn a_link_counts_only_while_its_sender_may_talk_and_the_links_are_bounded() {
    let mut s = AccessState::default();
    // Stored before allow_from changed: the link stays but no longer counts.
    assert!(s.note_chat("feishu", "oc_1", "ou_1", T0));
    assert!(s.may_send(&["ou_1"], "feishu", "oc_1"));
    assert!(!s.may_send(&["ou_2"], "feishu", "oc_1"));
    for i in 0..MAX_CHATS + 10 {
        s.note_chat("feishu", &format!("oc_{i}x"), "ou_1", T0 + 1 + i as u64);
        assert!(s.chats.len() <= MAX_CHATS);
    }
    assert_eq!(s.chats.len(), MAX_CHATS);
    assert!(!s.chats.iter().any(|l| l.chat == "oc_1"), "the oldest went first");
    assert!(s.chats.iter().any(|l| l.chat == format!("oc_{}x", MAX_CHATS + 9)));
    s.validate().unwrap();
    s.chats.push(ChatLink { channel: "feishu".into(), chat: "oc".into(), sender: "ou".into(), since: 0 });
    assert!(s.validate().unwrap_err().to_string().contains("chats"));
    s.chats.clear();
    s.chats.push(ChatLink {
        channel: "feishu".into(),
        chat: "x".repeat(MAX_ID_BYTES + 1),
        sender: "ou".into(),
        since: 0,
    });
    assert!(s.validate().unwrap_err().to_string().contains("bad id"));
    let json = serde_json::to_string(&AccessState::default()).unwrap();
    assert!(!json.contains("chats"), "an old reader sees the same file: {json}");
}

/// One step of the property test: a message or an owner's action.
#[derive(Clone, Debug)]
enum Op {
    Message { channel: u8, sender: u8, random: [u8; CODE_LEN] },
    Approve { pick: usize, guess: Option<[u8; CODE_LEN]> },
    Deny { pick: usize },
    Revoke { pick: usize },
    Wait { secs: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, 0u8..12, any::<[u8; CODE_LEN]>())
            .prop_map(|(channel, sender, random)| Op::Message { channel, sender, random }),
        2 => (any::<usize>(), proptest::option::of(any::<[u8; CODE_LEN]>()))
            .prop_map(|(pick, guess)| Op::Approve { pick, guess }),
        1 => any::<usize>().prop_map(|pick| Op::Deny { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Revoke { pick }),
        1 => (0u64..2 * CODE_TTL_SECS).prop_map(|secs| Op::Wait { secs }),
    ]
}

proptest! {
    /// Whatever strangers send and the owner does: codes are unique and well-formed, no
    /// channel has more than 3 live codes, a code is never older than its hour, a denied
    /// sender is never offered a new code within its hour, and only approve (of a live code)
    /// adds anyone to the allowed list.
    #[test]
    fn pairing_invariants(ops in proptest::collection::vec(op(), 1..120)) {
        let channels = ["telegram", "feishu", "ws"];
        let mut s = AccessState::default();
        let mut now = T0;
        for op in ops {
            let before = s.clone();
            match op {
                Op::Message { channel, sender, random } => {
                    let (ch, who) = (channels[usize::from(channel)], sender.to_string());
                    let a = s.pairing(NONE, ch, &who, now, random);
                    let refused = before.refused.iter().any(|r| r.channel == ch && r.sender == who && r.until > now);
                    let approved = before.allowed.iter().any(|p| p.channel == ch && p.sender == who);
                    match &a {
                        Admission::Allowed => prop_assert!(approved),
                        Admission::Denied => prop_assert!(refused),
                        Admission::NewCode { code } => {
                            prop_assert!(!refused && !approved);
                            prop_assert!(!before.pending.iter().any(|p| &p.code == code && p.expires_at > now));
                        }
                        Admission::StillPending { code } => {
                            prop_assert!(before.pending.iter().any(|p| &p.code == code && p.sender == who && p.expires_at > now));
                        }
                        Admission::TooManyPending => {
                            let live = before.pending.iter().filter(|p| p.channel == ch && p.expires_at > now).count();
                            prop_assert_eq!(live, MAX_PENDING_PER_CHANNEL);
                        }
                        other => prop_assert!(false, "pairing never rate-limits: {:?}", other),
                    }
                    prop_assert_eq!(&s.allowed, &before.allowed, "a message never approves anyone");
                }
                Op::Approve { pick, guess } => {
                    let code = match guess {
                        Some(bytes) => code_of(bytes, 0),
                        None if !s.pending.is_empty() => s.pending[pick % s.pending.len()].code.clone(),
                        None => continue,
                    };
                    let live = before.pending.iter().find(|p| p.code == code && p.expires_at > now).cloned();
                    match s.approve(&code, now) {
                        Ok(peer) => {
                            let p = live.expect("approved a code that was not live");
                            prop_assert_eq!((&peer.channel, &peer.sender), (&p.channel, &p.sender));
                            prop_assert!(s.is_allowed(NONE, &p.channel, &p.sender));
                            prop_assert!(!s.pending.iter().any(|q| q.code == code));
                        }
                        Err(_) => {
                            prop_assert!(live.is_none());
                            prop_assert_eq!(&s.allowed, &before.allowed);
                        }
                    }
                }
                Op::Deny { pick } => {
                    if s.pending.is_empty() { continue; }
                    let code = s.pending[pick % s.pending.len()].code.clone();
                    if let Ok(p) = s.deny(&code, now) {
                        prop_assert_eq!(s.pairing(NONE, &p.channel, &p.sender, now, [0; CODE_LEN]), Admission::Denied);
                        prop_assert_eq!(&s.allowed, &before.allowed);
                    }
                }
                Op::Revoke { pick } => {
                    if s.allowed.is_empty() { continue; }
                    let p = s.allowed[pick % s.allowed.len()].clone();
                    s.revoke(&p.channel, &p.sender).unwrap();
                    prop_assert!(!s.is_allowed(NONE, &p.channel, &p.sender));
                    prop_assert_eq!(s.allowed.len(), before.allowed.len() - 1);
                }
                Op::Wait { secs } => now += secs,
            }
            // Invariants of every state.
            s.validate().map_err(|e| TestCaseError::fail(e.to_string()))?;
            for ch in channels {
                let live = s.pending.iter().filter(|p| p.channel == ch && p.expires_at > now).count();
                prop_assert!(live <= MAX_PENDING_PER_CHANNEL);
            }
            for p in &s.pending {
                prop_assert!(p.expires_at <= now + CODE_TTL_SECS);
                prop_assert!(!s.allowed.iter().any(|a| a.channel == p.channel && a.sender == p.sender) || p.expires_at <= now);
            }
        }
    }

    /// Candidates for one random draw are all different, so a free code is always found.
    #[test]
    fn code_candidates_differ(random in any::<[u8; CODE_LEN]>()) {
        let codes: alloc::collections::BTreeSet<String> = (0..=MAX_PENDING).map(|a| code_of(random, a)).collect();
        prop_assert_eq!(codes.len(), MAX_PENDING + 1);
    }

    /// However the messages are spread over time, no sender gets more than `per_hour` messages
    /// in, plus one per interval that passed, and the limiter never tracks too many senders.
    #[test]
    fn the_rate_limit_holds(per_hour in 1u32..100, gaps in proptest::collection::vec(0u64..400, 1..300)) {
        let mut r = RateLimiter::default();
        let mut now = T0;
        let mut admitted = 0u64;
        for gap in &gaps {
            now += gap;
            if r.limit(Admission::Allowed, per_hour, "t", "7", now) == Admission::Allowed {
                admitted += 1;
            }
        }
        let interval = 3600 / u64::from(per_hour);
        let bound = u64::from(per_hour) + (now - T0) / interval.max(1) + 1;
        prop_assert!(admitted <= bound, "{} admitted, bound {}", admitted, bound);
    }
}
