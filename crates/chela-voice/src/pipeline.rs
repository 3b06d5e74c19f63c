//! One device's voice pipeline: uplink Opus → VAD → ASR, and reply text → sentences → TTS →
//! Opus → paced downlink frames, with barge-in.
//!
//! Calling order (the WebSocket endpoint, one task per device, owns the `Pipeline`):
//! 1. `handle_listen_start(mode)` when the device starts listening, then `handle_audio(packet)`
//!    for each uplink Opus packet; `handle_listen_stop()` ends a `manual` utterance;
//!    `handle_detect(text)` is a typed utterance; `handle_abort()` is barge-in.
//! 2. Await [`Pipeline::next_output`] in the same `select!` loop as the socket (it is
//!    cancel-safe) and send what it yields: `Heard` is the recognised utterance (send `stt`
//!    and start a turn), the `Tts*` outputs and `Frame`s are the downlink, `Problem` a short
//!    message for the device.
//! 3. For a turn's reply, `start_reply()` gives a [`ReplyWriter`]; the turn pushes the streamed
//!    text into it (from its own task) and finishes it. Starting a new reply, a new utterance or
//!    `abort` cancels the running one: its TTS stops, queued audio is dropped at once, and its
//!    writer's `push` fails so the turn can stop too.
//!
//! Ordering guarantees: `TtsStart` comes before the first frame, each `SentenceStart(text)`
//! before that sentence's frames, and `TtsStop` after the device has had time to play the last
//! frame (or at once on abort). Frames follow the [`Pacer`]. Every queue is bounded:
//! [`SENTENCE_QUEUE`] sentences, [`FRAME_QUEUE`] downlink items (back-pressure reaches TTS),
//! [`EVENT_QUEUE`] ASR results, and an utterance is at most `max_utterance` long.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::{Instant, sleep_until};

use super::asr::AsrClient;
use super::opus::{Decoder, Encoder};
use super::pacer::{DEFAULT_BURST, Pacer};
use super::sentence::Splitter;
use super::tts::{Closed, PcmSink, Tts};
use super::vad::{Endpointer, Utterance};
use super::{UPLINK_RATE, VoiceConfig, VoiceError};
use chela_net::HttpClient;

/// Sentences waiting for TTS; a turn that writes faster waits.
pub const SENTENCE_QUEUE: usize = 16;
/// Downlink items (frames, sentence marks) made ahead of the pacer: ~2 s of audio.
pub const FRAME_QUEUE: usize = 32;
/// ASR results waiting to be read.
pub const EVENT_QUEUE: usize = 4;
/// Outputs queued inside the pipeline (each handler adds at most two).
const OUTBOX: usize = 8;
/// How long the uplink's decoder and VAD outlive the last audio packet when no speech is in
/// progress. They are most of a device's memory (the Opus decoder alone is about 175 KiB), and a
/// device connected but not listening should cost only its connection.
pub const EAR_IDLE: std::time::Duration = std::time::Duration::from_secs(10);

/// The device's listening mode, as in `listen start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The server's VAD ends each utterance; the mic is off while the device speaks.
    Auto,
    /// Push-to-talk: `listen stop` ends the utterance.
    Manual,
    /// Full duplex: the VAD ends utterances, and speech during a reply interrupts it.
    Realtime,
}

/// What the endpoint sends the device (or does), in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A recognised or typed utterance: send `stt` with it and run a turn.
    Heard(String),
    TtsStart,
    SentenceStart(String),
    /// One 60 ms Opus packet at 24 kHz.
    Frame(Bytes),
    TtsStop,
    /// A provider failed; `spoken` is the short message for the device, `error` the detail for the log.
    Problem {
        spoken: &'static str,
        error: VoiceError,
    },
}

/// What an uplink packet changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    Nothing,
    SpeechStarted,
    /// An utterance ended (silence, or the length limit) and went to ASR.
    SpeechEnded,
}

/// The providers, shared by every device's pipeline.
#[derive(Clone, Debug)]
pub struct Providers {
    asr: AsrClient,
    tts: Tts,
}

impl Providers {
    pub fn new(http: &HttpClient, cfg: &VoiceConfig) -> Providers {
        Providers { asr: AsrClient::new(http.clone(), cfg.asr.clone()), tts: Tts::new(http.clone(), cfg.tts.clone()) }
    }
}

pub(crate) enum Downlink {
    Sentence(String),
    Frame(Bytes),
    Failed(VoiceError),
    End,
}

struct Reply {
    task: AbortHandle,
    rx: mpsc::Receiver<Downlink>,
    /// Taken from `rx` but not yet due (cancel safety: never held across an await).
    pending: Option<Downlink>,
    started: bool,
    ended: bool,
}

impl Drop for Reply {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct AsrDone {
    id: u64,
    result: Result<String, VoiceError>,
}

/// The uplink's state while the device sends audio: made by its first packet, dropped at
/// `listen stop` or after [`EAR_IDLE`] without audio outside an utterance.
struct Ear {
    decoder: Decoder,
    endpointer: Endpointer,
    last_audio: Instant,
}

pub struct Pipeline {
    providers: Arc<Providers>,
    cfg: Arc<VoiceConfig>,
    ear: Option<Box<Ear>>,
    mode: Option<Mode>,
    utterance: u64,
    asr_task: Option<AbortHandle>,
    events_tx: mpsc::Sender<AsrDone>,
    events_rx: mpsc::Receiver<AsrDone>,
    reply: Option<Reply>,
    pacer: Pacer,
    outbox: VecDeque<Output>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").field("mode", &self.mode).field("speaking", &self.reply.is_some()).finish()
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        if let Some(t) = self.asr_task.take() {
            t.abort();
        }
    }
}

impl Pipeline {
    pub fn new(providers: Arc<Providers>, cfg: Arc<VoiceConfig>) -> Result<Pipeline, VoiceError> {
        let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);
        Ok(Pipeline {
            ear: None,
            providers,
            cfg,
            mode: None,
            utterance: 0,
            asr_task: None,
            events_tx,
            events_rx,
            reply: None,
            pacer: Pacer::new(DEFAULT_BURST),
            outbox: VecDeque::with_capacity(OUTBOX),
        })
    }

    pub fn mode(&self) -> Option<Mode> {
        self.mode
    }

    /// Whether a reply is being spoken.
    pub fn speaking(&self) -> bool {
        self.reply.is_some()
    }

    /// Whether the uplink's decoder and VAD exist (they are made by audio, see [`EAR_IDLE`]).
    pub fn listening_state(&self) -> bool {
        self.ear.is_some()
    }

    pub fn handle_listen_start(&mut self, mode: Mode) {
        self.mode = Some(mode);
        if let Some(ear) = &mut self.ear {
            Self::start(&mut ear.endpointer, mode, &self.cfg);
        }
    }

    fn start(endpointer: &mut Endpointer, mode: Mode, cfg: &VoiceConfig) {
        match mode {
            Mode::Manual => endpointer.start_manual(),
            Mode::Auto | Mode::Realtime => endpointer.start_auto(cfg.silence),
        }
    }

    /// `listen stop`: ends a manual utterance (in the other modes the VAD decides; the
    /// device stops sending audio either way).
    pub fn handle_listen_stop(&mut self) {
        if self.mode == Some(Mode::Manual)
            && let Some(u) = self.ear.as_mut().and_then(|e| e.endpointer.take())
        {
            self.utterance_ended(u);
        }
        self.mode = None;
        // The device stops sending audio until its next `listen start`.
        self.ear = None;
    }

    /// One uplink Opus packet. A bad packet is an error for the caller to count (the pipeline
    /// is unchanged by it); audio outside listening is ignored.
    pub fn handle_audio(&mut self, packet: &[u8]) -> Result<Heard, VoiceError> {
        let ear = match &mut self.ear {
            Some(ear) => ear,
            None => {
                let mut endpointer = Endpointer::new(self.cfg.silence, self.cfg.max_utterance);
                if let Some(mode) = self.mode {
                    Self::start(&mut endpointer, mode, &self.cfg);
                }
                let ear = Ear { decoder: Decoder::new(UPLINK_RATE)?, endpointer, last_audio: Instant::now() };
                self.ear.insert(Box::new(ear))
            }
        };
        ear.last_audio = Instant::now();
        let pcm = ear.decoder.decode(packet)?;
        let Some(mode) = self.mode else { return Ok(Heard::Nothing) };
        let outcome = ear.endpointer.push(pcm);
        if outcome.started && mode == Mode::Realtime {
            // Barge-in by voice: the device cancels its own echo (AEC) in this mode.
            self.handle_abort();
        }
        if let Some(u) = outcome.ended {
            self.utterance_ended(u);
            return Ok(Heard::SpeechEnded);
        }
        Ok(if outcome.started { Heard::SpeechStarted } else { Heard::Nothing })
    }

    /// `listen detect` with text: an utterance that skips ASR.
    pub fn handle_detect(&mut self, text: &str) {
        self.cancel_utterance();
        self.handle_abort();
        self.push_out(Output::Heard(text.to_owned()));
    }

    /// `abort`: stop speaking now. Queued audio is dropped; `TtsStop` follows if `TtsStart` went out.
    pub fn handle_abort(&mut self) {
        if let Some(reply) = self.reply.take() {
            self.pacer.reset();
            if reply.started {
                self.push_out(Output::TtsStop);
            }
        }
    }

    /// A new reply; the running one (if any) is cancelled. Push the reply's text into the writer.
    pub fn start_reply(&mut self) -> ReplyWriter {
        self.handle_abort();
        let (sentence_tx, sentence_rx) = mpsc::channel(SENTENCE_QUEUE);
        let (frame_tx, frame_rx) = mpsc::channel(FRAME_QUEUE);
        let tts = self.providers.tts.clone();
        let task = tokio::spawn(speak(tts, sentence_rx, frame_tx)).abort_handle();
        self.reply = Some(Reply { task, rx: frame_rx, pending: None, started: false, ended: false });
        ReplyWriter { splitter: Splitter::default(), tx: sentence_tx }
    }

    /// A reply whose downlink items come from `rx` instead of a speaker task (tests).
    #[cfg(test)]
    pub(crate) fn start_reply_from(&mut self, rx: mpsc::Receiver<Downlink>) {
        self.handle_abort();
        let task = tokio::spawn(async {}).abort_handle();
        self.reply = Some(Reply { task, rx, pending: None, started: false, ended: false });
    }

    /// The next thing to send the device. Cancel-safe: dropping the future loses nothing.
    pub async fn next_output(&mut self) -> Output {
        loop {
            if let Some(out) = self.outbox.pop_front() {
                return out;
            }
            let now = Instant::now();
            let mut wait_until = None;
            if let Some(reply) = &mut self.reply
                && let Some(item) = reply.pending.take()
            {
                if !reply.started {
                    reply.started = true;
                    reply.pending = Some(item);
                    return Output::TtsStart;
                }
                match item {
                    Downlink::Frame(frame) => {
                        let at = self.pacer.next_send(now);
                        if at <= now {
                            self.pacer.sent(now);
                            return Output::Frame(frame);
                        }
                        reply.pending = Some(Downlink::Frame(frame));
                        wait_until = Some(at);
                    }
                    Downlink::Sentence(text) => return Output::SentenceStart(text),
                    Downlink::Failed(error) => return Output::Problem { spoken: error.spoken(), error },
                    Downlink::End => {
                        // Stop once the device has played what it holds.
                        let drained = self.pacer.drained_at().unwrap_or(now);
                        if drained <= now {
                            self.reply = None;
                            self.pacer.reset();
                            return Output::TtsStop;
                        }
                        reply.pending = Some(Downlink::End);
                        wait_until = Some(drained);
                    }
                }
            }
            let reply = &mut self.reply;
            let events = &mut self.events_rx;
            // An utterance in progress keeps its ear: what was heard must reach ASR whole.
            let ear_idle = self.ear.as_ref().filter(|e| !e.endpointer.in_speech()).map(|e| e.last_audio + EAR_IDLE);
            tokio::select! {
                () = sleep_until(ear_idle.unwrap_or(now)), if ear_idle.is_some() => self.ear = None,
                Some(done) = events.recv() => self.asr_done(done),
                item = next_item(reply), if wait_until.is_none() => {
                    if let Some(r) = &mut self.reply {
                        // A speaker task that ended without `End` was cancelled; close the reply.
                        r.pending = Some(item.unwrap_or(Downlink::End));
                        r.ended = matches!(r.pending, Some(Downlink::End));
                    }
                }
                () = sleep_until(wait_until.unwrap_or(now)), if wait_until.is_some() => {}
            }
        }
    }

    fn asr_done(&mut self, done: AsrDone) {
        if done.id != self.utterance {
            return;
        }
        self.asr_task = None;
        match done.result {
            Ok(text) if text.is_empty() => {}
            Ok(text) => self.push_out(Output::Heard(text)),
            Err(error) => {
                chela_log::warn!(%error, "voice: speech recognition failed");
                self.push_out(Output::Problem { spoken: error.spoken(), error });
            }
        }
    }

    fn utterance_ended(&mut self, u: Utterance) {
        self.cancel_utterance();
        self.handle_abort();
        if u.cut {
            chela_log::info!(
                seconds = u.pcm.len() / UPLINK_RATE as usize,
                "voice: an utterance reached the length limit and was cut"
            );
        }
        let id = self.utterance;
        let asr = self.providers.asr.clone();
        let tx = self.events_tx.clone();
        let task = tokio::spawn(async move {
            let result = asr.transcribe(&u.pcm).await;
            let _ = tx.send(AsrDone { id, result }).await;
        });
        self.asr_task = Some(task.abort_handle());
    }

    /// A newer utterance makes the running recognition moot.
    fn cancel_utterance(&mut self) {
        self.utterance += 1;
        if let Some(t) = self.asr_task.take() {
            t.abort();
        }
    }

    fn push_out(&mut self, out: Output) {
        // Each handler adds at most two outputs and the endpoint reads between handlers; the
        // bound is a guard against a caller that never reads.
        if self.outbox.len() >= OUTBOX {
            self.outbox.pop_front();
        }
        self.outbox.push_back(out);
    }
}

async fn next_item(reply: &mut Option<Reply>) -> Option<Downlink> {
    match reply {
        Some(r) if r.pending.is_none() && !r.ended => r.rx.recv().await,
        _ => std::future::pending().await,
    }
}

/// Writes a reply's text; sentences go to TTS as soon as they are complete.
#[derive(Debug)]
pub struct ReplyWriter {
    splitter: Splitter,
    tx: mpsc::Sender<String>,
}

impl ReplyWriter {
    /// Adds streamed text. Waits while TTS is behind; fails once the reply was cancelled.
    pub async fn push(&mut self, delta: &str) -> Result<(), Closed> {
        let mut done = Vec::new();
        self.splitter.push(delta, &mut |s| done.push(s));
        for s in done {
            self.tx.send(s).await.map_err(|_| Closed)?;
        }
        Ok(())
    }

    /// The reply is complete: the rest is spoken, then `TtsStop`.
    pub async fn finish(mut self) -> Result<(), Closed> {
        let mut done = Vec::new();
        self.splitter.finish(&mut |s| done.push(s));
        for s in done {
            self.tx.send(s).await.map_err(|_| Closed)?;
        }
        Ok(())
    }
}

/// The speaker task of one reply: each sentence through TTS into 60 ms Opus frames.
async fn speak(tts: Tts, mut sentences: mpsc::Receiver<String>, frames: mpsc::Sender<Downlink>) {
    let Ok(encoder) = Encoder::new() else {
        let _ = frames.send(Downlink::Failed(VoiceError::Codec("cannot make an Opus encoder".into()))).await;
        let _ = frames.send(Downlink::End).await;
        return;
    };
    let mut sink = FrameSink { encoder, tx: frames, packets: Vec::new() };
    while let Some(sentence) = sentences.recv().await {
        if sink.tx.send(Downlink::Sentence(sentence.clone())).await.is_err() {
            return;
        }
        let spoken = tts.speak(&sentence, &mut sink).await;
        let flushed = sink.finish().await;
        if let Err(error) = spoken.and(flushed.map_err(|_| VoiceError::Tts { reason: "cancelled".into() })) {
            chela_log::warn!(%error, "voice: speech synthesis failed");
            let _ = sink.tx.send(Downlink::Failed(error)).await;
            break;
        }
    }
    let _ = sink.tx.send(Downlink::End).await;
}

struct FrameSink {
    encoder: Encoder,
    tx: mpsc::Sender<Downlink>,
    packets: Vec<Bytes>,
}

impl FrameSink {
    /// Pads the sentence's last frame with silence and sends it.
    async fn finish(&mut self) -> Result<(), Closed> {
        let packets = &mut self.packets;
        self.encoder.finish(&mut |p| packets.push(p)).map_err(|_| Closed)?;
        self.send_packets().await
    }

    async fn send_packets(&mut self) -> Result<(), Closed> {
        for p in self.packets.drain(..) {
            self.tx.send(Downlink::Frame(p)).await.map_err(|_| Closed)?;
        }
        Ok(())
    }
}

impl PcmSink for FrameSink {
    async fn push(&mut self, pcm: &[i16]) -> Result<(), Closed> {
        let packets = &mut self.packets;
        self.encoder.push(pcm, &mut |p| packets.push(p)).map_err(|_| Closed)?;
        self.send_packets().await
    }
}

#[cfg(test)]
pub(crate) fn test_frame(sentence: Option<&str>) -> Downlink {
    match sentence {
        Some(s) => Downlink::Sentence(s.to_owned()),
        None => Downlink::Frame(Bytes::from_static(&[0xF8, 0xFF, 0xFE])),
    }
}

#[cfg(test)]
pub(crate) fn test_end() -> Downlink {
    Downlink::End
}
