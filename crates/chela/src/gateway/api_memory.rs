//! The Memory tab's remembered entries under `/api/memory/entries`: what the model stored with
//! `memory_store`, searched, corrected and forgotten by the owner. Every change goes through
//! the same locked, atomic rewrite of `memory/entries.jsonl` the memory tools use, so a change
//! made here and one the model makes at the same moment both land.
//!
//! Routes (all need the gateway token, as every `/api/` route does):
//! - `GET /api/memory/entries`: the newest page.
//! - `POST /api/memory/entries/search` `{query, offset, limit}`: a page of the entries matching
//!   `query` (best first; newest first when it is empty), and the note passages matching it
//!   (`notes`: file, lines, snippet). A query is answered by the memory index, as
//!   `memory_recall` and `memory_search` are, so the owner sees what the model would find.
//! - `PUT /api/memory/entries/{id}` `{content, tags?}`: replaces an entry's text (and tags).
//! - `DELETE /api/memory/entries/{id}`: forgets it.

use std::sync::Arc;

use chela_core::memory::{Entries, Entry, MAX_ENTRIES, MemoryError};
use hyper::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, Resp, json as json_response};
use crate::daemon::Daemon;
#[cfg(feature = "memory")]
use crate::memory::index::{Index, MAX_RESULTS};
use crate::memory::{load_entries, update_entries};

/// Note passages shown with a search, at most (as many as `memory_search` returns).
#[cfg(feature = "memory")]
const MAX_NOTES: usize = 20;

/// Most entries one page holds; the page asks for fewer.
pub const MAX_PAGE: usize = 100;
/// Longest search text taken; a query is a few words.
const MAX_QUERY_CHARS: usize = 500;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SearchReq {
    #[serde(default)]
    query: String,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditReq {
    content: String,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

pub async fn route(d: &Arc<Daemon>, method: &Method, path: &str, body: &[u8]) -> Result<Resp, ApiError> {
    let ok = |v: Value| Ok(json_response(StatusCode::OK, &v));
    match (method, path) {
        (&Method::GET, "/memory/entries") => ok(work(d, |d| search(d, SearchReq::default())).await?),
        (&Method::POST, "/memory/entries/search") => {
            let r: SearchReq = parse(body)?;
            ok(work(d, move |d| search(d, r)).await?)
        }
        (_, p) if p.starts_with("/memory/entries/") => {
            let id = check_id(&p["/memory/entries/".len()..])?;
            match *method {
                Method::PUT => {
                    let r: EditReq = parse(body)?;
                    let now = d.clock().unix_secs_u64();
                    ok(work(d, move |d| edit(d, &id, &r, now)).await?)
                }
                Method::DELETE => ok(work(d, move |d| forget(d, &id)).await?),
                _ => Err(ApiError::MethodNotAllowed(format!(
                    "{method} is not used on a memory entry; PUT {{\"content\": …}} or DELETE it"
                ))),
            }
        }
        _ => Err(ApiError::NotFound(format!("there is no API at /api{path} for {method}"))),
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("the request body is not the expected JSON: {e}")))
}

/// File work (the entries lock may wait) runs off the async workers.
async fn work(
    d: &Arc<Daemon>,
    f: impl FnOnce(&Daemon) -> Result<Value, ApiError> + Send + 'static,
) -> Result<Value, ApiError> {
    let d = Arc::clone(d);
    crate::tasks::blocking(move || f(&d)).await.map_err(|e| ApiError::internal("file work stopped", e))?
}

/// An entry id as `Entries` makes them (`m` and digits): nothing else is looked up.
fn check_id(id: &str) -> Result<String, ApiError> {
    let ok = id.len() >= 2 && id.len() <= 24 && id.starts_with('m') && id[1..].bytes().all(|b| b.is_ascii_digit());
    if ok {
        Ok(id.to_owned())
    } else {
        Err(ApiError::BadRequest("a memory entry id is `m` and digits, as the entry list shows".into()))
    }
}

fn shown(e: &Entry) -> Value {
    json!({"id": e.id, "content": e.content, "tags": e.tags, "source": e.source, "created": e.created, "updated": e.updated})
}

fn io_error(e: std::io::Error) -> ApiError {
    ApiError::internal("memory/entries.jsonl cannot be read or written", e)
}

/// One page of the entries matching `r.query`, how many match in all (for a query, at most what
/// the index ranks), and the matching note passages.
fn search(d: &Daemon, r: SearchReq) -> Result<Value, ApiError> {
    let limit = r.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let offset = r.offset.min(MAX_ENTRIES);
    let query: String = r.query.chars().take(MAX_QUERY_CHARS).collect();
    let entries = load_entries(d.workspace()).map_err(io_error)?;
    if query.trim().is_empty() {
        let found = entries.newest(MAX_ENTRIES, None);
        let page: Vec<Value> = found.iter().skip(offset).take(limit).map(|e| shown(e)).collect();
        return Ok(json!({"total": found.len(), "offset": offset, "limit": limit, "entries": page, "notes": []}));
    }
    let (found, notes) = ranked(d, &entries, &query)?;
    let page: Vec<Value> = found.iter().skip(offset).take(limit).map(|e| shown(e)).collect();
    Ok(json!({"total": found.len(), "offset": offset, "limit": limit, "entries": page, "notes": notes}))
}

/// The entries matching `query`, best first, and the note passages matching it. The index ranks;
/// the file (read just before) gives each entry's tags and times. An entry forgotten in between
/// is left out.
#[cfg(feature = "memory")]
fn ranked<'a>(d: &Daemon, entries: &'a Entries, query: &str) -> Result<(Vec<&'a Entry>, Vec<Value>), ApiError> {
    let (hits, notes) = Index::open(d.workspace())
        .and_then(|mut ix| {
            ix.refresh()?;
            Ok((ix.recall(query, MAX_RESULTS)?, ix.search(query, MAX_NOTES)?))
        })
        .map_err(|e| ApiError::internal("the memory index cannot be searched", e))?;
    let found = hits.iter().filter_map(|h| entries.get(&h.id)).collect();
    let notes =
        notes.iter().map(|n| json!({"path": n.path, "first": n.first, "last": n.last, "snippet": n.snippet})).collect();
    Ok((found, notes))
}

/// A build without the memory index ranks the file's entries with the core's keyword ranking
/// and searches no notes.
#[cfg(not(feature = "memory"))]
fn ranked<'a>(_: &Daemon, entries: &'a Entries, query: &str) -> Result<(Vec<&'a Entry>, Vec<Value>), ApiError> {
    Ok((entries.recall(query, MAX_ENTRIES).into_iter().map(|(_, e)| e).collect(), Vec::new()))
}

fn memory_error(e: MemoryError) -> ApiError {
    match e {
        MemoryError::NotFound { id } => {
            ApiError::NotFound(format!("there is no memory entry {id}; it may be forgotten"))
        }
        other => ApiError::BadRequest(other.to_string()),
    }
}

/// Either failure of a locked change: the file, or the change itself.
enum Failed {
    Io(std::io::Error),
    Api(ApiError),
}

impl From<std::io::Error> for Failed {
    fn from(e: std::io::Error) -> Failed {
        Failed::Io(e)
    }
}

fn change(d: &Daemon, f: impl FnOnce(&mut Entries) -> Result<Value, ApiError>) -> Result<Value, ApiError> {
    update_entries(d.workspace(), |entries| f(entries).map_err(Failed::Api)).map_err(|e| match e {
        Failed::Io(e) => io_error(e),
        Failed::Api(e) => e,
    })
}

fn edit(d: &Daemon, id: &str, r: &EditReq, now: u64) -> Result<Value, ApiError> {
    change(d, |entries| entries.update(id, &r.content, r.tags.as_deref(), now).map(shown).map_err(memory_error))
}

fn forget(d: &Daemon, id: &str) -> Result<Value, ApiError> {
    change(d, |entries| entries.forget(id).map(|e| json!({"id": e.id, "forgotten": true})).map_err(memory_error))
}
