//! The Wi-Fi onboarding portal: with no Wi-Fi network set (or the boot button held at power-on)
//! the chip opens an access point `Chela-XXXX` (WPA2, its password printed on the serial
//! console) and serves a small setup page: Wi-Fi network, provider, API key, model, Telegram
//! token and allowlist. What is sent is checked by the same rules as the serial console's
//! settings, saved to flash in one write, and the chip restarts in station mode.
//!
//! What it is: the HTTP/1.1 request head and form parsers (bounded, for bytes from whoever
//! joined the access point), the page, and [`handle`], which answers one request. The radio,
//! the socket and the DHCP server are the firmware's. The same page can be mounted on the LAN
//! by a gateway with [`Access::Token`]: then nothing is shown or saved without its token.
//!
//! Secrets (the Wi-Fi password, the API key, the Telegram token, the gateway token) are never
//! put in a page: the form says only whether each is set, and an empty secret field keeps
//! what is stored.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write as _;

use chela_core::console::{ChipConfig, Field};
use chela_core::flash::{Flash, FlashStore};

/// The longest request head read (request line and headers).
pub const MAX_HEAD: usize = 1024;
/// The longest form body taken.
pub const MAX_BODY: usize = 2048;
/// Headers and form fields beyond these are refused.
const MAX_HEADERS: usize = 32;
const MAX_FIELDS: usize = 16;

/// The access point's name: `Chela-` and the last two bytes of the chip's MAC address.
pub fn ap_ssid(mac: [u8; 6]) -> String {
    format!("Chela-{:02X}{:02X}", mac[4], mac[5])
}

/// The access point's WPA2 password, new at every start: 12 characters from 32 that are hard
/// to mistake for each other (60 bits), from `random` (the hardware RNG).
pub fn ap_password(random: [u8; 12]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghjkmnpqrstuvwxyz23456789A";
    random.iter().map(|b| char::from(ALPHABET[usize::from(b & 31)])).collect()
}

/// Whether the portal opens at this boot.
pub fn wanted(config: &ChipConfig, button_held: bool) -> bool {
    button_held || config.get(Field::WifiSsid).is_empty()
}

/// What a request head says that the portal uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_length: usize,
    pub form: bool,
    /// The `Authorization: Bearer` token, if any.
    pub bearer: Option<String>,
}

/// Why a request was refused before it was handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// No blank line within [`MAX_HEAD`] bytes, or too many headers.
    HeadTooLarge,
    BodyTooLarge(usize),
    Malformed(&'static str),
}

impl HttpError {
    /// The response that says so.
    pub fn response(&self) -> Response {
        match self {
            HttpError::HeadTooLarge => Response::page(431, "Request too large", "The request's head is too large."),
            HttpError::BodyTooLarge(_) => Response::page(413, "Too large", "The form is too large."),
            HttpError::Malformed(why) => Response::page(400, "Bad request", why),
        }
    }
}

/// The length of the head in `bytes` (through the blank line), once it is all there.
pub fn head_len(bytes: &[u8]) -> Result<Option<usize>, HttpError> {
    match bytes.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) if i + 4 <= MAX_HEAD => Ok(Some(i + 4)),
        Some(_) => Err(HttpError::HeadTooLarge),
        None if bytes.len() >= MAX_HEAD => Err(HttpError::HeadTooLarge),
        None => Ok(None),
    }
}

/// Parses a request head (the bytes [`head_len`] measured).
pub fn parse_head(bytes: &[u8]) -> Result<Head, HttpError> {
    if bytes.len() > MAX_HEAD {
        return Err(HttpError::HeadTooLarge);
    }
    let text = core::str::from_utf8(bytes).map_err(|_| HttpError::Malformed("the request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::Malformed("the request line is not METHOD TARGET VERSION"));
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") || !target.starts_with('/') || method.is_empty() {
        return Err(HttpError::Malformed("not an HTTP/1 request for a path"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut head = Head {
        method: method.into(),
        path: path.into(),
        query: query.into(),
        content_length: 0,
        form: false,
        bearer: None,
    };
    let mut seen_length = false;
    for (n, line) in lines.filter(|l| !l.is_empty()).enumerate() {
        if n >= MAX_HEADERS {
            return Err(HttpError::HeadTooLarge);
        }
        let (name, value) = line.split_once(':').ok_or(HttpError::Malformed("a header without a colon"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let len: usize = value.parse().map_err(|_| HttpError::Malformed("Content-Length is not a number"))?;
            if seen_length && len != head.content_length {
                return Err(HttpError::Malformed("two different Content-Length headers"));
            }
            seen_length = true;
            head.content_length = len;
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(HttpError::Malformed("chunked bodies are not taken; send Content-Length"));
        } else if name.eq_ignore_ascii_case("content-type") {
            head.form = value.split(';').next().is_some_and(|t| t.trim() == "application/x-www-form-urlencoded");
        } else if name.eq_ignore_ascii_case("authorization") {
            let token = value.strip_prefix("Bearer ").map(str::trim).filter(|t| !t.is_empty());
            head.bearer = token.map(String::from);
        }
    }
    if head.content_length > MAX_BODY {
        return Err(HttpError::BodyTooLarge(head.content_length));
    }
    Ok(head)
}

/// Why a form body was refused. The message never quotes a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormError {
    TooLarge,
    TooManyFields,
    BadEscape,
    NotUtf8,
    Duplicate(String),
}

impl core::fmt::Display for FormError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FormError::TooLarge => write!(f, "the form is over {MAX_BODY} bytes"),
            FormError::TooManyFields => write!(f, "the form has over {MAX_FIELDS} fields"),
            FormError::BadEscape => f.write_str("the form has a bad %-escape"),
            FormError::NotUtf8 => f.write_str("the form is not UTF-8"),
            FormError::Duplicate(name) => write!(f, "the form has field {} twice", clip(name)),
        }
    }
}

/// A field name as it may be quoted back: short, and only plain characters.
fn clip(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(24).collect()
}

/// Parses an `application/x-www-form-urlencoded` body: `name=value` pairs joined by `&`,
/// `+` for a space, `%XX` escapes. Bounded: [`MAX_BODY`] bytes, 16 fields, no name twice.
pub fn parse_form(body: &[u8]) -> Result<Vec<(String, String)>, FormError> {
    if body.len() > MAX_BODY {
        return Err(FormError::TooLarge);
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for pair in body.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        if out.len() == MAX_FIELDS {
            return Err(FormError::TooManyFields);
        }
        let eq = pair.iter().position(|&b| b == b'=').unwrap_or(pair.len());
        let name = decode(&pair[..eq])?;
        let value = decode(pair.get(eq + 1..).unwrap_or(b""))?;
        if out.iter().any(|(n, _)| *n == name) {
            return Err(FormError::Duplicate(name));
        }
        out.push((name, value));
    }
    Ok(out)
}

fn decode(bytes: &[u8]) -> Result<String, FormError> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = |b: u8| (b as char).to_digit(16);
                let (Some(hi), Some(lo)) =
                    (bytes.get(i + 1).and_then(|&b| hex(b)), bytes.get(i + 2).and_then(|&b| hex(b)))
                else {
                    return Err(FormError::BadEscape);
                };
                out.push((hi * 16 + lo) as u8);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| FormError::NotUtf8)
}

/// Who may use the page.
#[derive(Clone, Copy, Debug)]
pub enum Access<'t> {
    /// On the setup access point: whoever joined it (it has a WPA2 password) may.
    AccessPoint,
    /// On the LAN, mounted by the gateway: only a request with this token (`Authorization:
    /// Bearer`, `?token=` to see the page, the form's `token` field to save).
    Token(&'t str),
}

/// One answer, ready to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: String,
    /// The settings were saved: restart in station mode once this is sent.
    pub restart: bool,
}

impl Response {
    fn page(status: u16, title: &str, text: &str) -> Response {
        let mut body = page_start(title);
        let _ = writeln!(body, "<p>{}</p></body></html>", escape(text));
        Response { status, body, restart: false }
    }

    /// The whole HTTP/1.1 response. The page may not be framed, cached or run scripts.
    pub fn to_http(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            404 => "Not Found",
            405 => "Method Not Allowed",
            413 => "Payload Too Large",
            415 => "Unsupported Media Type",
            _ => "Request Header Fields Too Large",
        };
        let mut out = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
             Cache-Control: no-store\r\nX-Frame-Options: DENY\r\n\
             Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; form-action 'self'\r\n\
             Connection: close\r\n\r\n",
            self.status,
            self.body.len()
        )
        .into_bytes();
        out.extend_from_slice(self.body.as_bytes());
        out
    }
}

/// Escapes text for HTML, attributes included.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page_start(title: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width\"><title>Chela: {0}</title><style>body{{font-family:sans-serif;\
         max-width:28em;margin:1em auto;padding:0 1em}}label{{display:block;margin-top:.8em}}\
         input,select{{width:100%}}</style></head><body><h1>{0}</h1>",
        escape(title)
    )
}

/// The fields the form sets, in its order: (field, label, secret).
const FIELDS: [(Field, &str); 6] = [
    (Field::WifiSsid, "Wi-Fi network"),
    (Field::WifiPassword, "Wi-Fi password"),
    (Field::ApiKey, "API key"),
    (Field::Model, "Model (empty: the provider's default)"),
    (Field::TgToken, "Telegram bot token"),
    (Field::TgAllow, "Telegram chat ids allowed, the owner's first"),
];

/// The setup page: current values of the plain settings, only "set" or "not set" for secrets.
pub fn setup_page(config: &ChipConfig, lan: bool, note: Option<&str>) -> String {
    let mut p = page_start("Set up Chela");
    if let Some(n) = note {
        let _ = write!(p, "<p><strong>{}</strong></p>", escape(n));
    }
    p.push_str("<form method=\"post\" action=\"/save\">");
    if lan {
        p.push_str("<label>Gateway token<input name=\"token\" type=\"password\" autocomplete=\"off\"></label>");
    }
    for (field, label) in FIELDS {
        if field == Field::ApiKey {
            let provider = config.get(Field::Provider);
            p.push_str("<label>Provider<select name=\"provider\">");
            for name in ["anthropic", "openai"] {
                let sel = if provider == name { " selected" } else { "" };
                let _ = write!(p, "<option value=\"{name}\"{sel}>{name}</option>");
            }
            p.push_str("</select></label>");
        }
        let value = config.get(field);
        if field.is_secret() {
            let state = if value.is_empty() { "not set" } else { "set; leave empty to keep it" };
            let _ = write!(
                p,
                "<label>{label}<input name=\"{}\" type=\"password\" autocomplete=\"off\" placeholder=\"{state}\"></label>",
                field.name()
            );
        } else {
            let _ = write!(p, "<label>{label}<input name=\"{}\" value=\"{}\"></label>", field.name(), escape(value));
        }
        if field == Field::WifiPassword {
            p.push_str("<label><input name=\"wifi_open\" type=\"checkbox\" value=\"1\" style=\"width:auto\"> an open network (no password)</label>");
        }
    }
    p.push_str("<p><button type=\"submit\">Save and restart</button></p></form></body></html>\n");
    p
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn query_token(query: &str) -> Option<String> {
    let pairs = parse_form(query.as_bytes()).ok()?;
    pairs.into_iter().find(|(n, _)| n == "token").map(|(_, v)| v)
}

/// Answers one request: `GET /` the page, `POST /save` the form (saved to flash in one write;
/// `restart` set), anything else 404. `body` is the request body (`head.content_length`
/// bytes, at most [`MAX_BODY`]).
pub fn handle<F: Flash>(
    head: &Head,
    body: &[u8],
    access: Access<'_>,
    store: &mut FlashStore<F>,
    config: &mut ChipConfig,
) -> Response {
    let lan = matches!(access, Access::Token(_));
    let allowed = |given: Option<&str>| match access {
        Access::AccessPoint => true,
        Access::Token(t) => !t.is_empty() && given.is_some_and(|g| same(g, t)),
    };
    let denied = || Response::page(401, "Not allowed", "This page needs the gateway token.");
    match (head.method.as_str(), head.path.as_str()) {
        ("GET", "/") => {
            let given = head.bearer.clone().or_else(|| query_token(&head.query));
            if !allowed(given.as_deref()) {
                return denied();
            }
            Response { status: 200, body: setup_page(config, lan, None), restart: false }
        }
        ("POST", "/save") => {
            if !head.form {
                return Response::page(415, "Bad form", "The form must be sent as application/x-www-form-urlencoded.");
            }
            let fields = match parse_form(body) {
                Ok(f) => f,
                Err(e) => return Response::page(400, "Bad form", &e.to_string()),
            };
            let get = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
            if !allowed(head.bearer.as_deref().or(get("token"))) {
                return denied();
            }
            save(&fields, store, config, lan)
        }
        (_, "/" | "/save") => Response::page(405, "Not allowed", "Use the form."),
        _ => Response::page(404, "Not found", "Nothing here; the setup page is at /."),
    }
}

/// Sets every field the form has (a secret only when not empty), checks them all, saves once.
fn save<F: Flash>(
    fields: &[(String, String)],
    store: &mut FlashStore<F>,
    config: &mut ChipConfig,
    lan: bool,
) -> Response {
    let get = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let mut next = config.clone();
    let open = get("wifi_open") == Some("1");
    let plan = FIELDS.iter().map(|(f, _)| *f).chain([Field::Provider]);
    for field in plan {
        let value = match (field, get(field.name())) {
            (Field::WifiPassword, _) if open => Some(""),
            (f, Some("")) if f.is_secret() => None,
            (_, v) => v,
        };
        if let Some(v) = value
            && let Err(e) = next.set(field, v)
        {
            let note = format!("Not saved: {e}");
            return Response { status: 400, body: setup_page(config, lan, Some(&note)), restart: false };
        }
    }
    if next.get(Field::WifiSsid).is_empty() {
        return Response {
            status: 400,
            body: setup_page(config, lan, Some("Not saved: a Wi-Fi network is needed.")),
            restart: false,
        };
    }
    if let Err(e) = next.save(store) {
        return Response::page(400, "Not saved", &format!("The flash write failed: {e}"));
    }
    *config = next;
    let mut r = Response::page(200, "Saved", "Chela restarts now and joins the Wi-Fi network.");
    r.restart = true;
    r
}
