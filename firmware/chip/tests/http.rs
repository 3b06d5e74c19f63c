//! The chip's HTTP/1.1 client parsing (src/http.rs): the request head, the response head's
//! status, framing and headers, and the chunked decoder over any split of its input, with the
//! malformed and oversized cases a hostile peer would send.

use chela_chip::http::{Chunked, Framing, HttpError, head_len, header, parse_head, request_head};
use proptest::prelude::*;

fn decode(pieces: &[&[u8]]) -> Result<(Vec<u8>, bool), HttpError> {
    let mut c = Chunked::new();
    let mut out = Vec::new();
    for piece in pieces {
        let mut rest = *piece;
        while let Some(data) = c.next(&mut rest)? {
            out.extend_from_slice(data);
        }
    }
    Ok((out, c.done()))
}

#[test]
fn the_request_head_names_host_length_and_headers() {
    let head = request_head("POST", "api.example.com", "/v1/messages", &[("content-type", "application/json")], 12);
    assert_eq!(
        head,
        "POST /v1/messages HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 12\r\ncontent-type: application/json\r\n\r\n"
    );
}

#[test]
fn a_response_head_gives_its_status_framing_and_headers() {
    let head =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nRetry-After:  7 \r\nContent-Length: 42\r\n\r\nbody";
    let len = head_len(head).unwrap();
    assert_eq!(&head[len..], b"body");
    let head = &head[..len];
    assert_eq!(parse_head(head), Ok((200, Framing::Length(42))));
    assert_eq!(header(head, "content-type"), Some("text/event-stream"));
    assert_eq!(header(head, "RETRY-AFTER"), Some("7"));
    assert_eq!(header(head, "date"), None);
    assert_eq!(head_len(b"HTTP/1.1 200 OK\r\nA: b\r\n"), None, "not all there yet");
    assert_eq!(head_len(b"HTTP/1.1 200 OK\nA: b\n\nx"), Some(22), "bare line feeds");
}

#[test]
fn framing_follows_rfc_9112() {
    let f = |h: &str| parse_head(h.as_bytes());
    assert_eq!(
        f("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
        Ok((200, Framing::Chunked))
    );
    assert_eq!(f("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\n\r\n"), Ok((200, Framing::Chunked)));
    assert_eq!(f("HTTP/1.0 200 OK\r\n\r\n"), Ok((200, Framing::ToEnd)));
    assert_eq!(f("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n"), Ok((204, Framing::Length(0))));
    assert_eq!(f("HTTP/1.1 429\r\nContent-Length: 0\r\n\r\n"), Ok((429, Framing::Length(0))));
    for bad in [
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/2 200\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "SSH-2.0-OpenSSH\r\n\r\n",
        "",
    ] {
        assert!(f(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_chunked_body_is_decoded_with_extensions_and_trailers() {
    let body = b"4;name=value\r\nWiki\r\n5 \r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nNEXT";
    assert_eq!(decode(&[body]).unwrap(), (b"Wikipedia in\r\n\r\nchunks.".to_vec(), true));
    assert_eq!(decode(&[b"3\nabc\n0\n\n"]).unwrap(), (b"abc".to_vec(), true), "bare line feeds");
    assert_eq!(decode(&[b"3\r\nabc\r\n"]).unwrap(), (b"abc".to_vec(), false), "not done before the last chunk");
}

#[test]
fn malformed_or_oversized_chunks_are_refused() {
    for bad in [
        &b"x\r\n"[..],
        b"\r\n",
        b"3\r\nabcd\r\n",
        b"1000000000000000\r\n",
        &[b"1;".as_slice(), &[b'e'; 300]].concat(),
        &[b"0\r\n".as_slice(), &b"X: y\r\n".repeat(200)].concat(),
    ] {
        assert!(decode(&[bad]).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
}

fn encode(body: &[u8], sizes: &[usize], upper: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut sizes = sizes.iter().cycle();
    while at < body.len() {
        let n = (*sizes.next().unwrap()).clamp(1, body.len() - at);
        let size = if upper { format!("{n:X}") } else { format!("{n:x}") };
        out.extend_from_slice(size.as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&body[at..at + n]);
        out.extend_from_slice(b"\r\n");
        at += n;
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_chunking_split_anywhere_decodes_to_the_body(
        body in proptest::collection::vec(any::<u8>(), 0..3000),
        sizes in proptest::collection::vec(1usize..700, 1..6),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        upper in any::<bool>(),
    ) {
        let wire = encode(&body, &sizes, upper);
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut at = 0;
        for c in cuts.into_iter().chain([wire.len()]) {
            pieces.push(&wire[at..c]);
            at = c;
        }
        prop_assert_eq!(decode(&pieces).unwrap(), (body, true));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode(&[&bytes]);
        let _ = parse_head(&bytes);
        let _ = header(&bytes, "content-type");
        let _ = head_len(&bytes);
    }
}
