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

use launch::Counters;
use proto::chat::{ChatError, LineBuffer, MAX_LINE};
use service::hub::Hub;
use service::session::{Flow, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::outbox::Outbox;

/// The rooms every chat connection of the server shares.
#[derive(Debug)]
pub(crate) struct Rooms {
    pub(crate) hub: Hub<Outbox>,
    /// `--max-pending`: the live output a subscriber may have queued.
    pub(crate) max_pending: usize,
    /// Run hub calls on Tokio's blocking pool instead of inline in the task:
    /// set with `--fsync always`, where an append waits for the disk (the crate
    /// docs say why).
    pub(crate) offload: bool,
}

/// Serves one chat connection until the client leaves, a line is too long, or
/// it is cut off as a slow subscriber; then leaves every room it joined.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    rooms: &Arc<Rooms>,
    counters: &Counters,
) -> io::Result<()> {
    let outbox = Outbox::new(rooms.max_pending);
    let mut calls = HubCalls::new(rooms, &outbox);
    let result = converse(stream, &mut calls, &outbox, counters).await;
    let left = calls.call(Op::Close).await;
    outbox.close();
    if outbox.is_cut() {
        Counters::add(&counters.cut, 1);
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
    calls: &mut HubCalls,
    outbox: &Outbox,
    counters: &Counters,
) -> io::Result<()> {
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut batch = Vec::new();
    let mut phase = Phase::Reading { lines_left: false };
    loop {
        // Everything queued goes out before the next command is read: own
        // output never piles up, and a client that does not read stops being read.
        if let Some(taken) = outbox.take(&mut batch) {
            if !write_batch(stream, &batch, outbox).await? {
                return Ok(());
            }
            Counters::add(&counters.bytes_out, batch.len() as u64);
            outbox.sent(taken, &mut batch);
            continue;
        }
        if outbox.is_cut() {
            return Ok(());
        }
        phase = match phase {
            Phase::Ending => return Ok(()),
            Phase::Replaying => next_phase(calls.call(Op::ReplayMore).await?),
            Phase::Reading { lines_left: true } => {
                handle_lines(&mut lines, calls, counters).await?
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
                        Counters::add(&counters.bytes_in, n as u64);
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
    calls: &mut HubCalls,
    counters: &Counters,
) -> io::Result<Phase> {
    while let Some(line) = lines.next_line() {
        Counters::add(&counters.lines, 1);
        match calls.call(Op::Line(line)).await? {
            Flow::Continue => {}
            flow => return Ok(next_phase(flow)),
        }
    }
    Ok(Phase::Reading { lines_left: false })
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

/// A call on the hub through the connection's session.
#[derive(Debug)]
enum Op<'a> {
    Line(Result<&'a [u8], ChatError>),
    ReplayMore,
    Close,
}

/// [`Op`] with the line held in [`Calls::line`], to move to another thread.
#[derive(Debug)]
enum OwnedOp {
    Line(Result<(), ChatError>),
    ReplayMore,
    Close,
}

/// What a hub call touches besides the hub: kept together so that, with
/// `--fsync always`, it can move to the blocking pool and back.
#[derive(Debug)]
struct Calls {
    session: Session,
    /// The session's replies; emptied into the outbox after every call.
    out: Vec<u8>,
    /// The line being handled, when it has to travel.
    line: Vec<u8>,
}

/// Makes hub calls inline or on the blocking pool, as [`Rooms::offload`] says.
#[derive(Debug)]
struct HubCalls {
    rooms: Arc<Rooms>,
    outbox: Outbox,
    /// `None` only if a call on the blocking pool panicked.
    calls: Option<Calls>,
}

impl HubCalls {
    fn new(rooms: &Arc<Rooms>, outbox: &Outbox) -> Self {
        HubCalls {
            rooms: Arc::clone(rooms),
            outbox: outbox.clone(),
            calls: Some(Calls {
                session: Session::new(&rooms.hub),
                out: Vec::new(),
                line: Vec::new(),
            }),
        }
    }

    /// Runs `op`, then queues the replies it produced behind what the outbox
    /// already holds; a `SAY` under `--fsync always` returns once its `ACK`
    /// (sent after the group commit's sync) is queued.
    async fn call(&mut self, op: Op<'_>) -> io::Result<Flow> {
        let flow = self.call_once(op).await?;
        if flow != Flow::Syncing {
            return Ok(flow);
        }
        let lost = || io::Error::other("a hub call panicked; the session is gone");
        let calls = self.calls.as_mut().ok_or_else(lost)?;
        await_sync(&mut calls.session, &mut calls.out).await;
        self.outbox.push_own(&mut calls.out);
        Ok(Flow::Continue)
    }

    async fn call_once(&mut self, op: Op<'_>) -> io::Result<Flow> {
        let lost = || io::Error::other("a hub call panicked; the session is gone");
        let flow = if self.rooms.offload {
            let mut calls = self.calls.take().ok_or_else(lost)?;
            let owned = match op {
                Op::Line(line) => OwnedOp::Line(line.map(|line| {
                    calls.line.clear();
                    calls.line.extend_from_slice(line);
                })),
                Op::ReplayMore => OwnedOp::ReplayMore,
                Op::Close => OwnedOp::Close,
            };
            let (rooms, outbox) = (Arc::clone(&self.rooms), self.outbox.clone());
            let (calls, flow) = tokio::task::spawn_blocking(move || {
                let flow = calls.run_owned(owned, &rooms.hub, &outbox);
                (calls, flow)
            })
            .await
            .map_err(|_| lost())?;
            self.outbox.push_own(&mut self.calls.insert(calls).out);
            flow
        } else {
            let calls = self.calls.as_mut().ok_or_else(lost)?;
            let flow = run(
                &mut calls.session,
                &mut calls.out,
                op,
                &self.rooms.hub,
                &self.outbox,
            );
            self.outbox.push_own(&mut calls.out);
            flow
        };
        Ok(flow)
    }
}

impl Calls {
    fn run_owned(&mut self, op: OwnedOp, hub: &Hub<Outbox>, outbox: &Outbox) -> Flow {
        let Calls { session, out, line } = self;
        let op = match op {
            OwnedOp::Line(result) => Op::Line(result.map(|()| line.as_slice())),
            OwnedOp::ReplayMore => Op::ReplayMore,
            OwnedOp::Close => Op::Close,
        };
        run(session, out, op, hub, outbox)
    }
}

/// After [`Flow::Syncing`]: waits for the group commit's sync of the `SAY`
/// (`--fsync always`; the sync runs on the commit thread and this task yields,
/// so the runtime serves every other connection meanwhile), then puts the
/// `ACK`, or the error, in `out`.
async fn await_sync(session: &mut Session, out: &mut Vec<u8>) {
    let result = match session.take_pending() {
        Some(pending) => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            pending.on_done(move |result| {
                let _ = tx.send(result);
            });
            rx.await
                .unwrap_or_else(|_| Err(io::Error::other("the commit thread is gone")))
        }
        None => Err(io::Error::other("no sync to wait for")),
    };
    session.synced(result, out);
}

fn run(
    session: &mut Session,
    out: &mut Vec<u8>,
    op: Op<'_>,
    hub: &Hub<Outbox>,
    outbox: &Outbox,
) -> Flow {
    match op {
        Op::Line(line) => session.handle_line(line, hub, outbox, out),
        Op::ReplayMore => session.replay_more(hub, outbox, out),
        Op::Close => {
            session.close(hub);
            Flow::Close
        }
    }
}
