//! The Wi-Fi onboarding portal on the host: request heads and forms from whoever joined the
//! access point, the page (secrets never in it), what a form saves to flash (read back by a
//! reboot's settings load), the LAN mount behind the gateway token, and the abuse cases.

use chela_chip::portal::{
    self, Access, FormError, Head, HttpError, MAX_BODY, MAX_HEAD, ap_password, ap_ssid, handle, head_len, parse_form,
    parse_head,
};
use chela_core::console::{ChipConfig, ChipDefaults, Field};
use chela_core::flash::{FlashStore, RamFlash};

const WIFI_PASS: &str = "correct horse battery";
const API_KEY: &str = "sk-ant-api03-portalSECRETkey-42";
const TG_TOKEN: &str = "8123456789:AAHportalSecretTelegramToken";
const GATEWAY: &str = "gw-token-0123456789abcdef";

struct Device {
    store: FlashStore<RamFlash>,
    config: ChipConfig,
}

impl Device {
    fn new() -> Device {
        let store = FlashStore::open(RamFlash::new(4096, 6)).unwrap();
        let (config, _) = ChipConfig::load(&store, ChipDefaults::default()).unwrap();
        Device { store, config }
    }

    /// Powers off and on: the settings as the next boot loads them.
    fn reboot(self) -> Device {
        let store = FlashStore::open(self.store.into_flash()).unwrap();
        let (config, _) = ChipConfig::load(&store, ChipDefaults::default()).unwrap();
        Device { store, config }
    }

    /// One request as bytes off the socket: the head measured and parsed, the body taken.
    fn request(&mut self, raw: &str, access: Access<'_>) -> portal::Response {
        let bytes = raw.as_bytes();
        let n = match head_len(bytes) {
            Ok(Some(n)) => n,
            Ok(None) => panic!("incomplete head in {raw:?}"),
            Err(e) => return e.response(),
        };
        let head = match parse_head(&bytes[..n]) {
            Ok(h) => h,
            Err(e) => return e.response(),
        };
        let body = &bytes[n..n + head.content_length.min(bytes.len() - n)];
        handle(&head, body, access, &mut self.store, &mut self.config)
    }
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 192.168.4.1\r\n\r\n")
}

fn post(form: &str) -> String {
    format!(
        "POST /save HTTP/1.1\r\nHost: 192.168.4.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\n{form}",
        form.len()
    )
}

fn full_form() -> String {
    format!(
        "wifi_ssid=My+Home%20Net&wifi_password={}&provider=openai&api_key={}&model=gpt-4.1&tg_token={}&tg_allow=5551234",
        WIFI_PASS.replace(' ', "+"),
        API_KEY,
        TG_TOKEN.replace(':', "%3A")
    )
}

fn shows_no_secret(page: &str) {
    for secret in [WIFI_PASS, API_KEY, TG_TOKEN, GATEWAY, "correct", "SECRET", "portalSecret"] {
        assert!(!page.contains(secret), "{secret} is in the page:\n{page}");
    }
}

#[test]
fn the_form_saves_every_setting_to_flash_and_asks_for_a_restart() {
    let mut dev = Device::new();
    assert!(portal::wanted(&dev.config, false), "no Wi-Fi set: the portal opens");
    let page = dev.request(&get("/"), Access::AccessPoint);
    assert_eq!(page.status, 200);
    for name in ["wifi_ssid", "wifi_password", "provider", "api_key", "model", "tg_token", "tg_allow"] {
        assert!(page.body.contains(&format!("name=\"{name}\"")), "the page asks for {name}");
    }
    assert!(!page.body.contains("name=\"token\""), "no gateway token on the access point");

    let saved = dev.request(&post(&full_form()), Access::AccessPoint);
    assert_eq!(saved.status, 200, "{}", saved.body);
    assert!(saved.restart);
    shows_no_secret(&saved.body);

    let dev = dev.reboot();
    let c = &dev.config;
    assert_eq!(c.get(Field::WifiSsid), "My Home Net");
    assert_eq!(c.get(Field::WifiPassword), WIFI_PASS);
    assert_eq!(c.get(Field::ApiKey), API_KEY);
    assert_eq!(c.get(Field::Provider), "openai");
    assert_eq!(c.get(Field::Model), "gpt-4.1");
    assert_eq!(c.get(Field::TgToken), TG_TOKEN);
    assert_eq!(c.get(Field::TgAllow), "5551234");
    assert!(!portal::wanted(c, false), "Wi-Fi set: station mode");
    assert!(portal::wanted(c, true), "the boot button still opens it");
}

#[test]
fn secrets_never_appear_in_a_page_and_empty_secret_fields_keep_them() {
    let mut dev = Device::new();
    assert_eq!(dev.request(&post(&full_form()), Access::AccessPoint).status, 200);
    let page = dev.request(&get("/"), Access::AccessPoint);
    assert_eq!(page.status, 200);
    shows_no_secret(&page.body);
    assert!(page.body.contains("value=\"My Home Net\""), "plain settings are shown");
    assert_eq!(page.body.matches("set; leave empty to keep it").count(), 3, "each secret only says it is set");
    assert!(page.body.contains("<option value=\"openai\" selected>"));

    // A second form changes the model and leaves every secret field empty: they stay.
    let form = "wifi_ssid=My+Home+Net&wifi_password=&provider=anthropic&api_key=&model=&tg_token=&tg_allow=5551234";
    assert_eq!(dev.request(&post(form), Access::AccessPoint).status, 200);
    let dev = dev.reboot();
    assert_eq!(dev.config.get(Field::WifiPassword), WIFI_PASS);
    assert_eq!(dev.config.get(Field::ApiKey), API_KEY);
    assert_eq!(dev.config.get(Field::TgToken), TG_TOKEN);
    assert_eq!(dev.config.get(Field::Provider), "anthropic");
    assert_eq!(dev.config.get(Field::Model), "", "empty model: the provider's default");

    // An open network is said with the checkbox, not with an empty field.
    let mut dev = dev;
    assert_eq!(dev.request(&post("wifi_ssid=Cafe&wifi_password=&wifi_open=1"), Access::AccessPoint).status, 200);
    assert_eq!(dev.reboot().config.get(Field::WifiPassword), "");
}

#[test]
fn a_bad_value_saves_nothing_and_the_reason_quotes_no_secret() {
    let mut dev = Device::new();
    let cases = [
        format!("wifi_ssid=Home&wifi_password=short&api_key={API_KEY}"),
        format!("wifi_ssid={}&api_key={API_KEY}", "x".repeat(33)),
        format!("wifi_ssid=Home&api_key={API_KEY}&tg_token=not-a-token-{API_KEY}"),
        format!("wifi_ssid=Home&api_key={API_KEY}&provider=claude"),
        format!("wifi_ssid=&api_key={API_KEY}"),
        format!("api_key={API_KEY}"),
        "wifi_ssid=Home&api_key=has%0Acontrol".to_string(),
    ];
    for form in cases {
        let r = dev.request(&post(&form), Access::AccessPoint);
        assert_eq!(r.status, 400, "{form}: {}", r.body);
        assert!(!r.restart);
        assert!(r.body.contains("Not saved"), "{form}: the reason is given");
        shows_no_secret(&r.body);
        assert!(!r.body.contains("short") && !r.body.contains("not-a-token"), "{}", r.body);
    }
    let dev = dev.reboot();
    assert_eq!(dev.config.get(Field::ApiKey), "", "nothing was saved");
    assert_eq!(dev.config.get(Field::WifiSsid), "");
}

#[test]
fn on_the_lan_nothing_is_shown_or_saved_without_the_gateway_token() {
    let mut dev = Device::new();
    let lan = Access::Token(GATEWAY);
    for raw in [get("/"), get("/?token=wrong"), get(&format!("/?token={}", &GATEWAY[..GATEWAY.len() - 1]))] {
        let r = dev.request(&raw, lan);
        assert_eq!(r.status, 401, "{raw}");
        assert!(!r.body.contains("<form"));
    }
    let r = dev.request(&post(&full_form()), lan);
    assert_eq!(r.status, 401);
    let r = dev.request(&post(&format!("{}&token=nope", full_form())), lan);
    assert_eq!(r.status, 401);
    assert_eq!(dev.config.get(Field::ApiKey), "", "refused forms save nothing");
    // An empty gateway token opens nothing.
    assert_eq!(dev.request(&post(&format!("{}&token=", full_form())), Access::Token("")).status, 401);

    let page = dev.request(&get(&format!("/?token={GATEWAY}")), lan);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("name=\"token\""), "the form asks for the token again");
    shows_no_secret(&page.body);
    let bearer = format!("GET / HTTP/1.1\r\nAuthorization: Bearer {GATEWAY}\r\n\r\n");
    assert_eq!(dev.request(&bearer, lan).status, 200);

    let r = dev.request(&post(&format!("{}&token={GATEWAY}", full_form())), lan);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.restart);
    shows_no_secret(&r.body);
    assert_eq!(dev.reboot().config.get(Field::ApiKey), API_KEY);
}

#[test]
fn request_heads_are_bounded_and_strict() {
    assert_eq!(head_len(b"GET / HTTP/1.1\r\nHost: x\r\n"), Ok(None), "not all there yet");
    assert_eq!(head_len(b"GET / HTTP/1.1\r\n\r\nbody"), Ok(Some(18)));
    let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
    assert_eq!(head_len(huge.as_bytes()), Err(HttpError::HeadTooLarge));
    assert_eq!(head_len("a".repeat(MAX_HEAD).as_bytes()), Err(HttpError::HeadTooLarge), "no end in sight");

    let h = parse_head(b"POST /save?x=1 HTTP/1.1\r\ncontent-type: application/x-www-form-urlencoded; charset=utf-8\r\nContent-Length: 12\r\nAuthorization: Bearer abc\r\n\r\n").unwrap();
    assert_eq!(
        h,
        Head {
            method: "POST".into(),
            path: "/save".into(),
            query: "x=1".into(),
            content_length: 12,
            form: true,
            bearer: Some("abc".into()),
        }
    );
    let refused: [(&str, HttpError); 7] = [
        ("GET / HTTP/1.1 extra\r\n\r\n", HttpError::Malformed("the request line is not METHOD TARGET VERSION")),
        ("GET http://x/ HTTP/1.1\r\n\r\n", HttpError::Malformed("not an HTTP/1 request for a path")),
        ("GET / HTTP/2\r\n\r\n", HttpError::Malformed("not an HTTP/1 request for a path")),
        ("POST / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n", HttpError::BodyTooLarge(99_999)),
        (
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            HttpError::Malformed("two different Content-Length headers"),
        ),
        (
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            HttpError::Malformed("chunked bodies are not taken; send Content-Length"),
        ),
        ("GET / HTTP/1.1\r\nno colon here\r\n\r\n", HttpError::Malformed("a header without a colon")),
    ];
    for (raw, want) in refused {
        assert_eq!(parse_head(raw.as_bytes()), Err(want.clone()), "{raw:?}");
        assert!(want.response().status >= 400);
    }
    let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(40));
    assert_eq!(parse_head(many.as_bytes()), Err(HttpError::HeadTooLarge));

    let mut dev = Device::new();
    assert_eq!(dev.request(&get("/admin"), Access::AccessPoint).status, 404);
    assert_eq!(dev.request("DELETE /save HTTP/1.1\r\n\r\n", Access::AccessPoint).status, 405);
    let not_form = "POST /save HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    assert_eq!(dev.request(not_form, Access::AccessPoint).status, 415);
}

#[test]
fn forms_are_decoded_and_bounded() {
    let f = parse_form(b"a=1&b=x+y%21%e2%82%ac&c&&d=").unwrap();
    let f: Vec<(&str, &str)> = f.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(f, [("a", "1"), ("b", "x y!€"), ("c", ""), ("d", "")]);
    assert_eq!(parse_form(b"a=%4"), Err(FormError::BadEscape));
    assert_eq!(parse_form(b"a=%zz"), Err(FormError::BadEscape));
    assert_eq!(parse_form(b"a=%ff"), Err(FormError::NotUtf8));
    assert_eq!(parse_form(b"a=1&a=2"), Err(FormError::Duplicate("a".into())));
    let many: Vec<String> = (0..17).map(|i| format!("f{i}=1")).collect();
    assert_eq!(parse_form(many.join("&").as_bytes()), Err(FormError::TooManyFields));
    assert_eq!(parse_form(&vec![b'a'; MAX_BODY + 1]), Err(FormError::TooLarge));
    // A field name quoted back is cut to plain characters.
    let dup = parse_form(b"%3Cscript%3E=1&%3Cscript%3E=2").unwrap_err().to_string();
    assert!(!dup.contains('<'), "{dup}");
}

#[test]
fn the_access_point_has_a_name_from_the_mac_and_a_fresh_password() {
    assert_eq!(ap_ssid([0x24, 0x0a, 0xc4, 0x12, 0xab, 0x0f]), "Chela-AB0F");
    let a = ap_password([0; 12]);
    let b = ap_password([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 200]);
    assert_eq!(a.len(), 12);
    assert!((8..=63).contains(&b.len()), "WPA2 takes 8 to 63 characters");
    assert_ne!(a, b);
    assert!(b.chars().all(|c| c.is_ascii_alphanumeric() && !"lIO01".contains(c)), "{b}");
}

/// What the page puts between quotes is escaped: a network name cannot break out of it.
#[test]
fn plain_values_are_escaped_in_the_page() {
    let mut dev = Device::new();
    let form = "wifi_ssid=%22%3E%3Cscript%3Ex%3C%2Fscript%3E&wifi_open=1";
    assert_eq!(dev.request(&post(form), Access::AccessPoint).status, 200);
    let page = dev.request(&get("/"), Access::AccessPoint);
    assert!(!page.body.contains("<script>"), "{}", page.body);
    assert!(page.body.contains("&quot;&gt;&lt;script&gt;"));
    let http = String::from_utf8(page.to_http()).unwrap();
    assert!(http.starts_with("HTTP/1.1 200 OK\r\n"));
    assert!(http.contains("X-Frame-Options: DENY") && http.contains("Cache-Control: no-store"));
    assert!(http.contains(&format!("Content-Length: {}\r\n", page.body.len())));
}
