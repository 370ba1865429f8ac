//! The chat connection on monoio: the stream split into monoio's owned halves (its
//! `Splitable::into_split`), a reader task and a writer task on the worker's runtime.
//! The reader reads commands with an owned buffer, runs each through the shared
//! `Session`, and queues the replies in the connection's [`Outbox`]; the writer alone
//! writes, taking everything queued (replies, replay, the seam, live lines from any
//! worker) in one buffer.
//!
//! ```text
//!  socket ──► reader: read ─► Session ─► push_own ─┐
//!                                                   ▼        offer / push_seam
//!  socket ◄── writer: write ◄────── next ◄────── Outbox ◄──── Hub (any worker)
//! ```
//!
//! Why two tasks: an io_uring read cannot be abandoned the way an epoll readiness wait
//! can (bytes it completes with would be lost), so one task could not wait for "a
//! command arrived" and "a live line is queued" at once. The reader keeps one read in
//! flight; the writer waits on the outbox.
//!
//! A cut-off (a live line past `--max-pending`) wakes the writer, which abandons its
//! write (dropping the operation, which monoio's `async-cancel` cancels on the ring) and
//! shuts the socket down both ways (`two_task::shut_down`; monoio's own `shutdown` is
//! `SHUT_WR` alone): that completes the reader's read with end of stream, and the reader
//! leaves the rooms, as in srv-tokio-uring. monoio's `Canceller` would do it too, but a
//! `cancelable_read` pays for it on every read (a `HashSet` insert of the operation
//! when it is submitted and a remove when it completes, `AssociateGuard`), for a cut that
//! most connections never see.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use launch::{Count, Counters, Tally};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt, OwnedReadHalf, OwnedWriteHalf, Splitable};
use monoio::net::TcpStream;
use proto::chat::{LineBuffer, MAX_LINE};
use proto::echo::READ_BUF;
use service::offload::{BlockingPool, HubCalls, Job, Op};
use service::outbox::two_task::{self, Ended, Outbox, handle_lines, shut_down};

/// The rooms every chat connection of the server shares, across all runtimes.
pub(crate) type Rooms = service::offload::Rooms<Outbox>;

/// A connection's hub calls: inline, or on the runtime's blocking pool with
/// `--fsync always` (the crate docs say why).
type Calls = HubCalls<Outbox, Pool>;

/// The thread pool attached to the worker's runtime, through `monoio::spawn_blocking`.
#[derive(Debug, Clone, Copy)]
struct Pool;

impl BlockingPool for Pool {
    async fn run<R: Send + 'static>(&self, job: impl Job<R>) -> Option<R> {
        monoio::spawn_blocking(job).await.ok()
    }
}

/// Serves one chat connection until the client leaves, a line is too long, the
/// socket fails, or it is cut off as a slow subscriber; then leaves every room
/// it joined and waits for its writer to finish. The writer task counts into a tally of
/// its own.
pub(crate) async fn serve(
    stream: TcpStream,
    rooms: &Arc<Rooms>,
    counters: &Counters,
    tally: &mut Tally,
) -> io::Result<()> {
    // The halves share the socket; the writer keeps its descriptor to shut it down.
    let fd = stream.as_raw_fd();
    let (mut reader, writer) = stream.into_split();
    let outbox = Outbox::new(rooms.max_pending);
    let writer = monoio::spawn(write_out(writer, fd, outbox.clone(), counters.tally()));
    let mut calls = Calls::new(rooms, &outbox, Pool);
    let read = read_commands(&mut reader, &mut calls, &outbox, tally).await;
    let left = calls.call(Op::Close, &mut Vec::new()).await;
    outbox.reader_done();
    let wrote = writer.await;
    if outbox.is_cut() {
        tally.add(Count::Cut, 1);
    }
    read.and(wrote).and(left.map(drop))
}

/// The reader task's loop: one read in flight, lines handled in order, replies
/// queued (waiting for room when the client is behind).
async fn read_commands(
    stream: &mut OwnedReadHalf<TcpStream>,
    calls: &mut Calls,
    outbox: &Outbox,
    tally: &mut Tally,
) -> io::Result<()> {
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut buf = Vec::with_capacity(READ_BUF);
    let mut out = Vec::new();
    loop {
        buf.clear();
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
async fn write_out(
    mut stream: OwnedWriteHalf<TcpStream>,
    fd: RawFd,
    outbox: Outbox,
    mut tally: Tally,
) -> io::Result<()> {
    let batch = Vec::with_capacity(READ_BUF);
    let write = async |batch| {
        let (result, back) = write_or_cut(&mut stream, &outbox, batch).await?;
        Some((result.map(drop), back))
    };
    let counted = |n| tally.add(Count::BytesOut, n as u64);
    let Ended::Stopped(result) = two_task::write_out(&outbox, batch, write, counted).await else {
        return Ok(());
    };
    // A cut or a failed write: stop the reader too. Shutting the socket down completes
    // its read (and an abandoned write) at once, and tells the client. `stream`, this
    // task's half, holds the socket open, so `fd` is still this socket's.
    shut_down(&fd);
    result
}

/// Writes `batch` whole, unless the connection is cut meanwhile: then the write (to a
/// client that does not read) is abandoned and `None` returned.
async fn write_or_cut(
    stream: &mut OwnedWriteHalf<TcpStream>,
    outbox: &Outbox,
    batch: Vec<u8>,
) -> Option<(io::Result<usize>, Vec<u8>)> {
    let mut write = std::pin::pin!(stream.write_all(batch));
    loop {
        monoio::select! {
            biased;
            done = &mut write => return Some(done),
            () = outbox.writer_notified() => if outbox.is_cut() { return None },
        }
    }
}
