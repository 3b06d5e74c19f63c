//! The long connection with its reader and its writer running at once: what the ESP32 task runs
//! on the two halves of its TLS session after [`socket::open`](super::socket::open).
//!
//! Why two halves and not one `select` around a read with the ping timer: embedded-tls's `read`
//! is not cancel-safe (a record's header is read into a local of the future, so dropping a read
//! in the middle of a record loses those bytes and the stream is garbage from there on). Here the
//! read is never dropped while the connection lives: the reader loop only ever waits on the
//! socket (and on room for what it hands on), and the pings, acks and pongs are written by the
//! writer loop, which waits on the timer or on frames queued by the reader, both cancel-safe.
//! The two loops run in one task and share [`Conn`] and the queue through `RefCell`s, never
//! borrowed across an `.await`.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::future::{Future, poll_fn};
use core::task::{Poll, Waker};

use embassy_futures::select::{Either, select};
use embedded_io_async::{Read, Write};

use super::Access;
use super::conn::{Action, Conn};

/// Frames (acks, pongs) waiting for the writer. Each is one small frame; a reader that gets
/// ahead of the writer waits for room instead of growing the queue.
pub const QUEUED: usize = 8;
/// Bytes read from the socket at a time.
const PIECE: usize = 1024;

/// The board's clock as the writer needs it: the time, and a wait until a time (cancel-safe:
/// the writer drops it when a frame is queued first).
pub trait Clock {
    fn now_ms(&self) -> u64;
    fn at(&self, ms: u64) -> impl Future<Output = ()>;
}

/// What the two loops share.
struct Shared {
    conn: RefCell<Conn>,
    queue: RefCell<VecDeque<Vec<u8>>>,
    /// The writer waiting for a frame, or the reader waiting for room.
    writer: Cell<Option<Waker>>,
    reader: Cell<Option<Waker>>,
}

impl Shared {
    fn wake(cell: &Cell<Option<Waker>>) {
        if let Some(w) = cell.take() {
            w.wake();
        }
    }

    async fn push(&self, frame: Vec<u8>) {
        poll_fn(|cx| {
            if self.queue.borrow().len() < QUEUED {
                Poll::Ready(())
            } else {
                self.reader.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
        .await;
        self.queue.borrow_mut().push_back(frame);
        Self::wake(&self.writer);
    }

    async fn queued(&self) {
        poll_fn(|cx| {
            if self.queue.borrow().is_empty() {
                self.writer.set(Some(cx.waker().clone()));
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await
    }

    fn pop(&self) -> Option<Vec<u8>> {
        let frame = self.queue.borrow_mut().pop_front();
        Self::wake(&self.reader);
        frame
    }
}

/// Runs the open connection `conn` (with `early`, the bytes that came after the handshake's
/// head) on `reader` and `writer` until it ends; returns why it ended. Turns and drops go to
/// `hand_on` in the order they came; while it waits (a full turn queue), pings still go out.
pub async fn run<R: Read, W: Write, C: Clock>(
    reader: R,
    writer: W,
    conn: Conn,
    early: Vec<u8>,
    access: &Access,
    clock: &C,
    hand_on: impl AsyncFnMut(Action),
) -> String {
    let shared = Shared {
        conn: RefCell::new(conn),
        queue: RefCell::new(VecDeque::new()),
        writer: Cell::new(None),
        reader: Cell::new(None),
    };
    match select(read_loop(reader, early, access, clock, &shared, hand_on), write_loop(writer, clock, &shared)).await {
        Either::First(why) | Either::Second(why) => why,
    }
}

async fn read_loop<R: Read, C: Clock>(
    mut reader: R,
    early: Vec<u8>,
    access: &Access,
    clock: &C,
    shared: &Shared,
    mut hand_on: impl AsyncFnMut(Action),
) -> String {
    let mut piece = [0u8; PIECE];
    let mut actions = Vec::new();
    shared.conn.borrow_mut().feed(&early, clock.now_ms(), access, &mut actions);
    drop(early);
    loop {
        let mut closed = None;
        for a in actions.drain(..) {
            match a {
                Action::Send(frame) => shared.push(frame).await,
                // The turns before a close still run: their events were acknowledged.
                Action::Close(why) => closed = Some(why),
                other => hand_on(other).await,
            }
        }
        if let Some(why) = closed {
            // What was acknowledged goes out before the connection is dropped.
            poll_fn(|cx| {
                if shared.queue.borrow().is_empty() {
                    Poll::Ready(())
                } else {
                    shared.reader.set(Some(cx.waker().clone()));
                    Poll::Pending
                }
            })
            .await;
            return why;
        }
        let n = match reader.read(&mut piece).await {
            Ok(0) => return "Feishu closed the long connection".into(),
            Ok(n) => n,
            Err(e) => return alloc::format!("the long connection failed ({e:?})"),
        };
        shared.conn.borrow_mut().feed(&piece[..n], clock.now_ms(), access, &mut actions);
    }
}

async fn write_loop<W: Write, C: Clock>(mut writer: W, clock: &C, shared: &Shared) -> String {
    loop {
        while let Some(frame) = shared.pop() {
            if let Err(e) = writer.write_all(&frame).await {
                return alloc::format!("the long connection closed while writing ({e:?})");
            }
        }
        if let Err(e) = writer.flush().await {
            return alloc::format!("the long connection closed while writing ({e:?})");
        }
        let polled = shared.conn.borrow_mut().poll(clock.now_ms());
        match polled {
            Some(Action::Send(ping)) => {
                shared.queue.borrow_mut().push_back(ping);
                continue;
            }
            Some(Action::Close(why)) => return why,
            _ => {}
        }
        let next = shared.conn.borrow().next_ping_ms();
        // Both cancel-safe: a timer, and a look at the queue.
        select(clock.at(next), shared.queued()).await;
    }
}
