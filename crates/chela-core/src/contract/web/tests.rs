use super::*;

#[test]
fn encoding() {
    assert_eq!(percent_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    assert_eq!(strip_tags("<b>x</b> &lt;y&gt;"), "x <y>");
    assert_eq!(brave_path("a b", 3), "/res/v1/web/search?q=a%20b&count=3");
    assert_eq!(tavily_body("q\"", 5), r#"{"query":"q\"","max_results":5,"search_depth":"basic"}"#);
}

#[test]
fn answers_are_read_trimmed_and_bounded() {
    let body = br#"{"results":[{"title":"A","url":"u1","content":"one\n two","score":0.9},{"title":"B","url":"u2","content":"xxxxxxxxxx"},{"title":"C"}]}"#;
    let hits = parse_tavily(body, 2, 4).unwrap();
    assert_eq!(hits.len(), 2);
    // Cut at 4 bytes of the one-line text, whitespace and all, as the host always did.
    assert_eq!(hits[0].snippet, "one …");
    assert_eq!(hits[1].snippet, "xxxx…");
    let brave = br#"{"web":{"results":[{"title":"<b>T</b>","url":"u","description":"a &amp; b"}]}}"#;
    assert_eq!(
        parse_brave(brave, 5, 100).unwrap(),
        [Hit { title: "T".into(), url: "u".into(), snippet: "a & b".into() }]
    );
    assert!(parse_brave(b"{}", 5, 100).unwrap().is_empty());
    assert!(parse_tavily(b"<html>", 5, 100).unwrap_err().contains("unreadable"));
    let text = render(&hits, 1000);
    assert_eq!(text, "1. A\n   u1\n   one …\n2. B\n   u2\n   xxxx…");
    // Cut at whole hits; a first hit longer than the budget is cut inside.
    assert_eq!(render(&hits, 21), "1. A\n   u1\n   one …");
    assert_eq!(render(&hits, 6), "1. A\n ");
    assert!(status_error("Tavily", 432, b"").contains("quota"));
}
