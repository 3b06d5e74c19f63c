//! The MCP endpoint: a tool host (`mcp2xiaozhi`, `mcp_pipe.py`) dials
//! `ws://<gateway>/xiaozhi/mcp/?token=…` and Chela is the MCP client on that socket. Each text
//! frame is one bare JSON-RPC message; the host's tools become the group `endpoint_<name>`
//! (through [`super::device`], the same client as a device's) and go when it hangs up.
//!
//! Tokens are issued by `chela mcp endpoint add NAME`, shown once and kept as SHA-256 hashes in
//! `state/mcp_endpoints.json` (written atomically under a lock); `remove` takes one away, and
//! `add` again replaces it. The daemon keeps the connected hosts in [`Hosts`]; at each settings
//! reload (every second in `chela run`) it looks at the store, and a host whose token is no
//! longer there is hung up on (close 1008) and its group goes. Bounds: one message is at most
//! [`MAX_MESSAGE`] bytes (a bigger one closes the socket), [`OUTBOUND`] messages wait for the
//! host, a host that does not finish the handshake and listing within
//! [`super::device::SETUP_TIMEOUT`] per step is hung up on, one connection per name (a new one
//! replaces the old, which is hung up on at once: close 1008).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::devices::{hex_of, random, token_hash};
use crate::workspace::{Replace, Workspace, create_private_dir, open_dir, write_atomic_at};

/// The path hosts dial (with or without the trailing slash).
pub const PATH: &str = "/xiaozhi/mcp/";
/// The largest message taken from a host: a `tools/list` page or a result with an image.
pub const MAX_MESSAGE: usize = 1024 * 1024;
/// Messages waiting to be written to a host.
pub const OUTBOUND: usize = 32;
pub const STORE_FILE: &str = crate::authority::ENDPOINTS_STORE;
const MAX_STORE_BYTES: u64 = 1024 * 1024;
/// Most endpoint names kept.
const MAX_ENDPOINTS: usize = 64;

/// Whether `path` is the endpoint's.
pub fn is_endpoint_path(path: &str) -> bool {
    path == PATH || path == "/xiaozhi/mcp"
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EndpointState {
    #[serde(default)]
    pub endpoints: Vec<Issued>,
}

/// One issued token.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Issued {
    pub name: String,
    pub token_sha256: String,
    pub created: u64,
}

/// Whether `name` can be an endpoint name (it becomes the group `endpoint_<name>`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 24
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl EndpointState {
    /// The name a presented token was issued under.
    pub fn check(&self, token: &str) -> Option<String> {
        let h = token_hash(token);
        self.endpoints
            .iter()
            .find(|e| {
                e.token_sha256.len() == h.len()
                    && e.token_sha256.bytes().zip(h.bytes()).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0
            })
            .map(|e| e.name.clone())
    }
}

/// The token store on disk.
#[derive(Clone, Debug)]
pub struct Endpoints {
    path: PathBuf,
}

impl Endpoints {
    pub fn open(ws: &Workspace) -> Endpoints {
        Endpoints { path: ws.root().join("state").join(STORE_FILE) }
    }

    /// Reads the store; a missing file is empty.
    pub fn load(&self) -> Result<EndpointState, String> {
        match crate::authority::read_sealed(&self.path, MAX_STORE_BYTES) {
            Ok(None) => Ok(EndpointState::default()),
            Ok(Some(text)) => serde_json::from_str(&text).map_err(|e| {
                format!("{} is not a valid endpoint store ({e}); fix it or move it away", self.path.display())
            }),
            Err(e @ crate::authority::SealError::Untrusted { .. }) => Err(e.to_string()),
            Err(e) => Err(format!("cannot read {}: {e}", self.path.display())),
        }
    }

    fn edit<T>(&self, change: impl FnOnce(&mut EndpointState) -> Result<T, String>) -> Result<T, String> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        crate::lock::with_file_lock(&self.path, || {
            let mut state = self.load()?;
            let out = change(&mut state)?;
            let json = serde_json::to_vec_pretty(&state).map_err(|e| e.to_string())?;
            crate::authority::seal(&self.path, &json)
                .and_then(|json| {
                    open_dir(dir).and_then(|fd| write_atomic_at(&fd, STORE_FILE.as_ref(), &json, Replace::Yes))
                })
                .map_err(|e| format!("cannot write {}: {e}", self.path.display()))?;
            Ok(out)
        })
        .map_err(|e: LockOr| e.0)
    }

    /// Issues a token for `name` (a new one replaces the old) and returns it: shown this once.
    pub fn add(&self, name: &str, now: u64) -> Result<String, String> {
        if !valid_name(name) {
            return Err(format!("`{name}` is not an endpoint name: use 1 to 24 of a-z, 0-9, _ and -"));
        }
        let token = hex_of(&random::<32>().map_err(|e| e.to_string())?);
        let hash = token_hash(&token);
        let name = name.to_owned();
        self.edit(move |s| {
            s.endpoints.retain(|e| e.name != name);
            if s.endpoints.len() >= MAX_ENDPOINTS {
                return Err(format!("there are already {MAX_ENDPOINTS} endpoints; remove one first"));
            }
            s.endpoints.push(Issued { name, token_sha256: hash, created: now });
            Ok(())
        })?;
        Ok(token)
    }

    /// Takes the token of `name` away; whether there was one.
    pub fn remove(&self, name: &str) -> Result<bool, String> {
        self.edit(|s| {
            let before = s.endpoints.len();
            s.endpoints.retain(|e| e.name != name);
            Ok(s.endpoints.len() != before)
        })
    }
}

/// The hosts connected now, each with the hash of the token it dialled with, so that a token
/// taken away (`remove`, or `add` again) cuts its host at the daemon's next settings reload.
#[derive(Default)]
pub struct Hosts {
    inner: Mutex<HostsInner>,
}

#[derive(Default)]
struct HostsInner {
    next: u64,
    live: Vec<Host>,
    /// The store file as last read: inode, modification time (ns) and length. `None`: read it
    /// at the next check.
    seen: Option<(u64, i128, u64)>,
}

struct Host {
    id: u64,
    name: String,
    token_sha256: String,
    cut: watch::Sender<Option<Cut>>,
}

/// Why Chela hangs up on a connected host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// `chela mcp endpoint remove`, or `add` issuing a new token for its name.
    TokenRemoved,
    /// Another host connected with the same name and took its group over.
    Replaced,
}

impl Cut {
    /// The close frame's reason, to the host.
    pub fn reason(self) -> &'static str {
        match self {
            Cut::TokenRemoved => "the token was removed",
            Cut::Replaced => "another host connected with this name",
        }
    }
}

impl std::fmt::Display for Cut {
    /// For the log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cut::TokenRemoved => "its token was removed",
            Cut::Replaced => "another host connected with its name",
        })
    }
}

/// One connected host's place in [`Hosts`]; leaves it when dropped.
pub struct Joined {
    hosts: Arc<Hosts>,
    id: u64,
    cut: watch::Receiver<Option<Cut>>,
}

impl Joined {
    /// Waits until the host is to be hung up on: why.
    pub async fn cut(&mut self) -> Cut {
        let why = self.cut.wait_for(Option::is_some).await.ok().and_then(|why| *why);
        match why {
            Some(why) => why,
            // The sender lives in `Hosts` until this leaves: never reached.
            None => std::future::pending().await,
        }
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        self.hosts.lock().live.retain(|h| h.id != self.id);
    }
}

impl Hosts {
    fn lock(&self) -> std::sync::MutexGuard<'_, HostsInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a host that dialled with `token` as `name`. A host already connected with that
    /// name is hung up on: the newcomer takes its group (a host that reconnects after a network
    /// drop must not leave its old, half-open connection behind).
    pub fn join(self: &Arc<Self>, name: &str, token: &str) -> Joined {
        let (tx, rx) = watch::channel(None);
        let mut inner = self.lock();
        for h in inner.live.iter().filter(|h| h.name == name && h.cut.borrow().is_none()) {
            chela_log::info!(
                "MCP endpoint host {name}: another host connected with its name; hanging up on the older one"
            );
            h.cut.send_replace(Some(Cut::Replaced));
        }
        inner.next += 1;
        let id = inner.next;
        inner.live.push(Host { id, name: name.to_owned(), token_sha256: token_hash(token), cut: tx });
        // The store may have changed between the token check and now: read it at the next check.
        inner.seen = None;
        Joined { hosts: Arc::clone(self), id, cut: rx }
    }

    /// How many hosts are connected.
    pub fn count(&self) -> usize {
        self.lock().live.len()
    }

    /// Cuts every host whose token is no longer in `store`. Cheap when nothing changed (one
    /// stat) or no host is connected (nothing). A store that cannot be read cuts nobody: its
    /// error is logged, and no new host gets in while it lasts.
    pub fn check(&self, store: &Endpoints) {
        let mut inner = self.lock();
        if inner.live.is_empty() {
            inner.seen = None;
            return;
        }
        let stamp = std::fs::metadata(&store.path).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.ino(), i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()), m.len())
        });
        if stamp.is_some() && stamp == inner.seen {
            return;
        }
        let state = match store.load() {
            Ok(s) => s,
            Err(e) => {
                if inner.seen != stamp {
                    chela_log::warn!("MCP endpoint hosts are not checked: {e}");
                }
                inner.seen = stamp;
                return;
            }
        };
        inner.seen = stamp;
        for h in &inner.live {
            if !state.endpoints.iter().any(|e| e.token_sha256 == h.token_sha256) && h.cut.borrow().is_none() {
                chela_log::info!("MCP endpoint host {}: its token was removed; hanging up", h.name);
                h.cut.send_replace(Some(Cut::TokenRemoved));
            }
        }
    }
}

/// `with_file_lock` wants an error type that takes an `io::Error`.
struct LockOr(String);

impl From<std::io::Error> for LockOr {
    fn from(e: std::io::Error) -> LockOr {
        LockOr(format!("the endpoint store's lock: {e}"))
    }
}

impl From<String> for LockOr {
    fn from(e: String) -> LockOr {
        LockOr(e)
    }
}

/// Serves one host's socket until it closes, it is cut (`joined`: its token was taken away, or
/// another host took its name) or Chela stops: frames in to the client, the client's messages
/// out as frames. The group goes when this returns.
pub async fn serve<S>(
    toolbox: std::sync::Arc<crate::tools::Toolbox>,
    name: String,
    ws: S,
    mut joined: Joined,
    shutdown: crate::shutdown::Shutdown,
) where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
        + futures_util::Sink<Message>
        + Unpin,
{
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::channel::<Value>(OUTBOUND);
    let peer = super::device::attach_endpoint(&toolbox, &name, tx);
    let ready = peer.ready();
    tokio::pin!(ready);
    let mut setup_done = false;
    let mut why = "the host hung up".to_owned();
    let mut close = None;
    loop {
        tokio::select! {
            r = &mut ready, if !setup_done => {
                setup_done = true;
                if let Err(e) = r {
                    chela_log::warn!("{e}; the connection is closed");
                    break;
                }
            }
            out = rx.recv() => {
                let Some(v) = out else { break };
                if sink.send(Message::text(v.to_string())).await.is_err() {
                    break;
                }
            }
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(t))) => match serde_json::from_str::<Value>(t.as_str()) {
                    Ok(v) => peer.deliver(v),
                    Err(e) => chela_log::debug!("MCP endpoint host {name}: a frame that is not JSON ({e})"),
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                // Pings are answered by the codec; binary frames mean nothing here.
                Some(Ok(_)) => {}
            },
            cut = joined.cut() => {
                close = Some(CloseFrame { code: CloseCode::Policy, reason: cut.reason().into() });
                why = cut.to_string();
                break;
            }
            () = shutdown.wait() => break,
        }
    }
    peer.close(&why);
    chela_log::info!("MCP endpoint host {name} disconnected ({why}); its tools are gone");
    // A host that reads nothing must not hold this task: the goodbye is bounded.
    let bye = async {
        if let Some(frame) = close {
            let _ = sink.send(Message::Close(Some(frame))).await;
        }
        let _ = sink.close().await;
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), bye).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_kept_hashed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
        ws.ensure().unwrap();
        let store = Endpoints::open(&ws);
        let t = store.add("time", 1).unwrap();
        assert_eq!(t.len(), 64);
        let text = std::fs::read_to_string(dir.path().join("ws/state/mcp_endpoints.json")).unwrap();
        assert!(!text.contains(&t), "kept hashed");
        assert_eq!(store.load().unwrap().check(&t).as_deref(), Some("time"));
        assert_eq!(store.load().unwrap().check("nope"), None);
        let t2 = store.add("time", 2).unwrap();
        assert_eq!(store.load().unwrap().check(&t), None, "a new token replaces the old");
        assert!(store.remove("time").unwrap());
        assert_eq!(store.load().unwrap().check(&t2), None);
        assert!(!store.remove("time").unwrap());
        for bad in ["", "Time", "a b", "../x", &"x".repeat(25)] {
            assert!(store.add(bad, 1).is_err(), "{bad:?}");
        }
    }

    /// A fresh store with tokens issued for `a` and `b` (the directory lives as long as it).
    fn store_with_a_and_b() -> (tempfile::TempDir, Endpoints, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
        ws.ensure().unwrap();
        let store = Endpoints::open(&ws);
        let (a, b) = (store.add("a", 1).unwrap(), store.add("b", 1).unwrap());
        (dir, store, a, b)
    }

    #[tokio::test]
    async fn a_removed_or_replaced_token_cuts_its_host_at_the_next_check() {
        let (_dir, store, a, b) = store_with_a_and_b();
        let hosts = Arc::new(Hosts::default());
        let mut host_a = hosts.join("a", &a);
        let mut host_b = hosts.join("b", &b);
        let cut = |j: &mut Joined| *j.cut.borrow();
        hosts.check(&store);
        assert_eq!((cut(&mut host_a), cut(&mut host_b)), (None, None), "both tokens are good");
        assert!(store.remove("a").unwrap());
        hosts.check(&store);
        assert_eq!(host_a.cut().await, Cut::TokenRemoved);
        assert_eq!(cut(&mut host_b), None, "only the removed one");
        // `add` again issues a new token: the host holding the old one goes too.
        store.add("b", 2).unwrap();
        hosts.check(&store);
        assert_eq!(host_b.cut().await, Cut::TokenRemoved);
        // A host leaves the list when it goes.
        drop(host_a);
        assert_eq!(hosts.count(), 1);
        drop(host_b);
        assert_eq!(hosts.count(), 0);
    }

    #[tokio::test]
    async fn a_second_host_with_a_name_cuts_the_first_and_only_it() {
        let (_dir, store, a, b) = store_with_a_and_b();
        let hosts = Arc::new(Hosts::default());
        let mut first = hosts.join("a", &a);
        let other = hosts.join("b", &b);
        let mut second = hosts.join("a", &a);
        assert_eq!(first.cut().await, Cut::Replaced);
        assert_eq!(Cut::Replaced.reason(), "another host connected with this name");
        assert_eq!(
            (second.cut.borrow().is_none(), other.cut.borrow().is_none()),
            (true, true),
            "the newcomer and b stay"
        );
        // The replaced one leaving does not take the newcomer's place.
        drop(first);
        assert_eq!(hosts.count(), 2);
        let mut third = hosts.join("a", &a);
        assert_eq!(second.cut().await, Cut::Replaced);
        assert!(third.cut.borrow().is_none() && other.cut.borrow().is_none());
        // A removed token still cuts whoever holds it now.
        assert!(store.remove("a").unwrap());
        hosts.check(&store);
        assert_eq!(third.cut().await, Cut::TokenRemoved);
        assert!(other.cut.borrow().is_none());
    }
}
