//! The chat connection on tokio-uring: two tasks on the worker's runtime sharing
//! the socket through an `Rc`. The reader reads commands with an owned buffer,
//! runs each through the shared `Session`, and queues the replies in the
//! connection's [`Outbox`]; the writer alone writes, taking everything queued
//! (replies, replay, the seam, live lines from any worker) in one buffer.
//!
//! ```text
//!  socket ──► reader: read ─► Session ─► push_own ─┐
//!                                                   ▼        offer / push_seam
//!  socket ◄── writer: write ◄────── next ◄────── Outbox ◄──── Hub (any worker)
//! ```
//!
//! Why two tasks, where srv-tokio uses one: an io_uring read cannot be abandoned
//! the way an epoll readiness wait can. Dropping its future leaves the operation
//! in the kernel, and bytes it reads are lost, so a single task could not `select!`
//! between "a command arrived" and "a live line is queued". The reader keeps one
//! read in flight at all times; the writer waits on the outbox.
//!
//! A cut-off (a live line past `--max-pending`) wakes the writer, which drops its
//! write and shuts the socket down: that completes the reader's read, and the
//! reader leaves the rooms.

use std::io;
use std::net::Shutdown;
use std::rc::Rc;
use std::sync::Arc;

use launch::{Count, Counters, Tally};
use proto::chat::{LineBuffer, MAX_LINE};
use proto::echo::READ_BUF;
use service::offload::{BlockingPool, HubCalls, Job, Op};
use service::outbox::two_task::{self, Ended, handle_lines};
use tokio_uring::net::TcpStream;

use crate::outbox::Outbox;

/// The rooms every chat connection of the server shares, across all runtimes.
pub(crate) type Rooms = service::offload::Rooms<Outbox>;

/// A connection's hub calls: inline, or on the runtime's blocking pool with
/// `--fsync always` (the crate docs say why).
type Calls = HubCalls<Outbox, Pool>;

/// The blocking pool of the Tokio runtime under tokio-uring.
#[derive(Debug, Clone, Copy)]
struct Pool;

impl BlockingPool for Pool {
    async fn run<R: Send + 'static>(&self, job: impl Job<R>) -> Option<R> {
        tokio::task::spawn_blocking(job).await.ok()
    }
}

/// Serves one chat connection until the client leaves, a line is too long, the
/// socket fails, or it is cut off as a slow subscriber; then leaves every room
/// it joined and waits for its writer to finish. The writer task counts into a
/// tally of its own.
pub(crate) async fn serve(
    stream: TcpStream,
    rooms: &Arc<Rooms>,
    counters: &Counters,
    tally: &mut Tally,
) -> io::Result<()> {
    let stream = Rc::new(stream);
    let outbox = Outbox::new(rooms.max_pending);
    let writer = tokio_uring::spawn(write_out(
        Rc::clone(&stream),
        outbox.clone(),
        counters.tally(),
    ));
    let mut calls = Calls::new(rooms, &outbox, Pool);
    let read = read_commands(&stream, &mut calls, &outbox, tally).await;
    let left = calls.call(Op::Close, &mut Vec::new()).await;
    outbox.reader_done();
    let wrote = writer
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the writer task failed")));
    if outbox.is_cut() {
        tally.add(Count::Cut, 1);
    }
    read.and(wrote).and(left.map(drop))
}

/// The reader task's loop: one read in flight, lines handled in order, replies
/// queued (waiting for room when the client is behind).
async fn read_commands(
    stream: &TcpStream,
    calls: &mut Calls,
    outbox: &Outbox,
    tally: &mut Tally,
) -> io::Result<()> {
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut buf = vec![0u8; READ_BUF];
    let mut out = Vec::new();
    loop {
        let (read, back) = stream.read(buf).await;
        buf = back;
        let n = match read {
            // A cut, or a writer that failed, shut the socket down under us.
            _ if outbox.is_cut() => return Ok(()),
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) => return Err(e),
        };
        tally.add(Count::BytesIn, n as u64);
        // One copy of the few bytes read: the ring needs a buffer it owns, and
        // lines are split in the LineBuffer.
        lines.extend_from_slice(&buf[..n]);
        if !handle_lines(&mut lines, calls, outbox, &mut out, || {
            tally.add(Count::Lines, 1)
        })
        .await?
        {
            return Ok(());
        }
    }
}

/// The writer task: writes what the outbox holds, one batch at a time, until
/// the reader is done and everything is written, the socket fails, or a cut.
async fn write_out(stream: Rc<TcpStream>, outbox: Outbox, mut tally: Tally) -> io::Result<()> {
    let batch = Vec::with_capacity(READ_BUF);
    let write = async |batch| {
        let write = stream.write_all(batch);
        tokio::pin!(write);
        // Wait for the write, unless the connection is cut meanwhile: then the
        // write (to a client that does not read) is abandoned.
        loop {
            tokio::select! {
                biased;
                done = &mut write => break Some(done),
                () = outbox.writer_notified() => if outbox.is_cut() { break None },
            }
        }
    };
    let counted = |n| tally.add(Count::BytesOut, n as u64);
    let Ended::Stopped(result) = two_task::write_out(&outbox, batch, write, counted).await else {
        return Ok(());
    };
    // A cut or a failed write: stop the reader too. Shutting the socket down
    // completes its read (and an abandoned write) at once.
    let _ = stream.shutdown(Shutdown::Both);
    result
}
