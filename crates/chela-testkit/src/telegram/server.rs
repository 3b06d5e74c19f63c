//! The fake Bot API's HTTP side: routing, parameter decoding (query, JSON, urlencoded and
//! multipart forms) and the methods.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::{
    Call, Hostile, MAX_CAPTION_UNITS, MAX_DOWNLOAD_BYTES, MAX_RECORDED, MAX_TEXT_UNITS, Sent, Shared, State, bot_user,
    chat, html, lock, unix_now,
};
use crate::body::ReplyBody;

/// Largest request body (uploads included).
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Telegram caps a long poll's `timeout` at 50 s.
const MAX_POLL: Duration = Duration::from_secs(50);

pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>, stop: oneshot::Receiver<()>) {
    crate::accept::serve_http1(listener, stop, move |req| handle(req, Arc::clone(&shared)), || ()).await;
}

fn reply(status: u16, body: &Value) -> Response<ReplyBody> {
    let mut resp = Response::new(ReplyBody::full(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn ok(result: Value) -> Response<ReplyBody> {
    reply(200, &json!({"ok": true, "result": result}))
}

fn fail(code: u16, description: &str) -> Response<ReplyBody> {
    reply(code, &json!({"ok": false, "error_code": code, "description": description}))
}

fn bad(description: &str) -> Response<ReplyBody> {
    fail(400, &format!("Bad Request: {description}"))
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<ReplyBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        return Ok(download(&shared, rest));
    }
    let Some((token, method)) = path.strip_prefix("/bot").and_then(|r| r.split_once('/')) else {
        return Ok(fail(404, "Not Found"));
    };
    if token != shared.token {
        return Ok(fail(401, "Unauthorized"));
    }
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let bytes = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(fail(413, "Request Entity Too Large")),
    };
    let mut params = Map::new();
    let mut files: Vec<(String, String, Vec<u8>)> = Vec::new();
    if let Some(q) = parts.uri.query() {
        form_into(q, &mut params);
    }
    let mime = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match mime.as_str() {
        "application/json" if !bytes.is_empty() => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(m)) => params.extend(m),
            _ => return Ok(bad("can't parse request JSON object")),
        },
        "application/x-www-form-urlencoded" => form_into(&String::from_utf8_lossy(&bytes), &mut params),
        "multipart/form-data" => {
            let Some(boundary) = content_type.split(';').find_map(|p| p.trim().strip_prefix("boundary=")) else {
                return Ok(bad("multipart boundary is missing"));
            };
            for (name, file_name, data) in multipart(&bytes, boundary.trim_matches('"')) {
                match file_name {
                    Some(file_name) => {
                        params.insert(name.clone(), json!({"file_name": file_name, "bytes": data.len()}));
                        files.push((name, file_name, data));
                    }
                    None => {
                        params.insert(name, Value::String(String::from_utf8_lossy(&data).into_owned()));
                    }
                }
            }
        }
        _ => {}
    }
    let params = Value::Object(params);
    record_call(&shared, Call { method: method.to_string(), params: params.clone(), at: Instant::now() });
    let method = method.to_ascii_lowercase();
    let sends = ["sendmessage", "editmessagetext", "sendphoto", "senddocument"];
    if sends.contains(&method.as_str()) {
        let mut st = lock(&shared.state);
        if st.limited > 0 {
            st.limited -= 1;
            let n = st.retry_after;
            return Ok(reply(
                429,
                &json!({"ok": false, "error_code": 429, "description": format!("Too Many Requests: retry after {n}"),
                    "parameters": {"retry_after": n}}),
            ));
        }
    }
    Ok(match method.as_str() {
        "getme" => ok(bot_user()),
        "getupdates" => get_updates(&shared, &params).await,
        "getfile" => get_file(&shared, &params),
        "sendchataction" => match (chat_id(&params), params["action"].as_str()) {
            (Some(_), Some(_)) => ok(json!(true)),
            (None, _) => bad("chat_id is empty"),
            (_, None) => bad("action is empty"),
        },
        "sendmessage" | "editmessagetext" => send_text(&shared, &method, &params),
        "sendphoto" | "senddocument" => send_file(&shared, &method, &params, files),
        _ => fail(404, "Not Found"),
    })
}

fn record_call(shared: &Shared, call: Call) {
    let mut st = lock(&shared.state);
    if st.calls.len() >= MAX_RECORDED {
        st.calls.pop_front();
    }
    st.calls.push_back(call);
    drop(st);
    shared.changed.notify_all();
}

fn chat_id(params: &Value) -> Option<i64> {
    match &params["chat_id"] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn int(params: &Value, name: &str) -> Option<i64> {
    match &params[name] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

async fn get_updates(shared: &Shared, params: &Value) -> Response<ReplyBody> {
    let offset = int(params, "offset").unwrap_or(0);
    let limit = int(params, "limit").unwrap_or(100).clamp(1, 100) as usize;
    let timeout = Duration::from_secs(int(params, "timeout").unwrap_or(0).max(0) as u64).min(MAX_POLL);
    let deadline = tokio::time::Instant::now() + timeout;
    let generation = {
        let mut st = lock(&shared.state);
        st.poll_generation += 1;
        st.poll_generation
    };
    // A newer poll supersedes this one if it is still waiting (see below).
    shared.updates.notify_waiters();
    loop {
        let wake = shared.updates.notified();
        {
            let mut st = lock(&shared.state);
            // A poll already waiting takes a hostile answer queued meanwhile, too.
            if let Some(h) = st.hostile.pop_front() {
                return hostile(&mut st, h);
            }
            if st.poll_generation != generation {
                return fail(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                );
            }
            if offset > st.confirmed {
                st.confirmed = offset;
                st.updates.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            }
            let ready: Vec<Value> = st
                .updates
                .iter()
                .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                .take(limit)
                .cloned()
                .collect();
            drop(st);
            shared.changed.notify_all();
            if !ready.is_empty() || tokio::time::Instant::now() >= deadline {
                return ok(Value::Array(ready));
            }
        }
        if tokio::time::timeout_at(deadline, wake).await.is_err() {
            return ok(json!([]));
        }
    }
}

fn hostile(st: &mut State, how: Hostile) -> Response<ReplyBody> {
    let mut resp = match how {
        Hostile::Garbage => {
            Response::new(ReplyBody::full(&b"{\"ok\":true,\"result\":[{\"update_id\":\xff\xfe <html>"[..]))
        }
        Hostile::Endless => {
            Response::new(ReplyBody::lazy(std::iter::repeat_with(|| Bytes::from_static(&[b' '; 4096])), 0))
        }
        Hostile::Huge(n) => {
            let id = st.next_update_id;
            st.next_update_id += 1;
            let text = "x".repeat(n);
            let update = json!({"update_id": id, "message": {"message_id": 1, "chat": chat(1), "date": unix_now(), "text": text}});
            Response::new(ReplyBody::full(json!({"ok": true, "result": [update]}).to_string()))
        }
    };
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn get_file(shared: &Shared, params: &Value) -> Response<ReplyBody> {
    let Some(file_id) = params["file_id"].as_str() else { return bad("file_id is empty") };
    let st = lock(&shared.state);
    let Some((path, bytes)) = st.files.get(file_id) else { return bad("invalid file_id") };
    if bytes.len() > MAX_DOWNLOAD_BYTES {
        return bad("file is too big");
    }
    let unique = format!("AgAD{}", &file_id[file_id.len().saturating_sub(6)..]);
    ok(json!({"file_id": file_id, "file_unique_id": unique, "file_size": bytes.len(), "file_path": path}))
}

fn download(shared: &Shared, rest: &str) -> Response<ReplyBody> {
    let Some((token, path)) = rest.split_once('/') else { return fail(404, "Not Found") };
    if token != shared.token {
        return fail(401, "Unauthorized");
    }
    let st = lock(&shared.state);
    match st.files.values().find(|(p, _)| p == path) {
        Some((_, bytes)) => {
            let mut resp = Response::new(ReplyBody::full(bytes.clone()));
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            resp
        }
        None => fail(404, "Not Found"),
    }
}

/// Parses `text` by `parse_mode` as Telegram would; the error is the whole description.
fn parse_text(text: &str, parse_mode: Option<&str>) -> Result<html::Parsed, String> {
    match parse_mode.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => Ok(html::Parsed { text: text.to_string(), entities: Vec::new() }),
        Some("html") => html::parse(text).map_err(|e| format!("Bad Request: can't parse entities: {e}")),
        Some(_) => Err("Bad Request: unsupported parse_mode".into()),
    }
}

fn units(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

fn send_text(shared: &Shared, method: &str, params: &Value) -> Response<ReplyBody> {
    let Some(chat_id) = chat_id(params) else { return bad("chat_id is empty") };
    let raw = params["text"].as_str().unwrap_or("");
    let parse_mode = params["parse_mode"].as_str();
    if parse_mode.is_some_and(|m| m.eq_ignore_ascii_case("html")) {
        let mut st = lock(&shared.state);
        if st.refuse_html > 0 {
            st.refuse_html -= 1;
            return bad("can't parse entities: Can't find end tag corresponding to start tag \"b\"");
        }
    }
    let parsed = match parse_text(raw, parse_mode) {
        Ok(p) => p,
        Err(e) => return fail(400, &e),
    };
    // Telegram trims what it shows; an all-blank message is refused.
    let shown = parsed.text.trim();
    if shown.is_empty() {
        return bad("message text is empty");
    }
    if units(shown) > MAX_TEXT_UNITS {
        return bad("message is too long");
    }
    let mut st = lock(&shared.state);
    let message_id = if method == "editmessagetext" {
        let Some(id) = int(params, "message_id") else { return bad("message identifier is not specified") };
        let Some(old) = st.sent.iter_mut().rev().find(|s| s.chat_id == chat_id && s.message_id == id) else {
            return bad("message to edit not found");
        };
        // Telegram compares what would be shown: the text and its formatting.
        if old.text == shown && old.entities == parsed.entities {
            return bad(
                "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
            );
        }
        old.text = shown.to_string();
        old.raw = raw.to_string();
        old.entities.clone_from(&parsed.entities);
        // An edit brings its own formatting, as with Telegram.
        old.parse_mode = parse_mode.map(str::to_string);
        id
    } else {
        let id = st.next_message_id;
        st.next_message_id += 1;
        push_sent(
            &mut st,
            Sent {
                method: "sendMessage".into(),
                chat_id,
                message_id: id,
                text: shown.to_string(),
                raw: raw.to_string(),
                parse_mode: parse_mode.map(str::to_string),
                entities: parsed.entities.clone(),
                file: None,
            },
        );
        id
    };
    drop(st);
    shared.changed.notify_all();
    let entities: Vec<Value> =
        parsed.entities.iter().map(|(t, o, l)| json!({"type": t, "offset": o, "length": l})).collect();
    ok(json!({"message_id": message_id, "from": bot_user(), "chat": chat(chat_id), "date": unix_now(),
        "text": shown, "entities": entities}))
}

fn push_sent(st: &mut State, sent: Sent) {
    if st.sent.len() >= MAX_RECORDED {
        st.sent.pop_front();
    }
    st.sent.push_back(sent);
}

fn send_file(
    shared: &Shared,
    method: &str,
    params: &Value,
    files: Vec<(String, String, Vec<u8>)>,
) -> Response<ReplyBody> {
    let Some(chat_id) = chat_id(params) else { return bad("chat_id is empty") };
    let field = if method == "sendphoto" { "photo" } else { "document" };
    let Some((_, file_name, data)) = files.into_iter().find(|(name, ..)| name == field) else {
        return bad(&format!("there is no {field} in the request"));
    };
    if data.is_empty() {
        return bad("file must be non-empty");
    }
    let raw = params["caption"].as_str().unwrap_or("");
    let parse_mode = params["parse_mode"].as_str();
    let parsed = match parse_text(raw, parse_mode) {
        Ok(p) => p,
        Err(e) => return fail(400, &e),
    };
    if units(parsed.text.trim()) > MAX_CAPTION_UNITS {
        return bad("message caption is too long");
    }
    let mut st = lock(&shared.state);
    let id = st.next_message_id;
    st.next_message_id += 1;
    let size = data.len();
    push_sent(
        &mut st,
        Sent {
            method: if field == "photo" { "sendPhoto" } else { "sendDocument" }.into(),
            chat_id,
            message_id: id,
            text: parsed.text.trim().to_string(),
            raw: raw.to_string(),
            parse_mode: parse_mode.map(str::to_string),
            entities: parsed.entities,
            file: Some((file_name.clone(), data)),
        },
    );
    drop(st);
    shared.changed.notify_all();
    let file = json!({"file_id": format!("BQACAgIAAxkDAAI{id:08}"), "file_unique_id": format!("AgAD{id:06}"),
        "file_name": file_name, "file_size": size});
    let mut message = json!({"message_id": id, "from": bot_user(), "chat": chat(chat_id), "date": unix_now()});
    message[field] = if field == "photo" { json!([file]) } else { file };
    if !raw.is_empty() {
        message["caption"] = parsed_caption(raw, parse_mode).into();
    }
    ok(message)
}

fn parsed_caption(raw: &str, parse_mode: Option<&str>) -> String {
    parse_text(raw, parse_mode).map(|p| p.text.trim().to_string()).unwrap_or_default()
}

/// `a=1&b=x%20y` (query strings and urlencoded bodies) into `params`.
fn form_into(form: &str, params: &mut Map<String, Value>) {
    for pair in form.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        params.insert(percent_decode(k), Value::String(percent_decode(v)));
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let pair = (b[i] == b'%').then(|| Some((hex(*b.get(i + 1)?)?, hex(*b.get(i + 2)?)?))).flatten();
        match (b[i], pair) {
            (b'%', Some((hi, lo))) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (c, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The parts of a `multipart/form-data` body: (field name, file name if a file, bytes).
fn multipart(body: &[u8], boundary: &str) -> Vec<(String, Option<String>, Vec<u8>)> {
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut starts = Vec::new();
    let mut i = 0;
    while let Some(at) = find(&body[i..], delim.as_bytes()) {
        starts.push(i + at);
        i += at + delim.len();
    }
    for w in starts.windows(2) {
        let part = &body[w[0] + delim.len()..w[1]];
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let part = part.strip_suffix(b"\r\n").unwrap_or(part);
        let Some(split) = find(part, b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&part[..split]);
        let data = part[split + 4..].to_vec();
        let disposition = head.lines().find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"));
        let Some(disposition) = disposition else { continue };
        let attr = |name: &str| {
            disposition
                .split(';')
                .find_map(|p| p.trim().strip_prefix(name)?.strip_prefix('=').map(|v| v.trim_matches('"').to_string()))
        };
        let Some(name) = attr("name") else { continue };
        parts.push((name, attr("filename"), data));
    }
    parts
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
