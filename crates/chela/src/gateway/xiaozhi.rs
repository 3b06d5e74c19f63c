//! xiaozhi device onboarding on the gateway's listener: `/xiaozhi/ota/` (the firmware's boot
//! check, POST or GET), `/xiaozhi/ota/activate` (its activation poll) and
//! `/xiaozhi/ota/download/<name>.bin` (a firmware image the owner offers).
//!
//! Devices cannot present `gateway.token`, so these paths pass the gateway's host and origin
//! checks but not its token check: a device is authorised by the device store instead (see
//! [`crate::devices`]). An unknown device learns only its own activation code; the WebSocket
//! URL goes to a device the owner approved, matched by MAC and `Client-Id`, with a token only
//! on its first check after approval or when it proves it holds the current one
//! (`Authorization: Bearer`). New codes are rate-limited ([`NEW_CODES_PER_MINUTE`]) and bounded
//! per source address, and waiting requests are never pushed out, so a flood of made-up MACs
//! costs neither disk writes nor the codes of real devices waiting.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

use bytes::Bytes;
use chela_core::config as keys;
use chela_proto::xiaozhi::ota::{self, ActivateRequest, SystemInfo};
use http_body_util::BodyExt;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderMap, HeaderValue, USER_AGENT};
use hyper::{Method, Response, StatusCode};

use super::{ApiError, Gateway, Resp, json};
use crate::devices::{
    Activation, Admission, Check, DeviceError, Devices, Info, MAX_FIRMWARE_BYTES, normalize_id, random, valid_client_id,
};

/// New activation codes issued per minute, across all devices.
pub const NEW_CODES_PER_MINUTE: u32 = 20;
/// The WebSocket binary protocol version the OTA answer asks devices to use.
pub const WS_PROTOCOL_VERSION: u8 = 1;

/// The gateway's in-memory state for devices: the new-code rate window.
#[derive(Debug, Default)]
pub struct Onboarding {
    window: Mutex<Option<(Instant, u32)>>,
}

impl Onboarding {
    /// Takes one new-code slot; false when this minute's are used up.
    fn take_code_slot(&self, now: Instant) -> bool {
        let mut w = self.window.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &mut *w {
            Some((start, n)) if now.duration_since(*start) < Duration::from_secs(60) => {
                if *n >= NEW_CODES_PER_MINUTE {
                    return false;
                }
                *n += 1;
            }
            slot => *slot = Some((now, 1)),
        }
        true
    }
}

/// The bound addresses of the MQTT endpoint and its UDP audio.
#[cfg(feature = "voice")]
#[derive(Clone, Copy, Debug)]
pub struct MqttAddrs {
    pub tcp: std::net::SocketAddr,
    pub udp: std::net::SocketAddr,
}

/// Starts the MQTT endpoint and its UDP audio when `xiaozhi.transport` is `mqtt`: both
/// listeners are bound before the gateway serves, so an OTA answer never names a port that is
/// not open yet.
pub async fn start_mqtt(gw: &std::sync::Arc<Gateway>) -> anyhow::Result<()> {
    let cfg = gw.daemon.config();
    if !cfg.bool(keys::XIAOZHI_ENABLED) || cfg.get(keys::XIAOZHI_TRANSPORT) != "mqtt" {
        return Ok(());
    }
    #[cfg(not(feature = "voice"))]
    anyhow::bail!("this Chela was built without the `voice` feature: xiaozhi.transport = mqtt cannot be served");
    #[cfg(feature = "voice")]
    serve_mqtt(gw).await
}

#[cfg(feature = "voice")]
async fn serve_mqtt(gw: &std::sync::Arc<Gateway>) -> anyhow::Result<()> {
    use crate::channels::xiaozhi::{mqtt, udp};
    use anyhow::Context;
    let cfg = gw.daemon.config();
    let tcp_at: std::net::SocketAddr = cfg.get(keys::XIAOZHI_MQTT_LISTEN).parse().context("xiaozhi.mqtt_listen")?;
    let tls = mqtt_tls(cfg.get(keys::XIAOZHI_MQTT_TLS_CERT).trim(), cfg.get(keys::XIAOZHI_MQTT_TLS_KEY).trim())?;
    let udp_at: std::net::SocketAddr = cfg.get(keys::XIAOZHI_UDP_LISTEN).parse().context("xiaozhi.udp_listen")?;
    let listener = tokio::net::TcpListener::bind(tcp_at)
        .await
        .with_context(|| format!("xiaozhi devices' MQTT cannot listen on {tcp_at} (xiaozhi.mqtt_listen)"))?;
    let socket = tokio::net::UdpSocket::bind(udp_at)
        .await
        .with_context(|| format!("xiaozhi devices' UDP audio cannot listen on {udp_at} (xiaozhi.udp_listen)"))?;
    let addrs = MqttAddrs { tcp: listener.local_addr()?, udp: socket.local_addr()? };
    let scheme = if tls.is_some() { "MQTT over TLS" } else { "MQTT" };
    eprintln!("chela: xiaozhi devices connect over {scheme} to {} (UDP audio on {})", addrs.tcp, addrs.udp);
    let _ = gw.mqtt.set(addrs);
    let hub = udp::Hub::new(socket, mqtt::MAX_CONNECTIONS);
    let (endpoint, _) = mqtt_public(gw, &HeaderMap::new());
    let udp_host = endpoint.rsplit_once(':').map_or(endpoint.as_str(), |(h, _)| h).to_owned();
    let host = crate::channels::xiaozhi::Host {
        daemon: std::sync::Arc::clone(&gw.daemon),
        limits: gw.limits,
        conns: std::sync::Arc::clone(&gw.conns),
        camera_url: format!("{}{}", base(gw, &HeaderMap::new()).1, super::vision::PATH),
    };
    let port = endpoint.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok());
    if tls.is_some() != (port == Some(8883)) {
        // The firmware picks TLS by the port alone (8883), so the other pairings never connect.
        chela_log::warn!(
            "xiaozhi: devices are told to dial {endpoint}, but they use TLS exactly on port 8883 and the endpoint {} TLS",
            if tls.is_some() { "speaks" } else { "does not speak" }
        );
    }
    let ep = mqtt::Endpoint::new(host, std::sync::Arc::clone(&hub), (udp_host, addrs.udp.port()), tls);
    let shutdown = gw.daemon.shutdown().clone();
    tokio::spawn(crate::tasks::boxed(hub.run(shutdown)));
    tokio::spawn(crate::tasks::boxed(ep.run(listener)));
    Ok(())
}

/// The MQTT endpoint's TLS from the PEM files `cert` and `key` (both or neither).
#[cfg(feature = "voice")]
pub(super) fn mqtt_tls(cert: &str, key: &str) -> anyhow::Result<Option<tokio_rustls::TlsAcceptor>> {
    use anyhow::{Context, bail};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    match (cert.is_empty(), key.is_empty()) {
        (true, true) => return Ok(None),
        (false, false) => {}
        _ => bail!("xiaozhi.mqtt_tls_cert and xiaozhi.mqtt_tls_key go together: set both, or neither"),
    }
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .with_context(|| format!("xiaozhi.mqtt_tls_cert: {cert} is not a readable PEM certificate chain"))?;
    if chain.is_empty() {
        bail!("xiaozhi.mqtt_tls_cert: {cert} holds no `BEGIN CERTIFICATE` block");
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("xiaozhi.mqtt_tls_key: {key} is not a readable PEM private key"))?;
    let config = rustls::ServerConfig::builder_with_provider(chela_net::tls_provider())
        .with_safe_default_protocol_versions()
        .context("TLS setup")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context(
            "xiaozhi.mqtt_tls_cert and xiaozhi.mqtt_tls_key do not make a TLS identity (is the key the certificate's?)",
        )?;
    Ok(Some(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config))))
}

/// Whether an OTA answer hands out MQTT: the device's own transport (`chela device transport`),
/// else `xiaozhi.transport`. The endpoint starts on the first device that needs it when the
/// setting is websocket; if it cannot listen, the device is told to use the WebSocket.
async fn hands_out_mqtt(gw: &std::sync::Arc<Gateway>, own: Option<crate::devices::Transport>) -> bool {
    let setting = gw.daemon.config().get(keys::XIAOZHI_TRANSPORT) == "mqtt";
    if !own.map_or(setting, |t| t == crate::devices::Transport::Mqtt) {
        return false;
    }
    #[cfg(feature = "voice")]
    if gw.mqtt.get().is_some() {
        return true;
    }
    // One start at a time: the second device's check finds the endpoint the first one started.
    static STARTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = STARTING.lock().await;
    #[cfg(feature = "voice")]
    if gw.mqtt.get().is_some() {
        return true;
    }
    #[cfg(feature = "voice")]
    let started = serve_mqtt(gw).await;
    #[cfg(not(feature = "voice"))]
    let started: anyhow::Result<()> = Err(anyhow::anyhow!("this Chela was built without the `voice` feature"));
    match started {
        Ok(()) => true,
        Err(e) => {
            chela_log::warn!("xiaozhi: a device is set to MQTT, which cannot be served ({e:#}); it gets the WebSocket");
            false
        }
    }
}

/// The OTA answer's `mqtt` block when the MQTT endpoint is up; the password goes with a token
/// just issued (once), as it is derived from it.
#[cfg(feature = "voice")]
fn mqtt_block(gw: &Gateway, headers: &HeaderMap, id: &str, client_id: &str, token: Option<&str>) -> Option<ota::Mqtt> {
    use crate::channels::xiaozhi::mqtt;
    let (endpoint, on) = mqtt_public(gw, headers);
    on.then(|| ota::Mqtt {
        endpoint,
        client_id: mqtt::client_id(id, client_id),
        username: id.to_owned(),
        password: token.and_then(|t| mqtt::password_for_token(id, client_id, t)),
        publish_topic: mqtt::PUBLISH_TOPIC.to_owned(),
        subscribe_topic: mqtt::subscribe_topic(id),
        keepalive: mqtt::KEEPALIVE,
    })
}

#[cfg(not(feature = "voice"))]
fn mqtt_block(_: &Gateway, _: &HeaderMap, _: &str, _: &str, _: Option<&str>) -> Option<ota::Mqtt> {
    None
}

/// `host:port` MQTT devices dial (`xiaozhi.mqtt_public`, else the bound address, or the host the
/// device reached the gateway at when that is a wildcard), and whether MQTT is served at all.
#[cfg(feature = "voice")]
fn mqtt_public(gw: &Gateway, headers: &HeaderMap) -> (String, bool) {
    let Some(addrs) = gw.mqtt.get() else { return (String::new(), false) };
    let public = gw.daemon.config().get(keys::XIAOZHI_MQTT_PUBLIC).trim().to_owned();
    if !public.is_empty() {
        return (public, true);
    }
    if !addrs.tcp.ip().is_unspecified() {
        return (addrs.tcp.to_string(), true);
    }
    let host = headers.get(HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let name = match host.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    if name.is_empty() {
        return (addrs.tcp.to_string(), true);
    }
    (format!("{name}:{}", addrs.tcp.port()), true)
}

/// Whether `path` is one of the device endpoints.
pub fn is_device_path(path: &str) -> bool {
    path == "/xiaozhi/ota" || path.starts_with("/xiaozhi/ota/")
}

/// Answers a request to a device endpoint.
pub async fn route(
    gw: &std::sync::Arc<Gateway>,
    peer: std::net::SocketAddr,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Resp, ApiError> {
    let cfg = gw.daemon.config();
    if !cfg.bool(keys::XIAOZHI_ENABLED) {
        return Err(ApiError::NotFound("xiaozhi devices are off here (xiaozhi.enabled = false)".into()));
    }
    let store = Devices::open(gw.daemon.workspace());
    match (method, path) {
        (&Method::GET | &Method::POST, "/xiaozhi/ota" | "/xiaozhi/ota/") => {
            let (id, client_id) = device_headers(headers)?;
            let client = client_id.clone();
            let info: SystemInfo = ota::parse_body(&body).map_err(body_error)?;
            let info = device_info(headers, info);
            let current = info.app_version.clone();
            let version = current.clone();
            let max_pending = cfg.usize(keys::XIAOZHI_MAX_PENDING);
            let now = gw.daemon.clock().unix_secs_u64();
            let rand = random::<48>().map_err(store_error)?;
            let bearer = bearer(headers);
            let source = peer.ip().to_canonical().to_string();
            let limiter = std::sync::Arc::clone(gw);
            let edit = move || {
                store.edit(|s| {
                    let may_issue = || {
                        if limiter.onboarding.take_code_slot(Instant::now()) {
                            return Ok(());
                        }
                        Err(DeviceError::Busy(format!(
                            "more than {NEW_CODES_PER_MINUTE} new devices asked for a code this minute; try again in a minute"
                        )))
                    };
                    let check = Check {
                        id: &id,
                        client_id: &client_id,
                        info,
                        bearer: bearer.as_deref(),
                        source: &source,
                        now,
                    };
                    let admission = s.ota(check, max_pending, &rand, may_issue)?;
                    Ok((admission, s.firmware_for(&id, &current).cloned(), id.clone(), s.transport_of(&id)))
                })
            };
            let (admission, firmware, id, transport) = crate::tasks::blocking(edit)
                .await
                .map_err(|e| ApiError::internal("the device store", e))?
                .map_err(store_error)?;
            let mqtt = hands_out_mqtt(gw, transport).await;
            let body = answer(gw, headers, (&id, &client), admission, firmware.as_ref(), &version, mqtt);
            Ok(json(StatusCode::OK, &serde_json::to_value(body).unwrap_or_default()))
        }
        (&Method::POST, "/xiaozhi/ota/activate") => {
            let (id, client_id) = device_headers(headers)?;
            let req: ActivateRequest = ota::parse_body(&body).map_err(body_error)?;
            let state = blocking(store.clone(), Devices::load).await?;
            match state.activate(&id, &client_id, req.challenge.as_deref(), gw.daemon.clock().unix_secs_u64()) {
                Activation::Done => Ok(json(StatusCode::OK, &serde_json::json!({"status": "activated"}))),
                Activation::Waiting => Ok(json(
                    StatusCode::ACCEPTED,
                    &serde_json::json!({"status": "waiting", "message": "waiting for the owner to approve the code"}),
                )),
                Activation::WrongChallenge => {
                    Err(ApiError::BadRequest("the challenge is not the one this device was given".into()))
                }
                Activation::Unknown => Err(ApiError::Forbidden(
                    "this device is not waiting for activation; run the OTA check (restart the device) to get a code"
                        .into(),
                )),
            }
        }
        (&Method::GET, p) if p.starts_with("/xiaozhi/ota/download/") => {
            download(store, &p["/xiaozhi/ota/download/".len()..]).await
        }
        _ => Err(ApiError::NotFound(format!("there is nothing at {path}; devices use /xiaozhi/ota/"))),
    }
}

/// The token an OTA check presents as proof, if any. The firmware sends none there; a client
/// that does may rotate its token.
fn bearer(headers: &HeaderMap) -> Option<String> {
    let raw = headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()?;
    let token = raw.trim().strip_prefix("Bearer ")?.trim();
    (!token.is_empty() && token.len() <= 256).then(|| token.to_owned())
}

/// The device's `Device-Id` (a MAC) and `Client-Id`, both required.
fn device_headers(headers: &HeaderMap) -> Result<(String, String), ApiError> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or("");
    let raw = get("device-id");
    let id = normalize_id(raw).ok_or_else(|| {
        ApiError::BadRequest(if raw.is_empty() {
            "the Device-Id header is missing: a xiaozhi device sends its Wi-Fi MAC there".into()
        } else {
            format!(
                "the Device-Id header `{}` is not a MAC address like aa:bb:cc:dd:ee:ff",
                raw.chars().take(40).collect::<String>()
            )
        })
    })?;
    let client_id = get("client-id");
    if !valid_client_id(client_id) {
        return Err(ApiError::BadRequest(
            "the Client-Id header is missing or not 1 to 64 visible characters (the firmware sends a UUID)".into(),
        ));
    }
    Ok((id, client_id.to_owned()))
}

/// What the device says about itself, from its body and `User-Agent` (`<board>/<version>`).
fn device_info(headers: &HeaderMap, body: SystemInfo) -> Info {
    let ua = headers.get(USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
    let (ua_board, ua_version) = ua.split_once('/').unwrap_or((ua, ""));
    let lang = headers.get("accept-language").and_then(|v| v.to_str().ok()).unwrap_or("");
    let board = body.board.unwrap_or_default();
    let app = body.application.unwrap_or_default();
    Info {
        board: board.kind.filter(|s| !s.is_empty()).unwrap_or_else(|| ua_board.to_owned()),
        name: board.name.unwrap_or_default(),
        app_version: app.version.filter(|s| !s.is_empty()).unwrap_or_else(|| ua_version.to_owned()),
        chip: body.chip_model_name.unwrap_or_default(),
        language: body.language.filter(|s| !s.is_empty()).unwrap_or_else(|| lang.to_owned()),
        serial: headers.get("serial-number").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned(),
    }
    .clipped()
}

/// `scheme://authority` the device reached this gateway at: from `xiaozhi.public_url` when set
/// (`ws` → `http`), else `gateway.listen`, or the `Host` the device used when the listen
/// address is a wildcard (0.0.0.0), which no device can dial.
pub(super) fn base(gw: &Gateway, headers: &HeaderMap) -> (String, String) {
    let cfg = gw.daemon.config();
    let public = cfg.get(keys::XIAOZHI_PUBLIC_URL);
    if let Some((scheme, rest)) = public.split_once("://") {
        let authority = rest.split('/').next().unwrap_or(rest);
        let http = if scheme == "wss" { "https" } else { "http" };
        return (public.to_owned(), format!("{http}://{authority}"));
    }
    let authority = if gw.listen.ip().is_unspecified() {
        headers
            .get(HOST)
            .and_then(|v| v.to_str().ok())
            .filter(|h| !h.is_empty())
            .map_or_else(|| gw.listen.to_string(), str::to_owned)
    } else {
        gw.listen.to_string()
    };
    (format!("ws://{authority}/xiaozhi/v1/"), format!("http://{authority}"))
}

/// The OTA answer.
fn answer(
    gw: &Gateway,
    headers: &HeaderMap,
    (id, client_id): (&str, &str),
    admission: Admission,
    firmware: Option<&crate::devices::FirmwareOffer>,
    current: &str,
    mqtt: bool,
) -> ota::Response {
    let (ws_url, http_base) = base(gw, headers);
    let now_ms = gw.daemon.clock().unix_millis();
    let zone = crate::scheduler::user_zone(&gw.daemon.config()).unwrap_or_else(|_| chela_core::zone::Zone::utc());
    let offset_min = zone.offset_at(now_ms / 1000) / 60;
    let firmware = match firmware {
        Some(f) => ota::Firmware {
            version: f.version.clone(),
            url: format!("{http_base}/xiaozhi/ota/download/{}", f.file),
            force: 0,
        },
        None => ota::Firmware { version: current.to_owned(), url: String::new(), force: 0 },
    };
    let mut out = ota::Response {
        server_time: Some(ota::ServerTime {
            timestamp: u64::try_from(now_ms).unwrap_or(0),
            timezone_offset: offset_min,
        }),
        firmware: Some(firmware),
        websocket: None,
        mqtt: None,
        activation: None,
    };
    match admission {
        Admission::Bound { token } => {
            match mqtt.then(|| mqtt_block(gw, headers, id, client_id, token.as_deref())).flatten() {
                Some(block) => out.mqtt = Some(block),
                None => out.websocket = Some(ota::Websocket { url: ws_url, token, version: WS_PROTOCOL_VERSION }),
            }
        }
        Admission::Waiting { code, challenge } => {
            chela_log::info!(device = id, "xiaozhi: a device waits for approval (`chela device approve {code}`)");
            out.activation = Some(ota::Activation {
                message: format!("Chela\n{code}"),
                code,
                challenge,
                timeout_ms: crate::devices::ACTIVATION_TIMEOUT_MS,
            });
        }
    }
    out
}

fn body_error(e: ota::BodyError) -> ApiError {
    match e {
        ota::BodyError::TooLarge { .. } => ApiError::TooLarge(e.to_string()),
        ota::BodyError::NotJson(_) => ApiError::BadRequest(e.to_string()),
    }
}

fn store_error(e: DeviceError) -> ApiError {
    match e {
        DeviceError::Rule(m) => ApiError::BadRequest(m),
        DeviceError::Busy(m) => ApiError::Busy(m),
        DeviceError::Conflict(m) => ApiError::Conflict(m),
        DeviceError::Store(m) => {
            chela_log::error!("xiaozhi: {m}");
            ApiError::Busy("the device store cannot be read; the owner has been told in the log".into())
        }
    }
}

async fn blocking<T: Send + 'static>(
    store: Devices,
    f: impl FnOnce(&Devices) -> Result<T, DeviceError> + Send + 'static,
) -> Result<T, ApiError> {
    crate::tasks::blocking(move || f(&store))
        .await
        .map_err(|e| ApiError::internal("the device store", e))?
        .map_err(store_error)
}

/// Serves the offered firmware image, if `name` is exactly its file name, read as the device
/// takes it (the body is the connection's: nothing reads on after it is gone).
async fn download(store: Devices, name: &str) -> Result<Resp, ApiError> {
    let missing = || ApiError::NotFound("no firmware of that name is offered".into());
    if !crate::devices::plain_bin_name(name) {
        return Err(missing());
    }
    let state = blocking(store.clone(), Devices::load).await?;
    let Some(offer) = state.firmware.filter(|f| f.file == name) else { return Err(missing()) };
    let path = store.firmware_dir().join(&offer.file);
    let file = tokio::fs::File::open(&path).await.map_err(|_| missing())?;
    let meta = file.metadata().await.map_err(|e| ApiError::internal("the firmware file", e))?;
    if !meta.is_file() || meta.len() > MAX_FIRMWARE_BYTES {
        return Err(ApiError::internal("the firmware file", "not a regular file within the size limit"));
    }
    let len = meta.len();
    let mut resp = Response::new(crate::serve::stream::FileBody::new(file, len).boxed());
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    resp.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(len));
    Ok(resp)
}

/// The dashboard's `/api/devices` (behind the gateway's auth): the list, approve, deny (a
/// waiting code, or `all` of them), revoke.
pub async fn api(gw: &std::sync::Arc<Gateway>, method: &Method, path: &str, body: &[u8]) -> Result<Resp, ApiError> {
    #[derive(serde::Deserialize)]
    struct CodeReq {
        code: String,
    }
    #[derive(serde::Deserialize)]
    struct IdReq {
        id: String,
    }
    let parse = |what: &str| -> Result<serde_json::Value, ApiError> {
        serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("the body must be {what}: {e}")))
    };
    let store = Devices::open(gw.daemon.workspace());
    let now = gw.daemon.clock().unix_secs_u64();
    let value = match (method, path) {
        (&Method::GET, "/devices") => {
            let zone =
                crate::scheduler::user_zone(&gw.daemon.config()).unwrap_or_else(|_| chela_core::zone::Zone::utc());
            listing(&blocking(store, Devices::load).await?, now, &zone)
        }
        (&Method::POST, "/devices/approve") => {
            let r: CodeReq = serde_json::from_value(parse(r#"{"code": "123456"}"#)?)
                .map_err(|e| ApiError::BadRequest(format!(r#"the body must be {{"code": "123456"}}: {e}"#)))?;
            let d = blocking(store, move |s| s.edit(|st| st.approve(&r.code, now))).await?;
            serde_json::json!({"id": d.id, "board": d.info.board, "state": "approved"})
        }
        (&Method::POST, "/devices/deny") => {
            let r: CodeReq =
                serde_json::from_value(parse(r#"{"code": "123456"} or {"code": "all"}"#)?).map_err(|e| {
                    ApiError::BadRequest(format!(r#"the body must be {{"code": "123456"}} or {{"code": "all"}}: {e}"#))
                })?;
            if r.code.trim() == "all" {
                let gone = blocking(store, move |s| s.edit(|st| Ok(st.deny_all()))).await?;
                serde_json::json!({"denied": gone.len(), "state": "denied"})
            } else {
                let p = blocking(store, move |s| s.edit(|st| st.deny(&r.code))).await?;
                serde_json::json!({"id": p.id, "board": p.info.board, "state": "denied"})
            }
        }
        (&Method::POST, "/devices/revoke") => {
            let r: IdReq = serde_json::from_value(parse(r#"{"id": "aa:bb:cc:dd:ee:ff"}"#)?)
                .map_err(|e| ApiError::BadRequest(format!(r#"the body must be {{"id": "aa:bb:cc:dd:ee:ff"}}: {e}"#)))?;
            let d = blocking(store, move |s| s.edit(|st| st.revoke(&r.id))).await?;
            serde_json::json!({"id": d.id, "state": "revoked"})
        }
        _ => return Err(ApiError::NotFound(format!("there is nothing at /api{path} for {method}"))),
    };
    Ok(json(StatusCode::OK, &value))
}

/// The store as the dashboard shows it: no token hashes; times also as wall-clock time in the
/// user's zone (`*_local`, as the jobs listing gives them), so the page does no zone maths.
pub fn listing(s: &crate::devices::DeviceState, now: u64, zone: &chela_core::zone::Zone) -> serde_json::Value {
    let local = |t: u64| crate::scheduler::local_time(i64::try_from(t).unwrap_or(i64::MAX), zone);
    let devices: Vec<serde_json::Value> = s
        .devices
        .iter()
        .map(|d| {
            serde_json::json!({
                "id": d.id, "board": d.info.board, "name": d.info.name, "app_version": d.info.app_version,
                "state": d.state, "token_issued": !d.token_sha256.is_empty(), "created": d.created, "last_seen": d.last_seen,
                "chip": d.info.chip, "last_seen_local": local(d.last_seen),
            })
        })
        .collect();
    let pending: Vec<serde_json::Value> = s
        .pending
        .iter()
        .filter(|p| p.expires_at > now)
        .map(|p| {
            serde_json::json!({
                "id": p.id, "board": p.info.board, "app_version": p.info.app_version, "code": p.code,
                "expires_at": p.expires_at, "last_seen": p.last_seen, "name": p.info.name, "chip": p.info.chip,
                "expires_local": local(p.expires_at), "last_seen_local": local(p.last_seen), "source": p.source,
            })
        })
        .collect();
    serde_json::json!({"devices": devices, "pending": pending, "firmware": s.firmware, "zone": zone.name()})
}
