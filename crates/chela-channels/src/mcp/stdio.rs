//! The stdio transport: one JSON-RPC message per line on stdin, one per line on stdout.
//!
//! Three tasks: a reader that cuts stdin into lines of at most [`MAX_LINE`] bytes (a longer
//! one is skipped to its end and answered with an error, never buffered whole), the loop here
//! that answers them, and a writer that owns stdout. Requests run concurrently, at most
//! [`MAX_IN_FLIGHT`] at once; past that the loop stops reading, so a flood waits in the pipe
//! rather than in memory. `notifications/cancelled` stops the named call; at the end of stdin
//! every request read before it is still answered, then the server exits. Batches are taken by
//! [`Server::batch`]. Every [`RELOAD_EVERY`] the settings files are looked at (as `chela run`
//! does) and the served tools compared; when they changed, an initialized handshake-era client
//! is sent `notifications/tools/list_changed`, and each open `subscriptions/listen` of a
//! 2026-07-28 client that asked for tool changes gets one stamped with its id. A connection
//! keeps at most [`MAX_LISTENS`] listens; `notifications/cancelled` naming one ends it (no
//! result is sent for it), and at the end of stdin each still open one gets its result, the
//! revision's sign that the server ended it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::{INTERNAL_ERROR, INVALID_REQUEST, Kind, LISTEN, Listen, PARSE_ERROR, Server, Session, classify, error};
use crate::daemon::Daemon;
use crate::turn::Cancel;

/// Longest line read; a longer one is answered with an error and skipped.
pub const MAX_LINE: usize = 4 * 1024 * 1024;
/// Requests answered at once.
pub const MAX_IN_FLIGHT: usize = 32;
/// Lines read ahead of the answering loop.
const READ_AHEAD: usize = 8;
/// Lines waiting for stdout.
const WRITE_QUEUE: usize = 64;
/// How often the settings are looked at and the served tools compared: a listening client
/// hears of a change well within a second.
pub const RELOAD_EVERY: Duration = Duration::from_millis(250);
/// `subscriptions/listen` streams open at once on one connection.
pub const MAX_LISTENS: usize = 8;
/// How long the conversations' owners get to save once the calls are answered.
const DRAIN: Duration = Duration::from_secs(5);

/// One line from the reader.
enum Line {
    Text(Vec<u8>),
    /// A line over [`MAX_LINE`] bytes, skipped; how many bytes it had.
    TooLong(usize),
}

/// Serves MCP on `input`/`output` until `input` ends.
pub async fn serve<R, W>(daemon: Arc<Daemon>, input: R, output: W) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let server = Arc::new(Server::new(Arc::clone(&daemon)));
    let (line_tx, mut lines) = mpsc::channel(READ_AHEAD);
    let reader = tokio::spawn(crate::tasks::boxed(read_lines(input, line_tx)));
    let (out, out_rx) = mpsc::channel::<String>(WRITE_QUEUE);
    let writer = tokio::spawn(crate::tasks::boxed(write_lines(output, out_rx)));

    let mut session = Session::default();
    let mut tasks: JoinSet<String> = JoinSet::new();
    let mut running: HashMap<String, Cancel> = HashMap::new();
    let mut listens: Vec<Listen> = Vec::new();
    let mut served = server.tool_names();
    let mut tick = tokio::time::interval(RELOAD_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let full = tasks.len() >= MAX_IN_FLIGHT;
        tokio::select! {
            line = lines.recv(), if !full => {
                let Some(line) = line else { break };
                let msg = match line {
                    Line::TooLong(n) => {
                        let e = error(Value::Null, INVALID_REQUEST, &format!("a message of {n} bytes is over the {MAX_LINE}-byte limit"));
                        send(&out, &e).await;
                        continue;
                    }
                    Line::Text(t) => t,
                };
                let msg = match serde_json::from_slice::<Value>(&msg) {
                    Ok(v) => v,
                    Err(e) => {
                        send(&out, &error(Value::Null, PARSE_ERROR, &format!("the line is not JSON: {e}"))).await;
                        continue;
                    }
                };
                if let Value::Array(batch) = msg {
                    match server.batch(&mut session, batch) {
                        Err(refused) => send(&out, &refused).await,
                        Ok(batch) => {
                            cancel_each(&running, &batch.cancels);
                            let (server, out) = (Arc::clone(&server), out.clone());
                            tasks.spawn(async move {
                                if let Some(replies) = batch.answer(&server, &Cancel::default()).await {
                                    send(&out, &replies).await;
                                }
                                String::new()
                            });
                        }
                    }
                    continue;
                }
                match classify(msg) {
                    Kind::Request { id, method, params } if method == "initialize" && session.version.is_none() => {
                        let (reply, new) = server.initialize(id, &params);
                        chela_log::info!(client = ?new.client, version = ?new.version, "mcp: a client connected");
                        session = new;
                        send(&out, &reply).await;
                    }
                    Kind::Request { id, method, params } if method == LISTEN => {
                        if listens.iter().any(|l| l.id == id) || running.contains_key(&id.to_string()) {
                            send(&out, &error(id, INVALID_REQUEST, "a request with this id is still open")).await;
                            continue;
                        }
                        if listens.len() >= MAX_LISTENS {
                            let why = format!("{MAX_LISTENS} subscriptions are open on this connection; cancel one first");
                            send(&out, &error(id, INTERNAL_ERROR, &why)).await;
                            continue;
                        }
                        match server.listen(&id, &params) {
                            Ok(listen) => {
                                send(&out, &listen.ack()).await;
                                listens.push(listen);
                            }
                            Err(refused) => send(&out, &refused).await,
                        }
                    }
                    Kind::Request { id, method, params } => {
                        let cancel = Cancel::default();
                        let key = id.to_string();
                        running.insert(key.clone(), cancel.clone());
                        let (server, session, out) = (Arc::clone(&server), session.clone(), out.clone());
                        tasks.spawn(async move {
                            let reply = server.request(&session, id, &method, params, &cancel).await;
                            // A cancelled request gets no answer (the client forgot it).
                            if !cancel.is_cancelled() {
                                send(&out, &reply).await;
                            }
                            key
                        });
                    }
                    Kind::Notification { method, params } => {
                        let cancels: Vec<Value> = server.notification(&mut session, &method, &params).into_iter().collect();
                        cancel_each(&running, &cancels);
                        listens.retain(|l| !cancels.contains(&l.id));
                    }
                    Kind::Response => {}
                    Kind::Invalid(e) => send(&out, &e).await,
                }
            }
            Some(done) = tasks.join_next() => {
                if let Ok(key) = done {
                    running.remove(&key);
                }
            }
            _ = tick.tick() => {
                if let Err(e) = daemon.reload() {
                    chela_log::warn!("the settings files changed but cannot be used ({e:#}); keeping the previous ones");
                }
                let now = server.tool_names();
                if now != served {
                    served = now;
                    if session.initialized {
                        send(&out, &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})).await;
                    }
                    for note in listens.iter().filter_map(Listen::tools_changed) {
                        send(&out, &note).await;
                    }
                }
            }
        }
    }
    // stdin closed. A client that pipes its requests and closes at once still reads stdout, so
    // everything read before the end is answered; each call is bounded by its own limits
    // (tools.timeout_secs, llm.deadline_secs). Answers to a client that is gone meet a closed
    // stdout and are dropped by the writer.
    while tasks.join_next().await.is_some() {}
    for listen in listens {
        send(&out, &listen.closed()).await;
    }
    reader.abort();
    drop(out);
    let _ = writer.await;
    daemon.shutdown().trigger();
    if tokio::time::timeout(DRAIN, daemon.hub().drained()).await.is_err() {
        daemon.hub().stop();
    }
    Ok(())
}

/// Stops the running requests named by `ids` (a cancelled request is answered no more).
fn cancel_each(running: &HashMap<String, Cancel>, ids: &[Value]) {
    for id in ids {
        if let Some(c) = running.get(&id.to_string()) {
            c.cancel();
        }
    }
}

async fn send(out: &mpsc::Sender<String>, msg: &Value) {
    // The writer stops only when stdout is gone; nothing is left to tell then.
    let _ = out.send(msg.to_string()).await;
}

/// Cuts `input` into lines, each at most [`MAX_LINE`] bytes; a longer line is read to its end
/// without keeping it.
async fn read_lines<R: AsyncRead + Unpin>(input: R, lines: mpsc::Sender<Line>) {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    let mut skipped: Option<usize> = None;
    loop {
        let chunk = match input.fill_buf().await {
            Ok([]) => break,
            Ok(c) => c,
            Err(e) => {
                chela_log::warn!("mcp: stdin cannot be read: {e}");
                break;
            }
        };
        let (part, ended) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        match &mut skipped {
            Some(n) => *n += part.len(),
            None if line.len() + part.len() > MAX_LINE => {
                skipped = Some(line.len() + part.len());
                line = Vec::new();
            }
            None => line.extend_from_slice(part),
        }
        let used = ended.unwrap_or(chunk.len());
        input.consume(used);
        if ended.is_none() {
            continue;
        }
        let next = match skipped.take() {
            Some(n) => Line::TooLong(n),
            None if line.iter().all(u8::is_ascii_whitespace) => {
                line.clear();
                continue;
            }
            None => Line::Text(std::mem::take(&mut line)),
        };
        if lines.send(next).await.is_err() {
            return;
        }
    }
    // A last message without its newline still counts.
    if skipped.is_none() && !line.iter().all(u8::is_ascii_whitespace) {
        let _ = lines.send(Line::Text(line)).await;
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(mut output: W, mut lines: mpsc::Receiver<String>) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
            chela_log::warn!("mcp: stdout is closed; no more answers can be sent");
            return;
        }
    }
}
