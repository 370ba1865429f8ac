//! The chat connection: one task that alone reads and writes its socket. It reads
//! commands into a `LineBuffer`, runs each through the shared `Session`, and
//! writes whatever its [`Outbox`] holds (replies, replay, the seam, live lines of
//! other connections) before it reads again. Between reads it `select!`s on the
//! socket and the outbox, so live lines go out while the client is silent.
//!
//! ```text
//!            ┌───────────── task ──────────────┐
//!  socket ──►│ read ─► Session ─► push_own ─┐  │
//!            │                              ▼  │        offer / push_seam
//!  socket ◄──│ write ◄──── take ◄──────── Outbox ◄────── Hub (other tasks)
//!            └─────────────────────────────────┘
//! ```

use std::io;
use std::sync::Arc;

use launch::{Count, Tally};
use proto::chat::{LineBuffer, MAX_LINE};
use service::offload::{BlockingPool, HubCalls, Job, Op};
use service::session::Flow;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::outbox::Outbox;

/// The rooms every chat connection of the server shares.
pub(crate) type Rooms = service::offload::Rooms<Outbox>;

/// A connection's hub calls: inline, or on Tokio's blocking pool with
/// `--fsync always` (the crate docs say why).
type Calls = HubCalls<Outbox, TokioPool>;

/// Tokio's blocking pool, where an offloaded hub call runs.
#[derive(Debug, Clone, Copy)]
struct TokioPool;

impl BlockingPool for TokioPool {
    async fn run<R: Send + 'static>(&self, job: impl Job<R>) -> Option<R> {
        tokio::task::spawn_blocking(job).await.ok()
    }
}

/// Serves one chat connection until the client leaves, a line is too long, or
/// it is cut off as a slow subscriber; then leaves every room it joined.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    rooms: &Arc<Rooms>,
    tally: &mut Tally,
) -> io::Result<()> {
    let outbox = Outbox::new(rooms.max_pending);
    let mut calls = Calls::new(rooms, &outbox, TokioPool);
    let result = converse(stream, &mut calls, &outbox, tally).await;
    let left = calls.call(Op::Close, &mut Vec::new()).await;
    outbox.close();
    if outbox.is_cut() {
        tally.add(Count::Cut, 1);
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
    tally: &mut Tally,
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
            tally.add(Count::BytesOut, batch.len() as u64);
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
                handle_lines(&mut lines, calls, &mut out, outbox, tally).await?
            }
            Phase::Reading { lines_left: false } => {
                let event = tokio::select! {
                    biased;
                    () = outbox.notified() => None,
                    read = stream.read(lines.spare()) => Some(read),
                };
                match event {
                    // Live lines, a seam, or a cut: the top of the loop sees which.
                    None => phase,
                    Some(Ok(0)) => Phase::Ending,
                    Some(Ok(n)) => {
                        lines.commit(n);
                        tally.add(Count::BytesIn, n as u64);
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
    tally: &mut Tally,
) -> io::Result<Phase> {
    while let Some(line) = lines.next_line() {
        tally.add(Count::Lines, 1);
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
        let event = tokio::select! {
            biased;
            written = stream.write(bytes) => Some(written),
            () = outbox.notified() => None,
        };
        match event {
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
