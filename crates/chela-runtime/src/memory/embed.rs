//! Optional semantic search: entries and note chunks embedded by an OpenAI-compatible
//! `/v1/embeddings` server (`memory.embeddings_url`, `memory.embeddings_model`,
//! `memory.embeddings_key`), their vectors kept in the memory index.
//!
//! Nothing here runs when the settings are empty: no request, no file, no work per search.
//!
//! Vectors live in the index's vectors file (`engine::vectors`), one per entry or chunk
//! document, with the 64-bit FNV-1a hash of the text that was embedded and the model's name. A
//! document's text never changes (a changed text is a new document), and a search still checks
//! the hash of every vector it returns against the live document's text. A new model name drops
//! every vector of another model. Documents that went away lose their vectors at the end of a
//! pass.
//!
//! Embedding happens in the background ([`kick`]): one pass per workspace at a time, sweeping
//! the live documents in order in batches of [`BATCH`] inputs, each cut to [`MAX_INPUT_BYTES`]; a
//! failed batch is retried with exponential waits and then the pass ends with a warning, the
//! keyword search untouched. A turn never waits for it: a query's own embedding has
//! [`QUERY_TIMEOUT`], after which the search is keywords alone.
//!
//! The server is untrusted: an answer with the wrong number of vectors, vectors of different
//! lengths (or another length than the index holds for the model), more than
//! [`MAX_DIMENSIONS`] values, a value that is not a finite `f32`, or an all-zero vector is
//! refused whole.

use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use chela_core::retry::Exponential;
use serde::Deserialize;

use crate::config::Config;
use crate::net::{Guard, HttpClient, Request};
use crate::workspace::Workspace;
use chela_core::config as keys;

use super::engine::manifest::Table;
use super::engine::vectors::Record;
use super::index::Index;

/// Inputs sent in one request.
pub const BATCH: usize = 32;
/// Bytes of one input at most (cut at a character boundary): an entry holds at most 2,000 and
/// a chunk about 1,500, but a note line can be anything.
pub const MAX_INPUT_BYTES: usize = 8 * 1024;
/// The longest vector accepted (OpenAI's largest model has 3,072).
pub const MAX_DIMENSIONS: usize = 4096;
/// How long a search waits for its query's vector before ranking by keywords alone.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// One batch request, from connect to the last byte.
const BATCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts per batch, and the waits between them.
const ATTEMPTS: u32 = 4;
const RETRY: Exponential = Exponential::new(Duration::from_secs(1), Duration::from_secs(30));
/// Workspaces embedded at once in one process (the daemon has one, tests a few).
const MAX_WORKERS: usize = 8;

/// The kinds of rows embedded, with their table and text column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Entry = 0,
    Chunk = 1,
}

impl Kind {
    fn table(self) -> Table {
        match self {
            Kind::Entry => Table::Entries,
            Kind::Chunk => Table::Chunks,
        }
    }
}

/// The embeddings server, when one is set.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Including `/v1`, without a trailing slash.
    pub url: String,
    pub model: String,
    key: String,
}

impl Settings {
    /// `None` unless both the URL and the model are set.
    pub fn from_config(cfg: &Config) -> Option<Settings> {
        Settings::new(
            cfg.get(keys::MEMORY_EMBEDDINGS_URL),
            cfg.get(keys::MEMORY_EMBEDDINGS_MODEL),
            cfg.get(keys::MEMORY_EMBEDDINGS_KEY),
        )
    }

    pub fn new(url: &str, model: &str, key: &str) -> Option<Settings> {
        let (url, model) = (url.trim().trim_end_matches('/'), model.trim());
        (!url.is_empty() && !model.is_empty()).then(|| Settings {
            url: url.to_owned(),
            model: model.to_owned(),
            key: key.trim().to_owned(),
        })
    }
}

/// 64-bit FNV-1a: stable across builds, so stored hashes stay comparable.
pub fn text_hash(text: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// `text` cut to at most [`MAX_INPUT_BYTES`] at a character boundary.
fn bounded(text: &str) -> &str {
    if text.len() <= MAX_INPUT_BYTES {
        return text;
    }
    let cut = (0..=MAX_INPUT_BYTES).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
    &text[..cut]
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f64>,
}

/// Asks the server for the vectors of `inputs` (at most [`BATCH`] of them, each at most
/// [`MAX_INPUT_BYTES`]), checks them and returns them scaled to length 1, in input order.
pub async fn embed(
    http: &HttpClient,
    s: &Settings,
    inputs: &[&str],
    timeout: Duration,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let inputs: Vec<&str> = inputs.iter().take(BATCH).map(|t| bounded(t)).collect();
    let body = serde_json::json!({"model": s.model, "input": inputs, "encoding_format": "float"}).to_string();
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if !s.key.is_empty() {
        headers.push(("authorization".to_owned(), format!("Bearer {}", s.key)));
    }
    let req = Request {
        method: hyper::Method::POST,
        url: format!("{}/embeddings", s.url),
        headers,
        body: Bytes::from(body),
        timeout,
        guard: Guard::AllowAll,
    };
    // Room for every value written out long (`-0.012345678901234567,`), and the JSON around.
    let limit = inputs.len() * MAX_DIMENSIONS * 24 + 64 * 1024;
    let work = async {
        let resp = http.send(req).await.map_err(|e| EmbedError::Net(e.is_retryable(), e.to_string()))?;
        let status = resp.status;
        let bytes = resp.bytes(limit, timeout).await.map_err(|e| EmbedError::Net(false, e.to_string()))?;
        if status != 200 {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
            return Err(EmbedError::Status(status, text));
        }
        Ok(bytes)
    };
    let bytes = tokio::time::timeout(timeout, work).await.map_err(|_| EmbedError::Net(true, "timed out".into()))??;
    parse(&bytes, inputs.len())
}

/// The vectors of an answer to `n` inputs, checked (see the module docs) and scaled to length 1.
fn parse(bytes: &[u8], n: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let answer: Answer =
        serde_json::from_slice(bytes).map_err(|e| EmbedError::Refused(format!("not an embeddings answer: {e}")))?;
    check(answer, n)
}

/// The checks on an answer (see the module docs), then the vectors scaled to length 1.
fn check(answer: Answer, n: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let refuse = |why: String| Err(EmbedError::Refused(why));
    if answer.data.len() != n {
        return refuse(format!("{} vectors for {n} inputs", answer.data.len()));
    }
    let dim = answer.data.first().map_or(0, |i| i.embedding.len());
    if dim == 0 || dim > MAX_DIMENSIONS {
        return refuse(format!("a vector of {dim} values"));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for item in answer.data {
        if item.embedding.len() != dim {
            return refuse(format!("vectors of {dim} and {} values", item.embedding.len()));
        }
        let v: Vec<f32> = item.embedding.iter().map(|x| *x as f32).collect();
        if v.iter().any(|x| !x.is_finite()) {
            return refuse("a value that is not a finite number".to_owned());
        }
        let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
        if norm == 0.0 || !norm.is_finite() {
            return refuse("a vector of zeros".to_owned());
        }
        match out.get_mut(item.index) {
            Some(slot @ None) => *slot = Some(v.iter().map(|x| (f64::from(*x) / norm) as f32).collect()),
            _ => return refuse(format!("index {} out of place", item.index)),
        }
    }
    Ok(out.into_iter().flatten().collect())
}

#[derive(Debug)]
pub enum EmbedError {
    /// The network failed; whether trying again may help.
    Net(bool, String),
    Status(u16, String),
    /// The answer broke the rules.
    Refused(String),
}

impl EmbedError {
    fn retryable(&self) -> bool {
        match self {
            EmbedError::Net(r, _) => *r,
            EmbedError::Status(s, _) => *s == 429 || *s >= 500,
            EmbedError::Refused(_) => false,
        }
    }
}

impl std::fmt::Display for EmbedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmbedError::Net(_, e) => write!(f, "embeddings request failed: {e}"),
            EmbedError::Status(s, body) => write!(f, "embeddings server answered {s}: {body}"),
            EmbedError::Refused(why) => write!(f, "embeddings answer refused: {why}"),
        }
    }
}

/// The query's vector, or `None` (logged) when the server fails or takes longer than
/// [`QUERY_TIMEOUT`]: the search then ranks by keywords alone.
pub async fn query_vector(http: &HttpClient, s: &Settings, query: &str) -> Option<Vec<f32>> {
    if query.trim().is_empty() {
        return None;
    }
    match embed(http, s, &[query], QUERY_TIMEOUT).await {
        Ok(mut v) => v.pop(),
        Err(e) => {
            chela_log::info!("memory search by keywords alone: {e}");
            None
        }
    }
}

#[cfg(test)]
fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The dot product of a stored vector and `q` (of the same length). Eight running sums: one
/// would make every addition wait for the one before, eight let the compiler use vector lanes.
fn dot(blob: &[u8], q: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (blocks, rest) = (blob.chunks_exact(32), q.chunks_exact(8));
    let tail: f32 = blocks
        .remainder()
        .chunks_exact(4)
        .zip(rest.remainder())
        .map(|(b, x)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * x)
        .sum();
    for (b, x) in blocks.zip(rest) {
        for i in 0..8 {
            acc[i] += f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]) * x[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The text of document `doc` of `kind` if it is live: what its vector was made from.
fn text_of(ix: &Index, kind: Kind, doc: u64) -> io::Result<Option<String>> {
    Ok(match kind {
        Kind::Entry => ix.entry(doc)?.map(|(hit, _)| hit.content),
        Kind::Chunk => ix.chunk(doc)?.map(|(.., text)| text),
    })
}

/// The documents of `kind` whose vectors are nearest `q` (cosine: both are of length 1), best
/// first, at most `k`, each checked to be live and to hold the text its vector was made from.
/// No vectors (none yet, another model): none.
pub fn nearest(ix: &Index, kind: Kind, model: &str, q: &[f32], k: usize) -> io::Result<Vec<(u64, f32)>> {
    // A min-heap of the best so far, over more than `k`: some may turn out stale.
    let keep = k * 2 + 8;
    let mut best: BinaryHeap<(std::cmp::Reverse<Score>, u64, i64)> = BinaryHeap::with_capacity(keep + 1);
    ix.store().each_vector(|v| {
        if v.kind != kind as u8 || v.model != model || v.values.len() != q.len() * 4 {
            return;
        }
        let s = Score(dot(v.values, q));
        if best.len() < keep || best.peek().is_some_and(|(std::cmp::Reverse(low), ..)| s > *low) {
            best.push((std::cmp::Reverse(s), v.doc, v.hash));
            if best.len() > keep {
                best.pop();
            }
        }
    })?;
    let mut found: Vec<(Score, u64, i64)> = best.into_iter().map(|(std::cmp::Reverse(s), d, h)| (s, d, h)).collect();
    chela_infra::sort::sort_by(&mut found, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out: Vec<(u64, f32)> = Vec::with_capacity(k);
    for (s, doc, hash) in found {
        if out.iter().any(|(d, _)| *d == doc) {
            continue;
        }
        if text_of(ix, kind, doc)?.is_some_and(|t| text_hash(bounded(&t)) == hash) {
            out.push((doc, s.0));
            if out.len() == k {
                break;
            }
        }
    }
    Ok(out)
}

/// An `f32` ordered by `total_cmp`, for the heap.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Score(f32);
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Score) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Score {
    fn cmp(&self, o: &Score) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Texts embedded (sent and stored).
    pub embedded: usize,
    /// Requests sent, retries included.
    pub requests: usize,
}

/// A document to embed: its number, the hash of its text, the text (cut to [`MAX_INPUT_BYTES`]).
type Todo = (u64, i64, String);

/// Documents scanned per step of a pass.
const SCAN: usize = 256;

/// The live documents of `kind` after `cursor` (at most [`SCAN`]) with their texts, and the
/// cursor to go on from (`None`: the sweep is done).
fn candidates(ix: &Index, kind: Kind, cursor: Option<u64>) -> io::Result<(Vec<Todo>, Option<u64>)> {
    let docs = ix.store().live_docs(kind.table(), cursor, SCAN);
    let mut out = Vec::with_capacity(docs.len());
    for doc in &docs {
        if let Some(text) = text_of(ix, kind, *doc)? {
            let text = bounded(&text);
            if !text.trim().is_empty() {
                out.push((*doc, text_hash(text), text.to_owned()));
            }
        }
    }
    let next = if docs.len() == SCAN { docs.last().copied() } else { None };
    Ok((out, next))
}

/// Stores the vectors of `batch` for the documents still live, and refuses the whole batch if
/// its length differs from the model's vectors already stored (`held`, in values).
fn store(ix: &mut Index, kind: Kind, model: &str, batch: &[Todo], vectors: &[Vec<f32>]) -> io::Result<usize> {
    let mut held = None;
    ix.store().each_vector(|v| {
        if held.is_none() && v.model == model {
            held = Some(v.values.len() / 4);
        }
    })?;
    if let (Some(held), Some(v)) = (held, vectors.first())
        && held != v.len()
    {
        return Err(io::Error::other(format!(
            "embeddings answer refused: {} values where the index holds {held} for {model}",
            v.len()
        )));
    }
    let records: Vec<Record> = batch
        .iter()
        .zip(vectors)
        .filter(|((doc, ..), _)| ix.store().is_live(kind.table(), *doc))
        .map(|((doc, hash, _), v)| Record {
            kind: kind as u8,
            doc: *doc,
            hash: *hash,
            model: model.to_owned(),
            vec: v.clone(),
        })
        .collect();
    let n = records.len();
    ix.write(|w, _| w.append_vectors(&records))?;
    Ok(n)
}

/// Runs `f` on the workspace's index off the async workers (its reads and writes block).
async fn with_index<T: Send + 'static>(
    ws: &Workspace,
    f: impl FnOnce(&mut Index) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let ws = ws.clone();
    crate::tasks::blocking(move || f(&mut Index::open(&ws)?)).await.map_err(io::Error::other)?
}

/// One batch, tried [`ATTEMPTS`] times with [`RETRY`]'s waits while the failure may pass.
async fn embed_retrying(
    http: &HttpClient,
    s: &Settings,
    inputs: &[&str],
    retry: Exponential,
    pass: &mut Pass,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut attempt = 0;
    loop {
        pass.requests += 1;
        match embed(http, s, inputs, BATCH_TIMEOUT).await {
            Ok(v) => return Ok(v),
            Err(e) if e.retryable() && attempt + 1 < ATTEMPTS => {
                chela_log::debug!("memory embeddings, retrying: {e}");
                tokio::time::sleep(retry.step(attempt)).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Embeds every entry and chunk whose vector is missing or stale, then drops the vectors of
/// rows that went away and of other models. Reads the files into the index first.
pub async fn embed_pending(ws: &Workspace, http: &HttpClient, s: &Settings) -> io::Result<Pass> {
    embed_pending_with(ws, http, s, RETRY).await
}

/// [`embed_pending`] with the waits between a batch's attempts given.
async fn embed_pending_with(ws: &Workspace, http: &HttpClient, s: &Settings, retry: Exponential) -> io::Result<Pass> {
    let model = s.model.clone();
    // Read the files in; drop other models' vectors; note the documents that have theirs.
    let mut have: HashMap<(u8, u64), i64> = with_index(ws, move |ix| {
        ix.refresh()?;
        let mut other = false;
        ix.store().each_vector(|v| other |= v.model != model)?;
        if other {
            ix.write(|w, _| w.rewrite_vectors(|v| v.model == model))?;
        }
        let mut have = HashMap::new();
        ix.store().each_vector(|v| {
            have.insert((v.kind, v.doc), v.hash);
        })?;
        Ok(have)
    })
    .await?;
    let mut pass = Pass::default();
    for kind in [Kind::Entry, Kind::Chunk] {
        let mut cursor = None;
        loop {
            let (found, next) = with_index(ws, move |ix| candidates(ix, kind, cursor)).await?;
            let todo: Vec<Todo> =
                found.into_iter().filter(|(doc, hash, _)| have.get(&(kind as u8, *doc)) != Some(hash)).collect();
            for batch in todo.chunks(BATCH) {
                let inputs: Vec<&str> = batch.iter().map(|(_, _, t)| t.as_str()).collect();
                let vectors = embed_retrying(http, s, &inputs, retry, &mut pass)
                    .await
                    .map_err(|e| io::Error::other(e.to_string()))?;
                let (model, batch) = (s.model.clone(), batch.to_vec());
                let keys: Vec<(u64, i64)> = batch.iter().map(|(d, h, _)| (*d, *h)).collect();
                pass.embedded += with_index(ws, move |ix| store(ix, kind, &model, &batch, &vectors)).await?;
                have.extend(keys.into_iter().map(|(d, h)| ((kind as u8, d), h)));
            }
            match next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
    }
    // The vectors of documents that went away.
    let model = s.model.clone();
    with_index(ws, move |ix| {
        let mut dead = false;
        let live = |ix: &Index, kind: u8, doc: u64| {
            let table = if kind == Kind::Entry as u8 { Table::Entries } else { Table::Chunks };
            ix.store().is_live(table, doc)
        };
        ix.store().each_vector(|v| dead |= !live(ix, v.kind, v.doc))?;
        if dead {
            let keep: std::collections::HashSet<(u8, u64)> = {
                let mut k = std::collections::HashSet::new();
                ix.store().each_vector(|v| {
                    if live(ix, v.kind, v.doc) {
                        k.insert((v.kind, v.doc));
                    }
                })?;
                k
            };
            ix.write(|w, _| w.rewrite_vectors(|v| v.model == model && keep.contains(&(v.kind, v.doc))))?;
        }
        Ok(())
    })
    .await?;
    Ok(pass)
}

/// The workspaces with a pass running, each with whether another was asked for meanwhile.
static RUNNING: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());

/// Starts a background pass over `ws` unless one is running (then that one goes round once
/// more when it ends). Returns the pass's task, or `None` when none was started. Needs a tokio
/// runtime; the task ends with it.
pub fn kick(ws: &Workspace, s: &Settings, http: &HttpClient) -> Option<tokio::task::JoinHandle<()>> {
    let root = ws.root().to_path_buf();
    {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = running.iter_mut().find(|r| r.0 == root) {
            r.1 = true;
            return None;
        }
        if running.len() >= MAX_WORKERS {
            return None;
        }
        running.push((root.clone(), false));
    }
    /// Takes the workspace off the list however the task ends.
    struct Done(PathBuf);
    impl Drop for Done {
        fn drop(&mut self) {
            RUNNING.lock().unwrap_or_else(PoisonError::into_inner).retain(|r| r.0 != self.0);
        }
    }
    let (ws, s, http) = (ws.clone(), s.clone(), http.clone());
    Some(tokio::spawn(crate::tasks::boxed(async move {
        let done = Done(root);
        loop {
            match embed_pending(&ws, &http, &s).await {
                Ok(p) if p.embedded > 0 => chela_log::debug!("memory: {} texts embedded", p.embedded),
                Ok(_) => {}
                Err(e) => chela_log::warn!("memory embeddings paused (keyword search still works): {e}"),
            }
            // Decided and taken off the list under one lock, so a kick in between is never lost.
            let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            match running.iter_mut().find(|r| r.0 == done.0) {
                Some(r) if r.1 => r.1 = false,
                _ => {
                    running.retain(|r| r.0 != done.0);
                    break;
                }
            }
        }
    })))
}

#[cfg(test)]
#[path = "embed_tests.rs"]
mod tests;
