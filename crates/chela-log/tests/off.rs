//! What a call site costs when nothing takes its level: only the check. In a test binary of its
//! own, because the check is process-wide and the unit tests capture at every level.

use chela_log::Level;

#[test]
fn arguments_are_evaluated_only_when_something_takes_the_level() {
    let mut evaluated = Vec::new();
    let mut note = |what: &'static str| {
        evaluated.push(what);
        what
    };
    // Before `init` nothing takes anything.
    chela_log::error!(what = note("before init"), "{}", note("before init"));
    assert!(!chela_log::enabled(Level::Error));

    let lines = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = lines.clone();
    assert!(chela_log::init(Level::Warn, move |l| sink.lock().unwrap().push_str(l)));
    chela_log::info!(what = note("info"), "{}", note("info"));
    chela_log::warn!(what = %note("warn"), "{}", note("warn"));
    assert_eq!(evaluated, ["warn", "warn"]);
    assert_eq!(*lines.lock().unwrap(), " WARN warn what=warn\n");

    // The first `init` stays.
    assert!(!chela_log::init(Level::Trace, |_| panic!("a second sink")));
    chela_log::debug!("still below warnings");
    assert!(!chela_log::enabled(Level::Info));
    assert_eq!(*lines.lock().unwrap(), " WARN warn what=warn\n");
}
