//! The chat connection on compio: the stream split into two handles on one socket
//! (compio's `TcpStream::into_split`), a reader task and a writer task on the worker's
//! runtime. The reader reads commands with an owned buffer, runs each through the
//! shared `Session`, and queues the replies in the connection's [`Outbox`]; the writer
//! alone writes, taking everything queued (replies, replay, the seam, live lines from
//! any worker) in one buffer.
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
//! write (dropping a compio operation cancels it on the ring) and shuts the socket down
//! both ways (`two_task::shut_down`; compio's own `shutdown` is `SHUT_WR` alone): that
//! completes the reader's read with end of stream, and the reader leaves the rooms, as
//! in srv-tokio-uring.
//!
//! Why not compio's `CancelToken`, its API for stopping operations from elsewhere (this
//! server used it until issue 53): read in compio-runtime 0.12.6, a future run
//! `with_cancel(token)` would register each operation it submits that does not complete
//! at once, which on io_uring is every one (`Submit::poll` calls `CancelToken::register`),
//! and the token keeps each registration, a weak reference to the operation in a
//! `HashSet` that also keeps the operation's allocation alive, until `cancel()` empties
//! it: a reader under one token for the connection's life would pay a hash insert and
//! keep an allocation per read. In the built server it paid nothing, and cancelled
//! nothing: the token reaches `Submit::poll` through the waker (compio's `ExtWaker`),
//! which compio recognises by comparing the waker's vtable with its own, function pointer
//! by function pointer, and this build has two copies of `ExtWaker::drop` (one in
//! compio-runtime, one inlined where `with_cancel` is polled), so the comparison fails,
//! `get_cancel` finds no token, and no read was ever registered (a debugger counted no
//! call of `register` over 50 reads, and 100,000 reads grew the server by nothing). A
//! cut stopped the read only when the client closed. Shutting the socket down stops it
//! at once and costs nothing per read.

use std::io;
use std::sync::Arc;

use compio::buf::BufResult;
use compio::io::{AsyncRead, AsyncWriteExt};
use compio::net::TcpStream;
use launch::{Count, Counters, Tally};
use proto::chat::{LineBuffer, MAX_LINE};
use proto::echo::READ_BUF;
use service::offload::{BlockingPool, HubCalls, Job, Op};
use service::outbox::two_task::{self, Ended, Outbox, handle_lines, shut_down};
use service::race::{First, first};

/// The rooms every chat connection of the server shares, across all runtimes.
pub(crate) type Rooms = service::offload::Rooms<Outbox>;

/// A connection's hub calls: inline, or on the runtime's blocking pool with
/// `--fsync always` (the crate docs say why).
type Calls = HubCalls<Outbox, Pool>;

/// The thread pool of the worker's compio driver, through `compio::runtime::spawn_blocking`.
#[derive(Debug, Clone, Copy)]
struct Pool;

impl BlockingPool for Pool {
    async fn run<R: Send + 'static>(&self, job: impl Job<R>) -> Option<R> {
        compio::runtime::spawn_blocking(job).await.ok()
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
    let (mut reader, writer) = stream.into_split();
    let outbox = Outbox::new(rooms.max_pending);
    let writer = compio::runtime::spawn(write_out(writer, outbox.clone(), counters.tally()));
    let mut calls = Calls::new(rooms, &outbox, Pool);
    let read = read_commands(&mut reader, &mut calls, &outbox, tally).await;
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
    stream: &mut TcpStream,
    calls: &mut Calls,
    outbox: &Outbox,
    tally: &mut Tally,
) -> io::Result<()> {
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut buf = Vec::with_capacity(READ_BUF);
    let mut out = Vec::new();
    loop {
        buf.clear();
        let BufResult(read, back) = stream.read(buf).await;
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
async fn write_out(mut stream: TcpStream, outbox: Outbox, mut tally: Tally) -> io::Result<()> {
    let batch = Vec::with_capacity(READ_BUF);
    let write = async |batch| write_or_cut(&mut stream, &outbox, batch).await;
    let counted = |n| tally.add(Count::BytesOut, n as u64);
    let Ended::Stopped(result) = two_task::write_out(&outbox, batch, write, counted).await else {
        return Ok(());
    };
    // A cut or a failed write: stop the reader too. Shutting the socket down completes
    // its read (and an abandoned write) at once, and tells the client.
    shut_down(&stream);
    result
}

/// Writes `batch` whole, unless the connection is cut meanwhile: then the write (to a
/// client that does not read) is abandoned and `None` returned.
async fn write_or_cut(
    stream: &mut TcpStream,
    outbox: &Outbox,
    batch: Vec<u8>,
) -> Option<(io::Result<()>, Vec<u8>)> {
    let mut write = std::pin::pin!(stream.write_all(batch));
    loop {
        match first(&mut write, outbox.writer_notified()).await {
            First::A(BufResult(result, back)) => return Some((result, back)),
            First::B(()) if outbox.is_cut() => return None,
            First::B(()) => {}
        }
    }
}
