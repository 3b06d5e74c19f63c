//! Delivery, once for every channel: per-chat order, other chats not held up, and the flush
//! at a graceful stop, through a recording outlet and the scripted fake LLM over 127.0.0.1.

use std::sync::Mutex;
use std::time::Duration;

use chela_testkit::{FakeLlm, Step};
use tokio::sync::{Notify, oneshot};

use super::tests::{Quiet, message, refs, with_llm, workspace};
use super::*;

/// A send kept back: its text, the signal that it began, and the test's release.
type Held = (String, oneshot::Sender<()>, oneshot::Receiver<()>);

/// Records what it sends, by chat; the text named in `hold` waits for the test's release.
#[derive(Default)]
struct Recording {
    sent: Mutex<Vec<(String, String)>>,
    changed: Notify,
    hold: Mutex<Option<Held>>,
}

impl Recording {
    /// Holds the sending of `text`: the first receiver fires when its send began; sending on
    /// the returned sender lets it finish.
    fn hold(&self, text: &str) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (began, on_begin) = oneshot::channel();
        let (release, released) = oneshot::channel();
        *self.hold.lock().unwrap() = Some((text.to_owned(), began, released));
        (on_begin, release)
    }

    fn sent(&self) -> Vec<(String, String)> {
        self.sent.lock().unwrap().clone()
    }

    async fn until_sent(&self, text: &str) {
        while !self.sent().iter().any(|(_, t)| t == text) {
            self.changed.notified().await;
        }
    }
}

impl Outlet for Recording {
    fn channel(&self) -> &str {
        "ws"
    }

    fn send_text<'a>(&'a self, chat_id: &'a str, text: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let held = {
                let mut hold = self.hold.lock().unwrap();
                if hold.as_ref().is_some_and(|(t, _, _)| t == text) { hold.take() } else { None }
            };
            if let Some((_, began, released)) = held {
                let _ = began.send(());
                let _ = released.await;
            }
            self.sent.lock().unwrap().push((chat_id.to_owned(), text.to_owned()));
            self.changed.notify_one();
            Ok(())
        })
    }

    fn send_file<'a>(&'a self, _: &'a str, _: &'a std::path::Path, _: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Err("no files here".to_owned()) })
    }
}

fn to(outlet: &Arc<Recording>, chat_id: &str) -> Box<dyn Reply> {
    Box::new(OutletReply { outlet: Arc::clone(outlet) as Arc<dyn Outlet>, chat_id: chat_id.to_owned() })
}

const IN_TIME: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_chats_answers_go_out_in_order_while_other_chats_go_on() {
    let llm = FakeLlm::start(vec![Step::text("first answer"), Step::text("second answer")]);
    let dir = tempfile::tempdir().unwrap();
    let d = Arc::new(Daemon::load(workspace(&dir, &refs(&with_llm(&llm)))).unwrap());
    let outlet = Arc::new(Recording::default());
    let (began, release) = outlet.hold("first answer");

    d.converse(message("ws", "owner", "question"), Box::new(Quiet), to(&outlet, "owner-chat"));
    d.converse(message("ws", "owner", "another"), Box::new(Quiet), to(&outlet, "owner-chat"));
    tokio::time::timeout(IN_TIME, began).await.expect("the first answer is being sent").unwrap();
    // The second turn ends while the first answer is held up; then an answer of the channel's
    // own in the same chat, and one in another chat.
    tokio::time::timeout(IN_TIME, d.hub().drained()).await.expect("both turns ended");
    d.say("ws", "owner-chat", "said".to_owned(), to(&outlet, "owner-chat"));
    d.say("ws", "elsewhere", "other chat".to_owned(), to(&outlet, "elsewhere"));
    tokio::time::timeout(IN_TIME, outlet.until_sent("other chat")).await.expect("another chat is not held up");
    assert_eq!(outlet.sent(), [("elsewhere".to_owned(), "other chat".to_owned())], "the chat waits for its first");

    release.send(()).unwrap();
    tokio::time::timeout(IN_TIME, d.flush()).await.expect("flushed");
    let owner: Vec<String> = outlet.sent().into_iter().filter(|(c, _)| c == "owner-chat").map(|(_, t)| t).collect();
    assert_eq!(owner, ["first answer", "second answer", "said"]);
    assert_eq!(d.deliveries_in_flight(), 0);
}

#[tokio::test]
async fn a_graceful_stop_delivers_the_answer_of_a_turn_in_flight_and_the_refusal_after_it() {
    let llm = FakeLlm::start(vec![Step::text("late but whole")]);
    llm.hold();
    let dir = tempfile::tempdir().unwrap();
    let d = Arc::new(Daemon::load(workspace(&dir, &refs(&with_llm(&llm)))).unwrap());
    let outlet = Arc::new(Recording::default());

    d.converse(message("ws", "owner", "slow question"), Box::new(Quiet), to(&outlet, "owner-chat"));
    d.shutdown().trigger();
    d.converse(message("ws", "owner", "one more"), Box::new(Quiet), to(&outlet, "owner-chat"));
    assert_eq!(d.deliveries_in_flight(), 2);
    // The flush waits for the turn, which waits for the model: neither is done yet.
    let flushed = async {
        tokio::time::timeout(IN_TIME, d.flush()).await.expect("flushed in time");
        outlet.sent()
    };
    let (sent, ()) = tokio::join!(flushed, async { llm.release() });
    let texts: Vec<&str> = sent.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(texts[0], "late but whole");
    assert!(texts[1].contains("stopping"), "{texts:?}");
    assert_eq!(d.deliveries_in_flight(), 0);
    tokio::time::timeout(IN_TIME, d.hub().drained()).await.expect("no turn is left running");
}

#[tokio::test]
async fn an_answer_is_not_sent_to_a_sender_revoked_while_the_model_worked() {
    let llm = FakeLlm::start(vec![Step::text("for friends only")]);
    llm.hold();
    let dir = tempfile::tempdir().unwrap();
    let mut settings = with_llm(&llm);
    settings.push(("channels.telegram.allow_from", "42".to_owned()));
    let ws = workspace(&dir, &refs(&settings));
    let d = Arc::new(Daemon::load(ws.clone()).unwrap());
    let outlet = Arc::new(Recording::default());

    d.converse(message("telegram", "42", "hello"), Box::new(Quiet), to(&outlet, "42-chat"));
    crate::config::set_override(&ws, "channels.telegram.allow_from", "").unwrap();
    assert!(d.reload().unwrap());
    llm.release();
    tokio::time::timeout(IN_TIME, d.flush()).await.expect("flushed");
    assert_eq!(llm.requests().len(), 1, "the turn ran");
    assert!(outlet.sent().is_empty(), "{:?}", outlet.sent());
}
