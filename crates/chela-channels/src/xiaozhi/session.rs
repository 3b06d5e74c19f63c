//! One device's conversation, whatever carries it: the WebSocket ([`super::connection`]) or
//! MQTT + UDP ([`super::mqtt`]). A [`Session`] turns the device's messages and audio into the
//! voice [`Pipeline`] and the daemon's turns, and what those yield into messages and audio
//! frames written through a [`Transport`]. The carriers only move bytes: their own framing,
//! timeouts and closing stay with them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chela_proto::xiaozhi::message::{
    self, Hello, ListenMode, ListenState, Message as XzMessage, MessageError, Stt, Tts, TtsState,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::turn::{self, Running, alert};
use super::{CONTROL_QUEUE, DeviceHello, Host, MAX_BAD_FRAMES, MCP_QUEUE, McpLink, attach_mcp};
use crate::voice::VoiceConfig;
use crate::voice::pipeline::{Mode, Output, Pipeline, Providers};

/// How a carrier ends a conversation it was asked to close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Normal,
    /// The device broke the protocol.
    Policy,
    /// A message over the size limit.
    Size,
    /// Chela cannot serve the conversation (the voice providers).
    Error,
    /// Chela is stopping.
    Away,
}

/// Why a conversation (or its carrier) stops.
#[derive(Debug)]
pub enum Stop {
    /// The device left or the carrier failed: nothing more to send.
    Gone,
    /// The device said goodbye.
    Goodbye,
    /// Close with this reason and text.
    Close(Reason, &'static str),
}

/// What carries a conversation: the session writes through it and never sees its framing.
pub(crate) trait Transport: Send {
    /// The `transport` a device's hello names for this carrier.
    fn name(&self) -> &'static str;
    /// The answer to an accepted `hello` for session `session_id`; a refusal ends the carrier.
    fn hello_answer(&mut self, session_id: &str, hello: &Hello) -> Result<String, Stop>;
    /// Writes one JSON message.
    async fn send_text(&mut self, text: String) -> Result<(), Stop>;
    /// Writes one downlink Opus packet of the reply being spoken.
    async fn send_audio(&mut self, opus: &[u8]) -> Result<(), Stop>;
    /// A reply starts being spoken: its audio timestamps start again from 0.
    fn reply_starts(&mut self);
}

/// Something the session has to write, from the pipeline or a running turn.
pub(crate) enum Work {
    Output(Output),
    Control(Value),
    Mcp(Value),
}

/// Session ids handed out by this process.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

pub(crate) fn session_id() -> String {
    // Unique per process and not guessable across restarts: the id only labels messages.
    let rand = crate::devices::random::<4>().map(hex4).unwrap_or_default();
    format!("{}{:x}", rand, NEXT_SESSION.fetch_add(1, Ordering::Relaxed))
}

fn hex4(b: [u8; 4]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One device's conversation state (owned by its carrier's task).
pub(crate) struct Session {
    host: Host,
    pub device: String,
    /// What `initialize` offers the device as its camera's endpoint (see [`DeviceHello`]).
    vision: Option<(String, String)>,
    pub session_id: String,
    pipeline: Option<Pipeline>,
    turn: Option<Running>,
    control: mpsc::Sender<Value>,
    control_rx: mpsc::Receiver<Value>,
    mcp: Option<Box<dyn McpLink>>,
    mcp_tx: mpsc::Sender<Value>,
    mcp_rx: mpsc::Receiver<Value>,
    bad_frames: u32,
    /// The device shows as online (`chela status`) while its session lasts.
    _online: crate::channels::live::Online,
}

impl Session {
    pub fn new(host: Host, device: String, vision: Option<(String, String)>) -> Session {
        let (control, control_rx) = mpsc::channel(CONTROL_QUEUE);
        let (mcp_tx, mcp_rx) = mpsc::channel(MCP_QUEUE);
        Session {
            _online: host.daemon.live().device_online(&device),
            host,
            device,
            vision,
            session_id: session_id(),
            pipeline: None,
            turn: None,
            control,
            control_rx,
            mcp: None,
            mcp_tx,
            mcp_rx,
            bad_frames: 0,
        }
    }

    /// Whether the device's hello was answered (the pipeline runs).
    pub fn started(&self) -> bool {
        self.pipeline.is_some()
    }

    /// The next thing to write; pending while there is none.
    pub async fn next(&mut self) -> Work {
        let output = async {
            match &mut self.pipeline {
                Some(p) => p.next_output().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            out = output => Work::Output(out),
            Some(v) = self.control_rx.recv() => Work::Control(v),
            Some(v) = self.mcp_rx.recv() => Work::Mcp(v),
        }
    }

    pub async fn handle<T: Transport>(&mut self, work: Work, t: &mut T) -> Result<(), Stop> {
        match work {
            Work::Output(out) => self.on_output(out, t).await,
            Work::Control(v) => t.send_text(v.to_string()).await,
            Work::Mcp(payload) => {
                let v = json!({"session_id": self.session_id, "type": "mcp", "payload": payload});
                t.send_text(v.to_string()).await
            }
        }
    }

    /// Ends the running turn and its reply (the device left or said goodbye).
    pub fn end_turn(&mut self) {
        self.turn = None;
    }

    pub async fn on_text<T: Transport>(&mut self, text: &str, t: &mut T) -> Result<(), Stop> {
        let msg = match message::parse(text) {
            Ok(m) => m,
            Err(MessageError::UnknownType(ty)) => {
                chela_log::debug!(device = %self.device, "xiaozhi: ignored a `{}` message", clip(&ty));
                return Ok(());
            }
            Err(e) => {
                chela_log::debug!(device = %self.device, "xiaozhi: a bad text message: {e}");
                return self.bad_frame();
            }
        };
        self.bad_frames = 0;
        if let XzMessage::Hello(hello) = msg {
            return self.on_hello(&hello, t).await;
        }
        let Some(pipeline) = &mut self.pipeline else {
            chela_log::debug!(device = %self.device, "xiaozhi: a message before hello was ignored");
            return Ok(());
        };
        match msg {
            XzMessage::Listen(l) => match l.state {
                ListenState::Start => pipeline.handle_listen_start(match l.mode.unwrap_or(ListenMode::Auto) {
                    ListenMode::Auto => Mode::Auto,
                    ListenMode::Manual => Mode::Manual,
                    ListenMode::Realtime => Mode::Realtime,
                }),
                ListenState::Stop => pipeline.handle_listen_stop(),
                ListenState::Detect => match l.text.as_deref().map(str::trim) {
                    Some(t) if !t.is_empty() => pipeline.handle_detect(&clip_text(t)),
                    _ => {}
                },
            },
            XzMessage::Abort(_) => {
                pipeline.handle_abort();
                // Barge-in: the turn that was to be spoken stops too.
                self.turn = None;
            }
            XzMessage::Mcp(m) => match &self.mcp {
                Some(link) => link.deliver(m.payload),
                None => {
                    chela_log::debug!(device = %self.device, "xiaozhi: an mcp message was dropped (no device MCP client)")
                }
            },
            XzMessage::Goodbye(_) => return Err(Stop::Goodbye),
            other => {
                chela_log::debug!(device = %self.device, "xiaozhi: ignored a server-side message from a device: {:?}", kind(&other))
            }
        }
        Ok(())
    }

    async fn on_hello<T: Transport>(&mut self, hello: &Hello, t: &mut T) -> Result<(), Stop> {
        if let Some(name) = hello.transport.as_deref()
            && name != t.name()
        {
            chela_log::info!(device = %self.device, "xiaozhi: a hello for transport `{}` on {}; closed", clip(name), t.name());
            return Err(Stop::Close(
                Reason::Policy,
                if t.name() == "websocket" { "transport must be websocket" } else { "transport must be udp" },
            ));
        }
        let answer = t.hello_answer(&self.session_id, hello)?;
        if self.pipeline.is_none() {
            let cfg = self.host.daemon.config();
            let voice = Arc::new(VoiceConfig::from_settings(|k| cfg.get(k)));
            let http = match crate::app::http_client(&cfg) {
                Ok(h) => h,
                Err(e) => {
                    chela_log::warn!("xiaozhi: no HTTP client for the voice providers: {e:#}");
                    return Err(Stop::Close(Reason::Error, "the voice providers are not set up"));
                }
            };
            let providers = Arc::new(Providers::new(&http, &voice));
            match Pipeline::new(providers, voice) {
                Ok(p) => self.pipeline = Some(p),
                Err(e) => {
                    chela_log::warn!("xiaozhi: cannot start a voice pipeline: {e}");
                    return Err(Stop::Close(Reason::Error, "the voice pipeline cannot start"));
                }
            }
            if hello.features.as_ref().and_then(|f| f.mcp) == Some(true) {
                let who = DeviceHello {
                    device: self.device.clone(),
                    session_id: self.session_id.clone(),
                    vision: self.vision.clone(),
                };
                self.mcp = attach_mcp(&self.host, &who, self.mcp_tx.clone());
            }
        }
        t.send_text(answer).await
    }

    /// One uplink Opus packet.
    pub fn on_audio(&mut self, opus: &[u8]) -> Result<(), Stop> {
        let Some(pipeline) = &mut self.pipeline else { return Ok(()) };
        match pipeline.handle_audio(opus) {
            Ok(_) => {
                self.bad_frames = 0;
                Ok(())
            }
            Err(e) => {
                chela_log::debug!(device = %self.device, "xiaozhi: {e}");
                self.bad_frame()
            }
        }
    }

    /// A frame that is neither audio nor a message; too many in a row end the conversation.
    pub fn bad_frame(&mut self) -> Result<(), Stop> {
        self.bad_frames += 1;
        if self.bad_frames >= MAX_BAD_FRAMES {
            chela_log::info!(device = %self.device, "xiaozhi: {MAX_BAD_FRAMES} bad frames in a row; closed");
            return Err(Stop::Close(Reason::Policy, "too many frames that are neither audio nor a message"));
        }
        Ok(())
    }

    async fn say<T: Transport>(t: &mut T, msg: XzMessage) -> Result<(), Stop> {
        t.send_text(msg.to_json()).await
    }

    async fn on_output<T: Transport>(&mut self, out: Output, t: &mut T) -> Result<(), Stop> {
        let sid = Some(self.session_id.clone());
        match out {
            Output::Heard(text) => {
                Self::say(t, XzMessage::Stt(Stt { session_id: sid, text: text.clone() })).await?;
                // A new utterance cancels the running turn; `start_reply` cancels its speech.
                self.turn = None;
                let Some(pipeline) = &mut self.pipeline else { return Ok(()) };
                let writer = pipeline.start_reply();
                let ctx = turn::Ctx {
                    daemon: Arc::clone(&self.host.daemon),
                    device: self.device.clone(),
                    session_id: self.session_id.clone(),
                    control: self.control.clone(),
                };
                let tools = self.mcp.as_ref().map(|m| m.settled());
                self.turn = Some(turn::start(ctx, text, writer, tools));
                Ok(())
            }
            Output::TtsStart => {
                t.reply_starts();
                Self::say(t, XzMessage::Tts(Tts { session_id: sid, state: TtsState::Start, text: None })).await
            }
            Output::SentenceStart(text) => {
                let tts = Tts { session_id: sid, state: TtsState::SentenceStart, text: Some(text) };
                Self::say(t, XzMessage::Tts(tts)).await
            }
            Output::Frame(packet) => t.send_audio(&packet).await,
            Output::TtsStop => {
                Self::say(t, XzMessage::Tts(Tts { session_id: sid, state: TtsState::Stop, text: None })).await
            }
            Output::Problem { spoken, error } => {
                chela_log::warn!(device = %self.device, "xiaozhi: {error}");
                Self::say(t, XzMessage::Alert(alert(sid, spoken))).await
            }
        }
    }
}

fn kind(m: &XzMessage) -> &'static str {
    match m {
        XzMessage::Stt(_) => "stt",
        XzMessage::Llm(_) => "llm",
        XzMessage::Tts(_) => "tts",
        XzMessage::Alert(_) => "alert",
        XzMessage::System(_) => "system",
        _ => "other",
    }
}

pub(crate) fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

fn clip_text(s: &str) -> String {
    s.chars().take(super::MAX_DETECT_CHARS).collect()
}
