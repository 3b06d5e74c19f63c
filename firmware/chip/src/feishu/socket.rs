//! The long connection on a byte stream (TLS on the chip, plain TCP against a local fake in the
//! tests): the handshake, then [`Conn`] fed what is read, its frames written back at once.

use alloc::string::String;
use alloc::vec::Vec;

use embedded_io_async::{Read, Write};

use super::conn::{self, Action, Conn, WsUrl};
use super::{Access, ClientConfig};

/// Bytes read from the stream at a time.
const PIECE: usize = 1024;

/// An open long connection on `S`.
pub struct Socket<S> {
    io: S,
    conn: Conn,
    /// What came after the handshake's head, fed with the first read.
    early: Vec<u8>,
}

fn io_error<E: core::fmt::Debug>(what: &str, e: E) -> String {
    alloc::format!("the long connection {what} ({e:?})")
}

/// Runs the handshake for `url` on `io` with the client `key` (16 random bytes in base64).
pub async fn open<S: Read + Write>(
    mut io: S,
    url: &WsUrl,
    key: &str,
    config: ClientConfig,
    now_ms: u64,
    random: u64,
) -> Result<Socket<S>, String> {
    io.write_all(conn::handshake_request(url, key).as_bytes()).await.map_err(|e| io_error("closed", e))?;
    io.flush().await.map_err(|e| io_error("closed", e))?;
    let mut buf = Vec::new();
    let mut piece = [0u8; 256];
    loop {
        if let Some(end) = conn::handshake_answer(&buf, key)? {
            let early = buf.split_off(end);
            let conn = Conn::new(url.service, config, now_ms, random);
            return Ok(Socket { io, conn, early });
        }
        // Never past the head's bound: the handshake answer is small.
        let room = (conn::MAX_HEAD_BYTES - buf.len()).min(piece.len());
        match io.read(&mut piece[..room]).await {
            Ok(0) => return Err("Feishu closed the long connection during its handshake".into()),
            Ok(n) => buf.extend_from_slice(&piece[..n]),
            Err(e) => return Err(io_error("failed during the handshake", e)),
        }
    }
}

impl<S: Read + Write> Socket<S> {
    pub fn conn(&self) -> &Conn {
        &self.conn
    }

    /// Sends a ping when due; `Err` when the connection is to be closed (silent too long, or the
    /// write failed).
    pub async fn tick(&mut self, now_ms: u64) -> Result<(), String> {
        match self.conn.poll(now_ms) {
            Some(Action::Send(bytes)) => self.write(&bytes).await,
            Some(Action::Close(why)) => Err(why),
            _ => Ok(()),
        }
    }

    /// Reads once (waiting for the server) and handles what came: acks and pongs are written
    /// here; turns and drops are returned. `Err` when the connection is over.
    pub async fn read(&mut self, now_ms: u64, access: &Access) -> Result<Vec<Action>, String> {
        let mut actions = Vec::new();
        if self.early.is_empty() {
            let mut piece = [0u8; PIECE];
            let n = self.io.read(&mut piece).await.map_err(|e| io_error("failed", e))?;
            if n == 0 {
                return Err("Feishu closed the long connection".into());
            }
            self.conn.feed(&piece[..n], now_ms, access, &mut actions);
        } else {
            let early = core::mem::take(&mut self.early);
            self.conn.feed(&early, now_ms, access, &mut actions);
        }
        let mut rest = Vec::new();
        let mut closed = None;
        for a in actions {
            match a {
                Action::Send(bytes) => self.write(&bytes).await?,
                Action::Close(why) => closed = Some(why),
                other => rest.push(other),
            }
        }
        // The turns before a close still run: their events were acknowledged.
        match closed {
            Some(why) if rest.is_empty() => Err(why),
            Some(why) => {
                rest.push(Action::Close(why));
                Ok(rest)
            }
            None => Ok(rest),
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.io.write_all(bytes).await.map_err(|e| io_error("closed while writing", e))?;
        self.io.flush().await.map_err(|e| io_error("closed while writing", e))
    }

    /// The stream, the connection and the bytes read past the handshake's head: what
    /// [`duplex::run`](super::duplex::run) takes once the stream is split.
    pub fn into_parts(self) -> (S, Conn, Vec<u8>) {
        (self.io, self.conn, self.early)
    }

    /// The stream back (to close it).
    pub fn into_inner(self) -> S {
        self.io
    }
}
