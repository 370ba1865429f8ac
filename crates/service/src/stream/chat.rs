//! The chat connection on a futures-io stream: one task that alone reads and writes
//! its socket, the shape of srv-tokio's. It reads commands into a `LineBuffer`, runs
//! each through the shared `Session` (by way of [`HubCalls`]), and writes whatever
//! its [`Outbox`] holds (replies, replay, the seam, live lines of other connections)
//! before it reads again. Between reads it races the socket against the outbox
//! ([`first`], the outbox first), so live lines go out while the client is silent.
//! A futures-io read waits for readiness (smol's `Async`) or keeps its pending
//! operation in the stream, not the future (glommio), so the losing read is dropped
//! without losing bytes: which is why one task will do here where the owned-buffer
//! runtimes need two ([`crate::outbox::two_task`]).
//!
//! ```text
//!            ┌───────────── task ──────────────┐
//!  socket ──►│ read ─► Session ─► push_own ─┐  │
//!            │                              ▼  │        offer / push_seam
//!  socket ◄──│ write ◄──── take ◄──────── Outbox ◄────── Hub (any thread)
//!            └─────────────────────────────────┘
//! ```

use std::io;
use std::sync::Arc;

use futures_io::{AsyncRead, AsyncWrite};
use proto::chat::{LineBuffer, MAX_LINE};

use super::{Counts, read, write};
use crate::offload::{BlockingPool, HubCalls, Op};
use crate::outbox::one_task::Outbox;
use crate::race::{First, first};
use crate::session::Flow;

/// The rooms every chat connection of a server shares.
pub type Rooms = crate::offload::Rooms<Outbox>;

/// Serves one chat connection until the client leaves, a line is too long, or
/// it is cut off as a slow subscriber; then leaves every room it joined. Hub
/// calls run inline, or on `pool` with `--fsync always`.
pub async fn serve<S, P>(
    stream: &mut S,
    rooms: &Arc<Rooms>,
    pool: P,
    count: &mut impl Counts,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
    P: BlockingPool,
{
    let outbox = Outbox::new(rooms.max_pending);
    let mut calls = HubCalls::new(rooms, &outbox, pool);
    let mut conn = Conn {
        calls: &mut calls,
        outbox: &outbox,
        count,
    };
    let result = conn.converse(stream).await;
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

/// What one connection's steps share.
struct Conn<'a, P: BlockingPool, C> {
    calls: &'a mut HubCalls<Outbox, P>,
    outbox: &'a Outbox,
    count: &'a mut C,
}

impl<P: BlockingPool, C: Counts> Conn<'_, P, C> {
    async fn converse<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
    ) -> io::Result<()> {
        let mut lines = LineBuffer::new(MAX_LINE);
        let mut batch = Vec::new();
        let mut out = Vec::new();
        let mut phase = Phase::Reading { lines_left: false };
        loop {
            // Everything queued goes out before the next command is read: own
            // output never piles up, and a client that does not read stops being read.
            if let Some(taken) = self.outbox.take(&mut batch) {
                if !self.write_batch(stream, &batch).await? {
                    return Ok(());
                }
                self.count.bytes_out(batch.len());
                self.outbox.sent(taken, &mut batch);
                continue;
            }
            if self.outbox.is_cut() {
                return Ok(());
            }
            phase = match phase {
                Phase::Ending => return Ok(()),
                Phase::Replaying => next_phase(self.call(Op::ReplayMore, &mut out).await?),
                Phase::Reading { lines_left: true } => {
                    self.handle_lines(&mut lines, &mut out).await?
                }
                Phase::Reading { lines_left: false } => {
                    match first(self.outbox.notified(), read(stream, lines.spare())).await {
                        // Live lines, a seam, or a cut: the top of the loop sees which.
                        First::A(()) => phase,
                        First::B(Ok(0)) => Phase::Ending,
                        First::B(Ok(n)) => {
                            lines.commit(n);
                            self.count.bytes_in(n);
                            Phase::Reading { lines_left: true }
                        }
                        First::B(Err(e)) => return Err(e),
                    }
                }
            };
        }
    }

    /// Handles the complete lines in `lines`, stopping early at a `JOIN` that
    /// replays or a line that closes the connection.
    async fn handle_lines(
        &mut self,
        lines: &mut LineBuffer,
        out: &mut Vec<u8>,
    ) -> io::Result<Phase> {
        while let Some(line) = lines.next_line() {
            self.count.line();
            match self.call(Op::Line(line), out).await? {
                Flow::Continue => {}
                flow => return Ok(next_phase(flow)),
            }
        }
        Ok(Phase::Reading { lines_left: false })
    }

    /// Makes a hub call and queues the replies it produced behind what the outbox
    /// already holds; a `SAY` under `--fsync always` returns once its `ACK` is queued.
    async fn call(&mut self, op: Op<'_>, out: &mut Vec<u8>) -> io::Result<Flow> {
        let flow = self.calls.call(op, out).await?;
        self.outbox.push_own(out);
        Ok(flow)
    }

    /// Writes `bytes`; returns false, leaving the rest, if the connection is cut
    /// meanwhile (a client that does not read leaves the write waiting, and its
    /// live lines keep coming until they pass the limit).
    async fn write_batch<S: AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        mut bytes: &[u8],
    ) -> io::Result<bool> {
        while !bytes.is_empty() {
            match first(write(stream, bytes), self.outbox.notified()).await {
                First::A(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                First::A(Ok(n)) => bytes = &bytes[n..],
                First::A(Err(e)) => return Err(e),
                // More was queued; it goes out after this batch.
                First::B(()) if !self.outbox.is_cut() => {}
                First::B(()) => return Ok(false),
            }
        }
        Ok(true)
    }
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

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::super::tests::{Duplex, Seen, ready};
    use super::*;
    use crate::hub::Hub;
    use crate::log::Fsync;
    use crate::offload::Job;

    /// Runs hub calls inline: what a pool does, without the thread.
    struct Inline;

    impl BlockingPool for Inline {
        fn run<R: Send + 'static>(&self, job: impl Job<R>) -> impl Future<Output = Option<R>> {
            std::future::ready(Some(job()))
        }
    }

    #[test]
    fn replies_in_order_and_counts_lines_and_bytes() {
        let rooms = Arc::new(Rooms {
            hub: Hub::open(None, Fsync::Never).unwrap(),
            max_pending: 1 << 20,
            offload: false,
        });
        let mut stream = Duplex {
            input: b"PING 1\nPING 2\nPING 3\n".to_vec(),
            chunk: 9,
            ..Duplex::default()
        };
        let mut seen = Seen::default();
        ready(serve(&mut stream, &rooms, Inline, &mut seen)).unwrap();
        assert_eq!(stream.output, b"PONG 1\nPONG 2\nPONG 3\n");
        assert_eq!(seen.lines, 3);
        assert_eq!(seen.bytes_in, 21);
        assert_eq!(seen.bytes_out, stream.output.len());
        assert_eq!(seen.cuts, 0);
    }
}
