//! The OTA check: the body a device posts to its OTA URL after joining Wi-Fi, the answer that
//! tells it the time, whether to update its firmware, where to dial and, while it is not yet
//! bound, the activation code to show; and the body of `…/activate`.
//!
//! Field names follow the firmware's `ota.cc` (the code, where it and the docs differ). Every
//! section of the answer is optional to the firmware; it needs HTTP 200. Body fields are all
//! optional here too: an OTA body is device-reported information, used for display only.

use alloc::string::String;
use core::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// Largest OTA or activation body read. The firmware's system-info JSON (partition table,
/// chip info) is 1–3 KB.
pub const MAX_BODY: usize = 16 * 1024;

/// What the device reports about itself (`Board::GetSystemInfoJson`, abridged to what is shown).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SystemInfo {
    pub mac_address: Option<String>,
    pub uuid: Option<String>,
    pub chip_model_name: Option<String>,
    pub language: Option<String>,
    pub application: Option<Application>,
    pub board: Option<Board>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Application {
    pub name: Option<String>,
    pub version: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Board {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub name: Option<String>,
}

/// The `…/activate` body: `{}` for a device without an eFuse serial number, else the HMAC of
/// the challenge under the device's key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ActivateRequest {
    pub algorithm: Option<String>,
    pub serial_number: Option<String>,
    pub challenge: Option<String>,
    pub hmac: Option<String>,
}

/// Why a body was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyError {
    TooLarge { len: usize, max: usize },
    NotJson(String),
}

impl core::fmt::Display for BodyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BodyError::TooLarge { len, max } => write!(f, "the body of {len} bytes is over the {max}-byte limit"),
            BodyError::NotJson(e) => write!(f, "the body is not the JSON object a device sends: {e}"),
        }
    }
}

/// Parses an OTA or activation body; an empty body (a GET, or an old firmware) is `T::default()`.
pub fn parse_body<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, BodyError> {
    if body.len() > MAX_BODY {
        return Err(BodyError::TooLarge { len: body.len(), max: MAX_BODY });
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| BodyError::NotJson(alloc::string::ToString::to_string(&e)))
}

/// The OTA answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<ServerTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<Websocket>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mqtt: Option<Mqtt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<Activation>,
}

/// `server_time`: milliseconds since the Unix epoch and the zone's offset in minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerTime {
    pub timestamp: u64,
    pub timezone_offset: i32,
}

/// `firmware`: the device updates when `version` is newer than its own (see [`newer`]) or
/// `force` is 1; `url` is a raw `.bin` fetched with GET.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Firmware {
    pub version: String,
    pub url: String,
    #[serde(default)]
    pub force: u8,
}

/// `websocket`: every key is copied into the device's settings; `version` picks the binary
/// frame layout (1, 2 or 3). Only the keys present are copied, so an answer without `token`
/// leaves the token the device stored (firmware `Ota::CheckVersion`): a server hands a token
/// out once and never has to repeat it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Websocket {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    pub version: u8,
}

/// `mqtt`: present, it makes the device use MQTT + UDP instead of the WebSocket. Like
/// `websocket`, only the keys present are copied into the device's settings, so `password` is
/// handed out once and an answer without it leaves the stored one. `endpoint` is `host[:port]`
/// (no port: 8883); `keepalive` is seconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mqtt {
    pub endpoint: String,
    pub client_id: String,
    pub username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    pub publish_topic: String,
    pub subscribe_topic: String,
    pub keepalive: u16,
}

/// `activation`: the device shows and speaks `code`, then posts to `…/activate` until 200.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activation {
    pub code: String,
    pub message: String,
    pub challenge: String,
    pub timeout_ms: u64,
}

/// Compares two dotted version numbers the way the firmware does: part by part as numbers,
/// a missing part counting as 0 (`2.0` == `2.0.0`); a part that is not a number counts as 0.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let part = |s: Option<&str>| s.map_or(0u64, |p| p.trim().parse().unwrap_or(0));
    let (mut x, mut y) = (a.split('.'), b.split('.'));
    // Each step consumes a part of one side; both run out after at most len(a)+len(b) steps.
    loop {
        let (p, q) = (x.next(), y.next());
        if p.is_none() && q.is_none() {
            return Ordering::Equal;
        }
        match part(p).cmp(&part(q)) {
            Ordering::Equal => {}
            other => return other,
        }
    }
}

/// Whether `offered` is newer than `current`.
pub fn newer(offered: &str, current: &str) -> bool {
    compare_versions(offered, current) == Ordering::Greater
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_firmware_s_body_is_read_and_extra_fields_ignored() {
        let body = br#"{"version":2,"language":"zh-CN","flash_size":16777216,"minimum_free_heap_size":"123456",
            "mac_address":"aa:bb:cc:dd:ee:ff","uuid":"u-1","chip_model_name":"esp32s3","chip_info":{"model":9},
            "application":{"name":"xiaozhi","version":"2.0.5","elf_sha256":"ab"},"partition_table":[],
            "ota":{"label":"ota_0"},"board":{"type":"bread-compact-wifi","name":"b","rssi":-50}}"#;
        let info: SystemInfo = parse_body(body).unwrap();
        assert_eq!(info.application.unwrap().version.as_deref(), Some("2.0.5"));
        assert_eq!(info.board.unwrap().kind.as_deref(), Some("bread-compact-wifi"));
        assert_eq!(parse_body::<SystemInfo>(b"").unwrap(), SystemInfo::default());
        assert!(matches!(parse_body::<SystemInfo>(b"{nope"), Err(BodyError::NotJson(_))));
        assert!(matches!(parse_body::<SystemInfo>(&[b' '; MAX_BODY + 1]), Err(BodyError::TooLarge { .. })));
        let a: ActivateRequest =
            parse_body(br#"{"algorithm":"hmac-sha256","serial_number":"S","challenge":"c","hmac":"00"}"#).unwrap();
        assert_eq!(a.serial_number.as_deref(), Some("S"));
    }

    #[test]
    fn the_answer_has_the_firmware_s_field_names() {
        let r = Response {
            server_time: Some(ServerTime { timestamp: 1_767_225_600_000, timezone_offset: 480 }),
            firmware: Some(Firmware { version: "2.0.5".into(), url: String::new(), force: 0 }),
            websocket: Some(Websocket {
                url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
                token: Some("t".into()),
                version: 1,
            }),
            mqtt: None,
            activation: None,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"server_time":{"timestamp":1767225600000,"timezone_offset":480},"firmware":{"version":"2.0.5","url":"","force":0},"websocket":{"url":"ws://127.0.0.1:8000/xiaozhi/v1/","token":"t","version":1}}"#
        );
        // No token: the key is absent (an empty string would overwrite the device's stored one).
        let kept = Websocket { url: "ws://h/xiaozhi/v1/".into(), token: None, version: 1 };
        assert_eq!(serde_json::to_string(&kept).unwrap(), r#"{"url":"ws://h/xiaozhi/v1/","version":1}"#);
        let m = Mqtt {
            endpoint: "h:1883".into(),
            client_id: "GID_chela@@@aa_bb_cc_dd_ee_ff@@@u".into(),
            username: "aa:bb:cc:dd:ee:ff".into(),
            password: None,
            publish_topic: "device-server".into(),
            subscribe_topic: "devices/p2p/aa_bb_cc_dd_ee_ff".into(),
            keepalive: 240,
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"endpoint":"h:1883","client_id":"GID_chela@@@aa_bb_cc_dd_ee_ff@@@u","username":"aa:bb:cc:dd:ee:ff","publish_topic":"device-server","subscribe_topic":"devices/p2p/aa_bb_cc_dd_ee_ff","keepalive":240}"#,
            "no password: the key is absent, so the device keeps the one it stored"
        );
    }

    #[test]
    fn versions_compare_as_numbers() {
        assert!(newer("2.0.10", "2.0.9"));
        assert!(!newer("2.0", "2.0.0"));
        assert!(newer("2.1", "2.0.99"));
        assert!(!newer("1.9", "2.0"));
        assert!(newer("3", "x"));
        assert_eq!(compare_versions("", ""), Ordering::Equal);
    }
}
