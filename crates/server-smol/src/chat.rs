//! The chat connection on smol: one task that alone reads and writes its socket,
//! the shape of srv-tokio's. It reads commands into a `LineBuffer`, runs each
//! through the shared `Session` (by way of `service::offload::HubCalls`), and
//! writes whatever its [`Outbox`] holds (replies, replay, the seam, live lines of
//! other connections) before it reads again. Between reads it races the socket
//! against the outbox with `future::or` (smol's `select!`, first future first), so
//! live lines go out while the client is silent. A read on an `Async` socket waits
//! for readiness, so the losing read is dropped without losing bytes.
//!
//! ```text
//!            ┌───────────── task ──────────────┐
//!  socket ──►│ read ─► Session ─► push_own ─┐  │
//!            │                              ▼  │        offer / push_seam
//!  socket ◄──│ write ◄──── take ◄──────── Outbox ◄────── Hub (any thread)
//!            └─────────────────────────────────┘
//! ```

use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use proto::chat::{LineBuffer, MAX_LINE};
use service::offload::{BlockingPool, HubCalls, Job, Op};
use service::session::Flow;
use smol::future::FutureExt;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::TcpStream;

use crate::count::Count;
use crate::outbox::Outbox;

/// The rooms every chat connection of the server shares.
pub(crate) type Rooms = service::offload::Rooms<Outbox>;

/// A connection's hub calls: inline, or on smol's blocking pool with
/// `--fsync always` (the crate docs say why).
type Calls = HubCalls<Outbox, Unblock>;

/// smol's blocking pool (`smol::unblock`, the `blocking` crate's threads).
#[derive(Debug, Clone, Copy)]
struct Unblock;

impl BlockingPool for Unblock {
    async fn run<R: Send + 'static>(&self, job: impl Job<R>) -> Option<R> {
        // `unblock` would carry a panic over to this task; the session is lost
        // either way, and an error ends only this connection.
        smol::unblock(move || std::panic::catch_unwind(AssertUnwindSafe(job)).ok()).await
    }
}

/// Serves one chat connection until the client leaves, a line is too long, or
/// it is cut off as a slow subscriber; then leaves every room it joined.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    rooms: &Arc<Rooms>,
    count: &Count,
) -> io::Result<()> {
    let outbox = Outbox::new(rooms.max_pending);
    let mut calls = Calls::new(rooms, &outbox, Unblock);
    let result = converse(stream, &mut calls, &outbox, count).await;
    let left = calls.call(Op::Close, &mut Vec::new()).await;
    outbox.close();
    if outbox.is_cut() {
        count.cut();
    }
    result.and(left.map(drop))
}

/// What the connection does next, once its outbox is written.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Reading commands; `lines_left` if the line buffer may still hold
    /// complete lines not yet handled.
    Reading { lines_left: bool },
    /// A `JOIN` is replaying: the next batch comes before any further line.
    Replaying,
    /// Write what is queued, then close (EOF, or a line too long).
    Ending,
}

async fn converse(
    stream: &mut TcpStream,
    calls: &mut Calls,
    outbox: &Outbox,
    count: &Count,
) -> io::Result<()> {
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut batch = Vec::new();
    let mut out = Vec::new();
    let mut phase = Phase::Reading { lines_left: false };
    loop {
        // Everything queued goes out before the next command is read: own
        // output never piles up, and a client that does not read stops being read.
        if let Some(taken) = outbox.take(&mut batch) {
            if !write_batch(stream, &batch, outbox).await? {
                return Ok(());
            }
            count.bytes_out(batch.len());
            outbox.sent(taken, &mut batch);
            continue;
        }
        if outbox.is_cut() {
            return Ok(());
        }
        phase = match phase {
            Phase::Ending => return Ok(()),
            Phase::Replaying => next_phase(call(calls, Op::ReplayMore, &mut out, outbox).await?),
            Phase::Reading { lines_left: true } => {
                handle_lines(&mut lines, calls, &mut out, outbox, count).await?
            }
            Phase::Reading { lines_left: false } => {
                let woken = async {
                    outbox.notified().await;
                    None
                };
                let read = async { Some(stream.read(lines.spare()).await) };
                match woken.or(read).await {
                    // Live lines, a seam, or a cut: the top of the loop sees which.
                    None => phase,
                    Some(Ok(0)) => Phase::Ending,
                    Some(Ok(n)) => {
                        lines.commit(n);
                        count.bytes_in(n);
                        Phase::Reading { lines_left: true }
                    }
                    Some(Err(e)) => return Err(e),
                }
            }
        };
    }
}

/// Handles the complete lines in `lines`, stopping early at a `JOIN` that
/// replays or a line that closes the connection.
async fn handle_lines(
    lines: &mut LineBuffer,
    calls: &mut Calls,
    out: &mut Vec<u8>,
    outbox: &Outbox,
    count: &Count,
) -> io::Result<Phase> {
    while let Some(line) = lines.next_line() {
        count.line();
        match call(calls, Op::Line(line), out, outbox).await? {
            Flow::Continue => {}
            flow => return Ok(next_phase(flow)),
        }
    }
    Ok(Phase::Reading { lines_left: false })
}

/// Makes a hub call and queues the replies it produced behind what the outbox
/// already holds; a `SAY` under `--fsync always` returns once its `ACK` is queued.
async fn call(
    calls: &mut Calls,
    op: Op<'_>,
    out: &mut Vec<u8>,
    outbox: &Outbox,
) -> io::Result<Flow> {
    let flow = calls.call(op, out).await?;
    outbox.push_own(out);
    Ok(flow)
}

fn next_phase(flow: Flow) -> Phase {
    match flow {
        Flow::Continue => Phase::Reading { lines_left: true },
        Flow::Replaying => Phase::Replaying,
        // HubCalls::call waits the sync out before it returns.
        Flow::Syncing => Phase::Reading { lines_left: true },
        Flow::Close => Phase::Ending,
    }
}

/// Writes `bytes`; returns false, leaving the rest, if the connection is cut
/// meanwhile (a client that does not read leaves the write waiting, and its
/// live lines keep coming until they pass the limit).
async fn write_batch(
    stream: &mut TcpStream,
    mut bytes: &[u8],
    outbox: &Outbox,
) -> io::Result<bool> {
    while !bytes.is_empty() {
        let written = async { Some(stream.write(bytes).await) };
        let woken = async {
            outbox.notified().await;
            None
        };
        match written.or(woken).await {
            Some(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Some(Ok(n)) => bytes = &bytes[n..],
            Some(Err(e)) => return Err(e),
            // More was queued; it goes out after this batch.
            None if !outbox.is_cut() => {}
            None => return Ok(false),
        }
    }
    Ok(true)
}
