use super::command;

#[test]
fn commands_are_recognised_with_and_without_the_bot_name() {
    assert_eq!(command("/start").as_deref(), Some("start"));
    assert_eq!(command("/New@chela_bot now").as_deref(), Some("new"));
    assert_eq!(command("hello /new"), None);
    assert_eq!(command("/"), None);
}
